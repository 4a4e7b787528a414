// WorkerServiceImpl: a worker's calls (rpc::WorkerService): block ranges to mounts (ReadBlock,
// raw and zero-copy), where a block's cache file lies (LocateBlock), prefetches, the master's loads
// and frees, stats, and the writes mounts proxy through the worker. What it serves comes in
// WorkerServiceDeps, complete at construction (the objects named there must outlive it). Calls are
// served on gRPC's threads; thread-safe.
#pragma once

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "cache/block_store.h"
#include "common/result.h"
#include "common/thread_pool.h"
#include "meta/namespace_table.h"
#include "rpc/lakecache.grpc.pb.h"
#include "security/auth.h"
#include "worker/block_reader.h"
#include "worker/object_writes.h"

namespace lakecache {

class StoreSink;

struct WorkerServiceDeps {
  NamespaceTable* namespaces = nullptr;
  std::shared_ptr<BlockStore> blocks;
  BlockReader* reader = nullptr;  // serves ReadBlock
  ThreadPool* prefetch_pool = nullptr;
  ThreadPool* read_pool = nullptr;  // runs ReadBlock's lookups and fetches
  ThreadPool* load_pool = nullptr;  // fetches LoadBlocks batches
  // The worker's own part of Stats: its info, and its shared memory's numbers.
  std::function<void(rpc::WorkerInfo*)> fill_info;
  std::function<void(rpc::WorkerStats*)> fill_shm;
  uint64_t write_budget = 0;  // bytes of writes in flight (ObjectWrites)
  std::shared_ptr<const security::Authorizer> authorizer;  // null: no checks
};

class WorkerServiceImpl final
    : public rpc::WorkerService::WithRawCallbackMethod_ReadBlock<rpc::WorkerService::Service> {
 public:
  explicit WorkerServiceImpl(WorkerServiceDeps deps);
  ~WorkerServiceImpl() override;

  // ReadBlock is served raw and zero-copy: the reply is one message whose bytes are a gRPC slice
  // over the pinned block itself (the slice holds a BlockRef until gRPC has sent it), behind a
  // few bytes of protobuf framing, so the worker copies nothing; the kernel's send is the only
  // copy. The block is looked up (or fetched) on the read pool, never on gRPC's callback threads.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* ReadBlock(grpc::CallbackServerContext* ctx,
                                                        const grpc::ByteBuffer* request) override;

  grpc::Status LocateBlock(grpc::ServerContext* ctx, const rpc::LocateBlockRequest* request,
                           rpc::LocateBlockResponse* response) override;

  grpc::Status Prefetch(grpc::ServerContext* ctx, const rpc::PrefetchRequest* request,
                        rpc::PrefetchResponse* response) override;

  grpc::Status Stats(grpc::ServerContext* ctx, const rpc::WorkerStatsRequest*,
                     rpc::WorkerStats* response) override;

  // What Stats answers, and what the metrics registry reads at a scrape.
  void FillStats(rpc::WorkerStats* response);

  grpc::Status Free(grpc::ServerContext* ctx, const rpc::FreeRequest* request,
                    rpc::FreeResponse* response) override;

  grpc::Status LoadBlocks(grpc::ServerContext* ctx, const rpc::LoadBlocksRequest* request,
                          rpc::LoadBlocksResponse* response) override;

  // Writes of mounts (ObjectWrites); a refusal reaches the mount with its errno.
  grpc::Status WriteBody(grpc::ServerContext* ctx, grpc::ServerReader<rpc::WriteBodyChunk>* reader,
                         rpc::WrittenObject* response) override;

  grpc::Status WriteCall(grpc::ServerContext* ctx, const rpc::WriteCallRequest* request,
                         rpc::WriteCallResponse* response) override;

 private:
  // The serialized ReadBlockChunk messages answering a raw request (none for an empty range).
  Result<std::vector<grpc::ByteBuffer>> Serve(grpc::ByteBuffer* raw);

  static constexpr security::RoleSet kClient = security::Roles(security::Role::kClient);
  static constexpr security::RoleSet kMaster = security::Roles(security::Role::kMaster);
  static constexpr security::RoleSet kMasterOrAdmin =
      security::Roles(security::Role::kMaster, security::Role::kAdmin);
  // Prefetch: the master's loads, and a mount's order hint (a mount may read any block anyway).
  static constexpr security::RoleSet kMasterOrClient =
      security::Roles(security::Role::kMaster, security::Role::kClient);

  grpc::Status Allow(const grpc::ServerContextBase* ctx, security::RoleSet roles,
                     std::string_view method) const;

  ObjectWrites writes_;  // first: the constructor's initializer list builds it first
  std::shared_ptr<const security::Authorizer> authorizer_;  // null: no checks
  std::shared_ptr<BlockStore> blocks_;
  BlockReader* reader_;
  ThreadPool* pool_;
  ThreadPool* read_pool_;
  std::unique_ptr<StoreSink> sink_;  // the master's loads and frees
  std::function<void(rpc::WorkerInfo*)> fill_info_;
  std::function<void(rpc::WorkerStats*)> fill_shm_;
  std::atomic<uint64_t> blocks_located_{0};
};

}  // namespace lakecache
