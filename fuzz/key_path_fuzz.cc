// Feeds the bytes to the mappings between names: object URIs (parse, print, parse), block keys to
// cache file names (BlockKey::ToString, CacheDir::PathFor), content ids, object keys to the entries
// a folder shows (DirListing) and protocol paths back to keys, and ContentIndex's usage counts.
// Asserts each round trip and contract its header states.
#include <fuzzer/FuzzedDataProvider.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cache/block_store.h"
#include "cache/cache_dir.h"
#include "cache/content_index.h"
#include "common/object_uri.h"
#include "meta/dir_listing.h"
#include "meta/namespace_table.h"

namespace lakecache {
namespace {

// A cache directory and a memory-only store, opened once per process; the folder goes at exit.
struct Fixture {
  std::filesystem::path dir;
  TierCounters counters;
  std::unique_ptr<CacheDir> cache_dir;
  std::unique_ptr<BlockStore> store;

  Fixture() {
    dir = std::filesystem::temp_directory_path() /
          ("lakecache-key-fuzz-" + std::to_string(::getpid()));
    DiskCacheConfig disk{dir.string(), 1 << 20, 0, 0};
    cache_dir = std::move(CacheDir::Open(disk, "lru", 1, &counters).value());
    CacheConfig memory;
    memory.memory_capacity = 64 << 20;
    memory.policy = "lru";  // admits every block, so the counts below are exact
    store = std::move(BlockStore::Open(memory).value());
  }
  ~Fixture() {
    cache_dir.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

// Parsing the canonical form gives the same location (the endpoint host is not part of it).
void CheckUri(std::string_view text) {
  Result<ObjectUri> uri = ParseObjectUri(text);
  if (!uri.ok()) return;
  if (uri->scheme != UriScheme::kFile && (uri->bucket.empty() || uri->key.starts_with('/'))) {
    __builtin_trap();
  }
  Result<ObjectUri> again = ParseObjectUri(uri->ToString());
  if (!again.ok() || again->scheme != uri->scheme || again->bucket != uri->bucket ||
      again->key != uri->key) {
    __builtin_trap();
  }
  std::string prefix = NormalizePrefix(uri->key);
  if (prefix.starts_with('/') || (!prefix.empty() && !prefix.ends_with('/'))) __builtin_trap();
}

// A block's file name says which block it holds, and lies in the folders its hash picks.
void CheckKeyPath(const Fixture& f, const BlockKey& key) {
  std::string name = key.ToString();
  unsigned long long hi = 0, lo = 0, index = 0;
  int used = 0;
  if (name.size() < 34 || name[32] != '-' ||
      std::sscanf(name.c_str(), "%16llx%16llx-%llu%n", &hi, &lo, &index, &used) != 3 ||
      static_cast<size_t>(used) != name.size() || BlockKey{{hi, lo}, index} != key) {
    __builtin_trap();
  }
  uint64_t h = StableKeyHash(key);
  char folders[16];
  std::snprintf(folders, sizeof(folders), "/%02x/%02x/", static_cast<unsigned>(h >> 56),
                static_cast<unsigned>((h >> 48) & 0xff));
  std::string want = (f.dir / "blocks").string() + folders + name + ".blk";
  if (f.cache_dir->PathFor(key) != want) __builtin_trap();
}

// The fields are length-prefixed, so moving a boundary between them changes the content id.
void CheckContentId(FuzzedDataProvider& in) {
  std::string all = in.ConsumeRandomLengthString(64);
  size_t cut[4];
  for (size_t& c : cut) c = in.ConsumeIntegralInRange<size_t>(0, all.size());
  if (cut[0] > cut[1]) std::swap(cut[0], cut[1]);
  if (cut[2] > cut[3]) std::swap(cut[2], cut[3]);
  uint64_t block_size = in.ConsumeIntegral<uint64_t>();
  std::string_view s(all);
  auto id = [&](size_t a, size_t b) {
    return MakeContentId(s.substr(0, a), s.substr(a, b - a), s.substr(b), block_size);
  };
  bool same_fields = cut[0] == cut[2] && cut[1] == cut[3];
  if ((id(cut[0], cut[1]) == id(cut[2], cut[3])) != same_fields) __builtin_trap();
}

bool ValidName(std::string_view n) {
  return !n.empty() && n != "." && n != ".." && n.find('/') == std::string_view::npos &&
         n.find('\0') == std::string_view::npos;
}

// Every name a folder shows is a file name, once, in order, and every valid key shows.
void CheckListing(FuzzedDataProvider& in) {
  std::string prefix = NormalizePrefix(in.ConsumeRandomLengthString(16));
  ListResult listing;
  for (int n = in.ConsumeIntegralInRange(0, 6); n > 0; --n) {
    listing.objects.push_back({prefix + in.ConsumeRandomLengthString(24), 1, "e", 0});
  }
  for (int n = in.ConsumeIntegralInRange(0, 3); n > 0; --n) {
    listing.common_prefixes.push_back(prefix + in.ConsumeRandomLengthString(16) + "/");
  }
  DirListing dir = DirListing::FromObjects(prefix, listing);
  const std::vector<DirEntry> entries = dir.ToEntries();
  for (size_t i = 0; i < entries.size(); ++i) {
    if (!ValidName(entries[i].name)) __builtin_trap();
    if (i > 0 && !(entries[i - 1].name < entries[i].name)) __builtin_trap();
  }
  for (const ObjectInfo& o : listing.objects) {
    std::string_view name = std::string_view(o.key).substr(prefix.size());
    bool marker = name.ends_with('/');
    if (marker) name.remove_suffix(1);
    FoundEntry e = dir.Find(name);
    if (ValidName(name) != (e != nullptr) || (e && marker && !e->is_dir)) __builtin_trap();
  }
  if (dir.exists() != (!listing.objects.empty() || !listing.common_prefixes.empty())) {
    __builtin_trap();
  }
}

// A path the protocol accepts names, part by part, entries the mount shows.
void CheckRelative(std::string_view path) {
  if (!CheckRelativePath("path", path).ok() || path.empty()) return;
  std::string parent;
  while (true) {
    size_t slash = path.find('/');
    std::string part(path.substr(0, slash));
    ListResult listing;
    if (slash == std::string_view::npos) {
      listing.objects.push_back({parent + part, 1, "e", 0});
    } else {
      listing.common_prefixes.push_back(parent + part + "/");
    }
    DirListing dir = DirListing::FromObjects(parent, listing);
    FoundEntry e = dir.Find(part);
    if (e == nullptr || e->is_dir != (slash != std::string_view::npos)) __builtin_trap();
    if (slash == std::string_view::npos) break;
    parent += part + "/";
    path.remove_prefix(slash + 1);
  }
}

// ContentIndex counts, per namespace, the blocks the store holds of the versions it was told of.
void CheckContentIndex(Fixture& f, FuzzedDataProvider& in) {
  ContentIndex index;
  std::vector<BlockKey> admitted;
  std::vector<ContentId> noted;
  for (int v = in.ConsumeIntegralInRange(1, 3); v > 0; --v) {
    std::string ns = in.ConsumeRandomLengthString(4);
    ContentId content{in.ConsumeIntegral<uint64_t>(), in.ConsumeIntegral<uint64_t>()};
    uint64_t object_size = in.ConsumeIntegral<uint64_t>();
    uint64_t block_size = in.ConsumeIntegral<uint64_t>();
    uint64_t block = in.ConsumeIntegralInRange<uint64_t>(0, 3);
    // Note keeps the first sizes it was told of a version.
    bool known = std::find(noted.begin(), noted.end(), content) != noted.end();
    noted.push_back(content);
    index.Note(ns, content, object_size, block_size);
    // A whole block of at most 64 KiB inside the object.
    if (known || block_size == 0 || block_size > (64 << 10) || block >= object_size / block_size) {
      continue;
    }
    BlockRequest req;
    req.key = {content, block};
    req.length = block_size;
    f.store->Admit(req, Block::Allocate(block_size));
    admitted.push_back(req.key);
  }
  uint64_t blocks = 0;
  std::vector<ContentIndex::Usage> usage = index.CachedBytes(*f.store);
  for (size_t i = 0; i < usage.size(); ++i) {
    if (i > 0 && !(usage[i - 1].ns < usage[i].ns)) __builtin_trap();  // sorted, one per name
    blocks += usage[i].blocks;
  }
  for (const BlockKey& k : admitted) f.store->Erase(k);
  if (blocks != admitted.size()) __builtin_trap();
}

}  // namespace
}  // namespace lakecache

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lakecache;
  static Fixture fixture;
  FuzzedDataProvider in(data, size);
  CheckUri(in.ConsumeRandomLengthString(128));
  CheckKeyPath(fixture, BlockKey{{in.ConsumeIntegral<uint64_t>(), in.ConsumeIntegral<uint64_t>()},
                                 in.ConsumeIntegral<uint64_t>()});
  CheckContentId(in);
  CheckListing(in);
  CheckRelative(in.ConsumeRandomLengthString(64));
  CheckContentIndex(fixture, in);
  return 0;
}
