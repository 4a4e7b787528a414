// ClusterClient: a cluster-mode client's link to the master and the workers.
//
// From the master it takes the namespaces (no credentials: a cluster client never talks to the
// object store), folder listings and file attributes (the master's shared metadata cache), and the
// cluster view, refreshed every heartbeat interval in the background. Blocks come from workers:
// each block goes to the worker that wins rendezvous hashing over the live view, weighted by
// capacity; when that worker fails (connection refused, reset, timeout, killed mid-stream) the
// client marks it down and tries the next worker in the same order, so a read fails only when every
// worker has failed it. A worker marked down is tried again once the view shows it restarted, or
// after a heartbeat timeout. While the master is down, reads keep going to the workers of the last
// view. A worker that stops answering mid-read is found by a probe (see probe_after) and failed
// over the same way. Thread-safe.
//
// The parts: the master behind MasterClient (master_client.h), the view and its refresh
// (live_view.h), owner failover (owner_failover.h), the gRPC streams and the bulk path to a worker
// (worker_streams.h, bulk_client.h), the prober (worker_prober.h) and the node's shared memory
// (node_memory.h); this class ties them together behind the calls a mount makes.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "cache/block.h"
#include "cache/block_key.h"
#include "cluster_client/client_options.h"
#include "cluster_client/master_client.h"
#include "common/mutex.h"
#include "common/result.h"
#include "common/units.h"
#include "rpc/health.h"
#include "rpc/tls.h"
#include "ufs/object_store.h"

namespace lakecache {

namespace rpc {
class BlockId;
class ClientReport;
class NoteWriteRequest;
class WriteBodyChunk;
class WriteCallRequest;
class WriteCallResponse;
class WrittenObject;
}  // namespace rpc

struct ClientView;
class LiveView;
class OwnerFailover;
class WorkerProber;

struct ClusterWorker {
  std::string id;
  std::string address;
  uint64_t capacity_bytes = 0;
  bool down = false;  // marked down by this client
};

class ClusterClient {
 public:
  // Connects to the master at HOST:PORT (or a list of masters) and loads the namespaces and the
  // view. Fails with a clear message when the master does not answer within connect_timeout.
  static Result<std::shared_ptr<ClusterClient>> Connect(const std::string& master,
                                                        ClusterClientOptions options = {});
  // The same over `master_client` (a fake in tests); `master` names it in messages.
  static Result<std::shared_ptr<ClusterClient>> Open(std::string master,
                                                     std::unique_ptr<MasterClient> master_client,
                                                     ClusterClientOptions options = {});
  ~ClusterClient();
  ClusterClient(const ClusterClient&) = delete;
  ClusterClient& operator=(const ClusterClient&) = delete;

  const std::string& master() const { return master_; }
  const std::vector<ClusterNamespace>& namespaces() const { return namespaces_; }

  // `revalidate`: the master lists the folder again now rather than serve its cached listing.
  Result<ClusterListing> ListDir(const std::string& ns, const std::string& dir,
                                 const ListDirPage& page, Clock::time_point deadline,
                                 bool revalidate = false);
  // kNotFound when nothing is at `path`; is_dir tells a folder.
  Result<ObjectInfo> Stat(const std::string& ns, const std::string& path, bool* is_dir,
                          Clock::time_point deadline);

  // Reads [offset, offset + dst.size()) of one block (clamped to its end) from the worker that
  // owns it, failing over in rendezvous order. Returns the bytes read.
  Result<size_t> ReadBlock(const rpc::BlockId& block, uint64_t offset, std::span<char> dst,
                           Clock::time_point deadline);

  // Writes, made by a worker with its store credentials (this client holds none): the body of a
  // Put or of one part (`header` names the call; `data` streams in chunks), and the calls around
  // it. The first worker in rendezvous order of `key` that answers makes the call; a worker that
  // fails is marked down and the next one asked, as for reads.
  Result<rpc::WrittenObject> WriteBody(const rpc::WriteBodyChunk& header,
                                       std::span<const char> data, Clock::time_point deadline);
  Result<rpc::WriteCallResponse> WriteCall(const rpc::WriteCallRequest& request,
                                           Clock::time_point deadline);
  // Tells the master's metadata cache of a write, so every mount's next listing shows it.
  Status NoteWrite(const rpc::NoteWriteRequest& request, Clock::time_point deadline);

  // Asks the owners of blocks [first, first + limit) of one object version (clamped to its size)
  // to fetch them into their caches, one Prefetch call per worker, without waiting for the
  // fetches; blocks a co-located worker's memory holds are skipped. Best effort: a worker that
  // fails the call is skipped. Returns the blocks asked for (or found held).
  uint64_t Prefetch(const std::string& ns, const std::string& key, const std::string& etag,
                    uint64_t size, uint64_t block_size, uint64_t first, uint64_t limit);
  // The workers of the current view, in id order.
  std::vector<ClusterWorker> Workers() const;
  uint64_t epoch() const;
  // Serving when the master answered a view fetch within three refresh intervals, with the live
  // workers it names; otherwise how long the master has been silent.
  rpc::HealthState Health() const;
  // Fetches the view now (also done every heartbeat interval in the background). One refresh runs
  // at a time, and a view older than the installed one (a lower epoch) is not installed.
  Status RefreshView();
  // The block from the shared memory of a worker on this host, anchored while referenced; null
  // when no such worker holds it in memory. No call to any worker.
  BlockRef FindLocal(const BlockKey& key) const;
  bool LocalContains(const BlockKey& key) const;
  // The node socket of the worker on this host whose memory `arena_fd` is (the fd() of a block
  // FindLocal gave), and its id in *id; "" when it is none of theirs.
  std::string LocalNodeSocketOf(int arena_fd, std::string* id) const;
  // True when a worker on this host whose memory this client maps keeps the block: its owner, or
  // (with `replicas`) the worker it is read through, which keeps a replica. The node's cache
  // holds it, so this client need not keep a copy.
  bool OwnedLocally(const BlockKey& key) const;
  // The cache file of the block at its owner, when the owner is on this host (one LocateBlock
  // call); kNotFound when it has none, or the owner is elsewhere.
  Result<std::string> LocateLocal(const BlockKey& key, Clock::time_point deadline);
  // Mounts of workers' shared memory in the current view, and the bytes they map.
  size_t local_sessions() const;
  uint64_t local_mapped_bytes() const;

  // Counters: blocks found in a co-located worker's memory; blocks read from its cache files;
  // ranges streamed over gRPC; every call made to a worker (ReadBlock over gRPC or the bulk path,
  // LocateBlock); ranges read over the bulk data path.
  uint64_t local_memory_hits() const { return local_memory_hits_.load(); }
  // Blocks read through this host's worker, which keeps them as replicas.
  uint64_t replica_reads() const { return replica_reads_.load(); }
  uint64_t short_circuit_reads() const { return short_circuit_reads_.load(); }
  void CountShortCircuitRead(const std::string& what);
  uint64_t streamed_reads() const { return streamed_reads_.load(); }
  uint64_t worker_calls() const { return worker_calls_.load(); }
  uint64_t bulk_reads() const { return bulk_reads_.load(); }
  // Workers found silent by a probe while reads waited on them (each time one was).
  uint64_t silent_workers() const { return silent_workers_.load(); }

  // Fills the report sent with every view fetch (the mount's reads, for the master's status
  // page). Called on the refresh thread; `reporter` must stay valid until replaced or the client
  // is destroyed.
  void SetReporter(std::function<void(rpc::ClientReport*)> reporter);

  // The workers in the order a block with this key hash tries them (ids); for tests and tools.
  std::vector<std::string> PlacementOrder(uint64_t key_hash) const;

 private:
  ClusterClient(std::string master, std::unique_ptr<MasterClient> master_client,
                ClusterClientOptions options, std::shared_ptr<const rpc::TlsContext> bulk_tls);
  void RefreshLoop() EXCLUDES(stop_mu_);
  // Probes the workers reads have waited on longer than probe_after, and fails over from those
  // that do not answer; until the client stops.
  void WatchLoop() EXCLUDES(stop_mu_);
  // Whether the client is stopping, after waiting up to `period` for it.
  bool WaitForStop(std::chrono::milliseconds period) EXCLUDES(stop_mu_);
  // ReadBlock of a block a worker of another host owns, through the worker of this host (which
  // keeps it as a replica); fails when there is none or it fails: the owner is asked then.
  Result<size_t> ReadThroughHost(const ClientView& view, const rpc::BlockId& block, uint64_t offset,
                                 std::span<char> dst, Clock::time_point deadline);

  const std::string master_;
  const ClusterClientOptions options_;
  const std::shared_ptr<const rpc::TlsContext> bulk_tls_;  // from options_.credentials; null: plain
  const std::unique_ptr<MasterClient> master_client_;
  std::vector<ClusterNamespace> namespaces_;
  std::atomic<uint64_t> worker_calls_{0};
  std::atomic<uint64_t> silent_workers_{0};
  const std::unique_ptr<LiveView> live_;
  const std::unique_ptr<OwnerFailover> failover_;
  const std::unique_ptr<WorkerProber> prober_;

  Mutex stop_mu_;
  CondVar stop_cv_;
  bool stopping_ GUARDED_BY(stop_mu_) = false;
  std::thread refresher_;
  std::thread watcher_;
  std::atomic<uint64_t> short_circuit_reads_{0};
  mutable std::atomic<uint64_t> local_memory_hits_{0};
  std::atomic<uint64_t> streamed_reads_{0};
  std::atomic<uint64_t> bulk_reads_{0};
  std::atomic<uint64_t> replica_reads_{0};
  // Reads through the host's worker that failed in a row, and until when none is tried (one that
  // does not keep replicas, or an older version that refuses the flags, costs no more than that).
  std::atomic<uint32_t> host_failures_{0};
  std::atomic<int64_t> host_skip_until_ms_{0};
};

}  // namespace lakecache
