// FileWriter: one file being written through the mount: its upload, its stage and who opened it.
//
// Writes must come in order (each at the size written so far); a write anywhere else, a read of
// what is not staged, or a write after the commit is refused with the errno the contract names
// (docs/semantics.md, "Writes"). The object is committed once: at the first close by the process
// that opened the file if it wrote anything, else at the last release (see CommitsOnClose), and
// every later commit call returns that first result; a file nobody wrote that its opener closed
// is given up instead when another open writes it first (YieldIfUnused). Thread-safe (one lock
// per file).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>

#include "common/mutex.h"
#include "common/result.h"
#include "fs/object_upload.h"
#include "fs/write_stage.h"

namespace lakecache {

struct Namespace;

class FileWriter {
 public:
  // `path` is relative to `ns`; `replaces` says an object was there when the file was opened.
  FileWriter(Namespace* ns, std::string path, uint64_t ino, pid_t opener, bool replaces,
             std::unique_ptr<ObjectUpload> upload, std::unique_ptr<WriteStage> stage);

  // A write by thread `tid` (as FUSE names the caller).
  Result<size_t> Write(uint64_t offset, std::span<const char> data, pid_t tid) EXCLUDES(mu_);
  // What was written at `offset`, from the stage.
  Result<size_t> Read(uint64_t offset, std::span<char> dst) EXCLUDES(mu_);
  Status Fsync() EXCLUDES(mu_);
  // ftruncate: only to the size written, or to 0 before anything is written.
  Status Truncate(uint64_t size) EXCLUDES(mu_);

  // True when a close by process `tgid` should commit: the opener's, once it wrote something
  // itself (bytes written only by another process, a child it handed the file to, are committed
  // at the last release).
  bool CommitsOnClose(pid_t tgid) const EXCLUDES(mu_);
  // Commits the object once; `on_commit` runs (under this file's lock) with the new version and
  // the stage before anyone else can see the file committed. Later calls return the first result.
  Result<ObjectInfo> Commit(
      const std::function<void(const ObjectInfo&, const WriteStage*)>& on_commit) EXCLUDES(mu_);
  // A close by process `tgid`: once the opener has closed the file, a later open may take an
  // unused file over (YieldIfUnused).
  void NoteClose(pid_t tgid) EXCLUDES(mu_);
  // Gives the file up to a later open that writes it (`touch f` then `echo x > f`, whose release
  // the kernel sends after `touch` returned): true, and the file is dropped (no commit, later
  // writes and closes refused with EBADF), when nothing was written and its opener closed it.
  bool YieldIfUnused() EXCLUDES(mu_);
  bool yielded() const { return yielded_flag_.load(std::memory_order_acquire); }
  // Lock-free: callers that hold other locks (the file system's handle table) may ask.
  bool committed() const { return committed_flag_.load(std::memory_order_acquire); }

  Namespace* ns() const { return ns_; }
  const std::string& path() const { return path_; }
  uint64_t ino() const { return ino_; }
  bool replaces() const { return replaces_; }
  uint64_t size() const { return size_flag_.load(std::memory_order_acquire); }

 private:
  Status Refused(int err, std::string_view why) const;

  Namespace* const ns_;
  const std::string path_;
  const uint64_t ino_;
  const pid_t opener_;
  const bool replaces_;
  mutable Mutex mu_;
  std::unique_ptr<ObjectUpload> upload_ GUARDED_BY(mu_);
  std::unique_ptr<WriteStage> stage_ GUARDED_BY(mu_);
  uint64_t size_ GUARDED_BY(mu_) = 0;
  std::optional<Result<ObjectInfo>> committed_ GUARDED_BY(mu_);
  // Kept only in the stage, for one Put at the commit (UploadOptions::single_put_max), until the
  // file outgrows it; then what was staged is streamed and the rest follows in parts.
  bool stage_only_ GUARDED_BY(mu_) = false;
  Status StreamStaged() REQUIRES(mu_);
  Result<ObjectInfo> CommitFromStage() REQUIRES(mu_);
  bool opener_wrote_ GUARDED_BY(mu_) = false;
  bool opener_closed_ GUARDED_BY(mu_) = false;
  // Threads seen writing, and whether each is of the opener's process (a lookup in /proc once).
  std::unordered_map<pid_t, bool> writer_threads_ GUARDED_BY(mu_);
  std::atomic<uint64_t> size_flag_{0};  // size_, for readers without the lock
  std::atomic<bool> committed_flag_{false};
  std::atomic<bool> yielded_flag_{false};
};

// The process (thread group) of thread `tid`, as FUSE requests name the caller's thread; `tid`
// itself when /proc does not say.
pid_t ProcessOfThread(pid_t tid);

}  // namespace lakecache
