// BlockStore: the tiered block cache that readers use: memory on top, then disk directories.
//
// Admission and promotion, inclusive tiers:
//  - A block found in no tier is fetched through the caller's BlockSource, exactly once however
//  many
//    readers miss on it at the same time (single-flight); every waiter gets the same bytes or
//    error. It is then offered to every tier, top first; each tier's policy decides whether to keep
//    it.
//  - A hit in a lower tier is touched there and, on Get, offered to the tiers above (promotion).
//    Read of a range from disk does not promote (it reads only the range).
//  - A tier that fails to store a block (disk full) only counts it; the reader still gets its
//  bytes.
// Thread-safe. A hit takes no global lock: only the tier's shard lock and the policy's.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "cache/block_source.h"
#include "cache/cache_tier.h"
#include "common/config.h"
#include "common/result.h"

namespace lakecache {

struct BlockStoreStats {
  std::vector<TierStats> tiers;  // top first
  uint64_t fetches = 0;          // BlockSource calls
  uint64_t fetch_errors = 0;
  uint64_t fetched_bytes = 0;
  uint64_t singleflight_waits = 0;  // misses that joined a fetch already in flight
  // Fetch latency: count per bucket, bucket i holding latencies in [2^i, 2^(i+1)) microseconds.
  std::vector<uint64_t> fetch_latency_us_log2;
  uint64_t fetch_latency_us_total = 0;
};

class BlockStore {
 public:
  // Builds the tiers of `config` (memory, then each disk directory), rebuilding disk indexes from
  // what the directories hold. Errors name the config key at fault (e.g. an unwritable cache dir).
  static Result<std::unique_ptr<BlockStore>> Open(const CacheConfig& config);

  // Tiers top first. REQUIRES: at least one tier.
  explicit BlockStore(std::vector<std::unique_ptr<CacheTier>> tiers);
  ~BlockStore();

  // The whole block: from the first tier holding it, else fetched through `source`.
  Result<BlockRef> Get(const BlockRequest& request, const BlockSource& source);

  // Copies [offset, offset + dst.size()) of the block into dst (clamped to the block's end).
  Result<size_t> Read(const BlockRequest& request, uint64_t offset, std::span<char> dst,
                      const BlockSource& source);

  bool Contains(const BlockKey& key) const;
  void Erase(const BlockKey& key);
  BlockStoreStats Stats() const;

 private:
  struct Flight;
  // The block from the first tier holding it, touched in the tiers below and offered to the tiers
  // above; nullptr when no tier holds it.
  BlockRef Lookup(const BlockRequest& request);
  void TouchBelow(size_t tier, const BlockKey& key);
  // Single-flight: joins the fetch of request.key in progress, or leads a new one.
  Result<BlockRef> Fetch(const BlockRequest& request, const BlockSource& source);
  // The leader's part: the source call and the tier inserts.
  Result<BlockRef> LeadFetch(const BlockRequest& request, const BlockSource& source);
  // Calls the source, times it, and checks it returned exactly request.length bytes.
  Result<BlockRef> CallSource(const BlockRequest& request, const BlockSource& source);

  std::vector<std::unique_ptr<CacheTier>> tiers_;
  std::mutex flights_mu_;
  // GUARDED_BY(flights_mu_)
  std::unordered_map<BlockKey, std::shared_ptr<Flight>, BlockKeyHash> flights_;
  // Counters: see BlockStoreStats.
  struct Counters;
  std::unique_ptr<Counters> counters_;
};

}  // namespace lakecache
