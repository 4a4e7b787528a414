// What our two kinds of Unix socket share, the node socket (shared memory, worker --shm-uid) and
// the mounts' control sockets (lakecache mount --allow-uid): their address, and the one check of
// who is on the other end. Pure functions, safe from any thread.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace lakecache::rpc {

// The address of the socket at `path`; `what` names it in the error ("node socket").
Result<sockaddr_un> UnixSocketAddress(std::string_view what, const std::string& path);

// The uid of a connected Unix socket's peer (SO_PEERCRED: as it was when the peer connected).
Result<uid_t> PeerUid(int fd);

// The peer's uid when `allowed` holds it. Otherwise kAccessDenied "uid N may not WHAT (allow it
// with HOW N)", e.g. WHAT "read this worker's memory", HOW "lakecache worker --shm-uid".
Result<uid_t> AllowedPeerUid(int fd, std::span<const uid_t> allowed, std::string_view what,
                             std::string_view how);

// One message with descriptors alongside (SCM_RIGHTS) on a connected SOCK_SEQPACKET socket.
// `parts` are sent as one message.
Status SendWithFds(int fd, std::span<const std::string_view> parts, std::span<const int> fds);

struct ReceivedMessage {
  size_t bytes = 0;      // of the message, written into the buffers given
  std::vector<int> fds;  // the descriptors that came with it, close-on-exec (the caller owns them)
  bool truncated = false;  // the message or its descriptors did not fit (fds already closed)
};
// Reads one message into `buffers`, with at most `max_fds` descriptors.
Result<ReceivedMessage> ReceiveWithFds(int fd, std::span<iovec> buffers, size_t max_fds);

}  // namespace lakecache::rpc
