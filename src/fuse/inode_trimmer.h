// InodeTrimmer: keeps the inodes the kernel holds of a mount near a budget
// (FuseMountOptions::kernel_inodes, `client.kernel_inodes`).
//
// The kernel keeps an inode and a dentry for every file a lookup or a readdirplus gave it until
// memory pressure makes it forget them, and the mount keeps an entry for each until it does
// (fs/held_inodes.h): a stat of 100M files would hold about 1.1 KB of the kernel's memory and 55
// bytes of the mount's per file, as far as the node's memory goes. Whenever the mount holds more
// than the budget, the trimmer asks the kernel to drop the dentries of held files, down to 15/16
// of it (FUSE_NOTIFY_INVAL_ENTRY, from a thread of its own, never a request's). A FUSE inode goes
// with its last dentry, so the kernel forgets it, and a later access looks the file up again.
// Folders stay (each goes when nothing below it is held), and so do files in use: an open file's
// dentry leaves the cache, its inode stays until the file is closed.
//
// A notification takes the folder's lock in the kernel, so it waits for requests in that folder
// to be answered: the trimmer stops notifying once the session is exiting, and a trimmer whose
// last notification still waits when it is destroyed is left to end on its own (it touches
// nothing of the mount's after it).
#pragma once

#include <cstdint>
#include <memory>

#include "common/metrics.h"
#include "fs/file_system.h"

struct fuse_session;

namespace lakecache {

class InodeTrimmer {
 public:
  // For the held inodes of `fs`, served on `session` (after its INIT), from now until destroyed.
  // budget > 0.
  InodeTrimmer(fuse_session* session, FileSystem* fs, uint64_t budget, metrics::Registry* metrics);
  ~InodeTrimmer();  // stops its thread (waits for it a moment, see above)
  InodeTrimmer(const InodeTrimmer&) = delete;
  InodeTrimmer& operator=(const InodeTrimmer&) = delete;

 private:
  struct State;  // shared with the thread, which may outlive the trimmer
  std::shared_ptr<State> state_;
};

}  // namespace lakecache
