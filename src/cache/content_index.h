// ContentIndex: the namespace of each object version a cache has been asked about, so that cached
// bytes can be reported per namespace (a BlockKey is a hash and does not say).
//
// Readers and loads Note the versions they name; CachedBytes then counts, per namespace, the
// distinct blocks of those versions that the BlockStore holds (a block in memory and on disk
// counts once). Versions never named since start-up (found on disk after a restart) are not
// counted until named again. Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cache/block_key.h"
#include "common/mutex.h"

namespace lakecache {

class BlockStore;

class ContentIndex {
 public:
  void Note(std::string_view ns, const ContentId& content, uint64_t object_size,
            uint64_t block_size);

  struct Usage {
    std::string ns;
    uint64_t cached_bytes = 0;
    uint64_t blocks = 0;
  };
  // Sorted by namespace.
  std::vector<Usage> CachedBytes(const BlockStore& store) const;

 private:
  struct Version {
    uint32_t ns = 0;  // index into names_
    uint64_t object_size = 0;
    uint64_t block_size = 0;
    // ceil(object_size / block_size), without a sum that wraps near 2^64; 0 without a block size.
    uint64_t blocks() const {
      return block_size == 0 ? 0 : object_size / block_size + (object_size % block_size != 0);
    }
  };
  struct ContentHash {
    size_t operator()(const ContentId& c) const { return static_cast<size_t>(c.lo ^ c.hi); }
  };
  mutable Mutex mu_;
  std::vector<std::string> names_ GUARDED_BY(mu_);
  std::unordered_map<ContentId, Version, ContentHash> versions_ GUARDED_BY(mu_);
};

}  // namespace lakecache
