// MasterServer: the control plane of a cluster, served over gRPC (rpc::MasterService).
//
// It owns the namespaces (each with its object store and the one MetadataCache every client's
// listings go through, so N clients listing a folder within the TTL cost one LIST) and the
// WorkerRegistry. Start opens and probes every namespace, then listens; Shutdown stops it. Calls
// are served on gRPC's threads; the object's methods are thread-safe. It also serves the admin
// commands (rpc::AdminService: load, report, free, stat) for the cluster (see ClusterAdmin).
// The calls of rpc::MasterService are MasterServiceImpl's (master_service.h); this class sets the
// master up, leads or follows with etcd, and keeps the loads' pins there.
#pragma once

#include <grpcpp/support/status.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>

#include "common/config.h"
#include "common/metrics.h"
#include "common/mutex.h"
#include "common/result.h"
#include "http/http_endpoint.h"
#include "membership/etcd_client.h"
#include "rpc/health.h"
#include "ufs/store_factory.h"

namespace grpc {
class Server;
class ServerContext;
class ServerCredentials;
}  // namespace grpc

namespace lakecache {

class NamespaceTable;
class WorkerRegistry;
class ClientTable;
class ClusterAdmin;
class MasterServiceImpl;
class AdminServiceImpl;
class StatusBoard;
class EtcdMembership;
class LeaderElection;
namespace security {
class Authorizer;
class ClusterCredentials;
}  // namespace security

struct MasterOptions {
  std::string listen;  // HOST:PORT; port 0 picks a free one
  StoreOptions store;  // how the namespaces' object stores are reached
  // The credentials folder (security/auth.h): TLS with tls.crt/tls.key, every call checked against
  // the role tokens, worker certificates issued with ca.key. Empty: plain text, no checks.
  std::string credentials;
  // HOST:PORT announced instead of the bound address (port 0: the bound port); empty: the bound
  // address.
  std::string advertise;
  bool insecure =
      false;  // serves plain text beyond loopback (--insecure): the cluster view says so
  // A Unix socket for the local health check (rpc/health.h); empty: none.
  std::string health_socket;
  // Non-null: the master's numbers (workers, namespaces, loads, its object-store requests and
  // gRPC calls) are recorded there, and a StatusBoard samples the workers for the status page.
  // Must outlive the master.
  metrics::Registry* metrics = nullptr;
  // etcd (--etcd): the workers' membership is kept there, shared by every master, and the masters
  // elect a leader. No endpoints: this master alone keeps the membership (the embedded default).
  EtcdOptions etcd;
  std::string etcd_prefix = "/lakecache/default/";  // every key of the cluster starts so
  std::chrono::seconds election_ttl{10};            // the leader's lease
  // How long Start waits for etcd to answer: members started together with the masters (a
  // Kubernetes rollout, a host's boot) serve only once they have elected a leader.
  std::chrono::seconds etcd_wait{60};
  std::string version;                              // shown on the status page
  std::chrono::milliseconds status_interval{2000};  // how often the status page samples workers
  // The on-disk index of listings (meta/listing_index.h): listings beyond `metadata_memory` live
  // there, and a restarted master serves the listings it had. Empty: none, all in memory.
  std::string metadata_dir;
  uint64_t metadata_memory = 512ull << 20;
};

class MasterServer {
 public:
  // Opens every namespace of `config` (a wrong endpoint, bucket or credentials fail here, naming
  // the namespace) and starts serving on `options.listen`.
  static Result<std::unique_ptr<MasterServer>> Start(const Config& config,
                                                     const MasterOptions& options);
  ~MasterServer();  // shuts down
  MasterServer(const MasterServer&) = delete;
  MasterServer& operator=(const MasterServer&) = delete;

  // The HOST:PORT it announces: the advertised address, else the one bound.
  const std::string& address() const { return address_; }

  // The status page's paths (StatusBoard::Pages); none without MasterOptions::metrics.
  std::map<std::string, HttpPage> StatusPages();

  // With etcd: whether this master leads, and the leader's address (empty while unknown).
  // Without: it leads, alone.
  bool leading() const;
  std::string leader() const;
  // OK on the leader (and on a master without etcd); on a follower the redirect to the leader
  // (RedirectToLeader) for a call only the leader serves.
  grpc::Status LeaderOnly(grpc::ServerContext* context) const;

  // Serving, with its namespaces and live workers in words, for the health check.
  rpc::HealthState Health();

  // Stops accepting calls and gives those in flight about 2 s before cancelling them. Idempotent.
  void Shutdown();

 private:
  MasterServer() = default;
  // Start's steps. The credentials folder: credentials_ and authorizer_ from it, and the server's
  // TLS. etcd: etcd_ and membership_ (feeding registry_). The services, complete when made (they
  // serve once the server starts). The status board, with options.metrics.
  Result<std::shared_ptr<grpc::ServerCredentials>> OpenCredentials(const std::string& dir);
  Status JoinEtcd(const Config& config, const MasterOptions& options);
  void MakeServices(const MasterOptions& options);
  void StartStatusBoard(const MasterOptions& options);

  // Expires silent workers every heartbeat interval until stopped (by Shutdown).
  void SweepWorkers(std::stop_token stop, Duration interval);
  // The election's report (on its thread).
  void LeaderChanged(bool leading, const std::string& leader);
  // With etcd: a load's pin or a free's unpin recorded under <prefix>pins/NS/PATH (the value
  // "recursive" or empty), and the recorded pins walked and pinned again by a new leader.
  std::string PinKey(const std::string& ns, const std::string& path) const;
  void NotePin(const std::string& ns, const std::string& path, bool pinned, bool recursive);
  void Repin();

  // Destroyed bottom-up: the server stops before the service and what it serves go.
  Config config_;
  std::unique_ptr<NamespaceTable> namespaces_;
  std::shared_ptr<EtcdClient> etcd_;  // with --etcd
  std::unique_ptr<WorkerRegistry> registry_;
  std::unique_ptr<EtcdMembership> membership_;  // with --etcd: feeds registry_
  std::unique_ptr<LeaderElection> election_;    // with --etcd
  // election_ for the calls served: set once it runs (the server serves before that).
  std::atomic<const LeaderElection*> elected_{nullptr};
  std::unique_ptr<ClientTable> clients_;  // the cluster mounts' reports
  std::shared_ptr<const security::Authorizer> authorizer_;
  std::shared_ptr<const security::ClusterCredentials> credentials_;
  std::unique_ptr<MasterServiceImpl> service_;
  std::unique_ptr<ClusterAdmin> admin_backend_;
  std::unique_ptr<AdminServiceImpl> admin_;
  std::unique_ptr<StatusBoard> status_;  // with metrics only
  metrics::Registry::Registration metrics_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<rpc::HealthServer> health_;  // after server_: stopped first
  std::string address_;
  bool led_by_other_ = false;  // the election thread's alone
  std::string etcd_prefix_;
  Mutex repin_mu_;
  bool repin_running_ GUARDED_BY(repin_mu_) = false;
  bool repin_again_ GUARDED_BY(repin_mu_) = false;  // walk the pins (again) once the walk ends
  std::atomic<bool> stopping_{false};               // Shutdown began
  std::thread repin_;  // Repin, started by the election thread, joined by Shutdown
  std::once_flag shutdown_once_;
  std::mutex sweep_mu_;  // for sweep_cv_ alone: the stop token is what the sweeper waits for
  std::condition_variable_any sweep_cv_;
  std::jthread sweeper_;  // last: stopped first
};

}  // namespace lakecache
