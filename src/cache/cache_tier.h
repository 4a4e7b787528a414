// CacheTier: one level of the block cache (memory, or a set of disk directories).
//
// All tiers share this interface so the BlockStore can stack them. A tier owns its index, its bytes
// and its EvictionPolicy. Get returns the whole block (memory: the pinned buffer itself, zero-copy;
// disk: read and checksum-verified into a new Block); Read copies a range (disk: verifying only the
// chunks it touches). A corrupt block is never returned: it is removed, counted, and reported as a
// miss. Thread-safe; lookups take no global lock.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>

#include "cache/block.h"
#include "cache/block_source.h"
#include "cache/cache_stats.h"
#include "common/result.h"

namespace lakecache {

// Holds blocks that a tier shares in place (another process's memory: a co-located worker's) for
// one reader that reads them in place, in a session of the reader's own at the memory's owner:
// the reader keeps that session open (a descriptor given to it), so its holds last while it
// reads, whatever becomes of the process that took them. Thread-safe.
class ReaderHolds {
 public:
  virtual ~ReaderHolds() = default;
  // `block` (found under `key`) as the reader may keep it: `block` itself when it is not such
  // memory; else the same bytes held in the reader's session, or null when they cannot be (the
  // owner let go of them: copy them instead). When a session was opened for this call, *keep is
  // the descriptor the reader must keep (the caller owns it); -1 otherwise.
  virtual BlockRef Hold(const BlockKey& key, const BlockRef& block, int* keep) = 0;
};

class CacheTier {
 public:
  virtual ~CacheTier() = default;

  virtual const std::string& name() const = 0;

  // The block, or kNotFound on a miss (including a corrupt block, which is removed). Counts a hit
  // or miss and reports it to the policy.
  virtual Result<BlockRef> Get(const BlockKey& key) = 0;

  // Copies [offset, offset + dst.size()) of the block into dst (clamped to the block's end);
  // returns the bytes copied. kNotFound on a miss, like Get. With count_access false (a further
  // small read of a block its reader has just read) the policy is not told again; hit counters
  // still count.
  virtual Result<size_t> Read(const BlockKey& key, uint64_t offset, std::span<char> dst,
                              bool count_access) = 0;

  // The block itself, pinned, when the tier keeps blocks in process memory (zero-copy reads);
  // nullptr on a miss, counted like Read's. Tiers that do not keep blocks in memory return nullptr
  // without counting anything: see resident().
  virtual BlockRef Pin(const BlockKey& key, bool count_access) {
    (void)key;
    (void)count_access;
    return nullptr;
  }
  // The tier's copy of `key` when it lies in a file (shared memory: Block::fd), counting nothing;
  // nullptr otherwise. A block just fetched and offered is read from this copy where the tier
  // made one, so that readers beside FUSE get it by reference.
  virtual BlockRef SharedCopy(const BlockKey& key) {
    (void)key;
    return nullptr;
  }
  // A block of `size` bytes for a fetch to fill, placed where this tier keeps its blocks so that
  // Insert copies nothing (shared memory); nullptr: any block will do.
  virtual std::shared_ptr<Block> NewBlock(size_t size) {
    (void)size;
    return nullptr;
  }
  // Holds for one reader of this tier's blocks in place (see ReaderHolds); null: they need none.
  virtual std::unique_ptr<ReaderHolds> NewReaderHolds() { return nullptr; }
  // True if Pin serves this tier's hits (its blocks live in process memory).
  virtual bool resident() const { return false; }

  // Offers a block that was just missed here. The policy may decline (returns false) and may evict
  // others. Write failures (disk full) are counted and return false, never an error for the reader.
  virtual bool Insert(const BlockRequest& request, const BlockRef& block) = 0;

  // A reader read `key` from a tier above this one. If this tier holds it too, its policy counts
  // the access (so a block hot in memory stays on disk across restarts); no hit or miss is counted.
  virtual void Touch(const BlockKey& key) = 0;

  // True if the tier holds the block (no hit/miss counted).
  virtual bool Contains(const BlockKey& key) const = 0;

  // Calls `fn` with the key of every block the tier holds (a key may come twice) and returns
  // true; false, having called nothing, for a tier that cannot list its blocks (one standing for
  // a cache elsewhere). `fn` runs under the tier's locks: it must not call into the tier.
  virtual bool ForEachKey(const std::function<void(const BlockKey&)>& fn) const {
    (void)fn;
    return false;
  }

  // True if the tier would keep a new block of `bytes` without evicting anything for it.
  virtual bool HasRoom(uint64_t bytes) const {
    (void)bytes;
    return false;
  }

  // Drops the block if present.
  virtual void Erase(const BlockKey& key) = 0;

  virtual TierStats Stats() const = 0;

  // Returns once every block accepted by Insert is stored (a tier that writes behind).
  virtual void Flush() {}

  // True when this tier stands for a cache outside this store that holds the block for it (a
  // mount's view of the worker on its node): then no tier of the store keeps a copy of it.
  virtual bool Shadows(const BlockKey& key) const {
    (void)key;
    return false;
  }

  // The file holding the block, for a reader on this host that verifies it itself (short-circuit
  // reads); empty when the tier keeps no files or does not hold the block in one now. Counts an
  // access (hit) when it returns a path.
  virtual std::string FilePath(const BlockKey& key) {
    (void)key;
    return "";
  }
};

}  // namespace lakecache
