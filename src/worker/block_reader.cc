#include "worker/block_reader.h"

#include <algorithm>
#include <string>

#include "cache/block_key.h"
#include "fetch/block_fetch.h"
#include "rpc/lakecache.pb.h"

namespace lakecache {
namespace {

constexpr uint64_t kMaxBlockSize = 1ull << 30;

}  // namespace

Result<BlockReader::Range> BlockReader::Read(const rpc::BlockId& id, uint64_t offset,
                                             uint64_t length) {
  Namespace* ns = nullptr;
  BlockRequest req;
  LC_RETURN_IF_ERROR(Resolve(id, &ns, &req));
  offset = std::min<uint64_t>(offset, req.length);
  length = std::min<uint64_t>(length, req.length - offset);
  Range range;
  if (length == 0) return range;
  ObjectStore& store = *ns->store;
  // A memory hit (or a fresh fetch) comes back pinned; a disk hit is copied into a block of its
  // own, which then pins the range the same way.
  std::shared_ptr<Block> scratch = Block::Allocate(length);
  LC_ASSIGN_OR_RETURN(
      BlockStore::PinnedRead read,
      blocks_->ReadPinned(req, offset, std::span<char>(scratch->mutable_data(), length),
                          [&store, this](const BlockRequest& r) {
                            return FetchBlock(store, r, blocks_->Allocator());
                          }));
  if (read.block != nullptr) {
    range.owner = std::move(read.block);
    range.data = range.owner->data() + offset;
    range.length = length;
  } else {
    range.owner = std::move(scratch);
    range.data = range.owner->data();
    range.length = read.copied;
  }
  blocks_served_.fetch_add(1, std::memory_order_relaxed);
  bytes_served_.fetch_add(range.length, std::memory_order_relaxed);
  return range;
}

Status BlockReader::Resolve(const rpc::BlockId& id, Namespace** ns, BlockRequest* req) {
  *ns = namespaces_->Find(id.ns());
  if (*ns == nullptr) return Status::NotFound("unknown namespace '" + id.ns() + "'");
  if (!id.key().starts_with((*ns)->prefix)) {
    return Status::AccessDenied("key '" + id.key() + "' is outside namespace '" + id.ns() + "'");
  }
  if (id.block_size() == 0 || id.block_size() > kMaxBlockSize) {
    return Status::InvalidArgument("block size " + std::to_string(id.block_size()) +
                                   " out of range");
  }
  // Compared by division: index * block_size can wrap past 2^64 and land inside the object.
  if (id.object_size() > 0 && id.index() >= (id.object_size() - 1) / id.block_size() + 1) {
    return Status::InvalidArgument("block " + std::to_string(id.index()) + " is past the end of " +
                                   id.key() + " (" + std::to_string(id.object_size()) + " bytes)");
  }
  ContentId content = MakeContentId(id.ns(), id.key(), id.etag(), id.block_size());
  index_.Note(id.ns(), content, id.object_size(), id.block_size());
  *req =
      MakeBlockRequest(content, id.key(), id.etag(), id.object_size(), id.block_size(), id.index());
  return Status::Ok();
}

}  // namespace lakecache
