#include "cache/shm_arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <string>

#include <spdlog/spdlog.h>

#include "cache/shm_layout.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#include "common/units.h"

namespace lakecache {
namespace {

uint64_t PageRound(uint64_t n) { return (n + shm::kPage - 1) / shm::kPage * shm::kPage; }

// A memfd of `bytes`, sealed so that it can neither shrink nor grow, mapped read-write; `flags`
// may add MFD_HUGETLB.
Result<int> SealedMemfd(const char* name, uint64_t bytes, char** map, unsigned flags = 0) {
  int fd = ::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | flags);
  if (fd < 0) return Status::IoError(std::string("memfd_create: ") + std::strerror(errno));
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0 ||
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    int err = errno;
    ::close(fd);
    return Status::IoError(std::string("cannot size and seal shared memory: ") +
                           std::strerror(err));
  }
  void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) {
    int err = errno;
    ::close(fd);
    return Status::IoError(std::string("cannot map shared memory: ") + std::strerror(err));
  }
  *map = static_cast<char*>(m);
  return fd;
}

// The size of the node's default huge page (a hugetlb memfd's block size); 0 when it has none.
uint64_t HugePageSize() {
  int fd = ::memfd_create("lakecache-probe", MFD_CLOEXEC | MFD_HUGETLB);
  if (fd < 0) return 0;
  struct stat st;
  uint64_t size = ::fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_blksize) : 0;
  ::close(fd);
  return size;
}

// "HugePages_Free" of /proc/meminfo, for the warning when there are too few.
uint64_t FreeHugePages() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("HugePages_Free:")) return std::strtoull(line.c_str() + 15, nullptr, 10);
  }
  return 0;
}

}  // namespace

HugePages HugePagesNamed(std::string_view name) {
  if (name == "hugetlb") return HugePages::kReserved;
  if (name == "off") return HugePages::kOff;
  return HugePages::kTransparent;
}

struct ShmArena::Arena {
  int fd = -1;
  char* base = nullptr;
  std::map<uint64_t, uint64_t> free;  // offset -> bytes, coalesced; under ShmArena::mu_
};

struct ShmArena::SessionEntry {
  uint64_t id = 0;
  int fd = -1;
  shm::Anchor* anchors = nullptr;
  uint64_t bytes = 0;
  ~SessionEntry() {
    if (anchors != nullptr) ::munmap(anchors, bytes);
    if (fd >= 0) ::close(fd);
  }
};

Result<std::shared_ptr<ShmArena>> ShmArena::Create(const ShmArenaOptions& options) {
  if (options.capacity_bytes == 0) return Status::InvalidArgument("shared memory of 0 bytes");
  std::shared_ptr<ShmArena> a(new ShmArena());
  a->max_sessions_ = options.max_sessions;
  // At most 240 arenas: all of them travel in one message to a mount (rpc/node_socket.h).
  uint64_t per = PageRound(std::max(std::min(options.capacity_bytes, options.max_arena_bytes),
                                    (options.capacity_bytes + 239) / 240));
  uint64_t count = (options.capacity_bytes + per - 1) / per;
  a->arena_bytes_ = per;
  // Two slots per 32 KiB of memory (at least 1,024): buckets stay sparse for blocks of 64 KiB and
  // more; a block of a full bucket is only kept private.
  uint64_t slots = std::max<uint64_t>(1024, options.capacity_bytes / (16 << 10));
  slots = std::min<uint64_t>(slots, 1u << 24);
  a->slot_count_ = static_cast<uint32_t>(slots / shm::kBucketSlots * shm::kBucketSlots);
  a->index_bytes_ = shm::IndexBytes(a->slot_count_);
  LC_ASSIGN_OR_RETURN(a->index_fd_, SealedMemfd("lakecache-index", a->index_bytes_, &a->index_));
  auto* header = new (a->index_) shm::Header();
  header->slot_count = a->slot_count_;
  header->arena_count = static_cast<uint32_t>(count);
  header->arena_bytes = per;
  auto* slots_at = reinterpret_cast<shm::Slot*>(a->index_ + sizeof(shm::Header));
  for (uint32_t i = 0; i < a->slot_count_; ++i) new (&slots_at[i]) shm::Slot();
  MutexLock lock(&a->mu_);
  a->slot_used_.assign(a->slot_count_, false);
  LC_RETURN_IF_ERROR(a->MakeArenas(options, count, per));
  header->arena_bytes = a->arena_bytes_;  // rounded up to whole huge pages
  return a;
}

Status ShmArena::MakeArenas(const ShmArenaOptions& options, uint64_t count, uint64_t per) {
  if (options.huge_pages == HugePages::kReserved) {
    uint64_t huge = HugePageSize();
    uint64_t rounded = huge == 0 ? per : (per + huge - 1) / huge * huge;
    // Mapping a hugetlb memfd reserves its pages: it fails at once when too few are free, and a
    // later write never finds none.
    for (uint64_t i = 0; huge != 0 && i < count; ++i) {
      auto arena = std::make_unique<Arena>();
      Result<int> fd = SealedMemfd(options.name, rounded, &arena->base, MFD_HUGETLB);
      if (!fd.ok()) break;
      arena->fd = *fd;
      arena->free[0] = rounded;
      arenas_.push_back(std::move(arena));
    }
    if (huge != 0 && arenas_.size() == count) {
      arena_bytes_ = rounded;
      reserved_huge_pages_ = true;
      spdlog::info("shared memory: {} in reserved huge pages of {}",
                   FormatByteSize(count * rounded), FormatByteSize(huge));
      return Status::Ok();
    }
    if (huge == 0) {
      spdlog::warn("huge pages: this node has none; shared memory in ordinary pages");
    } else {
      spdlog::warn(
          "huge pages: {} of {} wanted for {} of shared memory, {} free (vm.nr_hugepages); "
          "shared memory in ordinary pages",
          count * rounded / huge, FormatByteSize(huge), FormatByteSize(count * rounded),
          FreeHugePages());
    }
    for (auto& arena : arenas_) {
      ::munmap(arena->base, rounded);
      ::close(arena->fd);
    }
    arenas_.clear();
  }
  for (uint64_t i = 0; i < count; ++i) {
    auto arena = std::make_unique<Arena>();
    LC_ASSIGN_OR_RETURN(arena->fd, SealedMemfd(options.name, per, &arena->base));
    if (options.huge_pages != HugePages::kOff) (void)::madvise(arena->base, per, MADV_HUGEPAGE);
    arena->free[0] = per;
    arenas_.push_back(std::move(arena));
  }
  return Status::Ok();
}

ShmArena::~ShmArena() {
  for (auto& arena : arenas_) {
    ::munmap(arena->base, arena_bytes_);
    ::close(arena->fd);
  }
  if (index_ != nullptr) ::munmap(index_, index_bytes_);
  if (index_fd_ >= 0) ::close(index_fd_);
}

std::vector<int> ShmArena::arena_fds() const {
  std::vector<int> fds;
  for (const auto& arena : arenas_) fds.push_back(arena->fd);
  return fds;
}

bool ShmArena::Allocate(uint64_t bytes, Extent* e) {
  // Best fit over every arena: blocks are mostly of one size, so holes get reused whole.
  Arena* best = nullptr;
  std::map<uint64_t, uint64_t>::iterator best_it;
  uint32_t best_index = 0;
  for (uint32_t i = 0; i < arenas_.size(); ++i) {
    auto& free = arenas_[i]->free;
    for (auto it = free.begin(); it != free.end(); ++it) {
      if (it->second < bytes) continue;
      if (best == nullptr || it->second < best_it->second) {
        best = arenas_[i].get();
        best_it = it;
        best_index = i;
        if (it->second == bytes) break;
      }
    }
  }
  if (best == nullptr) return false;
  e->arena = best_index;
  e->offset = best_it->first;
  e->bytes = bytes;
  uint64_t left = best_it->second - bytes;
  uint64_t at = best_it->first + bytes;
  best->free.erase(best_it);
  if (left > 0) best->free[at] = left;
  return true;
}

bool ShmArena::TakeSlot(const BlockKey& key, uint32_t* slot) {
  uint32_t start = shm::BucketStart(key, slot_count_);
  for (uint32_t i = start; i < start + shm::kBucketSlots; ++i) {
    if (!slot_used_[i]) {
      slot_used_[i] = true;
      *slot = i;
      return true;
    }
  }
  return false;
}

bool ShmArena::Reserve(const BlockKey* key, uint64_t bytes, Extent* e) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (attempt > 0) ReclaimLocked();
    if (key != nullptr && e->slot == kNoSlot && !TakeSlot(*key, &e->slot)) continue;
    if (bytes == 0 || Allocate(bytes, e)) return true;
  }
  if (key != nullptr && e->slot != kNoSlot && bytes > 0) slot_used_[e->slot] = false;
  if (key != nullptr) e->slot = kNoSlot;
  return false;
}

void ShmArena::PublishSlot(const BlockKey& key, const Extent& e) {
  live_[arenas_[e.arena]->base + e.offset] = e;
  published_bytes_ += e.bytes;
  auto& slot = reinterpret_cast<shm::Slot*>(index_ + sizeof(shm::Header))[e.slot];
  slot.content_hi.store(key.content.hi, std::memory_order_relaxed);
  slot.content_lo.store(key.content.lo, std::memory_order_relaxed);
  slot.index.store(key.index, std::memory_order_relaxed);
  slot.arena.store(e.arena, std::memory_order_relaxed);
  slot.offset.store(e.offset, std::memory_order_relaxed);
  slot.length.store(static_cast<uint32_t>(e.length), std::memory_order_relaxed);
  uint64_t generation = (slot.state.load(std::memory_order_relaxed) & ~shm::kValid) + 1;
  slot.state.store(shm::kValid | (generation & ~shm::kValid), std::memory_order_release);
}

std::shared_ptr<Block> ShmArena::ViewOf(const Extent& e) {
  char* data = arenas_[e.arena]->base + e.offset;
  std::shared_ptr<ShmArena> self = shared_from_this();
  return Block::View(
      data, e.length, [self, data] { self->Released(data); }, arenas_[e.arena]->fd, e.offset,
      false);
}

BlockRef ShmArena::Publish(const BlockKey& key, const Block& block) {
  Extent e;
  e.length = block.size();
  {
    MutexLock lock(&mu_);
    if (!Reserve(&key, PageRound(std::max<uint64_t>(block.size(), 1)), &e)) {
      ++publish_failures_;
      return nullptr;
    }
  }
  // The extent and slot are ours alone until published.
  std::memcpy(arenas_[e.arena]->base + e.offset, block.data(), block.size());
  BlockRef published = ViewOf(e);
  MutexLock lock(&mu_);
  PublishSlot(key, e);
  return published;
}

BlockRef ShmArena::Publish(const BlockKey& key, const BlockRef& block) {
  {
    MutexLock lock(&mu_);
    auto it = live_.find(block->data());
    if (it != live_.end() && it->second.slot == kNoSlot && it->second.length == block->size()) {
      Extent& e = it->second;
      if (!Reserve(&key, 0, &e)) {
        ++publish_failures_;
        return nullptr;
      }
      fresh_bytes_ -= e.bytes;
      --fresh_blocks_;
      PublishSlot(key, e);
      return block;
    }
  }
  return Publish(key, *block);
}

std::shared_ptr<Block> ShmArena::NewBlock(size_t size) {
  Extent e;
  e.length = size;
  {
    MutexLock lock(&mu_);
    if (!Reserve(nullptr, PageRound(std::max<uint64_t>(size, 1)), &e)) return nullptr;
    live_[arenas_[e.arena]->base + e.offset] = e;
    fresh_bytes_ += e.bytes;
    ++fresh_blocks_;
  }
  // A fetch or a peer's bytes fill it next: its pages are allocated and mapped in one call here
  // instead of one fault per page as they are written (a fifth of a worker's time when it takes in
  // replicas). Pages a freed block left are mapped already; before Linux 5.14 this does nothing.
  (void)::madvise(arenas_[e.arena]->base + e.offset, e.bytes, MADV_POPULATE_WRITE);
  return ViewOf(e);
}

void ShmArena::Unpublish(const Block& block) {
  MutexLock lock(&mu_);
  auto it = live_.find(block.data());
  if (it == live_.end() || it->second.slot == kNoSlot) return;
  auto& slot = reinterpret_cast<shm::Slot*>(index_ + sizeof(shm::Header))[it->second.slot];
  uint64_t state = slot.state.load(std::memory_order_relaxed);
  slot.state.store(state & ~shm::kValid, std::memory_order_seq_cst);
}

void ShmArena::Released(const char* data) {
  MutexLock lock(&mu_);
  auto it = live_.find(data);
  if (it == live_.end()) return;
  Extent e = it->second;
  live_.erase(it);
  if (e.slot == kNoSlot) {
    fresh_bytes_ -= e.bytes;
    --fresh_blocks_;
    Free(e);
    return;
  }
  auto& slot = reinterpret_cast<shm::Slot*>(index_ + sizeof(shm::Header))[e.slot];
  uint64_t state = slot.state.load(std::memory_order_relaxed);
  if ((state & shm::kValid) != 0) slot.state.store(state & ~shm::kValid, std::memory_order_seq_cst);
  published_bytes_ -= e.bytes;
  if (Anchored(e.slot)) {
    deferred_.push_back(e);
    deferred_bytes_ += e.bytes;
    return;
  }
  Free(e);
}

bool ShmArena::Anchored(uint32_t slot) const {
  // Sequentially consistent, as the invalidation before it and a reader's anchor and second look
  // at the state: in their one order, either the reader sees the slot invalid or this sees it.
  for (const auto& s : sessions_) {
    if (s->anchors[slot].load(std::memory_order_seq_cst) != 0) return true;
  }
  return false;
}

void ShmArena::Free(const Extent& e) {
  if (e.slot != kNoSlot) slot_used_[e.slot] = false;
  auto& free = arenas_[e.arena]->free;
  uint64_t offset = e.offset, bytes = e.bytes;
  auto next = free.lower_bound(offset);
  if (next != free.end() && offset + bytes == next->first) {
    bytes += next->second;
    next = free.erase(next);
  }
  if (next != free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += bytes;
      return;
    }
  }
  free[offset] = bytes;
}

uint64_t ShmArena::ReclaimLocked() {
  uint64_t freed = 0;
  for (size_t i = 0; i < deferred_.size();) {
    if (Anchored(deferred_[i].slot)) {
      ++i;
      continue;
    }
    Free(deferred_[i]);
    freed += deferred_[i].bytes;
    deferred_bytes_ -= deferred_[i].bytes;
    deferred_[i] = deferred_.back();
    deferred_.pop_back();
  }
  return freed;
}

uint64_t ShmArena::Reclaim() {
  MutexLock lock(&mu_);
  return ReclaimLocked();
}

Result<ShmArena::Session> ShmArena::OpenSession() {
  auto entry = std::make_unique<SessionEntry>();
  entry->bytes = shm::AnchorBytes(slot_count_);
  char* map = nullptr;
  LC_ASSIGN_OR_RETURN(entry->fd, SealedMemfd("lakecache-anchors", entry->bytes, &map));
  entry->anchors = reinterpret_cast<shm::Anchor*>(map);
  MutexLock lock(&mu_);
  if (sessions_.size() >= max_sessions_) {
    return Status::Unavailable("too many mounts and native readers share this worker's memory (" +
                               std::to_string(max_sessions_) + ")");
  }
  entry->id = next_session_++;
  Session session{entry->id, entry->fd};
  sessions_.push_back(std::move(entry));
  return session;
}

void ShmArena::CloseSession(uint64_t id) {
  std::unique_ptr<SessionEntry> gone;  // unmapped outside the lock
  MutexLock lock(&mu_);
  for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
    if ((*it)->id == id) {
      gone = std::move(*it);
      sessions_.erase(it);
      break;
    }
  }
  ReclaimLocked();
}

ShmArenaStats ShmArena::Stats() const {
  MutexLock lock(&mu_);
  ShmArenaStats s;
  s.published_blocks = live_.size() - fresh_blocks_;
  s.fresh_bytes = fresh_bytes_;
  s.published_bytes = published_bytes_;
  s.deferred_bytes = deferred_bytes_;
  s.sessions = sessions_.size();
  s.publish_failures = publish_failures_;
  s.arena_bytes = arena_bytes_ * arenas_.size();
  s.reserved_huge_pages = reserved_huge_pages_;
  return s;
}

}  // namespace lakecache
