// The node socket: how a worker hands its shared memory to the mounts on its host.
//
// A Unix SOCK_SEQPACKET socket (one message per send, descriptors alongside). The mount connects;
// the worker checks the peer's uid (SO_PEERCRED) and answers one NodeHello: accepted, with the
// descriptors of its shared index, the mount's own anchor segment and the arenas (SCM_RIGHTS), or
// refused, with the reason. The connection then stays open for the life of the session: when
// either side closes it (or dies) the other lets go of the session (shm_layout.h).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace lakecache::rpc {

inline constexpr uint32_t kNodeSocketVersion = 1;
inline constexpr size_t kMaxNodeFds = 250;  // the kernel passes at most 253 per message

struct NodeHello {
  bool accepted = false;
  std::string reason;    // refused: why
  std::vector<int> fds;  // accepted: index, anchors, then the arenas (the receiver owns them)
};

// A listening node socket at `path` (an old socket file there is replaced), mode 0666: who may
// use it is decided by the uid check, not by the file's mode.
Result<int> ListenNodeSocket(const std::string& path);
Status SendNodeHello(int fd, const NodeHello& hello);
// Connects to the node socket at `path` and reads the worker's hello (within `timeout`).
// The returned socket stays open for the session; `hello` receives its answer.
Result<int> ConnectNodeSocket(const std::string& path, std::chrono::milliseconds timeout,
                              NodeHello* hello);
// True once the other side has closed the connection (never blocks).
bool NodeSocketClosed(int fd);

}  // namespace lakecache::rpc
