// DirListing: one folder of a namespace as the file system shows it, built from an object listing.
//
// Common prefixes become folders; "dir/" marker objects are folders too (the marker of the folder
// being listed is skipped); a name that is both an object and a prefix shows as a folder; names
// that cannot be file names ("", ".", "..", or with NUL) are left out. Immutable once built;
// thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
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

// What DirListing::Find found: the entry (a copy: a listing keeps its entries packed), or none.
// Compares with nullptr as a pointer would.
class FoundEntry {
 public:
  FoundEntry() = default;
  explicit FoundEntry(DirEntry entry) : entry_(std::move(entry)) {}
  explicit operator bool() const { return entry_.has_value(); }
  bool operator==(std::nullptr_t) const { return !entry_.has_value(); }
  const DirEntry* operator->() const { return &*entry_; }
  const DirEntry& operator*() const { return *entry_; }

 private:
  std::optional<DirEntry> entry_;
};

// The entries are packed: 40 bytes each (an ETag of 32 hex digits is kept as its 16 bytes), their
// names (and other ETags) in one buffer.
class DirListing {
 public:
  // `prefix` is the listed prefix ("" or ending in '/'), `listing` what ListAll returned for it
  // with delimiter "/".
  static DirListing FromObjects(std::string_view prefix, const ListResult& listing);
  // A listing of `entries`, sorted by name, one per name.
  static DirListing FromEntries(const std::vector<DirEntry>& entries, bool exists);
  // An empty listing with room for `entries` entries of `name_bytes` name bytes in all, for
  // AppendSorted (a listing decoded from its stored form).
  static DirListing Sorted(size_t entries, size_t name_bytes, bool exists);
  // Appends an entry that sorts after every entry so far: `md5` is the 16 bytes of an MD5 ETag,
  // or null when `etag` is the ETag's text. Only while the listing is being built.
  void AppendSorted(std::string_view name, bool is_dir, uint64_t size, int64_t mtime,
                    const uint8_t* md5, std::string_view etag);

  size_t size() const { return items_.size(); }  // entries, sorted by name
  bool empty() const { return items_.empty(); }
  DirEntry at(size_t i) const;
  std::string_view name_at(size_t i) const { return NameOf(items_[i]); }
  bool is_dir_at(size_t i) const { return (items_[i].flags & kDir) != 0; }
  uint64_t size_at(size_t i) const { return items_[i].size; }
  int64_t mtime_at(size_t i) const { return items_[i].mtime; }
  // Entry i's ETag as it is kept: the 16 bytes of an MD5 (*md5 points to them, the result is
  // empty), else its text (*md5 is null).
  std::string_view etag_at(size_t i, const uint8_t** md5) const;
  // Every entry, copied (tests, small folders).
  std::vector<DirEntry> ToEntries() const;
  // The entry named `name`, or none.
  FoundEntry Find(std::string_view name) const;
  // The index of the first entry whose name sorts after `name` (size() if none does).
  size_t IndexAfter(std::string_view name) const;
  // True when the listing had anything at all (objects, prefixes or the folder's own marker).
  bool exists() const { return exists_; }
  // The memory the listing holds.
  size_t bytes() const;

  // A copy with `entry` added, or replacing the entry of its name (a write through the mount);
  // the folder then exists.
  DirListing With(const DirEntry& entry) const;
  // A copy without the entry named `name` (an unlink, a rename's source). The folder still
  // exists: its marker, if any, is not known from here.
  DirListing Without(std::string_view name) const;
  // A copy that exists (a folder made a moment ago, whose marker the store does not list yet).
  DirListing Existing() const;

 private:
  static constexpr uint8_t kDir = 1;
  static constexpr uint8_t kHexEtag = 2;  // `etag` holds the 16 bytes of 32 hex digits
  struct Item {
    uint64_t size = 0;
    int64_t mtime = 0;
    uint32_t name_at = 0;  // in names_
    uint16_t name_len = 0;
    uint8_t flags = 0;
    // kHexEtag: the ETag's bytes; else the offset (4 bytes) and length (2) of its text in names_.
    uint8_t etag[16] = {};
  };
  static_assert(sizeof(Item) == 40);

  std::string_view NameOf(const Item& item) const {
    return std::string_view(names_).substr(item.name_at, item.name_len);
  }
  // An entry's item, its name (and ETag text) appended to names_.
  Item Pack(std::string_view name, bool is_dir, uint64_t size, std::string_view etag,
            int64_t mtime);
  size_t LowerBound(std::string_view name) const;
  // `item` of listing `from`, its bytes appended to names_.
  Item CopyOf(const DirListing& from, const Item& item);
  // The order of a listing: by name, a folder before a file of the same name.
  bool Before(const Item& a, const DirListing& b_from, const Item& b) const;

  friend class DirListingBuilder;
  std::vector<Item> items_;
  std::string names_;
  bool exists_ = false;
};

// Builds a listing from the pages of an object listing of `prefix` as they come, each entry packed
// at once (a folder of a million objects never exists as a list of ObjectInfo).
class DirListingBuilder {
 public:
  explicit DirListingBuilder(std::string prefix) : prefix_(std::move(prefix)) {}
  void Add(const std::vector<ObjectInfo>& objects, const std::vector<std::string>& prefixes);
  DirListing Finish() &&;

 private:
  std::string prefix_;
  DirListing files_;    // objects (and markers), packed as they came
  DirListing folders_;  // common prefixes
};

// The 16 bytes of an ETag of 32 lower-case hex digits (an MD5: a single-part upload's); false
// for any other ETag (upper case too: it would not read back as it was).
bool PackMd5Etag(std::string_view etag, uint8_t out[16]);
std::string UnpackMd5Etag(const uint8_t in[16]);

// Whether `name` can be an entry's name: not "", ".", "..", nor holding '/' or NUL, nor
// longer than 65,535 bytes.
bool IsValidName(std::string_view name);

// `name` in the folder `dir` of a namespace ("" is its root): "dir/name", or "name" at the root.
std::string JoinPath(const std::string& dir, const std::string& name);

}  // namespace lakecache
