// ShmReader: a mount's read-only view of a worker's shared memory (layout and protocol:
// shm_layout.h), built from the descriptors the worker sent.
//
// Map checks every segment before mapping it: sealed against shrinking and growing (so a mapping
// can never fault), of the sizes the index header says, index and arenas mapped read-only. Find
// returns a block of the worker's memory tier in place: a Block view anchored in this mount's
// session segment until its last reference goes, so the worker cannot reuse that memory while it
// is read. Close (the worker hung up) makes every later Find miss; the mappings go when the last
// view does. Find makes no call to the worker: it reads the index. Thread-safe.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "cache/block.h"
#include "cache/block_key.h"
#include "cache/shm_layout.h"
#include "common/result.h"

namespace lakecache {

struct ShmFds {
  int index = -1;
  int anchors = -1;
  std::vector<int> arenas;
  // The connection whose closing ends the session at the worker: closed only when the last view
  // goes, so the worker honours this process's anchors for as long as it reads.
  int session = -1;
};

class ShmReader : public std::enable_shared_from_this<ShmReader> {
 public:
  // Takes ownership of the descriptors (closed on error too). `prefault`: map each block's pages
  // into this process (MADV_POPULATE_READ) the first time it is found, rather than one page fault
  // per 4 KiB on first reading it (shared memory gets no huge pages here).
  static Result<std::shared_ptr<ShmReader>> Map(ShmFds fds, bool prefault = true);
  ~ShmReader();
  ShmReader(const ShmReader&) = delete;
  ShmReader& operator=(const ShmReader&) = delete;

  // The block, anchored while referenced; null when the worker does not publish it now.
  BlockRef Find(const BlockKey& key);
  // Whether the worker publishes the block now (nothing anchored).
  bool Contains(const BlockKey& key) const;
  void Close() { closed_.store(true, std::memory_order_release); }
  bool closed() const { return closed_.load(std::memory_order_acquire); }
  // Bytes this view maps (index, anchors and arenas).
  uint64_t mapped_bytes() const { return mapped_bytes_; }
  uint64_t hits() const { return hits_.load(std::memory_order_relaxed); }
  int session_fd() const { return session_fd_; }
  // Whether `fd` is one of the arenas this view maps (a Block of Find has it as its fd()).
  bool HoldsArena(int fd) const {
    return std::find(arena_fds_.begin(), arena_fds_.end(), fd) != arena_fds_.end();
  }

 private:
  ShmReader() = default;
  const shm::Slot* Lookup(const BlockKey& key, uint32_t* at) const;
  void Prefault(uint32_t arena, uint64_t offset, uint64_t length);

  std::atomic<bool> closed_{false};
  bool prefault_ = true;
  int index_fd_ = -1, anchors_fd_ = -1, session_fd_ = -1;
  std::vector<int> arena_fds_;
  const char* index_ = nullptr;
  uint64_t index_bytes_ = 0;
  const shm::Slot* slots_ = nullptr;
  uint32_t slot_count_ = 0;
  shm::Anchor* anchors_ = nullptr;
  uint64_t anchor_bytes_ = 0;
  std::vector<const char*> arenas_;
  uint64_t arena_bytes_ = 0;
  uint64_t mapped_bytes_ = 0;
  // One bit per page of each arena: already prefaulted in this process.
  std::vector<std::unique_ptr<std::atomic<uint64_t>[]>> faulted_;
  std::atomic<uint64_t> hits_{0};
};

}  // namespace lakecache
