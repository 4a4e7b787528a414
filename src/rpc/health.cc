#include "rpc/health.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "rpc/grpc_util.h"
#include "rpc/health.grpc.pb.h"
#include "rpc/unix_server.h"

namespace lakecache::rpc {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

constexpr char kDetailKey[] = "lakecache-health-detail";

class HealthService final : public Health::Service {
 public:
  explicit HealthService(HealthProbe probe) : probe_(std::move(probe)) {}

  grpc::Status Check(grpc::ServerContext* context, const HealthCheckRequest* request,
                     HealthCheckResponse* response) override {
    // The daemon serves one thing: the empty name (the whole server) or its own.
    if (!request->service().empty() && request->service() != "lakecache") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service '" + request->service() +
                                                           "' (ask for '' or 'lakecache')");
    }
    HealthState state = probe_();
    response->set_status(state.serving ? HealthCheckResponse::SERVING
                                       : HealthCheckResponse::NOT_SERVING);
    if (!state.detail.empty()) context->AddTrailingMetadata(kDetailKey, state.detail);
    return grpc::Status::OK;
  }

 private:
  HealthProbe probe_;
};

}  // namespace

std::unique_ptr<grpc::Service> MakeHealthService(HealthProbe probe) {
  return std::make_unique<HealthService>(std::move(probe));
}

HealthServer::~HealthServer() { Shutdown(); }

void HealthServer::Shutdown() {
  if (server_ != nullptr) server_->Shutdown();
}

Result<std::unique_ptr<HealthServer>> ServeHealth(const std::string& path, const std::string& who,
                                                  HealthProbe probe) {
  std::unique_ptr<HealthServer> health(new HealthServer());
  health->service_ = MakeHealthService(std::move(probe));
  UnixServerOptions socket;
  socket.path = path;
  socket.what = "ask " + who + "'s health";
  Result<std::unique_ptr<UnixServer>> server =
      StartUnixServer(std::move(socket), {health->service_.get()});
  if (!server.ok()) return server.status().WithContext("--health-socket");
  health->server_ = std::move(*server);
  return health;
}

Result<HealthState> CheckHealth(const std::string& socket_path, std::chrono::milliseconds timeout) {
  struct stat st;
  if (::stat(socket_path.c_str(), &st) != 0) {
    return Status::Unavailable("no health socket at " + socket_path + ": " + std::strerror(errno) +
                               " (is the daemon running with --health-socket " + socket_path +
                               "?)");
  }
  auto stub = Health::NewStub(OpenChannel("unix:" + socket_path));
  grpc::ClientContext context;
  SetTimeout(&context, timeout);
  HealthCheckResponse response;
  grpc::Status status = stub->Check(&context, HealthCheckRequest(), &response);
  if (!status.ok()) {
    return FromGrpcStatus(status, "the daemon on " + socket_path);
  }
  HealthState state;
  state.serving = response.status() == HealthCheckResponse::SERVING;
  const auto& trailers = context.GetServerTrailingMetadata();
  if (auto it = trailers.find(kDetailKey); it != trailers.end()) {
    state.detail.assign(it->second.data(), it->second.size());
  }
  return state;
}

}  // namespace lakecache::rpc
