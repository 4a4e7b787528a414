// CacheDir: one directory of a DiskTier: its block files, index, policy and free-space floor.
//
// Blocks are BlockFiles at <path>/blocks/xx/yy/<key>.blk. The index (key -> file size) is split
// into shards, each a mutex and a hash map, so lookups of different blocks never contend; file I/O
// runs outside every index lock. The policy keeps the bytes within capacity, the floor keeps the
// file system from filling, and a lock file keeps a second process out. Thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cache/block_file.h"
#include "cache/block_source.h"
#include "cache/cache_stats.h"
#include "cache/eviction_policy.h"
#include "common/config.h"
#include "common/mutex.h"

namespace lakecache {

class CacheDir {
 public:
  // Creates and locks the directory, removes what an earlier run left unusable (temp files, other
  // format versions, corrupt headers) and indexes every valid block into a new policy named
  // `policy`. `counters` (of the owning tier) must outlive the CacheDir. Errors name the path.
  static Result<std::unique_ptr<CacheDir>> Open(const DiskCacheConfig& config,
                                                std::string_view policy, uint64_t seed,
                                                TierCounters* counters);
  ~CacheDir();
  CacheDir(const CacheDir&) = delete;
  CacheDir& operator=(const CacheDir&) = delete;

  const DiskCacheConfig& config() const { return config_; }
  // The configured capacity, lowered at Open to what the file system holds above the floor.
  uint64_t capacity_bytes() const { return policy_->capacity_bytes(); }

  // The verified block or range, reporting a hit to the policy. kNotFound when not held or when the
  // file fails verification (it is then deleted and counted). The tier counts hits and misses.
  Result<BlockRef> Get(const BlockKey& key);
  Result<size_t> Read(const BlockKey& key, uint64_t offset, std::span<char> dst, bool count_access);

  // The policy's decision on a block of `data_bytes` (of `request`), taken before anything is
  // written, so a block it declines (counted as rejected) costs no disk write: the generation of
  // the admitted block, to pass to Write; nullopt when declined, or when the block is held or
  // being written already. The policy admits with Admission::kOnMiss, so its answer is final.
  std::optional<uint64_t> Admit(const BlockRequest& request, uint64_t data_bytes);
  // Writes a block Admit admitted (generation `gen`) and makes it readable. Returns false (and
  // counts why) when the free-space floor or the write fails, or when the block was evicted or
  // erased since it was admitted (then nothing is written, or the file is removed).
  bool Write(const BlockRequest& request, const Block& block, uint64_t gen);

  bool Touch(const BlockKey& key);  // reports a hit to the policy if held
  // Where the block's file is (or would be) in this directory.
  std::string PathFor(const BlockKey& key) const;
  bool Contains(const BlockKey& key) const;
  bool Erase(const BlockKey& key);  // true if it was held
  // Calls `fn` with the key of every block on disk, under its shard's lock.
  void ForEachKey(const std::function<void(const BlockKey&)>& fn) const;

  uint64_t used_bytes() const { return used_bytes_.load(std::memory_order_relaxed); }
  uint64_t blocks() const { return blocks_.load(std::memory_order_relaxed); }

 private:
  // A block is claimed by the insert writing it, charged once admitted, and on disk once renamed
  // into place. Only on-disk blocks are served.
  enum class State { kClaimed, kCharged, kOnDisk };
  struct Entry {
    uint64_t bytes = 0;  // the file's size on disk
    uint64_t gen = 0;    // tells one insert of a key from a later one
    State state = State::kClaimed;
  };
  struct alignas(64) Shard {
    mutable Mutex mu;
    std::unordered_map<BlockKey, Entry, BlockKeyHash> entries GUARDED_BY(mu);
  };
  static constexpr size_t kShards = 32;

  // A block file Scan found valid.
  struct Found {
    BlockKey key;
    uint64_t bytes = 0;
    std::filesystem::file_time_type mtime;
  };

  CacheDir(DiskCacheConfig config, std::string root, int lock_fd, TierCounters* counters);

  Shard& ShardFor(const BlockKey& key) const;
  Result<std::vector<Found>> Scan();  // oldest first
  Result<uint64_t> UsableCapacity(const std::vector<Found>& found) const;
  // The header of a valid block file; removes (and counts) files an earlier run left unusable.
  std::optional<BlockFileHeader> Examine(const std::string& path);
  void Adopt(const BlockKey& key, uint64_t bytes);  // indexes a file Scan found valid

  // Index transitions; see State.
  std::optional<uint64_t> Claim(const BlockKey& key, uint64_t bytes);
  bool Charge(const BlockKey& key, uint64_t gen) REQUIRES(mutate_mu_);
  bool Publish(const BlockKey& key, uint64_t gen) REQUIRES(mutate_mu_);
  std::optional<uint64_t> OnDiskGen(const BlockKey& key) const;
  bool IsCharged(const BlockKey& key, uint64_t gen) const;
  // Removes the entry (of generation `gen` if given) and its file; false if there was none.
  bool Drop(const BlockKey& key, std::optional<uint64_t> gen, bool tell_policy)
      REQUIRES(mutate_mu_);
  void DropVictims(const std::vector<BlockKey>& victims) REQUIRES(mutate_mu_);
  bool Decline(const BlockKey& key, uint64_t gen, std::atomic<uint64_t>& counter)
      REQUIRES(mutate_mu_);

  Result<BlockFile> OpenVerified(const BlockKey& key) const;
  Status Miss(const BlockKey& key, uint64_t gen, const Status& why);

  // Free-space floor: reserves room for a write of `bytes`; false if it would cross the floor.
  bool ReserveDiskSpace(uint64_t bytes);
  void ReleaseDiskSpace(uint64_t bytes);

  const DiskCacheConfig config_;
  const std::string blocks_root_;           // <path>/blocks
  std::unique_ptr<EvictionPolicy> policy_;  // set once by Open, before the CacheDir is shared
  const int lock_fd_;
  TierCounters* const counters_;
  mutable std::array<Shard, kShards> shards_;
  // Serialises every change that involves the policy (admission with its evictions, removals,
  // publishing), so that a victim the policy names is dropped before anyone else reuses its key.
  // Never held across a block write. Lock order: mutate_mu_, then a shard's mu.
  Mutex mutate_mu_;
  Mutex space_mu_;                                    // taken alone
  uint64_t writing_bytes_ GUARDED_BY(space_mu_) = 0;  // reserved by writes in progress
  std::atomic<uint64_t> next_gen_{1};
  uint64_t held_bytes_ GUARDED_BY(mutate_mu_) = 0;  // charged; within capacity whatever the policy
  // The last reservation failed: warned once until one works.
  std::atomic<bool> below_floor_{false};
  std::atomic<uint64_t> used_bytes_{0};  // on disk
  std::atomic<uint64_t> blocks_{0};
};

// A disk cache directory configured larger than its file system can ever hold (its size less the
// free-space floor): what to tell the user ("disk cache dir D: 100 GiB configured, but ..."), or
// nothing when it fits. Looks at the nearest existing folder when `config.path` is not made yet.
std::optional<std::string> CapacityBeyondDisk(const DiskCacheConfig& config);

// The miss a disk tier answers for a block it does not hold (one Status, not built per miss).
const Status& DiskBlockNotHeld();

}  // namespace lakecache
