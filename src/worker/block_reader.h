// BlockReader: how a worker serves a range of a block, written once for ReadBlock over gRPC and
// the bulk path (BulkServer). It checks the BlockId a client names (a namespace this worker
// serves, a key under its prefix, sane sizes), notes the object version in the content index
// (for Stats), reads through BlockStore::ReadPinned (a miss is fetched from the object store,
// once however many ask) and counts what it served. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "cache/block_store.h"
#include "cache/content_index.h"
#include "common/result.h"
#include "meta/namespace_table.h"

namespace lakecache {

namespace rpc {
class BlockId;
}  // namespace rpc

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

  // The namespace and block request `id` names, checked.
  Status Resolve(const rpc::BlockId& id, Namespace** ns, BlockRequest* req);

  ContentIndex& index() { return index_; }
  uint64_t blocks_served() const { return blocks_served_.load(std::memory_order_relaxed); }
  uint64_t bytes_served() const { return bytes_served_.load(std::memory_order_relaxed); }

 private:
  NamespaceTable* const namespaces_;
  const std::shared_ptr<BlockStore> blocks_;
  ContentIndex index_;
  std::atomic<uint64_t> blocks_served_{0};
  std::atomic<uint64_t> bytes_served_{0};
};

}  // namespace lakecache
