// FileSystem::Handle: an open file of the read path, one version of one object pinned at open, with
// its read-ahead window and the block it read last. Shared by file_system.cc (open, release) and
// file_system_read.cc (reads); FileSystem's internals only. Its fields are set at open; the
// marked ones change under their lock or atomically.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "cache/block.h"
#include "cache/block_key.h"
#include "common/mutex.h"
#include "fs/file_system.h"
#include "fs/read_ahead.h"
#include "meta/namespace_table.h"

namespace lakecache {

// An open file: one version of one object, pinned at open.
struct FileSystem::Handle {
  Handle(uint64_t inode, Namespace* n, std::string key, std::string tag, uint64_t bytes,
         uint64_t block, const ReadAheadOptions& read_ahead_options)
      : ino(inode),
        ns(n),
        object_key(std::move(key)),
        etag(std::move(tag)),
        size(bytes),
        block_size(block),
        content(MakeContentId(n->name, object_key, etag, block)),
        read_ahead(read_ahead_options) {}

  uint64_t ino;
  Namespace* ns;
  std::string object_key;
  std::string etag;
  uint64_t size;
  uint64_t block_size;
  ContentId content;
  // The block this handle read last: later reads of it are not counted again by the eviction
  // policies, which want one access per block per reading stream.
  std::atomic<uint64_t> last_block{UINT64_MAX};
  Mutex read_ahead_mu;
  ReadAheadWindow read_ahead GUARDED_BY(read_ahead_mu);
  // The memory block this handle read last, kept so that its further reads (a 4 MiB block is read
  // in 1 MiB requests) never fetch it again even if the tiers declined or evicted it. Its bytes
  // count against the memory budget.
  Mutex pin_mu;
  BlockRef pinned GUARDED_BY(pin_mu);
  uint64_t pinned_index GUARDED_BY(pin_mu) = UINT64_MAX;
  int pinned_tier GUARDED_BY(pin_mu) = -1;  // the tier it came from (its reads are its hits)
  std::atomic<bool> saw_change{false};      // the store sent another version (warned once)
  std::atomic<bool> superseded{false};      // this mount opened another version since: no reads
  bool native = false;                      // opened by OpenNative: not in the journal
};

}  // namespace lakecache
