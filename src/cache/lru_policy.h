// LruPolicy: byte-capacity least-recently-used eviction, the baseline the default is measured
// against.
//
// Admits every block that fits in the capacity, dropping least-recently-used blocks until it does.
// Not scan-resistant: one pass over a dataset larger than the cache flushes it. Thread-safe through
// one mutex, which OnHit takes too (a hit reorders the list), so it is meant for tests and the
// simulator rather than a hot tier.
#pragma once

#include <cstdint>
#include <list>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cache/eviction_policy.h"
#include "common/mutex.h"

namespace lakecache {

class LruPolicy final : public EvictionPolicy {
 public:
  explicit LruPolicy(uint64_t capacity_bytes);

  std::string_view name() const override { return "lru"; }
  void OnHit(const BlockKey& key) override;
  bool OnMiss(const BlockKey& key, uint64_t bytes, std::vector<BlockKey>* evict) override;
  void Restore(const BlockKey& key, uint64_t bytes, std::vector<BlockKey>* evict) override;
  void Remove(const BlockKey& key) override;
  uint64_t capacity_bytes() const override { return capacity_; }
  uint64_t used_bytes() const override;

 private:
  struct Block {
    BlockKey key;
    uint64_t bytes;
  };
  using List = std::list<Block>;

  // Moves `key` to the most-recent end; false when it is not admitted.
  bool TouchLocked(const BlockKey& key) REQUIRES(mu_);
  // Drops least-recently-used blocks until `bytes` more fit, then admits `key` as most recent.
  void InsertLocked(const BlockKey& key, uint64_t bytes, std::vector<BlockKey>* evict)
      REQUIRES(mu_);

  const uint64_t capacity_;
  mutable Mutex mu_;
  List order_ GUARDED_BY(mu_);  // most recent first
  std::unordered_map<BlockKey, List::iterator, BlockKeyHash> index_ GUARDED_BY(mu_);
  uint64_t used_ GUARDED_BY(mu_) = 0;
};

}  // namespace lakecache
