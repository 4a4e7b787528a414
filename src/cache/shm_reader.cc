#include "cache/shm_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

namespace lakecache {
namespace {

constexpr uint64_t kFaultGranule = shm::kPage;  // extents start on a page
constexpr uint32_t kMaxArenas = 4096;

Status Errno(const std::string& what) {
  return Status::IoError(what + ": " + std::strerror(errno));
}

// The size of a segment sealed against shrinking and growing.
Result<uint64_t> SealedSize(int fd, const char* what) {
  int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0) return Errno(std::string("shared memory ") + what + " is not a memfd");
  if ((seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW)) {
    return Status::InvalidArgument(std::string("shared memory ") + what +
                                   " is not sealed against resizing");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Errno(std::string("fstat of shared memory ") + what);
  return static_cast<uint64_t>(st.st_size);
}

Result<char*> MapFd(int fd, uint64_t bytes, int prot) {
  void* m = ::mmap(nullptr, bytes, prot, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) return Errno("cannot map shared memory");
  return static_cast<char*>(m);
}

}  // namespace

Result<std::shared_ptr<ShmReader>> ShmReader::Map(ShmFds fds, bool prefault) {
  std::shared_ptr<ShmReader> r(new ShmReader());
  // Owned from here: the destructor closes and unmaps whatever was set up.
  r->prefault_ = prefault;
  r->index_fd_ = fds.index;
  r->anchors_fd_ = fds.anchors;
  r->session_fd_ = fds.session;
  r->arena_fds_ = std::move(fds.arenas);
  LC_ASSIGN_OR_RETURN(uint64_t index_size, SealedSize(r->index_fd_, "index"));
  if (index_size < sizeof(shm::Header)) return Status::InvalidArgument("shared index too small");
  LC_ASSIGN_OR_RETURN(char* index, MapFd(r->index_fd_, index_size, PROT_READ));
  r->index_ = index;
  r->index_bytes_ = index_size;
  const auto* header = reinterpret_cast<const shm::Header*>(index);
  if (header->magic != shm::kMagic || header->version != shm::kVersion) {
    return Status::InvalidArgument("shared index of another format (version " +
                                   std::to_string(header->version) + ")");
  }
  uint32_t slots = header->slot_count;
  if (slots == 0 || slots % shm::kBucketSlots != 0 || shm::IndexBytes(slots) > index_size ||
      header->arena_count != r->arena_fds_.size() || header->arena_count > kMaxArenas ||
      header->arena_bytes == 0 || header->arena_bytes % shm::kPage != 0) {
    return Status::InvalidArgument("shared index header does not match its segments");
  }
  r->slot_count_ = slots;
  r->slots_ = reinterpret_cast<const shm::Slot*>(index + sizeof(shm::Header));
  LC_ASSIGN_OR_RETURN(uint64_t anchor_size, SealedSize(r->anchors_fd_, "anchors"));
  if (anchor_size < shm::AnchorBytes(slots)) {
    return Status::InvalidArgument("shared anchor segment too small");
  }
  LC_ASSIGN_OR_RETURN(char* anchors, MapFd(r->anchors_fd_, anchor_size, PROT_READ | PROT_WRITE));
  r->anchors_ = reinterpret_cast<shm::Anchor*>(anchors);
  r->anchor_bytes_ = anchor_size;
  r->arena_bytes_ = header->arena_bytes;
  r->mapped_bytes_ = index_size + anchor_size;
  for (int fd : r->arena_fds_) {
    LC_ASSIGN_OR_RETURN(uint64_t size, SealedSize(fd, "arena"));
    if (size != r->arena_bytes_) return Status::InvalidArgument("shared arena of the wrong size");
    LC_ASSIGN_OR_RETURN(char* base, MapFd(fd, size, PROT_READ));
    r->arenas_.push_back(base);
    r->mapped_bytes_ += size;
    size_t words = (size / kFaultGranule + 63) / 64;
    r->faulted_.push_back(std::make_unique<std::atomic<uint64_t>[]>(words));
  }
  return r;
}

ShmReader::~ShmReader() {
  for (const char* base : arenas_) ::munmap(const_cast<char*>(base), arena_bytes_);
  if (anchors_ != nullptr) ::munmap(anchors_, anchor_bytes_);
  if (index_ != nullptr) ::munmap(const_cast<char*>(index_), index_bytes_);
  for (int fd : arena_fds_) ::close(fd);
  if (anchors_fd_ >= 0) ::close(anchors_fd_);
  if (index_fd_ >= 0) ::close(index_fd_);
  if (session_fd_ >= 0) ::close(session_fd_);  // last: the worker may reuse the memory now
}

const shm::Slot* ShmReader::Lookup(const BlockKey& key, uint32_t* at) const {
  uint32_t start = shm::BucketStart(key, slot_count_);
  for (uint32_t i = start; i < start + shm::kBucketSlots; ++i) {
    const shm::Slot& slot = slots_[i];
    if ((slot.state.load(std::memory_order_acquire) & shm::kValid) == 0) continue;
    if (!shm::SlotHolds(slot, key)) continue;
    *at = i;
    return &slot;
  }
  return nullptr;
}

bool ShmReader::Contains(const BlockKey& key) const {
  uint32_t at = 0;
  return !closed() && Lookup(key, &at) != nullptr;
}

BlockRef ShmReader::Find(const BlockKey& key) {
  if (closed()) return nullptr;
  uint32_t start = shm::BucketStart(key, slot_count_);
  for (uint32_t i = start; i < start + shm::kBucketSlots; ++i) {
    const shm::Slot& slot = slots_[i];
    uint64_t state = slot.state.load(std::memory_order_acquire);
    if ((state & shm::kValid) == 0 || !shm::SlotHolds(slot, key)) continue;
    // Sequentially consistent, as the worker's invalidation and its reading of the anchors: in
    // their one order, either this anchor is seen or the invalidation is.
    anchors_[i].fetch_add(1, std::memory_order_seq_cst);
    if (slot.state.load(std::memory_order_seq_cst) != state || !shm::SlotHolds(slot, key)) {
      anchors_[i].fetch_sub(1, std::memory_order_release);
      continue;
    }
    uint32_t arena = slot.arena.load(std::memory_order_relaxed);
    uint64_t offset = slot.offset.load(std::memory_order_relaxed);
    uint64_t length = slot.length.load(std::memory_order_relaxed);
    if (arena >= arenas_.size() || offset > arena_bytes_ || length > arena_bytes_ - offset) {
      anchors_[i].fetch_sub(1, std::memory_order_release);  // a slot out of bounds: never read it
      continue;
    }
    if (prefault_) Prefault(arena, offset, length);
    hits_.fetch_add(1, std::memory_order_relaxed);
    return Block::View(
        const_cast<char*>(arenas_[arena] + offset), length,
        [self = shared_from_this(), i] {
          self->anchors_[i].fetch_sub(1, std::memory_order_release);
        },
        arena_fds_[arena], offset);
  }
  return nullptr;
}

void ShmReader::Prefault(uint32_t arena, uint64_t offset, uint64_t length) {
  if (length == 0) return;
  std::atomic<uint64_t>* bits = faulted_[arena].get();
  uint64_t first = offset / kFaultGranule, last = (offset + length - 1) / kFaultGranule;
  bool all = true;
  for (uint64_t g = first; g <= last && all; ++g) {
    all = (bits[g / 64].load(std::memory_order_relaxed) >> (g % 64) & 1) != 0;
  }
  if (all) return;
  uint64_t begin = offset / shm::kPage * shm::kPage;
  // Advice only: on failure the pages fault in as they are read.
  ::madvise(const_cast<char*>(arenas_[arena]) + begin, offset + length - begin, MADV_POPULATE_READ);
  for (uint64_t g = first; g <= last; ++g) {
    bits[g / 64].fetch_or(1ull << (g % 64), std::memory_order_relaxed);
  }
}

}  // namespace lakecache
