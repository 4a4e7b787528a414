// HolderLink: a mount server's side of its holder's socket (mount_holder.h): the hello that gets
// the FUSE connection's descriptors, the journal and the INIT; what the server tells the holder
// (its captured INIT, that it serves, a compacted journal); and the watch for "a successor
// waits". RequestTakeover is what `lakecache mount --takeover` asks a supervising holder.
// A HolderLink is used from one thread, besides the watch's own.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/scoped_fd.h"
#include "common/status.h"

namespace lakecache {

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
  ScopedFd fd_;
  std::vector<ScopedFd> fuse_fds_;
  ScopedFd journal_fd_;
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

}  // namespace lakecache
