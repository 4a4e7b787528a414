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

#include "admin/admin_service.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "jobs/tree_walk.h"
#include "master/client_table.h"
#include "master/cluster_admin.h"
#include "master/master_service.h"
#include "master/status_board.h"
#include "master/worker_registry.h"
#include "master_client/master_set.h"
#include "membership/etcd_membership.h"
#include "membership/leader_election.h"
#include "meta/namespace_table.h"
#include "rpc/advertise.h"
#include "rpc/grpc_util.h"
#include "rpc/lakecache.grpc.pb.h"
#include "security/auth.h"
#include "security/x509.h"

namespace lakecache {
namespace {

// etcd's members serve only once they have elected a leader, and a host's boot or a Kubernetes
// rollout starts them together with the masters: a member that does not answer yet (refused,
// or no HTTP/2 handshake) is asked again every second for `wait`, and the log says so.
// Anything else (a password or certificate refused) fails at once.
Result<std::shared_ptr<EtcdClient>> ConnectEtcd(const EtcdOptions& options,
                                                std::chrono::seconds wait) {
  const SteadyClock* clock = SteadyClock::Real();
  auto start = clock->Now();
  auto next_note = start;
  while (true) {
    Result<std::shared_ptr<EtcdClient>> client = EtcdClient::Connect(options);
    auto now = clock->Now();
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
    clock->SleepFor(std::chrono::seconds(1));
  }
}

// In-flight calls get this long to finish once shutdown starts; then they are cancelled.
constexpr auto kShutdownGrace = std::chrono::seconds(2);

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
  MetadataIndexing indexing;
  indexing.memory = options.metadata_memory;
  if (!options.metadata_dir.empty()) {
    LC_ASSIGN_OR_RETURN(indexing.index, ListingIndex::Open(options.metadata_dir));
  }
  LC_ASSIGN_OR_RETURN(master->namespaces_,
                      NamespaceTable::Open(config, options.store, /*probe=*/false,
                                           std::chrono::seconds(60), std::move(indexing)));
  LC_RETURN_IF_ERROR(ProbeServedNamespaces(*master->namespaces_));
  master->registry_ = std::make_unique<WorkerRegistry>(config.cluster.heartbeat_interval,
                                                       config.cluster.heartbeat_timeout);
  std::shared_ptr<grpc::ServerCredentials> tls;
  if (!options.credentials.empty()) {
    LC_ASSIGN_OR_RETURN(tls, master->OpenCredentials(options.credentials));
  }
  if (!options.etcd.endpoints.empty()) LC_RETURN_IF_ERROR(master->JoinEtcd(config, options));
  master->config_ = config;
  master->etcd_prefix_ = options.etcd_prefix;
  // A mount reports with every view fetch (each heartbeat interval): gone after 5 missed ones.
  master->clients_ = std::make_unique<ClientTable>(std::max<std::chrono::milliseconds>(
      std::chrono::seconds(10), 5 * std::chrono::duration_cast<std::chrono::milliseconds>(
                                        config.cluster.heartbeat_interval)));
  master->MakeServices(options);
  LC_ASSIGN_OR_RETURN(
      rpc::StartedServer started,
      rpc::StartServer(options.listen, {master->service_.get(), master->admin_.get()}, tls,
                       {options.metrics, "lakecache_master_rpc_duration_seconds"}));
  master->server_ = std::move(started.server);
  master->address_ = rpc::AdvertisedAddress(options.advertise, started.address, started.address);
  master->service_->Serving(master->address_);
  MasterServer* m = master.get();
  if (master->etcd_ != nullptr) {
    master->election_ = std::make_unique<LeaderElection>(
        master->etcd_, options.etcd_prefix + "leader", master->address_, options.election_ttl,
        [m](bool leading, const std::string& leader) { m->LeaderChanged(leading, leader); });
    master->elected_ = master->election_.get();
  }
  if (options.metrics != nullptr) master->StartStatusBoard(options);
  Duration interval = config.cluster.heartbeat_interval;
  if (!options.health_socket.empty()) {
    LC_ASSIGN_OR_RETURN(master->health_, rpc::ServeHealth(options.health_socket, "the master",
                                                          [m] { return m->Health(); }));
  }
  master->sweeper_ =
      std::jthread([m, interval](std::stop_token stop) { m->SweepWorkers(stop, interval); });
  return master;
}

Result<std::shared_ptr<grpc::ServerCredentials>> MasterServer::OpenCredentials(
    const std::string& dir) {
  for (const char* file : {"ca.crt", "ca.key", "tls.crt", "tls.key"}) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(dir + "/" + file, ec)) {
      return Status::InvalidArgument("credentials folder " + dir + " has no " + file +
                                     " (the master needs ca.crt, ca.key, tls.crt, tls.key and "
                                     "the role tokens: `lakecache cert --dir " +
                                     dir + "` makes them)");
    }
  }
  LC_ASSIGN_OR_RETURN(credentials_, security::ClusterCredentials::Open(dir, security::Role::kMaster,
                                                                       "lakecache master"));
  authorizer_ = security::Authorizer::FromFolder(dir);
  return security::ServerTls(dir + "/tls.key", dir + "/tls.crt", dir + "/ca.crt",
                             /*verify_clients=*/true);
}

Status MasterServer::JoinEtcd(const Config& config, const MasterOptions& options) {
  EtcdOptions etcd = options.etcd;
  // Calls within a quarter of the election's lease, so a dead member costs no lease.
  etcd.timeout =
      std::min(etcd.timeout,
               std::chrono::duration_cast<std::chrono::milliseconds>(options.election_ttl) / 4);
  etcd.probe_key = options.etcd_prefix + "leader";  // under the prefix its user may be limited to
  LC_ASSIGN_OR_RETURN(etcd_, ConnectEtcd(etcd, options.etcd_wait));
  auto ttl = std::chrono::ceil<std::chrono::seconds>(config.cluster.heartbeat_timeout);
  WorkerRegistry* registry = registry_.get();
  LC_ASSIGN_OR_RETURN(
      membership_,
      EtcdMembership::Start(etcd_, options.etcd_prefix + "workers/", ttl,
                            [registry](const std::vector<rpc::WorkerInfo>& workers,
                                       uint64_t epoch) { registry->Replace(workers, epoch); }));
  return Status::Ok();
}

void MasterServer::MakeServices(const MasterOptions& options) {
  MasterServiceDeps deps;
  deps.namespaces = namespaces_.get();
  deps.registry = registry_.get();
  deps.clients = clients_.get();
  deps.cluster = &config_.cluster;
  deps.authorizer = authorizer_.get();
  deps.credentials_dir = options.credentials;
  deps.insecure = options.insecure;
  ClusterAdminLeader admin_leader;
  if (membership_ != nullptr) {
    auto only = [this](grpc::ServerContext* ctx) { return LeaderOnly(ctx); };
    deps.membership = membership_.get();
    deps.leader = [this] { return leader(); };
    deps.election_ttl_ms = static_cast<uint32_t>(options.election_ttl.count() * 1000);
    deps.leader_only = only;
    admin_leader.leader_only = only;
    admin_leader.pins = [this](const std::string& ns, const std::string& path, bool pinned,
                               bool recursive) { NotePin(ns, path, pinned, recursive); };
  }
  service_ = std::make_unique<MasterServiceImpl>(std::move(deps));
  admin_backend_ = std::make_unique<ClusterAdmin>(*namespaces_, *registry_, credentials_,
                                                  std::move(admin_leader));
  admin_ = std::make_unique<AdminServiceImpl>(admin_backend_.get(), authorizer_);
}

void MasterServer::StartStatusBoard(const MasterOptions& options) {
  StatusBoardOptions board;
  board.address = address_;
  board.version = options.version;
  board.insecure = options.insecure;
  board.interval = options.status_interval;
  status_ = std::make_unique<StatusBoard>(admin_backend_.get(), namespaces_.get(), registry_.get(),
                                          clients_.get(), &admin_->load_jobs(), board);
  metrics_ = options.metrics->AddCollector([this](metrics::Sink& sink) {
    status_->AddMetrics(sink);
    admin_->load_jobs().AddMetrics(sink);
  });
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
  return RedirectToLeader(context, address_, leader, "an election is under way");
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
    PinningVisitor pins_only;
    Result<TreeWalkStats> tree =
        WalkTree(*(*ns)->meta, path, kv.value == "recursive", /*pin=*/true, pins_only);
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

std::map<std::string, HttpPage> MasterServer::StatusPages() {
  return status_ != nullptr ? status_->Pages() : std::map<std::string, HttpPage>{};
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
