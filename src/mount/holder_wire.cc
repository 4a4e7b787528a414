#include "mount/holder_wire.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/text_codec.h"
#include "rpc/unix_socket.h"

namespace lakecache {
namespace {

constexpr size_t kMaxMessage = 64 << 10;
constexpr TextCodec kValueCodec = TextCodec::Backslash("\n");

}  // namespace

std::string HolderMessage::Get(const std::string& key) const {
  auto it = fields.find(key);
  return it == fields.end() ? "" : it->second;
}

std::string EncodeHolderMessage(const HolderMessage& message) {
  std::string out = message.type + "\n";
  for (const auto& [key, value] : message.fields) {
    out += key + "=" + kValueCodec.Escape(value) + "\n";
  }
  return out;
}

Result<HolderMessage> DecodeHolderMessage(std::string_view bytes) {
  HolderMessage m;
  size_t end = bytes.find('\n');
  if (end == std::string_view::npos || end == 0) {
    return Status::InvalidArgument("not a holder message");
  }
  m.type = bytes.substr(0, end);
  bytes.remove_prefix(end + 1);
  while (!bytes.empty()) {
    end = bytes.find('\n');
    std::string_view line = bytes.substr(0, end);
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) return Status::InvalidArgument("a holder field without =");
    m.fields[std::string(line.substr(0, eq))] = kValueCodec.Unescape(line.substr(eq + 1));
    bytes.remove_prefix(end == std::string_view::npos ? bytes.size() : end + 1);
  }
  return m;
}

Status SendHolderMessage(int fd, const HolderMessage& message, std::span<const int> fds) {
  std::string bytes = EncodeHolderMessage(message);
  std::string_view part = bytes;
  return rpc::SendWithFds(fd, std::span<const std::string_view>(&part, 1), fds);
}

Result<HolderMessage> ReceiveHolderMessage(int fd, std::vector<ScopedFd>* fds,
                                           std::chrono::milliseconds wait) {
  if (wait.count() >= 0) {
    pollfd p{fd, POLLIN, 0};
    int rc = 0;
    do {
      rc = ::poll(&p, 1, static_cast<int>(wait.count()));
    } while (rc < 0 && errno == EINTR);
    if (rc == 0) return Status::DeadlineExceeded("no answer");
  }
  std::string buffer(kMaxMessage, '\0');
  iovec iov{buffer.data(), buffer.size()};
  LC_ASSIGN_OR_RETURN(rpc::ReceivedMessage got,
                      rpc::ReceiveWithFds(fd, std::span<iovec>(&iov, 1), kHolderMaxFds));
  std::vector<ScopedFd> received;
  for (int f : got.fds) received.emplace_back(f);
  if (got.bytes == 0) return Status::Unavailable("the other end has gone");
  if (got.truncated) return Status::InvalidArgument("a message too long");
  if (fds != nullptr) *fds = std::move(received);
  buffer.resize(got.bytes);
  return DecodeHolderMessage(buffer);
}

Result<ScopedFd> ConnectToHolder(const std::string& path) {
  LC_ASSIGN_OR_RETURN(sockaddr_un addr, rpc::UnixSocketAddress("holder socket", path));
  ScopedFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Status::IoError(std::string("socket: ") + std::strerror(errno));
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Status::Unavailable("no holder answers at " + path + ": " + std::strerror(errno));
  }
  return fd;
}

Result<ScopedFd> ListenAsHolder(const std::string& path) {
  LC_ASSIGN_OR_RETURN(sockaddr_un addr, rpc::UnixSocketAddress("holder socket", path));
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ConnectToHolder(path).ok()) {
    return Status::PreconditionFailed("a holder already listens at " + path);
  }
  ::unlink(path.c_str());
  ScopedFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return Status::IoError(std::string("socket: ") + std::strerror(errno));
  mode_t old = ::umask(077);
  int rc = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::umask(old);
  if (rc != 0 || ::listen(fd.get(), 16) != 0) {
    return Status::IoError("cannot listen at " + path + ": " + std::strerror(errno));
  }
  return fd;
}

}  // namespace lakecache
