// The parts of a BlockStore its two files share (block_store.cc: lookups, reads and fetches;
// block_store_staging.cc: read-ahead into staging): a fetch in flight, a staged block, and the
// counters. Internal to cache/.
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <memory>
#include <optional>

#include "cache/block_store.h"
#include "common/mutex.h"

namespace lakecache {

// One fetch in progress: the leader fills `result`, everyone else waits for it.
struct BlockStore::Flight {
  bool prefetch = false;  // led by Prefetch: the block goes to staging, not to the tiers
  Mutex mu;
  CondVar done;
  std::optional<Result<BlockRef>> result GUARDED_BY(mu);

  void Finish(const Result<BlockRef>& r) {
    {
      MutexLock lock(&mu);
      result.emplace(r);
    }
    done.SignalAll();
  }
  Result<BlockRef> Wait() {
    MutexLock lock(&mu);
    while (!result.has_value()) done.Wait(&mu);
    return *result;
  }
};

// A prefetched block nobody has read yet; its bytes are reserved in the budget.
struct BlockStore::Staged {
  BlockRef block;
  std::chrono::steady_clock::time_point since;
  int from_tier = -1;      // the tier it was loaded from; -1: fetched from the source
  bool admitting = false;  // a reader took it and is offering it to the tiers: not dropped
};

struct BlockStore::Counters {
  // Bucket i counts fetches of [2^i, 2^(i+1)) microseconds; the last one also everything longer.
  static constexpr size_t kLatencyBuckets = 40;

  std::atomic<uint64_t> fetches{0}, fetch_errors{0}, fetched_bytes{0}, singleflight_waits{0};
  std::atomic<uint64_t> prefetches{0}, prefetch_used{0}, prefetch_dropped{0}, prefetch_refused{0};
  std::atomic<uint64_t> latency_us_total{0};
  std::array<std::atomic<uint64_t>, kLatencyBuckets> latency_us_log2{};
  // Bytes readers got from each tier (by index), a staged block counted for the tier it was
  // loaded from.
  std::unique_ptr<std::atomic<uint64_t>[]> hit_bytes;

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

}  // namespace lakecache
