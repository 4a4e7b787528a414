// StoreSink: a BlockSink over one BlockStore: what a worker does with the blocks the master sends
// it, and where a standalone mount's own loads go. Missing blocks are fetched from their
// namespace's object store, several at once on `pool` (inline without one); a block counts as
// loaded only if the store holds it once the fetch is done. Every version named is noted in the
// ContentIndex. Thread-safe.
#pragma once

#include "cache/block_store.h"
#include "cache/content_index.h"
#include "common/thread_pool.h"
#include "jobs/load_job.h"
#include "meta/namespace_table.h"

namespace lakecache {

class StoreSink final : public BlockSink {
 public:
  // All pointers must outlive the sink; `pool` may be null.
  StoreSink(const NamespaceTable* namespaces, BlockStore* blocks, ContentIndex* index,
            ThreadPool* pool)
      : namespaces_(namespaces), blocks_(blocks), index_(index), pool_(pool) {}

  std::vector<BlockOutcome> Load(const std::string& ns, std::span<const BlockSpec> blocks,
                                 bool check_only) override;
  Result<uint64_t> Free(const std::string& ns, std::span<const ObjectSpec> objects) override;

 private:
  BlockOutcome Fetch(Namespace& ns, const BlockRequest& request);

  const NamespaceTable* namespaces_;
  BlockStore* blocks_;
  ContentIndex* index_;
  ThreadPool* pool_;
};

}  // namespace lakecache
