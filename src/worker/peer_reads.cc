#include "worker/peer_reads.h"

#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <algorithm>
#include <span>

#include "cluster_client/bulk_client.h"
#include "common/units.h"
#include "rpc/block_frame.h"
#include "rpc/lakecache.pb.h"

namespace lakecache {

Result<std::unique_ptr<PeerReads>> PeerReads::Make(PeerReadsOptions options) {
  std::shared_ptr<const rpc::TlsContext> tls;
  if (options.credentials != nullptr) {
    LC_ASSIGN_OR_RETURN(tls, rpc::TlsContext::Client(options.credentials->ca_path()));
  }
  std::unique_ptr<PeerReads> reads(new PeerReads(std::move(options), std::move(tls)));
  reads->watcher_ = std::thread([r = reads.get()] { r->WatchLoop(); });
  return reads;
}

PeerReads::~PeerReads() { Stop(); }

void PeerReads::Stop() {
  std::vector<Peer> peers;
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    peers = peers_;
  }
  stop_cv_.SignalAll();
  if (watcher_.joinable() && watcher_.get_id() != std::this_thread::get_id()) watcher_.join();
  for (const Peer& peer : peers) peer.bulk->AbortRequests();
}

void PeerReads::WatchLoop() {
  const auto tick = std::max(std::chrono::milliseconds(50), options_.probe_after / 4);
  while (true) {
    {
      auto until = Clock::now() + tick;
      MutexLock lock(&mu_);
      while (!stopping_ && stop_cv_.WaitUntil(&mu_, until)) continue;
      if (stopping_) return;
    }
    ProbeWaited();
  }
}

void PeerReads::ProbeWaited() {
  std::vector<Peer> peers;
  {
    MutexLock lock(&mu_);
    peers = peers_;
  }
  for (const Peer& peer : peers) {
    const auto now = Clock::now();
    const auto waited = now - std::min(now, peer.bulk->OldestRequest());
    {
      MutexLock lock(&mu_);
      auto answered = answered_.find(peer.id);
      // One ping per probe_after at most: a peer that answered is slow, not silent.
      if (waited < options_.probe_after ||
          (answered != answered_.end() && now - answered->second < options_.probe_after)) {
        continue;
      }
    }
    Status probe = peer.bulk->Probe(now + options_.probe_timeout);
    {
      MutexLock lock(&mu_);
      if (probe.ok()) {
        answered_[peer.id] = Clock::now();
        continue;
      }
      // Before the reads fail: their retries must not pick it again.
      silent_until_[peer.id] = Clock::now() + options_.silent_for;
      ++stats_.silent_peers;
    }
    const size_t failed = peer.bulk->AbortRequests();
    spdlog::warn(
        "worker {} at {} did not answer a ping within {} while a replica read waited {} on it: "
        "{}; its {} read(s) and the next {} go to the object store",
        peer.id, peer.data_address, FormatDuration(options_.probe_timeout),
        FormatDuration(std::chrono::duration_cast<std::chrono::milliseconds>(waited)),
        probe.message(), failed, FormatDuration(options_.silent_for));
  }
}

std::vector<std::string> PeerReads::SetView(const rpc::ClusterView& view) {
  std::vector<Peer> peers;
  std::vector<RendezvousNode> nodes;
  std::vector<std::string> ids;
  MutexLock lock(&mu_);
  for (const rpc::WorkerInfo& info : view.workers()) {
    nodes.push_back(PlacementNode(info.id(), info.capacity_bytes()));
    ids.push_back(info.id());
    if (info.id() == options_.self_id || info.data_address().empty()) continue;
    Peer peer{info.id(), info.data_address(), nullptr};
    auto kept = std::find_if(peers_.begin(), peers_.end(), [&](const Peer& p) {
      return p.id == peer.id && p.data_address == peer.data_address;
    });
    if (kept != peers_.end()) {
      peer.bulk = kept->bulk;
    } else {
      const bool tls = options_.credentials != nullptr;
      peer.bulk = std::make_shared<BulkClient>(
          peer.data_address,
          BulkClientOptions{options_.connections, tls_,
                            tls ? security::WorkerTlsName(peer.id) : std::string(),
                            options_.credentials});
    }
    peers.push_back(std::move(peer));
  }
  std::vector<std::string> left;
  for (const std::string& id : node_ids_) {
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) left.push_back(id);
  }
  epoch_ = view.epoch();
  peers_ = std::move(peers);
  nodes_ = std::move(nodes);
  node_ids_ = std::move(ids);
  return left;
}

uint64_t PeerReads::epoch() const {
  MutexLock lock(&mu_);
  return epoch_;
}

std::string PeerReads::OwnerOf(const BlockKey& key) const {
  MutexLock lock(&mu_);
  if (nodes_.empty()) return "";
  const std::string& owner = node_ids_[RendezvousPick(StableKeyHash(key), nodes_)];
  return owner == options_.self_id ? "" : owner;
}

bool PeerReads::InView(const std::string& id) const {
  MutexLock lock(&mu_);
  return std::find(node_ids_.begin(), node_ids_.end(), id) != node_ids_.end();
}

std::shared_ptr<BulkClient> PeerReads::PeerClient(const std::string& id) const {
  MutexLock lock(&mu_);
  if (stopping_) return nullptr;
  auto silent = silent_until_.find(id);
  if (silent != silent_until_.end() && Clock::now() < silent->second) return nullptr;
  for (const Peer& p : peers_) {
    if (p.id == id) return p.bulk;
  }
  return nullptr;
}

Result<std::shared_ptr<Block>> PeerReads::Fetch(const rpc::BlockId& id, const BlockKey& key,
                                                uint64_t length, const BlockAllocator& allocate) {
  const std::string owner = OwnerOf(key);
  if (owner.empty()) return Status::NotFound("no other worker owns the block");
  std::shared_ptr<BulkClient> owner_bulk = PeerClient(owner);
  if (owner_bulk == nullptr) {
    return Status::Unavailable("worker " + owner + " has no data address or was found silent");
  }
  std::shared_ptr<Block> block = allocate(length);
  std::span<char> dst(block->mutable_data(), length);
  // Listed before the owner is asked: it may send the next asker here at once.
  auto relay = std::make_shared<BlockRelay>(block, length);
  relays_.Add(key, relay);
  struct Unlist {
    RelayTable& relays;
    const BlockKey& key;
    BlockRelay& relay;
    ~Unlist() {
      relay.Fail();  // its readers waiting for bytes that did not land ask their owner
      relays.Remove(key, &relay);
    }
  } unlist{relays_, key, *relay};

  rpc::BlockReadRequest request;
  request.block = id;
  request.length = length;
  request.flags = rpc::kReadForReplica;
  request.requester = options_.self_id;
  auto deadline = [this] { return std::chrono::steady_clock::now() + options_.attempt_timeout; };
  auto counted = [this](auto field) {
    MutexLock lock(&mu_);
    ++(stats_.*field);
  };

  LC_ASSIGN_OR_RETURN(rpc::BlockReplyHeader reply,
                      owner_bulk->Read(request, dst, deadline(), relay.get()));
  if (!reply.status.ok()) return reply.status;
  if (!reply.digest) return Status::Internal("worker " + owner + " sent no digest for a replica");
  const uint64_t digest = *reply.digest;
  bool from_owner = reply.redirect.empty();
  uint64_t got = reply.data_length;
  if (!from_owner) {
    counted(&PeerReadStats::redirects);
    std::shared_ptr<BulkClient> holder = PeerClient(reply.redirect);
    Result<rpc::BlockReplyHeader> held = Status::NotFound("not in the view, or silent");
    if (holder != nullptr) {
      rpc::BlockReadRequest ask = request;
      ask.flags |= rpc::kReadHeldOnly;
      held = holder->Read(ask, dst, std::chrono::steady_clock::now() + options_.holder_timeout,
                          relay.get());
    }
    if (held.ok() && held->status.ok() && held->data_length == length &&
        XXH3_64bits(dst.data(), length) == digest) {
      got = held->data_length;
    } else {
      if (held.ok() && held->status.ok()) counted(&PeerReadStats::digest_mismatches);
      counted(&PeerReadStats::holder_misses);
      // Those reading from the relay ask their owner, and no one new finds it; the owner's bytes
      // go to a block of their own, not under the relay's readers.
      relay->Fail();
      relays_.Remove(key, relay.get());
      block = allocate(length);
      dst = std::span<char>(block->mutable_data(), length);
      request.flags |= rpc::kReadNoRedirect;
      LC_ASSIGN_OR_RETURN(reply, owner_bulk->Read(request, dst, deadline()));
      if (!reply.status.ok()) return reply.status;
      if (!reply.redirect.empty()) return Status::Internal("worker " + owner + " redirected again");
      from_owner = true;
      got = reply.data_length;
    }
  }
  if (got != length) {
    return Status::Corruption("worker sent " + std::to_string(got) + " bytes of a block of " +
                              std::to_string(length));
  }
  if (from_owner && XXH3_64bits(dst.data(), length) != digest) {
    counted(&PeerReadStats::digest_mismatches);
    return Status::Corruption("the block's bytes from worker " + owner +
                              " do not match its digest");
  }
  MutexLock lock(&mu_);
  ++stats_.replicas_fetched;
  stats_.bytes += length;
  return block;
}

PeerReadStats PeerReads::Stats() const {
  MutexLock lock(&mu_);
  return stats_;
}

}  // namespace lakecache
