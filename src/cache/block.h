// Block: the immutable bytes of one cached block, shared by everyone reading it.
//
// A BlockRef (shared_ptr<const Block>) pins the bytes: a block evicted from the memory tier stays
// valid for readers that still hold it. Filled once by its creator before it is shared; read-only
// after. Blocks of 1 MiB and more are mapped pages of their own, returned to the system when freed:
// from the heap they would raise glibc's mmap threshold and stay in the process as free heap.
// Blocks of 2 MiB and more start on a 2 MiB boundary and ask for transparent huge pages: filling a
// fresh 4 MiB block then takes 2 page faults instead of 1,024, which was a third of the CPU time of
// a cold read.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>

namespace lakecache {

class Block {
 public:
  // A block of `size` bytes, 64-byte aligned, contents unspecified.
  static std::shared_ptr<Block> Allocate(size_t size);
  ~Block() {
    if (mapped_) {
      ::munmap(data_, MappedLength(size_));
    } else {
      std::free(data_);
    }
  }
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

  const char* data() const { return data_; }
  char* mutable_data() { return data_; }
  size_t size() const { return size_; }
  std::span<const char> bytes() const { return {data_, size_}; }

 private:
  static constexpr size_t kMapAtLeast = 1 << 20;
  static constexpr size_t kHugePage = 2 << 20;
  static constexpr size_t kPage = 4096;
  static size_t MappedLength(size_t size) { return (size + kPage - 1) / kPage * kPage; }
  static char* MapPages(size_t size);
  Block(char* data, size_t size, bool mapped) : data_(data), size_(size), mapped_(mapped) {}
  char* data_;
  size_t size_;
  bool mapped_;
};

using BlockRef = std::shared_ptr<const Block>;

inline std::shared_ptr<Block> Block::Allocate(size_t size) {
  if (size >= kMapAtLeast) return std::shared_ptr<Block>(new Block(MapPages(size), size, true));
  size_t rounded = (size + 63) / 64 * 64;
  char* p = static_cast<char*>(std::aligned_alloc(64, rounded == 0 ? 64 : rounded));
  if (p == nullptr) throw std::bad_alloc();
  return std::shared_ptr<Block>(new Block(p, size, false));
}

inline char* Block::MapPages(size_t size) {
  size_t length = MappedLength(size);
  size_t slack = size >= kHugePage ? kHugePage - kPage : 0;
  void* m =
      ::mmap(nullptr, length + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) throw std::bad_alloc();
  char* base = static_cast<char*>(m);
  if (slack == 0) return base;
  // Keep the 2 MiB-aligned part of the mapping; give back the unaligned head and the unused tail.
  auto start = reinterpret_cast<uintptr_t>(base);
  char* aligned = base + ((kHugePage - start % kHugePage) % kHugePage);
  if (aligned > base) ::munmap(base, static_cast<size_t>(aligned - base));
  char* end = base + length + slack;
  if (aligned + length < end)
    ::munmap(aligned + length, static_cast<size_t>(end - aligned - length));
  ::madvise(aligned, length, MADV_HUGEPAGE);  // advice only: without THP the block still works
  return aligned;
}

}  // namespace lakecache
