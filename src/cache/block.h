// Block: the immutable bytes of one cached block, shared by everyone reading it.
//
// A BlockRef (shared_ptr<const Block>) pins the bytes: a block evicted from the memory tier stays
// valid for readers that still hold it. Filled once by its creator before it is shared; read-only
// after.
//
// Memory: blocks of 1 MiB and more are page mappings of their own, not heap: from the heap they
// would raise glibc's mmap threshold and stay in the process as free heap. Those of 2 MiB and more
// start on a 2 MiB boundary and ask for transparent huge pages, so filling a fresh 4 MiB block
// takes 2 page faults instead of 1,024. A freed mapping goes to a small pool (at most 64 MiB) that
// the next block of the same size reuses: a steady stream of blocks through a cache that evicts
// (a cluster client, a full memory tier) then costs no page faults and no zeroing at all. A mapping
// unused there for 30 s is unmapped.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>

namespace lakecache {

class Block {
 public:
  // A block of `size` bytes, 64-byte aligned, contents unspecified.
  static std::shared_ptr<Block> Allocate(size_t size);
  // The same, page-aligned, with room up to the next page boundary (what an O_DIRECT read of
  // whole pages needs); mutable_data() may be written that far.
  static std::shared_ptr<Block> AllocatePages(size_t size);
  // A block over `size` bytes at `data` that someone else owns (shared memory): `release` runs
  // when the last reference goes. The bytes must stay valid and unchanged until then.
  // `fd` and `fd_offset`: a file that holds the same bytes at that offset (the worker's memfd), so
  // a reply may splice them instead of copying; -1: none. `foreign`: the memory is another
  // process's (a worker's, mapped here), false for this process's own shared memory.
  static std::shared_ptr<Block> View(char* data, size_t size, std::function<void()> release,
                                     int fd = -1, uint64_t fd_offset = 0, bool foreign = true);
  ~Block();
  Block(const Block&) = delete;
  // The freed mappings the pool holds, and unmapping those given back `idle` ago or earlier (an
  // idle trim does, for 30 s: common/idle_trim.h).
  static size_t PooledBytes();
  static void TrimPool(std::chrono::steady_clock::duration idle);
  Block& operator=(const Block&) = delete;

  const char* data() const { return data_; }
  char* mutable_data() { return data_; }
  size_t size() const { return size_; }
  std::span<const char> bytes() const { return {data_, size_}; }
  // True for a View of another process's memory (a worker's shared memory): a cache must not
  // keep the block (it would hold the owner's memory).
  bool foreign() const { return foreign_; }
  // A file holding the bytes (see View), or -1; data()[i] is at fd_offset() + i there.
  int fd() const { return fd_; }
  uint64_t fd_offset() const { return fd_offset_; }

 private:
  Block(char* data, size_t size, bool mapped) : data_(data), size_(size), mapped_(mapped) {}
  char* data_;
  size_t size_;
  bool mapped_;
  std::function<void()> release_;  // set for a View
  int fd_ = -1;
  uint64_t fd_offset_ = 0;
  bool foreign_ = false;
};

using BlockRef = std::shared_ptr<const Block>;
// Makes the block a fetch fills (Block::Allocate, or a cache's shared memory).
using BlockAllocator = std::function<std::shared_ptr<Block>(size_t size)>;

}  // namespace lakecache
