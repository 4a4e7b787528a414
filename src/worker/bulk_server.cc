#include "worker/bulk_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "rpc/bulk_protocol.h"
#include "rpc/lakecache.pb.h"
#include "worker/block_relay.h"

namespace lakecache {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kHandshakeTime = std::chrono::seconds(10);
constexpr auto kReplyTime = std::chrono::seconds(60);  // a client that stops reading

// Sends a range whose bytes are still landing (BlockReader::Answer::relay): the header at once,
// then whatever has landed each time more has (a piece of a TLS record or of a socket read). A
// relay that fails cuts the reply short: the connection is closed, and the client asks the
// block's owner.
Status SendRelayed(rpc::BulkConnection& connection, const BlockReader::Answer& answer) {
  const BlockReader::Range& range = answer.range;
  const uint64_t begin = static_cast<uint64_t>(range.data - answer.relay->block()->data());
  std::string header = rpc::EncodeReplyHeader(Status::Ok(), range.length);
  std::span<const char> head[] = {header};
  LC_RETURN_IF_ERROR(connection.WriteAll(head, Clock::now() + kReplyTime));
  uint64_t sent = 0;
  while (sent < range.length) {
    LC_ASSIGN_OR_RETURN(uint64_t landed,
                        answer.relay->WaitFor(begin + sent + 1, Clock::now() + kReplyTime));
    const uint64_t upto = std::min(landed, begin + range.length) - begin;
    std::span<const char> piece[] = {std::span<const char>(range.data + sent, upto - sent)};
    LC_RETURN_IF_ERROR(connection.WriteAll(piece, Clock::now() + kReplyTime));
    sent = upto;
  }
  return Status::Ok();
}

constexpr auto kIdleForever = std::chrono::hours(24 * 365);

std::string PeerName(const sockaddr_storage& addr) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (addr.ss_family == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    port = ntohs(a->sin6_port);
  }
  return "client " + std::string(host) + ":" + std::to_string(port);
}

}  // namespace

Result<std::unique_ptr<BulkServer>> BulkServer::Start(const BulkServerOptions& options,
                                                      BlockReader* reader) {
  std::unique_ptr<BulkServer> server(new BulkServer(options, reader));
  Result<rpc::TcpListener> listener = rpc::ListenTcp(options.listen);
  if (!listener.ok()) return listener.status().WithContext("--data-listen");
  server->listen_fd_.reset(listener->fd);
  server->address_ = listener->address;
  server->acceptor_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

BulkServer::~BulkServer() { Shutdown(); }

void BulkServer::Shutdown() {
  {
    MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    for (rpc::BulkConnection* c : open_) c->Abort();
  }
  ::shutdown(listen_fd_.get(), SHUT_RDWR);  // wakes accept()
  if (acceptor_.joinable()) acceptor_.join();
  listen_fd_.reset();
  MutexLock lock(&mu_);
  while (threads_ > 0) idle_cv_.Wait(&mu_);
}

void BulkServer::AcceptLoop() {
  bool warned = false;
  for (;;) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    ScopedFd fd(
        ::accept4(listen_fd_.get(), reinterpret_cast<sockaddr*>(&addr), &len, SOCK_CLOEXEC));
    int error = errno;
    MutexLock lock(&mu_);
    if (stopping_) return;
    if (!fd.valid()) {
      if (error != EINTR && error != ECONNABORTED && !warned) {
        spdlog::warn("bulk server {}: accept: {}", address_, std::strerror(error));
        warned = true;
      }
      continue;
    }
    if (threads_ >= kMaxConnections) {
      if (!warned) {
        spdlog::warn("bulk server {}: {} connections open, refusing more", address_,
                     kMaxConnections);
      }
      warned = true;
      continue;  // closes it
    }
    ++threads_;
    std::thread([this, fd = fd.release(), peer = PeerName(addr)] { Serve(fd, peer); }).detach();
  }
}

bool BulkServer::Admitted(rpc::BulkConnection& connection, bool* worker) {
  *worker = true;  // without role tokens, every client is trusted as a worker
  const rpc::TlsContext* tls = options_.tls.get();
  if (tls == nullptr) return true;
  Clock::time_point deadline = Clock::now() + kHandshakeTime;
  char magic[4];
  if (connection.Peek(magic, deadline) == sizeof(magic) && std::memcmp(magic, "LCBF", 4) == 0) {
    Status refusal = Status::AccessDenied(
        "worker data address " + address_ +
        " requires TLS: give the client the cluster's credentials (--credentials DIR or "
        "LAKECACHE_CREDENTIALS)");
    (void)rpc::SendReply(connection, refusal, {}, deadline);
    spdlog::warn("bulk server {}: refused a plain-text {} (TLS is required)", address_,
                 connection.peer());
    return false;
  }
  if (Status s = connection.StartTls(*tls, deadline); !s.ok()) {
    spdlog::warn("bulk server {}: {}", address_, s.message());
    return false;
  }
  if (options_.authorizer == nullptr) return true;
  Result<std::string> token = rpc::NextHello(connection, deadline);
  // Mounts read; so do workers, for the replicas they keep (worker/peer_reads.h).
  Status verdict =
      token.ok() ? options_.authorizer->CheckToken(
                       *token, security::Roles(security::Role::kClient, security::Role::kWorker),
                       "a bulk read")
                 : Status::Unauthenticated(
                       "a bulk read needs the worker or client role; the "
                       "connection did not start with a hello");
  (void)rpc::SendReply(connection, verdict, {}, deadline);
  if (!verdict.ok()) {
    spdlog::warn("bulk server {}: refused {}: {}", address_, connection.peer(), verdict.message());
    return false;
  }
  *worker = options_.authorizer
                ->CheckToken(*token, security::Roles(security::Role::kWorker), "a replica read")
                .ok();
  return true;
}

void BulkServer::Serve(int fd, std::string peer) {
  // Listed before the handshake, so that Shutdown can abort a client that never completes it.
  std::unique_ptr<rpc::BulkConnection> connection = rpc::BulkConnection::Adopt(fd, peer);
  bool serve = false;
  {
    MutexLock lock(&mu_);
    serve = !stopping_;
    if (serve) open_.push_back(connection.get());
  }
  bool worker = false;
  if (serve && Admitted(*connection, &worker)) ServeRequests(*connection, worker);
  {
    MutexLock lock(&mu_);
    std::erase(open_, connection.get());
  }
  connection.reset();  // closes the socket before the count drops
  MutexLock lock(&mu_);
  --threads_;
  idle_cv_.SignalAll();
}

void BulkServer::ServeRequests(rpc::BulkConnection& connection, bool worker) {
  // What only workers ask of one another: they shape an owner's book of holders.
  constexpr uint8_t kWorkerFlags = rpc::kReadForReplica | rpc::kReadNoRedirect | rpc::kReadHeldOnly;
  // The block of the last reply, held until the client asks again (so has read every byte): a
  // reply sent from the shared memory's file may still be in the socket, and the memory must not
  // be reused under it.
  BlockRef last;
  for (;;) {
    bool closed = false;
    Result<rpc::BlockReadRequest> request =
        rpc::NextRequest(connection, Clock::now() + kIdleForever, &closed);
    if (!request.ok()) {
      if (!closed && request.status().code() == StatusCode::kInvalidArgument) {
        spdlog::warn("bulk server {}: {}: {}", address_, connection.peer(),
                     request.status().message());
      }
      return;
    }
    last.reset();
    if (rpc::IsPing(*request)) {  // a client asking whether this worker answers at all
      if (!rpc::SendReply(connection, Status::Ok(), {}, Clock::now() + kReplyTime).ok()) return;
      continue;
    }
    metrics::ScopedTimer timer(options_.request_duration);
    Result<BlockReader::Answer> answer =
        (request->flags & kWorkerFlags) != 0 && !worker
            ? Result<BlockReader::Answer>(Status::AccessDenied(
                  "a read between workers (replica flags) needs the worker role's token"))
            : reader_->Serve(*request);
    Status sent;
    if (answer.ok() && answer->relay != nullptr) {
      // Copied into the socket (or TLS) as it went: nothing to keep until the next request.
      sent = SendRelayed(connection, *answer);
      if (sent.ok()) reader_->NoteRelayed(answer->range.length);
    } else if (answer.ok()) {
      const BlockReader::Range& range = answer->range;
      const BlockRef& owner = range.owner;
      int fd = owner != nullptr ? owner->fd() : -1;
      uint64_t at = fd >= 0 ? owner->fd_offset() + (range.data - owner->data()) : 0;
      sent =
          rpc::SendReply(connection, Status::Ok(), std::span<const char>(range.data, range.length),
                         Clock::now() + kReplyTime, fd, at, answer->digest, answer->redirect);
      last = range.owner;
    } else {
      sent = rpc::SendReply(connection, answer.status(), {}, Clock::now() + kReplyTime);
    }
    if (!sent.ok()) return;
  }
}

}  // namespace lakecache
