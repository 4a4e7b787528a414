#include "meta/dir_listing.h"

#include <algorithm>

namespace lakecache {
bool IsValidName(std::string_view name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find('\0') == std::string_view::npos && name.find('/') == std::string_view::npos;
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : dir + "/" + name;
}

DirListing DirListing::FromObjects(std::string_view prefix, const ListResult& listing) {
  DirListing out;
  out.exists_ = !listing.objects.empty() || !listing.common_prefixes.empty();
  for (const std::string& p : listing.common_prefixes) {
    if (!p.starts_with(prefix)) continue;
    std::string_view name = std::string_view(p).substr(prefix.size());
    if (name.ends_with('/')) name.remove_suffix(1);
    if (IsValidName(name)) out.entries_.push_back(DirEntry{std::string(name), true, 0, "", 0});
  }
  for (const ObjectInfo& o : listing.objects) {
    if (!o.key.starts_with(prefix)) continue;
    std::string_view name = std::string_view(o.key).substr(prefix.size());
    bool marker = name.ends_with('/');
    if (marker) name.remove_suffix(1);
    if (!IsValidName(name)) continue;  // includes the listed folder's own "dir/" marker
    out.entries_.push_back(
        DirEntry{std::string(name), marker, marker ? 0 : o.size, marker ? "" : o.etag, o.mtime});
  }
  // Sort folders before files of the same name, then keep the first: a folder shadows a file.
  std::stable_sort(out.entries_.begin(), out.entries_.end(),
                   [](const DirEntry& a, const DirEntry& b) {
                     if (a.name != b.name) return a.name < b.name;
                     return a.is_dir && !b.is_dir;
                   });
  auto same = [](const DirEntry& a, const DirEntry& b) { return a.name == b.name; };
  out.entries_.erase(std::unique(out.entries_.begin(), out.entries_.end(), same),
                     out.entries_.end());
  return out;
}

const DirEntry* DirListing::Find(std::string_view name) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                             [](const DirEntry& e, std::string_view n) { return e.name < n; });
  return (it != entries_.end() && it->name == name) ? &*it : nullptr;
}

DirListing DirListing::With(DirEntry entry) const {
  DirListing out = *this;
  out.exists_ = true;
  auto it = std::lower_bound(out.entries_.begin(), out.entries_.end(), entry.name,
                             [](const DirEntry& e, const std::string& n) { return e.name < n; });
  if (it != out.entries_.end() && it->name == entry.name) {
    *it = std::move(entry);
  } else {
    out.entries_.insert(it, std::move(entry));
  }
  return out;
}

DirListing DirListing::Existing() const {
  DirListing out = *this;
  out.exists_ = true;
  return out;
}

DirListing DirListing::Without(std::string_view name) const {
  DirListing out = *this;
  std::erase_if(out.entries_, [name](const DirEntry& e) { return e.name == name; });
  return out;
}

}  // namespace lakecache
