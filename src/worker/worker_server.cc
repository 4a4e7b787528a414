#include "worker/worker_server.h"

#include <grpcpp/server.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "admin/convert.h"
#include "admin/stats_metrics.h"
#include "cache/block_key.h"
#include "fetch/block_fetch.h"
#include "jobs/store_sink.h"
#include "master_client/master_set.h"
#include "rpc/advertise.h"
#include "rpc/block_chunk.h"
#include "rpc/grpc_util.h"
#include "rpc/lakecache.grpc.pb.h"
#include "security/x509.h"
#include "worker/block_reader.h"
#include "worker/object_writes.h"
#include "worker/worker_service.h"

namespace lakecache {
namespace {

constexpr size_t kPrefetchThreads = 8;
// ReadBlock calls served at once; each may wait for an object-store fetch.
constexpr size_t kReadThreads = 32;
// Object-store fetches of LoadBlocks batches at once (the master sends at most a few batches).
constexpr size_t kLoadThreads = 16;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A wildcard listen address cannot be dialled: advertise the host name instead.
std::string Advertised(const std::string& bound) {
  size_t colon = bound.rfind(':');
  std::string host = bound.substr(0, colon);
  if (host != "0.0.0.0" && host != "[::]" && host != "::") return bound;
  char name[256] = {0};
  if (::gethostname(name, sizeof(name) - 1) != 0) return bound;
  return std::string(name) + bound.substr(colon);
}

}  // namespace

std::vector<std::string> WorkerServer::MasterList() const {
  Result<std::vector<std::string>> list = ParseMasterList("--master", options_.master);
  return list.ok() ? *list : std::vector<std::string>{options_.master};  // checked by Start
}

Result<std::unique_ptr<WorkerServer>> WorkerServer::Start(const Config& config,
                                                          const WorkerOptions& options) {
  LC_RETURN_IF_ERROR(ParseMasterList("--master", options.master).status());
  if (!options.advertise.empty()) {
    LC_RETURN_IF_ERROR(rpc::CheckAdvertiseAddress("advertise address", options.advertise, true));
  }
  if (!options.data_listen.empty()) {
    LC_RETURN_IF_ERROR(rpc::CheckListenAddress("--data-listen", options.data_listen));
  }
  std::unique_ptr<WorkerServer> w(new WorkerServer());
  w->config_ = config;
  w->options_ = options;
  w->start_time_ms_ = NowMs();
  LC_RETURN_IF_ERROR(w->OpenCache());
  LC_ASSIGN_OR_RETURN(
      w->identity_,
      LoadOrCreateWorkerIdentity(
          config.cache.disks.empty() ? std::string() : config.cache.disks.front().path,
          &w->temp_dir_));
  w->id_ = w->identity_.id;
  if (!options.credentials.empty()) LC_RETURN_IF_ERROR(w->OpenCredentials());
  LC_ASSIGN_OR_RETURN(w->namespaces_, NamespaceTable::Open(config, options.store, options.probe));
  if (w->arena_ != nullptr) LC_RETURN_IF_ERROR(w->StartNodeSocket());
  w->MakeService();
  LC_RETURN_IF_ERROR(w->StartServing());
  WorkerServer* self = w.get();
  if (!options.health_socket.empty()) {
    LC_ASSIGN_OR_RETURN(w->health_, rpc::ServeHealth(options.health_socket, "the worker",
                                                     [self] { return self->Health(); }));
  }
  if (options.metrics != nullptr) {
    w->metrics_ = options.metrics->AddCollector([self](metrics::Sink& sink) {
      rpc::WorkerStats stats;
      self->service_->FillStats(&stats);
      rpc::AddStatsMetrics(stats, /*worker=*/true, sink);
    });
  }
  w->heartbeat_ = std::thread([self] { self->HeartbeatLoop(); });
  spdlog::info("worker {} serving on {}, data on {} ({}; {} namespaces), master {}", w->id_,
               w->address(), w->data_address_,
               w->credentials_ != nullptr ? "TLS, role tokens checked" : "plain text",
               w->namespaces_->names().size(), options.master);
  return w;
}

Status WorkerServer::OpenCache() {
  if (options_.shared_memory) {
    ShmArenaOptions shm;
    shm.capacity_bytes = config_.cache.memory_capacity;
    shm.huge_pages = HugePagesNamed(config_.cache.huge_pages);
    // A session per mount on this host, and one per native reader of a mount that reads this
    // memory in place (up to 64 per mount): its anchors cost memory only where it writes them.
    shm.max_sessions = 1024;
    Result<std::shared_ptr<ShmArena>> arena = ShmArena::Create(shm);
    if (!arena.ok()) return arena.status().WithContext("shared memory for the memory tier");
    arena_ = std::move(*arena);
  }
  LC_ASSIGN_OR_RETURN(blocks_, BlockStore::Open(config_.cache, nullptr, arena_));
  return Status::Ok();
}

Status WorkerServer::OpenCredentials() {
  LC_ASSIGN_OR_RETURN(credentials_,
                      security::ClusterCredentials::Open(
                          options_.credentials, security::Role::kWorker, "lakecache worker"));
  authorizer_ = security::Authorizer::Pushed();
  if (!KeptCertificateUsable() || !LoadDigests()) {
    // A master that is still starting gets a while; a refusal (a wrong token) fails at once.
    LC_RETURN_IF_ERROR(
        ObtainCertificate(std::chrono::system_clock::now() + options_.bootstrap_wait));
  }
  return Status::Ok();
}

Status WorkerServer::StartNodeSocket() {
  std::string path =
      options_.node_socket.empty() ? "/tmp/lakecache-node-" + id_ + ".sock" : options_.node_socket;
  std::vector<uid_t> uids = options_.shm_uids;
  if (uids.empty()) uids.push_back(::getuid());
  LC_ASSIGN_OR_RETURN(std::unique_ptr<NodeServer> node,
                      NodeServer::Start(arena_, path, std::move(uids)));
  node_path_ = node->path();
  MutexLock lock(&node_mu_);
  node_ = std::move(node);
  return Status::Ok();
}

void WorkerServer::MakeService() {
  prefetch_pool_ = std::make_unique<ThreadPool>(kPrefetchThreads);
  read_pool_ = std::make_unique<ThreadPool>(kReadThreads);
  load_pool_ = std::make_unique<ThreadPool>(kLoadThreads);
  reader_ = std::make_unique<BlockReader>(namespaces_.get(), blocks_);
  PeerReadsOptions peer_options;
  peer_options.self_id = id_;
  peer_options.credentials = credentials_;
  Result<std::unique_ptr<PeerReads>> peers = PeerReads::Make(std::move(peer_options));
  if (peers.ok()) {
    // cache.replica_share 0%: a block read for a mount of this host is erased once it is served.
    peers_ = std::move(*peers);
    holders_ = std::make_unique<HolderBook>();
    replicas_ = std::make_unique<ReplicaLedger>(
        blocks_.get(), config_.cache.memory_capacity / 100 * config_.cache.replica_percent);
    reader_->EnableReplicas(holders_.get(), peers_.get(), replicas_.get());
  } else {
    spdlog::warn("worker {} keeps no replicas: {}", id_, peers.status().message());
  }
  WorkerServiceDeps deps;
  deps.namespaces = namespaces_.get();
  deps.blocks = blocks_;
  deps.reader = reader_.get();
  deps.prefetch_pool = prefetch_pool_.get();
  deps.read_pool = read_pool_.get();
  deps.load_pool = load_pool_.get();
  deps.fill_info = [this](rpc::WorkerInfo* info) { FillInfo(info); };
  deps.fill_shm = [this](rpc::WorkerStats* stats) { FillShmStats(stats); };
  deps.write_budget = config_.client.write_budget;
  deps.authorizer = authorizer_;
  service_ = std::make_unique<WorkerServiceImpl>(std::move(deps));
}

Status WorkerServer::StartServing() {
  BulkServerOptions bulk;
  if (options_.metrics != nullptr) {
    bulk.request_duration = options_.metrics->GetHistogram(
        "lakecache_worker_rpc_duration_seconds", rpc::kRpcDurationHelp, {{"method", "BulkRead"}});
  }
  bulk.listen = options_.data_listen.empty()
                    ? options_.listen.substr(0, options_.listen.rfind(':')) + ":0"
                    : options_.data_listen;
  std::shared_ptr<grpc::ServerCredentials> tls;
  if (credentials_ != nullptr) {
    LC_ASSIGN_OR_RETURN(bulk.tls, rpc::TlsContext::Server(identity_.key_path, identity_.cert_path));
    bulk.authorizer = authorizer_;
    tls = security::ServerTls(identity_.key_path, identity_.cert_path, credentials_->ca_path(),
                              /*verify_clients=*/false);
  }
  LC_ASSIGN_OR_RETURN(bulk_, BulkServer::Start(bulk, reader_.get()));
  // The bulk path is announced on the advertised host, with its own bound port.
  std::string data_advertise =
      options_.advertise.empty() ? "" : rpc::HostOf(options_.advertise) + ":0";
  data_address_ =
      rpc::AdvertisedAddress(data_advertise, bulk_->address(), Advertised(bulk_->address()));
  MutexLock lock(&address_mu_);
  LC_ASSIGN_OR_RETURN(
      rpc::StartedServer started,
      rpc::StartServer(options_.listen, {service_.get()}, tls,
                       {options_.metrics, "lakecache_worker_rpc_duration_seconds"}));
  server_ = std::move(started.server);
  address_ =
      rpc::AdvertisedAddress(options_.advertise, started.address, Advertised(started.address));
  return Status::Ok();
}

std::string WorkerServer::address() const {
  MutexLock lock(&address_mu_);
  return address_;
}

std::string WorkerServer::data_address() const { return data_address_; }

WorkerServer::~WorkerServer() {
  Shutdown();
  std::error_code ec;
  if (!temp_dir_.empty()) std::filesystem::remove_all(temp_dir_, ec);
}

rpc::HealthState WorkerServer::Health() const {
  std::string worker = "worker " + id_;
  std::string master;
  {
    MutexLock lock(&mu_);
    master = master_;
  }
  if (!registered_) {
    return {false, worker + " is not registered with " +
                       (master.empty() ? "master " + options_.master : "master " + master)};
  }
  int64_t silent = SteadyNowMs() - last_answer_ms_.load();
  int64_t interval = interval_ms_.load();
  if (silent > rpc::kSilentIntervals * interval) {
    return {false, worker + ": master " + master + " has not answered for " +
                       std::to_string(silent / 1000) + " s"};
  }
  return {true, worker + " registered with master " + master};
}

void WorkerServer::Shutdown() {
  metrics_.Reset();  // no scrape reads what is stopped below
  {
    MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (health_ != nullptr) health_->Shutdown();  // a probe sees it go at once
  stop_cv_.SignalAll();
  if (heartbeat_.joinable()) heartbeat_.join();
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_->Wait();  // every handler has returned: none reads what is torn down below
  }
  // Reads of peers in flight fail (their blocks come from the store or not at all), so that no
  // bulk server thread waits on a peer while the server stops.
  if (peers_ != nullptr) peers_->Stop();
  if (bulk_ != nullptr) bulk_->Shutdown();  // requests in flight fail: clients read elsewhere
  prefetch_pool_.reset();                   // finishes queued prefetches
  read_pool_.reset();  // every ReadBlock has finished with the server (Shutdown waited)
  load_pool_.reset();
  // Last: nothing publishes any more, so no memory a mount still reads is reused. Mounts then let
  // go of the shared memory and read over the network.
  {
    MutexLock lock(&node_mu_);
    node_.reset();
  }
  if (blocks_ != nullptr) blocks_->Flush();
}

void WorkerServer::FillShmStats(rpc::WorkerStats* stats) const {
  if (replicas_ != nullptr) {
    stats->set_replica_blocks(replicas_->count());
    stats->set_replica_bytes(replicas_->bytes());
    stats->set_replicas_erased(replicas_->erased());
    stats->set_holder_blocks(holders_->blocks());
    PeerReadStats peer = peers_->Stats();
    stats->set_replicas_fetched(peer.replicas_fetched);
    stats->set_replica_silent_peers(peer.silent_peers);
    stats->set_replica_redirects(peer.redirects);
    stats->set_replica_holder_misses(peer.holder_misses);
    stats->set_replica_digest_mismatches(peer.digest_mismatches);
  }
  if (arena_ == nullptr) return;
  ShmArenaStats s = arena_->Stats();
  stats->set_shm_sessions(s.sessions);
  stats->set_shm_published_bytes(s.published_bytes);
  stats->set_shm_deferred_bytes(s.deferred_bytes);
  stats->set_shm_publish_failures(s.publish_failures);
  MutexLock lock(&node_mu_);
  if (node_ != nullptr) stats->set_shm_refused(node_->peers_refused());
}

void WorkerServer::FillInfo(rpc::WorkerInfo* info) const {
  info->set_id(id_);
  info->set_address(address());
  uint64_t capacity = 0, used = 0;
  for (const TierStats& t : blocks_->Stats().tiers) {
    capacity += t.capacity_bytes;
    used += t.used_bytes;
  }
  info->set_capacity_bytes(capacity);
  info->set_used_bytes(used);
  info->set_start_time_ms(start_time_ms_);
  info->set_host_id(options_.host_id.empty() ? rpc::HostId() : options_.host_id);
  if (!node_path_.empty()) info->set_node_socket(node_path_);
  info->set_data_address(data_address_);
  info->set_insecure(options_.insecure);
}

}  // namespace lakecache
