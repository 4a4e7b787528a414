#include "client/cluster_store.h"

#include <algorithm>

#include "rpc/lakecache.pb.h"

namespace lakecache {

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
  LC_ASSIGN_OR_RETURN(ClusterListing listing, client_->ListDir(ns_.name, dir, options.deadline));
  ListPage page;
  page.objects = std::move(listing.files);
  page.common_prefixes = std::move(listing.dirs);
  // A folder that exists only as its own marker: the marker keeps it visible (see DirListing).
  if (listing.exists && page.objects.empty() && page.common_prefixes.empty() && !prefix.empty()) {
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

Result<size_t> ClusterStore::Read(std::string_view key, uint64_t offset, std::span<char> buf,
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
  if (offset >= size || buf.empty()) return size_t{0};
  const uint64_t bs = ns_.block_size;
  rpc::BlockId id;
  id.set_ns(ns_.name);
  id.set_key(std::string(key));
  id.set_etag(etag);
  id.set_object_size(size);
  id.set_block_size(bs);
  uint64_t end = std::min<uint64_t>(size, offset + buf.size());
  size_t done = 0;
  for (uint64_t at = offset; at < end;) {
    uint64_t index = at / bs;
    uint64_t in_block = at - index * bs;
    uint64_t n = std::min<uint64_t>(end - at, bs - in_block);
    id.set_index(index);
    LC_ASSIGN_OR_RETURN(size_t got,
                        client_->ReadBlock(id, in_block, buf.subspan(done, static_cast<size_t>(n)),
                                           options.deadline));
    done += got;
    at += got;
    if (got < n) break;  // the object ended sooner than its size said
  }
  return done;
}

}  // namespace lakecache
