#include "rpc/bulk_connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <mutex>
#include <vector>

namespace lakecache::rpc {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxIov = 64;

// OpenSSL writes to its socket with write(2), and sendfile(2) takes no MSG_NOSIGNAL: both raise
// SIGPIPE on a closed peer, so a process that uses either ignores it (plain sends use
// MSG_NOSIGNAL). A worker serving a block from its memfd to a mount that was killed mid-read
// would otherwise die of it.
void IgnoreSigpipe() {
  static std::once_flag once;
  std::call_once(once, [] { std::signal(SIGPIPE, SIG_IGN); });
}

// "host" and "port" of HOST:PORT or [V6]:PORT.
bool SplitAddress(const std::string& address, std::string* host, std::string* port) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  *host = address.substr(0, colon);
  *port = address.substr(colon + 1);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  return !port->empty();
}

using AddrInfo = std::unique_ptr<addrinfo, void (*)(addrinfo*)>;

// The first address HOST:PORT resolves to (`passive`: to listen on); *host is its HOST.
Result<AddrInfo> Resolve(const std::string& address, bool passive, std::string* host) {
  std::string port;
  if (!SplitAddress(address, host, &port)) {
    return Status::InvalidArgument("'" + address + "' is not HOST:PORT");
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host->c_str(), port.c_str(), &hints, &found); rc != 0) {
    return Status::InvalidArgument(address + ": " + ::gai_strerror(rc));
  }
  return AddrInfo(found, ::freeaddrinfo);
}

void TuneSocket(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Whether the socket's two ends are on this host: the peer's address is a loopback one or our own.
bool SameHost(int fd) {
  sockaddr_storage ours{}, theirs{};
  socklen_t ours_len = sizeof(ours), theirs_len = sizeof(theirs);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ours), &ours_len) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&theirs), &theirs_len) != 0 ||
      ours.ss_family != theirs.ss_family) {
    return false;
  }
  if (theirs.ss_family == AF_INET) {
    in_addr a = reinterpret_cast<sockaddr_in*>(&ours)->sin_addr;
    in_addr b = reinterpret_cast<sockaddr_in*>(&theirs)->sin_addr;
    return (ntohl(b.s_addr) >> 24) == 127 || a.s_addr == b.s_addr;
  }
  if (theirs.ss_family == AF_INET6) {
    const in6_addr& a = reinterpret_cast<sockaddr_in6*>(&ours)->sin6_addr;
    const in6_addr& b = reinterpret_cast<sockaddr_in6*>(&theirs)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(&b) || std::memcmp(&a, &b, sizeof(a)) == 0;
  }
  return false;
}

}  // namespace

Result<std::unique_ptr<BulkConnection>> BulkConnection::Connect(const std::string& address,
                                                                const TlsContext* tls,
                                                                const std::string& server_name,
                                                                Deadline deadline) {
  std::string host;
  Result<AddrInfo> resolved = Resolve(address, false, &host);
  if (!resolved.ok()) return Status::Unavailable(resolved.status().message());
  addrinfo* found = resolved->get();
  int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Unavailable(std::string("socket: ") + std::strerror(errno));
  std::unique_ptr<BulkConnection> c(new BulkConnection(fd, "worker " + address));
  if (::connect(fd, found->ai_addr, found->ai_addrlen) != 0) {
    if (errno != EINPROGRESS) return c->Failed(std::string("connect: ") + std::strerror(errno));
    LC_RETURN_IF_ERROR(c->Wait(POLLOUT, deadline));
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return c->Failed(std::string("connect: ") + std::strerror(err));
  }
  TuneSocket(fd);
  if (tls == nullptr) return c;
  IgnoreSigpipe();
  c->ssl_ = tls->NewSsl();
  if (c->ssl_ == nullptr || SSL_set_fd(c->ssl_, fd) != 1) return c->Failed("TLS: " + TlsErrors());
  const std::string& name = server_name.empty() ? host : server_name;
  in6_addr ip{};
  bool is_ip =
      ::inet_pton(AF_INET, name.c_str(), &ip) == 1 || ::inet_pton(AF_INET6, name.c_str(), &ip) == 1;
  if (is_ip) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl_), name.c_str());
  } else {
    SSL_set_tlsext_host_name(c->ssl_, name.c_str());
    SSL_set1_host(c->ssl_, name.c_str());
  }
  if (Status s = c->Handshake(false, deadline); !s.ok()) {
    return Status(s.code(), s.message() +
                                " (do the worker and this client have credentials of the "
                                "same CA?)");
  }
  return c;
}

Result<std::unique_ptr<BulkConnection>> BulkConnection::Accept(int fd, std::string peer,
                                                               const TlsContext* tls,
                                                               Deadline deadline) {
  std::unique_ptr<BulkConnection> c = Adopt(fd, std::move(peer));
  if (tls != nullptr) LC_RETURN_IF_ERROR(c->StartTls(*tls, deadline));
  return c;
}

std::unique_ptr<BulkConnection> BulkConnection::Adopt(int fd, std::string peer) {
  std::unique_ptr<BulkConnection> c(new BulkConnection(fd, std::move(peer)));
  int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  TuneSocket(fd);
  c->same_host_ = SameHost(fd);
  return c;
}

Status BulkConnection::StartTls(const TlsContext& tls, Deadline deadline) {
  IgnoreSigpipe();
  ssl_ = tls.NewSsl();
  if (ssl_ == nullptr || SSL_set_fd(ssl_, fd_) != 1) return Failed("TLS: " + TlsErrors());
  return Handshake(true, deadline);
}

size_t BulkConnection::Peek(std::span<char> dst, Deadline deadline) {
  if (!Wait(POLLIN, deadline).ok()) return 0;
  ssize_t n = ::recv(fd_, dst.data(), dst.size(), MSG_PEEK | MSG_DONTWAIT);
  return n > 0 ? static_cast<size_t>(n) : 0;
}

BulkConnection::~BulkConnection() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  ::close(fd_);
}

void BulkConnection::Abort() {
  aborted_.store(true);
  ::shutdown(fd_, SHUT_RDWR);
}

Status BulkConnection::Failed(const std::string& what) const {
  return Status::Unavailable(peer_ + ": " + what);
}

Status BulkConnection::Wait(short events, Deadline deadline) {
  for (;;) {
    if (aborted_.load(std::memory_order_relaxed)) return Failed("connection closed");
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd p{fd_, events, 0};
    int rc = ::poll(&p, 1, static_cast<int>(std::clamp<int64_t>(left, 0, INT_MAX)));
    if (rc > 0) return Status::Ok();  // ready, or an error the next call reports
    if (rc == 0 && Clock::now() >= deadline) {
      return Status::DeadlineExceeded(peer_ + ": no answer in time");
    }
    if (rc < 0 && errno != EINTR) return Failed(std::string("poll: ") + std::strerror(errno));
  }
}

bool BulkConnection::WaitReadable(Deadline deadline) {
  if (ssl_ != nullptr && SSL_pending(ssl_) > 0) return true;
  Status s = Wait(POLLIN, deadline);
  return s.code() != StatusCode::kDeadlineExceeded;
}

template <typename Op>
Result<int> BulkConnection::DriveTls(Op op, const char* what, Deadline deadline) {
  for (;;) {
    ERR_clear_error();
    int rc = op();
    if (rc > 0) return rc;
    int err = SSL_get_error(ssl_, rc);
    if (err == SSL_ERROR_WANT_READ) {
      LC_RETURN_IF_ERROR(Wait(POLLIN, deadline));
    } else if (err == SSL_ERROR_WANT_WRITE) {
      LC_RETURN_IF_ERROR(Wait(POLLOUT, deadline));
    } else if (err == SSL_ERROR_ZERO_RETURN) {
      return 0;  // the peer closed
    } else if (err == SSL_ERROR_SYSCALL) {
      return Failed(std::string(what) + ": " + (errno != 0 ? std::strerror(errno) : "closed"));
    } else {
      return Failed(std::string(what) + ": " + TlsErrors());
    }
  }
}

Status BulkConnection::Handshake(bool server, Deadline deadline) {
  auto done = DriveTls([&] { return server ? SSL_accept(ssl_) : SSL_connect(ssl_); },
                       "TLS handshake", deadline);
  if (!done.ok()) return done.status();
  if (*done == 0) return Failed("closed during the TLS handshake");
  if (SSL_get_verify_result(ssl_) != X509_V_OK) return Failed("TLS: the peer was not verified");
  return Status::Ok();
}

Status BulkConnection::ReadFull(std::span<char> dst, Deadline deadline, bool* eof_at_start,
                                ReadProgress* progress) {
  if (eof_at_start != nullptr) *eof_at_start = false;
  size_t got = 0;
  while (got < dst.size()) {
    size_t want = std::min<size_t>(dst.size() - got, INT_MAX);
    ssize_t n;
    if (ssl_ != nullptr) {
      LC_ASSIGN_OR_RETURN(
          int r, DriveTls([&] { return SSL_read(ssl_, dst.data() + got, static_cast<int>(want)); },
                          "TLS read", deadline));
      n = r;
    } else {
      n = ::recv(fd_, dst.data() + got, want, 0);
      if (n < 0) {
        LC_RETURN_IF_ERROR(AfterError(POLLIN, "read", deadline));
        continue;
      }
    }
    if (n == 0) {
      if (got == 0 && eof_at_start != nullptr) *eof_at_start = true;
      return Failed("connection closed" + std::string(got > 0 ? " mid-frame" : ""));
    }
    got += static_cast<size_t>(n);
    if (progress != nullptr) progress->Landed(got);
  }
  return Status::Ok();
}

Status BulkConnection::WriteAll(std::span<const std::span<const char>> pieces, Deadline deadline) {
  if (ssl_ == nullptr) return WritePlain(pieces, deadline);
  for (std::span<const char> piece : pieces) {
    while (!piece.empty()) {
      int want = static_cast<int>(std::min<size_t>(piece.size(), 1 << 30));
      LC_ASSIGN_OR_RETURN(int n, DriveTls([&] { return SSL_write(ssl_, piece.data(), want); },
                                          "TLS write", deadline));
      if (n == 0) return Failed("connection closed");
      piece = piece.subspan(static_cast<size_t>(n));
    }
  }
  return Status::Ok();
}

Status BulkConnection::WriteFile(std::span<const char> head, int fd, uint64_t offset,
                                 uint64_t length, Deadline deadline) {
  IgnoreSigpipe();
  std::span<const char> pieces[] = {head};
  LC_RETURN_IF_ERROR(WritePlain(pieces, deadline, MSG_MORE));  // the file's pages follow
  auto at = static_cast<off_t>(offset);
  for (uint64_t left = length; left > 0;) {
    ssize_t n = ::sendfile(fd_, fd, &at, left);
    if (n < 0) {
      LC_RETURN_IF_ERROR(AfterError(POLLOUT, "sendfile", deadline));
      continue;
    }
    if (n == 0) return Failed("sendfile: the file ended early");
    left -= static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

Status BulkConnection::AfterError(short events, const char* what, Deadline deadline) {
  if (errno == EINTR) return Status::Ok();
  if (errno != EAGAIN && errno != EWOULDBLOCK) {
    return Failed(std::string(what) + ": " + std::strerror(errno));
  }
  return Wait(events, deadline);
}

Status BulkConnection::WritePlain(std::span<const std::span<const char>> pieces, Deadline deadline,
                                  int flags) {
  std::vector<iovec> iov;
  for (std::span<const char> p : pieces) {
    if (!p.empty()) iov.push_back({const_cast<char*>(p.data()), p.size()});
  }
  size_t first = 0;
  while (first < iov.size()) {
    msghdr msg{};
    msg.msg_iov = iov.data() + first;
    msg.msg_iovlen = std::min(iov.size() - first, kMaxIov);
    ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL | flags);
    if (n < 0) {
      LC_RETURN_IF_ERROR(AfterError(POLLOUT, "write", deadline));
      continue;
    }
    for (size_t left = static_cast<size_t>(n); left > 0;) {  // drop what was sent
      size_t take = std::min(left, iov[first].iov_len);
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + take;
      iov[first].iov_len -= take;
      left -= take;
      if (iov[first].iov_len == 0) ++first;
    }
  }
  return Status::Ok();
}

Result<TcpListener> ListenTcp(const std::string& address) {
  std::string host;
  LC_ASSIGN_OR_RETURN(AddrInfo resolved, Resolve(address, true, &host));
  addrinfo* found = resolved.get();
  int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  if (fd < 0 || ::bind(fd, found->ai_addr, found->ai_addrlen) != 0 || ::listen(fd, 128) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return Status::Unavailable("cannot listen on " + address + ": " + why);
  }
  uint16_t chosen = bound.ss_family == AF_INET6
                        ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                        : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return TcpListener{fd, address.substr(0, address.rfind(':') + 1) + std::to_string(chosen)};
}

}  // namespace lakecache::rpc
