#include "cache/block_store.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <utility>

#include "cache/disk_tier.h"
#include "cache/memory_tier.h"

namespace lakecache {

// One fetch in progress: the leader fills `result`, everyone else waits for it.
struct BlockStore::Flight {
  std::mutex mu;
  std::condition_variable done;
  std::optional<Result<BlockRef>> result;  // GUARDED_BY(mu)

  void Finish(const Result<BlockRef>& r) {
    {
      std::lock_guard lock(mu);
      result.emplace(r);
    }
    done.notify_all();
  }
  Result<BlockRef> Wait() {
    std::unique_lock lock(mu);
    done.wait(lock, [this] { return result.has_value(); });
    return *result;
  }
};

struct BlockStore::Counters {
  // Bucket i counts fetches of [2^i, 2^(i+1)) microseconds; the last one also everything longer.
  static constexpr size_t kLatencyBuckets = 40;

  std::atomic<uint64_t> fetches{0}, fetch_errors{0}, fetched_bytes{0}, singleflight_waits{0};
  std::atomic<uint64_t> latency_us_total{0};
  std::array<std::atomic<uint64_t>, kLatencyBuckets> latency_us_log2{};

  static void Add(std::atomic<uint64_t>& c, uint64_t n = 1) {
    c.fetch_add(n, std::memory_order_relaxed);
  }
  void AddLatency(std::chrono::steady_clock::duration d) {
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(d).count();
    uint64_t v = us > 0 ? static_cast<uint64_t>(us) : 0;
    size_t bucket = v == 0 ? 0 : static_cast<size_t>(std::bit_width(v) - 1);
    Add(latency_us_log2[std::min(bucket, kLatencyBuckets - 1)]);
    Add(latency_us_total, v);
  }
};

namespace {

uint64_t Load(const std::atomic<uint64_t>& c) { return c.load(std::memory_order_relaxed); }

// "block 3 (bytes 12582912+4194304) of train/shard-0001.tfrecord"
std::string Describe(const BlockRequest& request) {
  return "block " + std::to_string(request.key.index) + " (bytes " +
         std::to_string(request.offset) + "+" + std::to_string(request.length) + ") of " +
         request.object_key;
}

// Copies the clamped range [offset, offset + dst.size()) of `block` into dst.
size_t CopyRange(const Block& block, uint64_t offset, std::span<char> dst) {
  if (offset >= block.size()) return 0;
  size_t n = std::min<uint64_t>(dst.size(), block.size() - offset);
  std::memcpy(dst.data(), block.data() + offset, n);
  return n;
}

}  // namespace

Result<std::unique_ptr<BlockStore>> BlockStore::Open(const CacheConfig& config) {
  std::vector<std::unique_ptr<CacheTier>> tiers;
  auto memory = MemoryTier::Create(config.memory_capacity, config.policy);
  if (!memory.ok()) return memory.status().WithContext("cache.policy");
  tiers.push_back(std::move(*memory));
  if (!config.disks.empty()) {
    auto disk = DiskTier::Open(config.disks, config.policy);
    if (!disk.ok()) return disk.status().WithContext("cache.disks");
    tiers.push_back(std::move(*disk));
  }
  return std::make_unique<BlockStore>(std::move(tiers));
}

BlockStore::BlockStore(std::vector<std::unique_ptr<CacheTier>> tiers)
    : tiers_(std::move(tiers)), counters_(std::make_unique<Counters>()) {}

BlockStore::~BlockStore() = default;

BlockRef BlockStore::Lookup(const BlockRequest& request) {
  for (size_t i = 0; i < tiers_.size(); ++i) {
    // Any tier error (a failing disk) is a miss there: the block can still come from elsewhere.
    Result<BlockRef> hit = tiers_[i]->Get(request.key);
    if (!hit.ok()) continue;
    TouchBelow(i, request.key);
    for (size_t above = 0; above < i; ++above) tiers_[above]->Insert(request, *hit);
    return std::move(hit).value();
  }
  return nullptr;
}

Result<BlockRef> BlockStore::Get(const BlockRequest& request, const BlockSource& source) {
  if (BlockRef block = Lookup(request)) return block;
  return Fetch(request, source);
}

Result<size_t> BlockStore::Read(const BlockRequest& request, uint64_t offset, std::span<char> dst,
                                const BlockSource& source) {
  for (size_t i = 0; i < tiers_.size(); ++i) {
    Result<size_t> hit = tiers_[i]->Read(request.key, offset, dst, !request.repeat_access);
    if (!hit.ok()) continue;
    if (!request.repeat_access) TouchBelow(i, request.key);
    return hit;
  }
  LC_ASSIGN_OR_RETURN(BlockRef block, Fetch(request, source));
  return CopyRange(*block, offset, dst);
}

void BlockStore::TouchBelow(size_t tier, const BlockKey& key) {
  for (size_t below = tier + 1; below < tiers_.size(); ++below) tiers_[below]->Touch(key);
}

Result<BlockRef> BlockStore::Fetch(const BlockRequest& request, const BlockSource& source) {
  std::shared_ptr<Flight> flight;
  bool leader = false;
  {
    std::lock_guard lock(flights_mu_);
    auto [it, inserted] = flights_.try_emplace(request.key);
    if (inserted) it->second = std::make_shared<Flight>();
    flight = it->second;
    leader = inserted;
  }
  if (!leader) {
    Counters::Add(counters_->singleflight_waits);
    return flight->Wait();
  }
  Result<BlockRef> result = LeadFetch(request, source);
  {
    std::lock_guard lock(flights_mu_);
    flights_.erase(request.key);
  }
  flight->Finish(result);
  return result;
}

Result<BlockRef> BlockStore::LeadFetch(const BlockRequest& request, const BlockSource& source) {
  // A flight that ended between our tier lookups and now has stored the block already (tiers are
  // filled before a flight is removed), so look again before calling the source a second time.
  if (Contains(request.key)) {
    if (BlockRef block = Lookup(request)) return block;  // unless evicted meanwhile
  }
  LC_ASSIGN_OR_RETURN(BlockRef block, CallSource(request, source));
  // Each tier's policy decides; a tier that cannot store it (disk full) only counts that.
  for (const auto& tier : tiers_) tier->Insert(request, block);
  return block;
}

Result<BlockRef> BlockStore::CallSource(const BlockRequest& request, const BlockSource& source) {
  auto start = std::chrono::steady_clock::now();
  std::optional<Result<BlockRef>> fetched;
  try {
    fetched.emplace(source(request));
  } catch (const std::exception& e) {
    // Waiters must be released whatever the source does; an exception is a bug in it.
    fetched.emplace(Status::Internal(Describe(request) + ": block source threw: " + e.what()));
  } catch (...) {
    fetched.emplace(Status::Internal(Describe(request) + ": block source threw"));
  }
  counters_->AddLatency(std::chrono::steady_clock::now() - start);
  Counters::Add(counters_->fetches);
  Result<BlockRef>& result = *fetched;
  if (result.ok()) {
    const BlockRef& block = *result;
    uint64_t got = block == nullptr ? 0 : block->size();
    if (block == nullptr || got != request.length) {
      result =
          Status::Internal(Describe(request) + ": block source returned " + std::to_string(got) +
                           " bytes, expected " + std::to_string(request.length));
    }
  }
  if (!result.ok()) {
    Counters::Add(counters_->fetch_errors);
    return result.status();
  }
  Counters::Add(counters_->fetched_bytes, request.length);
  return std::move(result);
}

bool BlockStore::Contains(const BlockKey& key) const {
  return std::any_of(tiers_.begin(), tiers_.end(),
                     [&key](const auto& tier) { return tier->Contains(key); });
}

void BlockStore::Erase(const BlockKey& key) {
  for (const auto& tier : tiers_) tier->Erase(key);
}

BlockStoreStats BlockStore::Stats() const {
  BlockStoreStats stats;
  for (const auto& tier : tiers_) stats.tiers.push_back(tier->Stats());
  const Counters& c = *counters_;
  stats.fetches = Load(c.fetches);
  stats.fetch_errors = Load(c.fetch_errors);
  stats.fetched_bytes = Load(c.fetched_bytes);
  stats.singleflight_waits = Load(c.singleflight_waits);
  for (const auto& bucket : c.latency_us_log2) stats.fetch_latency_us_log2.push_back(Load(bucket));
  stats.fetch_latency_us_total = Load(c.latency_us_total);
  return stats;
}

}  // namespace lakecache
