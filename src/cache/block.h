// Block: the immutable bytes of one cached block, shared by everyone reading it.
//
// A BlockRef (shared_ptr<const Block>) pins the bytes: a block evicted from the memory tier stays
// valid for readers that still hold it. Filled once by its creator before it is shared; read-only
// after.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <span>

namespace lakecache {

class Block {
 public:
  // A block of `size` bytes, 64-byte aligned, contents unspecified.
  static std::shared_ptr<Block> Allocate(size_t size);
  ~Block() { std::free(data_); }
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

  const char* data() const { return data_; }
  char* mutable_data() { return data_; }
  size_t size() const { return size_; }
  std::span<const char> bytes() const { return {data_, size_}; }

 private:
  Block(char* data, size_t size) : data_(data), size_(size) {}
  char* data_;
  size_t size_;
};

using BlockRef = std::shared_ptr<const Block>;

inline std::shared_ptr<Block> Block::Allocate(size_t size) {
  size_t rounded = (size + 63) / 64 * 64;
  char* p = static_cast<char*>(std::aligned_alloc(64, rounded == 0 ? 64 : rounded));
  if (p == nullptr) throw std::bad_alloc();
  return std::shared_ptr<Block>(new Block(p, size));
}

}  // namespace lakecache
