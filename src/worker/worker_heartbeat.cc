#include <spdlog/spdlog.h>

#include <algorithm>

#include "master_client/master_set.h"
#include "rpc/grpc_util.h"
#include "rpc/lakecache.grpc.pb.h"
#include "worker/holder_book.h"
#include "worker/peer_reads.h"
#include "worker/worker_server.h"

// The worker's registration with the masters and its heartbeats.
namespace lakecache {
namespace {

// A call to the master that, while the master is unreachable, waits for it to come back (up to one
// heartbeat interval) instead of failing at once: a restarted master hears from every worker as
// soon as it listens.
void WaitForMaster(grpc::ClientContext* ctx, std::chrono::milliseconds interval) {
  ctx->set_wait_for_ready(true);
  rpc::SetTimeout(ctx,
                  std::clamp<std::chrono::milliseconds>(interval, std::chrono::milliseconds(100),
                                                        WorkerServer::kMasterCallTimeout));
}

}  // namespace

void WorkerServer::HeartbeatLoop() {
  // With credentials the worker shows the master its own certificate: the proof of its id. Any
  // master takes registrations and heartbeats (with etcd they all share the membership): the
  // worker keeps to one until it stops answering, then moves to the next.
  MasterSet masters(MasterList(), [this](const std::string& address) {
    return credentials_ == nullptr ? rpc::OpenChannel(address)
                                   : credentials_->Channel(address, security::kMasterTlsName,
                                                           identity_.key_path, identity_.cert_path);
  });
  auto interval =
      std::chrono::duration_cast<std::chrono::milliseconds>(config_.cluster.heartbeat_interval);
  bool warned = false;  // one warning per stretch of failures
  interval_ms_ = interval.count();
  for (;;) {
    grpc::Status status;
    MasterSet::Master master = masters.Current();
    grpc::ClientContext ctx;
    if (!registered_) {
      status = RegisterWith(master.address, master.channel, &ctx, &interval);
    } else {
      bool known = true;
      status = HeartbeatTo(master.address, master.channel, &ctx, interval, &known);
      if (!known) continue;  // the master restarted or dropped us: register again at once
    }
    if (status.ok()) {
      last_answer_ms_ = SteadyNowMs();
      MutexLock lock(&mu_);
      master_ = master.address;
    }
    bool other = !status.ok() && masters.Failed(master, status, ctx) &&
                 masters.Current().address != master.address;
    if (!status.ok() && !warned) {
      spdlog::warn("master {} unreachable: {} ({})", master.address, status.error_message(),
                   other ? "trying master " + masters.Current().address
                         : "retrying every " + std::to_string(interval.count()) + " ms");
      warned = true;
    } else if (status.ok() && warned) {
      spdlog::info("master {} reachable again", master.address);
      warned = false;
    }
    if (credentials_ != nullptr && std::chrono::system_clock::now() >= renew_at_) {
      Status renewed = ObtainCertificate(std::chrono::system_clock::now() + interval);
      if (!renewed.ok())
        spdlog::warn("{} (retrying every {} ms)", renewed.message(), interval.count());
    }
    // A call that waited its whole interval for the master has done this round's waiting; another
    // master is asked at once.
    bool waited = status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED || other;
    auto until = std::chrono::steady_clock::now() + (waited ? Duration::zero() : interval);
    MutexLock lock(&mu_);
    while (!stopping_ && stop_cv_.WaitUntil(&mu_, until)) continue;
    if (stopping_) return;
  }
}

grpc::Status WorkerServer::RegisterWith(const std::string& master,
                                        const std::shared_ptr<grpc::Channel>& channel,
                                        grpc::ClientContext* ctx,
                                        std::chrono::milliseconds* interval) {
  rpc::RegisterRequest req;
  rpc::RegisterResponse resp;
  FillInfo(req.mutable_worker());
  // Longer than a heartbeat: with etcd a registration writes the worker's record under a new
  // lease, several calls to etcd.
  WaitForMaster(ctx, std::max<std::chrono::milliseconds>(*interval, std::chrono::seconds(5)));
  grpc::Status status = rpc::MasterService::NewStub(channel)->Register(ctx, req, &resp);
  if (!status.ok()) return status;
  if (authorizer_ != nullptr) {
    authorizer_->Update(resp.tokens());
    SaveDigests(resp.tokens());
  }
  last_answer_ms_ = SteadyNowMs();  // before registered_: Health never sees a silent master
  registered_ = true;
  if (resp.heartbeat_interval_ms() > 0) {
    *interval = std::chrono::milliseconds(resp.heartbeat_interval_ms());
    interval_ms_ = interval->count();
  }
  spdlog::info("worker {} registered with master {} (epoch {})", id_, master, resp.epoch());
  RefreshPeers(channel, resp.epoch(), *interval);
  return status;
}

void WorkerServer::RefreshPeers(const std::shared_ptr<grpc::Channel>& channel, uint64_t epoch,
                                std::chrono::milliseconds interval) {
  if (peers_ == nullptr || epoch == peers_->epoch()) return;
  grpc::ClientContext ctx;
  WaitForMaster(&ctx, interval);
  rpc::ClusterViewRequest req;
  rpc::ClusterView view;
  grpc::Status status = rpc::MasterService::NewStub(channel)->GetClusterView(&ctx, req, &view);
  if (!status.ok()) {
    // Once: a master that refuses it (one older than replicas) refuses it at every heartbeat.
    const bool refused = status.error_code() == grpc::StatusCode::PERMISSION_DENIED ||
                         status.error_code() == grpc::StatusCode::UNIMPLEMENTED;
    if (!refused) {
      spdlog::debug("worker {}: the cluster's view: {}", id_, status.error_message());
    } else if (!view_refused_logged_.exchange(true)) {
      spdlog::warn(
          "worker {}: the master did not give the cluster's view: {}; this worker reads the "
          "replicas it keeps from the object store until it does",
          id_, status.error_message());
    }
    return;  // asked again at the next heartbeat
  }
  // A worker that left holds nothing any more: the askers of its blocks go elsewhere.
  for (const std::string& left : peers_->SetView(view)) holders_->DropWorker(left);
}

grpc::Status WorkerServer::HeartbeatTo(const std::string& master,
                                       const std::shared_ptr<grpc::Channel>& channel,
                                       grpc::ClientContext* ctx, std::chrono::milliseconds interval,
                                       bool* known) {
  rpc::HeartbeatRequest req;
  rpc::HeartbeatResponse resp;
  FillInfo(req.mutable_worker());
  WaitForMaster(ctx, interval);
  grpc::Status status = rpc::MasterService::NewStub(channel)->Heartbeat(ctx, req, &resp);
  if (status.ok() && authorizer_ != nullptr) authorizer_->Update(resp.tokens());
  if (status.ok() && !resp.registered()) {
    registered_ = false;
    *known = false;
    spdlog::info("master {} does not know worker {}: registering again", master, id_);
  }
  if (status.ok() && resp.registered()) RefreshPeers(channel, resp.epoch(), interval);
  return status;
}

}  // namespace lakecache
