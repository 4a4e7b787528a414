#include "native/native_server.h"

#include <fcntl.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <map>
#include <thread>
#include <unordered_map>

#include "common/errno_map.h"
#include "common/mutex.h"
#include "common/scoped_fd.h"
#include "common/thread_pool.h"
#include "fs/file_system.h"
#include "native/native_ring.h"
#include "native/native_socket.h"
#include "native/native_wire.h"
#include "rpc/unix_socket.h"

#include "native/native_session.h"

namespace lakecache {
namespace {

// The groups of a socket's peer (SO_PEERGROUPS), as they were when it connected.
std::vector<gid_t> PeerGroups(int sock) {
  std::vector<gid_t> groups(64);
  for (int attempt = 0; attempt < 4; ++attempt) {
    socklen_t len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (::getsockopt(sock, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) {
      groups.resize(len / sizeof(gid_t));
      return groups;
    }
    if (errno != ERANGE) break;
    groups.resize(len / sizeof(gid_t) + 1);
  }
  return {};
}

}  // namespace

// ---- the server ----

struct NativeServer::Impl::Closer {
  Mutex mu;
  CondVar wake;
  std::vector<int> fds GUARDED_BY(mu);
  bool stop GUARDED_BY(mu) = false;
};

bool NativeServer::Impl::CloseLater(int fd) {
  constexpr size_t kMaxWaiting = 256;
  MutexLock lock(&closer->mu);
  closer->fds.push_back(fd);
  closer->wake.SignalAll();
  return closer->fds.size() < kMaxWaiting;
}

void NativeServer::Impl::Accept() {
  for (;;) {
    pollfd p[2] = {{listener.get(), POLLIN, 0}, {stop.get(), POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[1].revents != 0) return;
    ScopedFd sock(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!sock.valid()) continue;
    MutexLock lock(&mu);
    for (std::thread& t : finished) t.join();
    finished.clear();
    if (live.load() >= options.max_sessions) {
      native::MessageHeader h;
      h.type = native::kRefused;
      std::string msg(reinterpret_cast<const char*>(&h), sizeof(h));
      msg +=
          "this mount serves " + std::to_string(options.max_sessions) + " native sessions already";
      native::SendMessage(sock.get(), msg.data(), msg.size(), nullptr, 0);
      continue;
    }
    uint64_t id = next_session++;
    ++live;
    ++sessions_total;
    threads.emplace(
        id, std::thread([this, id, s = std::move(sock)]() mutable { Serve(id, std::move(s)); }));
  }
}

void NativeServer::Impl::Serve(uint64_t id, ScopedFd sock) {
  auto session = std::make_shared<NativeSession>();
  session->server = this;
  session->sock = std::move(sock);
  std::vector<uid_t> allowed = options.allow_uids;
  allowed.push_back(::geteuid());
  allowed.push_back(0);
  Result<uid_t> uid =
      rpc::AllowedPeerUid(session->sock.get(), allowed, "read this mount's native data path",
                          "lakecache mount --allow-uid");
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (!uid.ok()) {
    session->Refuse(uid.status().message());
  } else if (::getsockopt(session->sock.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
    session->reader.uid = cred.uid;
    session->pid = cred.pid;
    session->reader.gid = cred.gid;
    session->reader.groups = PeerGroups(session->sock.get());
    Status s = session->Handshake();
    if (s.ok()) {
      session->Loop();
    } else {
      spdlog::debug("native data path: a session did not start: {}", s.message());
    }
    session->End();
  }
  --live;
  MutexLock lock(&mu);
  auto it = threads.find(id);
  if (it != threads.end()) {
    finished.push_back(std::move(it->second));
    threads.erase(it);
  }
}

Result<std::unique_ptr<NativeServer>> NativeServer::Start(std::shared_ptr<FileSystem> fs,
                                                          const NativeServerOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->fs = std::move(fs);
  impl->options = options;
  LC_ASSIGN_OR_RETURN(sockaddr_un addr,
                      rpc::UnixSocketAddress("native socket", options.socket_path));
  impl->listener.reset(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!impl->listener.valid()) return Status::IoErrorFromErrno("socket");
  ::unlink(options.socket_path.c_str());
  if (::bind(impl->listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Status::IoErrorFromErrno("bind " + options.socket_path);
  }
  // Who may attach is decided by the uid check, not by the file's mode.
  ::chmod(options.socket_path.c_str(), 0666);
  if (::listen(impl->listener.get(), 64) != 0) return Status::IoErrorFromErrno("listen");
  impl->stop.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!impl->stop.valid()) return Status::IoErrorFromErrno("eventfd");
  impl->pool = std::make_unique<ThreadPool>(std::max<size_t>(1, options.threads));
  impl->max_lookers = std::max(2u, std::thread::hardware_concurrency()) - 1;
  impl->closer = std::make_shared<Impl::Closer>();
  std::thread([closer = impl->closer] {
    MutexLock lock(&closer->mu);
    for (;;) {
      while (closer->fds.empty() && !closer->stop) closer->wake.Wait(&closer->mu);
      if (closer->fds.empty()) return;
      int fd = closer->fds.back();
      closer->fds.pop_back();
      closer->mu.Unlock();
      ::close(fd);
      closer->mu.Lock();
    }
  }).detach();
  Impl* raw = impl.get();
  impl->acceptor = std::thread([raw] { raw->Accept(); });
  return std::unique_ptr<NativeServer>(new NativeServer(std::move(impl)));
}

NativeServer::NativeServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

NativeServer::~NativeServer() {
  uint64_t one = 1;
  (void)::write(impl_->stop.get(), &one, sizeof(one));
  impl_->acceptor.join();
  std::map<uint64_t, std::thread> threads;
  std::vector<std::thread> finished;
  {
    MutexLock lock(&impl_->mu);
    threads.swap(impl_->threads);
    finished.swap(impl_->finished);
  }
  for (auto& [id, t] : threads) t.join();
  for (std::thread& t : finished) t.join();
  {
    MutexLock lock(&impl_->mu);
    for (std::thread& t : impl_->finished) t.join();
    impl_->finished.clear();
  }
  impl_->pool.reset();
  {
    MutexLock lock(&impl_->closer->mu);
    impl_->closer->stop = true;
    impl_->closer->wake.SignalAll();
  }
  ::unlink(impl_->options.socket_path.c_str());
}

const std::string& NativeServer::socket_path() const { return impl_->options.socket_path; }
NativeServer::Stats NativeServer::stats() const {
  Stats s;
  s.sessions = impl_->live.load();
  s.sessions_total = impl_->sessions_total.load();
  s.held_bytes = impl_->held.load();
  s.staged_bytes = impl_->staged.load();
  s.reads_by_reference = impl_->reads_by_reference.load();
  s.bytes_by_reference = impl_->bytes_by_reference.load();
  s.reads_copied = impl_->reads_copied.load();
  s.bytes_copied = impl_->bytes_copied.load();
  s.read_errors = impl_->read_errors.load();
  return s;
}

}  // namespace lakecache