// BlockStore: the tiered block cache that readers use: memory on top, then disk directories.
//
// Admission and promotion, inclusive tiers:
//  - A block found in no tier is fetched through the caller's BlockSource, exactly once however
//    many readers miss on it at the same time (single-flight); every waiter gets the same bytes or
//    error. It is then offered to every tier, top first; each tier's policy decides whether to keep
//    it.
//  - A hit in a lower tier is touched there and, on Get, offered to the tiers above (promotion).
//    Read of a range from disk does not promote (it reads only the range).
//  - A tier that fails to store a block (disk full) only counts it; the reader still gets its
//    bytes.
//  - Prefetch fetches through the same single-flight path but parks the block in a staging area
//    instead of offering it to the tiers: read-ahead is not an access, so the policies must not see
//    it. A block only on disk is prefetched too: loaded whole (verified) from the disk tier into
//    staging. A later reader that misses the memory tier takes the block from staging (or joins
//    its prefetch in flight) before it reads the disk, and only then offers it to the tiers; the
//    block stays staged until they hold it, so no reader finds it nowhere and fetches it again.
//    Staged and in-flight bytes count against one MemoryBudget; a prefetch that does not fit is
//    refused (unread staged blocks older than a moment are dropped first, oldest first); demand
//    fetches are counted but never refused. Unread staged blocks expire.
// Thread-safe. A hit takes no global lock: only the tier's shard lock and the policy's.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cache/block_source.h"
#include "cache/cache_tier.h"
#include "cache/memory_budget.h"
#include "cache/shm_arena.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/mutex.h"
#include "common/result.h"
#include "common/thread_pool.h"

namespace lakecache {

struct BlockStoreStats {
  std::vector<TierStats> tiers;  // top first
  uint64_t fetches = 0;          // BlockSource calls
  uint64_t fetch_errors = 0;
  uint64_t fetched_bytes = 0;
  uint64_t singleflight_waits = 0;  // misses that joined a fetch already in flight
  uint64_t prefetches = 0;          // fetches made by Prefetch (also counted in fetches)
  uint64_t prefetch_used = 0;       // staged blocks a reader took
  uint64_t prefetch_dropped = 0;    // staged blocks dropped unread (budget needed, or expired)
  uint64_t prefetch_refused = 0;    // Prefetch calls refused for lack of budget
  uint64_t budget_peak_bytes = 0;   // most bytes of the MemoryBudget held at once
  // Fetch latency: count per bucket, bucket i holding latencies in [2^i, 2^(i+1)) microseconds.
  std::vector<uint64_t> fetch_latency_us_log2;
  uint64_t fetch_latency_us_total = 0;
};

class BlockStore {
 public:
  // Builds the tiers of `config` (memory, then each disk directory), rebuilding disk indexes from
  // what the directories hold. Errors name the config key at fault (e.g. an unwritable cache dir).
  // `budget` null: a budget of its own, of ClientConfig's default size.
  // `arena`: the memory tier keeps its blocks there, shared with the node's mounts (a worker).
  static Result<std::unique_ptr<BlockStore>> Open(const CacheConfig& config,
                                                  std::shared_ptr<MemoryBudget> budget = nullptr,
                                                  std::shared_ptr<ShmArena> arena = nullptr);

  // Tiers top first. REQUIRES: at least one tier. `clock` ages the staged blocks (it outlives the
  // store).
  explicit BlockStore(std::vector<std::unique_ptr<CacheTier>> tiers,
                      std::shared_ptr<MemoryBudget> budget = nullptr,
                      const SteadyClock* clock = SteadyClock::Real());
  ~BlockStore();

  // The whole block: from the first tier holding it, else fetched through `source`.
  Result<BlockRef> Get(const BlockRequest& request, const BlockSource& source);

  // A block of `size` bytes for a source to fetch into: in the memory tier's shared memory when
  // it has room there (the tier then keeps it without a copy), else Block::Allocate's.
  std::shared_ptr<Block> NewBlock(size_t size);
  BlockAllocator Allocator() {
    return [this](size_t size) { return NewBlock(size); };
  }
  // Holds for one reader of blocks in place (ReaderHolds), from the tier that shares another
  // process's memory; null when no tier does.
  std::unique_ptr<ReaderHolds> NewReaderHolds();

  // Copies [offset, offset + dst.size()) of the block into dst (clamped to the block's end).
  Result<size_t> Read(const BlockRequest& request, uint64_t offset, std::span<char> dst,
                      const BlockSource& source);

  // A read that avoids the copy where it can: when the block is held in memory (a resident tier,
  // staging, or just fetched) returns it pinned and leaves dst alone; otherwise (a disk hit) copies
  // the range into dst and returns a null block with the bytes copied.
  struct PinnedRead {
    BlockRef block;     // set: read the range from here
    size_t copied = 0;  // block null: bytes copied into dst
    int tier = -1;      // the tier that held `block` (memory, or disk for a small block); -1:
                        // fetched, staged or copied
  };
  Result<PinnedRead> ReadPinned(const BlockRequest& request, uint64_t offset, std::span<char> dst,
                                const BlockSource& source);
  // Counts `bytes` as read from tier `tier` (PinnedRead::tier; -1: nothing): a caller that keeps
  // a pinned block and serves further reads from it says so, for the tier's hit bytes.
  void CountHitBytes(int tier, uint64_t bytes);

  // Offers a block whose bytes the caller has (a file written through the mount, keyed under the
  // version its upload made) to every tier, as a fetch would; not counted as a fetch.
  // REQUIRES: block holds exactly request.length bytes of that version.
  void Admit(const BlockRequest& request, const BlockRef& block);

  enum class PrefetchResult {
    kStarted,   // fetching it through `source`
    kLoading,   // loading it from a lower tier (disk): `source` is called only if that fails
    kPresent,   // the memory tier or staging holds it, or a fetch of it is in flight
    kNoBudget,  // its bytes do not fit the budget now
  };
  // Starts fetching the block on `pool` into staging (from a lower tier when one holds the block,
  // else through `source`). Started (kStarted or kLoading), it is in flight at once, so a reader
  // that reaches it before the pool runs the fetch joins it. Never blocks and never counts as an
  // access. `source` must stay callable until the pool runs it.
  PrefetchResult Prefetch(const BlockRequest& request, BlockSource source, ThreadPool& pool);
  // Drops the block from staging, if it is there unread.
  void DropStaged(const BlockKey& key);

  MemoryBudget& budget() { return *budget_; }
  bool Contains(const BlockKey& key) const;
  // Calls `fn` with the key of every block the tiers hold (a key may come more than once) and
  // returns true; false, perhaps after some calls, when a tier cannot list its blocks (see
  // CacheTier::ForEachKey).
  bool ForEachHeld(const std::function<void(const BlockKey&)>& fn) const;
  // True if a resident (memory) tier holds the block.
  bool InMemory(const BlockKey& key) const;
  // True when a tier stands for a cache outside this store that holds the block (see
  // CacheTier::Shadows): this store keeps no copy of it.
  bool Shadowed(const BlockKey& key) const;
  // True when a resident (memory) tier would keep a new block of `bytes` without evicting another.
  bool HasRoomInMemory(uint64_t bytes) const;
  void Erase(const BlockKey& key);
  BlockStoreStats Stats() const;

  // Returns once every tier has stored what it accepted (the disk tier writes behind).
  void Flush();

  // The cache file holding the block (see CacheTier::FilePath), or empty.
  std::string FilePath(const BlockKey& key);

 private:
  struct Flight;
  struct Staged;
  // The block from the first tier holding it, touched in the tiers below and offered to the tiers
  // above; nullptr when no tier holds it.
  BlockRef Lookup(const BlockRequest& request);
  void TouchBelow(size_t tier, const BlockKey& key);
  // Offers the block to the tiers above `end` (every tier: tiers_.size()), unless a tier shadows
  // it (see CacheTier::Shadows).
  void Offer(const BlockRequest& request, const BlockRef& block, size_t end);
  // Single-flight: joins the fetch of request.key in progress, or leads a new one.
  Result<BlockRef> Fetch(const BlockRequest& request, const BlockSource& source);
  // The leader's part: the source call and the tier inserts.
  Result<BlockRef> LeadFetch(const BlockRequest& request, const BlockSource& source);
  // The pool's part of Prefetch: fetches into staging and finishes `flight`. REQUIRES: `flight`
  // is request.key's in flights_; request.length bytes of budget reserved for it, which it keeps
  // (staged) or gives back.
  void RunPrefetch(const BlockRequest& request, const BlockSource& source, Flight& flight);
  // Offers a staged block to the tiers, then takes it out of staging; nullptr if not staged. A
  // block another reader is offering meanwhile is returned as it is, not offered twice.
  BlockRef AdmitStaged(const BlockRequest& request);
  // `block`, or the copy of it a resident tier keeps in shared memory (CacheTier::SharedCopy).
  BlockRef Shared(const BlockKey& key, BlockRef block);
  bool IsStaged(const BlockKey& key);
  // True if a non-resident (disk) tier holds the block.
  bool InLowerTier(const BlockKey& key) const;
  // The block from the first non-resident tier (disk) holding it, verified; null if none does.
  // *from_tier: the index of the tier that had it.
  BlockRef LoadFromLowerTier(const BlockKey& key, int* from_tier);
  bool InFlight(const BlockKey& key);
  // Drops staged blocks that expired and, while `need` bytes do not fit the budget, the oldest of
  // those staged longer than a moment; then reserves `need` if it fits.
  bool ReserveForPrefetch(uint64_t need);
  // Calls the source, times it, and checks it returned exactly request.length bytes.
  // `what` names the call in the debug log ("miss: fetch", "read-ahead fetch").
  Result<BlockRef> CallSource(const BlockRequest& request, const BlockSource& source,
                              std::string_view what);

  std::vector<std::unique_ptr<CacheTier>> tiers_;
  Mutex flights_mu_;
  std::unordered_map<BlockKey, std::shared_ptr<Flight>, BlockKeyHash> flights_
      GUARDED_BY(flights_mu_);
  std::shared_ptr<MemoryBudget> budget_;
  const SteadyClock* const clock_;
  Mutex staging_mu_ ACQUIRED_AFTER(flights_mu_);  // RunPrefetch checks staging under flights_mu_
  std::unordered_map<BlockKey, Staged, BlockKeyHash> staging_ GUARDED_BY(staging_mu_);
  // Counters: see BlockStoreStats.
  struct Counters;
  std::unique_ptr<Counters> counters_;
};

}  // namespace lakecache
