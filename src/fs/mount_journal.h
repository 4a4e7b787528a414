// MountJournal: what a mount's kernel side refers to by number, kept where the next server of the
// same FUSE connection finds it: the inode numbers it handed out (namespace and path) and the
// files open (handle, inode, object version, size). The kernel keeps using both across a restart
// of the server, so the next one replays the journal before it serves.
//
// An append-only log in a file the mount's holder keeps open (a memfd, or once compacted an
// unnamed file on the cache's disk: see SetCompaction), appended to through a shared mapping (a
// copy, no system call). Each record carries its
// length and an XXH32 of its bytes; a record cut short by a server killed while writing it, or the
// zeros after the last, end the log. Thread-safe: appends are serialized.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/result.h"

namespace lakecache {

class MountJournal {
 public:
  struct Inode {
    uint64_t ino = 0;
    bool is_dir = false;
    std::string ns;  // "" for the root of a multi-namespace mount
    std::string path;
  };
  struct OpenFile {
    uint64_t fh = 0;
    uint64_t ino = 0;
    std::string etag;
    uint64_t size = 0;
  };

  // Reads what `fd` holds (an empty file is a new journal) and appends after it. Takes `fd`.
  static Result<std::unique_ptr<MountJournal>> Open(int fd);
  ~MountJournal();
  MountJournal(const MountJournal&) = delete;
  MountJournal& operator=(const MountJournal&) = delete;

  // What the journal held when opened: inodes still held (not forgotten since), in the order of
  // their latest records; files still open.
  const std::vector<Inode>& inodes() const { return inodes_; }
  const std::vector<OpenFile>& open_files() const { return open_files_; }
  uint64_t max_fh() const { return max_fh_; }

  // Failures are logged once and the journal stops (the mount goes on; a restart loses state).
  void AddInode(const Inode& inode) EXCLUDES(mu_);
  // The kernel forgot the inode: the next server does not restore it, compaction drops it.
  void AddForget(uint64_t ino) EXCLUDES(mu_);
  void AddOpen(const OpenFile& open) EXCLUDES(mu_);
  void AddRelease(uint64_t fh) EXCLUDES(mu_);

  // Lookups, forgets, opens and releases grow the log without end: once it is `min_bytes` and
  // about twice what it would hold compacted (what it says of inodes still held and files still
  // open), a thread of the journal's writes what it says
  // to a new log, which `hand_over` gives the holder to keep (taking the descriptor) before this
  // journal moves to it. The thread reads the log with no lock held (appends go on meanwhile) and
  // takes the lock only to add the records that came since and move to the new log.
  // With `dir` (a disk's folder, beside the cache) the new log is an unnamed file there
  // (O_TMPFILE): its pages are the page cache's, which the kernel writes back and reclaims, where
  // a memfd's stay in memory for as long as the mount lives (10M inodes held: ~600 MiB). Its
  // space is allocated before it is written; when the disk is full the log moves to a memfd, whole
  // (a fault of a store into a hole cannot happen). Where `dir` takes no such file, a memfd.
  static constexpr uint64_t kMinCompactionBytes = 16 << 20;
  void SetCompaction(std::function<Status(int fd)> hand_over,
                     uint64_t min_bytes = kMinCompactionBytes, std::string dir = "") EXCLUDES(mu_);
  uint64_t compactions() const EXCLUDES(mu_);
  // Waits for a compaction under way, if any, to end (tests).
  void WaitForCompaction() EXCLUDES(mu_);

 private:
  explicit MountJournal(int fd) : fd_(fd) {}
  static Status Parse(int fd, std::vector<Inode>* inodes, std::vector<OpenFile>* open_files,
                      uint64_t* max_fh, uint64_t* end);
  void Append(const std::string& record) EXCLUDES(mu_);
  // The compaction thread: waits for compacting_, compacts, and clears it.
  void CompactLoop() EXCLUDES(mu_);
  // What the first `upto` bytes of log `fd` say, as records: the inodes still held, in the order
  // of their latest records, then the files still open.
  static Result<std::string> Snapshot(int fd, uint64_t upto);
  // A new, empty log: in dir_ if it can, else a memfd.
  Result<int> NewLogLocked() REQUIRES(mu_);
  // Moves to a new log holding `snapshot` (of the log up to `upto`) and the records since.
  Status SwapLocked(std::string snapshot, uint64_t upto) REQUIRES(mu_);
  Status MapLocked() REQUIRES(mu_);
  void Unmap() REQUIRES(mu_);
  Status CopyLocked(std::string_view record) REQUIRES(mu_);

  static constexpr uint64_t kMapSize = 1ull << 32;  // reserved, not backed
  static constexpr uint64_t kGrowth = 1 << 20;

  int fd_ GUARDED_BY(mu_);
  char* map_ GUARDED_BY(mu_) = nullptr;
  uint64_t capacity_ GUARDED_BY(mu_) = 0;  // the log's size: where the mapping is backed
  std::string dir_ GUARDED_BY(mu_);        // where compacted logs go (SetCompaction)
  // The log is a file on disk (not a memfd, not tmpfs): the pages appended to, once behind, leave
  // this process's page tables (the page cache writes them back and keeps or reclaims them), up
  // to unmapped_. A memfd's pages are memory wherever they are mapped.
  bool on_disk_ GUARDED_BY(mu_) = false;
  uint64_t unmapped_ GUARDED_BY(mu_) = 0;
  std::vector<Inode> inodes_;
  std::vector<OpenFile> open_files_;
  uint64_t max_fh_ = 0;
  mutable Mutex mu_;
  uint64_t end_ GUARDED_BY(mu_) = 0;  // where the next record goes
  // The sizes of records of one kind appended, for their average.
  struct RecordSizes {
    uint64_t count = 0, bytes = 0;
    void Add(uint64_t size) { ++count, bytes += size; }
    uint64_t Average() const { return count == 0 ? 0 : bytes / count; }
  };
  // About what the log would hold compacted.
  uint64_t live_bytes_ GUARDED_BY(mu_) = 0;
  RecordSizes inode_records_ GUARDED_BY(mu_);
  RecordSizes open_records_ GUARDED_BY(mu_);
  uint64_t min_compaction_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t compactions_ GUARDED_BY(mu_) = 0;
  std::function<Status(int fd)> hand_over_ GUARDED_BY(mu_);
  bool failed_ GUARDED_BY(mu_) = false;
  bool compacting_ GUARDED_BY(mu_) = false;  // asked for or under way
  bool stopping_ GUARDED_BY(mu_) = false;
  CondVar wake_;       // compacting_ or stopping_ was set
  CondVar compacted_;  // compacting_ was cleared
  std::thread compactor_;
};

}  // namespace lakecache
