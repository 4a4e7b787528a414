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

void PutEntry(std::string& out, const DirEntry& e, const std::string& previous) {
  size_t shared = 0;
  while (shared < previous.size() && shared < e.name.size() && previous[shared] == e.name[shared]) {
    ++shared;
  }
  PutVarint(out, shared);
  PutVarint(out, e.name.size() - shared);
  out.append(e.name, shared);
  uint8_t md5[16];
  bool hex = PackMd5Etag(e.etag, md5);
  out.push_back(static_cast<char>((e.is_dir ? kDir : 0) | (hex ? kHexEtag : 0)));
  PutVarint(out, e.size);
  if (hex) {
    out.append(reinterpret_cast<const char*>(md5), sizeof(md5));
  } else {
    PutVarint(out, e.etag.size());
    out.append(e.etag);
  }
  PutVarint(out, (static_cast<uint64_t>(e.mtime) << 1) ^ static_cast<uint64_t>(e.mtime >> 63));
}

bool ReadEntry(Reader& in, const std::string& previous, DirEntry* e) {
  uint64_t shared = in.Varint();
  uint64_t suffix = in.Varint();
  if (!in.ok || shared > previous.size()) return false;
  e->name.assign(previous, 0, shared);
  e->name.append(in.Bytes(suffix));
  uint8_t kind = in.Byte();
  e->is_dir = (kind & kDir) != 0;
  e->size = in.Varint();
  if ((kind & kHexEtag) != 0) {
    std::string_view raw = in.Bytes(16);
    if (raw.size() != 16) return false;
    e->etag = UnpackMd5Etag(reinterpret_cast<const uint8_t*>(raw.data()));
  } else {
    e->etag.assign(in.Bytes(in.Varint()));
  }
  uint64_t zz = in.Varint();
  e->mtime = static_cast<int64_t>(zz >> 1) ^ -static_cast<int64_t>(zz & 1);
  // Names come sorted, each once: anything else is not a listing this index wrote.
  return in.ok && !e->name.empty() && (previous.empty() || previous < e->name);
}

}  // namespace

std::string ListingIndex::Encode(const IndexedListing& folder) {
  const DirListing& listing = *folder.listing;
  std::string out;
  out.reserve(32 + listing.size() * 40);
  out.push_back(static_cast<char>(kFormat));
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(folder.listed.time_since_epoch());
  PutFixed64(out, static_cast<uint64_t>(ms.count()));
  out.push_back(static_cast<char>((listing.exists() ? kExists : 0) | (folder.pinned ? kPinned : 0) |
                                  (folder.anchored ? kAnchored : 0)));
  PutVarint(out, listing.size());
  std::string previous;
  for (size_t i = 0; i < listing.size(); ++i) {
    DirEntry e = listing.at(i);
    PutEntry(out, e, previous);
    previous = std::move(e.name);
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
  std::vector<DirEntry> entries(count);
  static const std::string kNone;
  for (uint64_t i = 0; i < count; ++i) {
    if (!ReadEntry(in, i == 0 ? kNone : entries[i - 1].name, &entries[i])) {
      return std::nullopt;
    }
  }
  if (in.p != in.end) return std::nullopt;
  out.listing = std::make_shared<const DirListing>(
      DirListing::FromEntries(std::move(entries), (flags & kExists) != 0));
  return out;
}

}  // namespace lakecache
