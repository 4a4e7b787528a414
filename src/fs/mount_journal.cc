#include "fs/mount_journal.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <malloc.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <string_view>
#include <unordered_map>

namespace lakecache {
namespace {

// A record: u32 length of what follows the 8-byte head, u32 XXH32 of it, then a type byte and
// the fields (u64 little-endian, strings as u32 length and bytes).
enum RecordType : uint8_t { kInode = 1, kOpen = 2, kRelease = 3, kForget = 4 };
constexpr size_t kHead = 8;
constexpr uint32_t kMaxRecord = 1 << 20;

void PutU64(std::string* out, uint64_t v) { out->append(reinterpret_cast<const char*>(&v), 8); }
void PutString(std::string* out, const std::string& s) {
  uint32_t n = static_cast<uint32_t>(s.size());
  out->append(reinterpret_cast<const char*>(&n), 4);
  out->append(s);
}

std::string Framed(const std::string& body) {
  uint32_t len = static_cast<uint32_t>(body.size());
  uint32_t sum = XXH32(body.data(), body.size(), 0);
  std::string record(reinterpret_cast<const char*>(&len), 4);
  record.append(reinterpret_cast<const char*>(&sum), 4);
  return record + body;
}

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool U64(uint64_t* v) {
    if (in_.size() < 8) return false;
    std::memcpy(v, in_.data(), 8);
    in_.remove_prefix(8);
    return true;
  }
  bool String(std::string* s) {
    uint32_t n = 0;
    if (in_.size() < 4) return false;
    std::memcpy(&n, in_.data(), 4);
    in_.remove_prefix(4);
    if (in_.size() < n) return false;
    s->assign(in_.data(), n);
    in_.remove_prefix(n);
    return true;
  }

 private:
  std::string_view in_;
};

std::string InodeRecord(const MountJournal::Inode& inode) {
  std::string body(1, static_cast<char>(kInode));
  PutU64(&body, inode.ino);
  PutU64(&body, inode.is_dir ? 1 : 0);
  PutString(&body, inode.ns);
  PutString(&body, inode.path);
  return Framed(body);
}

std::string OpenRecord(const MountJournal::OpenFile& open) {
  std::string body(1, static_cast<char>(kOpen));
  PutU64(&body, open.fh);
  PutU64(&body, open.ino);
  PutString(&body, open.etag);
  PutU64(&body, open.size);
  return Framed(body);
}

// Drops from this process's page tables the pages of `map` from *dropped up to a `window` short
// of `at` (whole windows), once `at` is two windows past *dropped: the pages stay the file's.
void DropPagesBehind(char* map, uint64_t at, uint64_t window, uint64_t* dropped) {
  if (at < *dropped + 2 * window) return;
  const uint64_t behind = at / window * window - window;
  ::madvise(map + *dropped, behind - *dropped, MADV_DONTNEED);
  *dropped = behind;
}

// Calls fn(type, body, offset) for each whole record of `log` in order, up to the first that is
// cut short or does not check (where the log ends); returns where that is.
template <typename Fn>
uint64_t ForEachRecord(std::string_view log, Fn&& fn) {
  uint64_t at = 0;
  while (at + kHead <= log.size()) {
    uint32_t len = 0, sum = 0;
    std::memcpy(&len, log.data() + at, 4);
    std::memcpy(&sum, log.data() + at + 4, 4);
    if (len == 0 || len > kMaxRecord || at + kHead + len > log.size()) break;
    std::string_view body = log.substr(at + kHead, len);
    if (XXH32(body.data(), body.size(), 0) != sum) break;  // cut short by a kill: the log ends
    fn(static_cast<uint8_t>(body[0]), body, at);
    at += kHead + len;
  }
  return at;
}

// The inode or handle a record is about: its first field (every kind has one), 0 if it is short.
uint64_t IdOf(std::string_view body) {
  uint64_t id = 0;
  if (body.size() >= 9) std::memcpy(&id, body.data() + 1, 8);
  return id;
}

Status WriteAll(int fd, std::string_view bytes, uint64_t at) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n =
        ::pwrite(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(at + done));
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return Status::IoError(std::string("mount journal: ") + std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

// What the log in `fd` says: inodes in order, files still open, and where its valid part ends.
Status MountJournal::Parse(int fd, std::vector<Inode>* inodes, std::vector<OpenFile>* open_files,
                           uint64_t* max_fh, uint64_t* end) {
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    return Status::IoError(std::string("mount journal: ") + std::strerror(errno));
  }
  std::string data(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < data.size()) {
    ssize_t n = ::pread(fd, data.data() + got, data.size() - got, static_cast<off_t>(got));
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  std::map<uint64_t, OpenFile> open;
  // inode -> its latest record in `inodes`: hashed, for a journal of millions of records.
  std::unordered_map<uint64_t, size_t> held;
  held.reserve(got / 64);
  std::vector<bool> live;  // by record in `inodes`
  size_t first = inodes->size();
  uint64_t at = ForEachRecord(
      std::string_view(data.data(), got), [&](uint8_t type, std::string_view body, uint64_t) {
        Reader r(body.substr(1));
        switch (type) {
          case kInode: {
            Inode i;
            uint64_t is_dir = 0;
            if (r.U64(&i.ino) && r.U64(&is_dir) && r.String(&i.ns) && r.String(&i.path)) {
              i.is_dir = is_dir != 0;
              if (auto it = held.find(i.ino); it != held.end()) live[it->second] = false;
              held[i.ino] = live.size();
              live.push_back(true);
              inodes->push_back(std::move(i));
            }
            break;
          }
          case kForget: {
            uint64_t ino = 0;
            if (r.U64(&ino)) {
              if (auto it = held.find(ino); it != held.end()) {
                live[it->second] = false;
                held.erase(it);
              }
            }
            break;
          }
          case kOpen: {
            OpenFile f;
            if (r.U64(&f.fh) && r.U64(&f.ino) && r.String(&f.etag) && r.U64(&f.size)) {
              *max_fh = std::max(*max_fh, f.fh);
              open[f.fh] = std::move(f);
            }
            break;
          }
          case kRelease: {
            uint64_t fh = 0;
            if (r.U64(&fh)) open.erase(fh);
            break;
          }
          default:
            break;
        }
      });
  for (auto& [fh, f] : open) open_files->push_back(std::move(f));
  // Only the inodes still held, in the order of their latest records.
  std::vector<Inode> kept;
  kept.reserve(held.size());
  for (size_t record = 0; record < live.size(); ++record) {
    if (live[record]) kept.push_back(std::move((*inodes)[first + record]));
  }
  inodes->resize(first);
  for (Inode& i : kept) inodes->push_back(std::move(i));
  *end = at;  // a torn tail is overwritten
  return Status::Ok();
}

Result<std::unique_ptr<MountJournal>> MountJournal::Open(int fd) {
  std::unique_ptr<MountJournal> journal(new MountJournal(fd));
  uint64_t end = 0;
  LC_RETURN_IF_ERROR(Parse(fd, &journal->inodes_, &journal->open_files_, &journal->max_fh_, &end));
  MutexLock lock(&journal->mu_);
  journal->end_ = end;
  if (Status s = journal->MapLocked(); !s.ok()) spdlog::warn("{}", s.message());
  journal->live_bytes_ = end;
  return journal;
}

MountJournal::~MountJournal() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    wake_.Signal();
  }
  if (compactor_.joinable()) compactor_.join();
  MutexLock lock(&mu_);
  Unmap();
  ::close(fd_);
}

// Appends are copies into the memfd's pages, mapped once (a reservation of kMapSize, of which
// only what is written is backed), rather than a write(2) each: the lock is held for a copy, so
// the FUSE threads opening and releasing files at once hardly ever wait on it.
Status MountJournal::MapLocked() {
  void* map = ::mmap(nullptr, kMapSize, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd_, 0);
  if (map == MAP_FAILED)
    return Status::IoError(std::string("mount journal: mmap: ") + std::strerror(errno));
  map_ = static_cast<char*>(map);
  unmapped_ = 0;
  struct statfs fs;
  on_disk_ = ::fstatfs(fd_, &fs) == 0 && fs.f_type != TMPFS_MAGIC && fs.f_type != HUGETLBFS_MAGIC;
  struct stat st;
  capacity_ = ::fstat(fd_, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  return Status::Ok();
}

void MountJournal::Unmap() {
  if (map_ != nullptr) ::munmap(map_, kMapSize);
  map_ = nullptr;
  capacity_ = 0;
}

void MountJournal::SetCompaction(std::function<Status(int fd)> hand_over, uint64_t min_bytes,
                                 std::string dir) {
  MutexLock lock(&mu_);
  hand_over_ = std::move(hand_over);
  min_compaction_bytes_ = min_bytes;
  dir_ = std::move(dir);
  if (!compactor_.joinable()) compactor_ = std::thread([this] { CompactLoop(); });
}

Result<std::string> MountJournal::Snapshot(int fd, uint64_t upto) {
  if (upto == 0) return std::string();
  void* map = ::mmap(nullptr, upto, PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    return Status::IoError(std::string("mount journal: mmap: ") + std::strerror(errno));
  }
  std::string_view log(static_cast<const char*>(map), upto);
  // The pages read leave this process's page tables every 16 MiB (they stay the page cache's or
  // the memfd's): a log of gigabytes is not counted in its RSS while it is compacted.
  constexpr uint64_t kWindow = 16ull << 20;
  uint64_t dropped = 0;
  auto drop_behind = [&](uint64_t at) {
    DropPagesBehind(static_cast<char*>(map), at, kWindow, &dropped);
  };
  // Where each inode's latest record is, and each open file's; then those records, copied as
  // they are (the log holds only whole records up to `upto`: appends end there).
  std::unordered_map<uint64_t, uint64_t> held;
  held.reserve(upto / 128);
  std::unordered_map<uint64_t, uint64_t> open;
  ForEachRecord(log, [&](uint8_t type, std::string_view body, uint64_t at) {
    drop_behind(at);
    auto& latest = type == kInode || type == kForget ? held : open;
    if (type == kInode || type == kOpen) {
      latest[IdOf(body)] = at;
    } else if (type == kForget || type == kRelease) {
      latest.erase(IdOf(body));
    }
  });
  std::string out, files;
  dropped = 0;
  ForEachRecord(log, [&](uint8_t type, std::string_view body, uint64_t at) {
    drop_behind(at);
    const uint64_t id = IdOf(body);
    std::string_view record = log.substr(at, kHead + body.size());
    if (type == kInode) {
      if (auto it = held.find(id); it != held.end() && it->second == at) out.append(record);
    } else if (type == kOpen) {
      if (auto it = open.find(id); it != open.end() && it->second == at) files.append(record);
    }
  });
  ::munmap(map, upto);
  out.append(files);
  return out;
}

Result<int> MountJournal::NewLogLocked() {
  if (!dir_.empty()) {
    int fd = ::open(dir_.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0) return fd;
    spdlog::warn("mount journal: no unnamed file in {} ({}); it stays in memory", dir_,
                 std::strerror(errno));
    dir_.clear();
  }
  int fd = ::memfd_create("lakecache-mount-journal", MFD_CLOEXEC);
  if (fd < 0) return Status::IoError(std::string("memfd_create: ") + std::strerror(errno));
  return fd;
}

Status MountJournal::SwapLocked(std::string snapshot, uint64_t upto) {
  // The records appended while the snapshot was made follow it, as they were (written after
  // it, not appended to it: no copy of a snapshot of hundreds of MB).
  std::string since(end_ - upto, '\0');
  if (!since.empty() && ::pread(fd_, since.data(), since.size(), static_cast<off_t>(upto)) !=
                            static_cast<ssize_t>(since.size())) {
    return Status::IoError(std::string("mount journal: read: ") + std::strerror(errno));
  }
  LC_ASSIGN_OR_RETURN(int fd, NewLogLocked());
  Status s = WriteAll(fd, snapshot, 0);
  if (s.ok()) s = WriteAll(fd, since, snapshot.size());
  int handed = s.ok() ? ::dup(fd) : -1;
  if (s.ok() && handed < 0) s = Status::IoError(std::string("dup: ") + std::strerror(errno));
  // The holder keeps the old log until it has the new one whole: a kill in between loses nothing.
  if (s.ok()) s = hand_over_(handed);
  if (!s.ok()) {
    ::close(fd);
    return s;
  }
  Unmap();
  ::close(fd_);
  fd_ = fd;
  end_ = snapshot.size() + since.size();
  if (Status mapped = MapLocked(); !mapped.ok()) spdlog::warn("{}", mapped.message());
  live_bytes_ = end_;  // what the estimate missed (inodes looked up twice, say) is dropped now
  ++compactions_;
  return Status::Ok();
}

void MountJournal::CompactLoop() {
  while (true) {
    int fd;
    uint64_t upto;
    {
      MutexLock lock(&mu_);
      while (!compacting_ && !stopping_) wake_.Wait(&mu_);
      if (stopping_) return;
      fd = fd_;  // replaced by this thread, or while none runs (CopyLocked on a full disk)
      upto = end_;
    }
    {
      Result<std::string> snapshot = Snapshot(fd, upto);
      MutexLock lock(&mu_);
      uint64_t before = end_;
      Status s = !snapshot.ok() ? snapshot.status()
                 : failed_      ? Status::Ok()
                                : SwapLocked(std::move(*snapshot), upto);
      if (!s.ok()) {
        spdlog::warn("mount journal: compaction failed: {}", s.message());
        live_bytes_ = end_;  // try again when it has grown as much again
      } else {
        spdlog::debug("mount journal: compacted {} bytes to {}", before, end_);
      }
      compacting_ = false;
      compacted_.SignalAll();
    }
    // The maps of millions of small nodes are free now, but below malloc's mmap threshold, so
    // free() keeps their pages: hand them back now rather than at the next periodic trim
    // (cli/main.cc), so a compaction's peak does not stay in the RSS.
    ::malloc_trim(0);
  }
}

void MountJournal::WaitForCompaction() {
  MutexLock lock(&mu_);
  while (compacting_) compacted_.Wait(&mu_);
}

void MountJournal::Append(const std::string& record) {
  MutexLock lock(&mu_);
  if (failed_) return;
  if (Status s = CopyLocked(record); !s.ok()) {
    spdlog::warn("{}; a restart of this mount's server will not keep its state", s.message());
    failed_ = true;
    return;
  }
  end_ += record.size();
  // What the log would hold compacted: an inode's or an open file's record adds itself; a forget
  // or a release takes off what such a record takes on average (the forgotten one is not looked
  // up).
  const auto type = static_cast<uint8_t>(record[kHead]);
  if (type == kInode || type == kOpen) {
    live_bytes_ += record.size();
    (type == kInode ? inode_records_ : open_records_).Add(record.size());
  } else {
    const RecordSizes& of = type == kForget ? inode_records_ : open_records_;
    live_bytes_ -= std::min(live_bytes_, of.Average());
  }
  // Compacted when at least half of it is dead: memory stays within twice what is live.
  if (hand_over_ && !compacting_ && end_ > std::max(min_compaction_bytes_, 2 * live_bytes_)) {
    compacting_ = true;
    wake_.Signal();
  }
}

Status MountJournal::CopyLocked(std::string_view record) {
  if (map_ == nullptr || end_ + record.size() > kMapSize) return WriteAll(fd_, record, end_);
  if (end_ + record.size() > capacity_) {
    uint64_t grown = (end_ + record.size() + kGrowth - 1) / kGrowth * kGrowth;
    // The log's blocks (or a memfd's pages) are allocated now: a store into a hole of a full
    // disk would be a SIGBUS, this is an error of the append.
    int err = ::posix_fallocate(fd_, static_cast<off_t>(capacity_),
                                static_cast<off_t>(grown - capacity_));
    if (err != 0 && !dir_.empty() && compacting_) {
      // A compaction is replacing this log: wait for it (it takes the lock to end), then try
      // again with what it left, perhaps a smaller log.
      while (compacting_ && !stopping_) compacted_.Wait(&mu_);
      if (!compacting_) return CopyLocked(record);
    }
    if (err != 0 && !dir_.empty()) {
      // A full disk: the log moves to memory, whole, and stays there.
      spdlog::warn("mount journal: {} is full ({}); the journal moves to memory", dir_,
                   std::strerror(err));
      dir_.clear();
      LC_RETURN_IF_ERROR(SwapLocked("", 0));
      return CopyLocked(record);
    }
    if (err != 0) {
      return Status::IoError(std::string("mount journal: growing the log: ") + std::strerror(err));
    }
    capacity_ = grown;
    if (on_disk_) DropPagesBehind(map_, end_, kGrowth, &unmapped_);
  }
  std::memcpy(map_ + end_, record.data(), record.size());
  return Status::Ok();
}

uint64_t MountJournal::compactions() const {
  MutexLock lock(&mu_);
  return compactions_;
}

void MountJournal::AddInode(const Inode& inode) { Append(InodeRecord(inode)); }

void MountJournal::AddOpen(const OpenFile& open) { Append(OpenRecord(open)); }

void MountJournal::AddForget(uint64_t ino) {
  std::string body(1, static_cast<char>(kForget));
  PutU64(&body, ino);
  Append(Framed(body));
}

void MountJournal::AddRelease(uint64_t fh) {
  std::string body(1, static_cast<char>(kRelease));
  PutU64(&body, fh);
  Append(Framed(body));
}

}  // namespace lakecache
