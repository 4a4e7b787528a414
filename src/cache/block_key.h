// BlockKey: the identity of one cached block, {content id, block index}.
//
// The content id hashes (namespace, object key, ETag, block size), so a changed object (new ETag)
// or a changed block size can never be served blocks cut from other bytes. Value types;
// thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace lakecache {

struct ContentId {
  uint64_t hi = 0;
  uint64_t lo = 0;
  bool operator==(const ContentId&) const = default;
};

// xxh3-128 of the four fields, each length-prefixed so that no two field splits collide.
ContentId MakeContentId(std::string_view ns, std::string_view object_key, std::string_view etag,
                        uint64_t block_size);

struct BlockKey {
  ContentId content;
  uint64_t index = 0;

  bool operator==(const BlockKey&) const = default;
  // "0123...cdef-7": 32 hex digits of the content id, then the block index.
  std::string ToString() const;
};

// A hash of the key that is the same on every build (of a little-endian host) and every machine:
// it names folders on disk and places blocks on workers.
uint64_t StableKeyHash(const BlockKey& key, uint64_t seed = 0);

struct BlockKeyHash {
  size_t operator()(const BlockKey& k) const {
    return static_cast<size_t>(k.content.lo ^ (k.content.hi * 0x9E3779B97F4A7C15ull) ^
                               (k.index * 0xC2B2AE3D27D4EB4Full));
  }
};

}  // namespace lakecache
