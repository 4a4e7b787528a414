// S3Store: ObjectStore over the S3 REST API (AWS S3, OSS's S3-compatible API, s3rver, Swift s3api).
//
// Requests are signed with SigV4 (unsigned when the credentials are anonymous), addressed
// path-style ("endpoint/bucket/key") or virtual-hosted ("bucket.endpoint/key"), and sent through
// a shared HttpClient, which reuses connections. Bodies go with their Content-MD5, and a reply of
// HTTP 200 that holds an <Error> document is the error it names. Thread-safe. Retries are not
// done here: wrap in RetryingStore. Reads are in s3_store.cc, writes in s3_store_write.cc.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

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
  // Copy copies larger objects part by part (UploadPartCopy), in parts of copy_part_size (more
  // when 10,000 parts would not do). Tests lower both.
  uint64_t multipart_copy_threshold = kMaxPartSize;
  uint64_t copy_part_size = 512ull << 20;
  // Tests only: sees every request before it is signed, and may change it (damage a body).
  std::function<void(HttpRequest&)> before_signing;
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
  // Sends If-None-Match: * when asked; see PutOptions for the servers that honour it.
  Result<ObjectInfo> Put(std::string_view key, std::span<const char> data,
                         const PutOptions& options) override;
  Status Delete(std::string_view key, const IoOptions& options) override;
  // CopyObject, pinned to the source's ETag (x-amz-copy-source-if-match); above
  // multipart_copy_threshold a multipart upload of UploadPartCopy ranges, aborted on failure.
  Result<ObjectInfo> Copy(std::string_view from_key, std::string_view to_key,
                          const IoOptions& options) override;
  Result<std::string> CreateMultipartUpload(std::string_view key,
                                            const IoOptions& options) override;
  Result<std::string> UploadPart(std::string_view key, std::string_view upload_id, int part_number,
                                 std::span<const char> data, const IoOptions& options) override;
  // The size reported is the sum of the parts' sizes; a reply ETag "...-N" must name N parts.
  Result<ObjectInfo> CompleteMultipartUpload(std::string_view key, std::string_view upload_id,
                                             const std::vector<CompletedPart>& parts,
                                             const IoOptions& options) override;
  Status AbortMultipartUpload(std::string_view key, std::string_view upload_id,
                              const IoOptions& options) override;
  Result<std::vector<PendingUpload>> ListMultipartUploads(std::string_view prefix,
                                                          const IoOptions& options) override;

 private:
  S3Store(S3StoreOptions options, std::string base_scheme, std::string base_host);

  // Builds, signs and sends one request. `key` is empty for bucket-level requests. A request the
  // store refuses as signed too far from its own time (the clock of this host jumped or drifted)
  // is signed again once with the store's time (see AdjustClockSkew).
  Result<HttpResponse> Send(HttpRequest& request, std::string_view key, const std::string& query,
                            const IoOptions& options);
  // For a 403 RequestTimeTooSkewed/RequestExpired with a Date header: keeps the store's clock
  // minus this host's as the offset every later signature adds, and returns true (send again).
  bool AdjustClockSkew(const HttpResponse& response);
  // Send, then the response if its status is `ok_status` and its body holds no <Error>
  // document; otherwise ErrorFor it.
  Result<HttpResponse> SendChecked(HttpRequest& request, std::string_view key,
                                   const std::string& query, const IoOptions& options,
                                   long ok_status = 200);
  // Turns an error response into a Status naming the bucket, key and HTTP status.
  Status ErrorFor(const HttpResponse& response, std::string_view key) const;
  // "/bucket/key", URL-encoded, for x-amz-copy-source.
  std::string CopySource(std::string_view key) const;
  // Copy of `source` (its size and ETag known) by UploadPartCopy ranges.
  Result<ObjectInfo> CopyByParts(const ObjectInfo& source, std::string_view to_key,
                                 const IoOptions& options);
  Result<CompletedPart> UploadPartCopy(const ObjectInfo& source, std::string_view to_key,
                                       std::string_view upload_id, int part_number, uint64_t offset,
                                       uint64_t size, const IoOptions& options);

  const S3StoreOptions options_;
  const std::string base_scheme_;  // "http" or "https"
  const std::string base_host_;    // "127.0.0.1:9000", the endpoint's host[:port]
  HttpClient http_;
  std::atomic<int64_t> clock_skew_ms_{0};  // the store's clock minus this host's
};

}  // namespace lakecache
