#include "ufs/object_store.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

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

Status ObjectStore::Put(std::string_view key, std::span<const char>, const IoOptions&) {
  return Status::Unimplemented(Describe() + "/" + std::string(key) +
                               ": writes are not supported yet");
}

Status ObjectStore::Delete(std::string_view key, const IoOptions&) {
  return Status::Unimplemented(Describe() + "/" + std::string(key) +
                               ": deletes are not supported yet");
}

Result<ListResult> ListAll(ObjectStore& store, std::string_view prefix, std::string_view delimiter,
                           const IoOptions& options) {
  ListResult result;
  ListRequest req;
  req.prefix = std::string(prefix);
  req.delimiter = std::string(delimiter);
  for (;;) {
    LC_ASSIGN_OR_RETURN(ListPage page, store.List(req, options));
    for (auto& o : page.objects) result.objects.push_back(std::move(o));
    for (auto& p : page.common_prefixes) result.common_prefixes.push_back(std::move(p));
    if (!page.truncated) break;
    if (page.next_token.empty() || page.next_token == req.continuation_token) {
      return Status::Internal(store.Describe() + ": listing of '" + req.prefix +
                              "' is truncated but gives no new continuation token");
    }
    req.continuation_token = std::move(page.next_token);
  }
  auto by_key = [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; };
  auto same_key = [](const ObjectInfo& a, const ObjectInfo& b) { return a.key == b.key; };
  std::sort(result.objects.begin(), result.objects.end(), by_key);
  result.objects.erase(std::unique(result.objects.begin(), result.objects.end(), same_key),
                       result.objects.end());
  std::sort(result.common_prefixes.begin(), result.common_prefixes.end());
  result.common_prefixes.erase(
      std::unique(result.common_prefixes.begin(), result.common_prefixes.end()),
      result.common_prefixes.end());
  return result;
}

}  // namespace lakecache
