#include "fetch/block_fetch.h"

#include <algorithm>

namespace lakecache {
namespace {

constexpr auto kBlockFetchTimeout = std::chrono::minutes(5);

ReadOptions OptionsFor(const BlockRequest& r) {
  ReadOptions options;
  options.deadline = Clock::now() + kBlockFetchTimeout;
  options.if_match = r.etag;  // every block of one open file from the same object version
  options.object_size = r.object_size;
  return options;
}

Status ShorterThanListed(ObjectStore& store, const BlockRequest& r, uint64_t at) {
  return Status::Unavailable(store.Describe() + "/" + r.object_key + ": object ended at " +
                             std::to_string(at) + " bytes, shorter than listed");
}

std::shared_ptr<Block> NewBlock(const BlockAllocator& allocate, size_t size) {
  return allocate != nullptr ? allocate(size) : Block::Allocate(size);
}

}  // namespace

Result<BlockRef> FetchBlock(ObjectStore& store, const BlockRequest& r,
                            const BlockAllocator& allocate) {
  std::shared_ptr<Block> block = NewBlock(allocate, r.length);
  ReadOptions options = OptionsFor(r);
  uint64_t done = 0;
  while (done < r.length) {
    std::span<char> rest(block->mutable_data() + done, r.length - done);
    LC_ASSIGN_OR_RETURN(size_t n, store.Read(r.object_key, r.offset + done, rest, options));
    if (n == 0) return ShorterThanListed(store, r, r.offset + done);
    done += n;
  }
  return BlockRef(std::move(block));
}

void BlockRunFetch::Add(const BlockRequest& request) {
  MutexLock lock(&mu_);
  members_.push_back(request);
}

void BlockRunFetch::Seal() {
  {
    MutexLock lock(&mu_);
    sealed_ = true;
  }
  sealed_cv_.SignalAll();
}

bool BlockRunFetch::empty() const {
  MutexLock lock(&mu_);
  return members_.empty();
}

Result<BlockRef> BlockRunFetch::Get(const BlockRequest& request) {
  {
    MutexLock lock(&mu_);
    while (!sealed_) sealed_cv_.Wait(&mu_);
    for (size_t i = 0; i < members_.size(); ++i) {
      if (members_[i].key != request.key) continue;
      if (!fetched_) FetchAll();  // the others wait on mu_ meanwhile
      return results_[i];
    }
  }
  // Not a member: a block the run left out because a lower tier held it, which that tier has
  // lost since (evicted, freed). Fetched alone; the run (perhaps empty) is not fetched for it.
  return FetchBlock(*store_, request, allocate_);
}

void BlockRunFetch::FetchAll() {
  fetched_ = true;
  std::vector<std::shared_ptr<Block>> blocks;
  std::vector<std::span<char>> bufs;
  uint64_t total = 0;
  for (const BlockRequest& r : members_) {
    blocks.push_back(NewBlock(allocate_, r.length));
    bufs.emplace_back(blocks.back()->mutable_data(), r.length);
    total += r.length;
  }
  const BlockRequest& first = members_.front();
  Result<size_t> n = store_->ReadV(first.object_key, first.offset, bufs, OptionsFor(first));
  Status error = n.ok() ? Status::Ok() : n.status();
  if (n.ok() && *n < total) error = ShorterThanListed(*store_, first, first.offset + *n);
  for (auto& block : blocks) {
    results_.push_back(error.ok() ? Result<BlockRef>(BlockRef(std::move(block)))
                                  : Result<BlockRef>(error));
  }
}

BlockRequest MakeBlockRequest(const ContentId& content, const std::string& object_key,
                              const std::string& etag, uint64_t object_size, uint64_t block_size,
                              uint64_t index) {
  BlockRequest req;
  FillBlockRequest(content, object_key, etag, object_size, block_size, index, &req);
  return req;
}

void FillBlockRequest(const ContentId& content, const std::string& object_key,
                      const std::string& etag, uint64_t object_size, uint64_t block_size,
                      uint64_t index, BlockRequest* req) {
  req->key = BlockKey{content, index};
  req->object_key.assign(object_key);
  req->etag.assign(etag);
  req->offset = index * block_size;
  req->object_size = object_size;
  req->length =
      req->offset < object_size ? std::min<uint64_t>(block_size, object_size - req->offset) : 0;
  req->repeat_access = false;
}

}  // namespace lakecache
