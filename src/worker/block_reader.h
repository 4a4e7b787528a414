// BlockReader: how a worker serves a range of a block, written once for ReadBlock over gRPC and
// the bulk path (BulkServer). It checks the BlockId a client names (a namespace this worker
// serves, a key under its prefix, sane sizes), notes the object version in the content index
// (for Stats), reads through BlockStore::ReadPinned (a miss is fetched from the object store,
// once however many ask) and counts what it served. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include <optional>
#include <string>

#include "cache/block_store.h"
#include "cache/content_index.h"
#include "common/result.h"
#include "meta/namespace_table.h"

namespace lakecache {

namespace rpc {
class BlockId;
struct BlockReadRequest;
}  // namespace rpc

class BlockRelay;
class HolderBook;
class PeerReads;
class ReplicaLedger;

class BlockReader {
 public:
  // REQUIRES: `namespaces` outlives the reader.
  BlockReader(NamespaceTable* namespaces, std::shared_ptr<BlockStore> blocks)
      : namespaces_(namespaces), blocks_(std::move(blocks)) {}

  // Bytes of a block, pinned by `owner` for as long as the holder keeps it.
  struct Range {
    BlockRef owner;
    const char* data = nullptr;
    uint64_t length = 0;  // 0: the range was empty (past the block's end)
  };
  // [offset, offset + length) of the block, clamped to its end: a memory hit (or a fresh fetch)
  // is the cached block itself; a disk hit is one verified copy of the range.
  Result<Range> Read(const rpc::BlockId& id, uint64_t offset, uint64_t length);

  // A read as the bulk path receives it, with its flags (rpc/block_frame.h):
  //  - kReadAsReplica (from a mount of this host): a miss is got from the block's owner among the
  //    other workers (PeerReads) and kept as a replica (ReplicaLedger); from the store when this
  //    worker owns it or the peers fail;
  //  - kReadForReplica (from a worker, to this one as the owner): the answer carries the block's
  //    digest, and may be a redirect to another holder (HolderBook) unless kReadNoRedirect;
  //  - kReadHeldOnly: from what this worker holds or is fetching; NotFound otherwise, never a
  //    fetch. A block it is receiving from a peer is answered with its relay: the range is sent
  //    as its bytes land.
  // Without EnableReplicas the replica flags are refused.
  struct Answer {
    Range range;
    std::optional<uint64_t> digest;  // XXH3-64 of the whole block
    std::string redirect;            // not empty: no range; the asker reads from this worker
    // Not null: the range's bytes are still landing; send each once the relay has it.
    std::shared_ptr<BlockRelay> relay;
  };
  Result<Answer> Serve(const rpc::BlockReadRequest& request);
  // REQUIRES: each outlives the reader; called before serving.
  void EnableReplicas(HolderBook* book, PeerReads* peers, ReplicaLedger* ledger) {
    book_ = book;
    peers_ = peers;
    ledger_ = ledger;
  }

  // The namespace and block request `id` names, checked.
  Status Resolve(const rpc::BlockId& id, Namespace** ns, BlockRequest* req);

  ContentIndex& index() { return index_; }
  uint64_t blocks_served() const { return blocks_served_.load(std::memory_order_relaxed); }
  uint64_t bytes_served() const { return bytes_served_.load(std::memory_order_relaxed); }
  // A range answered with its relay (Answer::relay) was sent whole.
  void NoteRelayed(uint64_t bytes) {
    blocks_served_.fetch_add(1, std::memory_order_relaxed);
    bytes_served_.fetch_add(bytes, std::memory_order_relaxed);
  }

 private:
  // Read's steps with the source a miss calls.
  Result<Range> ReadWith(const BlockRequest& req, uint64_t offset, uint64_t length,
                         const BlockSource& source);
  // The owner's digest of the whole block (memoized in the book), reading the block if needed.
  Result<uint64_t> DigestOf(const BlockRequest& req, const BlockSource& source);

  NamespaceTable* const namespaces_;
  const std::shared_ptr<BlockStore> blocks_;
  HolderBook* book_ = nullptr;
  PeerReads* peers_ = nullptr;
  ReplicaLedger* ledger_ = nullptr;
  ContentIndex index_;
  std::atomic<uint64_t> blocks_served_{0};
  std::atomic<uint64_t> bytes_served_{0};
};

}  // namespace lakecache
