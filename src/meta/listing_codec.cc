// The value format of ListingIndex: one folder in a few bytes per entry, checksummed.
//
//   value  := u8 format (1) | u64 listed (ms since the epoch) | u8 flags | varint count | entry*
//             | u64 xxh3 of all before
//   entry  := varint shared | varint suffix length | suffix | u8 kind | varint size | etag
//             | varint zigzag(mtime)
// A name is stored as the length it shares with the previous name and the rest (names are
// sorted); a 32-digit lowercase hex ETag (an MD5) as its 16 bytes, any other as varint length and
// bytes. All integers little-endian.
#include <xxhash.h>

#include <cstring>

#include "meta/listing_index.h"

namespace lakecache {
namespace {

constexpr uint8_t kFormat = 1;
constexpr uint8_t kExists = 1, kPinned = 2, kAnchored = 4;  // flags
constexpr uint8_t kDir = 1, kHexEtag = 2;                   // kind

void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void PutFixed64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

// Bounds-checked reads; any read past the end clears `ok`.
struct Reader {
  const char* p;
  const char* end;
  bool ok = true;

  uint64_t Varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64 && p < end; shift += 7) {
      uint8_t b = static_cast<uint8_t>(*p++);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return v;
    }
    ok = false;
    return 0;
  }
  uint64_t Fixed64() {
    if (end - p < 8) return ok = false, 0;
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<uint8_t>(p[i])} << (8 * i);
    p += 8;
    return v;
  }
  uint8_t Byte() {
    if (p >= end) return ok = false, 0;
    return static_cast<uint8_t>(*p++);
  }
  std::string_view Bytes(uint64_t n) {
    if (static_cast<uint64_t>(end - p) < n) return ok = false, std::string_view();
    std::string_view out(p, n);
    p += n;
    return out;
  }
};

// Entry i of `listing`, its name prefix-coded against `previous` (the previous entry's name).
void PutEntry(std::string& out, const DirListing& listing, size_t i, std::string_view previous) {
  std::string_view name = listing.name_at(i);
  size_t shared = 0;
  while (shared < previous.size() && shared < name.size() && previous[shared] == name[shared]) {
    ++shared;
  }
  PutVarint(out, shared);
  PutVarint(out, name.size() - shared);
  out.append(name.substr(shared));
  const uint8_t* md5;
  std::string_view etag = listing.etag_at(i, &md5);
  out.push_back(static_cast<char>((listing.is_dir_at(i) ? kDir : 0) | (md5 ? kHexEtag : 0)));
  PutVarint(out, listing.size_at(i));
  if (md5 != nullptr) {
    out.append(reinterpret_cast<const char*>(md5), 16);
  } else {
    PutVarint(out, etag.size());
    out.append(etag);
  }
  int64_t mtime = listing.mtime_at(i);
  PutVarint(out, (static_cast<uint64_t>(mtime) << 1) ^ static_cast<uint64_t>(mtime >> 63));
}

// Reads one entry into `out`: `previous` holds the previous entry's name, `name` is scratch; the
// two are swapped, so that `previous` holds this entry's name after.
bool ReadEntry(Reader& in, std::string& previous, std::string& name, DirListing* out) {
  uint64_t shared = in.Varint();
  uint64_t suffix = in.Varint();
  if (!in.ok || shared > previous.size()) return false;
  name.assign(previous, 0, shared);
  name.append(in.Bytes(suffix));
  // Names come sorted, each once: anything else is not a listing this index wrote.
  if (!in.ok || name.empty() || (!previous.empty() && !(previous < name))) return false;
  previous.swap(name);
  uint8_t kind = in.Byte();
  uint64_t size = in.Varint();
  const uint8_t* md5 = nullptr;
  std::string_view etag;
  if ((kind & kHexEtag) != 0) {
    std::string_view raw = in.Bytes(16);
    if (raw.size() != 16) return false;
    md5 = reinterpret_cast<const uint8_t*>(raw.data());
  } else {
    etag = in.Bytes(in.Varint());
  }
  uint64_t zz = in.Varint();
  if (!in.ok) return false;
  out->AppendSorted(previous, (kind & kDir) != 0, size,
                    static_cast<int64_t>(zz >> 1) ^ -static_cast<int64_t>(zz & 1), md5, etag);
  return true;
}

}  // namespace

std::string ListingIndex::Encode(const IndexedListing& folder) {
  return Encode(folder, 0, folder.listing->size());
}

std::string ListingIndex::Encode(const IndexedListing& folder, size_t begin, size_t end) {
  const DirListing& listing = *folder.listing;
  std::string out;
  out.reserve(32 + (end - begin) * 40);
  out.push_back(static_cast<char>(kFormat));
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(folder.listed.time_since_epoch());
  PutFixed64(out, static_cast<uint64_t>(ms.count()));
  out.push_back(static_cast<char>((listing.exists() ? kExists : 0) | (folder.pinned ? kPinned : 0) |
                                  (folder.anchored ? kAnchored : 0)));
  PutVarint(out, end - begin);
  for (size_t i = begin; i < end; ++i) {
    PutEntry(out, listing, i, i == begin ? std::string_view() : listing.name_at(i - 1));
  }
  PutFixed64(out, XXH3_64bits(out.data(), out.size()));
  return out;
}

std::optional<IndexedListing> ListingIndex::Decode(std::string_view bytes) {
  if (bytes.size() < 8) return std::nullopt;
  std::string_view body = bytes.substr(0, bytes.size() - 8);
  Reader sum{bytes.data() + body.size(), bytes.data() + bytes.size()};
  if (sum.Fixed64() != XXH3_64bits(body.data(), body.size())) return std::nullopt;
  Reader in{body.data(), body.data() + body.size()};
  if (in.Byte() != kFormat) return std::nullopt;
  IndexedListing out;
  out.listed = std::chrono::system_clock::time_point(
      std::chrono::milliseconds(static_cast<int64_t>(in.Fixed64())));
  uint8_t flags = in.Byte();
  out.pinned = (flags & kPinned) != 0;
  out.anchored = (flags & kAnchored) != 0;
  uint64_t count = in.Varint();
  // Every entry takes at least 5 bytes: a count beyond that is a lie, not an allocation to make.
  if (!in.ok || count > body.size() / 5) return std::nullopt;
  auto listing =
      std::make_shared<DirListing>(DirListing::Sorted(count, body.size(), (flags & kExists) != 0));
  std::string previous, name;
  for (uint64_t i = 0; i < count; ++i) {
    if (!ReadEntry(in, previous, name, listing.get())) return std::nullopt;
  }
  if (in.p != in.end) return std::nullopt;
  out.listing = std::move(listing);
  return out;
}

}  // namespace lakecache
