#include "worker/block_reader.h"

#include <algorithm>
#include <string>

#include <xxhash.h>

#include "cache/block_key.h"
#include "fetch/block_fetch.h"
#include "rpc/block_frame.h"
#include "rpc/lakecache.pb.h"
#include "worker/block_relay.h"
#include "worker/holder_book.h"
#include "worker/peer_reads.h"
#include "worker/replica_ledger.h"

namespace lakecache {
namespace {

constexpr uint64_t kMaxBlockSize = 1ull << 30;

}  // namespace

Result<BlockReader::Range> BlockReader::Read(const rpc::BlockId& id, uint64_t offset,
                                             uint64_t length) {
  Namespace* ns = nullptr;
  BlockRequest req;
  LC_RETURN_IF_ERROR(Resolve(id, &ns, &req));
  ObjectStore& store = *ns->store;
  return ReadWith(req, offset, length, [&store, this](const BlockRequest& r) {
    return FetchBlock(store, r, blocks_->Allocator());
  });
}

Result<BlockReader::Range> BlockReader::ReadWith(const BlockRequest& req, uint64_t offset,
                                                 uint64_t length, const BlockSource& source) {
  offset = std::min<uint64_t>(offset, req.length);
  length = std::min<uint64_t>(length, req.length - offset);
  Range range;
  if (length == 0) return range;
  // A memory hit (or a fresh fetch) comes back pinned; a disk hit is copied into a block of its
  // own, which then pins the range the same way.
  std::shared_ptr<Block> scratch = Block::Allocate(length);
  LC_ASSIGN_OR_RETURN(
      BlockStore::PinnedRead read,
      blocks_->ReadPinned(req, offset, std::span<char>(scratch->mutable_data(), length), source));
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

Result<uint64_t> BlockReader::DigestOf(const BlockRequest& req, const BlockSource& source) {
  if (std::optional<uint64_t> known = book_->Digest(req.key)) return *known;
  LC_ASSIGN_OR_RETURN(Range whole, ReadWith(req, 0, req.length, source));
  if (whole.length != req.length) {
    return Status::Corruption("block " + req.key.ToString() + " has " +
                              std::to_string(whole.length) + " of its " +
                              std::to_string(req.length) + " bytes");
  }
  const uint64_t digest = XXH3_64bits(whole.data, whole.length);
  book_->SetDigest(req.key, digest);
  return digest;
}

Result<BlockReader::Answer> BlockReader::Serve(const rpc::BlockReadRequest& request) {
  constexpr uint8_t kReplicaFlags = rpc::kReadForReplica | rpc::kReadNoRedirect |
                                    rpc::kReadHeldOnly | rpc::kReadAsReplica | rpc::kReadPlaceOnly;
  if ((request.flags & kReplicaFlags) != 0 && book_ == nullptr) {
    return Status::Unimplemented("this worker keeps no replicas");
  }
  Namespace* ns = nullptr;
  BlockRequest req;
  LC_RETURN_IF_ERROR(Resolve(request.block, &ns, &req));
  ObjectStore& store = *ns->store;
  BlockSource from_store = [&store, this](const BlockRequest& r) {
    // A block of this worker's own goes before the replicas it keeps for others.
    if (ledger_ != nullptr) ledger_->MakeRoom(r.length);
    return FetchBlock(store, r, blocks_->Allocator());
  };
  BlockSource source = from_store;
  bool from_peers = false;  // this read fetched the block from its peers: a replica
  if ((request.flags & rpc::kReadHeldOnly) != 0) {
    source = [](const BlockRequest& r) -> Result<BlockRef> {
      return Status::NotFound("block " + r.key.ToString() + " is not held here");
    };
  } else if ((request.flags & rpc::kReadAsReplica) != 0) {
    source = [&](const BlockRequest& r) -> Result<BlockRef> {
      Result<std::shared_ptr<Block>> got =
          peers_->Fetch(request.block, r.key, r.length, blocks_->Allocator());
      if (got.ok()) {
        from_peers = true;
        return BlockRef(std::move(*got));
      }
      // This worker owns it, or the peers failed it: the store, as for any miss.
      return from_store(r);
    };
  }
  Answer answer;
  if ((request.flags & rpc::kReadHeldOnly) != 0) {
    if (std::shared_ptr<BlockRelay> relay = peers_->relays().Find(req.key)) {
      const uint64_t offset = std::min<uint64_t>(request.offset, relay->length());
      answer.range.owner = relay->block();
      answer.range.data = relay->block()->data() + offset;
      answer.range.length = std::min<uint64_t>(request.length, relay->length() - offset);
      answer.relay = std::move(relay);
      return answer;  // counted once sent (NoteRelayed)
    }
  }
  const bool owner =
      (request.flags & rpc::kReadForReplica) != 0 && (request.flags & rpc::kReadHeldOnly) == 0;
  if (owner) {
    if (!peers_->InView(request.requester)) {
      // Not a worker of the view (yet): served, never recorded as a holder others are sent to.
    } else if ((request.flags & rpc::kReadNoRedirect) != 0) {
      book_->Forget(req.key);  // a holder it named failed the asker: name none until known again
      book_->Note(req.key, request.requester);
    } else if (std::optional<std::string> from = book_->Route(req.key, request.requester)) {
      LC_ASSIGN_OR_RETURN(answer.digest, DigestOf(req, source));
      answer.redirect = std::move(*from);
      return answer;
    }
    LC_ASSIGN_OR_RETURN(answer.digest, DigestOf(req, source));
  }
  LC_ASSIGN_OR_RETURN(answer.range, ReadWith(req, request.offset, request.length, source));
  // Listed once the tiers have it, so that trimming the replicas to their share erases it too.
  if (from_peers) ledger_->Add(req.key, req.length);
  // The mount maps it from this worker's memory; the bytes themselves when it was not kept there.
  if ((request.flags & rpc::kReadPlaceOnly) != 0 && blocks_->InMemory(req.key)) {
    answer.range = Range{};
  }
  return answer;
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
