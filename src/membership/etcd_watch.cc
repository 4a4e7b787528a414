#include <grpcpp/client_context.h>

#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "membership/etcd_client.h"
#include "membership/etcd_wire.h"
#include "rpc/grpc_util.h"

// EtcdWatch (etcd_client.h): the watch stream of a prefix, resumed after breaks and compactions.
namespace lakecache {
namespace {

using etcd_wire::ConnectChannel;
using etcd_wire::FromProto;
using etcd_wire::PrefixEnd;
using Clock = std::chrono::steady_clock;

}  // namespace

EtcdWatch::EtcdWatch(std::shared_ptr<EtcdClient> client, std::string prefix, int64_t revision,
                     UpdateFn on_update, ConnectedFn on_connected)
    : client_(std::move(client)),
      prefix_(std::move(prefix)),
      on_update_(std::move(on_update)),
      on_connected_(std::move(on_connected)),
      next_(revision + 1) {
  thread_ = std::thread([this] { Run(); });
}

EtcdWatch::~EtcdWatch() { Stop(); }

void EtcdWatch::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    if (live_ != nullptr) live_->TryCancel();
    cv_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
}

void EtcdWatch::Run() {
  auto backoff = std::chrono::milliseconds(100);
  for (;;) {
    EtcdClient::Target target = client_->Current();
    auto started = Clock::now();
    Status why = Stream(target);
    {
      MutexLock lock(&mu_);
      if (stopping_) return;
    }
    if (why.ok()) continue;  // compacted: listed again, resumes at once
    if (connected_) {
      connected_ = false;
      spdlog::warn("etcd watch on {}: {}; the last view stays until it resumes", prefix_,
                   why.message());
      on_connected_(false, why);
    }
    client_->NextEndpoint(target.index);
    if (Clock::now() - started > std::chrono::seconds(5)) backoff = std::chrono::milliseconds(100);
    MutexLock lock(&mu_);
    cv_.WaitUntil(&mu_, Clock::now() + backoff);
    if (stopping_) return;
    backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
  }
}

Status EtcdWatch::Stream(const EtcdClient::Target& target) {
  if (!ConnectChannel(target.channel,
                      std::min(client_->options().timeout, std::chrono::milliseconds(1000))))
    return Status::Unavailable(
        fmt::format("etcd {}: cannot connect to it (watch)", target.endpoint));
  grpc::ClientContext context;
  Status auth = client_->Authorize(&context, target);
  if (!auth.ok()) return auth;
  // A member that loses its leader (cut off from the others) cancels the stream rather than
  // keep it silent: the watch moves to another member.
  context.AddMetadata("hasleader", "true");
  auto stub = etcdserverpb::Watch::NewStub(target.channel);
  {
    MutexLock lock(&mu_);
    if (stopping_) return Status::Ok();
    live_ = &context;
  }
  auto stream = stub->Watch(&context);
  etcdserverpb::WatchRequest request;
  auto* create = request.mutable_create_request();
  create->set_key(prefix_);
  create->set_range_end(PrefixEnd(prefix_));
  create->set_start_revision(next_);
  std::optional<Status> ended;  // why the stream ended, when known before Finish
  if (stream->Write(request)) {
    etcdserverpb::WatchResponse response;
    while (!ended && stream->Read(&response)) {
      ended = Handle(response, target);
    }
  }
  {
    MutexLock lock(&mu_);
    live_ = nullptr;
  }
  context.TryCancel();
  grpc::Status finished = stream->Finish();
  if (ended) return *ended;
  client_->TokenExpired(finished);  // a new token next time
  if (finished.ok() || finished.error_code() == grpc::StatusCode::CANCELLED)
    return Status::Unavailable(fmt::format("etcd {}: the watch stream ended", target.endpoint));
  return rpc::FromGrpcStatus(finished, fmt::format("etcd {} (watch)", target.endpoint));
}

std::optional<Status> EtcdWatch::Handle(const etcdserverpb::WatchResponse& response,
                                        const EtcdClient::Target& target) {
  if (response.compact_revision() > 0) {
    // The revisions from next_ on are gone: list everything again and watch from there.
    auto range = client_->GetPrefix(prefix_);
    if (!range.ok()) return range.status();
    EtcdWatchUpdate update;
    update.snapshot = true;
    update.kvs = std::move(range->kvs);
    update.revision = range->revision;
    next_ = range->revision + 1;
    on_update_(update);
    return Status::Ok();
  } else if (response.canceled()) {
    return Status::Unavailable(fmt::format("etcd {}: the watch was cancelled: {}", target.endpoint,
                                           response.cancel_reason()));
  } else if (response.created()) {
    if (!connected_) {
      connected_ = true;
      spdlog::info("etcd watch on {}: resumed at revision {} on {}", prefix_, next_,
                   target.endpoint);
      on_connected_(true, Status::Ok());
    }
  } else {
    // A watch catching up sends its events in batches, each stamped with etcd's current
    // revision: the last event's revision is how far this one got (a resume from the header's
    // would skip the batches not yet sent).
    EtcdWatchUpdate update;
    update.revision = response.header().revision();
    for (const auto& event : response.events()) {
      EtcdEvent e;
      e.deleted = event.type() == mvccpb::Event::DELETE;
      e.kv = FromProto(event.kv());
      update.events.push_back(std::move(e));
    }
    if (!update.events.empty()) update.revision = update.events.back().kv.mod_revision;
    if (update.revision >= next_) next_ = update.revision + 1;
    if (!update.events.empty()) on_update_(update);
  }
  return std::nullopt;
}

}  // namespace lakecache
