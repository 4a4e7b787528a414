#include "rpc/unix_socket.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace lakecache::rpc {

Result<sockaddr_un> UnixSocketAddress(std::string_view what, const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return Status::InvalidArgument(std::string(what) + " path '" + path + "' is empty or too long");
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

Result<uid_t> PeerUid(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return Status::IoError(std::string("SO_PEERCRED: ") + std::strerror(errno));
  }
  return cred.uid;
}

Result<uid_t> AllowedPeerUid(int fd, std::span<const uid_t> allowed, std::string_view what,
                             std::string_view how) {
  LC_ASSIGN_OR_RETURN(uid_t uid, PeerUid(fd));
  if (std::find(allowed.begin(), allowed.end(), uid) != allowed.end()) return uid;
  std::string id = std::to_string(uid);
  return Status::AccessDenied("uid " + id + " may not " + std::string(what) + " (allow it with " +
                              std::string(how) + " " + id + ")");
}

}  // namespace lakecache::rpc
