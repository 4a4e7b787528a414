// The gRPC streams of a cluster mount to one worker: a block range read as raw ReadBlock chunks
// straight into the caller's buffer (gRPC's internal reader API: no message is parsed or copied
// twice), and a write's body sent in chunks. The bulk data path is BulkClient's. Thread-safe.
#pragma once

#include <chrono>
#include <span>

#include "cluster_client/cluster_view.h"
#include "common/result.h"
#include "common/units.h"
#include "ufs/object_store.h"

namespace lakecache {

// One worker, one block: at most this long, whatever the reader's deadline.
inline constexpr auto kMaxBlockAttemptTime = std::chrono::seconds(120);

// The point `deadline` names, as gRPC wants it (system clock), capped at `cap` from now.
std::chrono::system_clock::time_point GrpcDeadline(Clock::time_point deadline, Clock::duration cap);

// Reads the range `request` names from `worker` over gRPC's ReadBlock stream into `dst`.
Result<size_t> ReadStreamed(const ViewWorker& worker, const rpc::ReadBlockRequest& request,
                            std::span<char> dst, Clock::time_point deadline);

// Sends the body `data` of the write `header` names to `worker` (WriteBody), by `grpc_deadline`.
Result<rpc::WrittenObject> SendWriteBody(const ViewWorker& worker,
                                         const rpc::WriteBodyChunk& header,
                                         std::span<const char> data,
                                         std::chrono::system_clock::time_point grpc_deadline);

}  // namespace lakecache
