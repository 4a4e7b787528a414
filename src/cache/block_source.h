// BlockRequest and BlockSource: how the cache asks the layer above for a block it does not hold.
//
// The cache never talks to object stores; the client (or worker) passes a BlockSource that fetches
// the block's bytes (a ranged GET). The cache calls it at most once per block at a time
// (single-flight).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "cache/block.h"
#include "cache/block_key.h"
#include "common/result.h"

namespace lakecache {

struct BlockRequest {
  BlockKey key;
  std::string object_key;  // recorded in the disk header, for recovery and debugging
  std::string etag;
  uint64_t offset = 0;       // of the block within the object: index * block size
  uint64_t length = 0;       // of this block: the block size, or less for an object's last block
  uint64_t object_size = 0;  // of the object version (0: not known)
  // Set by a reader whose previous read was of this same block: the access was already reported to
  // the eviction policies, which count once per block per reading stream.
  bool repeat_access = false;
};

// Returns exactly request.length bytes, or an error (passed on to every waiting reader).
using BlockSource = std::function<Result<BlockRef>(const BlockRequest& request)>;

}  // namespace lakecache
