// The shared-memory layout a worker's memory tier publishes to the mounts on its node.
//
// Three kinds of memfd segments, all sealed against shrinking and growing (F_SEAL_SHRINK,
// F_SEAL_GROW, F_SEAL_SEAL), so a mapping of them can never fault with SIGBUS:
//  - arenas: the bytes of the memory tier's blocks. Mounts map them read-only.
//  - the index: a Header, then `slot_count` Slots, each naming one block held in an arena. Slots
//    are grouped in buckets of kBucketSlots; a block lives in the bucket its key hashes to, so a
//    reader finds it by scanning one bucket (no per-read call to the worker). Only the worker
//    writes it; mounts map it read-only.
//  - one anchor segment per mount (session): a 32-bit reader count per slot. Only that mount
//    writes it; the worker reads it before it reuses a slot's memory.
//
// The protocol (HDFS short-circuit shared memory, with the anchors split per reader process so a
// dead mount's anchors go with its session):
//  - Publish (worker): write the slot's key and location, then store state = kValid | generation
//    (release), generation one more than the slot's last.
//  - Read (mount): load state (acquire); if valid and the key matches: anchor (increment its own
//    count), load state again; equal: the bytes are the block's until it unanchors; otherwise
//    unanchor, not found.
//  - Unpublish (worker): store state = generation without kValid; the memory may be reused once
//    every session's count for the slot is 0 (and the worker itself holds no reference). The
//    anchor, the second look, the invalidation and the worker's reading of the counts are all
//    sequentially consistent, so in their one order either the reader sees the slot invalid or
//    the worker sees its anchor.
// The counts and the state words are lock-free atomics (address-free on every platform we run on),
// used across processes.
#pragma once

#include <atomic>
#include <cstdint>

#include "cache/block_key.h"

namespace lakecache::shm {

inline constexpr uint64_t kMagic = 0x31636d68736b6c4cull;  // "Llkshmc1", little-endian
inline constexpr uint32_t kVersion = 1;
inline constexpr uint64_t kValid = 1ull << 63;
inline constexpr uint32_t kBucketSlots = 8;
inline constexpr uint64_t kPage = 4096;

struct alignas(64) Header {
  uint64_t magic = kMagic;
  uint32_t version = kVersion;
  uint32_t slot_count = 0;  // a multiple of kBucketSlots
  uint32_t arena_count = 0;
  uint32_t reserved = 0;
  uint64_t arena_bytes = 0;  // the size of every arena
};

struct alignas(64) Slot {
  std::atomic<uint64_t> state{0};  // kValid | generation
  std::atomic<uint64_t> content_hi{0};
  std::atomic<uint64_t> content_lo{0};
  std::atomic<uint64_t> index{0};
  std::atomic<uint64_t> offset{0};  // within the arena, a multiple of kPage
  std::atomic<uint32_t> arena{0};
  std::atomic<uint32_t> length{0};
  uint64_t reserved[2] = {0, 0};
};
static_assert(sizeof(Slot) == 64, "one cache line per slot");
static_assert(std::atomic<uint64_t>::is_always_lock_free &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "shared atomics must be lock-free");

using Anchor = std::atomic<uint32_t>;

inline uint64_t IndexBytes(uint32_t slot_count) {
  uint64_t bytes = sizeof(Header) + uint64_t{slot_count} * sizeof(Slot);
  return (bytes + kPage - 1) / kPage * kPage;
}
inline uint64_t AnchorBytes(uint32_t slot_count) {
  uint64_t bytes = uint64_t{slot_count} * sizeof(Anchor);
  return (bytes + kPage - 1) / kPage * kPage;
}
// The first slot of the bucket a key lives in.
inline uint32_t BucketStart(const BlockKey& key, uint32_t slot_count) {
  uint32_t buckets = slot_count / kBucketSlots;
  return static_cast<uint32_t>(StableKeyHash(key, 0x5348) % buckets) * kBucketSlots;
}
inline bool SlotHolds(const Slot& slot, const BlockKey& key) {
  return slot.content_hi.load(std::memory_order_relaxed) == key.content.hi &&
         slot.content_lo.load(std::memory_order_relaxed) == key.content.lo &&
         slot.index.load(std::memory_order_relaxed) == key.index;
}

}  // namespace lakecache::shm
