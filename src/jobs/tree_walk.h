// WalkTree: the files of a path of one namespace (a file, a folder, or with `recursive` the whole
// tree below a folder), read through its MetadataCache, for preloading and freeing.
//
// With `pin` (a load), the walk looks at the store, not at cached listings: each folder it lists
// is asked of the store again (MetadataCache::ListFresh), so a folder uploaded a moment ago is
// found whatever the TTL; a store that does not answer leaves the cached listing in use. And every
// listing of the tree is pinned in the cache (see MetadataCache::Pin) and the
// folders above the path are anchored (revalidated as usual, but served while the store is
// unreachable), so that the tree lists and stats with the object store unreachable while new
// folders beside it still show. A recursive walk reads the tree with flat listings (no delimiter,
// 1,000 keys per request) and builds each folder's listing from them, instead of one listing per
// folder.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "meta/dir_listing.h"
#include "meta/metadata_cache.h"

namespace lakecache {

struct TreeFile {
  std::string path;  // relative to the namespace root
  DirEntry entry;
};

struct Tree {
  std::vector<TreeFile> files;  // folder by folder
  uint64_t dirs = 0;            // folders listed (pinned, with `pin`)
  bool is_dir = false;          // the path named a folder
};

// `path` is relative to the namespace root ("" is the root). kNotFound, naming the path, when it
// is neither a file nor a folder.
Result<Tree> WalkTree(MetadataCache& meta, const std::string& path, bool recursive, bool pin);

}  // namespace lakecache
