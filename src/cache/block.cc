#include "cache/block.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <new>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"

namespace lakecache {
namespace {

constexpr size_t kMapAtLeast = 1 << 20;
constexpr size_t kHugePage = 2 << 20;
constexpr size_t kPage = 4096;
constexpr size_t kPoolBytes = 64 << 20;

size_t MappedLength(size_t size) { return (size + kPage - 1) / kPage * kPage; }

char* MapPages(size_t size) {
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

// Freed mappings by length, for reuse: bounded, so a burst of frees does not keep memory forever.
class MappingPool {
 public:
  char* Take(size_t length) {
    MutexLock lock(&mu_);
    auto it = free_.find(length);
    if (it == free_.end() || it->second.empty()) return nullptr;
    char* p = it->second.back();
    it->second.pop_back();
    bytes_ -= length;
    return p;
  }
  // False when the pool is full: the caller unmaps.
  bool Give(char* p, size_t length) {
    MutexLock lock(&mu_);
    if (bytes_ + length > kPoolBytes) return false;
    free_[length].push_back(p);
    bytes_ += length;
    return true;
  }

 private:
  Mutex mu_;
  std::unordered_map<size_t, std::vector<char*>> free_ GUARDED_BY(mu_);
  size_t bytes_ GUARDED_BY(mu_) = 0;
};

MappingPool& Pool() {
  static auto* pool = new MappingPool();  // never destroyed: blocks may outlive static teardown
  return *pool;
}

}  // namespace

std::shared_ptr<Block> Block::Allocate(size_t size) {
  if (size >= kMapAtLeast) {
    char* p = Pool().Take(MappedLength(size));
    if (p == nullptr) p = MapPages(size);
    return std::shared_ptr<Block>(new Block(p, size, true));
  }
  size_t rounded = (size + 63) / 64 * 64;
  char* p = static_cast<char*>(std::aligned_alloc(64, rounded == 0 ? 64 : rounded));
  if (p == nullptr) throw std::bad_alloc();
  return std::shared_ptr<Block>(new Block(p, size, false));
}

std::shared_ptr<Block> Block::AllocatePages(size_t size) {
  if (size >= kMapAtLeast) return Allocate(size);  // mapped: whole pages already
  char* p = static_cast<char*>(std::aligned_alloc(kPage, size == 0 ? kPage : MappedLength(size)));
  if (p == nullptr) throw std::bad_alloc();
  return std::shared_ptr<Block>(new Block(p, size, false));
}

std::shared_ptr<Block> Block::View(char* data, size_t size, std::function<void()> release, int fd,
                                   uint64_t fd_offset) {
  auto* block = new Block(data, size, false);
  block->release_ = release ? std::move(release) : [] {};
  block->fd_ = fd;
  block->fd_offset_ = fd_offset;
  return std::shared_ptr<Block>(block);
}

Block::~Block() {
  if (release_) {
    release_();
    return;
  }
  if (!mapped_) {
    std::free(data_);
    return;
  }
  size_t length = MappedLength(size_);
  if (!Pool().Give(data_, length)) ::munmap(data_, length);
}

}  // namespace lakecache
