#include "jobs/tree_walk.h"

#include <map>
#include <set>

namespace lakecache {
namespace {

constexpr auto kListTimeout = std::chrono::minutes(10);  // a flat listing of a large tree

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

// Every folder of the tree below (and including) relative folder `dir`, from one flat listing.
Result<std::map<std::string, ListResult>> ListFlat(MetadataCache& meta, const std::string& dir) {
  std::string base = dir.empty() ? meta.prefix() : meta.ObjectKey(dir) + "/";
  LC_ASSIGN_OR_RETURN(ListResult flat,
                      ListAll(meta.store(), base, "", IoOptions::WithTimeout(kListTimeout)));
  // Keyed by folder prefix relative to `base` ("" is `dir` itself, else ending in '/').
  std::map<std::string, ListResult> folders;
  std::map<std::string, std::set<std::string>> subfolders;
  folders[""];
  for (ObjectInfo& object : flat.objects) {
    std::string_view rel = std::string_view(object.key).substr(base.size());
    size_t slash = rel.rfind('/');
    std::string folder(slash == std::string_view::npos ? std::string_view()
                                                       : rel.substr(0, slash + 1));
    // Register the folder in each ancestor, up to the first one that already has it.
    for (std::string f = folder; !f.empty();) {
      size_t up = f.rfind('/', f.size() - 2);
      std::string parent = up == std::string::npos ? "" : f.substr(0, up + 1);
      if (!subfolders[parent].insert(base + f).second) break;
      folders[f];
      f = parent;
    }
    folders[folder].objects.push_back(std::move(object));
  }
  for (auto& [parent, children] : subfolders) {
    folders[parent].common_prefixes.assign(children.begin(), children.end());
  }
  std::map<std::string, ListResult> out;
  for (auto& [rel, listing] : folders) {
    std::string rel_dir = rel.empty() ? dir : JoinPath(dir, rel.substr(0, rel.size() - 1));
    out.emplace(std::move(rel_dir), std::move(listing));
  }
  return out;
}

void AddFiles(const std::string& dir, const DirListing& listing, Tree* tree) {
  for (size_t i = 0; i < listing.size(); ++i) {
    if (listing.is_dir_at(i)) continue;
    DirEntry entry = listing.at(i);
    std::string path = JoinPath(dir, entry.name);
    tree->files.push_back({std::move(path), std::move(entry)});
  }
}

}  // namespace

Result<Tree> WalkTree(MetadataCache& meta, const std::string& path, bool recursive, bool pin) {
  Tree tree;
  auto [parent, name] = SplitParent(path);
  if (!path.empty()) {
    LC_ASSIGN_OR_RETURN(std::shared_ptr<const DirListing> listing,
                        ListWithAncestors(meta, parent, pin, &tree.dirs));
    FoundEntry entry = listing->Find(name);
    if (entry == nullptr) {
      return Status::NotFound(meta.store().Describe() + "/" + meta.ObjectKey(path) +
                              ": no such file or folder");
    }
    if (!entry->is_dir) {
      tree.files.push_back({path, *entry});
      return tree;
    }
  }
  tree.is_dir = true;
  if (!recursive) {
    LC_ASSIGN_OR_RETURN(std::shared_ptr<const DirListing> listing,
                        pin ? meta.ListFresh(path) : meta.List(path));
    if (pin) meta.Pin(path, listing);
    ++tree.dirs;
    AddFiles(path, *listing, &tree);
    return tree;
  }
  LC_ASSIGN_OR_RETURN(auto folders, ListFlat(meta, path));
  for (auto& [dir, listed] : folders) {
    std::string prefix = dir.empty() ? meta.prefix() : meta.ObjectKey(dir) + "/";
    auto listing = std::make_shared<const DirListing>(DirListing::FromObjects(prefix, listed));
    if (pin) meta.Pin(dir, listing);
    ++tree.dirs;
    AddFiles(dir, *listing, &tree);
  }
  return tree;
}

}  // namespace lakecache
