#include "master/master_server.h"

#include <grpcpp/server.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <string_view>

#include "admin/admin_service.h"
#include "common/mutex.h"
#include "master/cluster_admin.h"
#include "master/worker_registry.h"
#include "meta/namespace_table.h"
#include "rpc/advertise.h"
#include "rpc/grpc_util.h"
#include "rpc/lakecache.grpc.pb.h"

namespace lakecache {
namespace {

// In-flight calls get this long to finish once shutdown starts; then they are cancelled.
constexpr auto kShutdownGrace = std::chrono::seconds(2);

grpc::Status InvalidArgument(const std::string& message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message);
}

void FillEntry(const std::string& key, const DirEntry& entry, rpc::ObjectEntry* out) {
  out->set_key(key);
  out->set_size(entry.size);
  out->set_etag(entry.etag);
  out->set_mtime(entry.mtime);
}

}  // namespace

class MasterServer::Service final : public rpc::MasterService::Service {
 public:
  Service(const NamespaceTable& namespaces, WorkerRegistry& registry, bool insecure)
      : namespaces_(namespaces), registry_(registry), insecure_(insecure) {}

  void set_address(const std::string& address) EXCLUDES(address_mu_) {
    MutexLock lock(&address_mu_);
    address_ = address;
  }

  grpc::Status Register(grpc::ServerContext*, const rpc::RegisterRequest* req,
                        rpc::RegisterResponse* resp) override {
    if (req->worker().id().empty() || req->worker().address().empty()) {
      return InvalidArgument("Register: the worker needs an id and an address");
    }
    resp->set_epoch(registry_.Register(req->worker()));
    resp->set_heartbeat_interval_ms(static_cast<uint32_t>(registry_.heartbeat_interval().count()));
    return grpc::Status::OK;
  }

  grpc::Status Heartbeat(grpc::ServerContext*, const rpc::HeartbeatRequest* req,
                         rpc::HeartbeatResponse* resp) override {
    std::optional<uint64_t> epoch = registry_.Heartbeat(req->worker());
    resp->set_registered(epoch.has_value());
    resp->set_epoch(epoch ? *epoch : registry_.View().epoch());
    return grpc::Status::OK;
  }

  grpc::Status GetClusterView(grpc::ServerContext*, const rpc::ClusterViewRequest*,
                              rpc::ClusterView* resp) override EXCLUDES(address_mu_) {
    *resp = registry_.View();
    resp->set_insecure(insecure_);
    MutexLock lock(&address_mu_);
    resp->set_address(address_);
    return grpc::Status::OK;
  }

  grpc::Status GetNamespaces(grpc::ServerContext*, const rpc::NamespacesRequest*,
                             rpc::NamespacesResponse* resp) override {
    for (const std::string& name : namespaces_.names()) {
      const Namespace& ns = *namespaces_.Find(name);
      rpc::NamespaceInfo* info = resp->add_namespaces();
      info->set_name(name);
      info->set_uri(ns.config.uri);
      info->set_block_size(ns.config.block_size);
      info->set_metadata_ttl_ms(ns.config.metadata_ttl.count());
      info->set_immutable(ns.config.immutable);
      info->set_key_prefix(ns.prefix);
    }
    return grpc::Status::OK;
  }

  grpc::Status ListDir(grpc::ServerContext*, const rpc::ListDirRequest* req,
                       rpc::ListDirResponse* resp) override {
    const std::string& dir = req->dir();
    Result<Namespace*> found = Find(req->ns(), "ListDir: dir", dir);
    if (!found.ok()) return rpc::ToGrpcStatus(found.status());
    Namespace* ns = *found;
    if (req->revalidate()) ns->meta->ExpireFolder(dir);
    auto listing = ns->meta->List(dir);
    if (!listing.ok()) return rpc::ToGrpcStatus(listing.status());
    std::string base = dir.empty() ? "" : dir + "/";
    for (const DirEntry& entry : (*listing)->entries()) {
      std::string key = ns->meta->ObjectKey(base + entry.name);
      if (entry.is_dir) {
        resp->add_dirs(key + "/");
      } else {
        FillEntry(key, entry, resp->add_files());
      }
    }
    resp->set_exists((*listing)->exists());
    return grpc::Status::OK;
  }

  grpc::Status Stat(grpc::ServerContext*, const rpc::StatRequest* req,
                    rpc::StatResponse* resp) override {
    const std::string& path = req->path();
    Result<Namespace*> found = Find(req->ns(), "Stat: path", path);
    if (!found.ok()) return rpc::ToGrpcStatus(found.status());
    if (path.empty()) return InvalidArgument("Stat: empty path (ListDir lists the root)");
    Namespace* ns = *found;
    auto entry = ns->meta->Stat(path);
    if (!entry.ok()) return rpc::ToGrpcStatus(entry.status());
    // A folder's key is its prefix, as in ListDir's `dirs`.
    FillEntry(ns->meta->ObjectKey(path) + (entry->is_dir ? "/" : ""), *entry,
              resp->mutable_entry());
    resp->set_is_dir(entry->is_dir);
    return grpc::Status::OK;
  }

 private:
  // The namespace a request names, its path (`what`) checked.
  Result<Namespace*> Find(const std::string& name, std::string_view what,
                          const std::string& path) const {
    LC_ASSIGN_OR_RETURN(Namespace * ns, namespaces_.Get(name));
    LC_RETURN_IF_ERROR(CheckRelativePath(what, path));
    return ns;
  }

  const NamespaceTable& namespaces_;
  WorkerRegistry& registry_;
  const bool insecure_;
  // Known once the server listens, when calls may already come.
  Mutex address_mu_;
  std::string address_ GUARDED_BY(address_mu_);
};

Result<std::unique_ptr<MasterServer>> MasterServer::Start(const Config& config,
                                                          const MasterOptions& options) {
  LC_RETURN_IF_ERROR(rpc::CheckListenAddress("listen address", options.listen));
  if (!options.advertise.empty()) {
    LC_RETURN_IF_ERROR(rpc::CheckAdvertiseAddress("advertise address", options.advertise, true));
  }
  if (config.namespaces.empty()) {
    std::string source = config.source.empty() ? "the config" : config.source;
    return Status::InvalidArgument(source + ": no namespaces to serve");
  }
  std::unique_ptr<MasterServer> master(new MasterServer());
  LC_ASSIGN_OR_RETURN(master->namespaces_,
                      NamespaceTable::Open(config, options.store, /*probe=*/true));
  master->registry_ = std::make_unique<WorkerRegistry>(config.cluster.heartbeat_interval,
                                                       config.cluster.heartbeat_timeout);
  master->service_ =
      std::make_unique<Service>(*master->namespaces_, *master->registry_, options.insecure);
  master->admin_backend_ = std::make_unique<ClusterAdmin>(*master->namespaces_, *master->registry_);
  master->admin_ = std::make_unique<AdminServiceImpl>(master->admin_backend_.get());
  LC_ASSIGN_OR_RETURN(
      rpc::StartedServer started,
      rpc::StartServer(options.listen, {master->service_.get(), master->admin_.get()}));
  master->server_ = std::move(started.server);
  master->address_ = rpc::AdvertisedAddress(options.advertise, started.address, started.address);
  master->service_->set_address(master->address_);
  MasterServer* m = master.get();
  Duration interval = config.cluster.heartbeat_interval;
  master->sweeper_ =
      std::jthread([m, interval](std::stop_token stop) { m->SweepWorkers(stop, interval); });
  return master;
}

MasterServer::~MasterServer() { Shutdown(); }

void MasterServer::SweepWorkers(std::stop_token stop, Duration interval) {
  for (;;) {
    {
      std::unique_lock lock(sweep_mu_);
      sweep_cv_.wait_for(lock, stop, interval, [] { return false; });
    }
    if (stop.stop_requested()) return;
    registry_->Expire();
  }
}

void MasterServer::Shutdown() {
  std::call_once(shutdown_once_, [this] {
    if (sweeper_.joinable()) {
      sweeper_.request_stop();
      sweeper_.join();
    }
    if (server_ == nullptr) return;
    server_->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
    server_->Wait();
  });
}

}  // namespace lakecache
