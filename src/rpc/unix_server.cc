#include "rpc/unix_server.h"

#include <fcntl.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/server_posix.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "rpc/grpc_util.h"
#include "rpc/keepalive.h"
#include "rpc/unix_socket.h"

namespace lakecache::rpc {
namespace {

// How long the accept thread waits when the process is out of descriptors, before trying again.
constexpr int kNoDescriptorsPauseMs = 100;

// True when a process accepts connections on the socket at `path`.
bool SocketIsLive(const sockaddr_un& addr) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  bool live = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return live;
}

// Binds a listening socket in a private folder (mode 0700: nobody else can reach it there), gives
// it `mode` and only then moves it to `path`.
Result<int> ListenPlaced(const std::string& path, const sockaddr_un& target, mode_t mode) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(path, ec)) {
    if (SocketIsLive(target)) {
      return Status::Unavailable("control socket " + path + " is in use by another process");
    }
    fs::remove(path, ec);
  }
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  fs::create_directories(dir, ec);
  if (ec) return Status::IoError("cannot create " + dir.string() + ": " + ec.message());
  std::string private_dir = (dir / ".lakecache-bind-XXXXXX").string();
  if (::mkdtemp(private_dir.data()) == nullptr) {
    return Status::IoErrorFromErrno("cannot create a folder in " + dir.string());
  }
  std::string bound = private_dir + "/socket";
  Result<sockaddr_un> addr = UnixSocketAddress("control socket", bound);
  int fd = addr.ok() ? ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0) : -1;
  Status placed = Status::Ok();
  if (!addr.ok()) {
    placed = addr.status();
  } else if (fd < 0 || ::bind(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) != 0 ||
             ::chmod(bound.c_str(), mode) != 0 || ::listen(fd, 64) != 0 ||
             ::rename(bound.c_str(), path.c_str()) != 0) {
    placed = Status::IoErrorFromErrno("cannot place control socket " + path);
  }
  fs::remove_all(private_dir, ec);
  if (!placed.ok()) {
    if (fd >= 0) ::close(fd);
    return placed;
  }
  return fd;
}

}  // namespace

Result<std::unique_ptr<UnixServer>> StartUnixServer(UnixServerOptions options,
                                                    const std::vector<grpc::Service*>& services) {
  LC_ASSIGN_OR_RETURN(sockaddr_un target, UnixSocketAddress("control socket", options.path));
  std::unique_ptr<UnixServer> s(new UnixServer());
  s->allowed_ = {::geteuid(), 0};
  bool others = false;
  for (uid_t uid : options.allowed_uids) {
    if (std::find(s->allowed_.begin(), s->allowed_.end(), uid) != s->allowed_.end()) continue;
    s->allowed_.push_back(uid);
    others = true;
  }
  s->options_ = std::move(options);
  grpc::ServerBuilder builder;  // no listening port: connections come from the accept thread
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  AcceptKeepalivePings(builder);
  for (grpc::Service* service : services) builder.RegisterService(service);
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr) {
    return Status::Unavailable("cannot start a server for control socket " + s->path());
  }
  LC_ASSIGN_OR_RETURN(s->listen_fd_, ListenPlaced(s->path(), target, others ? 0666 : 0600));
  if (::pipe2(s->wake_, O_CLOEXEC) != 0) return Status::IoErrorFromErrno("cannot create a pipe");
  s->accept_ = std::thread([p = s.get()] { p->AcceptLoop(); });
  return s;
}

UnixServer::~UnixServer() { Shutdown(); }

void UnixServer::Shutdown(std::chrono::milliseconds grace) {
  std::call_once(shutdown_once_, [&] {
    if (accept_.joinable()) {
      char b = 0;
      (void)!::write(wake_[1], &b, 1);
      accept_.join();
    }
    if (listen_fd_ >= 0) {
      ::close(listen_fd_);
      ::unlink(options_.path.c_str());
    }
    for (int fd : wake_) {
      if (fd >= 0) ::close(fd);
    }
    if (server_ != nullptr) {
      server_->Shutdown(std::chrono::system_clock::now() + grace);
      server_->Wait();
    }
  });
}

void UnixServer::AcceptLoop() {
  bool paused = false;  // out of descriptors: only the wake pipe is watched for a while
  for (;;) {
    pollfd fds[2] = {{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    int n = ::poll(fds, paused ? 1 : 2, paused ? kNoDescriptorsPauseMs : -1);
    if (n < 0 && errno != EINTR) {
      spdlog::error("control socket {}: poll: {}; no longer accepting", path(),
                    std::strerror(errno));
      return;
    }
    if (fds[0].revents != 0) return;
    paused = !paused && (fds[1].revents & POLLIN) != 0 && !AcceptOne();
  }
}

bool UnixServer::AcceptOne() {
  // Non-blocking, as gRPC's endpoints expect their descriptors.
  int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) return errno != EMFILE && errno != ENFILE && errno != ENOBUFS && errno != ENOMEM;
  Result<uid_t> uid = AllowedPeerUid(fd, allowed_, options_.what, options_.how);
  if (!uid.ok()) {
    ::close(fd);
    refused_.fetch_add(1);
    if (told_.insert(uid.status().message()).second) {
      spdlog::warn("control socket {}: refused a connection: {}", path(), uid.status().message());
    }
    return true;
  }
  grpc::AddInsecureChannelFromFd(server_.get(), fd);  // gRPC owns fd from here
  return true;
}

}  // namespace lakecache::rpc
