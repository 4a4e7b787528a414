// The mount's holder: a small process that keeps a mount alive while the servers that serve it
// crash, are upgraded or have their pod restarted. It mounts when the first server asks, then
// keeps the FUSE connection's descriptor, the INIT the kernel sent once, and the servers' journal
// (fs/mount_journal.h, a memfd), and hands all three (SCM_RIGHTS) to each server that
// connects. One server serves at a time: a second one is a takeover, so the first is told to stop,
// and the second gets the connection once the first has gone. A server whose FUSE settings differ
// from the pinned ones is refused and the running one keeps serving.
//
// Two ways to run: supervising (`lakecache mount`: the holder starts the server, starts it again
// when it dies, and starts a new binary on `lakecache mount --takeover`), or waiting (`lakecache
// holder`, e.g. its own Kubernetes DaemonSet: servers come by themselves, and while none does,
// requests wait in the kernel). The holder ends, unmounting, on SIGTERM or SIGINT, when the mount
// is unmounted by someone else, when a supervised server exits by choice, or when servers keep
// dying before they serve.
//
// The wire (holder_wire.h): a SOCK_SEQPACKET Unix socket only the holder's uid and root may use.
// Each message is a type line, then KEY=VALUE lines (values escaped: \\ and \n):
//   server -> holder  hello  version mountpoint options descriptors pid   (first; options: the
//                     FUSE mount's; descriptors: how many to read on, asked by the first server)
//   holder -> server  welcome init(hex) + [journal fd, fuse fds...] | refused error
//   server -> holder  init init(hex)    the INIT it captured (the first server only)
//   server -> holder  serving
//   server -> holder  journal + [fd]    a compacted journal replaces the one held
//   holder -> server  stop successor    drain and exit: a successor waits
//   client -> holder  takeover exe      -> taken pid pause_ms | refused error (supervising only)
// The server's side is holder_link.h.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/status.h"
#include "fuse/held_connection.h"

namespace lakecache {

struct MountHolderOptions {
  std::string socket_path;
  MountConnection mount;
  // Supervising: a server's command line, started now, again whenever one dies without having
  // been told to stop, and with another executable on a takeover. Empty: servers come by
  // themselves.
  std::vector<std::string> server_argv;
  // Supervising: this many servers in a row dying before they serve ends the holder.
  int max_failed_starts = 5;
  // How long a server told to stop may take before it is killed.
  std::chrono::milliseconds drain_timeout{10000};
  // Called once, when the first server serves.
  std::function<void()> on_serving;
};

// Runs the holder until it ends (see above). Ok when the mount was unmounted by choice;
// otherwise why it ended. When a supervised server's exit ended it (the first server could not
// start), `server_exit` gets that server's exit code (else -1): it said why on stderr.
Status RunMountHolder(const MountHolderOptions& options, int* server_exit = nullptr);

// Where the holder of the mount at `mountpoint` listens by default: beside its control socket.
std::string HolderSocketPath(const std::string& mountpoint);

}  // namespace lakecache
