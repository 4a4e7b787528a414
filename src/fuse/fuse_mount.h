// FuseMount: serves a FileSystem at a mountpoint through libfuse3's low-level API.
//
// A thin adapter: every request goes to the FileSystem, whose Status becomes the reply's errno
// (errno_map.h). The mount is "rw" when the FileSystem may write (FuseMountOptions::read_only
// false), else "ro". Multi-threaded, reads of up to 1 MiB, readdirplus. Entry and attribute
// timeouts come from the FileSystem (the namespace's metadata TTL). Run() blocks until the file
// system is unmounted or the process gets SIGTERM/SIGINT, then unmounts. One FuseMount per process.
// The parts: fuse_ops.h (the request handlers), fuse_takeover.cc (INIT replay, lost requests),
// session_pool.h (the threads over an adopted connection's descriptors).
#pragma once

#include <pthread.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/metrics.h"
#include "common/mutex.h"
#include "common/result.h"
#include "common/scoped_fd.h"
#include "common/status.h"
#include "fs/file_system.h"
#include "fuse/readdirplus_policy.h"

struct fuse_session;
struct fuse_lowlevel_ops;

namespace lakecache {

struct FuseContext;

struct FuseMountOptions {
  bool allow_other = false;
  bool default_permissions = true;
  std::string fs_name = "lakecache";  // shown in /proc/mounts
  bool read_only = true;              // "ro": the kernel refuses every change
  unsigned max_threads = 16;
  // The kernel's read-ahead for the mount, set at the first open (as root; see fuse_mount.cc);
  // 0: the kernel's default is kept.
  uint64_t kernel_read_ahead = 1ull << 20;
  // Non-null: each request's duration and errors by operation, and the bytes read and written
  // (lakecache_fuse_*), are recorded there. Must outlive the FuseMount.
  metrics::Registry* metrics = nullptr;
  // Replies of bytes that live in a file (a co-located worker's shared memory) are spliced from
  // it (FUSE_CAP_SPLICE_WRITE); false: copied from the mapping (`-o nosplice`, for measuring).
  bool splice = true;
  // A takeover asks the kernel to resend what the previous server left unanswered where the
  // kernel can (6.9 and later); false: serves as on an older kernel (`-o noresend`, for tests).
  bool kernel_resend = true;
  // Which entries of a listing go with their attributes (readdirplus_policy.h; `-o readdirplus=`).
  ReaddirplusMode readdirplus = ReaddirplusMode::kAdaptive;
  // The most inodes the kernel may hold of this mount: beyond it, the mount asks the kernel to
  // forget held files (inode_trimmer.h). 0: as many as the kernel keeps.
  uint64_t kernel_inodes = 0;
};

// The mount options string FuseMount mounts with ("ro,fsname=...,max_read=..."; "rw,..." when
// not read_only); a connection held by another process must have been mounted with the same.
std::string FuseMountOptionString(const FuseMountOptions& options);

// A libfuse session with the mount options `opts` (as FuseMountOptionString makes them), calling
// `ops` with `userdata`; null when libfuse refuses the options. Frees what parsing them allocated.
fuse_session* NewFuseSession(const std::string& opts, const fuse_lowlevel_ops& ops, void* userdata);

// The kernel's INIT request of a connection (its in-header and fuse_init_in, as read from
// /dev/fuse) and the option string it was mounted with: what a later server of the same connection
// replays before it serves, since the kernel sends INIT only once.
struct FuseInit {
  std::string request;
  std::string options;
};
// A FuseInit as bytes (a versioned header, the options, the request), and back; a blob that is
// not one is InvalidArgument.
std::string EncodeFuseInit(const FuseInit& init);
Result<FuseInit> DecodeFuseInit(std::string_view blob);
// The kernel can resend the requests a dead server had read but not answered (FUSE_HAS_RESEND in
// the INIT's flags2; Linux 6.9 and later).
bool KernelResends(const FuseInit& init);

class FuseMount {
 public:
  FuseMount(std::shared_ptr<FileSystem> fs, FuseMountOptions options);
  ~FuseMount();

  // Mounts at `mountpoint`. After success the mount is visible; call Run to serve it.
  Status Mount(const std::string& mountpoint);
  // Serves the connection `fuse_fd` (an open /dev/fuse descriptor another process mounted and
  // holds; this one takes it over and closes it at the end). With `init` (the connection's INIT, as
  // a previous server captured it) Run replays it before it reads anything, then asks the kernel to
  // resend what the previous server left unanswered; an `init` mounted with other options is
  // refused. Without, Run captures the INIT it reads first and hands it to `on_init`. Run never
  // unmounts an adopted connection: its holder does.
  // `mountpoint` is where the connection is mounted (for the takeover's own first request).
  Status Adopt(int fuse_fd, const std::string& mountpoint, const FuseInit* init,
               std::function<void(const FuseInit&)> on_init = nullptr);
  // The same over the connection's descriptor and clones of it the holder keeps as well
  // (FUSE_DEV_IOC_CLONE): a session per descriptor, all read by one pool of threads, so requests
  // are read in parallel as with libfuse's clone_fd, yet none read on a clone dies with this
  // process (the kernel resends them from every descriptor of the connection).
  Status Adopt(std::vector<int> fuse_fds, const std::string& mountpoint, const FuseInit* init,
               std::function<void(const FuseInit&)> on_init = nullptr);
  // Serves requests until unmounted or signalled; then unmounts (a mount of its own).
  Status Run();
  // Makes Run return (from any thread): requests being served are answered, the rest stay in the
  // kernel for the connection's next server. Safe before Run starts.
  void Stop();

 private:
  Status NewSession();
  // Where and to what the first open raises the kernel's read-ahead (FuseContext).
  void SetReadAhead(const std::string& mountpoint);
  Status RunSessions();
  // The first request of an adopted connection: the replayed INIT, or the one read and captured.
  Status StartAdopted();
  Status AnswerLostRequests();

  std::shared_ptr<FileSystem> fs_;
  FuseMountOptions options_;
  std::unique_ptr<FuseContext> context_;  // every session's userdata
  fuse_session* session_ = nullptr;
  // Sessions on the clones of an adopted connection's descriptor, read by the same threads.
  std::vector<fuse_session*> clones_;
  bool mounted_ = false;
  bool adopted_ = false;
  std::string adopted_mountpoint_;
  FuseInit init_;  // adopted: the INIT to replay (empty request: capture one)
  std::function<void(const FuseInit&)> on_init_;
  std::atomic<bool> stop_{false};
  ScopedFd wake_fd_;  // an eventfd: Stop wakes a session pool's wait
  Mutex run_mu_;
  CondVar run_done_;  // Run has returned
  bool running_ GUARDED_BY(run_mu_) = false;
  pthread_t run_thread_ GUARDED_BY(run_mu_){};
};

}  // namespace lakecache
