#include "meta/dir_listing.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

namespace lakecache {
namespace {

constexpr size_t kMaxName = 0xffff;  // S3 keys are at most 1,024 bytes

}  // namespace

bool IsValidName(std::string_view name) {
  return !name.empty() && name.size() <= kMaxName && name != "." && name != ".." &&
         name.find('\0') == std::string_view::npos && name.find('/') == std::string_view::npos;
}

namespace {

// Each byte's value as a lower-case hex digit, or -1: upper case stays text, so that the ETag
// reads back as it was. A table: a listing of 1M objects packs 32M digits.
constexpr std::array<int8_t, 256> kHexDigits = [] {
  std::array<int8_t, 256> t{};
  t.fill(-1);
  for (int c = '0'; c <= '9'; ++c) t[c] = static_cast<int8_t>(c - '0');
  for (int c = 'a'; c <= 'f'; ++c) t[c] = static_cast<int8_t>(c - 'a' + 10);
  return t;
}();

}  // namespace

bool PackMd5Etag(std::string_view etag, uint8_t out[16]) {
  if (etag.size() != 32) return false;
  int bad = 0;  // any digit's -1 sets the sign bit
  for (size_t i = 0; i < 16; ++i) {
    int hi = kHexDigits[static_cast<uint8_t>(etag[2 * i])];
    int lo = kHexDigits[static_cast<uint8_t>(etag[2 * i + 1])];
    bad |= hi | lo;
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return bad >= 0;
}

std::string UnpackMd5Etag(const uint8_t in[16]) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(32, '0');
  for (size_t i = 0; i < 16; ++i) {
    out[2 * i] = kDigits[in[i] >> 4];
    out[2 * i + 1] = kDigits[in[i] & 0xf];
  }
  return out;
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : dir + "/" + name;
}

DirListing::Item DirListing::Pack(std::string_view name, bool is_dir, uint64_t size,
                                  std::string_view etag, int64_t mtime) {
  Item item;
  item.size = is_dir ? 0 : size;
  item.mtime = mtime;
  item.name_at = static_cast<uint32_t>(names_.size());
  item.name_len = static_cast<uint16_t>(name.size());
  item.flags = is_dir ? kDir : 0;
  names_.append(name);
  if (is_dir || etag.empty()) {
    // No ETag: offset and length 0.
  } else if (PackMd5Etag(etag, item.etag)) {
    item.flags |= kHexEtag;
  } else {
    auto at = static_cast<uint32_t>(names_.size());
    auto len = static_cast<uint16_t>(std::min(etag.size(), kMaxName));
    names_.append(etag.substr(0, len));
    std::memcpy(item.etag, &at, sizeof(at));
    std::memcpy(item.etag + sizeof(at), &len, sizeof(len));
  }
  return item;
}

DirEntry DirListing::at(size_t i) const {
  const Item& item = items_[i];
  DirEntry e;
  e.name = std::string(NameOf(item));
  e.is_dir = (item.flags & kDir) != 0;
  e.size = item.size;
  e.mtime = item.mtime;
  const uint8_t* md5;
  std::string_view text = etag_at(i, &md5);
  e.etag = md5 != nullptr ? UnpackMd5Etag(md5) : std::string(text);
  return e;
}

std::string_view DirListing::etag_at(size_t i, const uint8_t** md5) const {
  const Item& item = items_[i];
  if ((item.flags & kHexEtag) != 0) {
    *md5 = item.etag;
    return {};
  }
  *md5 = nullptr;
  uint32_t at;
  uint16_t len;
  std::memcpy(&at, item.etag, sizeof(at));
  std::memcpy(&len, item.etag + sizeof(at), sizeof(len));
  return std::string_view(names_).substr(at, len);
}

DirListing::Item DirListing::CopyOf(const DirListing& from, const Item& item) {
  Item copy = item;
  copy.name_at = static_cast<uint32_t>(names_.size());
  names_.append(from.NameOf(item));
  if ((item.flags & (kHexEtag | kDir)) == 0) {
    uint32_t at;
    uint16_t len;
    std::memcpy(&at, item.etag, sizeof(at));
    std::memcpy(&len, item.etag + sizeof(at), sizeof(len));
    auto moved = static_cast<uint32_t>(names_.size());
    names_.append(from.names_, at, len);
    std::memcpy(copy.etag, &moved, sizeof(moved));
  }
  return copy;
}

bool DirListing::Before(const Item& a, const DirListing& b_from, const Item& b) const {
  std::string_view an = NameOf(a), bn = b_from.NameOf(b);
  if (an != bn) return an < bn;
  return (a.flags & kDir) != 0 && (b.flags & kDir) == 0;
}

void DirListingBuilder::Add(const std::vector<ObjectInfo>& objects,
                            const std::vector<std::string>& prefixes) {
  if (!objects.empty() || !prefixes.empty()) files_.exists_ = true;
  for (const std::string& p : prefixes) {
    if (!p.starts_with(prefix_)) continue;
    std::string_view name = std::string_view(p).substr(prefix_.size());
    if (name.ends_with('/')) name.remove_suffix(1);
    if (IsValidName(name)) folders_.items_.push_back(folders_.Pack(name, true, 0, "", 0));
  }
  for (const ObjectInfo& o : objects) {
    if (!o.key.starts_with(prefix_)) continue;
    std::string_view name = std::string_view(o.key).substr(prefix_.size());
    bool marker = name.ends_with('/');
    if (marker) name.remove_suffix(1);
    if (!IsValidName(name)) continue;  // includes the listed folder's own "dir/" marker
    DirListing* run = marker ? &folders_ : &files_;
    run->items_.push_back(run->Pack(name, marker, o.size, marker ? "" : o.etag, o.mtime));
  }
}

// Folders before files of the same name, then the first of each name: a folder shadows a file. A
// store lists each kind in key order, so the two runs usually need only merging.
DirListing DirListingBuilder::Finish() && {
  using Item = DirListing::Item;
  DirListing out;
  out.exists_ = files_.exists_;
  out.items_.reserve(files_.items_.size() + folders_.items_.size());
  out.names_.reserve(files_.names_.size() + folders_.names_.size());
  auto emit = [&out](const DirListing& from, const Item& item) {
    if (!out.items_.empty() && out.NameOf(out.items_.back()) == from.NameOf(item)) return;
    out.items_.push_back(out.CopyOf(from, item));
  };
  auto sorted = [](const DirListing& run) {
    for (size_t i = 1; i < run.items_.size(); ++i) {
      if (run.Before(run.items_[i], run, run.items_[i - 1])) return false;
    }
    return true;
  };
  // Files only (or folders only), in order and each name once, as a store lists a folder: the run
  // is the listing, moved rather than copied (a million entries: 40 MB not touched again).
  auto strictly_sorted = [](const DirListing& run) {
    for (size_t i = 1; i < run.items_.size(); ++i) {
      if (!run.Before(run.items_[i - 1], run, run.items_[i])) return false;
    }
    return true;
  };
  for (auto [run, other] : {std::pair{&files_, &folders_}, {&folders_, &files_}}) {
    if (other->items_.empty() && strictly_sorted(*run)) {
      run->exists_ = files_.exists_;
      // What the run grew by and did not use is memory the budget counts: copied away if much.
      if (run->items_.capacity() > run->items_.size() * 5 / 4) run->items_.shrink_to_fit();
      if (run->names_.capacity() > run->names_.size() * 5 / 4) run->names_.shrink_to_fit();
      return std::move(*run);
    }
  }
  if (sorted(files_) && sorted(folders_)) {
    size_t f = 0, d = 0;
    while (f < files_.items_.size() || d < folders_.items_.size()) {
      bool folder = f == files_.items_.size() ||
                    (d < folders_.items_.size() &&
                     !files_.Before(files_.items_[f], folders_, folders_.items_[d]));
      if (folder) {
        emit(folders_, folders_.items_[d++]);
      } else {
        emit(files_, files_.items_[f++]);
      }
    }
    return out;
  }
  std::vector<std::pair<const DirListing*, uint32_t>> order;
  order.reserve(out.items_.capacity());
  for (const DirListing* run : {&folders_, &files_}) {
    for (size_t i = 0; i < run->items_.size(); ++i) order.emplace_back(run, i);
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.first->Before(a.first->items_[a.second], *b.first, b.first->items_[b.second]);
  });
  for (const auto& [run, i] : order) emit(*run, run->items_[i]);
  return out;
}

DirListing DirListing::FromObjects(std::string_view prefix, const ListResult& listing) {
  DirListingBuilder builder{std::string(prefix)};
  builder.Add(listing.objects, listing.common_prefixes);
  return std::move(builder).Finish();
}

DirListing DirListing::FromEntries(const std::vector<DirEntry>& entries, bool exists) {
  DirListing out;
  out.exists_ = exists;
  out.items_.reserve(entries.size());
  for (const DirEntry& e : entries) {
    out.items_.push_back(out.Pack(e.name, e.is_dir, e.size, e.etag, e.mtime));
  }
  return out;
}

DirListing DirListing::Sorted(size_t entries, size_t name_bytes, bool exists) {
  DirListing out;
  out.exists_ = exists;
  out.items_.reserve(entries);
  out.names_.reserve(name_bytes);
  return out;
}

void DirListing::AppendSorted(std::string_view name, bool is_dir, uint64_t size, int64_t mtime,
                              const uint8_t* md5, std::string_view etag) {
  if (md5 == nullptr) {
    items_.push_back(Pack(name, is_dir, size, etag, mtime));
    return;
  }
  Item& item = items_.emplace_back(Pack(name, is_dir, size, "", mtime));
  std::memcpy(item.etag, md5, sizeof(item.etag));
  item.flags |= kHexEtag;
}

std::vector<DirEntry> DirListing::ToEntries() const {
  std::vector<DirEntry> out;
  out.reserve(items_.size());
  for (size_t i = 0; i < items_.size(); ++i) out.push_back(at(i));
  return out;
}

size_t DirListing::LowerBound(std::string_view name) const {
  auto it = std::lower_bound(items_.begin(), items_.end(), name,
                             [this](const Item& e, std::string_view n) { return NameOf(e) < n; });
  return static_cast<size_t>(it - items_.begin());
}

size_t DirListing::IndexAfter(std::string_view name) const {
  auto it = std::upper_bound(items_.begin(), items_.end(), name,
                             [this](std::string_view n, const Item& e) { return n < NameOf(e); });
  return static_cast<size_t>(it - items_.begin());
}

FoundEntry DirListing::Find(std::string_view name) const {
  size_t i = LowerBound(name);
  if (i == items_.size() || NameOf(items_[i]) != name) return FoundEntry();
  return FoundEntry(at(i));
}

size_t DirListing::bytes() const {
  return sizeof(*this) + items_.capacity() * sizeof(Item) + names_.capacity();
}

// With and Without copy the packed arrays as they are; the bytes of a replaced or removed entry
// stay in names_ (a few per change this mount makes).
DirListing DirListing::With(const DirEntry& entry) const {
  DirListing out = *this;
  out.exists_ = true;
  size_t at = LowerBound(entry.name);
  Item item = out.Pack(entry.name, entry.is_dir, entry.size, entry.etag, entry.mtime);
  if (at < items_.size() && NameOf(items_[at]) == entry.name) {
    out.items_[at] = item;
  } else {
    out.items_.insert(out.items_.begin() + static_cast<std::ptrdiff_t>(at), item);
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
  size_t at = LowerBound(name);
  if (at < items_.size() && NameOf(items_[at]) == name) {
    out.items_.erase(out.items_.begin() + static_cast<std::ptrdiff_t>(at));
  }
  return out;
}

}  // namespace lakecache
