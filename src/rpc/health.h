// The local health check of a daemon: the standard grpc.health.v1 Check (health.proto), served on
// a Unix socket (UnixServer: this uid and root only), so that an exec probe needs no network
// credentials and the daemon's TCP ports stay behind TLS and tokens. A daemon says whether it
// serves and why in a few words ("registered with master m:7400", "master m:7400 unreachable for
// 12 s"); the detail travels in the response's trailing metadata, beside the standard status.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/result.h"

namespace grpc {
class Service;
}  // namespace grpc

namespace lakecache::rpc {

struct HealthState {
  bool serving = false;
  std::string detail;
};

// A worker or mount whose master has not answered for this many of its intervals is not ready.
inline constexpr int kSilentIntervals = 3;

// Called on every Check, from gRPC's threads: must be thread-safe and quick.
using HealthProbe = std::function<HealthState()>;

std::unique_ptr<grpc::Service> MakeHealthService(HealthProbe probe);

class UnixServer;

// The health service alone on its own socket (a master's or worker's --health-socket).
class HealthServer {
 public:
  ~HealthServer();
  // Removes the socket: a probe sees the daemon go at once. Idempotent.
  void Shutdown();

 private:
  friend Result<std::unique_ptr<HealthServer>> ServeHealth(const std::string&, const std::string&,
                                                           HealthProbe);
  HealthServer() = default;
  std::unique_ptr<grpc::Service> service_;
  std::unique_ptr<UnixServer> server_;  // after service_: stopped first
};

// Serves `probe` on the Unix socket `path`; `who` names the daemon in refusals ("the worker").
// Errors name --health-socket.
Result<std::unique_ptr<HealthServer>> ServeHealth(const std::string& path, const std::string& who,
                                                  HealthProbe probe);

// Asks the daemon whose health socket is `socket_path`. An error when nothing answers there
// within `timeout` (kUnavailable, naming the socket); otherwise its state.
Result<HealthState> CheckHealth(const std::string& socket_path, std::chrono::milliseconds timeout);

}  // namespace lakecache::rpc
