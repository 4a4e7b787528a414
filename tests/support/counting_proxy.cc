#include "support/counting_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <sstream>

namespace lakecache::testing {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxHeaderBytes = 64 << 10;
constexpr size_t kUnthrottledChunk = 64 << 10;
constexpr size_t kThrottledChunk = 8 << 10;  // small slices keep concurrent transfers interleaved
constexpr int kPollMs = 50;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// Splits the client -> store byte stream into HTTP/1.1 requests: header block, then a body of
// Content-Length bytes. A chunked request body (lakecache sends none) stops the parsing of that
// connection; the request that had it is still counted.
class RequestParser {
 public:
  struct Request {
    std::string method, target, range;
  };

  // Feeds bytes; returns the requests whose header block completed.
  std::vector<Request> Feed(const char* data, size_t size) {
    std::vector<Request> out;
    if (broken_) return out;
    size_t at = 0;
    while (at < size && !broken_) {
      if (body_left_ > 0) {
        size_t n = std::min<uint64_t>(body_left_, size - at);
        body_left_ -= n;
        at += n;
        continue;
      }
      // Look for the end of the header block in what is buffered plus what came now.
      size_t old = header_.size();
      header_.append(data + at, size - at);
      size_t end = header_.find("\r\n\r\n", old >= 3 ? old - 3 : 0);
      if (end == std::string::npos) {
        if (header_.size() > kMaxHeaderBytes) broken_ = true;
        return out;
      }
      size_t consumed_here = end + 4 - old;  // bytes of this chunk that belong to the header
      std::string block = header_.substr(0, end);
      header_.clear();
      at += consumed_here;
      // Empty lines between requests are allowed (RFC 9112 2.2).
      size_t first = block.find_first_not_of("\r\n");
      if (first == std::string::npos) continue;
      block = block.substr(first);
      Request request;
      std::istringstream lines(block);
      std::string line;
      std::getline(lines, line);
      std::istringstream request_line(line);
      request_line >> request.method >> request.target;
      while (std::getline(lines, line)) {
        size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string name = Lower(Trim(line.substr(0, colon)));
        std::string value = Trim(line.substr(colon + 1));
        if (name == "content-length") {
          body_left_ = std::strtoull(value.c_str(), nullptr, 10);
        } else if (name == "transfer-encoding" &&
                   Lower(value).find("chunked") != std::string::npos) {
          broken_ = true;
        } else if (name == "range") {
          request.range = value;
        }
      }
      out.push_back(request);
    }
    return out;
  }

 private:
  std::string header_;
  uint64_t body_left_ = 0;
  bool broken_ = false;
};

bool IsListing(const std::string& target) {
  size_t q = target.find('?');
  if (q == std::string::npos) return false;
  std::string query = "&" + target.substr(q + 1);
  return query.find("&list-type=") != std::string::npos ||
         query.find("&prefix=") != std::string::npos ||
         query.find("&delimiter=") != std::string::npos;
}

}  // namespace

ProxyCounts ProxyCounts::operator-(const ProxyCounts& e) const {
  ProxyCounts d;
  d.requests = requests - e.requests;
  d.object_gets = object_gets - e.object_gets;
  d.lists = lists - e.lists;
  d.heads = heads - e.heads;
  d.others = others - e.others;
  d.connections = connections - e.connections;
  d.refused = refused - e.refused;
  d.response_bytes = response_bytes - e.response_bytes;
  d.failed_parts = failed_parts - e.failed_parts;
  return d;
}

std::string ToString(const ProxyCounts& c) {
  return "requests=" + std::to_string(c.requests) +
         " object_gets=" + std::to_string(c.object_gets) + " lists=" + std::to_string(c.lists) +
         " heads=" + std::to_string(c.heads) + " others=" + std::to_string(c.others) +
         " connections=" + std::to_string(c.connections) + " refused=" + std::to_string(c.refused) +
         " response_bytes=" + std::to_string(c.response_bytes) +
         " failed_parts=" + std::to_string(c.failed_parts);
}

Result<std::unique_ptr<CountingProxy>> CountingProxy::Start(const std::string& upstream_endpoint) {
  const std::string prefix = "http://127.0.0.1:";
  if (!upstream_endpoint.starts_with(prefix)) {
    return Status::InvalidArgument("CountingProxy forwards to http://127.0.0.1:PORT only, not " +
                                   upstream_endpoint);
  }
  std::unique_ptr<CountingProxy> proxy(new CountingProxy());
  proxy->upstream_port_ = std::atoi(upstream_endpoint.c_str() + prefix.size());
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IoError(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 256) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::string error = std::strerror(errno);
    ::close(fd);
    return Status::IoError("CountingProxy: bind/listen on 127.0.0.1: " + error);
  }
  proxy->listen_fd_ = fd;
  proxy->endpoint_ = prefix + std::to_string(ntohs(addr.sin_port));
  proxy->acceptor_ = std::thread([p = proxy.get()] { p->AcceptLoop(); });
  return proxy;
}

CountingProxy::~CountingProxy() {
  stop_ = true;
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

ProxyCounts CountingProxy::counts() const {
  std::lock_guard lock(mu_);
  return counts_;
}

std::string CountingProxy::RequestsSince(uint64_t first, size_t max) const {
  std::lock_guard lock(mu_);
  std::string out;
  for (uint64_t i = first; i < log_.size() && i < first + max; ++i) out += log_[i].line + "\n";
  if (log_.size() > first + max) {
    out += "... and " + std::to_string(log_.size() - first - max) + " more\n";
  }
  return out;
}

size_t CountingProxy::EndedBefore(uint64_t first, Clock::time_point t) const {
  std::lock_guard lock(mu_);
  size_t ended = 0;
  for (uint64_t i = first; i < log_.size(); ++i) ended += log_[i].ended < t ? 1 : 0;
  return ended;
}

void CountingProxy::SetRefusalHold(std::chrono::milliseconds hold) { refusal_hold_ = hold; }

void CountingProxy::SetBandwidth(uint64_t bytes_per_second) { bandwidth_ = bytes_per_second; }

void CountingProxy::SetRefusing(bool refusing) {
  refusing_ = refusing;
  if (!refusing) return;
  std::lock_guard lock(mu_);
  for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
}

void CountingProxy::Track(int fd, bool add) {
  std::lock_guard lock(mu_);
  if (add) {
    open_fds_.insert(fd);
  } else {
    open_fds_.erase(fd);
  }
}

size_t CountingProxy::RecordRequest(const std::string& method, const std::string& target,
                                    const std::string& range) {
  std::lock_guard lock(mu_);
  ++counts_.requests;
  if (method == "GET") {
    ++(IsListing(target) ? counts_.lists : counts_.object_gets);
  } else if (method == "HEAD") {
    ++counts_.heads;
  } else {
    ++counts_.others;
  }
  log_.push_back({method + " " + target + (range.empty() ? "" : " [Range: " + range + "]")});
  return log_.size() - 1;
}

void CountingProxy::MarkEnded(std::vector<size_t>* indices) {
  if (indices->empty()) return;
  Clock::time_point now = Clock::now();
  std::lock_guard lock(mu_);
  for (size_t i : *indices) log_[i].ended = now;
  indices->clear();
}

void CountingProxy::Throttle(size_t bytes) {
  uint64_t rate = bandwidth_.load();
  if (rate == 0) return;
  Clock::time_point until;
  {
    std::lock_guard lock(mu_);
    Clock::time_point now = Clock::now();
    Clock::time_point start = std::max(now, next_slot_);
    next_slot_ = start + std::chrono::microseconds(bytes * 1000000 / rate);
    until = next_slot_;
  }
  std::this_thread::sleep_until(until);
}

void CountingProxy::AcceptLoop() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, kPollMs) <= 0) continue;
    int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    if (refusing_) {
      std::lock_guard lock(mu_);
      ++counts_.refused;
      open_fds_.insert(client);
      threads_.emplace_back([this, client] { Refuse(client); });
      continue;
    }
    int upstream = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(upstream_port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (upstream < 0 ||
        ::connect(upstream, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      if (upstream >= 0) ::close(upstream);
      ::close(client);
      continue;
    }
    std::lock_guard lock(mu_);
    ++counts_.connections;
    open_fds_.insert(client);
    open_fds_.insert(upstream);
    threads_.emplace_back([this, client, upstream] { Serve(client, upstream); });
  }
}

// A connection while refusing: the first request line is logged if it comes within 200 ms (which
// request wanted the store), then, after the refusal hold, the connection is reset, as by a store
// that went away.
void CountingProxy::Refuse(int client) {
  std::string head;
  char buf[4096];
  auto deadline = Clock::now() + std::chrono::milliseconds(200);
  while (head.find("\r\n") == std::string::npos && Clock::now() < deadline && !stop_) {
    pollfd p{client, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    ssize_t n = ::recv(client, buf, sizeof(buf), 0);
    if (n <= 0) break;
    head.append(buf, static_cast<size_t>(n));
  }
  size_t eol = head.find("\r\n");
  std::vector<size_t> entry;
  {
    std::lock_guard lock(mu_);
    log_.push_back(
        {"REFUSED " + (eol == std::string::npos ? "(no request line)" : head.substr(0, eol))});
    entry.push_back(log_.size() - 1);
  }
  // The hold is read each turn: lowering it releases connections already held.
  for (auto start = Clock::now(); Clock::now() < start + refusal_hold_.load() && !stop_;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Track(client, false);
  linger reset{1, 0};
  ::setsockopt(client, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
  ::close(client);
  MarkEnded(&entry);
}

// One connection: client -> store bytes are parsed for requests and forwarded as they come; store
// -> client bytes are forwarded in slices, each after its bandwidth slot. A client's half-close is
// passed on; the connection ends when the store closes it (or either side fails).
void CountingProxy::FailNextParts(int count) { parts_to_fail_ = count; }

void CountingProxy::Serve(int client, int upstream) {
  RequestParser parser;
  std::vector<size_t> unanswered;  // log entries of this connection's requests
  std::vector<char> buf(kUnthrottledChunk);
  bool client_open = true;
  while (!stop_) {
    if (refusing_) break;
    pollfd fds[2] = {{client_open ? client : -1, POLLIN, 0}, {upstream, POLLIN, 0}};
    int ready = ::poll(fds, 2, kPollMs);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    bool failed = false;
    if (client_open && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      ssize_t n = ::recv(client, buf.data(), buf.size(), 0);
      if (n > 0) {
        bool throttled = false;
        for (const RequestParser::Request& r : parser.Feed(buf.data(), static_cast<size_t>(n))) {
          unanswered.push_back(RecordRequest(r.method, r.target, r.range));
          if (r.method == "PUT" && r.target.find("partNumber=") != std::string::npos &&
              parts_to_fail_.fetch_sub(1) > 0) {
            throttled = true;
          }
        }
        if (throttled) {
          static constexpr char kSlowDown[] =
              "HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nContent-Length: 101\r\n"
              "Connection: close\r\n\r\n<?xml version=\"1.0\"?><Error><Code>SlowDown</Code>"
              "<Message>Reduce your request rate.</Message></Error>";
          (void)WriteAll(client, kSlowDown, sizeof(kSlowDown) - 1);
          {
            std::lock_guard lock(mu_);
            ++counts_.failed_parts;
          }
          break;
        }
        failed = !WriteAll(upstream, buf.data(), static_cast<size_t>(n));
      } else if (n == 0) {
        client_open = false;
        ::shutdown(upstream, SHUT_WR);
      } else if (errno != EINTR) {
        failed = true;
      }
    }
    if (!failed && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      size_t chunk = bandwidth_.load() == 0 ? kUnthrottledChunk : kThrottledChunk;
      ssize_t n = ::recv(upstream, buf.data(), chunk, 0);
      if (n > 0) {
        MarkEnded(&unanswered);  // HTTP/1.1 without pipelining: the answer to what was asked
        Throttle(static_cast<size_t>(n));
        failed = !WriteAll(client, buf.data(), static_cast<size_t>(n));
        std::lock_guard lock(mu_);
        counts_.response_bytes += static_cast<uint64_t>(n);
      } else if (n == 0) {
        // The store closed: nothing more will be answered on this connection.
        break;
      } else if (errno != EINTR) {
        failed = true;
      }
    }
    if (failed) break;
  }
  Track(client, false);
  Track(upstream, false);
  ::close(client);
  ::close(upstream);
  MarkEnded(&unanswered);
}

}  // namespace lakecache::testing
