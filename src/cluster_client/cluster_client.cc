#include "cluster_client/cluster_client.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "cluster_client/cluster_view.h"
#include "cluster_client/grpc_master_client.h"
#include "cluster_client/live_view.h"
#include "cluster_client/node_memory.h"
#include "cluster_client/owner_failover.h"
#include "cluster_client/worker_prober.h"
#include "cluster_client/worker_streams.h"
#include "rpc/block_frame.h"
#include "rpc/grpc_util.h"
#include "rpc/node_socket.h"

namespace lakecache {

ClusterClient::ClusterClient(std::string master, std::unique_ptr<MasterClient> master_client,
                             ClusterClientOptions options,
                             std::shared_ptr<const rpc::TlsContext> bulk_tls)
    : master_(std::move(master)),
      options_(std::move(options)),
      bulk_tls_(std::move(bulk_tls)),
      master_client_(std::move(master_client)),
      live_(std::make_unique<LiveView>(*master_client_, options_, bulk_tls_)),
      failover_(std::make_unique<OwnerFailover>(*live_, master_, worker_calls_)),
      prober_(std::make_unique<WorkerProber>(*live_, options_, silent_workers_)) {}

Result<std::shared_ptr<ClusterClient>> ClusterClient::Connect(const std::string& master,
                                                              ClusterClientOptions options) {
  LC_ASSIGN_OR_RETURN(std::unique_ptr<GrpcMasterClient> masters,
                      GrpcMasterClient::Connect(master, options));
  return Open(master, std::move(masters), std::move(options));
}

Result<std::shared_ptr<ClusterClient>> ClusterClient::Open(
    std::string master, std::unique_ptr<MasterClient> master_client, ClusterClientOptions options) {
  std::shared_ptr<const rpc::TlsContext> bulk_tls;
  if (options.credentials != nullptr) {
    LC_ASSIGN_OR_RETURN(bulk_tls, rpc::TlsContext::Client(options.credentials->ca_path()));
  }
  std::shared_ptr<ClusterClient> client(new ClusterClient(
      std::move(master), std::move(master_client), std::move(options), std::move(bulk_tls)));
  LC_ASSIGN_OR_RETURN(client->namespaces_, client->master_client_->Namespaces());
  LC_RETURN_IF_ERROR(client->RefreshView());
  client->refresher_ = std::thread([c = client.get()] { c->RefreshLoop(); });
  client->watcher_ = std::thread([c = client.get()] { c->WatchLoop(); });
  return client;
}

ClusterClient::~ClusterClient() {
  {
    MutexLock lock(&stop_mu_);
    stopping_ = true;
  }
  stop_cv_.SignalAll();
  if (refresher_.joinable()) refresher_.join();
  if (watcher_.joinable()) watcher_.join();
}

rpc::HealthState ClusterClient::Health() const {
  std::chrono::milliseconds interval = live_->refresh_interval();
  size_t workers = live_->Current()->workers.size();
  int64_t silent = SteadyNowMs() - live_->last_view_ms();
  if (silent > rpc::kSilentIntervals * interval.count()) {
    return {false,
            "master " + master_ + " has not answered for " + std::to_string(silent / 1000) + " s"};
  }
  return {true, "master " + master_ + " answers, " + std::to_string(workers) + " live worker(s)"};
}

Status ClusterClient::RefreshView() { return live_->Refresh(); }

BlockRef ClusterClient::FindLocal(const BlockKey& key) const {
  BlockRef block = FindInNodeMemory(*live_->Current(), key);
  if (block != nullptr) local_memory_hits_.fetch_add(1, std::memory_order_relaxed);
  return block;
}

std::string ClusterClient::LocalNodeSocketOf(int arena_fd, std::string* id) const {
  std::shared_ptr<const ClientView> view = live_->Current();
  const ViewWorker* worker = LocalWorkerOfArena(*view, arena_fd);
  if (worker == nullptr) return "";
  *id = worker->id;
  return worker->node_socket;
}

bool ClusterClient::LocalContains(const BlockKey& key) const {
  return NodeMemoryContains(*live_->Current(), key);
}

namespace {
constexpr uint32_t kHostFailuresToSkip = 3;
constexpr int64_t kHostSkipMs = 60'000;
}  // namespace

bool ClusterClient::OwnedLocally(const BlockKey& key) const {
  std::shared_ptr<const ClientView> view = live_->Current();
  // Read through the host's worker, which keeps it as a replica (ReadThroughHost).
  if (options_.replicas && !view->local.empty() &&
      view->workers[view->local.front()].peer->bulk != nullptr &&
      SteadyNowMs() >= host_skip_until_ms_.load(std::memory_order_relaxed)) {
    return true;
  }
  return OwnerIsMapped(*view, key);
}

size_t ClusterClient::local_sessions() const { return live_->Current()->local.size(); }

uint64_t ClusterClient::local_mapped_bytes() const { return NodeMappedBytes(*live_->Current()); }

Result<std::string> ClusterClient::LocateLocal(const BlockKey& key, Clock::time_point deadline) {
  std::shared_ptr<const ClientView> view = live_->Current();
  std::vector<size_t> order = RendezvousOrder(StableKeyHash(key), view->nodes);
  int64_t now = SteadyNowMs();
  for (size_t i : order) {
    const ViewWorker& worker = view->workers[i];
    if (!worker.peer->up(now)) continue;
    // Only the owner: asking the others too would cost a call per miss.
    if (!options_.short_circuit || worker.host_id.empty() || worker.host_id != rpc::HostId()) {
      break;
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(GrpcDeadline(deadline, options_.rpc_timeout));
    rpc::LocateBlockRequest req;
    req.set_content_hi(key.content.hi);
    req.set_content_lo(key.content.lo);
    req.set_index(key.index);
    rpc::LocateBlockResponse resp;
    worker_calls_.fetch_add(1, std::memory_order_relaxed);
    grpc::Status st = worker.peer->stub->LocateBlock(&ctx, req, &resp);
    if (!st.ok()) return rpc::FromGrpcStatus(st, "worker " + worker.address);
    if (resp.path().empty()) break;
    return resp.path();
  }
  return Status::NotFound("no cache file of the block on this host");
}

void ClusterClient::SetReporter(std::function<void(rpc::ClientReport*)> reporter) {
  live_->SetReporter(std::move(reporter));
}

void ClusterClient::CountShortCircuitRead(const std::string& what) {
  if (short_circuit_reads_.fetch_add(1, std::memory_order_relaxed) == 0) {
    spdlog::info("reading blocks of {} from its cache files (short-circuit)", what);
  }
}

void ClusterClient::RefreshLoop() {
  bool warned = false;
  for (;;) {
    if (WaitForStop(live_->refresh_interval())) return;
    Status s = live_->Refresh();
    if (!s.ok()) live_->DropClosedSessions();  // a worker that hung up goes without the master
    if (!s.ok() && !warned) {
      spdlog::warn("cannot refresh the cluster view, reading through the last one: {}",
                   s.message());
      warned = true;
    } else if (s.ok() && warned) {
      spdlog::info("master {} reachable again", master_);
      warned = false;
    }
  }
}

bool ClusterClient::WaitForStop(std::chrono::milliseconds period) {
  auto until = std::chrono::steady_clock::now() + period;
  MutexLock lock(&stop_mu_);
  while (!stopping_ && stop_cv_.WaitUntil(&stop_mu_, until)) continue;
  return stopping_;
}

void ClusterClient::WatchLoop() {
  while (!WaitForStop(prober_->tick())) prober_->ProbeWaited(*live_->Current());
}

uint64_t ClusterClient::epoch() const { return live_->Current()->epoch; }

std::vector<ClusterWorker> ClusterClient::Workers() const {
  std::vector<ClusterWorker> out;
  int64_t now = SteadyNowMs();
  // Held for the loop: a range-for over Current()->workers would outlive the temporary, and a
  // refresh may drop the last other reference meanwhile.
  std::shared_ptr<const ClientView> view = live_->Current();
  for (const ViewWorker& w : view->workers) {
    out.push_back({w.id, w.address, w.capacity, !w.peer->up(now)});
  }
  return out;
}

std::vector<std::string> ClusterClient::PlacementOrder(uint64_t key_hash) const {
  std::shared_ptr<const ClientView> view = live_->Current();
  std::vector<std::string> ids;
  for (size_t i : RendezvousOrder(key_hash, view->nodes)) ids.push_back(view->workers[i].id);
  return ids;
}

Result<ClusterListing> ClusterClient::ListDir(const std::string& ns, const std::string& dir,
                                              const ListDirPage& page, Clock::time_point deadline,
                                              bool revalidate) {
  return master_client_->ListDir(ns, dir, page, deadline, revalidate);
}

Result<ObjectInfo> ClusterClient::Stat(const std::string& ns, const std::string& path, bool* is_dir,
                                       Clock::time_point deadline) {
  LC_ASSIGN_OR_RETURN(ClusterStat stat, master_client_->Stat(ns, path, deadline));
  *is_dir = stat.is_dir;
  return std::move(stat.info);
}

Status ClusterClient::NoteWrite(const rpc::NoteWriteRequest& request, Clock::time_point deadline) {
  return master_client_->NoteWrite(request, deadline);
}

Result<size_t> ClusterClient::ReadBlock(const rpc::BlockId& block, uint64_t offset,
                                        std::span<char> dst, Clock::time_point deadline) {
  std::shared_ptr<const ClientView> view = live_->Current();
  ContentId content = MakeContentId(block.ns(), block.key(), block.etag(), block.block_size());
  rpc::ReadBlockRequest req;
  *req.mutable_block() = block;
  req.set_offset(offset);
  req.set_length(dst.size());
  size_t read = 0;
  if (SteadyNowMs() >= host_skip_until_ms_.load(std::memory_order_relaxed)) {
    Result<size_t> replica = ReadThroughHost(*view, block, offset, dst, deadline);
    if (replica.ok()) {
      host_failures_.store(0, std::memory_order_relaxed);
      return replica;
    }
    const StatusCode code = replica.status().code();
    // Three failures in a row (or a worker that keeps no replicas): every block from its owner
    // for a while, the host's worker included.
    if (code == StatusCode::kUnimplemented ||
        (code != StatusCode::kNotFound &&
         host_failures_.fetch_add(1, std::memory_order_relaxed) + 1 >= kHostFailuresToSkip)) {
      host_failures_.store(0, std::memory_order_relaxed);
      host_skip_until_ms_.store(SteadyNowMs() + kHostSkipMs, std::memory_order_relaxed);
      spdlog::warn(
          "reading blocks of other hosts from their owners for {} s, not through this "
          "host's worker: {}",
          kHostSkipMs / 1000, replica.status().ToString());
    }
  }
  Status s = failover_->Run(
      *view, StableKeyHash(BlockKey{content, block.index()}), OwnerCall{"read", "reading"},
      [&] { return block.key() + " block " + std::to_string(block.index()); }, deadline,
      [&](const ViewWorker& worker) {
        Result<size_t> got =
            worker.peer->bulk != nullptr
                ? worker.peer->bulk->ReadBlock(
                      block, offset, dst, std::min(deadline, Clock::now() + kMaxBlockAttemptTime))
                : ReadStreamed(worker, req, dst, deadline);
        if (!got.ok()) return got.status();
        read = *got;
        if (worker.peer->bulk == nullptr) {
          streamed_reads_.fetch_add(1, std::memory_order_relaxed);
        } else if (bulk_reads_.fetch_add(1, std::memory_order_relaxed) == 0) {
          spdlog::info("reading blocks over the workers' bulk data path ({})",
                       bulk_tls_ != nullptr ? "TLS" : "plain text");
        }
        // A worker on this host now holds the block in its memory: map its pages here, off the
        // next reader's path (this read waited for a fetch anyway).
        if (worker.shm != nullptr && offset == 0) {
          BlockRef mapped = worker.shm->Find(BlockKey{content, block.index()});
        }
        return Status::Ok();
      });
  if (!s.ok()) return s;
  return read;
}

Result<size_t> ClusterClient::ReadThroughHost(const ClientView& view, const rpc::BlockId& block,
                                              uint64_t offset, std::span<char> dst,
                                              Clock::time_point deadline) {
  if (!options_.replicas || view.local.empty()) return Status::NotFound("no worker on this host");
  const ViewWorker& host = view.workers[view.local.front()];
  const int64_t now = SteadyNowMs();
  if (host.peer->bulk == nullptr || !host.peer->up(now)) {
    return Status::Unavailable("this host's worker is not reachable");
  }
  ContentId content = MakeContentId(block.ns(), block.key(), block.etag(), block.block_size());
  std::vector<size_t> order =
      RendezvousOrder(StableKeyHash(BlockKey{content, block.index()}), view.nodes);
  auto owner = std::find_if(order.begin(), order.end(),
                            [&](size_t i) { return view.workers[i].peer->up(now); });
  if (owner == order.end() || view.workers[*owner].shm != nullptr) {
    return Status::NotFound("owned on this host");  // its owner is asked as for any block
  }
  rpc::BlockReadRequest request;
  request.block = block;
  request.offset = offset;
  request.length = dst.size();
  request.flags = rpc::kReadAsReplica;
  auto attempt_deadline = [&] { return std::min(deadline, Clock::now() + kMaxBlockAttemptTime); };
  if (host.shm != nullptr) {
    // Its memory is mapped here: the worker only places the block there, and the bytes are copied
    // from the mapping, not sent over a socket (and through TLS) within this host.
    request.flags |= rpc::kReadPlaceOnly;
    Result<rpc::BlockReplyHeader> placed = host.peer->bulk->Read(request, dst, attempt_deadline());
    if (!placed.ok()) return placed.status();
    if (!placed->status.ok()) return placed->status;
    if (placed->data_length > 0) {  // not kept in its memory (its replica share is 0%, ...)
      replica_reads_.fetch_add(1, std::memory_order_relaxed);
      return placed->data_length;
    }
    if (BlockRef mapped = host.shm->Find(BlockKey{content, block.index()}); mapped != nullptr) {
      const size_t n = offset < mapped->size() ? std::min(dst.size(), mapped->size() - offset) : 0;
      std::memcpy(dst.data(), mapped->data() + offset, n);
      replica_reads_.fetch_add(1, std::memory_order_relaxed);
      return n;
    }
    // Evicted already: the bytes themselves.
    request.flags &= static_cast<uint8_t>(~rpc::kReadPlaceOnly);
  }
  Result<rpc::BlockReplyHeader> got = host.peer->bulk->Read(request, dst, attempt_deadline());
  if (!got.ok()) return got.status();
  if (!got->status.ok()) return got->status;
  replica_reads_.fetch_add(1, std::memory_order_relaxed);
  return got->data_length;
}

uint64_t ClusterClient::Prefetch(const std::string& ns, const std::string& key,
                                 const std::string& etag, uint64_t size, uint64_t block_size,
                                 uint64_t first, uint64_t limit) {
  uint64_t blocks = block_size == 0 ? 0 : (size + block_size - 1) / block_size;
  uint64_t end = std::min(blocks, first + limit);
  if (first >= end) return 0;
  std::shared_ptr<const ClientView> view = live_->Current();
  if (view->workers.empty()) return end - first;
  ContentId content = MakeContentId(ns, key, etag, block_size);
  int64_t now = SteadyNowMs();
  std::map<size_t, rpc::PrefetchRequest> by_worker;
  for (uint64_t index = first; index < end; ++index) {
    BlockKey block{content, index};
    // Held in a co-located worker's memory (a warm epoch): nothing to ask for.
    if (NodeMemoryContains(*view, block)) continue;
    std::vector<size_t> order = RendezvousOrder(StableKeyHash(block), view->nodes);
    auto owner = std::find_if(order.begin(), order.end(),
                              [&](size_t i) { return view->workers[i].peer->up(now); });
    if (owner == order.end()) break;
    rpc::BlockId* id = by_worker[*owner].add_blocks();
    id->set_ns(ns);
    id->set_key(key);
    id->set_etag(etag);
    id->set_object_size(size);
    id->set_block_size(block_size);
    id->set_index(index);
  }
  for (const auto& [i, request] : by_worker) {
    const ViewWorker& worker = view->workers[i];
    grpc::ClientContext ctx;
    ctx.set_deadline(GrpcDeadline(Clock::now() + options_.rpc_timeout, options_.rpc_timeout));
    rpc::PrefetchResponse response;
    worker_calls_.fetch_add(1, std::memory_order_relaxed);
    grpc::Status st = worker.peer->stub->Prefetch(&ctx, request, &response);
    if (!st.ok()) {
      spdlog::debug("prefetch of {} at worker {}: {}", key, worker.address, st.error_message());
    }
  }
  return end - first;
}

Result<rpc::WrittenObject> ClusterClient::WriteBody(const rpc::WriteBodyChunk& header,
                                                    std::span<const char> data,
                                                    Clock::time_point deadline) {
  rpc::WrittenObject written;
  // Parts spread over the workers (the rendezvous order of key and part), so one file's upload
  // uses them all, and a worker that dies takes only its share of the parts to the next.
  Status s = failover_->Run(
      *live_->Current(), RendezvousSeed(header.key() + "#" + std::to_string(header.part_number())),
      OwnerCall{"write", "writing"}, [&] { return header.key(); }, deadline,
      [&](const ViewWorker& worker) {
        Result<rpc::WrittenObject> sent =
            SendWriteBody(worker, header, data, GrpcDeadline(deadline, options_.rpc_timeout * 30));
        if (!sent.ok()) return sent.status();
        written = std::move(*sent);
        return Status::Ok();
      });
  if (!s.ok()) return s;
  return written;
}

Result<rpc::WriteCallResponse> ClusterClient::WriteCall(const rpc::WriteCallRequest& request,
                                                        Clock::time_point deadline) {
  rpc::WriteCallResponse response;
  Status s = failover_->Run(
      *live_->Current(), RendezvousSeed(request.key()), OwnerCall{"write", "writing"},
      [&] { return request.key(); }, deadline,
      [&](const ViewWorker& worker) {
        grpc::ClientContext ctx;
        ctx.set_deadline(GrpcDeadline(deadline, options_.rpc_timeout * 30));
        return rpc::FromGrpcStatus(worker.peer->stub->WriteCall(&ctx, request, &response),
                                   "worker " + worker.address);
      });
  if (!s.ok()) return s;
  return response;
}

}  // namespace lakecache
