// Unmounting a lakecache mount, and waiting until the processes that served it are gone.
//
// A mount is two processes (mount/mount_holder.h): its holder and its server. The kernel drops a
// mount at once, but both take a moment to notice and exit, and until the holder has, its socket
// answers: a `mount` of the same folder then finds "a holder already listens". So their pids are
// read while the mount is there, from their own sockets (SO_PEERCRED on a connection that sends
// nothing, which each takes for a peer that came and went), and after the unmount each is waited
// for on a pidfd. For the CLI's main thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/scoped_fd.h"

namespace lakecache::cli {

// The processes of one mount, found while it is mounted. Owns their pidfds.
class MountProcesses {
 public:
  // The holder (at HolderSocketPath) and the server (at ControlSocketPath) of the mount at
  // `mountpoint` (normalized), those that answer: a `lakecache holder` listens elsewhere, a
  // restarting server has no socket yet, and a process in another pid namespace has no pid here.
  static MountProcesses Find(const std::string& mountpoint);

  MountProcesses() = default;
  MountProcesses(MountProcesses&& other) noexcept = default;
  MountProcesses& operator=(MountProcesses&&) = delete;
  MountProcesses(const MountProcesses&) = delete;

  // Waits until every one has exited, at most `limit`; once `patience` has passed, says on stderr
  // which it still waits for. kDeadlineExceeded naming those still running after `limit`.
  Status WaitForExit(std::chrono::milliseconds patience = std::chrono::seconds(2),
                     std::chrono::milliseconds limit = std::chrono::seconds(30));

 private:
  struct Process {
    pid_t pid = 0;
    ScopedFd pidfd;
    const char* role = "";  // "holder", "server"
  };
  std::vector<Process> processes_;
};

enum class Detach {
  kNever,   // a busy mount stays mounted, and that is an error
  kIfBusy,  // a busy mount is detached lazily
  kAlways,  // detached lazily at once (a dead mount, which any access would fail)
};

struct Unmounted {
  // Detached: gone from the tree at once, while its connection lasts until the last process
  // using it lets go (that process's calls fail once its servers are gone).
  bool lazily = false;
  std::string
      busy;  // why a normal unmount failed: who uses it (see MountUsers), or the kernel's word
};

// Unmounts the FUSE mount at `mountpoint`: root with umount2, anyone else by running
// `fusermount3 -u` (a child waited for; what it said goes into the error). A busy mount is
// kUnavailable naming who uses it, unless `detach` says to detach it; a path that is not a mount
// is kInvalidArgument.
Result<Unmounted> UnmountFuse(const std::string& mountpoint, Detach detach);

// "pid 12 (bash) has its working folder there; pid 40 (python3) has a file open there": what keeps
// the mount at `mountpoint` (normalized) busy, as far as /proc shows it; empty when nothing is
// seen.
std::string MountUsers(const std::string& mountpoint);

}  // namespace lakecache::cli
