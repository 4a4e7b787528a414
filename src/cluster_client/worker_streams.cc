#include "cluster_client/worker_streams.h"

#include <grpcpp/channel.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/sync_stream.h>

#include <algorithm>

#include "rpc/block_chunk.h"
#include "rpc/grpc_util.h"

namespace lakecache {
namespace {

const grpc::internal::RpcMethod& ReadBlockMethod() {
  static const grpc::internal::RpcMethod method("/lakecache.rpc.WorkerService/ReadBlock",
                                                grpc::internal::RpcMethod::SERVER_STREAMING);
  return method;
}

}  // namespace

std::chrono::system_clock::time_point GrpcDeadline(Clock::time_point deadline,
                                                   Clock::duration cap) {
  Clock::time_point now = Clock::now();
  Clock::duration left = deadline == Clock::time_point::max() ? cap : deadline - now;
  left = std::clamp<Clock::duration>(left, Clock::duration::zero(), cap);
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(left);
}

Result<size_t> ReadStreamed(const ViewWorker& worker, const rpc::ReadBlockRequest& request,
                            std::span<char> dst, Clock::time_point deadline) {
  grpc::ClientContext ctx;
  ctx.set_deadline(GrpcDeadline(deadline, kMaxBlockAttemptTime));
  // The chunks arrive as raw gRPC buffers and are copied once, straight into dst.
  std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
      grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(
          worker.peer->channel.get(), ReadBlockMethod(), &ctx, request));
  grpc::ByteBuffer chunk;
  size_t got = 0;
  Status copied;
  while (reader->Read(&chunk)) {
    if (copied.ok()) copied = rpc::CopyChunk(chunk, dst, &got);
  }
  grpc::Status st = reader->Finish();
  if (!st.ok()) return rpc::FromGrpcStatus(st, "worker " + worker.address);
  if (!copied.ok()) return copied.WithContext("worker " + worker.address);
  return got;
}

Result<rpc::WrittenObject> SendWriteBody(const ViewWorker& worker,
                                         const rpc::WriteBodyChunk& header,
                                         std::span<const char> data,
                                         std::chrono::system_clock::time_point grpc_deadline) {
  constexpr size_t kChunk = 1 << 20;
  rpc::WrittenObject written;
  grpc::ClientContext ctx;
  ctx.set_deadline(grpc_deadline);
  std::unique_ptr<grpc::ClientWriter<rpc::WriteBodyChunk>> writer(
      worker.peer->stub->WriteBody(&ctx, &written));
  rpc::WriteBodyChunk chunk = header;
  chunk.set_size(data.size());
  size_t at = 0;
  do {
    size_t n = std::min(kChunk, data.size() - at);
    chunk.set_data(data.data() + at, n);
    at += n;
    if (!writer->Write(chunk)) break;  // the worker ended the call: Finish says why
    chunk.Clear();
  } while (at < data.size());
  writer->WritesDone();
  LC_RETURN_IF_ERROR(rpc::FromGrpcStatus(writer->Finish(), "worker " + worker.address));
  return written;
}

}  // namespace lakecache
