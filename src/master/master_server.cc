#include "master/master_server.h"

#include <grpcpp/server.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string_view>
#include <thread>

#include "admin/admin_service.h"
#include "common/mutex.h"
#include "jobs/tree_walk.h"
#include "master/client_table.h"
#include "master/cluster_admin.h"
#include "master/status_board.h"
#include "master/worker_registry.h"
#include "membership/etcd_membership.h"
#include "membership/leader_election.h"
#include "meta/namespace_table.h"
#include "rpc/advertise.h"
#include "rpc/auth.h"
#include "rpc/grpc_util.h"
#include "rpc/lakecache.grpc.pb.h"
#include "rpc/master_set.h"
#include "rpc/x509.h"

namespace lakecache {
namespace {

// etcd's members serve only once they have elected a leader, and a host's boot or a Kubernetes
// rollout starts them together with the masters: a member that does not answer yet (refused,
// or no HTTP/2 handshake) is asked again every second for `wait`, and the log says so.
// Anything else (a password or certificate refused) fails at once.
Result<std::shared_ptr<EtcdClient>> ConnectEtcd(const EtcdOptions& options,
                                                std::chrono::seconds wait) {
  auto start = std::chrono::steady_clock::now();
  auto next_note = start;
  while (true) {
    Result<std::shared_ptr<EtcdClient>> client = EtcdClient::Connect(options);
    auto now = std::chrono::steady_clock::now();
    auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - start);
    if (client.ok()) {
      if (now > start + std::chrono::seconds(1))
        spdlog::info("etcd answers after {} s", waited.count());
      return client;
    }
    if (!client.status().retryable() || now - start >= wait) {
      if (wait.count() > 0 && client.status().retryable())
        return client.status().WithContext(
            fmt::format("etcd did not answer within {} s (--etcd-wait)", wait.count()));
      return client.status();
    }
    if (now >= next_note) {
      spdlog::warn("waiting for etcd ({} s of {} s, --etcd-wait): {}", waited.count(), wait.count(),
                   client.status().message());
      next_note = now + std::chrono::seconds(10);
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

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
  // `authorizer` and `credentials_dir` are null / empty for a master without credentials.
  Service(const NamespaceTable& namespaces, WorkerRegistry& registry, ClientTable& clients,
          const ClusterConfig& cluster, const rpc::Authorizer* authorizer,
          std::string credentials_dir, bool insecure)
      : namespaces_(namespaces),
        registry_(registry),
        clients_(clients),
        cluster_(cluster),
        authorizer_(authorizer),
        credentials_dir_(std::move(credentials_dir)),
        insecure_(insecure) {}

  // With etcd: registrations and heartbeats go there (registry_ follows it); set before serving.
  void set_membership(EtcdMembership* membership) { membership_ = membership; }
  // With etcd: who leads, for the views handed out, and the check of the calls only the leader
  // serves (listings, stats and write notes: one metadata cache for every mount); set before
  // serving.
  void set_leader(std::function<std::string()> leader, uint32_t election_ttl_ms,
                  std::function<grpc::Status(grpc::ServerContext*)> leader_only) {
    leader_ = std::move(leader);
    election_ttl_ms_ = election_ttl_ms;
    leader_only_ = std::move(leader_only);
  }

  void set_address(const std::string& address) EXCLUDES(address_mu_) {
    MutexLock lock(&address_mu_);
    address_ = address;
  }

  grpc::Status Register(grpc::ServerContext* ctx, const rpc::RegisterRequest* req,
                        rpc::RegisterResponse* resp) override {
    rpc::WorkerInfo worker = req->worker();
    if (grpc::Status denied = CheckWorker(ctx, "MasterService/Register", &worker); !denied.ok()) {
      return denied;
    }
    if (worker.id().empty() || worker.address().empty()) {
      return InvalidArgument("Register: the worker needs an id and an address");
    }
    if (membership_ != nullptr) {
      Result<uint64_t> epoch = membership_->Register(worker);
      if (!epoch.ok()) return rpc::ToGrpcStatus(epoch.status());
      resp->set_epoch(*epoch);
    } else {
      resp->set_epoch(registry_.Register(worker));
    }
    resp->set_heartbeat_interval_ms(static_cast<uint32_t>(registry_.heartbeat_interval().count()));
    if (authorizer_ != nullptr) authorizer_->FillDigests(resp->mutable_tokens());
    return grpc::Status::OK;
  }

  grpc::Status Heartbeat(grpc::ServerContext* ctx, const rpc::HeartbeatRequest* req,
                         rpc::HeartbeatResponse* resp) override {
    rpc::WorkerInfo worker = req->worker();
    if (grpc::Status denied = CheckWorker(ctx, "MasterService/Heartbeat", &worker); !denied.ok()) {
      return denied;
    }
    std::optional<uint64_t> epoch;
    if (membership_ != nullptr) {
      Result<std::optional<uint64_t>> beat = membership_->Heartbeat(worker);
      if (!beat.ok()) return rpc::ToGrpcStatus(beat.status());
      epoch = *beat;
    } else {
      epoch = registry_.Heartbeat(worker);
    }
    resp->set_registered(epoch.has_value());
    resp->set_epoch(epoch ? *epoch : registry_.View().epoch());
    if (authorizer_ != nullptr) authorizer_->FillDigests(resp->mutable_tokens());
    return grpc::Status::OK;
  }

  // A worker's own certificate, for the key whose request it sends: named after that key, so a
  // worker can be given no id but its own.
  grpc::Status IssueCertificate(grpc::ServerContext* ctx, const rpc::CertificateRequest* req,
                                rpc::CertificateResponse* resp) override {
    if (grpc::Status denied =
            Allow(ctx, rpc::Roles(rpc::Role::kWorker), "MasterService/IssueCertificate");
        !denied.ok()) {
      return denied;
    }
    if (credentials_dir_.empty()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "IssueCertificate: this master runs without credentials and issues no "
                          "certificates");
    }
    Result<std::string> fingerprint = rpc::CsrFingerprint(req->csr_pem());
    if (!fingerprint.ok()) return rpc::ToGrpcStatus(fingerprint.status());
    std::string id = rpc::WorkerIdFromFingerprint(*fingerprint);
    rpc::CertificateAuthority ca;
    for (auto [name, out] : {std::pair{"ca.crt", &ca.cert_pem}, std::pair{"ca.key", &ca.key_pem}}) {
      std::ifstream in(credentials_dir_ + "/" + name);
      std::stringstream text;
      text << in.rdbuf();
      if (!in || text.str().empty()) {
        return grpc::Status(
            grpc::StatusCode::FAILED_PRECONDITION,
            std::string("IssueCertificate: the master's credentials folder has no ") + name);
      }
      *out = text.str();
    }
    auto validity =
        std::chrono::duration_cast<std::chrono::seconds>(cluster_.worker_certificate_validity);
    Result<std::string> cert = rpc::SignCsr(ca, req->csr_pem(), {rpc::WorkerTlsName(id)}, validity);
    if (!cert.ok()) return rpc::ToGrpcStatus(cert.status());
    resp->set_worker_id(id);
    resp->set_certificate_pem(*cert);
    authorizer_->FillDigests(resp->mutable_tokens());
    resp->set_not_after_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                               (std::chrono::system_clock::now() + validity).time_since_epoch())
                               .count());
    spdlog::info("issued worker {} a certificate for {}, valid {}", id, rpc::WorkerTlsName(id),
                 FormatDuration(cluster_.worker_certificate_validity));
    return grpc::Status::OK;
  }

  grpc::Status GetClusterView(grpc::ServerContext* ctx, const rpc::ClusterViewRequest* req,
                              rpc::ClusterView* resp) override EXCLUDES(address_mu_) {
    if (grpc::Status denied = Allow(ctx, kReaders, "MasterService/GetClusterView"); !denied.ok()) {
      return denied;
    }
    if (req->has_client()) clients_.Note(req->client());
    *resp = registry_.View();
    resp->set_insecure(insecure_);
    if (membership_ != nullptr) {
      resp->set_etcd(true);
      resp->set_stale(membership_->stale());
      if (leader_) resp->set_leader(leader_());
      resp->set_election_ttl_ms(election_ttl_ms_);
    }
    MutexLock lock(&address_mu_);
    resp->set_address(address_);
    return grpc::Status::OK;
  }

  grpc::Status GetNamespaces(grpc::ServerContext* ctx, const rpc::NamespacesRequest*,
                             rpc::NamespacesResponse* resp) override {
    if (grpc::Status denied = Allow(ctx, kReaders, "MasterService/GetNamespaces"); !denied.ok()) {
      return denied;
    }
    for (const std::string& name : namespaces_.names()) {
      const Namespace& ns = *namespaces_.Find(name);
      rpc::NamespaceInfo* info = resp->add_namespaces();
      info->set_name(name);
      info->set_uri(ns.config.uri);
      info->set_block_size(ns.config.block_size);
      info->set_metadata_ttl_ms(ns.config.metadata_ttl.count());
      info->set_immutable(ns.config.immutable);
      info->set_key_prefix(ns.prefix);
      info->set_read_only(!ns.config.write);
      info->set_allow_overwrite(ns.config.allow_overwrite);
      info->set_allow_delete(ns.config.allow_delete);
    }
    return grpc::Status::OK;
  }

  // A mount's write through a worker: the folder's cached listing shows it now, so every mount
  // that lists the folder next sees it (theirs revalidate with their TTL).
  grpc::Status NoteWrite(grpc::ServerContext* ctx, const rpc::NoteWriteRequest* req,
                         rpc::NoteWriteResponse*) override {
    if (grpc::Status denied = Allow(ctx, rpc::Roles(rpc::Role::kClient), "MasterService/NoteWrite");
        !denied.ok()) {
      return denied;
    }
    if (grpc::Status elsewhere = LeaderOnly(ctx); !elsewhere.ok()) return elsewhere;
    std::string path = req->path();
    bool folder = path.ends_with('/');
    if (folder) path.pop_back();
    Result<Namespace*> found = Find(req->ns(), "NoteWrite: path", path);
    if (!found.ok()) return rpc::ToGrpcStatus(found.status());
    if (path.empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "an empty path");
    const NamespaceConfig& nsc = (*found)->config;
    if (!nsc.write || (req->removed() && !folder && !nsc.allow_delete)) {
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                          "namespace '" + req->ns() + "' does not allow that change");
    }
    auto [dir, name] = SplitParent(path);
    if (req->removed()) {
      (*found)->meta->NoteRemoved(dir, name);
    } else {
      const rpc::ObjectEntry& e = req->entry();
      (*found)->meta->NoteEntry(
          dir, DirEntry{name, folder, folder ? 0 : e.size(), folder ? "" : e.etag(), e.mtime()});
    }
    return grpc::Status::OK;
  }

  grpc::Status ListDir(grpc::ServerContext* ctx, const rpc::ListDirRequest* req,
                       rpc::ListDirResponse* resp) override {
    if (grpc::Status denied = Allow(ctx, kReaders, "MasterService/ListDir"); !denied.ok()) {
      return denied;
    }
    if (grpc::Status elsewhere = LeaderOnly(ctx); !elsewhere.ok()) return elsewhere;
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

  grpc::Status Stat(grpc::ServerContext* ctx, const rpc::StatRequest* req,
                    rpc::StatResponse* resp) override {
    if (grpc::Status denied = Allow(ctx, kReaders, "MasterService/Stat"); !denied.ok()) {
      return denied;
    }
    if (grpc::Status elsewhere = LeaderOnly(ctx); !elsewhere.ok()) return elsewhere;
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

  grpc::Status LeaderOnly(grpc::ServerContext* ctx) const {
    return leader_only_ ? leader_only_(ctx) : grpc::Status::OK;
  }

  // Listings and the view: mounts, admin commands, and the workers' own tools.
  static constexpr rpc::RoleSet kReaders = rpc::Roles(rpc::Role::kClient, rpc::Role::kAdmin);

  grpc::Status Allow(const grpc::ServerContext* ctx, rpc::RoleSet roles,
                     std::string_view method) const {
    return rpc::Authorize(authorizer_, ctx, roles, method);
  }

  // A worker's Register or Heartbeat: the worker role's token, over a connection whose client
  // certificate is the one the master issued for this id; a claimed capacity above the bound is
  // cut to it.
  grpc::Status CheckWorker(const grpc::ServerContext* ctx, std::string_view method,
                           rpc::WorkerInfo* worker) const {
    if (grpc::Status denied = Allow(ctx, rpc::Roles(rpc::Role::kWorker), method); !denied.ok()) {
      return denied;
    }
    if (authorizer_ != nullptr &&
        !rpc::PeerCertificateNames(ctx, rpc::WorkerTlsName(worker->id()))) {
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                          std::string(method) + ": worker id '" + worker->id() +
                              "' is not the id of the certificate this worker presented (a "
                              "worker registers only under the id of its own key)");
    }
    if (worker->capacity_bytes() > cluster_.max_worker_capacity) {
      if (method.ends_with("Register")) {
        spdlog::warn("worker {} claims {} of cache; counted as {} (cluster.max_worker_capacity)",
                     worker->id(), FormatByteSize(worker->capacity_bytes()),
                     FormatByteSize(cluster_.max_worker_capacity));
      }
      worker->set_capacity_bytes(cluster_.max_worker_capacity);
    }
    return grpc::Status::OK;
  }

  const NamespaceTable& namespaces_;
  WorkerRegistry& registry_;
  EtcdMembership* membership_ = nullptr;
  std::function<std::string()> leader_;
  uint32_t election_ttl_ms_ = 0;
  std::function<grpc::Status(grpc::ServerContext*)> leader_only_;
  ClientTable& clients_;
  const ClusterConfig& cluster_;
  const rpc::Authorizer* authorizer_;
  std::string credentials_dir_;
  const bool insecure_;
  // Known once the server listens, when calls may already come.
  Mutex address_mu_;
  std::string address_ GUARDED_BY(address_mu_);
};

namespace {

// One namespace out of reach (a refused credential, a missing bucket, its store down) does not keep
// the others from being served: it is logged, and its calls fail with the store's own error until
// the store answers. Only when no namespace answers does the master not start.
Status ProbeServedNamespaces(NamespaceTable& table) {
  std::vector<Status> failed;
  for (const std::string& name : table.names()) {
    Status s = ProbeNamespace(*table.Find(name));
    if (!s.ok()) failed.push_back(std::move(s));
  }
  if (failed.size() == table.names().size()) return failed.front();
  for (const Status& s : failed) {
    spdlog::error(
        "{}: serving the other namespaces; calls to this one fail until its store "
        "answers (fix its config and restart the master)",
        s.message());
  }
  return Status::Ok();
}

}  // namespace

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
                      NamespaceTable::Open(config, options.store, /*probe=*/false));
  LC_RETURN_IF_ERROR(ProbeServedNamespaces(*master->namespaces_));
  master->registry_ = std::make_unique<WorkerRegistry>(config.cluster.heartbeat_interval,
                                                       config.cluster.heartbeat_timeout);
  std::shared_ptr<grpc::ServerCredentials> tls;
  if (!options.credentials.empty()) {
    const std::string& dir = options.credentials;
    for (const char* file : {"ca.crt", "ca.key", "tls.crt", "tls.key"}) {
      std::error_code ec;
      if (!std::filesystem::is_regular_file(dir + "/" + file, ec)) {
        return Status::InvalidArgument("credentials folder " + dir + " has no " + file +
                                       " (the master needs ca.crt, ca.key, tls.crt, tls.key and "
                                       "the role tokens: `lakecache cert --dir " +
                                       dir + "` makes them)");
      }
    }
    LC_ASSIGN_OR_RETURN(master->credentials_,
                        rpc::ClusterCredentials::Open(dir, rpc::Role::kMaster, "lakecache master"));
    master->authorizer_ = rpc::Authorizer::FromFolder(dir);
    tls = rpc::ServerTls(dir + "/tls.key", dir + "/tls.crt", dir + "/ca.crt",
                         /*verify_clients=*/true);
  }
  if (!options.etcd.endpoints.empty()) {
    EtcdOptions etcd = options.etcd;
    // Calls within a quarter of the election's lease, so a dead member costs no lease.
    etcd.timeout =
        std::min(etcd.timeout,
                 std::chrono::duration_cast<std::chrono::milliseconds>(options.election_ttl) / 4);
    etcd.probe_key = options.etcd_prefix + "leader";  // under the prefix its user may be limited to
    LC_ASSIGN_OR_RETURN(master->etcd_, ConnectEtcd(etcd, options.etcd_wait));
    auto ttl = std::chrono::ceil<std::chrono::seconds>(config.cluster.heartbeat_timeout);
    WorkerRegistry* registry = master->registry_.get();
    LC_ASSIGN_OR_RETURN(
        master->membership_,
        EtcdMembership::Start(master->etcd_, options.etcd_prefix + "workers/", ttl,
                              [registry](const std::vector<rpc::WorkerInfo>& workers,
                                         uint64_t epoch) { registry->Replace(workers, epoch); }));
  }
  master->config_ = config;
  master->etcd_prefix_ = options.etcd_prefix;
  // A mount reports with every view fetch (each heartbeat interval): gone after 5 missed ones.
  master->clients_ = std::make_unique<ClientTable>(std::max<std::chrono::milliseconds>(
      std::chrono::seconds(10), 5 * std::chrono::duration_cast<std::chrono::milliseconds>(
                                        config.cluster.heartbeat_interval)));
  master->service_ = std::make_unique<Service>(
      *master->namespaces_, *master->registry_, *master->clients_, master->config_.cluster,
      master->authorizer_.get(), options.credentials, options.insecure);
  master->service_->set_membership(master->membership_.get());  // before it serves
  master->admin_backend_ = std::make_unique<ClusterAdmin>(*master->namespaces_, *master->registry_,
                                                          master->credentials_);
  if (master->membership_ != nullptr) {
    MasterServer* self = master.get();
    auto only = [self](grpc::ServerContext* ctx) { return self->LeaderOnly(ctx); };
    master->service_->set_leader([self] { return self->leader(); },
                                 static_cast<uint32_t>(options.election_ttl.count() * 1000), only);
    master->admin_backend_->set_leader_only(only);
    master->admin_backend_->set_pins(
        [self](const std::string& ns, const std::string& path, bool pinned, bool recursive) {
          self->NotePin(ns, path, pinned, recursive);
        });
  }
  master->admin_ =
      std::make_unique<AdminServiceImpl>(master->admin_backend_.get(), master->authorizer_);
  LC_ASSIGN_OR_RETURN(
      rpc::StartedServer started,
      rpc::StartServer(options.listen, {master->service_.get(), master->admin_.get()}, tls,
                       {options.metrics, "lakecache_master_rpc_duration_seconds"}));
  master->server_ = std::move(started.server);
  master->address_ = rpc::AdvertisedAddress(options.advertise, started.address, started.address);
  master->service_->set_address(master->address_);
  if (master->etcd_ != nullptr) {
    MasterServer* self = master.get();
    master->election_ = std::make_unique<LeaderElection>(
        master->etcd_, options.etcd_prefix + "leader", master->address_, options.election_ttl,
        [self](bool leading, const std::string& leader) { self->LeaderChanged(leading, leader); });
    master->elected_ = master->election_.get();
  }
  MasterServer* m = master.get();
  if (options.metrics != nullptr) {
    StatusBoardOptions board;
    board.address = master->address_;
    board.version = options.version;
    board.insecure = options.insecure;
    board.interval = options.status_interval;
    master->status_ = std::make_unique<StatusBoard>(
        master->admin_backend_.get(), master->namespaces_.get(), master->registry_.get(),
        master->clients_.get(), &master->admin_->load_jobs(), board);
    master->metrics_ = options.metrics->AddCollector([m](metrics::Sink& sink) {
      m->status_->AddMetrics(sink);
      m->admin_->load_jobs().AddMetrics(sink);
    });
  }
  Duration interval = config.cluster.heartbeat_interval;
  if (!options.health_socket.empty()) {
    LC_ASSIGN_OR_RETURN(master->health_, rpc::ServeHealth(options.health_socket, "the master",
                                                          [m] { return m->Health(); }));
  }
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

bool MasterServer::leading() const {
  const LeaderElection* election = elected_.load();
  return etcd_ == nullptr || (election != nullptr && election->leading());
}

grpc::Status MasterServer::LeaderOnly(grpc::ServerContext* context) const {
  // Not yet elected: the election starts once the server listens, so the first calls may come
  // before it.
  if (etcd_ == nullptr) return grpc::Status::OK;
  const LeaderElection* election = elected_.load();
  if (election == nullptr) {  // between listening and campaigning (address_ is being set)
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "this master is starting: it has not joined the election yet");
  }
  if (election->leading()) return grpc::Status::OK;
  if (membership_ != nullptr && membership_->stale()) {
    // No master can lead while etcd is out of reach: the caller is told at once (a mount then
    // serves its last listings) rather than made to wait for an election.
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "etcd is out of reach (" + etcd_->endpoint() +
                            "), so no master leads the cluster: listings, stats, writes' notes, "
                            "loads and frees wait for etcd; cached reads go on");
  }
  std::string leader = election->leader();
  if (leader == address_) leader.clear();  // our key, its lease lapsing
  return rpc::RedirectToLeader(context, address_, leader, "an election is under way");
}

std::string MasterServer::PinKey(const std::string& ns, const std::string& path) const {
  return etcd_prefix_ + "pins/" + ns + "/" + path;
}

void MasterServer::NotePin(const std::string& ns, const std::string& path, bool pinned,
                           bool recursive) {
  Status s;
  if (pinned) {
    // A load of the folder alone after one of its tree keeps the tree pinned, as the metadata
    // cache does.
    Result<EtcdRange> had = etcd_->Get(PinKey(ns, path));
    bool was_recursive = had.ok() && !had->kvs.empty() && had->kvs[0].value == "recursive";
    s = etcd_->Put(PinKey(ns, path), recursive || was_recursive ? "recursive" : "").status();
  } else {
    // The folder and every pin below it: free unpins the whole tree.
    Result<EtcdRange> below = etcd_->GetPrefix(PinKey(ns, path));
    s = below.status();
    for (const EtcdKeyValue& kv : below.ok() ? below->kvs : std::vector<EtcdKeyValue>{}) {
      std::string rest = kv.key.substr(PinKey(ns, path).size());
      if (!path.empty() && !rest.empty() && rest.front() != '/') continue;  // a sibling "ab" of "a"
      if (Status d = etcd_->Delete(kv.key); !d.ok()) s = d;
    }
  }
  if (!s.ok()) {
    spdlog::warn(
        "cannot record in etcd that /{}/{} is {}: {} (a master that leads after this one "
        "{} it)",
        ns, path, pinned ? "pinned" : "unpinned", s.message(), pinned ? "will not pin" : "may pin");
  }
}

void MasterServer::Repin() {
  Result<EtcdRange> pins = etcd_->GetPrefix(etcd_prefix_ + "pins/");
  if (!pins.ok()) {
    spdlog::warn("cannot read the pinned folders from etcd: {} (they are listed as any other)",
                 pins.status().message());
    return;
  }
  size_t done = 0;
  for (const EtcdKeyValue& kv : pins->kvs) {
    if (stopping_.load()) return;
    std::string rest = kv.key.substr(etcd_prefix_.size() + 5);  // "NS/PATH"
    size_t slash = rest.find('/');
    if (slash == std::string::npos) continue;
    Result<Namespace*> ns = namespaces_->Get(rest.substr(0, slash));
    if (!ns.ok()) continue;  // a namespace this master does not serve (another config)
    std::string path = rest.substr(slash + 1);
    Result<Tree> tree = WalkTree(*(*ns)->meta, path, kv.value == "recursive", /*pin=*/true);
    if (!tree.ok()) {
      spdlog::warn("cannot pin /{} again: {}", rest, tree.status().message());
      continue;
    }
    ++done;
  }
  if (done > 0) spdlog::info("pinned the listings of {} loaded folder(s) again", done);
}

void MasterServer::LeaderChanged(bool leading, const std::string& leader) {
  if (leading) {
    spdlog::info("master {} leads the cluster", address_);
    // Another master led since this one last did: what this one still caches of the namespaces
    // may miss the writes noted there. The folders are listed afresh.
    if (led_by_other_) {
      for (const std::string& name : namespaces_->names()) {
        namespaces_->Find(name)->meta->Unpin("");
      }
      led_by_other_ = false;
    }
    // The loads' pins, kept in etcd, are this master's to serve now: listed and pinned again in
    // the background (a walk of a large tree takes a while; the election goes on meanwhile).
    // A walk still running from an earlier lead is asked to start over once it ends (the unpin
    // above may have undone what it had pinned).
    bool start = false;
    {
      MutexLock lock(&repin_mu_);
      repin_again_ = true;
      start = !repin_running_;
      repin_running_ = true;
    }
    if (start) {
      if (repin_.joinable()) repin_.join();  // ended: it cleared repin_running_
      repin_ = std::thread([this] {
        for (;;) {
          {
            MutexLock lock(&repin_mu_);
            if (!repin_again_ || stopping_.load()) {
              repin_running_ = false;
              return;
            }
            repin_again_ = false;
          }
          Repin();
        }
      });
    }
  } else {
    // Not leading, whatever the reason (another leads, the lease ran out, etcd went out of reach):
    // another master may lead meanwhile and take writes' notes this one never sees.
    led_by_other_ = true;
    if (!leader.empty() && leader != address_) {
      spdlog::info("master {} follows the leader {}", address_, leader);
    } else if (!stopping_.load()) {
      spdlog::warn("master {}: no master leads the cluster now", address_);
    }
  }
}

std::string MasterServer::leader() const {
  if (etcd_ == nullptr) return address_;
  const LeaderElection* election = elected_.load();
  return election == nullptr ? "" : election->leader();
}

rpc::HealthState MasterServer::Health() {
  rpc::ClusterView view = registry_->View();
  std::string role;
  if (election_ != nullptr) {
    std::string leader = election_->leader();
    role = election_->leading() ? ", the leader"
                                : ", following " + (leader.empty() ? "no known leader" : leader);
    if (membership_->stale()) role += "; etcd out of reach, the last view kept";
  }
  return {true, "master " + address_ + " serving " + std::to_string(config_.namespaces.size()) +
                    " namespace(s), " + std::to_string(view.workers_size()) + " live worker(s)" +
                    role};
}

std::map<std::string, rpc::HttpPage> MasterServer::StatusPages() {
  return status_ != nullptr ? status_->Pages() : std::map<std::string, rpc::HttpPage>{};
}

void MasterServer::Shutdown() {
  std::call_once(shutdown_once_, [this] {
    metrics_.Reset();
    status_.reset();                              // stops sampling the workers
    if (health_ != nullptr) health_->Shutdown();  // a probe sees it go at once
    if (sweeper_.joinable()) {
      sweeper_.request_stop();
      sweeper_.join();
    }
    stopping_ = true;                             // a re-pinning walk stops at its next folder
    if (election_ != nullptr) election_->Stop();  // resigns: another master leads at once
    if (repin_.joinable()) repin_.join();
    if (server_ == nullptr) return;
    server_->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
    server_->Wait();
  });
}

}  // namespace lakecache
