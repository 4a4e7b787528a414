#include "cache/memory_tier.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

namespace lakecache {
namespace {

// Shared so that a miss, frequent when a lower tier serves the block, allocates nothing.
const Status& MissStatus() {
  static const Status miss = Status::NotFound("memory tier: block not held");
  return miss;
}

}  // namespace

Result<std::unique_ptr<MemoryTier>> MemoryTier::Create(uint64_t capacity_bytes,
                                                       std::string_view policy, uint64_t seed,
                                                       std::shared_ptr<ShmArena> arena) {
  LC_ASSIGN_OR_RETURN(std::unique_ptr<EvictionPolicy> p,
                      MakeEvictionPolicy(policy, capacity_bytes, seed));
  return std::make_unique<MemoryTier>(std::move(p), std::move(arena));
}

MemoryTier::MemoryTier(std::unique_ptr<EvictionPolicy> policy, std::shared_ptr<ShmArena> arena)
    : policy_(std::move(policy)), arena_(std::move(arena)) {}

MemoryTier::Shard& MemoryTier::ShardFor(const BlockKey& key) const {
  // The low bits of BlockKeyHash pick the hash map bucket; mixing keeps shard and bucket choice
  // apart.
  size_t h = BlockKeyHash()(key);
  return shards_[(h ^ (h >> 29)) * 0x9E3779B97F4A7C15ull >> 58];
}

BlockRef MemoryTier::Lookup(const BlockKey& key, bool count_access) {
  BlockRef block;
  {
    Shard& shard = ShardFor(key);
    MutexLock lock(&shard.mu);
    auto it = shard.blocks.find(key);
    if (it == shard.blocks.end()) {
      ++shard.misses;
      return nullptr;
    }
    ++shard.hits;
    block = it->second;
  }
  if (count_access) policy_->OnHit(key);
  return block;
}

BlockRef MemoryTier::SharedCopy(const BlockKey& key) {
  if (arena_ == nullptr) return nullptr;
  Shard& shard = ShardFor(key);
  MutexLock lock(&shard.mu);
  auto it = shard.blocks.find(key);
  if (it == shard.blocks.end() || it->second->fd() < 0) return nullptr;
  return it->second;
}

Result<BlockRef> MemoryTier::Get(const BlockKey& key) {
  BlockRef block = Lookup(key);
  if (block == nullptr) return MissStatus();
  return block;
}

Result<size_t> MemoryTier::Read(const BlockKey& key, uint64_t offset, std::span<char> dst,
                                bool count_access) {
  BlockRef block = Lookup(key, count_access);
  if (block == nullptr) return MissStatus();
  if (offset >= block->size()) return size_t{0};
  size_t n = std::min<uint64_t>(dst.size(), block->size() - offset);
  std::memcpy(dst.data(), block->data() + offset, n);
  return n;
}

bool MemoryTier::Insert(const BlockRequest& request, const BlockRef& block) {
  if (block == nullptr) return false;
  const BlockKey& key = request.key;
  MutexLock lock(&mutate_mu_);
  if (Contains(key)) return true;  // a concurrent promotion got here first
  std::vector<BlockKey> evict;
  bool admit = policy_->OnMiss(key, block->size(), &evict);
  LogEvictions("memory", evict);
  for (const BlockKey& victim : evict) {
    if (Drop(victim)) counters_.Add(counters_.evictions);
  }
  // The budget is the tier's promise, not only the policy's: refuse what would overflow it.
  uint64_t capacity = policy_->capacity_bytes();
  if (admit && used_bytes_.load(std::memory_order_relaxed) + block->size() > capacity) {
    policy_->Remove(key);
    admit = false;
  }
  if (!admit) {
    counters_.Add(counters_.rejected);
    return false;
  }
  BlockRef shared = arena_ != nullptr ? arena_->Publish(key, block) : nullptr;
  Store(key, shared != nullptr ? shared : block);
  counters_.Add(counters_.inserts);
  return true;
}

void MemoryTier::Store(const BlockKey& key, const BlockRef& block) {
  Shard& shard = ShardFor(key);
  MutexLock lock(&shard.mu);
  shard.blocks.emplace(key, block);
  used_bytes_.fetch_add(block->size(), std::memory_order_relaxed);
  blocks_.fetch_add(1, std::memory_order_relaxed);
}

bool MemoryTier::Drop(const BlockKey& key) {
  BlockRef dropped;  // released after the shard lock: freeing 4 MiB is not free
  Shard& shard = ShardFor(key);
  {
    MutexLock lock(&shard.mu);
    auto it = shard.blocks.find(key);
    if (it == shard.blocks.end()) return false;
    dropped = std::move(it->second);
    shard.blocks.erase(it);
  }
  if (arena_ != nullptr) arena_->Unpublish(*dropped);
  used_bytes_.fetch_sub(dropped->size(), std::memory_order_relaxed);
  blocks_.fetch_sub(1, std::memory_order_relaxed);
  return true;
}

void MemoryTier::Touch(const BlockKey& key) {
  if (Contains(key)) policy_->OnHit(key);
}

bool MemoryTier::Contains(const BlockKey& key) const {
  Shard& shard = ShardFor(key);
  MutexLock lock(&shard.mu);
  return shard.blocks.contains(key);
}

bool MemoryTier::ForEachKey(const std::function<void(const BlockKey&)>& fn) const {
  for (Shard& shard : shards_) {
    MutexLock lock(&shard.mu);
    for (const auto& [key, block] : shard.blocks) fn(key);
  }
  return true;
}

bool MemoryTier::HasRoom(uint64_t bytes) const {
  return used_bytes_.load(std::memory_order_relaxed) + bytes <= policy_->capacity_bytes();
}

void MemoryTier::Erase(const BlockKey& key) {
  MutexLock lock(&mutate_mu_);
  if (Drop(key)) policy_->Remove(key);
}

TierStats MemoryTier::Stats() const {
  TierStats stats;
  stats.tier = name_;
  counters_.CopyTo(&stats);
  stats.hits = stats.misses = 0;
  for (const Shard& shard : shards_) {
    MutexLock lock(&shard.mu);
    stats.hits += shard.hits;
    stats.misses += shard.misses;
  }
  stats.used_bytes = used_bytes_.load(std::memory_order_relaxed);
  stats.capacity_bytes = policy_->capacity_bytes();
  stats.blocks = blocks_.load(std::memory_order_relaxed);
  return stats;
}

}  // namespace lakecache
