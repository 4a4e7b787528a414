#include "membership/etcd_client.h"

#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/logging.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "membership/etcd_wire.h"
#include "rpc/grpc_util.h"

namespace lakecache {
namespace {

using etcd_wire::ConnectChannel;
using etcd_wire::FromProto;
using etcd_wire::PrefixEnd;

using Clock = std::chrono::steady_clock;

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

Result<std::string> ReadFile(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument(fmt::format("etcd: cannot read the {} {}", what, path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A member that cannot serve the call now: another one may.
bool TryAnother(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

std::string HostPort(const std::string& endpoint) {
  for (std::string_view scheme : {"http://", "https://"})
    if (StartsWith(endpoint, scheme)) return endpoint.substr(scheme.size());
  return endpoint;
}

}  // namespace

Result<std::vector<std::string>> ParseEtcdEndpoints(std::string_view flag, std::string_view list) {
  std::vector<std::string> endpoints;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string_view::npos) comma = list.size();
    std::string endpoint(list.substr(start, comma - start));
    start = comma + 1;
    std::string host_port = HostPort(endpoint);
    if (host_port.find('@') != std::string::npos) {
      // Never echoed back: it may hold a password.
      return Status::InvalidArgument(fmt::format(
          "{}: an endpoint holds user information (USER:PASSWORD@); give the user with "
          "--etcd-user and the password in --etcd-password-file or LAKECACHE_ETCD_PASSWORD",
          flag));
    }
    size_t colon = host_port.rfind(':');
    bool port_ok = colon != std::string::npos && colon + 1 < host_port.size() && colon > 0 &&
                   host_port.find_first_not_of("0123456789", colon + 1) == std::string::npos;
    if (!port_ok || host_port.find('/') != std::string::npos)
      return Status::InvalidArgument(
          fmt::format("{}: '{}' is not an etcd endpoint (HOST:PORT, http://HOST:PORT or "
                      "https://HOST:PORT)",
                      flag, endpoint));
    endpoints.push_back(std::move(endpoint));
  }
  bool tls = StartsWith(endpoints.front(), "https://");
  for (const auto& e : endpoints)
    if (StartsWith(e, "https://") != tls)
      return Status::InvalidArgument(
          fmt::format("{}: mixes https:// and plain endpoints; use one or the other", flag));
  return endpoints;
}

EtcdClient::EtcdClient(EtcdOptions options) : options_(std::move(options)) {}

EtcdClient::~EtcdClient() = default;

Result<std::shared_ptr<EtcdClient>> EtcdClient::Connect(EtcdOptions options) {
  if (options.endpoints.empty()) return Status::InvalidArgument("etcd: no endpoints");
  bool tls = StartsWith(options.endpoints.front(), "https://");
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (tls) {
    grpc::SslCredentialsOptions ssl;
    if (!options.ca_file.empty()) {
      LC_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadFile(options.ca_file, "CA certificate"));
    }
    if (!options.cert_file.empty()) {
      LC_ASSIGN_OR_RETURN(ssl.pem_cert_chain, ReadFile(options.cert_file, "client certificate"));
      LC_ASSIGN_OR_RETURN(ssl.pem_private_key, ReadFile(options.key_file, "client key"));
    }
    credentials = grpc::SslCredentials(ssl);
  } else if (!options.ca_file.empty() || !options.cert_file.empty()) {
    return Status::InvalidArgument(
        "etcd: certificates are given but the endpoints are not https://");
  }
  std::shared_ptr<EtcdClient> client(new EtcdClient(std::move(options)));
  // A restarted member is found again within a second. Each connection attempt gets a second (a
  // member that has just started, replaying its log on busy cores, may take longer than gRPC's
  // 100 ms of our own channels to finish the HTTP/2 handshake, and would never be reached). A
  // member that stops answering is found out by keep-alive pings (etcd allows one per 5 s).
  for (const auto& endpoint : client->options_.endpoints) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 1000);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 5000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 3000);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    client->channels_.push_back(grpc::CreateCustomChannel(HostPort(endpoint), credentials, args));
  }
  // One call proves an endpoint answers (and that the user may log in).
  auto probe = client->Get(client->options_.probe_key);
  if (!probe.ok()) return probe.status();
  return client;
}

EtcdClient::Target EtcdClient::Current() const {
  MutexLock lock(&mu_);
  return {channels_[current_], current_, options_.endpoints[current_]};
}

std::string EtcdClient::endpoint() const { return Current().endpoint; }

void EtcdClient::NextEndpoint(size_t index) {
  MutexLock lock(&mu_);
  if (current_ == index) current_ = (current_ + 1) % channels_.size();
}

Result<Secret> EtcdClient::Authenticate(const Target& target) const {
  etcdserverpb::AuthenticateRequest request;
  request.set_name(options_.user);
  request.set_password(options_.password.Reveal());
  etcdserverpb::AuthenticateResponse response;
  grpc::ClientContext context;
  rpc::SetTimeout(&context, options_.timeout);
  auto status =
      etcdserverpb::Auth::NewStub(target.channel)->Authenticate(&context, request, &response);
  if (!status.ok())
    return rpc::FromGrpcStatus(
        status, fmt::format("etcd {} (authenticating as {})", target.endpoint, options_.user));
  return Secret(response.token());
}

Status EtcdClient::Authorize(grpc::ClientContext* context, const Target& target) {
  if (options_.user.empty()) return Status::Ok();
  Secret token;
  {
    MutexLock lock(&mu_);
    token = token_;
  }
  if (token.empty()) {
    // Calls that find no token at once each log in; the last token kept serves the next ones.
    LC_ASSIGN_OR_RETURN(token, Authenticate(target));
    MutexLock lock(&mu_);
    token_ = token;
  }
  context->AddMetadata("token", token.Reveal());
  return Status::Ok();
}

bool EtcdClient::TokenExpired(const grpc::Status& status) {
  if (options_.user.empty() || status.error_code() != grpc::StatusCode::UNAUTHENTICATED)
    return false;
  MutexLock lock(&mu_);
  token_ = Secret();
  return true;
}

template <typename Call>
Status EtcdClient::Invoke(std::string_view what, Call&& call) {
  size_t tries = channels_.size() + 1;  // every endpoint, and one more after a token expired
  Status last;
  for (size_t i = 0; i < tries; ++i) {
    Target target = Current();
    if (!ConnectChannel(target.channel,
                        std::min(options_.timeout, std::chrono::milliseconds(1000)))) {
      last = Status::Unavailable(
          fmt::format("etcd {} ({}): cannot connect to it", target.endpoint, what));
      NextEndpoint(target.index);
      continue;
    }
    grpc::ClientContext context;
    rpc::SetTimeout(&context, options_.timeout);
    Status auth = Authorize(&context, target);
    if (!auth.ok()) {
      if (!auth.retryable()) return auth;
      last = auth;
      NextEndpoint(target.index);
      continue;
    }
    grpc::Status status = call(target.channel, &context);
    if (status.ok()) return Status::Ok();
    last = rpc::FromGrpcStatus(status, fmt::format("etcd {} ({})", target.endpoint, what));
    if (TokenExpired(status)) continue;
    if (!TryAnother(status)) return last;
    NextEndpoint(target.index);
  }
  return last;
}

Result<EtcdClient::Lease> EtcdClient::Grant(std::chrono::seconds ttl) {
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(ttl.count());
  etcdserverpb::LeaseGrantResponse response;
  Status status = Invoke("lease grant", [&](auto channel, grpc::ClientContext* context) {
    return etcdserverpb::Lease::NewStub(channel)->LeaseGrant(context, request, &response);
  });
  if (!status.ok()) return status;
  if (!response.error().empty())
    return Status::Unavailable(fmt::format("etcd: lease grant: {}", response.error()));
  return Lease{response.id(), std::chrono::seconds(response.ttl())};
}

Result<int64_t> EtcdClient::KeepAlive(int64_t lease) {
  etcdserverpb::LeaseKeepAliveRequest request;
  request.set_id(lease);
  etcdserverpb::LeaseKeepAliveResponse response;
  bool answered = false;
  Status status = Invoke("lease keep-alive", [&](auto channel, grpc::ClientContext* context) {
    auto stream = etcdserverpb::Lease::NewStub(channel)->LeaseKeepAlive(context);
    if (stream->Write(request)) answered = stream->Read(&response);
    stream->WritesDone();
    if (!answered) {
      context->TryCancel();
      auto finished = stream->Finish();
      return finished.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "no keep-alive answer")
                           : finished;
    }
    context->TryCancel();  // the stream stays open otherwise; the answer is in
    stream->Finish();
    return grpc::Status::OK;
  });
  if (!status.ok()) return status;
  if (response.ttl() <= 0)
    return Status::NotFound(fmt::format("etcd: lease {:x} has expired", lease));
  return response.ttl();
}

Status EtcdClient::Revoke(int64_t lease) {
  etcdserverpb::LeaseRevokeRequest request;
  request.set_id(lease);
  etcdserverpb::LeaseRevokeResponse response;
  return Invoke("lease revoke", [&](auto channel, grpc::ClientContext* context) {
    return etcdserverpb::Lease::NewStub(channel)->LeaseRevoke(context, request, &response);
  });
}

Result<int64_t> EtcdClient::Put(const std::string& key, const std::string& value, int64_t lease) {
  etcdserverpb::PutRequest request;
  request.set_key(key);
  request.set_value(value);
  request.set_lease(lease);
  etcdserverpb::PutResponse response;
  Status status = Invoke("put", [&](auto channel, grpc::ClientContext* context) {
    return etcdserverpb::KV::NewStub(channel)->Put(context, request, &response);
  });
  if (!status.ok()) return status;
  return response.header().revision();
}

namespace {

Result<EtcdRange> ToRange(const Status& status, const etcdserverpb::RangeResponse& response) {
  if (!status.ok()) return status;
  EtcdRange range;
  range.revision = response.header().revision();
  for (const auto& kv : response.kvs()) range.kvs.push_back(FromProto(kv));
  return range;
}

}  // namespace

Result<EtcdRange> EtcdClient::Get(const std::string& key) {
  etcdserverpb::RangeRequest request;
  request.set_key(key);
  etcdserverpb::RangeResponse response;
  Status status = Invoke("get", [&](auto channel, grpc::ClientContext* context) {
    return etcdserverpb::KV::NewStub(channel)->Range(context, request, &response);
  });
  return ToRange(status, response);
}

Result<EtcdRange> EtcdClient::GetPrefix(const std::string& prefix) {
  etcdserverpb::RangeRequest request;
  request.set_key(prefix);
  request.set_range_end(PrefixEnd(prefix));
  etcdserverpb::RangeResponse response;
  Status status = Invoke("get prefix", [&](auto channel, grpc::ClientContext* context) {
    return etcdserverpb::KV::NewStub(channel)->Range(context, request, &response);
  });
  return ToRange(status, response);
}

Result<bool> EtcdClient::CreateIfAbsent(const std::string& key, const std::string& value,
                                        int64_t lease) {
  etcdserverpb::TxnRequest request;
  auto* compare = request.add_compare();
  compare->set_key(key);
  compare->set_target(etcdserverpb::Compare::CREATE);
  compare->set_result(etcdserverpb::Compare::EQUAL);
  compare->set_create_revision(0);
  auto* put = request.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(value);
  put->set_lease(lease);
  etcdserverpb::TxnResponse response;
  Status status = Invoke("create", [&](auto channel, grpc::ClientContext* context) {
    return etcdserverpb::KV::NewStub(channel)->Txn(context, request, &response);
  });
  if (!status.ok()) return status;
  return response.succeeded();
}

Result<bool> EtcdClient::DeleteIfCreated(const std::string& key, int64_t create_revision) {
  etcdserverpb::TxnRequest request;
  auto* compare = request.add_compare();
  compare->set_key(key);
  compare->set_target(etcdserverpb::Compare::CREATE);
  compare->set_result(etcdserverpb::Compare::EQUAL);
  compare->set_create_revision(create_revision);
  request.add_success()->mutable_request_delete_range()->set_key(key);
  etcdserverpb::TxnResponse response;
  Status status = Invoke("delete", [&](auto channel, grpc::ClientContext* context) {
    return etcdserverpb::KV::NewStub(channel)->Txn(context, request, &response);
  });
  if (!status.ok()) return status;
  return response.succeeded();
}

Status EtcdClient::Delete(const std::string& key) {
  etcdserverpb::DeleteRangeRequest request;
  request.set_key(key);
  etcdserverpb::DeleteRangeResponse response;
  return Invoke("delete", [&](auto channel, grpc::ClientContext* context) {
    return etcdserverpb::KV::NewStub(channel)->DeleteRange(context, request, &response);
  });
}

}  // namespace lakecache
