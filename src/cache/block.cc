#include "cache/block.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <unordered_map>
#include <vector>

#include "common/idle_trim.h"
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

// Freed mappings by length, for reuse: bounded, so a burst of frees does not keep memory forever,
// and unmapped once unused for kPoolIdle (an idle trim), so a daemon between bursts gives back what
// the last one left.
constexpr auto kPoolIdle = std::chrono::seconds(30);

class MappingPool {
 public:
  char* Take(size_t length) {
    MutexLock lock(&mu_);
    auto it = free_.find(length);
    if (it == free_.end() || it->second.empty()) return nullptr;
    char* p = it->second.back().first;
    it->second.pop_back();
    bytes_ -= length;
    return p;
  }
  // False when the pool is full: the caller unmaps.
  bool Give(char* p, size_t length) {
    MutexLock lock(&mu_);
    if (bytes_ + length > kPoolBytes) return false;
    free_[length].emplace_back(p, std::chrono::steady_clock::now());
    bytes_ += length;
    return true;
  }
  // Unmaps the mappings given back `idle` ago or earlier.
  void Trim(std::chrono::steady_clock::duration idle) {
    auto cutoff = std::chrono::steady_clock::now() - idle;
    std::vector<std::pair<char*, size_t>> old;  // unmapped outside the lock
    {
      MutexLock lock(&mu_);
      for (auto slot = free_.begin(); slot != free_.end();) {
        auto& entries = slot->second;
        // Oldest first: Take and Give work at the back.
        auto fresh = std::find_if(entries.begin(), entries.end(),
                                  [&](const auto& e) { return e.second > cutoff; });
        for (auto it = entries.begin(); it != fresh; ++it) old.emplace_back(it->first, slot->first);
        entries.erase(entries.begin(), fresh);
        // A length seen once (the last block of a file) leaves no empty slot behind.
        slot = entries.empty() ? free_.erase(slot) : std::next(slot);
      }
      for (const auto& [p, length] : old) bytes_ -= length;
    }
    for (const auto& [p, length] : old) ::munmap(p, length);
  }
  size_t bytes() {
    MutexLock lock(&mu_);
    return bytes_;
  }

 private:
  using Entry = std::pair<char*, std::chrono::steady_clock::time_point>;  // given back then
  Mutex mu_;
  std::unordered_map<size_t, std::vector<Entry>> free_ GUARDED_BY(mu_);
  size_t bytes_ GUARDED_BY(mu_) = 0;
};

MappingPool& Pool() {
  static auto* pool = new MappingPool();  // never destroyed: blocks may outlive static teardown
  static auto* trim = new IdleTrim([] { pool->Trim(kPoolIdle); });
  (void)trim;
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

size_t Block::PooledBytes() { return Pool().bytes(); }

void Block::TrimPool(std::chrono::steady_clock::duration idle) { Pool().Trim(idle); }

std::shared_ptr<Block> Block::View(char* data, size_t size, std::function<void()> release, int fd,
                                   uint64_t fd_offset, bool foreign) {
  auto* block = new Block(data, size, false);
  block->release_ = release ? std::move(release) : [] {};
  block->fd_ = fd;
  block->fd_offset_ = fd_offset;
  block->foreign_ = foreign;
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
