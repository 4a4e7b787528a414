#include "rpc/transport_probe.h"

#include <netdb.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>

namespace lakecache::rpc {
namespace {

using SteadyClock = std::chrono::steady_clock;
using Deadline = SteadyClock::time_point;

// HTTP/2's client connection preface and an empty SETTINGS frame (RFC 9113, section 3.4).
constexpr std::string_view kPreface(
    "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    "\0\0\0\x04\0\0\0\0\0",
    33);
constexpr unsigned char kSettingsFrame = 0x04;  // an HTTP/2 frame's type, its 4th byte
constexpr unsigned char kTlsAlert = 0x15;       // a TLS record's type, its 1st byte

class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

// Whether `events` came on `fd` before `deadline`.
bool WaitFor(int fd, short events, Deadline deadline) {
  for (;;) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - SteadyClock::now());
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, static_cast<int>(std::clamp<int64_t>(left.count(), 0, INT_MAX)));
    if (rc > 0) return true;
    if (rc == 0 || errno != EINTR) return false;
  }
}

// A connected non-blocking socket to HOST:PORT ([V6]:PORT), or none.
std::unique_ptr<Socket> Connect(const std::string& address, Deadline deadline) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) return nullptr;
  std::string host = address.substr(0, colon);
  std::string port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return nullptr;
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> resolved(found, ::freeaddrinfo);
  auto s = std::make_unique<Socket>(
      ::socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (s->fd() < 0) return nullptr;
  if (::connect(s->fd(), found->ai_addr, found->ai_addrlen) != 0) {
    if (errno != EINPROGRESS || !WaitFor(s->fd(), POLLOUT, deadline)) return nullptr;
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(s->fd(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return nullptr;
  }
  return s;
}

bool SendAll(int fd, std::string_view data, Deadline deadline) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!WaitFor(fd, POLLOUT, deadline)) return false;
    } else {
      return false;
    }
  }
  return true;
}

// Up to `want` bytes into *out; false when the peer closed (or reset) the connection first.
bool Receive(int fd, size_t want, Deadline deadline, std::string* out) {
  char buf[64];
  while (out->size() < want && WaitFor(fd, POLLIN, deadline)) {
    ssize_t n = ::recv(fd, buf, std::min(sizeof(buf), want - out->size()), 0);
    if (n > 0) {
      out->append(buf, static_cast<size_t>(n));
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      return false;
    }
  }
  return true;
}

bool LooksLikeHttp2Frame(std::string_view bytes) {
  return bytes.size() >= 4 && static_cast<unsigned char>(bytes[3]) == kSettingsFrame;
}

// Starts a TLS handshake: kTls when the server completes it (or gets as far as its certificate),
// kPlainText when it answers with an HTTP/2 frame in plain text. Through memory buffers, so no
// write of OpenSSL's can raise SIGPIPE.
ProbeResult TlsProbe(const std::string& address, Deadline deadline) {
  std::unique_ptr<Socket> s = Connect(address, deadline);
  if (s == nullptr) return ProbeResult::kUnreachable;
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  if (ctx == nullptr) return ProbeResult::kOther;
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);  // only whether it speaks TLS
  std::unique_ptr<SSL, void (*)(SSL*)> ssl(SSL_new(ctx.get()), SSL_free);
  if (ssl == nullptr) return ProbeResult::kOther;
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl.get(), in, out);  // owned by ssl from here
  SSL_set_connect_state(ssl.get());
  std::string first;  // the server's first bytes
  auto not_tls = [&] {
    return LooksLikeHttp2Frame(first) ? ProbeResult::kPlainText : ProbeResult::kOther;
  };
  for (;;) {
    int rc = SSL_do_handshake(ssl.get());
    char* pending = nullptr;
    long n = BIO_get_mem_data(out, &pending);
    if (n > 0 && !SendAll(s->fd(), std::string_view(pending, static_cast<size_t>(n)), deadline)) {
      return not_tls();
    }
    (void)BIO_reset(out);
    if (rc == 1) return ProbeResult::kTls;
    if (SSL_get_error(ssl.get(), rc) != SSL_ERROR_WANT_READ) {
      // Refused later in the handshake (a certificate it wants): it spoke TLS all the same.
      return SSL_get0_peer_certificate(ssl.get()) != nullptr ? ProbeResult::kTls : not_tls();
    }
    if (!WaitFor(s->fd(), POLLIN, deadline)) {
      return first.empty() ? ProbeResult::kSilent : ProbeResult::kOther;
    }
    char buf[16384];
    ssize_t got = ::recv(s->fd(), buf, sizeof(buf), 0);
    if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) return not_tls();
    if (got <= 0) continue;
    if (first.size() < 9) first.append(buf, std::min<size_t>(9 - first.size(), got));
    BIO_write(in, buf, static_cast<int>(got));
  }
}

// Sends HTTP/2's preface in plain text: kPlainText when a SETTINGS frame comes back, kTls for a
// TLS alert; none when the server closed the connection without a word (a TLS server does).
std::optional<ProbeResult> PlainProbe(const std::string& address, Deadline deadline) {
  std::unique_ptr<Socket> s = Connect(address, deadline);
  if (s == nullptr) return ProbeResult::kUnreachable;
  if (!SendAll(s->fd(), kPreface, deadline)) return std::nullopt;
  std::string reply;
  bool open = Receive(s->fd(), 9, deadline, &reply);
  if (LooksLikeHttp2Frame(reply)) return ProbeResult::kPlainText;
  if (!reply.empty() && static_cast<unsigned char>(reply[0]) == kTlsAlert) return ProbeResult::kTls;
  if (!reply.empty()) return ProbeResult::kOther;
  if (open) return ProbeResult::kSilent;
  return std::nullopt;
}

}  // namespace

ProbeResult ProbeServer(const std::string& address, Transport first,
                        std::chrono::milliseconds timeout) {
  Deadline deadline = SteadyClock::now() + timeout;
  if (first == Transport::kTls) return TlsProbe(address, deadline);
  if (std::optional<ProbeResult> plain = PlainProbe(address, deadline)) return *plain;
  return TlsProbe(address, deadline) == ProbeResult::kTls ? ProbeResult::kTls : ProbeResult::kOther;
}

std::string TransportMismatch(const std::string& address, Transport client,
                              std::chrono::milliseconds timeout) {
  ProbeResult server = ProbeServer(address, client, timeout);
  if (client == Transport::kPlainText && server == ProbeResult::kTls) {
    return "serves TLS (a cluster with credentials), and this client called it in plain text: "
           "pass --credentials DIR or set LAKECACHE_CREDENTIALS=DIR, DIR the cluster's "
           "credentials folder (`lakecache cluster up --dir DIR` writes them there)";
  }
  if (client == Transport::kTls && server == ProbeResult::kPlainText) {
    return "serves plain text (started without --credentials, e.g. `cluster up --insecure`), and "
           "this client called it over TLS: drop --credentials (and unset "
           "LAKECACHE_CREDENTIALS), or start the cluster with credentials";
  }
  return "";
}

}  // namespace lakecache::rpc
