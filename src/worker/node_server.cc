#include "worker/node_server.h"

#include <fcntl.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "rpc/node_socket.h"
#include "rpc/unix_socket.h"

namespace lakecache {
namespace {

constexpr int kPollMs = 100;  // how often deferred memory is reclaimed at the latest

}  // namespace

Result<std::unique_ptr<NodeServer>> NodeServer::Start(std::shared_ptr<ShmArena> arena,
                                                      const std::string& path,
                                                      std::vector<uid_t> allowed_uids) {
  std::unique_ptr<NodeServer> s(new NodeServer());
  s->arena_ = std::move(arena);
  s->path_ = path;
  s->allowed_ = std::move(allowed_uids);
  LC_ASSIGN_OR_RETURN(int listening, rpc::ListenNodeSocket(path));
  s->listen_fd_.reset(listening);
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC) != 0) {
    return Status::IoError("cannot create a pipe for the node socket");
  }
  s->wake_[0].reset(wake[0]);
  s->wake_[1].reset(wake[1]);
  s->thread_ = std::thread([p = s.get()] { p->Loop(); });
  return s;
}

NodeServer::~NodeServer() {
  if (thread_.joinable()) {
    char b = 0;
    (void)!::write(wake_[1].get(), &b, 1);
    thread_.join();
  }
  for (Conn& c : conns_) {
    arena_->CloseSession(c.session);
    c.fd.reset();
  }
  if (listen_fd_.valid()) {
    listen_fd_.reset();
    ::unlink(path_.c_str());
  }
}

void NodeServer::Loop() {
  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    fds.push_back({wake_[0].get(), POLLIN, 0});
    fds.push_back({listen_fd_.get(), POLLIN, 0});
    for (const Conn& c : conns_) fds.push_back({c.fd.get(), POLLIN, 0});
    int n = ::poll(fds.data(), fds.size(), kPollMs);
    arena_->Reclaim();
    if (n <= 0) continue;
    if (fds[0].revents != 0) return;
    if (fds[1].revents & POLLIN) Accept();
    // A session's socket readable means hung up: a mount sends nothing after connecting.
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      auto it = std::find_if(conns_.begin(), conns_.end(),
                             [&](const Conn& c) { return c.fd.get() == fds[i].fd; });
      if (it == conns_.end()) continue;
      spdlog::debug("node socket: mount session {} ended", it->session);
      arena_->CloseSession(it->session);
      conns_.erase(it);  // closes its socket
    }
  }
}

void NodeServer::Accept() {
  ScopedFd fd(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!fd.valid()) return;  // a refused mount's socket closes on every return below
  Result<uid_t> uid = rpc::AllowedPeerUid(fd.get(), allowed_, "read this worker's memory",
                                          "lakecache worker --shm-uid");
  rpc::NodeHello hello;
  if (!uid.ok()) {
    hello.reason = uid.status().message();
    refused_.fetch_add(1);
    spdlog::warn("node socket {}: refused a mount: {}", path_, hello.reason);
    (void)rpc::SendNodeHello(fd.get(), hello);
    return;
  }
  Result<ShmArena::Session> session = arena_->OpenSession();
  if (!session.ok()) {
    hello.reason = session.status().message();
    (void)rpc::SendNodeHello(fd.get(), hello);
    return;
  }
  hello.accepted = true;
  hello.fds.push_back(arena_->index_fd());
  hello.fds.push_back(session->anchor_fd);
  for (int a : arena_->arena_fds()) hello.fds.push_back(a);
  hello.fds.resize(std::min(hello.fds.size(), rpc::kMaxNodeFds));
  if (Status s = rpc::SendNodeHello(fd.get(), hello); !s.ok()) {
    arena_->CloseSession(session->id);
    return;
  }
  opened_.fetch_add(1);
  conns_.push_back({std::move(fd), session->id});
  spdlog::debug("node socket: mount session {} opened (uid {})", session->id, *uid);
}

}  // namespace lakecache
