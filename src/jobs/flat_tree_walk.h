// FlatTreeWalk: the folders and files of a tree, built from its flat listing (every key below the
// tree's prefix, no delimiter) as the pages come, with memory bounded by the folders still open.
//
// A flat listing is in key order, so the keys of a folder are contiguous: a folder is listed whole
// once a key beyond its prefix arrives, and its listing is then handed out and dropped. The open
// folders are a stack (each one's prefix encloses the next), as deep as the tree. A parent's
// prefix encloses its subfolders, so it closes after them; each subfolder is entered in its
// parent's listing as it opens. A file is handed out as soon as the listing shows it is one: once a
// key past "name/" arrives (a key below "name/" would make `name` a folder, which shadows the
// object, as DirListing does). So the files of each folder come in name order, and they are
// exactly the non-folder entries of the folder's DirListing, in its order. Not thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "common/result.h"
#include "jobs/tree_walk.h"
#include "ufs/object_store.h"

namespace lakecache {

class FlatTreeWalk {
 public:
  // A file of folder number `TreeFile::folder`; an error stops the walk.
  using FileFn = std::function<Status(TreeFile file)>;
  // Folder number `id` at relative path `dir`, listed whole (`listing` as ListAll with delimiter
  // "/" would give it), after its last file.
  using FolderFn = std::function<Status(uint64_t id, const std::string& dir, ListResult listing)>;

  // `base` is the key prefix of relative folder `dir` ("" or ending in '/'); it is folder 0.
  FlatTreeWalk(std::string base, std::string dir, FileFn on_file, FolderFn on_folder);

  // The next object of the listing. Keys must come in increasing order (a repeated key is
  // skipped; an earlier one is kInternal).
  Status Add(ObjectInfo object);
  // The listing ended: closes every open folder.
  Status Finish();

  // Object entries held now, and the most held at once.
  size_t held() const { return held_; }
  size_t max_held() const { return max_held_; }

 private:
  // A file waiting for the key that says it is not shadowed by a folder of its name.
  struct Pending {
    std::string key;
    DirEntry entry;
    bool decided = false;  // not shadowed: handed out once those before it are
    bool shadowed = false;
  };
  struct OpenFolder {
    std::string rel;  // relative to base: "" or ending in '/'
    uint64_t id = 0;
    uint64_t files = 0;  // handed out so far
    ListResult listing;
    std::deque<Pending> pending;  // in key order
  };

  // Decides the pending files `key` tells about, and hands out those it can.
  Status Decide(std::string_view key);
  // Hands out the decided files at the front of `folder`'s pending ones (all of them, `all`).
  Status Flush(OpenFolder& folder, bool all);
  // Closes the top folder.
  Status Close();
  // Opens the folders from the top one down to `rel` (which the top's rel prefixes).
  void OpenDown(const std::string& rel);
  std::string DirOf(const std::string& rel) const;

  const std::string base_;
  const std::string dir_;
  FileFn on_file_;
  FolderFn on_folder_;
  std::vector<OpenFolder> open_;
  uint64_t next_id_ = 0;
  std::string last_key_;
  bool any_key_ = false;
  size_t held_ = 0;
  size_t max_held_ = 0;
};

}  // namespace lakecache
