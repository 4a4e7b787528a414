#include "worker/worker_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "admin/convert.h"
#include "admin/stats_metrics.h"
#include "cache/block_key.h"
#include "fetch/block_fetch.h"
#include "jobs/store_sink.h"
#include "rpc/block_chunk.h"
#include "rpc/grpc_util.h"

namespace lakecache {
namespace {

constexpr uint64_t kChunkBytes = 16 << 20;  // one ReadBlockChunk message at most

// The reactor of one ReadBlock call: sends its messages in order, then finishes.
class BlockWriter final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  void Finish(Result<std::vector<grpc::ByteBuffer>> reply) {
    if (!reply.ok()) {
      ServerWriteReactor::Finish(rpc::ToGrpcStatus(reply.status()));
      return;
    }
    messages_ = std::move(*reply);
    WriteNext();
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {  // the client went away
      ServerWriteReactor::Finish(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
      return;
    }
    WriteNext();
  }
  void OnDone() override { delete this; }
  void Refuse(const grpc::Status& status) { ServerWriteReactor::Finish(status); }

 private:
  void WriteNext() {
    if (next_ == messages_.size()) {
      ServerWriteReactor::Finish(grpc::Status::OK);  // also an empty range
    } else if (next_ + 1 == messages_.size()) {
      StartWriteAndFinish(&messages_[next_++], grpc::WriteOptions(), grpc::Status::OK);
    } else {
      StartWrite(&messages_[next_++]);
    }
  }

  std::vector<grpc::ByteBuffer> messages_;  // alive until OnDone
  size_t next_ = 0;
};

}  // namespace

WorkerServiceImpl::WorkerServiceImpl(WorkerServiceDeps deps)
    : writes_(deps.namespaces, deps.write_budget),
      authorizer_(std::move(deps.authorizer)),
      blocks_(std::move(deps.blocks)),
      reader_(deps.reader),
      pool_(deps.prefetch_pool),
      read_pool_(deps.read_pool),
      sink_(std::make_unique<StoreSink>(deps.namespaces, blocks_.get(), &deps.reader->index(),
                                        deps.load_pool)),
      fill_info_(std::move(deps.fill_info)),
      fill_shm_(std::move(deps.fill_shm)) {}

WorkerServiceImpl::~WorkerServiceImpl() = default;

// ReadBlock is served raw and zero-copy (see the header): the block is looked up (or fetched) on
// the read pool, never on gRPC's callback threads.
grpc::ServerWriteReactor<grpc::ByteBuffer>* WorkerServiceImpl::ReadBlock(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request) {
  auto* writer = new BlockWriter();
  if (grpc::Status denied = Allow(ctx, kClient, "WorkerService/ReadBlock"); !denied.ok()) {
    writer->Refuse(denied);
    return writer;
  }
  auto raw = std::make_shared<grpc::ByteBuffer>(*request);  // refcounted slices, no copy
  read_pool_->Post([this, writer, raw] { writer->Finish(Serve(raw.get())); });
  return writer;
}

grpc::Status WorkerServiceImpl::LocateBlock(grpc::ServerContext* ctx,
                                            const rpc::LocateBlockRequest* request,
                                            rpc::LocateBlockResponse* response) {
  if (grpc::Status denied = Allow(ctx, kClient, "WorkerService/LocateBlock"); !denied.ok())
    return denied;
  BlockKey key{{request->content_hi(), request->content_lo()}, request->index()};
  if (request->has_block()) {
    Namespace* ns = nullptr;
    BlockRequest req;
    if (Status s = reader_->Resolve(request->block(), &ns, &req); !s.ok()) {
      return rpc::ToGrpcStatus(s);
    }
    key = req.key;
  }
  std::string path = blocks_->FilePath(key);
  if (!path.empty()) {
    blocks_located_.fetch_add(1, std::memory_order_relaxed);
    response->set_path(std::move(path));
  }
  return grpc::Status::OK;
}

grpc::Status WorkerServiceImpl::Prefetch(grpc::ServerContext* ctx,
                                         const rpc::PrefetchRequest* request,
                                         rpc::PrefetchResponse* response) {
  if (grpc::Status denied = Allow(ctx, kMasterOrClient, "WorkerService/Prefetch"); !denied.ok())
    return denied;
  uint32_t started = 0, cached = 0;
  for (const rpc::BlockId& id : request->blocks()) {
    Namespace* ns = nullptr;
    BlockRequest req;
    if (Status s = reader_->Resolve(id, &ns, &req); !s.ok()) return rpc::ToGrpcStatus(s);
    if (blocks_->Contains(req.key)) {
      ++cached;
      continue;
    }
    ++started;
    // A preload is a request to cache: Get admits the block to the tiers (unlike read-ahead).
    pool_->Post([blocks = blocks_, store = ns->store, req] {
      Result<BlockRef> got = blocks->Get(req, [&store, &blocks](const BlockRequest& r) {
        return FetchBlock(*store, r, blocks->Allocator());
      });
      if (!got.ok()) spdlog::warn("prefetch of {}: {}", req.object_key, got.status().ToString());
    });
  }
  response->set_started(started);
  response->set_cached(cached);
  return grpc::Status::OK;
}

grpc::Status WorkerServiceImpl::Stats(grpc::ServerContext* ctx, const rpc::WorkerStatsRequest*,
                                      rpc::WorkerStats* response) {
  if (grpc::Status denied = Allow(ctx, kMasterOrAdmin, "WorkerService/Stats"); !denied.ok())
    return denied;
  FillStats(response);
  return grpc::Status::OK;
}

// What Stats answers, and what the metrics registry reads at a scrape.
void WorkerServiceImpl::FillStats(rpc::WorkerStats* response) {
  fill_info_(response->mutable_worker());
  rpc::FillStats(blocks_->Stats(), reader_->index().CachedBytes(*blocks_), response);
  response->set_blocks_served(reader_->blocks_served());
  response->set_bytes_served(reader_->bytes_served());
  response->set_blocks_located(blocks_located_.load(std::memory_order_relaxed));
  fill_shm_(response);
}

grpc::Status WorkerServiceImpl::Free(grpc::ServerContext* ctx, const rpc::FreeRequest* request,
                                     rpc::FreeResponse* response) {
  if (grpc::Status denied = Allow(ctx, kMaster, "WorkerService/Free"); !denied.ok()) return denied;
  uint64_t freed = 0;
  for (const rpc::ObjectVersion& v : request->objects()) {
    rpc::BlockId id = rpc::ToBlockId(v);
    Namespace* ns = nullptr;
    BlockRequest req;
    if (Status s = reader_->Resolve(id, &ns, &req); !s.ok()) return rpc::ToGrpcStatus(s);
    ObjectSpec object = rpc::FromObjectVersion(v);
    auto got = sink_->Free(v.ns(), std::span<const ObjectSpec>(&object, 1));
    if (!got.ok()) return rpc::ToGrpcStatus(got.status());
    freed += *got;
  }
  response->set_blocks_freed(freed);
  return grpc::Status::OK;
}

grpc::Status WorkerServiceImpl::LoadBlocks(grpc::ServerContext* ctx,
                                           const rpc::LoadBlocksRequest* request,
                                           rpc::LoadBlocksResponse* response) {
  if (grpc::Status denied = Allow(ctx, kMaster, "WorkerService/LoadBlocks"); !denied.ok())
    return denied;
  // Batches name one namespace in practice; group runs of the same one for the sink.
  std::vector<BlockSpec> run;
  std::string run_ns;
  auto flush = [&] {
    for (const BlockOutcome& o : sink_->Load(run_ns, run, request->check_only())) {
      *response->add_results() = rpc::ToProto(o);
    }
    run.clear();
  };
  for (const rpc::BlockId& id : request->blocks()) {
    Namespace* ns = nullptr;
    BlockRequest req;
    if (Status s = reader_->Resolve(id, &ns, &req); !s.ok()) return rpc::ToGrpcStatus(s);
    if (!run.empty() && id.ns() != run_ns) flush();
    run_ns = id.ns();
    run.push_back({ObjectSpec{id.key(), id.etag(), id.object_size(), id.block_size()}, id.index()});
  }
  if (!run.empty()) flush();
  return grpc::Status::OK;
}

// Writes of mounts (ObjectWrites); a refusal reaches the mount with its errno.
grpc::Status WorkerServiceImpl::WriteBody(grpc::ServerContext* ctx,
                                          grpc::ServerReader<rpc::WriteBodyChunk>* reader,
                                          rpc::WrittenObject* response) {
  if (grpc::Status denied = Allow(ctx, kClient, "WorkerService/WriteBody"); !denied.ok())
    return denied;
  rpc::WriteBodyChunk first;
  if (!reader->Read(&first)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "a write with no body");
  }
  Result<rpc::WrittenObject> written =
      writes_.Body(first, [reader](rpc::WriteBodyChunk* next) { return reader->Read(next); });
  if (!written.ok()) return rpc::ToGrpcStatus(written.status());
  *response = std::move(*written);
  return grpc::Status::OK;
}

grpc::Status WorkerServiceImpl::WriteCall(grpc::ServerContext* ctx,
                                          const rpc::WriteCallRequest* request,
                                          rpc::WriteCallResponse* response) {
  if (grpc::Status denied = Allow(ctx, kClient, "WorkerService/WriteCall"); !denied.ok())
    return denied;
  Result<rpc::WriteCallResponse> done = writes_.Call(*request);
  if (!done.ok()) return rpc::ToGrpcStatus(done.status());
  *response = std::move(*done);
  return grpc::Status::OK;
}

// The serialized ReadBlockChunk messages answering a raw request (none for an empty range).
Result<std::vector<grpc::ByteBuffer>> WorkerServiceImpl::Serve(grpc::ByteBuffer* raw) {
  rpc::ReadBlockRequest request;
  if (!grpc::SerializationTraits<rpc::ReadBlockRequest>::Deserialize(raw, &request).ok()) {
    return Status::InvalidArgument("malformed ReadBlock request");
  }
  LC_ASSIGN_OR_RETURN(BlockReader::Range range,
                      reader_->Read(request.block(), request.offset(), request.length()));
  std::vector<grpc::ByteBuffer> messages;
  for (uint64_t done = 0; done < range.length; done += kChunkBytes) {
    messages.push_back(rpc::ChunkMessage(range.owner, range.data + done,
                                         std::min<uint64_t>(kChunkBytes, range.length - done)));
  }
  return messages;
}

grpc::Status WorkerServiceImpl::Allow(const grpc::ServerContextBase* ctx, security::RoleSet roles,
                                      std::string_view method) const {
  return security::Authorize(authorizer_.get(), ctx, roles, method);
}
}  // namespace lakecache
