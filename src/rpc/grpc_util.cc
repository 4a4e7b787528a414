#include "rpc/grpc_util.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/support/channel_arguments.h>
#include <grpcpp/support/server_interceptor.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>

#include "common/mutex.h"
#include "rpc/client_transport_check.h"
#include "rpc/keepalive.h"

namespace lakecache::rpc {
namespace {

struct CodePair {
  StatusCode ours;
  grpc::StatusCode grpc;
};

// One gRPC code for each of ours, so that every code crosses the wire unchanged (and with it
// whether the failure is retryable or the peer's).
constexpr CodePair kCodes[] = {
    {StatusCode::kOk, grpc::StatusCode::OK},
    {StatusCode::kInvalidArgument, grpc::StatusCode::INVALID_ARGUMENT},
    {StatusCode::kNotFound, grpc::StatusCode::NOT_FOUND},
    {StatusCode::kAccessDenied, grpc::StatusCode::PERMISSION_DENIED},
    {StatusCode::kUnavailable, grpc::StatusCode::UNAVAILABLE},
    {StatusCode::kDeadlineExceeded, grpc::StatusCode::DEADLINE_EXCEEDED},
    {StatusCode::kIoError, grpc::StatusCode::UNKNOWN},
    {StatusCode::kNoSpace, grpc::StatusCode::RESOURCE_EXHAUSTED},
    {StatusCode::kCorruption, grpc::StatusCode::DATA_LOSS},
    {StatusCode::kPreconditionFailed, grpc::StatusCode::FAILED_PRECONDITION},
    {StatusCode::kUnimplemented, grpc::StatusCode::UNIMPLEMENTED},
    {StatusCode::kInternal, grpc::StatusCode::INTERNAL},
    {StatusCode::kUnauthenticated, grpc::StatusCode::UNAUTHENTICATED},
    {StatusCode::kRefused, grpc::StatusCode::OUT_OF_RANGE},  // the errno in the details
};

// Codes our servers never send, which gRPC itself gives a call: a peer that went away mid-call
// (CANCELLED, ABORTED) failed like one that refused the connection.
constexpr CodePair kChannelCodes[] = {
    {StatusCode::kUnavailable, grpc::StatusCode::CANCELLED},
    {StatusCode::kUnavailable, grpc::StatusCode::ABORTED},
    {StatusCode::kInternal, grpc::StatusCode::ALREADY_EXISTS},
};

// gRPC gives one connection attempt (TCP, TLS and HTTP/2 handshakes) the minimum reconnect backoff
// and no more. A node busy with training, or a machine running tests, can take far longer than
// the reconnect backoff (100 ms to 500 ms) for a TLS handshake: every attempt then failed with
// "timed out before receiving SETTINGS frame", and the peer looked down while it was serving. A
// peer that is really gone refuses at once and is retried after the short backoff; only a peer
// that does not answer at all (a cut link) holds an attempt this long. Sanitized builds run up to
// ten times slower.
#ifdef LAKECACHE_TSAN
constexpr int kMinConnectAttemptMs = 10000;
#else
constexpr int kMinConnectAttemptMs = 3000;
#endif

}  // namespace

grpc::Status ToGrpcStatus(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  if (status.code() == StatusCode::kRefused) {
    return grpc::Status(grpc::StatusCode::OUT_OF_RANGE, status.message(),
                        std::to_string(status.posix_errno()));
  }
  for (const CodePair& pair : kCodes) {
    if (pair.ours == status.code()) return grpc::Status(pair.grpc, status.message());
  }
  return grpc::Status(grpc::StatusCode::INTERNAL, status.message());
}

Status FromGrpcStatus(const grpc::Status& status, std::string_view peer) {
  if (status.ok()) return Status::Ok();
  std::string message = std::string(peer) + ": " + status.error_message();
  if (status.error_code() == grpc::StatusCode::OUT_OF_RANGE) {
    int err = std::atoi(status.error_details().c_str());
    return Status::Refused(err > 0 ? err : EPERM, std::move(message));
  }
  for (const CodePair& pair : kCodes) {
    if (pair.grpc == status.error_code()) return Status(pair.ours, std::move(message));
  }
  for (const CodePair& pair : kChannelCodes) {
    if (pair.grpc == status.error_code()) return Status(pair.ours, std::move(message));
  }
  return Status::Internal(std::move(message));
}

std::shared_ptr<grpc::Channel> OpenChannel(const std::string& address) {
  return OpenChannel(address, grpc::InsecureChannelCredentials(), "");
}

std::shared_ptr<grpc::Channel> OpenChannel(const std::string& address,
                                           std::shared_ptr<grpc::ChannelCredentials> credentials,
                                           const std::string& peer_name) {
  grpc::ChannelArguments args;
  if (!peer_name.empty()) args.SetSslTargetNameOverride(peer_name);
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  // A restarted peer is found again within half a second, not after gRPC's default 20 s+.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, kMinConnectAttemptMs);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  // An idle connection is pinged (the servers accept it: AcceptKeepalivePings), so a peer that
  // vanished without a FIN is found within the interval plus the timeout.
  int interval = static_cast<int>(KeepaliveInterval().count());
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, interval);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, std::min(interval, 5000));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);  // keep watching an idle peer
  // Our own channel for each peer, not one shared by gRPC across the process: a dead worker's
  // connection state must not leak into another channel to the same address after it restarts.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, credentials, args);
}

void SetTimeout(grpc::ClientContext* context, std::chrono::milliseconds timeout) {
  context->set_deadline(std::chrono::system_clock::now() + timeout);
}

Status CheckListenAddress(std::string_view flag, const std::string& address) {
  size_t colon = address.rfind(':');
  auto bad = [&] {
    return Status::InvalidArgument(std::string(flag) + ": '" + address +
                                   "' is not HOST:PORT (e.g. 127.0.0.1:7000; port 0 picks a free "
                                   "one)");
  };
  if (colon == std::string::npos || colon == 0) return bad();
  std::string_view port(address.data() + colon + 1, address.size() - colon - 1);
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value > 65535) {
    return bad();
  }
  return Status::Ok();
}

namespace {

// Times one call: from its interceptor's creation (the call's arrival) to its status being sent.
class TimingInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit TimingInterceptor(metrics::Histogram histogram)
      : histogram_(histogram), start_(std::chrono::steady_clock::now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      histogram_.Observe(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
    }
    methods->Proceed();
  }

 private:
  metrics::Histogram histogram_;
  std::chrono::steady_clock::time_point start_;
};

class TimingFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit TimingFactory(RpcMetrics metrics) : metrics_(std::move(metrics)) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    // "/lakecache.WorkerService/ReadBlock" -> "ReadBlock": the service's own methods only.
    std::string_view method = info->method() != nullptr ? info->method() : "";
    method = method.substr(method.rfind('/') + 1);
    MutexLock lock(&mu_);
    auto it = cells_.find(method);
    if (it == cells_.end()) {
      it = cells_
               .emplace(std::string(method),
                        metrics_.registry->GetHistogram(metrics_.name, kRpcDurationHelp,
                                                        {{"method", std::string(method)}}))
               .first;
    }
    return new TimingInterceptor(it->second);
  }

 private:
  const RpcMetrics metrics_;
  Mutex mu_;
  std::map<std::string, metrics::Histogram, std::less<>> cells_ GUARDED_BY(mu_);
};

// Why `address` could not be bound, as bind(2) says it now: gRPC's own error is logged at debug
// level only (rpc/grpc_log.h).
std::string BindFailure(const std::string& address) {
  std::string host = address.substr(0, address.rfind(':'));
  std::string port = address.substr(address.rfind(':') + 1);
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found) != 0) {
    return "not an address of this host";
  }
  int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  int err = ::bind(fd, found->ai_addr, found->ai_addrlen) == 0 ? 0 : errno;
  ::close(fd);
  ::freeaddrinfo(found);
  if (err == EADDRINUSE) return "address in use: another process listens there";
  if (err == EADDRNOTAVAIL) return "not an address of this host";
  if (err != 0) return std::strerror(err);
  return "address in use, or not an address of this host";
}

}  // namespace

Result<StartedServer> StartServer(const std::string& address,
                                  const std::vector<grpc::Service*>& services,
                                  std::shared_ptr<grpc::ServerCredentials> credentials,
                                  const RpcMetrics& rpc_metrics) {
  LC_RETURN_IF_ERROR(CheckListenAddress("listen address", address));
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(
      address, credentials != nullptr ? credentials : grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  // A port in TIME_WAIT after a restart is fine to take again; a port another process listens on
  // is not (gRPC sets SO_REUSEPORT by default, which would let two servers share it).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  AcceptKeepalivePings(builder);
  // A client of the other transport is named in the log (gRPC's own line names none).
  AddClientTransportCheck(builder,
                          credentials != nullptr ? Transport::kTls : Transport::kPlainText);
  for (grpc::Service* service : services) builder.RegisterService(service);
  if (rpc_metrics.registry != nullptr) {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
    creators.push_back(std::make_unique<TimingFactory>(rpc_metrics));
    builder.experimental().SetInterceptorCreators(std::move(creators));
  }
  StartedServer started;
  started.server = builder.BuildAndStart();
  if (started.server == nullptr || port == 0) {
    return Status::Unavailable("cannot listen on " + address + " (" + BindFailure(address) + ")");
  }
  started.address = address.substr(0, address.rfind(':')) + ":" + std::to_string(port);
  return started;
}

const std::string& HostId() {
  static const std::string id = [] {
    if (const char* named = std::getenv("LAKECACHE_HOST_ID"); named != nullptr && *named != '\0') {
      return std::string(named);
    }
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string line;
    std::getline(in, line);
    return line;
  }();
  return id;
}

}  // namespace lakecache::rpc
