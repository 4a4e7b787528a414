#include "ufs/object_store.h"

#include <algorithm>
#include <charconv>
#include <string>

#include <fmt/format.h>

#include "ufs/content_md5.h"

namespace lakecache {

Result<size_t> ObjectStore::Read(std::string_view key, uint64_t offset, std::span<char> buf,
                                 const ReadOptions& options) {
  std::span<char> one[1] = {buf};
  return ReadV(key, offset, one, options);
}

Result<size_t> ObjectStore::ReadV(std::string_view key, uint64_t offset,
                                  std::span<const std::span<char>> bufs,
                                  const ReadOptions& options) {
  LC_ASSIGN_OR_RETURN(ReadReply reply, ReadRaw(key, offset, bufs, options));
  LC_RETURN_IF_ERROR(CheckReadVersion(*this, key, options, reply));
  return reply.bytes;
}

Status CheckReadVersion(const ObjectStore& store, std::string_view key, const ReadOptions& options,
                        const ReadReply& reply) {
  auto changed = [&](const std::string& what) {
    return Status::PreconditionFailed(fmt::format(
        "{}/{}: the object changed: {}; its bytes were dropped", store.Describe(), key, what));
  };
  if (!options.if_match.empty() && !reply.etag.empty() && reply.etag != options.if_match) {
    return changed(
        fmt::format("the store sent ETag {}, expected {}", reply.etag, options.if_match));
  }
  if (options.object_size != 0 && reply.object_size != ReadReply::kUnknownSize &&
      reply.object_size != options.object_size) {
    return changed(fmt::format("the store sent a version of {} bytes, expected {}",
                               reply.object_size, options.object_size));
  }
  return Status::Ok();
}

Status ObjectStore::CannotWrite(std::string_view key, std::string_view what) const {
  return Status::Unimplemented(
      fmt::format("{}/{}: store {} cannot write ({})", Describe(), key, Describe(), what));
}

Result<ObjectInfo> ObjectStore::Put(std::string_view key, std::span<const char>,
                                    const PutOptions&) {
  return CannotWrite(key, "Put");
}

Status ObjectStore::Delete(std::string_view key, const IoOptions&) {
  return CannotWrite(key, "Delete");
}

Result<ObjectInfo> ObjectStore::Copy(std::string_view, std::string_view to_key, const IoOptions&) {
  return CannotWrite(to_key, "Copy");
}

Result<std::string> ObjectStore::CreateMultipartUpload(std::string_view key, const IoOptions&) {
  return CannotWrite(key, "CreateMultipartUpload");
}

Result<std::string> ObjectStore::UploadPart(std::string_view key, std::string_view, int,
                                            std::span<const char>, const IoOptions&) {
  return CannotWrite(key, "UploadPart");
}

Result<ObjectInfo> ObjectStore::CompleteMultipartUpload(std::string_view key, std::string_view,
                                                        const std::vector<CompletedPart>&,
                                                        const IoOptions&) {
  return CannotWrite(key, "CompleteMultipartUpload");
}

Status ObjectStore::AbortMultipartUpload(std::string_view key, std::string_view, const IoOptions&) {
  return CannotWrite(key, "AbortMultipartUpload");
}

Result<std::vector<PendingUpload>> ObjectStore::ListMultipartUploads(std::string_view prefix,
                                                                     const IoOptions&) {
  return CannotWrite(prefix, "ListMultipartUploads");
}

std::string MultipartEtag(const std::vector<CompletedPart>& parts) {
  std::string digests;
  for (const CompletedPart& part : parts) {
    Md5Digest d;
    if (!ParseMd5Hex(part.etag, &d)) return "";
    digests.append(reinterpret_cast<const char*>(d.data()), d.size());
  }
  return Md5Hex(digests) + "-" + std::to_string(parts.size());
}

int EtagPartCount(std::string_view etag) {
  size_t dash = etag.rfind('-');
  if (dash == std::string_view::npos) return 0;
  int n = 0;
  auto [ptr, ec] = std::from_chars(etag.data() + dash + 1, etag.data() + etag.size(), n);
  return ec == std::errc() && ptr == etag.data() + etag.size() ? n : 0;
}

bool IsObjectOfUpload(const ObjectInfo& object, const std::vector<CompletedPart>& parts) {
  uint64_t size = 0;
  for (const CompletedPart& part : parts) size += part.size;
  if (size != 0 && object.size != size) return false;
  std::string expected = MultipartEtag(parts);
  if (!expected.empty()) return object.etag == expected;
  return EtagPartCount(object.etag) == static_cast<int>(parts.size());
}

Status ListPages(ObjectStore& store, std::string_view prefix, std::string_view delimiter,
                 const IoOptions& options, Clock::duration page_timeout,
                 const std::function<void(ListPage& page)>& take) {
  ListRequest req;
  req.prefix = std::string(prefix);
  req.delimiter = std::string(delimiter);
  for (;;) {
    IoOptions page_options = options;
    if (page_timeout != Clock::duration::max()) {
      page_options.deadline = std::min(options.deadline, Clock::now() + page_timeout);
    }
    LC_ASSIGN_OR_RETURN(ListPage page, store.List(req, page_options));
    take(page);
    if (!page.truncated) return Status::Ok();
    if (page.next_token.empty() || page.next_token == req.continuation_token) {
      return Status::Internal(store.Describe() + ": listing of '" + req.prefix +
                              "' is truncated but gives no new continuation token");
    }
    req.continuation_token = std::move(page.next_token);
  }
}

Result<ListResult> ListAll(ObjectStore& store, std::string_view prefix, std::string_view delimiter,
                           const IoOptions& options, Clock::duration page_timeout) {
  ListResult result;
  LC_RETURN_IF_ERROR(
      ListPages(store, prefix, delimiter, options, page_timeout, [&](ListPage& page) {
        for (auto& o : page.objects) result.objects.push_back(std::move(o));
        for (auto& p : page.common_prefixes) result.common_prefixes.push_back(std::move(p));
      }));
  auto by_key = [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; };
  auto same_key = [](const ObjectInfo& a, const ObjectInfo& b) { return a.key == b.key; };
  // Stores list in key order: sorting is then a check.
  if (!std::is_sorted(result.objects.begin(), result.objects.end(), by_key)) {
    std::sort(result.objects.begin(), result.objects.end(), by_key);
  }
  result.objects.erase(std::unique(result.objects.begin(), result.objects.end(), same_key),
                       result.objects.end());
  if (!std::is_sorted(result.common_prefixes.begin(), result.common_prefixes.end())) {
    std::sort(result.common_prefixes.begin(), result.common_prefixes.end());
  }
  result.common_prefixes.erase(
      std::unique(result.common_prefixes.begin(), result.common_prefixes.end()),
      result.common_prefixes.end());
  return result;
}

}  // namespace lakecache
