// WorkerServer: the data plane of a cluster. Holds a tiered BlockStore (memory, then disk
// directories) and serves block ranges to clients (rpc::WorkerService); a block it does not hold is
// fetched from the namespace's object store once, however many clients ask at the same time
// (the BlockStore's single-flight). Registers with the master and heartbeats its capacity and
// usage; when the master does not know it (the master restarted) it registers again.
//
// Identity: a worker's id is kept in its first cache directory (`worker-id`), so a restarted worker
// is the same node for placement and its disk cache serves again. A memory-only worker gets a new
// id each start. Thread-safe; Shutdown (or the destructor) stops serving, stops heartbeating and
// writes the disk tier's queued blocks.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cache/block_store.h"
#include "common/config.h"
#include "common/mutex.h"
#include "common/result.h"
#include "common/thread_pool.h"
#include "meta/namespace_table.h"
#include "rpc/tls.h"
#include "ufs/store_factory.h"
#include "worker/block_reader.h"
#include "worker/bulk_server.h"
#include "worker/node_server.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace lakecache {

namespace rpc {
class WorkerInfo;
}  // namespace rpc

struct WorkerOptions {
  std::string listen = "127.0.0.1:0";  // port 0: any free port
  std::string master;                  // HOST:PORT of the master
  StoreOptions store;
  bool probe = true;  // list each namespace root at start (a wrong bucket fails start-up)
  // The memory tier lives in shared memory that mounts on this host map (through the node
  // socket); false: private memory, co-located mounts read over the network path.
  bool shared_memory = true;
  std::string node_socket;      // empty: /tmp/lakecache-node-<worker id>.sock
  std::vector<uid_t> shm_uids;  // who may map it; empty: this process's uid
  // The bulk data path (BulkServer): HOST:PORT; "" is the host of `listen`, any free port.
  std::string data_listen;
  std::shared_ptr<const rpc::TlsContext> tls;  // a server context for the bulk path; null: plain
  // HOST:PORT registered instead of the bound address (port 0: the bound port), and its host with
  // the bulk path's bound port as the data address; empty: the bound addresses (a wildcard host
  // replaced by this host's name).
  std::string advertise;
  bool insecure = false;  // serves plain text beyond loopback (--insecure): registered as such
};

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
  BlockStore& blocks() { return *blocks_; }
  // The shared memory of the memory tier, or null.
  const std::shared_ptr<ShmArena>& arena() const { return arena_; }
  // The node socket's path, empty without shared memory.
  std::string node_socket() const { return node_ != nullptr ? node_->path() : std::string(); }
  void Shutdown();  // idempotent

  class Service;  // the rpc::WorkerService implementation (worker_server.cc)

 private:
  WorkerServer() = default;
  void HeartbeatLoop() EXCLUDES(mu_);
  void FillInfo(rpc::WorkerInfo* info) const EXCLUDES(address_mu_);

  Config config_;
  WorkerOptions options_;
  std::string id_;
  // Known once the server listens, which is when calls (Stats: FillInfo) start: Start holds the
  // lock from before the server starts until the address is set.
  mutable Mutex address_mu_;
  std::string address_ GUARDED_BY(address_mu_);
  int64_t start_time_ms_ = 0;
  std::unique_ptr<NamespaceTable> namespaces_;
  std::shared_ptr<BlockStore> blocks_;
  std::unique_ptr<ThreadPool> prefetch_pool_;
  std::unique_ptr<ThreadPool> read_pool_;  // serves ReadBlock (see worker_server.cc)
  std::unique_ptr<ThreadPool> load_pool_;  // fetches LoadBlocks batches
  std::unique_ptr<BlockReader> reader_;    // serves ReadBlock (and the bulk path)
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<ShmArena> arena_;  // null without shared memory
  std::unique_ptr<NodeServer> node_;
  std::unique_ptr<BulkServer> bulk_;
  std::string data_address_;  // set before the gRPC server starts

  std::atomic<bool> registered_{false};
  Mutex mu_;
  CondVar stop_cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread heartbeat_;
};

// The worker id kept in `dir` (created on first use: 16 random hex digits), or a fresh random id
// when dir is empty.
Result<std::string> LoadOrCreateWorkerId(const std::string& dir);

}  // namespace lakecache
