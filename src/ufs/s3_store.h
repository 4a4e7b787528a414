// S3Store: ObjectStore over the S3 REST API (AWS S3, OSS's S3-compatible API, s3rver, Swift s3api).
//
// Requests are signed with SigV4 (unsigned when the credentials are anonymous), addressed
// path-style
// ("endpoint/bucket/key") or virtual-hosted ("bucket.endpoint/key"), and sent through a shared
// HttpClient, which reuses connections. Thread-safe. Retries are not done here: wrap in
// RetryingStore.
#pragma once

#include <memory>
#include <string>

#include "common/credentials.h"
#include "common/object_uri.h"
#include "ufs/http_client.h"
#include "ufs/object_store.h"

namespace lakecache {

struct S3StoreOptions {
  UriScheme scheme = UriScheme::kS3;  // s3 or oss, for names in messages
  std::string bucket;
  std::string endpoint;  // "http://127.0.0.1:9000"; empty: https://s3.<region>.amazonaws.com
  std::string region = "us-east-1";
  bool path_style = false;
  Credentials credentials;
  HttpClientOptions http;
};

class S3Store : public ObjectStore {
 public:
  // Fails on an endpoint that is not an http(s) URL.
  static Result<std::unique_ptr<S3Store>> Create(S3StoreOptions options);

  std::string Describe() const override;
  Result<ListPage> List(const ListRequest& request, const IoOptions& options) override;
  Result<ObjectInfo> Head(std::string_view key, const IoOptions& options) override;
  // The reply names its version by its ETag header and the total of its Content-Range.
  Result<ReadReply> ReadRaw(std::string_view key, uint64_t offset,
                            std::span<const std::span<char>> bufs,
                            const ReadOptions& options) override;
  Status Put(std::string_view key, std::span<const char> data, const IoOptions& options) override;
  Status Delete(std::string_view key, const IoOptions& options) override;

 private:
  S3Store(S3StoreOptions options, std::string base_scheme, std::string base_host);

  // Builds, signs and sends one request. `key` is empty for bucket-level requests.
  Result<HttpResponse> Send(HttpRequest& request, std::string_view key, const std::string& query,
                            const IoOptions& options);
  // Turns a non-2xx response into a Status naming the bucket, key and HTTP status.
  Status ErrorFor(const HttpResponse& response, std::string_view key) const;

  const S3StoreOptions options_;
  const std::string base_scheme_;  // "http" or "https"
  const std::string base_host_;    // "127.0.0.1:9000", the endpoint's host[:port]
  HttpClient http_;
};

}  // namespace lakecache
