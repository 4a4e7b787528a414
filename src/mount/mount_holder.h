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
// The wire: a SOCK_SEQPACKET Unix socket only the holder's uid and root may use. Each message is
// a type line, then KEY=VALUE lines (values escaped: \\ and \n):
//   server -> holder  hello  version mountpoint options descriptors pid   (first; options: the
//                     FUSE mount's; descriptors: how many to read on, asked by the first server)
//   holder -> server  welcome init(hex) + [journal fd, fuse fds...] | refused error
//   server -> holder  init init(hex)    the INIT it captured (the first server only)
//   server -> holder  serving
//   server -> holder  journal + [fd]    a compacted journal replaces the one held
//   holder -> server  stop successor    drain and exit: a successor waits
//   client -> holder  takeover exe      -> taken pid pause_ms | refused error (supervising only)
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/status.h"
#include "fuse/held_connection.h"

namespace lakecache {

inline constexpr int kHolderProtocol = 1;

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

// The server's side of the holder's socket.
class HolderLink {
 public:
  // Connects to the holder at `socket_path` and asks for the connection mounted at `mountpoint`
  // with `options`; blocks while the previous server drains (at most `wait`). A refusal is
  // kPreconditionFailed with the holder's reason.
  static Result<std::unique_ptr<HolderLink>> Connect(const std::string& socket_path,
                                                     const std::string& mountpoint,
                                                     const std::string& options, int descriptors,
                                                     std::chrono::milliseconds wait);
  ~HolderLink();
  HolderLink(const HolderLink&) = delete;
  HolderLink& operator=(const HolderLink&) = delete;

  // The descriptors handed over; the caller owns what it takes (empty, -1 once taken).
  std::vector<int> TakeFuseFds();
  int TakeJournalFd();
  // The connection's INIT as the first server captured it; empty for the first server.
  const std::string& init() const { return init_; }

  void SendInit(const std::string& init);
  void SendServing();
  // Hands the holder a compacted journal to keep instead of the one it holds (it takes `fd`).
  Status SendJournal(int fd);
  // Calls `on_stop` once, from a thread of the link's, when the holder says a successor waits, or
  // `on_gone` when the holder is gone (the mount still serves, but no longer survives this
  // server).
  void Watch(std::function<void()> on_stop, std::function<void()> on_gone);
  // Ends the watch: neither callback runs after it returns (what they use may then go).
  void Unwatch();

 private:
  HolderLink() = default;
  int fd_ = -1;
  std::vector<int> fuse_fds_;
  int journal_fd_ = -1;
  std::string init_;
  struct Watcher;
  std::unique_ptr<Watcher> watcher_;
};

struct TakeoverResult {
  pid_t pid = 0;       // the new server's
  double pause_s = 0;  // from telling the old one to stop to the new one serving
};
// Asks the supervising holder at `socket_path` to start `exe` with its server's arguments and hand
// it the mount; returns once the new server serves, or why it does not (the old one serves on).
Result<TakeoverResult> RequestTakeover(const std::string& socket_path, const std::string& exe,
                                       std::chrono::milliseconds timeout);

// The wire format, exposed for tests.
struct HolderMessage {
  std::string type;
  std::map<std::string, std::string> fields;
  std::string Get(const std::string& key) const;
};
std::string EncodeHolderMessage(const HolderMessage& message);
Result<HolderMessage> DecodeHolderMessage(std::string_view bytes);

}  // namespace lakecache
