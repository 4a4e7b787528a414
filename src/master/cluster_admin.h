// ClusterAdmin: the master's side of the admin commands (AdminBackend). Loads go to the
// workers that own the blocks: each block to the first live worker in rendezvous order (the one
// every reader asks first), the next ones with --replica; a batch is split by owner and each part
// sent with one LoadBlocks call, at most kMaxBatchesPerWorker calls in flight per worker. A worker
// that fails a call is left out for the rest of the job and its blocks go to the next worker in
// order; the job is told (TakeLost) so it checks the blocks that worker held. Stat asks every live
// worker; free tells every live worker. Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "admin/admin_service.h"
#include "common/mutex.h"
#include "meta/namespace_table.h"
#include "security/auth.h"

namespace lakecache {

class WorkerRegistry;

// With several masters (etcd): loads and frees run on the leader alone (`leader_only`:
// MasterServer::LeaderOnly), and `pins` keeps the pins where another leader finds them. Without:
// both empty.
struct ClusterAdminLeader {
  std::function<grpc::Status(grpc::ServerContext*)> leader_only;
  std::function<void(const std::string& ns, const std::string& path, bool pinned, bool recursive)>
      pins;
};

class ClusterAdmin final : public AdminBackend {
 public:
  // `credentials`: the master role's, for its calls to the workers; null: plain text.
  ClusterAdmin(const NamespaceTable& namespaces, WorkerRegistry& registry,
               std::shared_ptr<const security::ClusterCredentials> credentials = nullptr,
               ClusterAdminLeader leader = {})
      : namespaces_(namespaces),
        registry_(registry),
        credentials_(std::move(credentials)),
        leader_(std::move(leader)) {}

  const NamespaceTable& namespaces() const override { return namespaces_; }
  Result<std::unique_ptr<BlockSink>> MakeSink(uint32_t replicas, uint32_t* aimed) override;
  Result<rpc::Report> GetReport() override;
  rpc::HelloResponse Hello() override { return {}; }
  grpc::Status LeaderOnly(grpc::ServerContext* context) override {
    return leader_.leader_only ? leader_.leader_only(context) : grpc::Status::OK;
  }
  void Pinned(const std::string& ns, const std::string& path, bool recursive) override {
    if (leader_.pins) leader_.pins(ns, path, true, recursive);
  }
  void Unpinned(const std::string& ns, const std::string& path) override {
    if (leader_.pins) leader_.pins(ns, path, false, false);
  }

  // The stub for a worker (by address and id), its channel shared by every job.
  std::shared_ptr<rpc::WorkerService::Stub> Stub(const rpc::WorkerInfo& worker);

 private:
  const NamespaceTable& namespaces_;
  WorkerRegistry& registry_;
  std::shared_ptr<const security::ClusterCredentials> credentials_;
  const ClusterAdminLeader leader_;
  Mutex mu_;
  std::map<std::string, std::shared_ptr<rpc::WorkerService::Stub>> stubs_ GUARDED_BY(mu_);
};

}  // namespace lakecache
