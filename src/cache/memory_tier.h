// MemoryTier: the top cache tier, blocks held in process memory within a hard byte budget.
//
// The index is split into shards, each a mutex and a hash map, so hits on different blocks never
// contend and no lookup takes a tier-wide lock. Get hands out the stored BlockRef itself (zero
// copy); an evicted block stays valid for readers still holding it. The EvictionPolicy decides what
// is admitted and what is dropped; inserts and erases are serialised so that the bytes held never
// exceed the capacity. Thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "cache/cache_tier.h"
#include "cache/eviction_policy.h"
#include "cache/shm_arena.h"
#include "common/mutex.h"

namespace lakecache {

class MemoryTier : public CacheTier {
 public:
  // A tier of `capacity_bytes` with the policy named `policy` (see MakeEvictionPolicy). With an
  // `arena`, admitted blocks are kept in its shared memory and published to the node's mounts
  // (a block that does not fit there is kept privately).
  static Result<std::unique_ptr<MemoryTier>> Create(uint64_t capacity_bytes,
                                                    std::string_view policy, uint64_t seed = 0,
                                                    std::shared_ptr<ShmArena> arena = nullptr);

  // REQUIRES: policy != nullptr; the tier uses policy->capacity_bytes() as its budget.
  explicit MemoryTier(std::unique_ptr<EvictionPolicy> policy,
                      std::shared_ptr<ShmArena> arena = nullptr);

  const std::string& name() const override { return name_; }
  Result<BlockRef> Get(const BlockKey& key) override;
  Result<size_t> Read(const BlockKey& key, uint64_t offset, std::span<char> dst,
                      bool count_access) override;
  BlockRef Pin(const BlockKey& key, bool count_access) override {
    return Lookup(key, count_access);
  }
  BlockRef SharedCopy(const BlockKey& key) override;
  std::shared_ptr<Block> NewBlock(size_t size) override {
    return arena_ != nullptr ? arena_->NewBlock(size) : nullptr;
  }
  bool resident() const override { return true; }
  bool Insert(const BlockRequest& request, const BlockRef& block) override;
  void Touch(const BlockKey& key) override;
  bool Contains(const BlockKey& key) const override;
  bool ForEachKey(const std::function<void(const BlockKey&)>& fn) const override;
  bool HasRoom(uint64_t bytes) const override;
  void Erase(const BlockKey& key) override;
  TierStats Stats() const override;

 private:
  static constexpr size_t kShards = 64;

  // Cache-line aligned so that threads locking neighbouring shards do not share a line. Hits and
  // misses are counted here, under the lock already held, rather than in one shared atomic that
  // every hit on every shard would contend on.
  struct alignas(64) Shard {
    mutable Mutex mu;
    std::unordered_map<BlockKey, BlockRef, BlockKeyHash> blocks GUARDED_BY(mu);
    uint64_t hits GUARDED_BY(mu) = 0;
    uint64_t misses GUARDED_BY(mu) = 0;
  };

  Shard& ShardFor(const BlockKey& key) const;
  // The block if held, counting the hit or miss and telling the policy of a hit.
  BlockRef Lookup(const BlockKey& key, bool count_access = true);
  // Stores or drops one block in its shard, keeping used_bytes_ and blocks_ in step.
  void Store(const BlockKey& key, const BlockRef& block) REQUIRES(mutate_mu_);
  bool Drop(const BlockKey& key) REQUIRES(mutate_mu_);  // true if it was held

  const std::string name_ = "memory";
  mutable std::array<Shard, kShards> shards_;
  std::unique_ptr<EvictionPolicy> policy_;
  const std::shared_ptr<ShmArena> arena_;  // null: blocks stay private
  // Serialises the policy decision with the erasing and storing it asks for: two interleaved
  // inserts could otherwise store a block the other one's policy call already chose to evict.
  // Lock order: mutate_mu_, then a shard's mu.
  Mutex mutate_mu_;
  std::atomic<uint64_t> used_bytes_{0};
  std::atomic<uint64_t> blocks_{0};
  TierCounters counters_;  // all but hits and misses, which the shards count
};

}  // namespace lakecache
