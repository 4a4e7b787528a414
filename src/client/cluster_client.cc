#include "client/cluster_client.h"

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/sync_stream.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "cache/block_file.h"
#include "cache/block_key.h"
#include "client/bulk_client.h"
#include "rpc/block_chunk.h"
#include "rpc/convert.h"
#include "rpc/grpc_util.h"
#include "rpc/lakecache.grpc.pb.h"

namespace lakecache {
namespace {

constexpr auto kMaxAttemptTime = std::chrono::seconds(120);  // one worker, one block

int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch())
      .count();
}

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
  std::unique_ptr<rpc::MasterService::Stub> stub;
};

// One incarnation of a worker (id, address, start time): its channel and this client's down mark,
// shared by every view that shows the incarnation. Only the down mark changes, and it is atomic.
struct ClusterClient::Peer {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<rpc::WorkerService::Stub> stub;  // unary calls; blocks stream raw on `channel`
  std::unique_ptr<BulkClient> bulk;  // the worker's bulk data path, when it has one and it is used
  std::atomic<int64_t> down_until_ms{0};  // steady-clock ms; up once past it

  bool up(int64_t now_ms) const { return down_until_ms.load(std::memory_order_relaxed) <= now_ms; }
};

// A worker as one view shows it; never changed once the view is installed.
struct ClusterClient::Worker {
  std::string id;
  std::string address;
  uint64_t capacity = 0;
  int64_t start_time_ms = 0;
  std::string host_id;
  std::string data_address;
  std::shared_ptr<Peer> peer;
};

struct ClusterClient::View {
  uint64_t epoch = 0;
  std::vector<Worker> workers;        // by id
  std::vector<RendezvousNode> nodes;  // same order
};

ClusterClient::ClusterClient(std::string master, ClusterClientOptions options)
    : master_(std::move(master)),
      options_(options),
      stub_(std::make_unique<MasterStub>()),
      view_(std::make_shared<View>()) {}

Result<std::shared_ptr<ClusterClient>> ClusterClient::Connect(const std::string& master,
                                                              ClusterClientOptions options) {
  LC_RETURN_IF_ERROR(rpc::CheckListenAddress("--master", master));
  std::shared_ptr<ClusterClient> client(new ClusterClient(master, options));
  auto channel = rpc::OpenChannel(master);
  client->stub_->stub = rpc::MasterService::NewStub(channel);
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + options.connect_timeout)) {
    return Status::Unavailable("cannot reach the master at " + master + " within " +
                               FormatDuration(options.connect_timeout) +
                               " (is `lakecache master` running there?)");
  }
  grpc::ClientContext ctx;
  rpc::SetTimeout(&ctx, options.rpc_timeout);
  rpc::NamespacesResponse namespaces;
  grpc::Status st = client->stub_->stub->GetNamespaces(&ctx, rpc::NamespacesRequest(), &namespaces);
  if (!st.ok()) return rpc::FromGrpcStatus(st, "master " + master);
  for (const rpc::NamespaceInfo& n : namespaces.namespaces()) {
    ClusterNamespace ns;
    ns.name = n.name();
    ns.uri = n.uri();
    ns.block_size = n.block_size();
    ns.metadata_ttl = std::chrono::milliseconds(n.metadata_ttl_ms());
    ns.immutable = n.immutable();
    ns.key_prefix = n.key_prefix();
    client->namespaces_.push_back(std::move(ns));
  }
  LC_RETURN_IF_ERROR(client->RefreshView());
  client->refresher_ = std::thread([c = client.get()] { c->RefreshLoop(); });
  return client;
}

ClusterClient::~ClusterClient() {
  {
    MutexLock lock(&stop_mu_);
    stopping_ = true;
  }
  stop_cv_.SignalAll();
  if (refresher_.joinable()) refresher_.join();
}

Status ClusterClient::RefreshView() {
  MutexLock refreshing(&refresh_mu_);
  grpc::ClientContext ctx;
  rpc::SetTimeout(&ctx, options_.rpc_timeout);
  rpc::ClusterView got;
  grpc::Status st = stub_->stub->GetClusterView(&ctx, rpc::ClusterViewRequest(), &got);
  if (!st.ok()) return rpc::FromGrpcStatus(st, "master " + master_);
  std::shared_ptr<const View> view = BuildView(got, *CurrentView());
  MutexLock lock(&view_mu_);
  if (view->epoch < view_->epoch) {  // an answer older than what is installed
    spdlog::debug("ignoring cluster view epoch {}: epoch {} is installed", view->epoch,
                  view_->epoch);
    return Status::Ok();
  }
  if (got.heartbeat_interval_ms() > 0) {
    refresh_interval_ = std::chrono::milliseconds(got.heartbeat_interval_ms());
  }
  if (got.heartbeat_timeout_ms() > 0) {
    down_period_ = std::chrono::milliseconds(got.heartbeat_timeout_ms());
  }
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
  for (const rpc::WorkerInfo& info : got.workers()) {
    Worker worker{info.id(),
                  info.address(),
                  info.capacity_bytes(),
                  info.start_time_ms(),
                  info.host_id(),
                  info.data_address(),
                  nullptr};
    for (const Worker& w : old.workers) {
      // The same incarnation at the same address keeps its channel and its down mark; a restarted
      // worker starts afresh (up).
      if (w.id == info.id() && w.address == info.address() &&
          w.start_time_ms == info.start_time_ms() && w.data_address == info.data_address()) {
        worker.peer = w.peer;
      }
    }
    if (worker.peer == nullptr) {
      worker.peer = std::make_shared<Peer>();
      worker.peer->channel = rpc::OpenChannel(info.address());
      worker.peer->stub = rpc::WorkerService::NewStub(worker.peer->channel);
      if (options_.transport == ClusterClientOptions::Transport::kBulk &&
          !worker.data_address.empty()) {
        worker.peer->bulk = std::make_unique<BulkClient>(
            worker.data_address,
            BulkClientOptions{options_.bulk_connections, options_.tls, options_.tls_server_name});
      }
    }
    view->workers.push_back(std::move(worker));
  }
  std::sort(view->workers.begin(), view->workers.end(),
            [](const Worker& a, const Worker& b) { return a.id < b.id; });
  for (const Worker& w : view->workers) {
    // Weighted by capacity; a worker that reports none still gets a minimal share.
    view->nodes.push_back(PlacementNode(w.id, w.capacity));
  }
  return view;
}

void ClusterClient::RefreshLoop() {
  bool warned = false;
  for (;;) {
    std::chrono::milliseconds interval;
    {
      MutexLock lock(&view_mu_);
      interval = refresh_interval_;
    }
    {
      auto until = std::chrono::steady_clock::now() + interval;
      MutexLock lock(&stop_mu_);
      while (!stopping_ && stop_cv_.WaitUntil(&stop_mu_, until)) continue;
      if (stopping_) return;
    }
    Status s = RefreshView();
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

std::shared_ptr<const ClusterClient::View> ClusterClient::CurrentView() const {
  MutexLock lock(&view_mu_);
  return view_;
}

uint64_t ClusterClient::epoch() const { return CurrentView()->epoch; }

std::vector<ClusterWorker> ClusterClient::Workers() const {
  std::vector<ClusterWorker> out;
  int64_t now = SteadyMs();
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
  peer.down_until_ms.store(SteadyMs() + period.count(), std::memory_order_relaxed);
}

Result<ClusterListing> ClusterClient::ListDir(const std::string& ns, const std::string& dir,
                                              Clock::time_point deadline, bool revalidate) {
  grpc::ClientContext ctx;
  ctx.set_deadline(GrpcDeadline(deadline, options_.rpc_timeout));
  rpc::ListDirRequest req;
  req.set_ns(ns);
  req.set_dir(dir);
  req.set_revalidate(revalidate);
  rpc::ListDirResponse resp;
  grpc::Status st = stub_->stub->ListDir(&ctx, req, &resp);
  if (!st.ok()) return rpc::FromGrpcStatus(st, "master " + master_);
  ClusterListing listing;
  for (const rpc::ObjectEntry& e : resp.files()) listing.files.push_back(ToObjectInfo(e));
  listing.dirs.assign(resp.dirs().begin(), resp.dirs().end());
  listing.exists = resp.exists();
  return listing;
}

Result<ObjectInfo> ClusterClient::Stat(const std::string& ns, const std::string& path, bool* is_dir,
                                       Clock::time_point deadline) {
  grpc::ClientContext ctx;
  ctx.set_deadline(GrpcDeadline(deadline, options_.rpc_timeout));
  rpc::StatRequest req;
  req.set_ns(ns);
  req.set_path(path);
  rpc::StatResponse resp;
  grpc::Status st = stub_->stub->Stat(&ctx, req, &resp);
  if (!st.ok()) return rpc::FromGrpcStatus(st, "master " + master_);
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
  int64_t now = SteadyMs();
  std::stable_partition(order.begin(), order.end(),
                        [&](size_t i) { return view->workers[i].peer->up(now); });
  rpc::ReadBlockRequest req;
  *req.mutable_block() = block;
  req.set_offset(offset);
  req.set_length(dst.size());
  Status last;
  for (size_t i : order) {
    const Worker& worker = view->workers[i];
    if (options_.short_circuit && !worker.host_id.empty() && worker.host_id == rpc::HostId()) {
      Result<size_t> local = ReadLocal(worker, block, offset, dst, deadline);
      if (local.ok()) return local;
      if (local.status().peer_failed()) {  // the worker itself failed
        MarkDown(*worker.peer);
        last = local.status();
        continue;
      }
    }
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
                     options_.tls != nullptr ? "TLS" : "plain text");
      }
      return got;
    }
    Status s = got.status();
    if (!s.peer_failed()) return s;  // the object store's answer: the same everywhere
    if (worker.peer->up(SteadyMs())) {
      spdlog::warn("worker {} at {} failed reading {}: {}; trying the next worker", worker.id,
                   worker.address, what, s.message());
    }
    MarkDown(*worker.peer);
    last = std::move(s);
  }
  return Status::Unavailable("every worker failed reading " + what + "; last: " + last.message());
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

Result<size_t> ClusterClient::ReadLocal(const Worker& worker, const rpc::BlockId& block,
                                        uint64_t offset, std::span<char> dst,
                                        Clock::time_point deadline) {
  grpc::ClientContext ctx;
  ctx.set_deadline(GrpcDeadline(deadline, options_.rpc_timeout));
  rpc::LocateBlockRequest req;
  *req.mutable_block() = block;
  rpc::LocateBlockResponse resp;
  grpc::Status st = worker.peer->stub->LocateBlock(&ctx, req, &resp);
  if (!st.ok()) return rpc::FromGrpcStatus(st, "worker " + worker.address);
  if (resp.path().empty()) return Status::NotFound("not in a cache file yet");
  // The file must be the block asked for (same content id and index, so the same object version),
  // and every chunk read is verified against its checksum.
  Result<BlockFile> file = BlockFile::Open(resp.path());
  if (!file.ok()) return Status::NotFound(file.status().message());
  ContentId content = MakeContentId(block.ns(), block.key(), block.etag(), block.block_size());
  if (!(file->header().key == BlockKey{content, block.index()})) {
    return Status::NotFound(resp.path() + " holds another block");
  }
  Result<size_t> n = file->Read(offset, dst);
  if (!n.ok()) return Status::NotFound(n.status().message());  // stream it instead
  if (short_circuit_reads_.fetch_add(1, std::memory_order_relaxed) == 0) {
    spdlog::info("reading blocks of worker {} from its cache files (short-circuit)", worker.id);
  }
  return n;
}

}  // namespace lakecache
