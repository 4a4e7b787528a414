// Block: the immutable bytes of one cached block, shared by everyone reading it.
//
// A BlockRef (shared_ptr<const Block>) pins the bytes: a block evicted from the memory tier stays
// valid for readers that still hold it. Filled once by its creator before it is shared; read-only
// after. Blocks of 1 MiB and more are mapped pages of their own, returned to the system when freed:
// from the heap they would raise glibc's mmap threshold and stay in the process as free heap.
#pragma once

#include <sys/mman.h>

#include <cstddef>
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
      ::munmap(data_, size_);
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
  Block(char* data, size_t size, bool mapped) : data_(data), size_(size), mapped_(mapped) {}
  char* data_;
  size_t size_;
  bool mapped_;
};

using BlockRef = std::shared_ptr<const Block>;

inline std::shared_ptr<Block> Block::Allocate(size_t size) {
  if (size >= kMapAtLeast) {
    void* m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    return std::shared_ptr<Block>(new Block(static_cast<char*>(m), size, true));
  }
  size_t rounded = (size + 63) / 64 * 64;
  char* p = static_cast<char*>(std::aligned_alloc(64, rounded == 0 ? 64 : rounded));
  if (p == nullptr) throw std::bad_alloc();
  return std::shared_ptr<Block>(new Block(p, size, false));
}

}  // namespace lakecache
