#include "cache/disk_tier.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "cache/cache_dir.h"
#include "common/rendezvous.h"

namespace lakecache {
namespace {

std::string TierName(const std::vector<DiskCacheConfig>& dirs) {
  std::string name = "disk:";
  for (size_t i = 0; i < dirs.size(); ++i) name += (i > 0 ? "," : "") + dirs[i].path;
  return name;
}

}  // namespace

Result<std::unique_ptr<DiskTier>> DiskTier::Open(const std::vector<DiskCacheConfig>& dirs,
                                                 std::string_view policy, uint64_t seed,
                                                 uint64_t write_behind) {
  if (dirs.empty()) return Status::InvalidArgument("disk tier: no cache directories");
  std::unique_ptr<DiskTier> tier(new DiskTier(TierName(dirs)));
  for (const DiskCacheConfig& config : dirs) {
    LC_ASSIGN_OR_RETURN(std::unique_ptr<CacheDir> dir,
                        CacheDir::Open(config, policy, seed, &tier->counters_));
    tier->dirs_.push_back(std::move(dir));
    tier->dir_nodes_.push_back({RendezvousSeed(config.path), static_cast<double>(config.capacity)});
  }
  if (write_behind > 0) {
    tier->write_behind_ = write_behind;
    tier->writer_ = std::thread([t = tier.get()] { t->WriterLoop(); });
  }
  return tier;
}

DiskTier::DiskTier(std::string name) : name_(std::move(name)) {}

DiskTier::~DiskTier() {
  if (!writer_.joinable()) return;
  {
    MutexLock lock(&queue_mu_);
    stopping_ = true;
  }
  queue_cv_.SignalAll();
  writer_.join();  // the writer drains the queue before it exits
}

void DiskTier::WriterLoop() {
  queue_mu_.Lock();
  for (;;) {
    while (!stopping_ && queue_order_.empty()) queue_cv_.Wait(&queue_mu_);
    if (queue_order_.empty()) break;  // stopping, and nothing left to write
    BlockKey key = queue_order_.front();
    queue_order_.pop_front();
    auto it = queued_.find(key);
    if (it == queued_.end()) continue;  // erased while queued
    QueuedWrite write = it->second;     // stays queued (and readable) while it is written
    writing_ = true;
    queue_mu_.Unlock();
    // Erased or evicted meanwhile: the directory no longer holds this generation, so it writes
    // nothing or removes the file it wrote.
    (void)Home(key).Write(write.request, *write.block, write.gen);
    queue_mu_.Lock();
    writing_ = false;
    it = queued_.find(key);
    if (it != queued_.end() && it->second.gen == write.gen) {
      queued_bytes_ -= it->second.block->size();
      queued_.erase(it);
    }
    queue_cv_.SignalAll();
  }
  queue_mu_.Unlock();
}

void DiskTier::Flush() {
  if (!writer_.joinable()) return;
  MutexLock lock(&queue_mu_);
  while (!queue_order_.empty() || writing_) queue_cv_.Wait(&queue_mu_);
}

BlockRef DiskTier::Queued(const BlockKey& key) const {
  if (write_behind_ == 0) return nullptr;
  MutexLock lock(&queue_mu_);
  auto it = queued_.find(key);
  return it == queued_.end() ? nullptr : it->second.block;
}

BlockRef DiskTier::Pin(const BlockKey& key, bool count_access) {
  (void)count_access;
  BlockRef block = Queued(key);  // a queued block is in memory: no copy needed
  if (block != nullptr) counters_.Add(counters_.hits);
  return block;
}

// Rendezvous hashing weighted by capacity: a directory wins a share of keys proportional to it.
CacheDir& DiskTier::Home(const BlockKey& key) const {
  if (dirs_.size() == 1) return *dirs_[0];
  return *dirs_[RendezvousPick(StableKeyHash(key), dir_nodes_)];
}

Result<BlockRef> DiskTier::Get(const BlockKey& key) {
  if (BlockRef block = Queued(key)) {
    counters_.Add(counters_.hits);
    return block;
  }
  for (const auto& dir : dirs_) {
    Result<BlockRef> block = dir->Get(key);
    if (block.ok()) {
      counters_.Add(counters_.hits);
      return block;
    }
  }
  counters_.Add(counters_.misses);
  return DiskBlockNotHeld();
}

Result<size_t> DiskTier::Read(const BlockKey& key, uint64_t offset, std::span<char> dst,
                              bool count_access) {
  if (BlockRef block = Queued(key)) {
    counters_.Add(counters_.hits);
    if (offset >= block->size()) return size_t{0};
    size_t n = std::min<size_t>(dst.size(), block->size() - offset);
    std::memcpy(dst.data(), block->data() + offset, n);
    return n;
  }
  for (const auto& dir : dirs_) {
    Result<size_t> n = dir->Read(key, offset, dst, count_access);
    if (n.ok()) {
      counters_.Add(counters_.hits);
      return n;
    }
  }
  counters_.Add(counters_.misses);
  return DiskBlockNotHeld();
}

bool DiskTier::Insert(const BlockRequest& request, const BlockRef& block) {
  if (block == nullptr) return false;
  if (Contains(request.key)) return true;  // a concurrent insert got here first
  CacheDir& home = Home(request.key);
  std::optional<uint64_t> gen = home.Admit(request, block->size());
  if (!gen) return false;  // declined (counted), or another insert of it is under way
  if (write_behind_ > 0) {
    MutexLock lock(&queue_mu_);
    if (queued_bytes_ + block->size() <= write_behind_ && !stopping_) {
      auto [it, added] = queued_.try_emplace(request.key);
      // Not added: an earlier admission of it, evicted while queued; this one replaces it (the
      // writer skips a key queued twice once its write is done).
      if (!added) queued_bytes_ -= it->second.block->size();
      it->second = QueuedWrite{request, block, *gen};
      queued_bytes_ += block->size();
      queue_order_.push_back(request.key);
      queue_cv_.SignalAll();
      return true;
    }
  }
  return home.Write(request, *block, *gen);
}

std::string DiskTier::FilePath(const BlockKey& key) {
  if (Queued(key) != nullptr) return "";  // not written yet
  for (const auto& dir : dirs_) {
    if (dir->Touch(key)) {
      counters_.Add(counters_.hits);
      return dir->PathFor(key);
    }
  }
  return "";
}

void DiskTier::Touch(const BlockKey& key) {
  for (const auto& dir : dirs_) {
    if (dir->Touch(key)) return;
  }
}

bool DiskTier::Contains(const BlockKey& key) const {
  if (Queued(key) != nullptr) return true;
  for (const auto& dir : dirs_) {
    if (dir->Contains(key)) return true;
  }
  return false;
}

bool DiskTier::ForEachKey(const std::function<void(const BlockKey&)>& fn) const {
  {
    MutexLock lock(&queue_mu_);
    for (const auto& [key, write] : queued_) fn(key);
  }
  for (const auto& dir : dirs_) dir->ForEachKey(fn);
  return true;
}

void DiskTier::Erase(const BlockKey& key) {
  if (write_behind_ > 0) {
    MutexLock lock(&queue_mu_);
    auto it = queued_.find(key);
    if (it != queued_.end()) {
      queued_bytes_ -= it->second.block->size();
      queued_.erase(it);  // the writer skips it, or erases the file it was writing
    }
  }
  for (const auto& dir : dirs_) dir->Erase(key);
}

TierStats DiskTier::Stats() const {
  TierStats stats;
  stats.tier = name_;
  counters_.CopyTo(&stats);
  for (const auto& dir : dirs_) {
    stats.used_bytes += dir->used_bytes();
    stats.capacity_bytes += dir->capacity_bytes();
    stats.blocks += dir->blocks();
  }
  return stats;
}

}  // namespace lakecache
