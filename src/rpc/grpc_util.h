// gRPC glue shared by the master, the workers and cluster clients: Status <-> gRPC status codes,
// channels with our settings, and starting a server on HOST:PORT.
//
// Codes: every StatusCode has a gRPC code of its own, so a Status crosses the wire with its code
// (and so with what it means: Status::retryable, Status::peer_failed): kNotFound <-> NOT_FOUND,
// kAccessDenied <-> PERMISSION_DENIED, kUnavailable <-> UNAVAILABLE, kPreconditionFailed <->
// FAILED_PRECONDITION, kDeadlineExceeded <-> DEADLINE_EXCEEDED, kInvalidArgument <->
// INVALID_ARGUMENT, kNoSpace <-> RESOURCE_EXHAUSTED, kUnimplemented <-> UNIMPLEMENTED, kIoError <->
// UNKNOWN, kCorruption <-> DATA_LOSS, kInternal <-> INTERNAL. A call that never reached its peer
// (connection refused, reset) is UNAVAILABLE, and one whose peer went away mid-call (CANCELLED,
// ABORTED) becomes kUnavailable too: both are the peer's failure.
#pragma once

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/support/status.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/metrics.h"
#include "common/result.h"

namespace lakecache::rpc {

// The largest message either way, on every channel and server of ours (a ReadBlock chunk is 16
// MiB).
inline constexpr int kMaxMessageBytes = 64 << 20;

grpc::Status ToGrpcStatus(const Status& status);

// `peer` names the other side in the message: "worker 127.0.0.1:7001", "master 10.0.0.1:7000".
Status FromGrpcStatus(const grpc::Status& status, std::string_view peer);

// A channel that reconnects quickly after its peer restarts and accepts messages up to 64 MiB,
// with `credentials` (security/auth.h: TLS and a role's token) verifying the peer's certificate
// against `peer_name` instead of the address dialled (empty: the address).
std::shared_ptr<grpc::Channel> OpenChannel(const std::string& address,
                                           std::shared_ptr<grpc::ChannelCredentials> credentials,
                                           const std::string& peer_name);
// The same in plain text: a loopback cluster without credentials, or a Unix socket.
std::shared_ptr<grpc::Channel> OpenChannel(const std::string& address);

// Sets the call's deadline `timeout` from now.
void SetTimeout(grpc::ClientContext* context, std::chrono::milliseconds timeout);

// "HOST:PORT" with a numeric port (0: any free port); an error naming `flag` otherwise.
Status CheckListenAddress(std::string_view flag, const std::string& address);

struct StartedServer {
  std::unique_ptr<grpc::Server> server;
  std::string address;  // HOST:PORT actually bound (the chosen port when 0 was asked)
};

// Where a server's calls are timed: `name`{method} histograms in `registry` (null: not timed),
// e.g. lakecache_worker_rpc_duration_seconds{method="ReadBlock"}: from the call's arrival to its
// status being sent.
// The help text of those histograms (one family per name must have one).
inline constexpr char kRpcDurationHelp[] =
    "Calls served (gRPC methods; BulkRead: the bulk data path's requests): duration by method";
struct RpcMetrics {
  metrics::Registry* registry = nullptr;
  std::string name;
};

// Builds and starts a server for `services` on `address` (TLS with `credentials`, else plain
// text); fails with a clear message when the address cannot be bound (in use, not local).
Result<StartedServer> StartServer(const std::string& address,
                                  const std::vector<grpc::Service*>& services,
                                  std::shared_ptr<grpc::ServerCredentials> credentials = nullptr,
                                  const RpcMetrics& rpc_metrics = {});

// This host's identity for short-circuit reads and for where a block's replicas are: the running
// kernel's boot id (the same for every process and container on one kernel), or LAKECACHE_HOST_ID
// when set (hosts simulated as network namespaces of one kernel); empty if unreadable.
const std::string& HostId();

}  // namespace lakecache::rpc
