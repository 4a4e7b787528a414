// InodeTrimmer: keeps the inodes the kernel holds of a mount near a budget
// (FuseMountOptions::kernel_inodes, `client.kernel_inodes`).
//
// The kernel keeps an inode and a dentry for every file a lookup or a readdirplus gave it until
// memory pressure makes it forget them, and the mount keeps an entry for each until it does
// (fs/held_inodes.h): a stat of 100M files would hold about 1.1 KB of the kernel's memory and 55
// bytes of the mount's per file, as far as the node's memory goes. Whenever the mount holds more
// than the budget, the trimmer asks the kernel to drop the dentries of held files, down to 15/16
// of it (fuse_lowlevel_notify_inval_entry, from a thread of its own, never a request's: the
// kernel takes the folder's lock). A FUSE inode goes with its last dentry, so the kernel forgets
// it, and a later access looks the file up again. Folders stay (each goes when nothing below it
// is held), and so do files in use: an open file's dentry leaves the cache, its inode stays until
// the file is closed.
#pragma once

#include <cstdint>
#include <thread>

#include "common/metrics.h"
#include "common/mutex.h"
#include "fs/file_system.h"

struct fuse_session;

namespace lakecache {

class InodeTrimmer {
 public:
  // Serves `session` (INIT done or coming: a notification before it is refused and retried) for
  // the held inodes of `fs`, from now until destroyed. budget > 0.
  InodeTrimmer(fuse_session* session, FileSystem* fs, uint64_t budget, metrics::Registry* metrics);
  ~InodeTrimmer();  // stops and joins its thread
  InodeTrimmer(const InodeTrimmer&) = delete;
  InodeTrimmer& operator=(const InodeTrimmer&) = delete;

 private:
  void Run();
  struct Round {
    size_t asked = 0;  // files named to the kernel
    size_t gone = 0;   // of those, the ones it had no dentry of
  };
  // Asks the kernel to forget as many held files as the mount holds beyond 15/16 of the budget
  // (the count falls as the kernel's FORGETs come).
  Round Trim();

  fuse_session* const session_;
  FileSystem* const fs_;
  const uint64_t budget_;
  metrics::Counter released_, refused_;
  Mutex mu_;
  CondVar wake_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace lakecache
