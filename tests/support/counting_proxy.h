// A TCP proxy between lakecache and an HTTP object store (s3rver) that counts what goes through it,
// independently of lakecache's own counters: every HTTP request (parsed from the request stream,
// keep-alive included), by kind, and the response bytes. It can also cap the response bandwidth
// (to make a load last long enough to interrupt it) and refuse every connection (the store down),
// and tells when each request ended, so a test can show that a call did not wait for one.
//
// Listens on a free 127.0.0.1 port; point a namespace's `endpoint` at endpoint(). Plain HTTP only.
// Thread-safe. The destructor closes every connection and joins its threads.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/result.h"

namespace lakecache::testing {

struct ProxyCounts {
  uint64_t requests = 0;        // every HTTP request line seen, of any method
  uint64_t object_gets = 0;     // GET of an object (whole or a Range): a block fetch
  uint64_t lists = 0;           // GET of a bucket listing (list-type=, prefix= or delimiter=)
  uint64_t heads = 0;           // HEAD (object attributes, bucket probes)
  uint64_t others = 0;          // any other method
  uint64_t connections = 0;     // accepted and forwarded to the store
  uint64_t refused = 0;         // accepted and reset while refusing (see SetRefusing)
  uint64_t response_bytes = 0;  // store -> client bytes forwarded
  uint64_t failed_parts = 0;    // part uploads answered 503 (see FailNextParts)

  ProxyCounts operator-(const ProxyCounts& earlier) const;
  // Entries in the proxy's request log so far (see CountingProxy::RequestsSince).
  uint64_t log_entries() const { return requests + refused; }
};

// "requests=3 object_gets=2 lists=1 ..." for messages.
std::string ToString(const ProxyCounts& counts);

class CountingProxy {
 public:
  // `upstream_endpoint`: "http://127.0.0.1:PORT" (the store's endpoint).
  static Result<std::unique_ptr<CountingProxy>> Start(const std::string& upstream_endpoint);
  ~CountingProxy();
  CountingProxy(const CountingProxy&) = delete;
  CountingProxy& operator=(const CountingProxy&) = delete;

  // "http://127.0.0.1:PORT": where clients connect.
  const std::string& endpoint() const { return endpoint_; }

  ProxyCounts counts() const;
  // The log of requests: request lines ("GET /bucket/key [Range: bytes=0-262143]") and, while
  // refusing, "REFUSED GET /..." (its first line, if it came in time), from entry `first` on (a
  // counts().log_entries() value), at most `max`, one a line.
  std::string RequestsSince(uint64_t first, size_t max = 20) const;
  // How many requests of the log, from entry `first` on, had ended before `t`: answered (the
  // store's first response bytes for it came through) or failed (its connection closed or was
  // reset, refused ones included). A call that returned at `t` waited for none of the others.
  size_t EndedBefore(uint64_t first, std::chrono::steady_clock::time_point t) const;

  // Caps store -> client bytes at `bytes_per_second` over all connections together; 0: no cap.
  void SetBandwidth(uint64_t bytes_per_second);
  // While refusing, open connections are closed and new ones are reset (the client sees
  // "connection reset"; its request line, when sent within 200 ms, is logged first), counted in
  // `refused`: the store is unreachable.
  void SetRefusing(bool refusing);
  // While refusing, each connection is reset `hold` after its request line instead of at once (0,
  // the default): a client that waits for a refused request waits at least that long. Lowering it
  // applies to the connections already held.
  void SetRefusalHold(std::chrono::milliseconds hold);
  // The next `count` multipart part uploads (PUT ...partNumber=...) are answered with 503
  // SlowDown by the proxy itself, and their connections closed: a storm of throttling that a
  // client must retry through. Counted in `failed_parts`.
  void FailNextParts(int count);

 private:
  CountingProxy() = default;
  struct Connection;
  struct LogEntry {
    std::string line;
    std::chrono::steady_clock::time_point ended = std::chrono::steady_clock::time_point::max();
  };

  void AcceptLoop();
  void Serve(int client_fd, int upstream_fd);
  void Refuse(int client_fd);
  // Sleeps as long as `bytes` take at the current bandwidth cap (a shared schedule: fair enough
  // across connections, each of which waits for its own slot).
  void Throttle(size_t bytes);
  // Counts and logs a request; returns its log index.
  size_t RecordRequest(const std::string& method, const std::string& target,
                       const std::string& range);
  // Marks the log entries `indices` ended now, and clears them.
  void MarkEnded(std::vector<size_t>* indices);
  void Track(int fd, bool add);

  std::string endpoint_;
  int upstream_port_ = 0;
  int listen_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<bool> refusing_{false};
  std::atomic<int> parts_to_fail_{0};
  std::atomic<uint64_t> bandwidth_{0};
  std::atomic<std::chrono::milliseconds> refusal_hold_{std::chrono::milliseconds(0)};
  std::thread acceptor_;

  mutable std::mutex mu_;
  ProxyCounts counts_;                // guarded by mu_
  std::vector<LogEntry> log_;         // guarded by mu_
  std::set<int> open_fds_;            // guarded by mu_: both ends of every live connection
  std::vector<std::thread> threads_;  // guarded by mu_
  std::chrono::steady_clock::time_point next_slot_{};  // guarded by mu_ (Throttle)
};

}  // namespace lakecache::testing
