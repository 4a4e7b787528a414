#include "rpc/unix_socket.h"

#include <sys/socket.h>
#include <unistd.h>

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

Status SendWithFds(int fd, std::span<const std::string_view> parts, std::span<const int> fds) {
  std::vector<iovec> iov;
  for (std::string_view part : parts) {
    iov.push_back({const_cast<char*>(part.data()), part.size()});
  }
  msghdr msg{};
  msg.msg_iov = iov.data();
  msg.msg_iovlen = iov.size();
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
  if (!fds.empty()) {
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  if (::sendmsg(fd, &msg, MSG_NOSIGNAL) < 0) {
    return Status::IoError(std::string("sendmsg: ") + std::strerror(errno));
  }
  return Status::Ok();
}

Result<ReceivedMessage> ReceiveWithFds(int fd, std::span<iovec> buffers, size_t max_fds) {
  std::vector<char> control(CMSG_SPACE(sizeof(int) * (max_fds + 3)));
  msghdr msg{};
  msg.msg_iov = buffers.data();
  msg.msg_iovlen = buffers.size();
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  ssize_t n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  if (n < 0) return Status::IoError(std::string("recvmsg: ") + std::strerror(errno));
  ReceivedMessage got;
  got.bytes = static_cast<size_t>(n);
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    size_t at = got.fds.size();
    got.fds.resize(at + count);
    std::memcpy(got.fds.data() + at, CMSG_DATA(c), count * sizeof(int));
  }
  if ((msg.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) != 0 || got.fds.size() > max_fds) {
    for (int f : got.fds) ::close(f);
    got.fds.clear();
    got.truncated = true;
  }
  return got;
}

}  // namespace lakecache::rpc
