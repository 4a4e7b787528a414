#include "ufs/s3_store.h"

#include <curl/curl.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>
#include <optional>

#include "ufs/http_headers.h"
#include "ufs/s3_xml.h"
#include "ufs/sigv4.h"

namespace lakecache {
namespace {

const char kEmptySha256[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

Result<uint64_t> ContentLengthOf(const HttpResponse& r, const std::string& what) {
  std::string v = r.Header("content-length");
  if (std::optional<uint64_t> length = ParseContentLength(v)) return *length;
  return Status::Internal(what + ": response has no valid Content-Length ('" + v + "')");
}

bool IsRetryableCode(long status, const std::string& code) {
  return status >= 500 || status == 429 || code == "SlowDown" || code == "RequestTimeout" ||
         code == "InternalError" || code == "ServiceUnavailable" || code == "RequestTimeTooSkewed";
}

}  // namespace

Result<std::unique_ptr<S3Store>> S3Store::Create(S3StoreOptions options) {
  if (options.bucket.empty()) return Status::InvalidArgument("S3 store: missing bucket name");
  if (options.endpoint.empty())
    options.endpoint = "https://s3." + options.region + ".amazonaws.com";
  std::string_view ep = options.endpoint;
  size_t sep = ep.find("://");
  std::string scheme(sep == std::string_view::npos ? "" : ep.substr(0, sep));
  if (scheme != "http" && scheme != "https") {
    return Status::InvalidArgument("endpoint '" + options.endpoint +
                                   "' is not an http:// or https:// URL");
  }
  std::string_view host = ep.substr(sep + 3);
  host = host.substr(0, host.find('/'));
  if (host.empty())
    return Status::InvalidArgument("endpoint '" + options.endpoint + "' has no host");
  return std::unique_ptr<S3Store>(new S3Store(std::move(options), scheme, std::string(host)));
}

S3Store::S3Store(S3StoreOptions options, std::string base_scheme, std::string base_host)
    : options_(std::move(options)),
      base_scheme_(std::move(base_scheme)),
      base_host_(std::move(base_host)),
      http_(options_.http) {}

std::string S3Store::Describe() const {
  return std::string(UriSchemeName(options_.scheme)) + "://" + options_.bucket;
}

Result<HttpResponse> S3Store::Send(HttpRequest& request, std::string_view key,
                                   const std::string& query, const IoOptions& options) {
  std::string host = options_.path_style ? base_host_ : options_.bucket + "." + base_host_;
  std::string path = options_.path_style ? "/" + UriEncode(options_.bucket, false) : "";
  path += "/" + UriEncode(key, true);
  request.url = base_scheme_ + "://" + host + path + (query.empty() ? "" : "?" + query);
  if (!options_.path_style) {
    request.unresolved_host_hint =
        "the bucket was addressed virtual-hosted, as " + host +
        "; a server without such names needs path-style: --path-style, or path_style: true in "
        "the config";
  }

  if (options_.before_signing) options_.before_signing(request);
  std::string payload_hash =
      request.body.empty() ? kEmptySha256
                           : Sha256Hex(std::string_view(request.body.data(), request.body.size()));
  const Credentials& creds = options_.credentials;
  const size_t unsigned_headers = request.headers.size();
  for (int attempt = 0;; ++attempt) {
    request.headers.resize(unsigned_headers);
    request.headers.emplace_back("Host", host);
    if (!creds.anonymous()) {
      auto now = std::chrono::system_clock::now() +
                 std::chrono::milliseconds(clock_skew_ms_.load(std::memory_order_relaxed));
      std::string amz_date = AmzDate(now);
      request.headers.emplace_back("x-amz-date", amz_date);
      request.headers.emplace_back("x-amz-content-sha256", payload_hash);
      if (!creds.session_token.empty()) {
        request.headers.emplace_back("x-amz-security-token", creds.session_token.Reveal());
      }
      SigV4Request to_sign{request.method, path, query, request.headers, payload_hash};
      SigV4Signature sig = SignV4(to_sign, {creds.access_key_id, creds.secret_access_key},
                                  {options_.region, "s3", amz_date});
      request.headers.emplace_back("Authorization", sig.authorization);
    }
    Result<HttpResponse> response = http_.Execute(request, options);
    if (attempt > 0 || creds.anonymous() || !response.ok() || !AdjustClockSkew(*response)) {
      return response;
    }
    // Signed again with the store's time: this host's clock had jumped (or drifted) too far.
  }
}

bool S3Store::AdjustClockSkew(const HttpResponse& response) {
  if (response.status != 403) return false;
  std::string code = ParseS3Error(response.body).code;
  bool skewed = code == "RequestTimeTooSkewed" || code == "RequestExpired";
  // A HEAD's refusal has no body to name its reason: the Date header tells.
  if (!skewed && !code.empty()) return false;
  std::optional<std::chrono::system_clock::time_point> server =
      ParseHttpDate(response.Header("date"));
  if (!server) return false;
  auto skew = std::chrono::duration_cast<std::chrono::milliseconds>(
      *server - std::chrono::system_clock::now());
  // S3 refuses beyond 15 minutes; 5 leaves room for a slow answer and reads no wrong Date as one.
  if (!skewed && std::chrono::abs(skew - std::chrono::milliseconds(clock_skew_ms_.load())) <
                     std::chrono::minutes(5)) {
    return false;
  }
  if (code.empty()) code = "HTTP 403 to a request signed with a clock that far off";
  int64_t before = clock_skew_ms_.exchange(skew.count(), std::memory_order_relaxed);
  if (std::llabs(before - skew.count()) >= 1000) {
    spdlog::warn(
        "{}: the store says this host's clock is {:+} s off ({}); requests are signed with the "
        "store's time from now on",
        Describe(), skew.count() / 1000, code);
  }
  return true;
}

Status S3Store::ErrorFor(const HttpResponse& response, std::string_view key) const {
  S3Error err = ParseS3Error(response.body);
  std::string where = Describe() + (key.empty() ? "" : "/" + std::string(key));
  std::string http = "HTTP " + std::to_string(response.status) +
                     (err.code.empty() ? "" : " " + err.code) +
                     (err.message.empty() ? "" : ": " + err.message);
  long status = response.status;
  if (status == 404 || err.code == "NoSuchKey" || err.code == "NoSuchBucket" ||
      err.code == "NoSuchUpload") {
    std::string what = err.code == "NoSuchBucket"   ? "bucket does not exist"
                       : err.code == "NoSuchUpload" ? "no such multipart upload"
                                                    : "not found";
    return Status::NotFound(where + ": " + what + " (" + http + ")");
  }
  if (status == 403 || err.code == "InvalidAccessKeyId" || err.code == "ExpiredToken") {
    std::string who = options_.credentials.anonymous()
                          ? "anonymous request (no credentials were found)"
                          : "access key id '" + options_.credentials.access_key_id + "'";
    return Status::AccessDenied(where + ": access denied for " + who + " (" + http + ")");
  }
  if (status == 412) return Status::PreconditionFailed(where + ": object changed (" + http + ")");
  // Before the 5xx rule: a server without the feature will not grow it on a retry.
  if (status == 501 || status == 405 || err.code == "NotImplemented" ||
      err.code == "MethodNotAllowed") {
    return Status::Unimplemented(where + ": the server does not implement this request (" + http +
                                 ")");
  }
  if (IsRetryableCode(status, err.code)) return Status::Unavailable(where + ": " + http);
  // The body differs from its Content-MD5: damaged on the way, so sending it again may work.
  if (err.code == "BadDigest") {
    return Status::Unavailable(where + ": the body arrived damaged (" + http + ")");
  }
  if (status == 301 || status == 307 || err.code == "PermanentRedirect") {
    return Status::InvalidArgument(where +
                                   ": the bucket must be addressed through another "
                                   "endpoint or region (" +
                                   http + ")");
  }
  return Status::InvalidArgument(where + ": request rejected (" + http + ")");
}

Result<ListPage> S3Store::List(const ListRequest& request, const IoOptions& options) {
  std::string query = AddQueryParam("", "list-type", "2");
  if (!request.continuation_token.empty()) {
    query = AddQueryParam(query, "continuation-token", request.continuation_token);
  }
  if (!request.delimiter.empty()) query = AddQueryParam(query, "delimiter", request.delimiter);
  query = AddQueryParam(query, "max-keys", std::to_string(request.max_keys));
  query = AddQueryParam(query, "prefix", request.prefix);
  HttpRequest http;
  http.method = "GET";
  LC_ASSIGN_OR_RETURN(HttpResponse response, Send(http, "", query, options));
  if (response.status != 200) return ErrorFor(response, request.prefix);
  auto page = ParseListObjectsV2(response.body);
  if (!page.ok()) return page.status().WithContext(Describe() + "/" + request.prefix);
  return page;
}

Result<ObjectInfo> S3Store::Head(std::string_view key, const IoOptions& options) {
  HttpRequest http;
  http.method = "HEAD";
  LC_ASSIGN_OR_RETURN(HttpResponse response, Send(http, key, "", options));
  if (response.status != 200) return ErrorFor(response, key);
  ObjectInfo info;
  info.key = std::string(key);
  LC_ASSIGN_OR_RETURN(info.size, ContentLengthOf(response, Describe() + "/" + info.key));
  info.etag = UnquoteEtag(response.Header("etag"));
  std::string modified = response.Header("last-modified");
  if (!modified.empty()) info.mtime = static_cast<int64_t>(curl_getdate(modified.c_str(), nullptr));
  if (info.mtime < 0) info.mtime = 0;
  return info;
}

Result<ReadReply> S3Store::ReadRaw(std::string_view key, uint64_t offset,
                                   std::span<const std::span<char>> bufs,
                                   const ReadOptions& options) {
  uint64_t total = 0;
  for (std::span<char> b : bufs) total += b.size();
  if (total == 0) return ReadReply{};
  HttpRequest http;
  http.method = "GET";
  http.headers.emplace_back(
      "Range", "bytes=" + std::to_string(offset) + "-" + std::to_string(offset + total - 1));
  if (!options.if_match.empty()) {
    http.headers.emplace_back("If-Match", "\"" + options.if_match + "\"");
  }
  http.sinks = bufs;
  http.accept_truncated = true;
  LC_ASSIGN_OR_RETURN(HttpResponse response, Send(http, key, "", options));
  std::string where = Describe() + "/" + std::string(key);
  ReadReply reply;
  reply.etag = UnquoteEtag(response.Header("etag"));
  if (response.status == 416) {  // offset at or past the end (or an empty object)
    if (std::optional<uint64_t> size = ParseUnsatisfiedRange(response.Header("content-range"))) {
      reply.object_size = *size;
    }
    return reply;
  }
  if (response.status != 206 && response.status != 200) return ErrorFor(response, key);
  if (response.status == 200 && offset != 0) {
    return Status::Internal(where +
                            ": server ignored the Range header (HTTP 200 for a ranged GET)");
  }
  if (response.status == 200) {  // the whole object
    LC_ASSIGN_OR_RETURN(reply.object_size, ContentLengthOf(response, where));
  }
  if (response.status == 206) {
    ContentRange range;
    if (!ParseContentRange(response.Header("content-range"), &range) || range.first != offset) {
      return Status::Internal(where + ": asked for offset " + std::to_string(offset) +
                              " but got Content-Range '" + response.Header("content-range") + "'");
    }
    if (range.total != kUnknownTotal) reply.object_size = range.total;
    if (range.total != kUnknownTotal && offset >= range.total) return reply;
  }
  if (response.truncated) {
    return Status::Unavailable(where + ": response body ended early (" +
                               std::to_string(response.sink_bytes) + " bytes)");
  }
  reply.bytes = response.sink_bytes;
  return reply;
}

}  // namespace lakecache
