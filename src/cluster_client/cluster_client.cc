#include "cluster_client/cluster_client.h"

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/sync_stream.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "cache/block_file.h"
#include "cache/block_key.h"
#include "cache/shm_reader.h"
#include "cluster_client/bulk_client.h"
#include "master_client/master_set.h"
#include "rpc/block_chunk.h"
#include "rpc/grpc_util.h"
#include "rpc/lakecache.grpc.pb.h"
#include "rpc/node_socket.h"

namespace lakecache {
namespace {

constexpr auto kMaxAttemptTime = std::chrono::seconds(120);  // one worker, one block

// The point `deadline` names, as gRPC wants it (system clock), capped at `cap` from now.
std::chrono::system_clock::time_point GrpcDeadline(Clock::time_point deadline,
                                                   Clock::duration cap) {
  Clock::time_point now = Clock::now();
  Clock::duration left = deadline == Clock::time_point::max() ? cap : deadline - now;
  left = std::clamp<Clock::duration>(left, Clock::duration::zero(), cap);
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(left);
}

ObjectInfo ToObjectInfo(const rpc::ObjectEntry& e) {
  ObjectInfo info;
  info.key = e.key();
  info.size = e.size();
  info.etag = e.etag();
  info.mtime = e.mtime();
  return info;
}

const grpc::internal::RpcMethod& ReadBlockMethod() {
  static const grpc::internal::RpcMethod method("/lakecache.rpc.WorkerService/ReadBlock",
                                                grpc::internal::RpcMethod::SERVER_STREAMING);
  return method;
}

}  // namespace

struct ClusterClient::MasterStub {
  std::unique_ptr<MasterSet> masters;
  std::atomic<uint32_t> election_ttl_ms{0};  // from the last view: 0 without etcd

  using Call = std::function<grpc::Status(rpc::MasterService::Stub&, grpc::ClientContext*)>;

  // One attempt of a call the master answers from memory (the view, the namespaces, a write's
  // note): with several masters, short enough that a silent one leaves time to ask another within
  // the call's timeout.
  std::chrono::milliseconds QuickAttempt(std::chrono::milliseconds rpc_timeout) const {
    if (masters->addresses().size() == 1) return rpc_timeout;
    return std::min<std::chrono::milliseconds>(rpc_timeout, std::chrono::seconds(3));
  }
  // Runs `call` on the leading master, following redirects and failing over until `deadline`
  // (max: one call's timeout, plus two election leases with several masters).
  Status OnLeader(const Call& call, std::chrono::milliseconds rpc_timeout,
                  Clock::time_point deadline) {
    auto now = std::chrono::system_clock::now();
    auto until = now + rpc_timeout + 2 * std::chrono::milliseconds(election_ttl_ms.load());
    if (deadline != Clock::time_point::max()) {
      until =
          now + std::chrono::duration_cast<std::chrono::system_clock::duration>(
                    std::max<Clock::duration>(deadline - Clock::now(), Clock::duration::zero()));
    }
    return masters->Call(
        [&](const MasterSet::Master& m, grpc::ClientContext* ctx) {
          return call(*rpc::MasterService::NewStub(m.channel), ctx);
        },
        rpc_timeout, until);
  }
};

// One incarnation of a worker (id, address, start time): its channel and this client's down mark,
// shared by every view that shows the incarnation. Only the down mark changes, and it is atomic.
struct ClusterClient::Peer {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<rpc::WorkerService::Stub> stub;  // unary calls; blocks stream raw on `channel`
  std::unique_ptr<BulkClient> bulk;  // the worker's bulk data path, when it has one and it is used
  std::atomic<int64_t> down_until_ms{0};  // steady-clock ms; up once past it
  std::atomic<bool> node_tried{false};    // asked its node socket once
  std::atomic<int64_t> answered_ms{0};    // steady-clock ms of its last answered probe

  bool up(int64_t now_ms) const { return down_until_ms.load(std::memory_order_relaxed) <= now_ms; }
};

// A worker as one view shows it; never changed once the view is installed.
struct ClusterClient::Worker {
  std::string id;
  std::string address;
  uint64_t capacity = 0;
  int64_t start_time_ms = 0;
  std::string host_id;
  std::string node_socket;
  std::string data_address;
  std::shared_ptr<Peer> peer;
  std::shared_ptr<ShmReader> shm;  // its memory, mapped: a worker on this host
};

struct ClusterClient::View {
  uint64_t epoch = 0;
  std::vector<Worker> workers;        // by id
  std::vector<RendezvousNode> nodes;  // same order
  std::vector<size_t> local;          // the workers whose memory is mapped
};

namespace {

// Maps the memory of the worker behind `path`; null (with the reason logged once) when it may not.
std::shared_ptr<ShmReader> MapWorkerMemory(const std::string& id, const std::string& path,
                                           bool prefault) {
  rpc::NodeHello hello;
  Result<int> fd = rpc::ConnectNodeSocket(path, std::chrono::seconds(2), &hello);
  Status failed;
  if (!fd.ok()) {
    failed = fd.status();
  } else if (!hello.accepted) {
    ::close(*fd);
    failed = Status::AccessDenied(hello.reason);
  } else {
    ShmFds fds;
    fds.index = hello.fds[0];
    fds.anchors = hello.fds[1];
    fds.arenas.assign(hello.fds.begin() + 2, hello.fds.end());
    fds.session = *fd;
    Result<std::shared_ptr<ShmReader>> shm = ShmReader::Map(std::move(fds), prefault);
    if (shm.ok()) {
      spdlog::info("mapping the memory cache of worker {} on this host ({} MiB, shared memory)", id,
                   (*shm)->mapped_bytes() >> 20);
      return *shm;
    }
    failed = shm.status();
  }
  spdlog::warn(
      "cannot map the memory cache of worker {} on this host through {}: {}; reading its "
      "blocks over the network",
      id, path, failed.message());
  return nullptr;
}

}  // namespace

ClusterClient::ClusterClient(std::string master, ClusterClientOptions options)
    : master_(std::move(master)),
      options_(options),
      stub_(std::make_unique<MasterStub>()),
      view_(std::make_shared<View>()) {}

Result<std::shared_ptr<ClusterClient>> ClusterClient::Connect(const std::string& master,
                                                              ClusterClientOptions options) {
  LC_ASSIGN_OR_RETURN(std::vector<std::string> masters, ParseMasterList("--master", master));
  std::shared_ptr<ClusterClient> client(new ClusterClient(master, options));
  if (options.credentials != nullptr) {
    LC_ASSIGN_OR_RETURN(client->bulk_tls_, rpc::TlsContext::Client(options.credentials->ca_path()));
  }
  client->stub_->masters = std::make_unique<MasterSet>(
      std::move(masters),
      [credentials = options.credentials](const std::string& address) {
        return security::MasterChannel(address, credentials.get());
      },
      options.credentials != nullptr ? rpc::Transport::kTls : rpc::Transport::kPlainText);
  Status connected = client->stub_->masters->WaitForAny(std::chrono::system_clock::now() +
                                                        options.connect_timeout);
  if (connected.code() == StatusCode::kInvalidArgument) return connected;  // says what to pass
  if (!connected.ok()) {
    return Status::Unavailable(
        "cannot reach the " + client->stub_->masters->Describe() + " within " +
        FormatDuration(options.connect_timeout) +
        (options.credentials == nullptr
             ? " (is `lakecache master` running there? A master with credentials needs "
               "--credentials DIR or LAKECACHE_CREDENTIALS)"
             : " (is `lakecache master` running there, with credentials of the same CA as " +
                   options.credentials->dir() + "?)"));
  }
  rpc::NamespacesResponse namespaces;
  LC_RETURN_IF_ERROR(client->stub_->masters->Call(
      [&](const MasterSet::Master& m, grpc::ClientContext* ctx) {
        return rpc::MasterService::NewStub(m.channel)->GetNamespaces(ctx, rpc::NamespacesRequest(),
                                                                     &namespaces);
      },
      client->stub_->QuickAttempt(options.rpc_timeout),
      std::chrono::system_clock::now() + options.rpc_timeout));
  for (const rpc::NamespaceInfo& n : namespaces.namespaces()) {
    ClusterNamespace ns;
    ns.name = n.name();
    ns.uri = n.uri();
    ns.block_size = n.block_size();
    ns.metadata_ttl = std::chrono::milliseconds(n.metadata_ttl_ms());
    ns.immutable = n.immutable();
    ns.key_prefix = n.key_prefix();
    ns.read_only = n.read_only();
    ns.allow_overwrite = n.allow_overwrite();
    ns.allow_delete = n.allow_delete();
    client->namespaces_.push_back(std::move(ns));
  }
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
  std::chrono::milliseconds interval;
  size_t workers = 0;
  {
    MutexLock lock(&view_mu_);
    interval = refresh_interval_;
    workers = view_->workers.size();
  }
  int64_t silent = SteadyNowMs() - last_view_ms_.load();
  if (silent > rpc::kSilentIntervals * interval.count()) {
    return {false,
            "master " + master_ + " has not answered for " + std::to_string(silent / 1000) + " s"};
  }
  return {true, "master " + master_ + " answers, " + std::to_string(workers) + " live worker(s)"};
}

Status ClusterClient::RefreshView() {
  MutexLock refreshing(&refresh_mu_);
  rpc::ClusterView got;
  rpc::ClusterViewRequest request;
  {
    MutexLock lock(&reporter_mu_);
    if (reporter_) reporter_(request.mutable_client());
  }
  LC_RETURN_IF_ERROR(stub_->masters->Call(
      [&](const MasterSet::Master& m, grpc::ClientContext* ctx) {
        return rpc::MasterService::NewStub(m.channel)->GetClusterView(ctx, request, &got);
      },
      stub_->QuickAttempt(options_.rpc_timeout),
      std::chrono::system_clock::now() + options_.rpc_timeout));
  if (got.etcd()) {
    stub_->masters->NoteLeader(got.leader());
    stub_->election_ttl_ms = got.election_ttl_ms();
  }
  last_view_ms_ = SteadyNowMs();
  std::shared_ptr<const View> view = BuildView(got, *CurrentView());
  const uint32_t heartbeat_interval_ms = got.heartbeat_interval_ms();
  const uint32_t heartbeat_timeout_ms = got.heartbeat_timeout_ms();
  last_got_ = std::make_unique<rpc::ClusterView>(std::move(got));
  MutexLock lock(&view_mu_);
  if (view->epoch < view_->epoch) {  // an answer older than what is installed
    spdlog::debug("ignoring cluster view epoch {}: epoch {} is installed", view->epoch,
                  view_->epoch);
    return Status::Ok();
  }
  refresh_interval_ =
      std::max(kMinRefreshInterval, std::chrono::milliseconds(heartbeat_interval_ms));
  down_period_ = std::max(kMinDownPeriod, std::chrono::milliseconds(heartbeat_timeout_ms));
  if (view->epoch != view_->epoch) {
    spdlog::info("cluster view epoch {}: {} workers", view->epoch, view->workers.size());
  }
  view_ = std::move(view);
  return Status::Ok();
}

std::shared_ptr<const ClusterClient::View> ClusterClient::BuildView(const rpc::ClusterView& got,
                                                                    const View& old) const {
  auto view = std::make_shared<View>();
  view->epoch = got.epoch();
  const std::string& here = rpc::HostId();
  for (const rpc::WorkerInfo& info : got.workers()) {
    Worker worker{info.id(),      info.address(),     info.capacity_bytes(), info.start_time_ms(),
                  info.host_id(), info.node_socket(), info.data_address(),   nullptr,
                  nullptr};
    for (const Worker& w : old.workers) {
      // The same incarnation at the same address keeps its channel, its down mark and its mapped
      // memory while its node socket is open; a restarted worker starts afresh (up).
      if (w.id == info.id() && w.address == info.address() &&
          w.start_time_ms == info.start_time_ms() && w.data_address == info.data_address()) {
        worker.peer = w.peer;
        if (w.shm != nullptr && !rpc::NodeSocketClosed(w.shm->session_fd())) worker.shm = w.shm;
        if (w.shm != nullptr && worker.shm == nullptr) {
          w.shm->Close();  // reads in flight finish; the mappings go with the last of them
          spdlog::info("worker {} closed its shared memory: reading its blocks over the network",
                       w.id);
        }
      }
    }
    if (worker.peer == nullptr) {
      worker.peer = std::make_shared<Peer>();
      worker.peer->channel =
          security::WorkerChannel(info.address(), info.id(), options_.credentials.get());
      worker.peer->stub = rpc::WorkerService::NewStub(worker.peer->channel);
      if (options_.transport == ClusterClientOptions::Transport::kBulk &&
          !worker.data_address.empty()) {
        worker.peer->bulk = std::make_unique<BulkClient>(
            worker.data_address,
            BulkClientOptions{
                options_.bulk_connections, bulk_tls_,
                options_.credentials != nullptr ? security::WorkerTlsName(info.id()) : "",
                options_.credentials});
      }
    }
    if (options_.short_circuit && worker.shm == nullptr && !info.node_socket().empty() &&
        !info.host_id().empty() && info.host_id() == here &&
        !worker.peer->node_tried.exchange(true)) {
      worker.shm = MapWorkerMemory(info.id(), info.node_socket(), options_.prefault);
    }
    view->workers.push_back(std::move(worker));
  }
  std::sort(view->workers.begin(), view->workers.end(),
            [](const Worker& a, const Worker& b) { return a.id < b.id; });
  for (size_t i = 0; i < view->workers.size(); ++i) {
    const Worker& w = view->workers[i];
    // Weighted by capacity; a worker that reports none still gets a minimal share.
    view->nodes.push_back(PlacementNode(w.id, w.capacity));
    if (w.shm != nullptr) view->local.push_back(i);
  }
  return view;
}

void ClusterClient::DropClosedSessions() {
  MutexLock refreshing(&refresh_mu_);
  if (last_got_ == nullptr) return;
  std::shared_ptr<const View> current = CurrentView();
  bool closed = false;
  for (size_t i : current->local) {
    closed = closed || rpc::NodeSocketClosed(current->workers[i].shm->session_fd());
  }
  if (!closed) return;
  std::shared_ptr<const View> view = BuildView(*last_got_, *current);
  MutexLock lock(&view_mu_);
  if (view->epoch >= view_->epoch) view_ = std::move(view);
}

BlockRef ClusterClient::FindLocal(const BlockKey& key) const {
  std::shared_ptr<const View> view = CurrentView();
  for (size_t i : view->local) {
    if (BlockRef block = view->workers[i].shm->Find(key)) {
      local_memory_hits_.fetch_add(1, std::memory_order_relaxed);
      return block;
    }
  }
  return nullptr;
}

bool ClusterClient::LocalContains(const BlockKey& key) const {
  std::shared_ptr<const View> view = CurrentView();
  for (size_t i : view->local) {
    if (view->workers[i].shm->Contains(key)) return true;
  }
  return false;
}

bool ClusterClient::OwnedLocally(const BlockKey& key) const {
  std::shared_ptr<const View> view = CurrentView();
  if (view->local.empty()) return false;
  std::vector<size_t> order = RendezvousOrder(StableKeyHash(key), view->nodes);
  return !order.empty() && view->workers[order[0]].shm != nullptr;
}

size_t ClusterClient::local_sessions() const { return CurrentView()->local.size(); }

uint64_t ClusterClient::local_mapped_bytes() const {
  std::shared_ptr<const View> view = CurrentView();
  uint64_t bytes = 0;
  for (size_t i : view->local) bytes += view->workers[i].shm->mapped_bytes();
  return bytes;
}

Result<std::string> ClusterClient::LocateLocal(const BlockKey& key, Clock::time_point deadline) {
  std::shared_ptr<const View> view = CurrentView();
  std::vector<size_t> order = RendezvousOrder(StableKeyHash(key), view->nodes);
  int64_t now = SteadyNowMs();
  for (size_t i : order) {
    const Worker& worker = view->workers[i];
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
  MutexLock lock(&reporter_mu_);
  reporter_ = std::move(reporter);
}

void ClusterClient::CountShortCircuitRead(const std::string& what) {
  if (short_circuit_reads_.fetch_add(1, std::memory_order_relaxed) == 0) {
    spdlog::info("reading blocks of {} from its cache files (short-circuit)", what);
  }
}

void ClusterClient::RefreshLoop() {
  bool warned = false;
  for (;;) {
    std::chrono::milliseconds interval;
    {
      MutexLock lock(&view_mu_);
      interval = refresh_interval_;
    }
    if (WaitForStop(interval)) return;
    Status s = RefreshView();
    if (!s.ok()) DropClosedSessions();  // a worker that hung up is let go of without the master
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
  const auto tick = std::max(std::chrono::milliseconds(50), options_.probe_after / 4);
  while (!WaitForStop(tick)) {
    std::shared_ptr<const View> view = CurrentView();
    for (const Worker& worker : view->workers) {
      BulkClient* bulk = worker.peer->bulk.get();
      if (bulk == nullptr) continue;
      auto now = std::chrono::steady_clock::now();
      auto waited = now - std::min(now, bulk->OldestRequest());
      int64_t now_ms = SteadyNowMs();
      // One probe per probe_after at most: a worker that answered is slow, not silent.
      if (waited < options_.probe_after ||
          now_ms - worker.peer->answered_ms.load() < options_.probe_after.count()) {
        continue;
      }
      Status probe = bulk->Probe(now + options_.probe_timeout);
      if (probe.ok()) {
        worker.peer->answered_ms.store(SteadyNowMs());
        continue;
      }
      MarkDown(*worker.peer);
      size_t failed = bulk->AbortRequests();
      silent_workers_.fetch_add(1, std::memory_order_relaxed);
      spdlog::warn(
          "worker {} at {} did not answer a ping within {} while a read waited {} on it: {}; "
          "failing its {} read(s) over to the next workers",
          worker.id, worker.data_address, FormatDuration(options_.probe_timeout),
          FormatDuration(std::chrono::duration_cast<std::chrono::milliseconds>(waited)),
          probe.message(), failed);
    }
  }
}

std::shared_ptr<const ClusterClient::View> ClusterClient::CurrentView() const {
  MutexLock lock(&view_mu_);
  return view_;
}

uint64_t ClusterClient::epoch() const { return CurrentView()->epoch; }

std::vector<ClusterWorker> ClusterClient::Workers() const {
  std::vector<ClusterWorker> out;
  int64_t now = SteadyNowMs();
  // Held for the loop: a range-for over CurrentView()->workers would outlive the temporary, and a
  // refresh may drop the last other reference meanwhile.
  std::shared_ptr<const View> view = CurrentView();
  for (const Worker& w : view->workers) {
    out.push_back({w.id, w.address, w.capacity, !w.peer->up(now)});
  }
  return out;
}

std::vector<std::string> ClusterClient::PlacementOrder(uint64_t key_hash) const {
  std::shared_ptr<const View> view = CurrentView();
  std::vector<std::string> ids;
  for (size_t i : RendezvousOrder(key_hash, view->nodes)) ids.push_back(view->workers[i].id);
  return ids;
}

void ClusterClient::MarkDown(Peer& peer) {
  std::chrono::milliseconds period;
  {
    MutexLock lock(&view_mu_);
    period = down_period_;
  }
  peer.down_until_ms.store(SteadyNowMs() + period.count(), std::memory_order_relaxed);
}

Result<ClusterListing> ClusterClient::ListDir(const std::string& ns, const std::string& dir,
                                              Clock::time_point deadline, bool revalidate) {
  rpc::ListDirRequest req;
  req.set_ns(ns);
  req.set_dir(dir);
  req.set_revalidate(revalidate);
  rpc::ListDirResponse resp;
  LC_RETURN_IF_ERROR(
      stub_->OnLeader([&](rpc::MasterService::Stub& stub,
                          grpc::ClientContext* ctx) { return stub.ListDir(ctx, req, &resp); },
                      options_.rpc_timeout, deadline));
  ClusterListing listing;
  for (const rpc::ObjectEntry& e : resp.files()) listing.files.push_back(ToObjectInfo(e));
  listing.dirs.assign(resp.dirs().begin(), resp.dirs().end());
  listing.exists = resp.exists();
  return listing;
}

Result<ObjectInfo> ClusterClient::Stat(const std::string& ns, const std::string& path, bool* is_dir,
                                       Clock::time_point deadline) {
  rpc::StatRequest req;
  req.set_ns(ns);
  req.set_path(path);
  rpc::StatResponse resp;
  LC_RETURN_IF_ERROR(
      stub_->OnLeader([&](rpc::MasterService::Stub& stub,
                          grpc::ClientContext* ctx) { return stub.Stat(ctx, req, &resp); },
                      options_.rpc_timeout, deadline));
  *is_dir = resp.is_dir();
  return ToObjectInfo(resp.entry());
}

Result<size_t> ClusterClient::ReadBlock(const rpc::BlockId& block, uint64_t offset,
                                        std::span<char> dst, Clock::time_point deadline) {
  std::shared_ptr<const View> view = CurrentView();
  std::string what = block.key() + " block " + std::to_string(block.index());
  if (view->workers.empty()) {
    return Status::Unavailable("no workers in the cluster (master " + master_ + ") to read " +
                               what);
  }
  ContentId content = MakeContentId(block.ns(), block.key(), block.etag(), block.block_size());
  std::vector<size_t> order =
      RendezvousOrder(StableKeyHash(BlockKey{content, block.index()}), view->nodes);
  // Workers marked down go last: tried only when every other one has failed too.
  int64_t now = SteadyNowMs();
  std::stable_partition(order.begin(), order.end(),
                        [&](size_t i) { return view->workers[i].peer->up(now); });
  rpc::ReadBlockRequest req;
  *req.mutable_block() = block;
  req.set_offset(offset);
  req.set_length(dst.size());
  Status last;
  for (size_t i : order) {
    const Worker& worker = view->workers[i];
    // A reader's deadline bounds the whole read, failovers included.
    if (!last.ok() && Clock::now() >= deadline) {
      return Status::DeadlineExceeded("reading " + what +
                                      ": the deadline passed; last: " + last.message());
    }
    worker_calls_.fetch_add(1, std::memory_order_relaxed);
    Result<size_t> got =
        worker.peer->bulk != nullptr
            ? worker.peer->bulk->ReadBlock(block, offset, dst,
                                           std::min(deadline, Clock::now() + kMaxAttemptTime))
            : ReadStreamed(worker, req, dst, deadline);
    if (got.ok()) {
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
      return got;
    }
    Status s = got.status();
    if (!s.peer_failed()) return s;  // the object store's answer: the same everywhere
    if (worker.peer->up(SteadyNowMs())) {
      spdlog::warn("worker {} at {} failed reading {}: {}; trying the next worker", worker.id,
                   worker.address, what, s.message());
    }
    MarkDown(*worker.peer);
    last = std::move(s);
  }
  return Status::Unavailable("every worker failed reading " + what + "; last: " + last.message());
}

uint64_t ClusterClient::Prefetch(const std::string& ns, const std::string& key,
                                 const std::string& etag, uint64_t size, uint64_t block_size,
                                 uint64_t first, uint64_t limit) {
  uint64_t blocks = block_size == 0 ? 0 : (size + block_size - 1) / block_size;
  uint64_t end = std::min(blocks, first + limit);
  if (first >= end) return 0;
  std::shared_ptr<const View> view = CurrentView();
  if (view->workers.empty()) return end - first;
  ContentId content = MakeContentId(ns, key, etag, block_size);
  int64_t now = SteadyNowMs();
  std::map<size_t, rpc::PrefetchRequest> by_worker;
  for (uint64_t index = first; index < end; ++index) {
    BlockKey block{content, index};
    // Held in a co-located worker's memory (a warm epoch): nothing to ask for.
    bool local = false;
    for (size_t i : view->local) local = local || view->workers[i].shm->Contains(block);
    if (local) continue;
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
    const Worker& worker = view->workers[i];
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

Status ClusterClient::OnWorkers(const std::string& key, const std::string& what,
                                const std::function<Status(const Worker&)>& call,
                                Clock::time_point deadline) {
  std::shared_ptr<const View> view = CurrentView();
  if (view->workers.empty()) {
    return Status::Unavailable("no workers in the cluster (master " + master_ + ") to " + what);
  }
  std::vector<size_t> order = RendezvousOrder(RendezvousSeed(key), view->nodes);
  int64_t now = SteadyNowMs();
  std::stable_partition(order.begin(), order.end(),
                        [&](size_t i) { return view->workers[i].peer->up(now); });
  Status last;
  for (size_t i : order) {
    const Worker& worker = view->workers[i];
    if (!last.ok() && Clock::now() >= deadline) {
      return Status::DeadlineExceeded(what + ": the deadline passed; last: " + last.message());
    }
    worker_calls_.fetch_add(1, std::memory_order_relaxed);
    Status s = call(worker);
    if (s.ok() || !s.peer_failed()) return s;
    spdlog::warn("worker {} at {} failed to {}: {}; trying the next worker", worker.id,
                 worker.address, what, s.message());
    MarkDown(*worker.peer);
    last = std::move(s);
  }
  return Status::Unavailable("every worker failed to " + what + "; last: " + last.message());
}

Result<rpc::WrittenObject> ClusterClient::WriteBody(const rpc::WriteBodyChunk& header,
                                                    std::span<const char> data,
                                                    Clock::time_point deadline) {
  constexpr size_t kChunk = 1 << 20;
  rpc::WrittenObject written;
  // Parts spread over the workers (the rendezvous order of key and part), so one file's upload
  // uses them all, and a worker that dies takes only its share of the parts to the next.
  Status s = OnWorkers(
      header.key() + "#" + std::to_string(header.part_number()), "write " + header.key(),
      [&](const Worker& worker) {
        grpc::ClientContext ctx;
        ctx.set_deadline(GrpcDeadline(deadline, options_.rpc_timeout * 30));
        std::unique_ptr<grpc::ClientWriter<rpc::WriteBodyChunk>> writer(
            worker.peer->stub->WriteBody(&ctx, &written));
        rpc::WriteBodyChunk chunk = header;
        chunk.set_size(data.size());
        size_t at = 0;
        do {
          size_t n = std::min(kChunk, data.size() - at);
          chunk.set_data(data.data() + at, n);
          at += n;
          if (!writer->Write(chunk)) break;  // the worker ended the call: Finish says why
          chunk.Clear();
        } while (at < data.size());
        writer->WritesDone();
        return rpc::FromGrpcStatus(writer->Finish(), "worker " + worker.address);
      },
      deadline);
  if (!s.ok()) return s;
  return written;
}

Result<rpc::WriteCallResponse> ClusterClient::WriteCall(const rpc::WriteCallRequest& request,
                                                        Clock::time_point deadline) {
  rpc::WriteCallResponse response;
  Status s = OnWorkers(
      request.key(), "write " + request.key(),
      [&](const Worker& worker) {
        grpc::ClientContext ctx;
        ctx.set_deadline(GrpcDeadline(deadline, options_.rpc_timeout * 30));
        return rpc::FromGrpcStatus(worker.peer->stub->WriteCall(&ctx, request, &response),
                                   "worker " + worker.address);
      },
      deadline);
  if (!s.ok()) return s;
  return response;
}

Status ClusterClient::NoteWrite(const rpc::NoteWriteRequest& request, Clock::time_point deadline) {
  rpc::NoteWriteResponse response;
  return stub_->OnLeader(
      [&](rpc::MasterService::Stub& stub, grpc::ClientContext* ctx) {
        return stub.NoteWrite(ctx, request, &response);
      },
      stub_->QuickAttempt(options_.rpc_timeout), deadline);
}

Result<size_t> ClusterClient::ReadStreamed(const Worker& worker,
                                           const rpc::ReadBlockRequest& request,
                                           std::span<char> dst, Clock::time_point deadline) {
  grpc::ClientContext ctx;
  ctx.set_deadline(GrpcDeadline(deadline, kMaxAttemptTime));
  // The chunks arrive as raw gRPC buffers and are copied once, straight into dst.
  std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
      grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(
          worker.peer->channel.get(), ReadBlockMethod(), &ctx, request));
  grpc::ByteBuffer chunk;
  size_t got = 0;
  Status copied;
  while (reader->Read(&chunk)) {
    if (copied.ok()) copied = rpc::CopyChunk(chunk, dst, &got);
  }
  grpc::Status st = reader->Finish();
  if (!st.ok()) return rpc::FromGrpcStatus(st, "worker " + worker.address);
  if (!copied.ok()) return copied.WithContext("worker " + worker.address);
  return got;
}

}  // namespace lakecache
