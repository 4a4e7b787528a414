// HttpClient: blocking HTTP(S) requests over libcurl, with connection reuse.
//
// Each request borrows an idle curl easy handle from a pool (keeping its warm connection), so
// parallel requests run on separate handles and sequential ones reuse connections. A handle idle
// for a minute is closed (with its connection), so a burst of parallel requests does not keep its
// connections open for the life of the process. Thread-safe.
// Transport errors map to Status: connection refused/reset, timeouts and truncated bodies are
// kUnavailable (retryable); certificate and TLS failures are final (kIoError) with a message saying
// how to trust the certificate. HTTP status codes are returned, not interpreted.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/idle_trim.h"
#include "common/mutex.h"
#include "common/result.h"
#include "common/units.h"
#include "ufs/object_store.h"
#include "ufs/sigv4.h"

namespace lakecache {

struct HttpClientOptions {
  std::string ca_bundle;  // PEM file of trusted CAs; empty: the system store
  Duration connect_timeout = std::chrono::seconds(10);
  // A transfer slower than 1 KiB/s for this long is abandoned as stalled (kUnavailable).
  Duration stall_timeout = std::chrono::seconds(30);
};

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  HeaderList headers;
  std::span<const char> body;  // request body (PUT)
  // When set, the response body is written here (at most sink.size() bytes; more is an error)
  // instead of HttpResponse::body. Error responses (status >= 300) always go to HttpResponse::body.
  std::span<char> sink;
  // Instead of `sink`: consecutive buffers filled in order (a ranged GET spanning several blocks).
  std::span<const std::span<char>> sinks;
  // When set, a body cut short after complete headers is returned with HttpResponse::truncated
  // rather than as an error, so the caller can judge it by the headers (some servers announce a
  // byte they never send for ranges over empty objects).
  bool accept_truncated = false;
  // Appended to the error when the URL's host name does not resolve: what the caller knows of why
  // (a virtual-hosted bucket name under a server that has no such names).
  std::string unresolved_host_hint;
};

struct HttpResponse {
  long status = 0;
  HeaderList headers;  // names lowercased
  std::string body;
  size_t sink_bytes = 0;   // bytes written into HttpRequest::sink (or sinks, in total)
  bool truncated = false;  // see HttpRequest::accept_truncated

  // The first header with this (lowercase) name, or empty.
  std::string Header(std::string_view name) const;
};

class HttpClient {
 public:
  explicit HttpClient(HttpClientOptions options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  Result<HttpResponse> Execute(const HttpRequest& request, const IoOptions& options);

  // Closes the connections idle for `max_idle` or longer (an idle trim does, for a minute).
  void CloseIdle(std::chrono::steady_clock::duration max_idle) EXCLUDES(mu_);
  size_t idle_connections() const EXCLUDES(mu_);

 private:
  struct Handle;
  std::unique_ptr<Handle> Acquire();
  void Release(std::unique_ptr<Handle> handle) EXCLUDES(mu_);
  // Moves the handles idle for `max_idle` or longer at `now` into *stale (closed by the caller,
  // after it lets go of the lock).
  void TakeStaleLocked(std::chrono::steady_clock::time_point now,
                       std::chrono::steady_clock::duration max_idle,
                       std::vector<std::unique_ptr<Handle>>* stale) REQUIRES(mu_);

  const HttpClientOptions options_;
  mutable Mutex mu_;
  std::vector<std::unique_ptr<Handle>> idle_ GUARDED_BY(mu_);  // the last used last
  IdleTrim idle_trim_;  // last: unregistered before the rest goes
};

}  // namespace lakecache
