// The node's cache as tiers of a cluster mount's BlockStore: the blocks that the workers on this
// host hold, read where they lie instead of over the network.
//
// - NodeMemoryTier (top, resident): a co-located worker's memory tier, mapped from its shared
//   memory (ShmReader). A hit is a view of the worker's block, anchored while the reply is built:
//   one copy (into the FUSE reply), no checksum pass (memory is trusted), no call to the worker.
//   It keeps nothing itself, and shadows the blocks a co-located worker owns, so the mount's own
//   memory tier never keeps a second copy of them.
// - NodeDiskTier (bottom, not resident): a co-located worker's cache files, opened once (one
//   LocateBlock call per block) and kept open in a bounded cache of descriptors, every read
//   verified against the file's chunk checksums. A file the worker deleted (evicted) is closed
//   within a second, so no deleted file pins the worker's disk.
// Thread-safe.
#pragma once

#include <list>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>

#include "cache/block_file.h"
#include "cache/block_store.h"
#include "cache/cache_tier.h"
#include "cluster_client/cluster_client.h"
#include "common/mutex.h"

namespace lakecache {

class NodeMemoryTier : public CacheTier {
 public:
  explicit NodeMemoryTier(std::shared_ptr<ClusterClient> client) : client_(std::move(client)) {}

  const std::string& name() const override { return name_; }
  Result<BlockRef> Get(const BlockKey& key) override;
  Result<size_t> Read(const BlockKey& key, uint64_t offset, std::span<char> dst,
                      bool count_access) override;
  BlockRef Pin(const BlockKey& key, bool count_access) override;
  bool resident() const override { return true; }
  bool Insert(const BlockRequest&, const BlockRef&) override { return false; }
  void Touch(const BlockKey&) override {}
  bool Contains(const BlockKey& key) const override { return client_->LocalContains(key); }
  void Erase(const BlockKey&) override {}
  bool Shadows(const BlockKey& key) const override { return client_->OwnedLocally(key); }
  std::unique_ptr<ReaderHolds> NewReaderHolds() override;
  TierStats Stats() const override;

 private:
  const std::string name_ = "node-memory";
  std::shared_ptr<ClusterClient> client_;
  TierCounters counters_;
};

class NodeDiskTier : public CacheTier {
 public:
  // Keeps at most `max_files` cache files open.
  explicit NodeDiskTier(std::shared_ptr<ClusterClient> client, size_t max_files = 256);
  ~NodeDiskTier() override;

  const std::string& name() const override { return name_; }
  Result<BlockRef> Get(const BlockKey& key) override;
  Result<size_t> Read(const BlockKey& key, uint64_t offset, std::span<char> dst,
                      bool count_access) override;
  bool Insert(const BlockRequest&, const BlockRef&) override { return false; }
  void Touch(const BlockKey&) override {}
  // Only what is open already: asking the worker belongs to a read.
  bool Contains(const BlockKey& key) const override EXCLUDES(mu_);
  void Erase(const BlockKey& key) override EXCLUDES(mu_);
  TierStats Stats() const override EXCLUDES(mu_);
  size_t open_files() const EXCLUDES(mu_);

 private:
  using FileRef = std::shared_ptr<const BlockFile>;
  // The open file of the block, opening it (LocateBlock at its owner) on first use; null if the
  // owner has none on this host.
  FileRef Open(const BlockKey& key) EXCLUDES(mu_);
  // Closes the files whose blocks the worker has deleted.
  void Sweep() EXCLUDES(mu_);

  const std::string name_ = "node-disk";
  std::shared_ptr<ClusterClient> client_;
  const size_t max_files_;
  mutable Mutex mu_;
  struct Entry {
    FileRef file;
    std::list<BlockKey>::iterator lru;
  };
  std::unordered_map<BlockKey, Entry, BlockKeyHash> files_ GUARDED_BY(mu_);
  std::list<BlockKey> lru_ GUARDED_BY(mu_);  // most recent first
  TierCounters counters_;
  Mutex stop_mu_;
  CondVar stop_cv_;
  bool stopping_ GUARDED_BY(stop_mu_) = false;
  std::thread sweeper_;
};

// A cluster mount's cache: with `node_tiers`, the memory of the workers on this host (mapped), its
// own memory tier (config.memory_capacity) for blocks that live elsewhere, then the cache files of
// the workers on this host; without, its own memory tier only. With an `arena`, its own memory
// tier keeps its blocks there (see MemoryTier).
Result<std::shared_ptr<BlockStore>> ClusterBlockStore(const std::shared_ptr<ClusterClient>& client,
                                                      const CacheConfig& config, bool node_tiers,
                                                      std::shared_ptr<MemoryBudget> budget,
                                                      std::shared_ptr<ShmArena> arena = nullptr);

}  // namespace lakecache
