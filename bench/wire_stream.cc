#include "wire_stream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace lakecache::bench {
namespace {

bool RecvAll(int fd, void* out, size_t n) {
  auto* p = static_cast<char*>(out);
  while (n > 0) {
    ssize_t got = ::recv(fd, p, n, MSG_WAITALL);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

bool SendAll(int fd, iovec* iov, int count) {
  while (count > 0) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(count);
    ssize_t sent = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0) return false;
    auto left = static_cast<size_t>(sent);
    while (count > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --count;
    }
    if (count > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return true;
}

void SetNoDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void ServeConnection(int fd, const char* data, size_t size) {
  WireRequest request;
  while (RecvAll(fd, &request, sizeof(request))) {
    uint64_t offset = std::min<uint64_t>(request.offset, size);
    uint64_t length = std::min<uint64_t>(request.length, size - offset);
    iovec iov[2] = {{&length, sizeof(length)}, {const_cast<char*>(data + offset), length}};
    if (!SendAll(fd, iov, 2)) break;
  }
  ::close(fd);
}

}  // namespace

int ListenLoopback(uint16_t port, uint16_t* bound) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(fd, 64) != 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::fprintf(stderr, "cannot listen on 127.0.0.1:%u: %s\n", port, std::strerror(errno));
    if (fd >= 0) ::close(fd);
    return -1;
  }
  *bound = ntohs(addr.sin_port);
  return fd;
}

void ServeWire(int listen_fd, const char* data, size_t size) {
  for (;;) {
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      std::fprintf(stderr, "accept: %s\n", std::strerror(errno));
      return;
    }
    SetNoDelay(fd);
    std::thread(ServeConnection, fd, data, size).detach();
  }
}

WireConnection::~WireConnection() {
  if (fd_ >= 0) ::close(fd_);
}

bool WireConnection::Connect(const std::string& host_port) {
  size_t colon = host_port.rfind(':');
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (colon == std::string::npos ||
      ::inet_pton(AF_INET, host_port.substr(0, colon).c_str(), &addr.sin_addr) != 1) {
    std::fprintf(stderr, "'%s' is not IPv4-ADDRESS:PORT\n", host_port.c_str());
    return false;
  }
  addr.sin_port = htons(static_cast<uint16_t>(std::atoi(host_port.c_str() + colon + 1)));
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    std::fprintf(stderr, "cannot connect to %s: %s\n", host_port.c_str(), std::strerror(errno));
    return false;
  }
  SetNoDelay(fd_);
  return true;
}

int64_t WireConnection::Fetch(uint64_t offset, uint64_t length, char* out) {
  WireRequest request{offset, length};
  iovec iov = {&request, sizeof(request)};
  uint64_t got = 0;
  if (!SendAll(fd_, &iov, 1) || !RecvAll(fd_, &got, sizeof(got)) || got > length ||
      !RecvAll(fd_, out, got)) {
    return -1;
  }
  return static_cast<int64_t>(got);
}

bool WirePool::Open(const std::string& host_port, unsigned count) {
  for (unsigned i = 0; i < count; ++i) {
    connections_.push_back(std::make_unique<WireConnection>());
    if (!connections_.back()->Connect(host_port)) return false;
    idle_.push_back(connections_.back().get());
  }
  return true;
}

int64_t WirePool::Fetch(uint64_t offset, uint64_t length, char* out) {
  WireConnection* c;
  {
    std::unique_lock<std::mutex> lock(mu_);
    freed_.wait(lock, [this] { return !idle_.empty(); });
    c = idle_.back();
    idle_.pop_back();
    peak_busy_ = std::max(peak_busy_, connections_.size() - idle_.size());
  }
  int64_t got = c->Fetch(offset, length, out);
  {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.push_back(c);
  }
  freed_.notify_one();
  return got;
}

size_t WirePool::PeakBusy() {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_busy_;
}

}  // namespace lakecache::bench
