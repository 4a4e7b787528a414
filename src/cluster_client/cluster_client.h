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
#include "common/mutex.h"
#include "common/rendezvous.h"
#include "common/result.h"
#include "common/units.h"
#include "rpc/health.h"
#include "rpc/tls.h"
#include "security/auth.h"
#include "ufs/object_store.h"

namespace lakecache::rpc {
class ClientReport;
}  // namespace lakecache::rpc

namespace lakecache {

namespace rpc {
class BlockId;
class NoteWriteRequest;
class WriteBodyChunk;
class WriteCallRequest;
class WriteCallResponse;
class WrittenObject;
class ClusterView;
class ReadBlockRequest;
class TlsContext;
}  // namespace rpc

// A namespace as the master describes it.
struct ClusterNamespace {
  std::string name;
  std::string uri;
  uint64_t block_size = 0;
  Duration metadata_ttl{};
  bool immutable = false;
  std::string key_prefix;  // "" or ending in '/'
  bool read_only = false;  // what its mounts may do to the store (see NamespaceConfig)
  bool allow_overwrite = false;
  bool allow_delete = false;
};

// One folder (delimiter "/") as the master's metadata cache holds it.
struct ClusterListing {
  std::vector<ObjectInfo> files;  // bucket-relative keys
  std::vector<std::string> dirs;  // bucket-relative prefixes ending in '/'
  bool exists = false;
};

struct ClusterWorker {
  std::string id;
  std::string address;
  uint64_t capacity_bytes = 0;
  bool down = false;  // marked down by this client
};

struct ClusterClientOptions {
  std::chrono::milliseconds rpc_timeout{10000};      // one master call
  std::chrono::milliseconds connect_timeout{10000};  // Connect: how long to wait for the master
  // Read blocks of a worker on this host where they lie: its memory cache mapped from shared
  // memory (node socket), its cache files opened and verified here. False: over the network.
  bool short_circuit = true;
  // Map each shared block's pages on first use (see ShmReader::Map).
  bool prefault = false;
  // How blocks are streamed: kBulk, the worker's bulk data path (framed TCP, see BulkClient) when
  // it advertises one, else gRPC; kGrpc: always ReadBlock over gRPC.
  enum class Transport { kBulk, kGrpc };
  Transport transport = Transport::kBulk;
  size_t bulk_connections = 4;  // per worker
  // A silent worker (stopped, hung, cut off) gives TCP no sign, so a read waiting on it would wait
  // out its deadline. Once a read over the bulk path has waited `probe_after` on a worker, the
  // client pings it on a connection of its own; no answer within `probe_timeout`, and the worker
  // is marked down and its reads fail over to the next worker at once. A worker that answers is
  // only slow (its object store is) and is waited for.
  std::chrono::milliseconds probe_after{1000};
  std::chrono::milliseconds probe_timeout{2000};
  // The client role's credentials (security/auth.h): TLS to the master and to every worker (each
  // verified against its own name), the token on every call and bulk connection. Null: plain.
  std::shared_ptr<const security::ClusterCredentials> credentials;
};

class ClusterClient {
 public:
  // Connects to the master at HOST:PORT and loads the namespaces and the view. Fails with a clear
  // message when the master does not answer within connect_timeout.
  static Result<std::shared_ptr<ClusterClient>> Connect(const std::string& master,
                                                        ClusterClientOptions options = {});
  ~ClusterClient();
  ClusterClient(const ClusterClient&) = delete;
  ClusterClient& operator=(const ClusterClient&) = delete;

  const std::string& master() const { return master_; }
  const std::vector<ClusterNamespace>& namespaces() const { return namespaces_; }

  // `revalidate`: the master lists the folder again now rather than serve its cached listing.
  Result<ClusterListing> ListDir(const std::string& ns, const std::string& dir,
                                 Clock::time_point deadline, bool revalidate = false);
  // kNotFound when nothing is at `path`; is_dir tells a folder.
  Result<ObjectInfo> Stat(const std::string& ns, const std::string& path, bool* is_dir,
                          Clock::time_point deadline);

  // Reads [offset, offset + dst.size()) of one block (clamped to its end) from the worker that
  // owns it, failing over in rendezvous order. Returns the bytes read.
  Result<size_t> ReadBlock(const rpc::BlockId& block, uint64_t offset, std::span<char> dst,
                           Clock::time_point deadline);

  // The workers of the current view, in id order.
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
  std::vector<ClusterWorker> Workers() const;
  uint64_t epoch() const;
  // Serving when the master answered a view fetch within three refresh intervals, with the live
  // workers it names; otherwise how long the master has been silent.
  rpc::HealthState Health() const EXCLUDES(view_mu_);
  // Fetches the view now (also done every heartbeat interval in the background). One refresh runs
  // at a time, and a view older than the installed one (a lower epoch) is not installed.
  Status RefreshView() EXCLUDES(refresh_mu_, view_mu_);
  // The block from the shared memory of a worker on this host, anchored while referenced; null
  // when no such worker holds it in memory. No call to any worker.
  BlockRef FindLocal(const BlockKey& key) const EXCLUDES(view_mu_);
  bool LocalContains(const BlockKey& key) const EXCLUDES(view_mu_);
  // True when the block's owner is a worker on this host whose memory this client maps: the
  // node's cache holds it, so this client need not keep a copy.
  bool OwnedLocally(const BlockKey& key) const EXCLUDES(view_mu_);
  // The cache file of the block at its owner, when the owner is on this host (one LocateBlock
  // call); kNotFound when it has none, or the owner is elsewhere.
  Result<std::string> LocateLocal(const BlockKey& key, Clock::time_point deadline)
      EXCLUDES(view_mu_);
  // Mounts of workers' shared memory in the current view, and the bytes they map.
  size_t local_sessions() const EXCLUDES(view_mu_);
  uint64_t local_mapped_bytes() const EXCLUDES(view_mu_);

  // Counters: blocks found in a co-located worker's memory; blocks read from its cache files;
  // ranges streamed over gRPC; every call made to a worker (ReadBlock over gRPC or the bulk path,
  // LocateBlock); ranges read over the bulk data path.
  uint64_t local_memory_hits() const { return local_memory_hits_.load(); }
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
  void SetReporter(std::function<void(rpc::ClientReport*)> reporter) EXCLUDES(reporter_mu_);

  // The workers in the order a block with this key hash tries them (ids); for tests and tools.
  std::vector<std::string> PlacementOrder(uint64_t key_hash) const;

 private:
  struct Peer;
  struct Worker;
  struct View;
  struct NodeSession;
  ClusterClient(std::string master, ClusterClientOptions options);
  void RefreshLoop() EXCLUDES(stop_mu_, view_mu_);
  // Probes the workers reads have waited on longer than probe_after, and fails over from those
  // that do not answer; until the client stops.
  void WatchLoop() EXCLUDES(stop_mu_, view_mu_);
  // Whether the client is stopping, after waiting up to `period` for it.
  bool WaitForStop(std::chrono::milliseconds period) EXCLUDES(stop_mu_);
  std::shared_ptr<const View> CurrentView() const EXCLUDES(view_mu_);
  // The view `got` describes, keeping the peers of `old` that are the same incarnation and the
  // shared memory of those whose node socket is still open (mapping that of new co-located ones).
  std::shared_ptr<const View> BuildView(const rpc::ClusterView& got, const View& old) const;
  // Installs a view without the shared memory of workers that hung up (the master may be down).
  void DropClosedSessions() EXCLUDES(refresh_mu_, view_mu_);
  void MarkDown(Peer& peer) EXCLUDES(view_mu_);
  // Runs `call` on the workers in rendezvous order of `key` until one answers or fails with an
  // answer about the request itself (not a failed peer). `what` names it in messages.
  Status OnWorkers(const std::string& key, const std::string& what,
                   const std::function<Status(const Worker&)>& call, Clock::time_point deadline);
  // Reads the block from `worker` over gRPC's ReadBlock stream.
  Result<size_t> ReadStreamed(const Worker& worker, const rpc::ReadBlockRequest& request,
                              std::span<char> dst, Clock::time_point deadline);

  const std::string master_;
  const ClusterClientOptions options_;
  std::shared_ptr<const rpc::TlsContext> bulk_tls_;  // from options_.credentials; null: plain
  struct MasterStub;
  std::unique_ptr<MasterStub> stub_;
  std::vector<ClusterNamespace> namespaces_;

  // Held for a whole refresh: each builds on the installed view, so two at once would each open a
  // channel for a new worker and one would lose a down mark set meanwhile. Taken before view_mu_.
  Mutex refresh_mu_ ACQUIRED_BEFORE(view_mu_);
  Mutex reporter_mu_;
  std::function<void(rpc::ClientReport*)> reporter_ GUARDED_BY(reporter_mu_);
  mutable Mutex view_mu_;
  // Replaced whole on refresh, never changed once installed (readers share it without the lock).
  std::shared_ptr<const View> view_ GUARDED_BY(view_mu_);
  // At least these; longer cluster settings (heartbeat interval and timeout) are followed. A
  // mount polls the master at most once a second, however often the workers heartbeat.
  static constexpr std::chrono::milliseconds kMinRefreshInterval{1000};
  static constexpr std::chrono::milliseconds kMinDownPeriod{5000};
  std::chrono::milliseconds refresh_interval_ GUARDED_BY(view_mu_){kMinRefreshInterval};
  std::chrono::milliseconds down_period_ GUARDED_BY(view_mu_){kMinDownPeriod};
  std::unique_ptr<rpc::ClusterView> last_got_ GUARDED_BY(refresh_mu_);  // the last view fetched
  std::atomic<int64_t> last_view_ms_{0};  // steady-clock ms of the last view fetched

  Mutex stop_mu_;
  CondVar stop_cv_;
  bool stopping_ GUARDED_BY(stop_mu_) = false;
  std::thread refresher_;
  std::thread watcher_;
  std::atomic<uint64_t> short_circuit_reads_{0};
  mutable std::atomic<uint64_t> local_memory_hits_{0};
  std::atomic<uint64_t> worker_calls_{0};
  std::atomic<uint64_t> streamed_reads_{0};
  std::atomic<uint64_t> bulk_reads_{0};
  std::atomic<uint64_t> silent_workers_{0};
};

}  // namespace lakecache
