// DiskTier: the cache tier over local disk directories (SSDs); it survives a restart.
//
// Each block lives in one of the directories (a CacheDir), chosen by rendezvous hashing of its key
// weighted by the directories' capacities, so adding a directory moves only its share of blocks.
// Each directory has its own eviction policy, sharded index and free-space floor. Open rebuilds the
// indexes from the files. Every read is verified; a corrupt file is deleted and reported as a miss.
// Thread-safe: a hit takes one index shard lock per directory probed, and the policy's.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cache/cache_tier.h"
#include "common/config.h"

namespace lakecache {

class CacheDir;

class DiskTier : public CacheTier {
 public:
  // Creates (or reopens) the directories `dirs`, each with a policy named `policy` (see
  // MakeEvictionPolicy) of that directory's capacity. Blocks left by an earlier run are served
  // again; leftovers it cannot use are removed. Errors name the directory at fault.
  static Result<std::unique_ptr<DiskTier>> Open(const std::vector<DiskCacheConfig>& dirs,
                                                std::string_view policy, uint64_t seed = 0);
  ~DiskTier() override;

  const std::string& name() const override { return name_; }  // "disk:<path>[,<path>...]"
  Result<BlockRef> Get(const BlockKey& key) override;
  Result<size_t> Read(const BlockKey& key, uint64_t offset, std::span<char> dst,
                      bool count_access) override;
  bool Insert(const BlockRequest& request, const BlockRef& block) override;
  void Touch(const BlockKey& key) override;
  bool Contains(const BlockKey& key) const override;
  void Erase(const BlockKey& key) override;
  TierStats Stats() const override;

 private:
  explicit DiskTier(std::string name);
  // The directory a new block goes to (rendezvous hashing). Blocks found at Open stay where they
  // are even if the configuration changed since, so lookups probe every directory.
  CacheDir& Home(const BlockKey& key) const;

  const std::string name_;
  std::vector<std::unique_ptr<CacheDir>> dirs_;
  std::vector<uint64_t> dir_seeds_;  // hash of each directory's path: stable across reorderings
  TierCounters counters_;            // updated by the CacheDirs too
};

}  // namespace lakecache
