#include "http/http_endpoint.h"

#include <httplib.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <array>
#include <thread>

#include "common/mutex.h"
#include "security/auth.h"

namespace lakecache {
namespace {

constexpr size_t kThreads = 2;
constexpr char kMetricsType[] = "text/plain; version=0.0.4; charset=utf-8";

using Digest = std::array<unsigned char, SHA256_DIGEST_LENGTH>;

Digest Sha256(std::string_view s) {
  Digest d{};
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), d.data());
  return d;
}

// The password of `Basic base64(user:password)`, or "" when it is not one.
std::string BasicPassword(std::string_view encoded) {
  if (encoded.empty() || encoded.size() > 4096 || encoded.size() % 4 != 0) return "";
  std::string decoded(encoded.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(decoded.data()),
                          reinterpret_cast<const unsigned char*>(encoded.data()),
                          static_cast<int>(encoded.size()));
  if (n < 0) return "";
  // EVP_DecodeBlock counts the padding as zero bytes.
  size_t len = static_cast<size_t>(n);
  for (size_t i = encoded.size(); i > 0 && encoded[i - 1] == '=' && len > 0; --i) --len;
  decoded.resize(len);
  size_t colon = decoded.find(':');
  return colon == std::string::npos ? "" : decoded.substr(colon + 1);
}

// The token a request presents: `Bearer TOKEN`, or the password of `Basic ...`.
std::string PresentedToken(const httplib::Request& request) {
  std::string header = request.get_header_value("Authorization");
  std::string_view h = header;
  if (h.starts_with("Bearer ")) return std::string(h.substr(7));
  if (h.starts_with("Basic ")) return BasicPassword(h.substr(6));
  return "";
}

}  // namespace

struct HttpEndpoint::Impl {
  httplib::Server server;
  std::thread thread;
  std::unique_ptr<security::WatchedFile> token;  // null: open
  // Set once the server runs (listen_after_bind made its task queue, having set is_running), or
  // once it returned: until then stop() would not reach it, and the destructor would wait forever.
  Mutex mu;
  CondVar running_cv;
  bool running GUARDED_BY(mu) = false;

  bool Allowed(const httplib::Request& request) const {
    if (token == nullptr) return true;
    Result<std::string> want = token->Read();
    if (!want.ok() || want->empty()) {
      spdlog::warn("metrics endpoint: refusing a request: {}", want.status().ToString());
      return false;
    }
    std::string presented = PresentedToken(request);
    Digest a = Sha256(presented), b = Sha256(*want);
    return !presented.empty() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
  }
};

HttpEndpoint::HttpEndpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpEndpoint::~HttpEndpoint() {
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

Result<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(const HttpEndpointOptions& options,
                                                          const metrics::Registry* registry,
                                                          std::map<std::string, HttpPage> pages) {
  const std::string& listen = options.listen;
  size_t colon = listen.rfind(':');
  std::string host = colon == std::string::npos ? "" : listen.substr(0, colon);
  int port = -1;
  if (colon != std::string::npos) {
    try {
      size_t used = 0;
      port = std::stoi(listen.substr(colon + 1), &used);
      if (used != listen.size() - colon - 1) port = -1;
    } catch (const std::exception&) {
      port = -1;
    }
  }
  if (host.empty() || port < 0 || port > 65535) {
    return Status::InvalidArgument("--metrics-listen " + listen + ": want HOST:PORT");
  }
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }

  auto impl = std::make_unique<Impl>();
  if (!options.token_path.empty()) {
    impl->token = std::make_unique<security::WatchedFile>(options.token_path);
    Result<std::string> token = impl->token->Read();
    if (!token.ok()) return token.status();
    if (token->empty()) {
      return Status::InvalidArgument("--metrics-listen: the token file " + options.token_path +
                                     " is empty");
    }
  }
  httplib::Server& server = impl->server;
  // SO_REUSEADDR only: a port another process listens on is refused, not shared (SO_REUSEPORT).
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  Impl* raw = impl.get();
  server.new_task_queue = [raw] {
    {
      MutexLock lock(&raw->mu);
      raw->running = true;
    }
    raw->running_cv.SignalAll();
    return new httplib::ThreadPool(kThreads);
  };
  server.set_pre_routing_handler(
      [raw](const httplib::Request& request, httplib::Response& response) {
        if (raw->Allowed(request)) return httplib::Server::HandlerResponse::Unhandled;
        response.status = 401;
        response.set_header("WWW-Authenticate", "Basic realm=\"lakecache\", charset=\"UTF-8\"");
        response.set_content("401: this endpoint needs the metrics token (metrics.token)\n",
                             "text/plain; charset=utf-8");
        return httplib::Server::HandlerResponse::Handled;
      });
  server.Get("/metrics", [registry](const httplib::Request&, httplib::Response& response) {
    response.set_content(registry->Scrape(), kMetricsType);
  });
  for (auto& [path, page] : pages) {
    server.Get(path,
               [page = std::move(page)](const httplib::Request&, httplib::Response& response) {
                 HttpReply reply = page();
                 response.status = reply.status;
                 response.set_header("Cache-Control", "no-store");
                 response.set_content(std::move(reply.body), reply.content_type);
               });
  }

  int bound = port;
  if (port == 0) {
    bound = server.bind_to_any_port(host);
  } else if (!server.bind_to_port(host, port)) {
    bound = -1;
  }
  if (bound <= 0) {
    return Status::Unavailable("--metrics-listen " + listen + ": cannot listen there (in use, " +
                               "or not an address of this host)");
  }
  impl->thread = std::thread([raw] {
    raw->server.listen_after_bind();
    MutexLock lock(&raw->mu);  // a server that never ran: nothing to wait for either
    raw->running = true;
    raw->running_cv.SignalAll();
  });
  {
    MutexLock lock(&raw->mu);
    while (!raw->running) raw->running_cv.Wait(&raw->mu);
  }
  std::unique_ptr<HttpEndpoint> endpoint(new HttpEndpoint(std::move(impl)));
  std::string shown = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  endpoint->address_ = shown + ":" + std::to_string(bound);
  return endpoint;
}

}  // namespace lakecache
