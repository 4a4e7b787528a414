// PeerReads: how a worker gets a block from the other workers of its cluster, instead of the
// object store, to keep it as a replica: a mount of its host asked for a block that another worker
// owns (kReadAsReplica), so that the next readers of the host find it in the host's own memory.
//
// The block's owner is the first worker in rendezvous order over the master's view (the order
// every mount uses; this worker itself is skipped). It is asked with kReadForReplica and this
// worker's id, and answers with the bytes or with a redirect to a worker that holds the block or
// is fetching it (HolderBook), always with the digest of the whole block it recorded. A
// redirected read asks the holder for what it holds (kReadHeldOnly: never a fetch there); when
// the holder fails it, the owner is asked again for the bytes themselves (kReadNoRedirect). Bytes
// whose XXH3-64 is not the owner's digest are refused, wherever they came from: a replica never
// spreads a corrupt or forged block. The connections present the worker role's token and verify
// each peer's own certificate name, as a mount's do.
//
// While a block lands here it is listed in relays() (worker/block_relay.h): a worker the owner
// sent here meanwhile gets its bytes as they arrive, so a chain of holders pipelines the block.
//
// A peer that goes silent (hung, stopped, cut off) gives TCP no sign: once a read has waited
// `probe_after` on it, a watcher pings it on a connection of its own; no answer within
// `probe_timeout`, and its reads in flight fail at once and it is skipped for `silent_for`, so the
// block comes from the store instead (the mount's read waits seconds, not a deadline). Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cache/block.h"
#include "cache/block_key.h"
#include "common/mutex.h"
#include "common/rendezvous.h"
#include "common/result.h"
#include "rpc/tls.h"
#include "security/auth.h"
#include "worker/block_relay.h"

namespace lakecache {

namespace rpc {
class BlockId;
class ClusterView;
}  // namespace rpc

class BulkClient;

struct PeerReadsOptions {
  std::string self_id;
  // The worker role's credentials (its token, ca.crt); null: plain text, no hello.
  std::shared_ptr<const security::ClusterCredentials> credentials;
  size_t connections = 4;  // per peer
  std::chrono::milliseconds attempt_timeout{30000};
  // A holder the owner sent us to: it has the block, or fetches it and sends it on as it lands; no
  // answer by then, and the owner is asked for the bytes themselves.
  std::chrono::milliseconds holder_timeout{5000};
  std::chrono::milliseconds probe_after{1000};
  std::chrono::milliseconds probe_timeout{2000};
  std::chrono::milliseconds silent_for{10000};
};

struct PeerReadStats {
  uint64_t replicas_fetched = 0;  // blocks got from peers
  uint64_t redirects = 0;         // answers that named another holder
  uint64_t holder_misses = 0;     // holders that did not have the block: asked the owner again
  uint64_t digest_mismatches = 0;
  uint64_t silent_peers = 0;  // peers found silent by a ping
  uint64_t bytes = 0;
};

class PeerReads {
 public:
  static Result<std::unique_ptr<PeerReads>> Make(PeerReadsOptions options);
  ~PeerReads();
  PeerReads(const PeerReads&) = delete;
  PeerReads& operator=(const PeerReads&) = delete;

  // The workers of the master's view; keeps the connections of those still in it. Returns the ids
  // of the workers that left it.
  std::vector<std::string> SetView(const rpc::ClusterView& view) EXCLUDES(mu_);
  uint64_t epoch() const EXCLUDES(mu_);

  // The id of the owner of `key` among the other workers of the view: "" when this worker is the
  // owner, or the view names no other worker.
  std::string OwnerOf(const BlockKey& key) const EXCLUDES(mu_);
  // Whether worker `id` is in the view (this worker included).
  bool InView(const std::string& id) const EXCLUDES(mu_);

  // The whole block `id` (its `length` bytes) from its owner or the holder the owner names, checked
  // against the owner's digest. kNotFound: no other worker owns it (read it from the store).
  Result<std::shared_ptr<Block>> Fetch(const rpc::BlockId& id, const BlockKey& key, uint64_t length,
                                       const BlockAllocator& allocate) EXCLUDES(mu_);

  PeerReadStats Stats() const EXCLUDES(mu_);
  // The blocks being fetched now, readable as they land.
  const RelayTable& relays() const { return relays_; }
  // Fails the reads in flight and every later Fetch (the worker is stopping: the reads its
  // server threads make of its peers must not hold up its shutdown).
  void Stop() EXCLUDES(mu_);

 private:
  struct Peer {
    std::string id;
    std::string data_address;
    std::shared_ptr<BulkClient> bulk;
  };
  using Clock = std::chrono::steady_clock;
  explicit PeerReads(PeerReadsOptions options, std::shared_ptr<const rpc::TlsContext> tls)
      : options_(std::move(options)), tls_(std::move(tls)) {}
  // The connections to worker `id`; null when it is not in the view, or was found silent lately.
  std::shared_ptr<BulkClient> PeerClient(const std::string& id) const EXCLUDES(mu_);
  void WatchLoop() EXCLUDES(mu_);
  // Pings the peers reads have waited on too long, as the header says.
  void ProbeWaited() EXCLUDES(mu_);

  const PeerReadsOptions options_;
  const std::shared_ptr<const rpc::TlsContext> tls_;  // client TLS trusting ca.crt; or null
  mutable Mutex mu_;
  uint64_t epoch_ GUARDED_BY(mu_) = 0;
  std::vector<Peer> peers_ GUARDED_BY(mu_);  // the other workers, by id
  std::vector<RendezvousNode> nodes_ GUARDED_BY(mu_);
  std::vector<std::string> node_ids_ GUARDED_BY(mu_);  // every worker of the view, this one too
  PeerReadStats stats_ GUARDED_BY(mu_);
  std::map<std::string, Clock::time_point> answered_ GUARDED_BY(mu_);  // a ping's last answer
  std::map<std::string, Clock::time_point> silent_until_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  CondVar stop_cv_;
  RelayTable relays_;
  std::thread watcher_;
};

}  // namespace lakecache
