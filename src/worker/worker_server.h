// WorkerServer: the data plane of a cluster. Holds a tiered BlockStore (memory, then disk
// directories) and serves block ranges to clients (rpc::WorkerService); a block it does not hold is
// fetched from the namespace's object store once, however many clients ask at the same time
// (the BlockStore's single-flight). Registers with the master and heartbeats its capacity and
// usage; when the master does not know it (the master restarted) it registers again.
//
// Identity: a worker is its key, kept in its first cache directory (`worker.key`, mode 0600); its
// id is the key's fingerprint (security/auth.h), so a restarted worker is the same node for
// placement and its disk cache serves again, and no worker can claim another's id without its key.
// A memory-only worker gets a new key each start. With credentials the worker asks the master for
// a certificate of its own for that key (kept beside it, `worker.crt`, renewed halfway through
// its life) and serves TLS with it; callers are checked against the token digests the master
// sends. Thread-safe; Shutdown (or the destructor) stops serving, stops heartbeating and writes
// the disk tier's queued blocks.
//
// Its files: the setup (worker_server.cc), the calls it serves (WorkerServiceImpl,
// worker_service.h), its identity and certificate (worker_identity.cc), its registration and
// heartbeats (worker_heartbeat.cc).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cache/block_store.h"
#include "common/config.h"
#include "common/metrics.h"
#include "common/mutex.h"
#include "common/result.h"
#include "common/thread_pool.h"
#include "meta/namespace_table.h"
#include "rpc/health.h"
#include "rpc/tls.h"
#include "security/auth.h"
#include "ufs/store_factory.h"
#include "worker/block_reader.h"
#include "worker/bulk_server.h"
#include "worker/holder_book.h"
#include "worker/node_server.h"
#include "worker/peer_reads.h"
#include "worker/replica_ledger.h"

namespace grpc {
class Channel;
class ClientContext;
class Server;
class Status;
}  // namespace grpc

namespace lakecache {

namespace rpc {
class WorkerInfo;
class WorkerStats;
}  // namespace rpc

class WorkerServiceImpl;

struct WorkerOptions {
  std::string listen = "127.0.0.1:0";  // port 0: any free port
  std::string master;  // HOST:PORT of the master, or a list of masters (comma-separated)
  StoreOptions store;
  bool probe = true;  // list each namespace root at start (a wrong bucket fails start-up)
  // The memory tier lives in shared memory that mounts on this host map (through the node
  // socket); false: private memory, co-located mounts read over the network path.
  bool shared_memory = true;
  std::string node_socket;      // empty: /tmp/lakecache-node-<worker id>.sock
  std::vector<uid_t> shm_uids;  // who may map it; empty: this process's uid
  // The bulk data path (BulkServer): HOST:PORT; "" is the host of `listen`, any free port.
  std::string data_listen;
  // The credentials folder (security/auth.h; the worker needs ca.crt and worker.token): TLS on the
  // gRPC and bulk paths with the worker's own certificate, every call checked. Empty: plain text.
  std::string credentials;
  // HOST:PORT registered instead of the bound address (port 0: the bound port), and its host with
  // the bulk path's bound port as the data address; empty: the bound addresses (a wildcard host
  // replaced by this host's name).
  std::string advertise;
  bool insecure = false;  // serves plain text beyond loopback (--insecure): registered as such
  // With credentials: how long a starting worker waits for the master to issue its certificate.
  std::chrono::milliseconds bootstrap_wait{30000};
  // The host it says it is on (WorkerInfo.host_id); empty: rpc::HostId(). For tests that make
  // workers of several hosts in one process.
  std::string host_id;
  // A Unix socket for the local health check (rpc/health.h); empty: none.
  std::string health_socket;
  // Non-null: the worker's counters (as Stats reports them) are read there at every scrape, and
  // its gRPC calls timed (lakecache_worker_rpc_duration_seconds). Must outlive the worker.
  metrics::Registry* metrics = nullptr;
};

// A worker's key and what it names: its id, and where its certificate is kept.
struct WorkerIdentity {
  std::string id;
  std::string key_path;   // DIR/worker.key
  std::string cert_path;  // DIR/worker.crt (with credentials)
};

// The worker key kept in `dir` (made on first use), or for an empty dir a fresh key in a private
// temporary folder (*temp_dir set: the caller removes it).
Result<WorkerIdentity> LoadOrCreateWorkerIdentity(const std::string& dir, std::string* temp_dir);

class WorkerServer {
 public:
  // Opens the cache (config.cache) and the namespaces, starts serving and starts registering with
  // the master in the background (a master that is down is retried every heartbeat interval).
  static Result<std::unique_ptr<WorkerServer>> Start(const Config& config,
                                                     const WorkerOptions& options);
  ~WorkerServer();
  WorkerServer(const WorkerServer&) = delete;
  WorkerServer& operator=(const WorkerServer&) = delete;

  std::string address() const EXCLUDES(address_mu_);  // the HOST:PORT it registers
  std::string data_address() const;                   // the bulk path's advertised HOST:PORT
  const std::string& id() const { return id_; }
  bool registered() const { return registered_.load(); }
  // Serving when registered and the master answered a heartbeat within three intervals; the
  // detail says which master, or how long it has been silent.
  rpc::HealthState Health() const;
  BlockStore& blocks() { return *blocks_; }
  // The shared memory of the memory tier, or null.
  const std::shared_ptr<ShmArena>& arena() const { return arena_; }
  // Replicas: the blocks kept for mounts of this host, the blocks whose holders this worker (as
  // their owner) knows, and the epoch of the view it has of its peers (0: none yet).
  size_t replica_count() const { return replicas_ != nullptr ? replicas_->count() : 0; }
  size_t holder_blocks() const { return holders_ != nullptr ? holders_->blocks() : 0; }
  uint64_t peer_epoch() const { return peers_ != nullptr ? peers_->epoch() : 0; }
  PeerReadStats peer_reads() const { return peers_ != nullptr ? peers_->Stats() : PeerReadStats{}; }
  // The node socket's path, empty without shared memory.
  std::string node_socket() const { return node_path_; }
  void Shutdown();  // idempotent

  // One call to the master takes at most this long, waiting for a master that is down included.
  static constexpr std::chrono::milliseconds kMasterCallTimeout{5000};

 private:
  WorkerServer() = default;
  // Start's steps: the cache (and its shared memory); the credentials and a certificate; the node
  // socket; the service, complete when made; the bulk path and the gRPC server.
  Status OpenCache();
  Status OpenCredentials();
  Status StartNodeSocket();
  void MakeService();
  Status StartServing() EXCLUDES(address_mu_);
  void HeartbeatLoop() EXCLUDES(mu_);
  // HeartbeatLoop's calls to `master`: a registration (which may set a new *interval), and a
  // heartbeat (*known false when the master does not know this worker: it registers again).
  grpc::Status RegisterWith(const std::string& master,
                            const std::shared_ptr<grpc::Channel>& channel, grpc::ClientContext* ctx,
                            std::chrono::milliseconds* interval);
  grpc::Status HeartbeatTo(const std::string& master, const std::shared_ptr<grpc::Channel>& channel,
                           grpc::ClientContext* ctx, std::chrono::milliseconds interval,
                           bool* known);
  // The other workers, for the replicas this one keeps: the master's view when its epoch is not
  // the one the peers have (a failure waits for the next heartbeat).
  void RefreshPeers(const std::shared_ptr<grpc::Channel>& channel, uint64_t epoch,
                    std::chrono::milliseconds interval);
  // With credentials: a certificate for the worker's key from the master, written to
  // identity_.cert_path; sets renew_at_. Waits for a master that is down until `deadline`.
  Status ObtainCertificate(std::chrono::system_clock::time_point deadline);
  // A still-good certificate kept from the last run (more than half its life left), if any.
  bool KeptCertificateUsable();
  // The token digests kept beside the key (worker.digests): saved whenever the master sends them,
  // loaded at start (false: none), so that a worker checks callers from the moment it serves.
  std::string DigestsPath() const;
  void SaveDigests(const google::protobuf::RepeatedPtrField<rpc::RoleDigest>& tokens);
  bool LoadDigests();
  // The masters of options_.master (a list, checked by Start).
  std::vector<std::string> MasterList() const;
  void FillInfo(rpc::WorkerInfo* info) const EXCLUDES(address_mu_);
  void FillShmStats(rpc::WorkerStats* stats) const EXCLUDES(node_mu_);

  Config config_;
  WorkerOptions options_;
  std::string id_;
  WorkerIdentity identity_;
  std::string temp_dir_;  // a memory-only worker's key lives here; removed at destruction
  std::shared_ptr<const security::ClusterCredentials> credentials_;  // the worker role's; or null
  std::shared_ptr<security::Authorizer> authorizer_;                 // with credentials
  std::chrono::system_clock::time_point renew_at_{};                 // heartbeat thread only
  // Known once the server listens, which is when calls (Stats: FillInfo) start: Start holds the
  // lock from before the server starts until the address is set.
  mutable Mutex address_mu_;
  std::string address_ GUARDED_BY(address_mu_);
  int64_t start_time_ms_ = 0;
  std::unique_ptr<NamespaceTable> namespaces_;
  std::shared_ptr<BlockStore> blocks_;
  std::unique_ptr<ThreadPool> prefetch_pool_;
  std::unique_ptr<ThreadPool> read_pool_;  // serves ReadBlock (see worker_service.cc)
  std::unique_ptr<ThreadPool> load_pool_;  // fetches LoadBlocks batches
  // Replicas (worker/block_reader.h): whom this worker, as an owner, sent where; its reads from
  // the other workers; the replicas it keeps. Made before the reader serves.
  std::unique_ptr<HolderBook> holders_;
  std::unique_ptr<PeerReads> peers_;
  std::atomic<bool> view_refused_logged_{false};  // the master refused the view once
  std::unique_ptr<ReplicaLedger> replicas_;
  std::unique_ptr<BlockReader> reader_;  // serves ReadBlock (and the bulk path)
  std::unique_ptr<WorkerServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<ShmArena> arena_;  // null without shared memory
  // Read by calls (Stats) on gRPC's threads, reset at shutdown: under node_mu_, so the order is
  // one that ThreadSanitizer sees too (gRPC's own hand-offs it does not).
  mutable Mutex node_mu_;
  std::unique_ptr<NodeServer> node_ GUARDED_BY(node_mu_);
  std::string node_path_;  // set before serving; empty without shared memory
  std::unique_ptr<BulkServer> bulk_;
  std::string data_address_;  // set before the gRPC server starts

  std::atomic<bool> registered_{false};
  // Steady-clock ms of the master's last answer, and the heartbeat interval it asks for.
  std::atomic<int64_t> last_answer_ms_{0};
  std::atomic<int64_t> interval_ms_{0};
  std::unique_ptr<rpc::HealthServer> health_;
  mutable Mutex mu_;
  CondVar stop_cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::string master_ GUARDED_BY(mu_);  // the master that answered last
  std::thread heartbeat_;
  metrics::Registry::Registration metrics_;  // removed first thing at shutdown
};

}  // namespace lakecache
