#include "cache/block_key.h"

#include <xxhash.h>

#include <cstdio>

namespace lakecache {

ContentId MakeContentId(std::string_view ns, std::string_view object_key, std::string_view etag,
                        uint64_t block_size) {
  std::string buf;
  buf.reserve(ns.size() + object_key.size() + etag.size() + 40);
  auto append = [&buf](std::string_view field) {
    uint64_t n = field.size();
    buf.append(reinterpret_cast<const char*>(&n), sizeof(n));
    buf.append(field);
  };
  append(ns);
  append(object_key);
  append(etag);
  buf.append(reinterpret_cast<const char*>(&block_size), sizeof(block_size));
  XXH128_hash_t h = XXH3_128bits(buf.data(), buf.size());
  return ContentId{h.high64, h.low64};
}

std::string BlockKey::ToString() const {
  char out[64];
  std::snprintf(
      out, sizeof(out), "%016llx%016llx-%llu", static_cast<unsigned long long>(content.hi),
      static_cast<unsigned long long>(content.lo), static_cast<unsigned long long>(index));
  return out;
}

uint64_t StableKeyHash(const BlockKey& key, uint64_t seed) {
  const uint64_t words[3] = {key.content.hi, key.content.lo, key.index};
  return XXH3_64bits_withSeed(words, sizeof(words), seed);
}

}  // namespace lakecache
