// The HTTP listener of a daemon (--metrics-listen): Prometheus' `/metrics` from the process's
// metrics registry, and whatever pages the daemon adds (the master's status page), on one
// embedded server (cpp-httplib) with two threads of its own.
//
// Who may read it: a loopback listener serves anyone on the host, as the gRPC listeners do.
// Beyond loopback the daemon either has --insecure (plain, open: checked by the caller, as for
// --listen) or a token file (`metrics.token` of the credentials folder): every request must then
// present that token as `Authorization: Bearer TOKEN`, or as the password of HTTP Basic auth, so a
// browser can open the status page. The token is compared by digest in constant time, re-read when
// the file changes, and never logged. A refused request gets 401 and nothing else.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "common/metrics.h"
#include "common/result.h"

namespace lakecache {

struct HttpReply {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};
// A page: its reply to a GET, made on one of the endpoint's threads.
using HttpPage = std::function<HttpReply()>;

struct HttpEndpointOptions {
  std::string listen;      // HOST:PORT (port 0: any free one)
  std::string token_path;  // non-empty: every request needs this file's token
};

class HttpEndpoint {
 public:
  // Listens on options.listen and serves `/metrics` from `registry` (which must outlive the
  // endpoint) and `pages` (path -> page, e.g. "/" and "/status.json"). Returns once it listens;
  // an address that cannot be bound or a token file that cannot be read is an error naming it.
  static Result<std::unique_ptr<HttpEndpoint>> Start(const HttpEndpointOptions& options,
                                                     const metrics::Registry* registry,
                                                     std::map<std::string, HttpPage> pages = {});
  ~HttpEndpoint();  // stops serving; waits for requests in progress
  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

  // HOST:PORT it listens on (the bound port when options.listen named port 0).
  const std::string& address() const { return address_; }

 private:
  struct Impl;
  explicit HttpEndpoint(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::string address_;
};

}  // namespace lakecache
