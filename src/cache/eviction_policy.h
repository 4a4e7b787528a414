// EvictionPolicy: decides which blocks a tier keeps within its byte capacity.
//
// A tier reports every reader access: OnHit when it holds the block, OnMiss when it does not (after
// the block was fetched). OnMiss decides whether the tier admits the block and names the blocks the
// tier must drop so that the admitted bytes never exceed capacity. The policy tracks only keys and
// sizes; the tier owns the bytes. Report an access once per block per reading stream, not once per
// small read, and never for read-ahead (prefetched blocks are reported when actually read), or the
// frequency counts lose their meaning. Implementations are thread-safe; the default's OnHit takes
// no global lock (LruPolicy, the baseline, serialises every call on one mutex).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cache/block_key.h"
#include "common/result.h"

namespace lakecache {

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;

  virtual std::string_view name() const = 0;

  // A reader read `key`, which the tier holds.
  virtual void OnHit(const BlockKey& key) = 0;

  // A reader wanted `key` (of `bytes`), which the tier does not hold. Returns true when the tier
  // should admit it; appends to `evict` the blocks the tier must drop first (possibly some even
  // when the new block is not admitted). REQUIRES: key is not currently admitted.
  virtual bool OnMiss(const BlockKey& key, uint64_t bytes, std::vector<BlockKey>* evict) = 0;

  // Makes the policy track `key` as admitted without counting an access (a tier rebuilding its
  // index after a restart). Appends victims like OnMiss when capacity is exceeded.
  virtual void Restore(const BlockKey& key, uint64_t bytes, std::vector<BlockKey>* evict) = 0;

  // The tier dropped `key` for a reason of its own (corrupt file, explicit free). No-op if unknown.
  virtual void Remove(const BlockKey& key) = 0;

  virtual uint64_t capacity_bytes() const = 0;
  virtual uint64_t used_bytes() const = 0;
};

// When a policy that tests blocks for admission (tinylfu) runs the test on a missed block. LRU
// admits every block that fits, at OnMiss, either way.
enum class Admission {
  // After a short stay in a recency window: OnMiss admits the block into the window, and a later
  // OnMiss may name it in `evict` when it leaves the window and loses. For a tier where storing a
  // block costs nothing (memory).
  kAfterWindow,
  // At OnMiss, against the block it would replace: OnMiss's answer is the admission decision, so a
  // block that loses is never stored. For a tier where storing costs (a disk: a write); the tier
  // above it (memory) serves as its recency window.
  kOnMiss,
};

// Names accepted by MakeEvictionPolicy: "lru", and "tinylfu" (the default: frequency-gated
// admission in front of a CLOCK main region, scan-resistant; see tinylfu_policy.h and
// docs/benchmarks.md).
inline constexpr std::string_view kDefaultEvictionPolicy = "tinylfu";

// Logs at debug the blocks `tier` ("memory", "disk:/var/cache/lakecache") drops to make room, one
// line per eviction; formats nothing unless debug is on.
void LogEvictions(std::string_view tier, const std::vector<BlockKey>& victims);

// `seed` makes randomised parts (sketch hashing) repeatable. Unknown names are kInvalidArgument.
Result<std::unique_ptr<EvictionPolicy>> MakeEvictionPolicy(
    std::string_view name, uint64_t capacity_bytes, uint64_t seed = 0,
    Admission admission = Admission::kAfterWindow);

}  // namespace lakecache
