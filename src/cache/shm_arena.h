// ShmArena: the shared memory a worker's memory tier keeps its blocks in, so that the mounts on its
// node read them where they lie (layout and protocol: shm_layout.h).
//
// The memory tier hands every block it admits to Publish, which copies it into an arena and
// publishes it in the index; the tier then keeps the returned block (whose bytes are the arena's)
// instead of its own. A block made here with NewBlock (a fetch receives into it) is published where
// it lies, with no copy. When the tier drops the block it calls Unpublish: readers no longer find
// it. Its memory is reused only once the last reference in this process is gone and no mount holds
// an anchor on it; until then it is "deferred" and reclaimed later (Reclaim, or the next Publish
// that needs room). A mount's anchors live in its session's segment, so closing a session (the
// mount hung up or died) releases whatever it held.
//
// Memory: the arenas are `capacity_bytes` in all, charged to this process as they are first
// written. A block that does not fit (fragmentation, or memory still anchored) or whose bucket is
// full is not published: Publish returns null and the tier keeps its private copy, which only this
// process can read. Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cache/block.h"
#include "cache/block_key.h"
#include "common/mutex.h"
#include "common/result.h"

namespace lakecache {

// The pages the arenas are made of. A reader maps a whole arena and fills its page table as it
// first touches it; with 2 MiB pages that costs 1/512 of the faults, which is most of the CPU a
// reader spends on a block beyond copying it.
enum class HugePages {
  kOff,          // ordinary pages
  kTransparent,  // ordinary memfds with huge pages advised (MADV_HUGEPAGE): the kernel gives them
                 // when /sys/kernel/mm/transparent_hugepage/shmem_enabled is advise or always
  kReserved,     // hugetlb memfds from the node's reserved huge pages (vm.nr_hugepages); when too
                 // few are free, ordinary pages with a warning
};

// The config's name of one (common/config.h: CacheConfig::huge_pages): auto, hugetlb or off.
HugePages HugePagesNamed(std::string_view name);

struct ShmArenaOptions {
  uint64_t capacity_bytes = 0;  // bytes for block data, in all arenas
  HugePages huge_pages = HugePages::kTransparent;
  uint64_t max_arena_bytes = 1ull << 30;  // one memfd at most this large
  uint32_t max_sessions = 64;
  const char* name = "lakecache-arena";  // of its memfds, as /proc/PID/maps shows them
};

struct ShmArenaStats {
  uint64_t published_blocks = 0;
  uint64_t published_bytes = 0;
  uint64_t deferred_bytes = 0;  // let go by this process, still anchored by a mount
  uint64_t fresh_bytes = 0;     // NewBlocks being filled, or kept unpublished
  uint64_t sessions = 0;
  uint64_t publish_failures = 0;     // blocks kept private: no room or a full bucket
  uint64_t arena_bytes = 0;          // all arenas
  bool reserved_huge_pages = false;  // the arenas are hugetlb memfds
};

class ShmArena : public std::enable_shared_from_this<ShmArena> {
 public:
  static Result<std::shared_ptr<ShmArena>> Create(const ShmArenaOptions& options);
  ~ShmArena();
  ShmArena(const ShmArena&) = delete;
  ShmArena& operator=(const ShmArena&) = delete;

  // A copy of `block` in shared memory, published under `key`; null when it does not fit.
  BlockRef Publish(const BlockKey& key, const Block& block) EXCLUDES(mu_);
  // The same, but a block NewBlock made is published where it lies (no copy) and returned; null
  // when its bucket is full (the block stays this process's).
  BlockRef Publish(const BlockKey& key, const BlockRef& block) EXCLUDES(mu_);
  // A block of `size` bytes in the arenas, not yet published, for its creator to fill (a fetch
  // receives into it, so that publishing it copies nothing); null when none is free. Its memory
  // returns when the last reference goes.
  std::shared_ptr<Block> NewBlock(size_t size) EXCLUDES(mu_);
  // Readers stop finding `block` (one Publish returned; anything else is ignored).
  void Unpublish(const Block& block) EXCLUDES(mu_);

  // A mount's session: its anchor segment, which the caller sends to the mount.
  struct Session {
    uint64_t id = 0;
    int anchor_fd = -1;  // owned by the arena until CloseSession
  };
  Result<Session> OpenSession() EXCLUDES(mu_);
  // The mount is gone: its anchors no longer hold anything.
  void CloseSession(uint64_t id) EXCLUDES(mu_);
  // Frees deferred memory that no mount anchors any more; returns the bytes freed.
  uint64_t Reclaim() EXCLUDES(mu_);

  // Descriptors to send to a mount (owned by the arena).
  int index_fd() const { return index_fd_; }
  std::vector<int> arena_fds() const;
  uint32_t slot_count() const { return slot_count_; }
  ShmArenaStats Stats() const EXCLUDES(mu_);

 private:
  struct Arena;
  struct Extent {
    uint32_t arena = 0;
    uint64_t offset = 0;
    uint64_t bytes = 0;       // page-rounded
    uint32_t slot = kNoSlot;  // kNoSlot: a NewBlock, not published yet
    uint64_t length = 0;      // the block's
  };
  static constexpr uint32_t kNoSlot = ~0u;
  struct SessionEntry;
  ShmArena() = default;
  // Called when the last reference to a published block goes.
  void Released(const char* data) EXCLUDES(mu_);
  bool Anchored(uint32_t slot) const REQUIRES(mu_);
  void Free(const Extent& e) REQUIRES(mu_);
  uint64_t ReclaimLocked() REQUIRES(mu_);
  bool Allocate(uint64_t bytes, Extent* e) REQUIRES(mu_);
  bool TakeSlot(const BlockKey& key, uint32_t* slot) REQUIRES(mu_);
  // An extent of `bytes` and, with a key, a slot of its bucket, reclaiming deferred memory once
  // when either is missing.
  bool Reserve(const BlockKey* key, uint64_t bytes, Extent* e) REQUIRES(mu_);
  // Fills `e`'s slot and makes it valid. REQUIRES: the extent holds the block's bytes.
  void PublishSlot(const BlockKey& key, const Extent& e) REQUIRES(mu_);
  // A block over the extent, which Released frees.
  std::shared_ptr<Block> ViewOf(const Extent& e);

  // Makes the arenas of `per` bytes each (rounded up to the huge page size when they are hugetlb).
  Status MakeArenas(const ShmArenaOptions& options, uint64_t count, uint64_t per) REQUIRES(mu_);

  uint32_t slot_count_ = 0;
  uint64_t arena_bytes_ = 0;
  bool reserved_huge_pages_ = false;
  uint32_t max_sessions_ = 0;
  int index_fd_ = -1;
  char* index_ = nullptr;  // mapped read-write
  uint64_t index_bytes_ = 0;

  mutable Mutex mu_;
  std::vector<std::unique_ptr<Arena>> arenas_;  // fixed after Create; each one's free map under mu_
  std::vector<bool> slot_used_ GUARDED_BY(mu_);
  std::unordered_map<const char*, Extent> live_ GUARDED_BY(mu_);  // by data pointer
  std::vector<Extent> deferred_ GUARDED_BY(mu_);
  std::vector<std::unique_ptr<SessionEntry>> sessions_ GUARDED_BY(mu_);
  uint64_t next_session_ GUARDED_BY(mu_) = 1;
  uint64_t published_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t fresh_bytes_ GUARDED_BY(mu_) = 0;  // NewBlocks not published
  uint64_t fresh_blocks_ GUARDED_BY(mu_) = 0;
  uint64_t deferred_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t publish_failures_ GUARDED_BY(mu_) = 0;
};

}  // namespace lakecache
