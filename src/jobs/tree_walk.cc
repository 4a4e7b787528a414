#include "jobs/tree_walk.h"

#include <algorithm>

#include "jobs/flat_tree_walk.h"

namespace lakecache {
namespace {

// One page of a flat listing, retries included: a listing of any length goes on while pages come.
constexpr auto kPageTimeout = std::chrono::minutes(1);

// The folder `dir` and its ancestors up to the root, each listed and (with `pin`) anchored: they
// keep revalidating, but serve their last listing while the store is unreachable. Returns the
// listing of `dir`.
Result<std::shared_ptr<const DirListing>> ListWithAncestors(MetadataCache& meta,
                                                            const std::string& dir, bool pin,
                                                            uint64_t* dirs) {
  std::shared_ptr<const DirListing> listing;
  for (size_t end = 0;;) {
    std::string current = dir.substr(0, end == std::string::npos ? dir.size() : end);
    if (end == 0) current.clear();
    LC_ASSIGN_OR_RETURN(listing, pin ? meta.ListFresh(current) : meta.List(current));
    if (pin) meta.Pin(current, listing, MetadataCache::PinKind::kAnchored);
    ++*dirs;
    if (end == std::string::npos || dir.empty()) break;
    end = dir.find('/', end + 1);
  }
  return listing;
}

// Every folder of the tree below (and including) relative folder `dir`, from one flat listing read
// page by page: each folder's listing is built (and pinned) once the listing has passed it.
Status WalkFlat(MetadataCache& meta, const std::string& dir, bool pin, TreeVisitor& visitor,
                TreeWalkStats* stats) {
  std::string base = dir.empty() ? meta.prefix() : meta.ObjectKey(dir) + "/";
  auto on_file = [&](TreeFile file) {
    ++stats->files;
    return visitor.OnFile(std::move(file));
  };
  auto on_folder = [&](uint64_t id, const std::string& folder, ListResult listed) {
    std::string prefix = folder.empty() ? meta.prefix() : meta.ObjectKey(folder) + "/";
    auto listing = std::make_shared<const DirListing>(DirListing::FromObjects(prefix, listed));
    if (pin) meta.Pin(folder, listing);
    ++stats->dirs;
    visitor.OnFolder(id, folder, std::move(listing));
    return Status::Ok();
  };
  FlatTreeWalk walk(base, dir, on_file, on_folder);
  ListRequest request;
  request.prefix = base;
  for (;;) {
    LC_ASSIGN_OR_RETURN(ListPage page,
                        meta.store().List(request, IoOptions::WithTimeout(kPageTimeout)));
    std::sort(page.objects.begin(), page.objects.end(),
              [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
    stats->max_held = std::max(stats->max_held, walk.held() + page.objects.size());
    for (ObjectInfo& object : page.objects) LC_RETURN_IF_ERROR(walk.Add(std::move(object)));
    if (!page.truncated) break;
    if (page.next_token.empty() || page.next_token == request.continuation_token) {
      return Status::Internal(meta.store().Describe() + ": listing of '" + base +
                              "' is truncated but gives no new continuation token");
    }
    request.continuation_token = std::move(page.next_token);
  }
  LC_RETURN_IF_ERROR(walk.Finish());
  stats->max_held = std::max(stats->max_held, walk.max_held());
  return Status::Ok();
}

// The files of one folder's listing, as folder number 0.
Status VisitFolder(const std::string& dir, std::shared_ptr<const DirListing> listing,
                   TreeVisitor& visitor, TreeWalkStats* stats) {
  uint64_t index = 0;
  for (size_t i = 0; i < listing->size(); ++i) {
    if (listing->is_dir_at(i)) continue;
    DirEntry entry = listing->at(i);
    ++stats->files;
    LC_RETURN_IF_ERROR(visitor.OnFile(TreeFile{JoinPath(dir, entry.name), entry, 0, index++}));
  }
  stats->max_held = std::max(stats->max_held, listing->size());
  visitor.OnFolder(0, dir, std::move(listing));
  return Status::Ok();
}

}  // namespace

Result<TreeWalkStats> WalkTree(MetadataCache& meta, const std::string& path, bool recursive,
                               bool pin, TreeVisitor& visitor) {
  TreeWalkStats stats;
  auto [parent, name] = SplitParent(path);
  if (!path.empty()) {
    LC_ASSIGN_OR_RETURN(std::shared_ptr<const DirListing> listing,
                        ListWithAncestors(meta, parent, pin, &stats.dirs));
    FoundEntry entry = listing->Find(name);
    if (entry == nullptr) {
      return Status::NotFound(meta.store().Describe() + "/" + meta.ObjectKey(path) +
                              ": no such file or folder");
    }
    if (!entry->is_dir) {
      stats.files = 1;
      LC_RETURN_IF_ERROR(visitor.OnFile(TreeFile{path, *entry}));
      return stats;
    }
  }
  stats.is_dir = true;
  if (recursive) {
    LC_RETURN_IF_ERROR(WalkFlat(meta, path, pin, visitor, &stats));
    return stats;
  }
  LC_ASSIGN_OR_RETURN(std::shared_ptr<const DirListing> listing,
                      pin ? meta.ListFresh(path) : meta.List(path));
  if (pin) meta.Pin(path, listing);
  ++stats.dirs;
  LC_RETURN_IF_ERROR(VisitFolder(path, std::move(listing), visitor, &stats));
  return stats;
}

}  // namespace lakecache
