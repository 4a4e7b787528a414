#include "ufs/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iterator>

#include "ufs/http_headers.h"

namespace lakecache {
namespace {

constexpr long kReceiveBufferBytes = 512L * 1024;

std::once_flag g_curl_init;

// "GET http://127.0.0.1:9000/bucket/key" without the query string, for messages.
std::string RequestName(const HttpRequest& req) {
  return req.method + " " + req.url.substr(0, req.url.find('?'));
}

// Where a transfer's bytes go, shared with the curl callbacks.
struct Transfer {
  CURL* curl = nullptr;
  const HttpRequest* request = nullptr;
  HttpResponse* response = nullptr;
  bool sink_overflow = false;
  std::span<const std::span<char>> sinks;  // request.sinks, or request.sink as a list of one
  size_t sink_index = 0;                   // the buffer being filled
  size_t sink_offset = 0;                  // bytes already in it
  size_t sink_capacity = 0;                // all buffers together
};

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  AddHeaderLine(std::string_view(data, size * count), &t->response->headers);
  return size * count;
}

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t n = size * count;
  long status = 0;
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
  if (t->sinks.empty() || status >= 300) {
    t->response->body.append(data, n);
    return n;
  }
  size_t& used = t->response->sink_bytes;
  if (used + n > t->sink_capacity) {
    t->sink_overflow = true;
    return 0;  // aborts the transfer with CURLE_WRITE_ERROR
  }
  for (size_t done = 0; done < n;) {
    std::span<char> buf = t->sinks[t->sink_index];
    size_t k = std::min(n - done, buf.size() - t->sink_offset);
    std::memcpy(buf.data() + t->sink_offset, data + done, k);
    done += k;
    t->sink_offset += k;
    if (t->sink_offset == buf.size()) {
      ++t->sink_index;
      t->sink_offset = 0;
    }
  }
  used += n;
  return n;
}

bool IsTransient(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return true;
    default:
      return false;
  }
}

bool IsTlsFailure(CURLcode code) {
  return code == CURLE_PEER_FAILED_VERIFICATION || code == CURLE_SSL_CACERT_BADFILE ||
         code == CURLE_SSL_CONNECT_ERROR || code == CURLE_SSL_CERTPROBLEM;
}

// The handle's settings for one request: the connection's limits, the call's deadline, where
// headers and body go, the method and the body sent.
Status Configure(CURL* curl, const HttpClientOptions& client, const HttpRequest& request,
                 const IoOptions& options, Transfer* transfer, char* errbuf) {
  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_PATH_AS_IS, 1L);  // keys may hold "." or ".." segments
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);
  // libcurl's 16 KiB default costs one recv and one callback per 16 KiB of a multi-MiB body.
  curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, kReceiveBufferBytes);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(client.connect_timeout.count()));
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME,
                   static_cast<long>(std::max<int64_t>(1, client.stall_timeout.count() / 1000)));
  if (options.deadline != Clock::time_point::max()) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(options.deadline - Clock::now());
    if (left.count() <= 0)
      return Status::DeadlineExceeded(RequestName(request) + ": deadline passed");
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(left.count()));
  }
  if (!client.ca_bundle.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, client.ca_bundle.c_str());
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, transfer);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, transfer);

  if (request.method == "HEAD") {
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (request.method != "GET") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }
  if (request.method == "PUT" || request.method == "POST") {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.data() ? request.body.data() : "");
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(request.body.size()));
  }
  return Status::Ok();
}

// What a transfer that ended in `rc` means: retryable (kUnavailable) only where the failure is
// the network's, with the hint that fixes it where there is one.
Status TransferFailure(CURLcode rc, const char* errbuf, const HttpRequest& request,
                       const Transfer& transfer, const IoOptions& options) {
  std::string detail = errbuf[0] ? errbuf : curl_easy_strerror(rc);
  std::string what = RequestName(request);
  if (transfer.sink_overflow) {
    return Status::Internal(what + ": response body is larger than the " +
                            std::to_string(transfer.sink_capacity) + " bytes expected");
  }
  if (rc == CURLE_OPERATION_TIMEDOUT && Clock::now() >= options.deadline) {
    return Status::DeadlineExceeded(what + ": deadline passed: " + detail);
  }
  if (IsTlsFailure(rc)) {
    return Status::IoError(what + ": TLS certificate verification failed: " + detail +
                           " (trust the server's CA with --ca-bundle FILE or AWS_CA_BUNDLE)");
  }
  if (rc == CURLE_COULDNT_RESOLVE_HOST && !request.unresolved_host_hint.empty()) {
    detail += " (" + request.unresolved_host_hint + ")";
  }
  if (IsTransient(rc)) return Status::Unavailable(what + ": " + detail);
  return Status::IoError(what + ": " + detail);
}

}  // namespace

std::string HttpResponse::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return v;
  }
  return "";
}

struct HttpClient::Handle {
  CURL* curl = nullptr;
  std::chrono::steady_clock::time_point idle_since;
  ~Handle() {
    if (curl) curl_easy_cleanup(curl);
  }
};

// A connection unused this long is closed: the store's side may have dropped it anyway, and an
// idle daemon should not hold sockets (and their buffers) of its last burst.
constexpr auto kMaxIdle = std::chrono::seconds(60);

HttpClient::HttpClient(HttpClientOptions options)
    : options_(std::move(options)), idle_trim_([this] { CloseIdle(kMaxIdle); }) {
  std::call_once(g_curl_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

HttpClient::~HttpClient() = default;

std::unique_ptr<HttpClient::Handle> HttpClient::Acquire() {
  {
    MutexLock lock(&mu_);
    if (!idle_.empty()) {
      auto h = std::move(idle_.back());
      idle_.pop_back();
      curl_easy_reset(h->curl);  // keeps the live connection
      return h;
    }
  }
  auto h = std::make_unique<Handle>();
  h->curl = curl_easy_init();
  return h;
}

void HttpClient::Release(std::unique_ptr<Handle> handle) {
  auto now = std::chrono::steady_clock::now();
  handle->idle_since = now;
  std::vector<std::unique_ptr<Handle>> stale;  // closed outside the lock (destroyed after it)
  MutexLock lock(&mu_);
  TakeStaleLocked(now, kMaxIdle, &stale);
  idle_.push_back(std::move(handle));
}

void HttpClient::CloseIdle(std::chrono::steady_clock::duration max_idle) {
  std::vector<std::unique_ptr<Handle>> stale;  // closed outside the lock (destroyed after it)
  MutexLock lock(&mu_);
  TakeStaleLocked(std::chrono::steady_clock::now(), max_idle, &stale);
}

void HttpClient::TakeStaleLocked(std::chrono::steady_clock::time_point now,
                                 std::chrono::steady_clock::duration max_idle,
                                 std::vector<std::unique_ptr<Handle>>* stale) {
  // Oldest first: handles are taken from and given back at the end.
  auto fresh = std::find_if(idle_.begin(), idle_.end(),
                            [&](const auto& h) { return now - h->idle_since < max_idle; });
  std::move(idle_.begin(), fresh, std::back_inserter(*stale));
  idle_.erase(idle_.begin(), fresh);
}

size_t HttpClient::idle_connections() const {
  MutexLock lock(&mu_);
  return idle_.size();
}

Result<HttpResponse> HttpClient::Execute(const HttpRequest& request, const IoOptions& options) {
  auto handle = Acquire();
  if (handle->curl == nullptr) return Status::Internal("curl_easy_init failed");
  CURL* curl = handle->curl;
  HttpResponse response;
  Transfer transfer;
  transfer.curl = curl;
  transfer.request = &request;
  transfer.response = &response;
  std::span<char> single[1] = {request.sink};
  if (!request.sinks.empty()) {
    transfer.sinks = request.sinks;
  } else if (request.sink.data() != nullptr) {
    transfer.sinks = single;
  }
  for (std::span<char> buf : transfer.sinks) transfer.sink_capacity += buf.size();
  char errbuf[CURL_ERROR_SIZE] = {0};
  LC_RETURN_IF_ERROR(Configure(curl, options_, request, options, &transfer, errbuf));

  curl_slist* headers = nullptr;
  for (const auto& [k, v] : request.headers)
    headers = curl_slist_append(headers, (k + ": " + v).c_str());
  headers = curl_slist_append(headers, "Expect:");
  if (request.method == "PUT")
    headers = curl_slist_append(headers, "Content-Type: application/octet-stream");
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);

  CURLcode rc = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);

  if (rc == CURLE_PARTIAL_FILE && request.accept_truncated && response.status != 0) {
    response.truncated = true;  // the connection is in an unknown state: drop the handle
    return response;
  }
  // A failed transfer may leave the connection in an unknown state: drop the handle.
  if (rc != CURLE_OK) return TransferFailure(rc, errbuf, request, transfer, options);
  Release(std::move(handle));
  return response;
}

}  // namespace lakecache
