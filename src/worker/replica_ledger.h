// ReplicaLedger: the blocks a worker keeps as replicas of blocks that other workers own (got from
// them for a mount of its host: BlockReader, kReadAsReplica), within a share of its capacity.
// Past the share the oldest replica is erased from the BlockStore, so replicas never hold more
// than their share, and they go before the worker's own blocks: MakeRoom erases the oldest
// replicas while the memory tier has no room for a block the worker is about to fetch for itself.
// A replica the tiers evicted on their own stays listed until its turn comes (erasing it then is
// a no-op), so the listed bytes are an upper bound of what replicas hold. Thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>

#include "cache/block_key.h"
#include "common/mutex.h"

namespace lakecache {

class BlockStore;

class ReplicaLedger {
 public:
  // REQUIRES: `blocks` outlives the ledger.
  ReplicaLedger(BlockStore* blocks, uint64_t capacity) : blocks_(blocks), capacity_(capacity) {}

  // `key` (of `bytes`) is now kept as a replica.
  void Add(const BlockKey& key, uint64_t bytes) EXCLUDES(mu_);
  // Erases the oldest replicas while the memory tier has no room for `bytes` more.
  void MakeRoom(uint64_t bytes) EXCLUDES(mu_);
  bool Contains(const BlockKey& key) const EXCLUDES(mu_);

  uint64_t bytes() const EXCLUDES(mu_);
  size_t count() const EXCLUDES(mu_);
  uint64_t erased() const EXCLUDES(mu_);  // replicas erased to stay in the share or make room

 private:
  // Erases the oldest replica. REQUIRES: one is listed.
  void EraseOldest() REQUIRES(mu_);

  BlockStore* const blocks_;
  const uint64_t capacity_;
  mutable Mutex mu_;
  std::deque<BlockKey> order_ GUARDED_BY(mu_);  // oldest first
  std::unordered_map<BlockKey, uint64_t, BlockKeyHash> sizes_ GUARDED_BY(mu_);
  uint64_t bytes_ GUARDED_BY(mu_) = 0;
  uint64_t erased_ GUARDED_BY(mu_) = 0;
};

}  // namespace lakecache
