// DiskTier: the cache tier over local disk directories (SSDs); it survives a restart.
//
// Each block lives in one of the directories (a CacheDir), chosen by rendezvous hashing of its key
// weighted by the directories' capacities, so adding a directory moves only its share of blocks.
// Each directory has its own eviction policy, sharded index and free-space floor. Open rebuilds the
// indexes from the files. Every read is verified; a corrupt file is deleted and reported as a miss.
// Thread-safe: a hit takes one index shard lock per directory probed, and the policy's.
//
// Admission comes first: Insert asks the home directory's policy (which decides on miss, see
// Admission::kOnMiss) before the block is queued or written, so a declined block costs no write.
// Write-behind: with a write_behind budget, Insert queues an admitted block (pinned) for a writer
// thread and returns at once, so a reader never waits for the disk; queued blocks are served from
// memory until written. When queued bytes would pass the budget, Insert writes inline instead
// (back-pressure: no block offered is dropped). Flush waits for the queue; the destructor flushes,
// so a clean shutdown leaves every accepted block on disk.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cache/cache_tier.h"
#include "common/config.h"
#include "common/mutex.h"
#include "common/rendezvous.h"

namespace lakecache {

class CacheDir;

class DiskTier : public CacheTier {
 public:
  // Creates (or reopens) the directories `dirs`, each with a policy named `policy` (see
  // MakeEvictionPolicy) of that directory's capacity. Blocks left by an earlier run are served
  // again; leftovers it cannot use are removed. Errors name the directory at fault.
  // `write_behind` bounds the bytes queued for the writer thread; 0 writes every block inline.
  static Result<std::unique_ptr<DiskTier>> Open(const std::vector<DiskCacheConfig>& dirs,
                                                std::string_view policy, uint64_t seed = 0,
                                                uint64_t write_behind = 0);
  ~DiskTier() override;

  const std::string& name() const override { return name_; }  // "disk:<path>[,<path>...]"
  Result<BlockRef> Get(const BlockKey& key) override;
  Result<size_t> Read(const BlockKey& key, uint64_t offset, std::span<char> dst,
                      bool count_access) override;
  bool Insert(const BlockRequest& request, const BlockRef& block) override;
  void Touch(const BlockKey& key) override;
  bool Contains(const BlockKey& key) const override;
  bool ForEachKey(const std::function<void(const BlockKey&)>& fn) const override;
  void Erase(const BlockKey& key) override;
  TierStats Stats() const override;
  BlockRef Pin(const BlockKey& key, bool count_access) override;
  void Flush() override;
  std::string FilePath(const BlockKey& key) override;

 private:
  struct QueuedWrite {
    BlockRequest request;
    BlockRef block;
    uint64_t gen = 0;  // of its admission (CacheDir::Admit)
  };

  explicit DiskTier(std::string name);
  // The directory a new block goes to (rendezvous hashing). Blocks found at Open stay where they
  // are even if the configuration changed since, so lookups probe every directory.
  CacheDir& Home(const BlockKey& key) const;

  const std::string name_;
  std::vector<std::unique_ptr<CacheDir>> dirs_;
  std::vector<RendezvousNode> dir_nodes_;  // seeded by path: stable across reorderings
  TierCounters counters_;                  // updated by the CacheDirs too

  BlockRef Queued(const BlockKey& key) const EXCLUDES(queue_mu_);
  void WriterLoop() EXCLUDES(queue_mu_);

  uint64_t write_behind_ = 0;
  mutable Mutex queue_mu_;
  CondVar queue_cv_;  // work arrived, a write finished, or stopping
  // Until written (or erased).
  std::unordered_map<BlockKey, QueuedWrite, BlockKeyHash> queued_ GUARDED_BY(queue_mu_);
  std::deque<BlockKey> queue_order_ GUARDED_BY(queue_mu_);
  uint64_t queued_bytes_ GUARDED_BY(queue_mu_) = 0;
  bool writing_ GUARDED_BY(queue_mu_) = false;
  bool stopping_ GUARDED_BY(queue_mu_) = false;
  std::thread writer_;  // last: started once everything above exists
};

}  // namespace lakecache
