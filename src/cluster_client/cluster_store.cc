#include "cluster_client/cluster_store.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "rpc/lakecache.pb.h"

namespace lakecache {
namespace {

constexpr auto kNoteTimeout = std::chrono::seconds(10);

}  // namespace

ClusterStore::ClusterStore(std::shared_ptr<ClusterClient> client, ClusterNamespace ns)
    : client_(std::move(client)), ns_(std::move(ns)) {}

std::string ClusterStore::Describe() const {
  return "namespace '" + ns_.name + "' (" + ns_.uri + ") of the cluster at " + client_->master();
}

Result<std::string> ClusterStore::PathOf(std::string_view key) const {
  if (!key.starts_with(ns_.key_prefix)) {
    return Status::NotFound(std::string(key) + ": outside namespace '" + ns_.name + "'");
  }
  return std::string(key.substr(ns_.key_prefix.size()));
}

Result<ListPage> ClusterStore::List(const ListRequest& request, const IoOptions& options) {
  const std::string& prefix = request.prefix;
  bool folder = request.delimiter == "/" && prefix.starts_with(ns_.key_prefix) &&
                (prefix.size() == ns_.key_prefix.size() || prefix.ends_with('/'));
  if (!folder) {
    return Status::Unimplemented(Describe() +
                                 ": lists one folder at a time (prefix ending in '/' " +
                                 "and delimiter '/'), not '" + prefix + "'");
  }
  std::string dir = prefix.substr(ns_.key_prefix.size());
  if (!dir.empty()) dir.pop_back();
  // Pages of request.max_keys entries, continued after the last name of the previous page.
  const bool first = request.continuation_token.empty();
  bool revalidate = false;
  if (first) {
    MutexLock lock(&stale_mu_);
    revalidate = stale_dirs_.erase(dir) > 0;
  }
  ListDirPage want{request.continuation_token,
                   static_cast<uint32_t>(std::max(request.max_keys, 1))};
  LC_ASSIGN_OR_RETURN(ClusterListing listing,
                      client_->ListDir(ns_.name, dir, want, options.deadline, revalidate));
  ListPage page;
  page.objects = std::move(listing.files);
  page.common_prefixes = std::move(listing.dirs);
  page.next_token = std::move(listing.next_start_after);
  page.truncated = !page.next_token.empty();
  // A folder that exists only as its own marker: the marker keeps it visible (see DirListing).
  if (first && listing.exists && page.objects.empty() && page.common_prefixes.empty() &&
      !prefix.empty()) {
    ObjectInfo marker;
    marker.key = prefix;
    page.objects.push_back(std::move(marker));
  }
  return page;
}

Result<ObjectInfo> ClusterStore::Head(std::string_view key, const IoOptions& options) {
  LC_ASSIGN_OR_RETURN(std::string path, PathOf(key));
  bool is_dir = false;
  LC_ASSIGN_OR_RETURN(ObjectInfo info, client_->Stat(ns_.name, path, &is_dir, options.deadline));
  if (is_dir) return Status::NotFound(std::string(key) + ": a folder, not an object");
  return info;
}

Result<ReadReply> ClusterStore::ReadRaw(std::string_view key, uint64_t offset,
                                        std::span<const std::span<char>> bufs,
                                        const ReadOptions& options) {
  std::string etag = options.if_match;
  uint64_t size = options.object_size;
  if (etag.empty() || size == 0) {
    LC_ASSIGN_OR_RETURN(ObjectInfo info, Head(key, options));
    if (!etag.empty() && etag != info.etag) {
      return Status::PreconditionFailed(std::string(key) + " changed: ETag " + info.etag +
                                        ", expected " + etag);
    }
    etag = info.etag;
    size = info.size;
  }
  rpc::BlockId id;
  id.set_ns(ns_.name);
  id.set_key(std::string(key));
  id.set_etag(std::move(etag));
  id.set_object_size(size);
  id.set_block_size(ns_.block_size);
  // Workers fetch and cache only bytes of the version the id names (they check every reply of
  // the store): the reply needs no version of its own to be checked again.
  ReadReply reply;
  for (std::span<char> buf : bufs) {
    Result<size_t> n = ReadBlocks(id, offset + reply.bytes, buf, options.deadline);
    if (!n.ok()) {
      if (n.status().code() == StatusCode::kPreconditionFailed) NoteChanged(key);
      return n.status();
    }
    reply.bytes += *n;
    if (*n < buf.size()) break;
  }
  return reply;
}

Result<rpc::WriteCallResponse> ClusterStore::Call(
    int op, std::string_view key, const IoOptions& options,
    const std::function<void(rpc::WriteCallRequest&)>& fill) {
  rpc::WriteCallRequest request;
  request.set_ns(ns_.name);
  request.set_op(static_cast<rpc::WriteCallRequest::Op>(op));
  request.set_key(std::string(key));
  if (fill) fill(request);
  return client_->WriteCall(request, options.deadline);
}

void ClusterStore::TellMaster(std::string_view key, const ObjectInfo* info,
                              const IoOptions& options) {
  Result<std::string> path = PathOf(key);
  if (!path.ok() || path->empty()) return;
  rpc::NoteWriteRequest request;
  request.set_ns(ns_.name);
  request.set_path(*path);
  request.set_removed(info == nullptr);
  if (info != nullptr) {
    request.mutable_entry()->set_key(std::string(key));
    request.mutable_entry()->set_size(info->size);
    request.mutable_entry()->set_etag(info->etag);
    request.mutable_entry()->set_mtime(info->mtime);
  }
  Status s = client_->NoteWrite(request, std::min(options.deadline, Clock::now() + kNoteTimeout));
  if (!s.ok()) {
    spdlog::warn("{}: the master's listing shows the write after its TTL: {}", key, s.message());
  }
}

ObjectInfo ClusterStore::Written(std::string_view key, const rpc::WrittenObject& w) {
  return ObjectInfo{std::string(key), w.size(), w.etag(), w.mtime()};
}

Result<ObjectInfo> ClusterStore::Put(std::string_view key, std::span<const char> data,
                                     const PutOptions& options) {
  rpc::WriteBodyChunk header;
  header.set_ns(ns_.name);
  header.set_key(std::string(key));
  LC_ASSIGN_OR_RETURN(rpc::WrittenObject w, client_->WriteBody(header, data, options.deadline));
  ObjectInfo info = Written(key, w);
  TellMaster(key, &info, options);
  return info;
}

Result<std::string> ClusterStore::UploadPart(std::string_view key, std::string_view upload_id,
                                             int part_number, std::span<const char> data,
                                             const IoOptions& options) {
  rpc::WriteBodyChunk header;
  header.set_ns(ns_.name);
  header.set_key(std::string(key));
  header.set_upload_id(std::string(upload_id));
  header.set_part_number(part_number);
  LC_ASSIGN_OR_RETURN(rpc::WrittenObject w, client_->WriteBody(header, data, options.deadline));
  return w.etag();
}

Result<std::string> ClusterStore::CreateMultipartUpload(std::string_view key,
                                                        const IoOptions& options) {
  LC_ASSIGN_OR_RETURN(rpc::WriteCallResponse r,
                      Call(rpc::WriteCallRequest::CREATE_UPLOAD, key, options));
  return r.upload_id();
}

Result<ObjectInfo> ClusterStore::CompleteMultipartUpload(std::string_view key,
                                                         std::string_view upload_id,
                                                         const std::vector<CompletedPart>& parts,
                                                         const IoOptions& options) {
  Result<rpc::WriteCallResponse> r = Call(rpc::WriteCallRequest::COMPLETE_UPLOAD, key, options,
                                          [&](rpc::WriteCallRequest& request) {
                                            request.set_upload_id(std::string(upload_id));
                                            for (const CompletedPart& p : parts) {
                                              rpc::UploadPartEntry* e = request.add_parts();
                                              e->set_number(p.part_number);
                                              e->set_etag(p.etag);
                                              e->set_size(p.size);
                                            }
                                          });
  if (!r.ok() && r.status().code() == StatusCode::kNotFound) {
    // The upload is gone: a worker that failed over may have completed it before it died. Done
    // if the store holds the object these parts make (asked of the store, not the master).
    Result<rpc::WriteCallResponse> head = Call(rpc::WriteCallRequest::HEAD, key, options);
    if (head.ok() && IsObjectOfUpload(Written(key, head->object()), parts)) r = std::move(head);
  }
  if (!r.ok()) return r.status();
  ObjectInfo info = Written(key, r->object());
  TellMaster(key, &info, options);
  return info;
}

Status ClusterStore::AbortMultipartUpload(std::string_view key, std::string_view upload_id,
                                          const IoOptions& options) {
  return Call(
             rpc::WriteCallRequest::ABORT_UPLOAD, key, options,
             [&](rpc::WriteCallRequest& request) { request.set_upload_id(std::string(upload_id)); })
      .status();
}

Status ClusterStore::Delete(std::string_view key, const IoOptions& options) {
  LC_RETURN_IF_ERROR(Call(rpc::WriteCallRequest::DELETE, key, options).status());
  TellMaster(key, nullptr, options);
  return Status::Ok();
}

Result<ObjectInfo> ClusterStore::Copy(std::string_view from_key, std::string_view to_key,
                                      const IoOptions& options) {
  LC_ASSIGN_OR_RETURN(rpc::WriteCallResponse r, Call(rpc::WriteCallRequest::COPY, from_key, options,
                                                     [&](rpc::WriteCallRequest& request) {
                                                       request.set_to_key(std::string(to_key));
                                                     }));
  ObjectInfo info = Written(to_key, r.object());
  TellMaster(to_key, &info, options);
  return info;
}

Result<std::vector<PendingUpload>> ClusterStore::ListMultipartUploads(std::string_view prefix,
                                                                      const IoOptions& options) {
  LC_ASSIGN_OR_RETURN(rpc::WriteCallResponse r,
                      Call(rpc::WriteCallRequest::LIST_UPLOADS, prefix, options));
  std::vector<PendingUpload> out;
  for (const rpc::PendingUploadEntry& e : r.uploads()) {
    out.push_back({e.key(), e.upload_id(), e.initiated()});
  }
  return out;
}

void ClusterStore::NoteChanged(std::string_view key) {
  Result<std::string> path = PathOf(key);
  if (!path.ok()) return;
  size_t slash = path->rfind('/');
  MutexLock lock(&stale_mu_);
  stale_dirs_.insert(slash == std::string::npos ? "" : path->substr(0, slash));
}

Result<size_t> ClusterStore::ReadBlocks(rpc::BlockId& id, uint64_t offset, std::span<char> buf,
                                        Clock::time_point deadline) {
  const uint64_t size = id.object_size();
  if (offset >= size || buf.empty()) return size_t{0};
  const uint64_t bs = ns_.block_size;
  uint64_t end = std::min<uint64_t>(size, offset + buf.size());
  size_t done = 0;
  for (uint64_t at = offset; at < end;) {
    uint64_t index = at / bs;
    uint64_t in_block = at - index * bs;
    uint64_t n = std::min<uint64_t>(end - at, bs - in_block);
    id.set_index(index);
    LC_ASSIGN_OR_RETURN(
        size_t got,
        client_->ReadBlock(id, in_block, buf.subspan(done, static_cast<size_t>(n)), deadline));
    done += got;
    at += got;
    if (got < n) break;  // the object ended sooner than its size said
  }
  return done;
}

}  // namespace lakecache
