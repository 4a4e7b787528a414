// UnixServer: gRPC services on a Unix socket, served only to the peers whose uid it allows.
//
// gRPC (1.51) shows a service no peer credentials on a Unix socket, so the gRPC server has no
// listening port of its own: UnixServer listens, and its accept thread reads each connection's
// SO_PEERCRED, closes those of a uid it does not allow (logging once per uid, at warn) and hands
// the others to gRPC. This process's uid and root are always allowed. Owns the socket file;
// Shutdown (or the destructor) stops the accept thread, then gRPC, and removes the file.
// Thread-safe.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/result.h"

namespace grpc {
class Server;
class Service;
}  // namespace grpc

namespace lakecache::rpc {

struct UnixServerOptions {
  std::string path;
  // Uids allowed besides this process's and root. With any, the socket file is mode 0666 (the uid
  // check is the gate); without, 0600.
  std::vector<uid_t> allowed_uids;
  // For the refusal's message: "uid N may not WHAT (allow it with HOW N)".
  std::string what = "use this socket";
  std::string how = "--allow-uid";
};

class UnixServer {
 public:
  ~UnixServer();
  UnixServer(const UnixServer&) = delete;
  UnixServer& operator=(const UnixServer&) = delete;

  const std::string& path() const { return options_.path; }
  // Connections closed because of their peer's uid.
  uint64_t peers_refused() const { return refused_.load(); }
  // Stops accepting, removes the socket file and gives calls in flight `grace` before cancelling
  // them. Idempotent.
  void Shutdown(std::chrono::milliseconds grace = std::chrono::seconds(1));

 private:
  friend Result<std::unique_ptr<UnixServer>> StartUnixServer(
      UnixServerOptions options, const std::vector<grpc::Service*>& services);
  UnixServer() = default;
  void AcceptLoop();
  // Returns false when the loop must pause: the process is out of descriptors.
  bool AcceptOne();

  UnixServerOptions options_;
  std::vector<uid_t> allowed_;
  std::unique_ptr<grpc::Server> server_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};      // a pipe: a byte stops the accept thread
  std::set<std::string> told_;  // the accept thread's own: refusals already logged
  std::thread accept_;
  std::atomic<uint64_t> refused_{0};
  std::once_flag shutdown_once_;
};

// Starts `services` on the Unix socket `options.path`. The file is bound in a private folder and
// given its mode before it is moved into place, so it is never reachable with another mode; the
// process umask is left alone. A stale socket file left by a dead process is replaced; a live one
// is an error.
Result<std::unique_ptr<UnixServer>> StartUnixServer(UnixServerOptions options,
                                                    const std::vector<grpc::Service*>& services);

}  // namespace lakecache::rpc
