// How a block of an object version is fetched from its object store: one block with one ranged
// GET (FetchBlock), or a run of consecutive blocks with one (BlockRunFetch).
//
// BlockRunFetch: fetches a run of consecutive blocks of one object version with one ranged GET.
//
// Read-ahead issues blocks in batches; each block is still prefetched (and single-flighted) on its
// own through the BlockStore, but their sources share one BlockRunFetch, whose first caller fetches
// every member with one ObjectStore::ReadV into the blocks' own buffers, and the others wait for
// it. Object stores charge time (and money) per request, so 8 blocks in one GET read several times
// faster than 8 GETs of one block. Members are added until Seal(); a fetch waits for the seal, so
// it never misses a member. Thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cache/block_source.h"
#include "common/mutex.h"
#include "ufs/object_store.h"

namespace lakecache {

class BlockRunFetch {
 public:
  // `allocate` makes the members' blocks (null: Block::Allocate).
  explicit BlockRunFetch(ObjectStore* store, BlockAllocator allocate = nullptr)
      : store_(store), allocate_(std::move(allocate)) {}

  // Adds the block after the last member. REQUIRES: before Seal(); consecutive with the last one.
  void Add(const BlockRequest& request);
  void Seal();
  bool empty() const;

  // The member's block: fetched with all the others on the first call. Another block (its
  // source was bound to the run, but it was left out) is fetched alone. Waits for Seal().
  Result<BlockRef> Get(const BlockRequest& request);

 private:
  void FetchAll() REQUIRES(mu_);  // REQUIRES: sealed_, members_ not empty

  ObjectStore* const store_;
  const BlockAllocator allocate_;
  mutable Mutex mu_;
  CondVar sealed_cv_;
  bool sealed_ GUARDED_BY(mu_) = false;
  bool fetched_ GUARDED_BY(mu_) = false;
  std::vector<BlockRequest> members_ GUARDED_BY(mu_);
  std::vector<Result<BlockRef>> results_ GUARDED_BY(mu_);
};

// The request for block `index` of an object version of `object_size` bytes: the last block is
// shorter.
BlockRequest MakeBlockRequest(const ContentId& content, const std::string& object_key,
                              const std::string& etag, uint64_t object_size, uint64_t block_size,
                              uint64_t index);
// The same into *req, reusing its strings' memory (the per-read path allocates nothing).
void FillBlockRequest(const ContentId& content, const std::string& object_key,
                      const std::string& etag, uint64_t object_size, uint64_t block_size,
                      uint64_t index, BlockRequest* req);

// Fetches one block with its own GET (the demand path, and runs of one), into a block `allocate`
// makes (null: Block::Allocate).
Result<BlockRef> FetchBlock(ObjectStore& store, const BlockRequest& r,
                            const BlockAllocator& allocate = nullptr);

}  // namespace lakecache
