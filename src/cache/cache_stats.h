// Counters of a cache tier and of the BlockStore, for metrics and tests.
//
// TierCounters are updated with relaxed atomics from many threads; Snapshot() copies them.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace lakecache {

struct TierStats {
  std::string tier;  // "memory", "disk:/var/cache/lakecache"
  uint64_t hits = 0;
  uint64_t misses = 0;
  // Bytes readers got from this tier (BlockStore counts them; a block read ahead from disk counts
  // whole when a reader takes it).
  uint64_t hit_bytes = 0;
  uint64_t inserts = 0;
  uint64_t rejected = 0;  // blocks the policy declined to admit
  uint64_t evictions = 0;
  uint64_t corrupt_blocks = 0;  // checksum/header mismatches found and removed (disk)
  uint64_t write_errors = 0;    // blocks that could not be written (ENOSPC, I/O errors)
  uint64_t used_bytes = 0;
  uint64_t capacity_bytes = 0;
  uint64_t blocks = 0;
};

struct TierCounters {
  std::atomic<uint64_t> hits{0}, misses{0}, inserts{0}, rejected{0}, evictions{0};
  std::atomic<uint64_t> corrupt_blocks{0}, write_errors{0};

  void Add(std::atomic<uint64_t>& c, uint64_t n = 1) { c.fetch_add(n, std::memory_order_relaxed); }
  // Fills the counter fields of `out` (not tier, bytes or blocks).
  void CopyTo(TierStats* out) const {
    out->hits = hits.load(std::memory_order_relaxed);
    out->misses = misses.load(std::memory_order_relaxed);
    out->inserts = inserts.load(std::memory_order_relaxed);
    out->rejected = rejected.load(std::memory_order_relaxed);
    out->evictions = evictions.load(std::memory_order_relaxed);
    out->corrupt_blocks = corrupt_blocks.load(std::memory_order_relaxed);
    out->write_errors = write_errors.load(std::memory_order_relaxed);
  }
};

}  // namespace lakecache
