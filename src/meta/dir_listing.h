// DirListing: one folder of a namespace as the file system shows it, built from an object listing.
//
// Common prefixes become folders; "dir/" marker objects are folders too (the marker of the folder
// being listed is skipped); a name that is both an object and a prefix shows as a folder; names
// that cannot be file names ("", ".", "..", or with NUL) are left out. Immutable once built;
// thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ufs/object_store.h"

namespace lakecache {

struct DirEntry {
  std::string name;  // one path component
  bool is_dir = false;
  uint64_t size = 0;
  std::string etag;  // files only
  int64_t mtime = 0;
};

class DirListing {
 public:
  // `prefix` is the listed prefix ("" or ending in '/'), `listing` what ListAll returned for it
  // with delimiter "/".
  static DirListing FromObjects(std::string_view prefix, const ListResult& listing);

  const std::vector<DirEntry>& entries() const { return entries_; }  // sorted by name
  // The entry named `name`, or nullptr.
  const DirEntry* Find(std::string_view name) const;
  // True when the listing had anything at all (objects, prefixes or the folder's own marker).
  bool exists() const { return exists_; }

  // A copy with `entry` added, or replacing the entry of its name (a write through the mount);
  // the folder then exists.
  DirListing With(DirEntry entry) const;
  // A copy without the entry named `name` (an unlink, a rename's source). The folder still
  // exists: its marker, if any, is not known from here.
  DirListing Without(std::string_view name) const;
  // A copy that exists (a folder made a moment ago, whose marker the store does not list yet).
  DirListing Existing() const;

 private:
  std::vector<DirEntry> entries_;
  bool exists_ = false;
};

// Whether `name` can be an entry's name: not "", ".", "..", nor holding '/' or NUL.
bool IsValidName(std::string_view name);

// `name` in the folder `dir` of a namespace ("" is its root): "dir/name", or "name" at the root.
std::string JoinPath(const std::string& dir, const std::string& name);

}  // namespace lakecache
