// S3Store's writes: Put, Delete, Copy and multipart uploads.
#include <algorithm>
#include <tuple>

#include <fmt/format.h>

#include "ufs/content_md5.h"
#include "ufs/s3_store.h"
#include "ufs/s3_xml.h"
#include "ufs/sigv4.h"

namespace lakecache {
namespace {

std::string UploadQuery(std::string_view upload_id, int part_number = 0) {
  std::string query = part_number > 0 ? AddQueryParam("", "partNumber", std::to_string(part_number))
                                      : std::string();
  return AddQueryParam(std::move(query), "uploadId", upload_id);
}

Status CheckPartNumber(int part_number, const std::string& where) {
  if (part_number >= 1 && part_number <= kMaxParts) return Status::Ok();
  return Status::InvalidArgument(
      fmt::format("{}: part number {} is outside 1..{}", where, part_number, kMaxParts));
}

}  // namespace

Result<HttpResponse> S3Store::SendChecked(HttpRequest& request, std::string_view key,
                                          const std::string& query, const IoOptions& options,
                                          long ok_status) {
  LC_ASSIGN_OR_RETURN(HttpResponse response, Send(request, key, query, options));
  // CompleteMultipartUpload and the copies may answer 200 and fail later, in the body.
  if (response.status != ok_status || !ParseS3Error(response.body).code.empty()) {
    return ErrorFor(response, key);
  }
  return response;
}

std::string S3Store::CopySource(std::string_view key) const {
  return "/" + UriEncode(options_.bucket, false) + "/" + UriEncode(key, true);
}

Result<ObjectInfo> S3Store::Put(std::string_view key, std::span<const char> data,
                                const PutOptions& options) {
  HttpRequest http;
  http.method = "PUT";
  http.body = data;
  http.headers.emplace_back("Content-MD5", Md5Base64(data));
  if (options.if_none_match) http.headers.emplace_back("If-None-Match", "*");
  auto response = SendChecked(http, key, "", options);
  if (!response.ok()) {
    if (options.if_none_match && response.status().code() == StatusCode::kPreconditionFailed) {
      return response.status().WithContext("create-only Put: the key exists");
    }
    return response.status();
  }
  ObjectInfo info{std::string(key), data.size(), UnquoteEtag(response->Header("etag")), 0};
  if (info.etag.empty()) {
    return Status::Internal(Describe() + "/" + info.key + ": Put reply has no ETag");
  }
  return info;
}

Status S3Store::Delete(std::string_view key, const IoOptions& options) {
  HttpRequest http;
  http.method = "DELETE";
  LC_ASSIGN_OR_RETURN(HttpResponse response, Send(http, key, "", options));
  // S3 answers 204 for a missing key; a server that says 404 agrees it is gone, unless the
  // bucket is what is missing.
  if (response.status == 404 && ParseS3Error(response.body).code != "NoSuchBucket") {
    return Status::Ok();
  }
  if (response.status != 204 && response.status != 200) return ErrorFor(response, key);
  return Status::Ok();
}

Result<ObjectInfo> S3Store::Copy(std::string_view from_key, std::string_view to_key,
                                 const IoOptions& options) {
  LC_ASSIGN_OR_RETURN(ObjectInfo source, Head(from_key, options));
  if (source.size > options_.multipart_copy_threshold) {
    return CopyByParts(source, to_key, options);
  }
  HttpRequest http;
  http.method = "PUT";
  http.headers.emplace_back("x-amz-copy-source", CopySource(from_key));
  http.headers.emplace_back("x-amz-copy-source-if-match", "\"" + source.etag + "\"");
  LC_ASSIGN_OR_RETURN(HttpResponse response, SendChecked(http, to_key, "", options));
  auto etag = ParseResultEtag(response.body, "CopyObjectResult");
  if (!etag.ok()) return etag.status().WithContext(Describe() + "/" + std::string(to_key));
  return ObjectInfo{std::string(to_key), source.size, *etag, 0};
}

Result<ObjectInfo> S3Store::CopyByParts(const ObjectInfo& source, std::string_view to_key,
                                        const IoOptions& options) {
  // As few parts as copy_part_size allows, but never more than S3 takes.
  uint64_t part_size =
      std::max<uint64_t>({options_.copy_part_size, 1, (source.size + kMaxParts - 1) / kMaxParts});
  LC_ASSIGN_OR_RETURN(std::string upload_id, CreateMultipartUpload(to_key, options));
  std::vector<CompletedPart> parts;
  Status failed;
  for (uint64_t offset = 0; offset < source.size && failed.ok(); offset += part_size) {
    uint64_t size = std::min(part_size, source.size - offset);
    auto part = UploadPartCopy(source, to_key, upload_id, static_cast<int>(parts.size()) + 1,
                               offset, size, options);
    if (part.ok()) {
      parts.push_back(std::move(part).value());
    } else {
      failed = part.status();
    }
  }
  Result<ObjectInfo> done = failed;
  if (failed.ok()) done = CompleteMultipartUpload(to_key, upload_id, parts, options);
  if (!done.ok()) {
    // Best effort: what is left is found by ListMultipartUploads.
    (void)AbortMultipartUpload(to_key, upload_id, options);
  }
  return done;
}

Result<CompletedPart> S3Store::UploadPartCopy(const ObjectInfo& source, std::string_view to_key,
                                              std::string_view upload_id, int part_number,
                                              uint64_t offset, uint64_t size,
                                              const IoOptions& options) {
  HttpRequest http;
  http.method = "PUT";
  http.headers.emplace_back("x-amz-copy-source", CopySource(source.key));
  http.headers.emplace_back("x-amz-copy-source-if-match", "\"" + source.etag + "\"");
  http.headers.emplace_back("x-amz-copy-source-range",
                            fmt::format("bytes={}-{}", offset, offset + size - 1));
  LC_ASSIGN_OR_RETURN(HttpResponse response,
                      SendChecked(http, to_key, UploadQuery(upload_id, part_number), options));
  auto etag = ParseResultEtag(response.body, "CopyPartResult");
  if (!etag.ok()) return etag.status().WithContext(Describe() + "/" + std::string(to_key));
  return CompletedPart{part_number, *etag, size};
}

Result<std::string> S3Store::CreateMultipartUpload(std::string_view key, const IoOptions& options) {
  HttpRequest http;
  http.method = "POST";
  LC_ASSIGN_OR_RETURN(HttpResponse response,
                      SendChecked(http, key, AddQueryParam("", "uploads", ""), options));
  auto id = ParseUploadId(response.body);
  if (!id.ok()) return id.status().WithContext(Describe() + "/" + std::string(key));
  return id;
}

Result<std::string> S3Store::UploadPart(std::string_view key, std::string_view upload_id,
                                        int part_number, std::span<const char> data,
                                        const IoOptions& options) {
  std::string where = Describe() + "/" + std::string(key);
  LC_RETURN_IF_ERROR(CheckPartNumber(part_number, where));
  HttpRequest http;
  http.method = "PUT";
  http.body = data;
  http.headers.emplace_back("Content-MD5", Md5Base64(data));
  LC_ASSIGN_OR_RETURN(HttpResponse response,
                      SendChecked(http, key, UploadQuery(upload_id, part_number), options));
  std::string etag = UnquoteEtag(response.Header("etag"));
  if (etag.empty()) {
    return Status::Internal(fmt::format("{}: UploadPart {} reply has no ETag", where, part_number));
  }
  return etag;
}

Result<ObjectInfo> S3Store::CompleteMultipartUpload(std::string_view key,
                                                    std::string_view upload_id,
                                                    const std::vector<CompletedPart>& parts,
                                                    const IoOptions& options) {
  std::string where = Describe() + "/" + std::string(key);
  if (parts.empty()) return Status::InvalidArgument(where + ": a multipart upload of no parts");
  std::string body = CompleteMultipartUploadXml(parts);
  HttpRequest http;
  http.method = "POST";
  http.body = body;
  http.headers.emplace_back("Content-MD5", Md5Base64(body));
  LC_ASSIGN_OR_RETURN(HttpResponse response,
                      SendChecked(http, key, UploadQuery(upload_id), options));
  auto etag = ParseResultEtag(response.body, "CompleteMultipartUploadResult");
  if (!etag.ok()) return etag.status().WithContext(where);
  int count = EtagPartCount(*etag);
  if (count != 0 && count != static_cast<int>(parts.size())) {
    return Status::Internal(fmt::format("{}: completed {} parts but the store made ETag {}", where,
                                        parts.size(), *etag));
  }
  uint64_t size = 0;
  for (const CompletedPart& part : parts) size += part.size;
  return ObjectInfo{std::string(key), size, *etag, 0};
}

Status S3Store::AbortMultipartUpload(std::string_view key, std::string_view upload_id,
                                     const IoOptions& options) {
  HttpRequest http;
  http.method = "DELETE";
  LC_ASSIGN_OR_RETURN(HttpResponse response, Send(http, key, UploadQuery(upload_id), options));
  if (response.status == 204 || response.status == 200) return Status::Ok();
  if (ParseS3Error(response.body).code == "NoSuchUpload") return Status::Ok();  // already gone
  return ErrorFor(response, key);
}

Result<std::vector<PendingUpload>> S3Store::ListMultipartUploads(std::string_view prefix,
                                                                 const IoOptions& options) {
  std::vector<PendingUpload> all;
  std::string key_marker, id_marker;
  for (;;) {
    std::string query = AddQueryParam("", "uploads", "");
    if (!key_marker.empty()) query = AddQueryParam(query, "key-marker", key_marker);
    if (!id_marker.empty()) query = AddQueryParam(query, "upload-id-marker", id_marker);
    query = AddQueryParam(query, "prefix", prefix);
    HttpRequest http;
    http.method = "GET";
    LC_ASSIGN_OR_RETURN(HttpResponse response, SendChecked(http, "", query, options));
    auto page = ParseListMultipartUploads(response.body);
    if (!page.ok()) return page.status().WithContext(Describe() + "/" + std::string(prefix));
    for (PendingUpload& u : page->uploads) {
      if (u.key.starts_with(prefix)) all.push_back(std::move(u));
    }
    if (!page->truncated) break;
    if (page->next_key_marker == key_marker && page->next_upload_id_marker == id_marker) {
      return Status::Internal(Describe() + ": listing of uploads below '" + std::string(prefix) +
                              "' is truncated but gives no new marker");
    }
    key_marker = page->next_key_marker;
    id_marker = page->next_upload_id_marker;
  }
  std::stable_sort(all.begin(), all.end(), [](const PendingUpload& a, const PendingUpload& b) {
    return std::tie(a.key, a.initiated) < std::tie(b.key, b.initiated);
  });
  return all;
}

}  // namespace lakecache
