// NodeServer: serves the worker's shared memory to the mounts on its host over the node socket
// (rpc/node_socket.h): checks each peer's uid, opens a session of the ShmArena for it and sends it
// the descriptors; when the mount hangs up (or dies) closes its session, releasing its anchors.
// One thread polls the listening socket and every session; it also reclaims deferred memory.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cache/shm_arena.h"
#include "common/result.h"
#include "common/scoped_fd.h"

namespace lakecache {

class NodeServer {
 public:
  // Listens at `path`; peers whose uid is not in `allowed_uids` are refused with a reason.
  static Result<std::unique_ptr<NodeServer>> Start(std::shared_ptr<ShmArena> arena,
                                                   const std::string& path,
                                                   std::vector<uid_t> allowed_uids);
  ~NodeServer();  // closes every session and removes the socket file
  NodeServer(const NodeServer&) = delete;
  NodeServer& operator=(const NodeServer&) = delete;

  const std::string& path() const { return path_; }
  uint64_t sessions_opened() const { return opened_.load(); }
  uint64_t peers_refused() const { return refused_.load(); }

 private:
  NodeServer() = default;
  void Loop();
  void Accept();

  struct Conn {
    ScopedFd fd;
    uint64_t session = 0;
  };
  std::shared_ptr<ShmArena> arena_;
  std::string path_;
  std::vector<uid_t> allowed_;
  ScopedFd listen_fd_;
  ScopedFd wake_[2];         // a pipe: a byte stops the loop
  std::vector<Conn> conns_;  // the loop's own
  std::thread thread_;
  std::atomic<uint64_t> opened_{0};
  std::atomic<uint64_t> refused_{0};
};

}  // namespace lakecache
