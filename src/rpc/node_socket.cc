#include "rpc/node_socket.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "rpc/unix_socket.h"

namespace lakecache::rpc {
namespace {

constexpr uint32_t kHelloMagic = 0x6c636e68;  // "lcnh"
constexpr size_t kMaxReason = 512;

struct HelloHeader {
  uint32_t magic = kHelloMagic;
  uint32_t version = kNodeSocketVersion;
  uint32_t accepted = 0;
  uint32_t fds = 0;
};

}  // namespace

Result<int> ListenNodeSocket(const std::string& path) {
  LC_ASSIGN_OR_RETURN(sockaddr_un addr, UnixSocketAddress("node socket", path));
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IoErrorFromErrno("socket");
  ::unlink(path.c_str());
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::chmod(path.c_str(), 0666) != 0 || ::listen(fd, 64) != 0) {
    Status s = Status::IoErrorFromErrno("cannot listen on node socket " + path);
    ::close(fd);
    return s;
  }
  return fd;
}

Status SendNodeHello(int fd, const NodeHello& hello) {
  if (hello.fds.size() > kMaxNodeFds) return Status::InvalidArgument("too many descriptors");
  HelloHeader header;
  header.accepted = hello.accepted ? 1 : 0;
  header.fds = static_cast<uint32_t>(hello.fds.size());
  std::string reason = hello.reason.substr(0, kMaxReason);
  std::string_view parts[] = {{reinterpret_cast<const char*>(&header), sizeof(header)}, reason};
  return SendWithFds(fd, parts, hello.fds).WithContext("node socket");
}

Result<int> ConnectNodeSocket(const std::string& path, std::chrono::milliseconds timeout,
                              NodeHello* hello) {
  LC_ASSIGN_OR_RETURN(sockaddr_un addr, UnixSocketAddress("node socket", path));
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IoErrorFromErrno("socket");
  auto fail = [fd](Status s) {
    ::close(fd);
    return s;
  };
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return fail(Status::IoErrorFromErrno("cannot connect to node socket " + path));
  }
  pollfd p{fd, POLLIN, 0};
  int ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
  if (ready <= 0) return fail(Status::Unavailable("no answer on node socket " + path));
  HelloHeader header;
  char reason[kMaxReason];
  iovec iov[2] = {{&header, sizeof(header)}, {reason, sizeof(reason)}};
  Result<ReceivedMessage> got = ReceiveWithFds(fd, iov, kMaxNodeFds);
  if (!got.ok()) return fail(got.status().WithContext("node socket " + path));
  std::vector<int> fds = std::move(got->fds);
  size_t n = got->bytes;
  auto drop_fds = [&fds] {
    for (int f : fds) ::close(f);
    fds.clear();
  };
  if (n < sizeof(header) || header.magic != kHelloMagic || got->truncated) {
    drop_fds();
    return fail(Status::InvalidArgument("node socket " + path + " sent a malformed hello"));
  }
  if (header.version != kNodeSocketVersion) {
    drop_fds();
    return fail(Status::InvalidArgument("node socket " + path + " speaks version " +
                                        std::to_string(header.version)));
  }
  hello->accepted = header.accepted != 0;
  hello->reason.assign(reason, n - sizeof(header));
  if (!hello->accepted || fds.size() != header.fds) {
    drop_fds();
    if (hello->accepted) {
      return fail(Status::InvalidArgument("node socket " + path + " lost descriptors"));
    }
  }
  hello->fds = std::move(fds);
  return fd;
}

bool NodeSocketClosed(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if ((p.revents & (POLLHUP | POLLERR | POLLNVAL)) != 0) return true;
  char byte;
  return ::recv(fd, &byte, 1, MSG_DONTWAIT | MSG_PEEK) == 0;
}

}  // namespace lakecache::rpc
