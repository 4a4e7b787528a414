// WalkTree: the files of a path of one namespace (a file, a folder, or with `recursive` the whole
// tree below a folder), read through its MetadataCache, for preloading and freeing. The walk is a
// stream: each file is handed to a TreeVisitor as soon as it is listed, so memory is bounded by the
// folders being listed, not by the tree.
//
// With `pin` (a load), the walk looks at the store, not at cached listings: each folder it lists
// is asked of the store again (MetadataCache::ListFresh), so a folder uploaded a moment ago is
// found whatever the TTL; a store that does not answer leaves the cached listing in use. And every
// listing of the tree is pinned in the cache (see MetadataCache::Pin) and the
// folders above the path are anchored (revalidated as usual, but served while the store is
// unreachable), so that the tree lists and stats with the object store unreachable while new
// folders beside it still show. A recursive walk reads the tree with one flat listing (no
// delimiter, 1,000 keys per request), page by page, and builds each folder's listing from it
// (FlatTreeWalk); a folder is pinned once the listing has passed it, and a walk that fails or is
// stopped pins no folder it had not listed whole.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "common/result.h"
#include "meta/dir_listing.h"
#include "meta/metadata_cache.h"

namespace lakecache {

struct TreeFile {
  static constexpr uint64_t kNoFolder = std::numeric_limits<uint64_t>::max();

  std::string path;  // relative to the namespace root
  DirEntry entry;
  // The walk's number of the file's folder (kNoFolder for a path that names a file), and the
  // file's place among that folder's files (see TreeVisitor::OnFolder).
  uint64_t folder = kNoFolder;
  uint64_t index = 0;
};

// What a walk hands out, from the walking thread.
class TreeVisitor {
 public:
  virtual ~TreeVisitor() = default;
  // A file of the tree; the files of each folder come in name order. An error stops the walk,
  // which returns it.
  virtual Status OnFile(TreeFile file) = 0;
  // Folder number `folder` (at relative path `dir`) is listed whole, after its last file: its
  // files were the non-folder entries of `listing`, in order (TreeFile::index 0 on).
  virtual void OnFolder(uint64_t /*folder*/, const std::string& /*dir*/,
                        std::shared_ptr<const DirListing> /*listing*/) {}
};

// Takes nothing: a walk for its listings and pins alone.
class PinningVisitor : public TreeVisitor {
 public:
  Status OnFile(TreeFile /*file*/) override { return Status::Ok(); }
};

struct TreeWalkStats {
  uint64_t files = 0;
  uint64_t dirs = 0;    // folders listed (pinned, with `pin`), those above the path included
  bool is_dir = false;  // the path named a folder
  size_t max_held = 0;  // the most object entries the walk held at once (a page, open folders)
};

// `path` is relative to the namespace root ("" is the root). kNotFound, naming the path, when it
// is neither a file nor a folder; else the first error of the store's listings or the visitor.
Result<TreeWalkStats> WalkTree(MetadataCache& meta, const std::string& path, bool recursive,
                               bool pin, TreeVisitor& visitor);

}  // namespace lakecache
