#include "master/cluster_admin.h"

#include <spdlog/spdlog.h>

#include <atomic>

#include "admin/convert.h"
#include "cache/block_key.h"
#include "common/rendezvous.h"
#include "master/worker_registry.h"
#include "rpc/grpc_util.h"

namespace lakecache {
namespace {

constexpr size_t kMaxBatchesPerWorker = 4;
// One LoadBlocks call: a batch of up to 16 MiB fetched from the object store.
constexpr auto kLoadTimeout = std::chrono::minutes(5);
constexpr auto kCallTimeout = std::chrono::seconds(10);  // Stats, Free, check-only LoadBlocks

// A live worker as one job sees it.
struct Target {
  rpc::WorkerInfo info;
  std::shared_ptr<rpc::WorkerService::Stub> stub;
  std::atomic<bool> failed{false};
  Mutex mu;
  CondVar cv;  // a slot freed
  size_t in_flight GUARDED_BY(mu) = 0;

  std::string Name() const { return "worker " + info.id() + " (" + info.address() + ")"; }
};

class ClusterSink final : public BlockSink {
 public:
  ClusterSink(std::vector<std::unique_ptr<Target>> targets, uint32_t replicas)
      : targets_(std::move(targets)), replicas_(replicas) {
    for (const auto& t : targets_) {
      nodes_.push_back(PlacementNode(t->info.id(), t->info.capacity_bytes()));
    }
  }

  std::vector<BlockOutcome> Load(const std::string& ns, std::span<const BlockSpec> blocks,
                                 bool check_only) override {
    if (check_only) return Check(ns, blocks);
    std::vector<BlockOutcome> out(blocks.size());
    if (targets_.empty()) {
      for (BlockOutcome& o : out) o = {BlockState::kFailed, "no live workers in the cluster"};
      return out;
    }
    struct Pending {
      std::vector<size_t> order;  // targets, best first
      size_t pos = 0;
      uint32_t successes = 0;
      bool loaded = false;
      std::string last_error;
    };
    std::vector<Pending> pending(blocks.size());
    std::vector<size_t> open;
    for (size_t i = 0; i < blocks.size(); ++i) {
      const ObjectSpec& o = blocks[i].object;
      BlockKey key{MakeContentId(ns, o.key, o.etag, o.block_size), blocks[i].index};
      pending[i].order = RendezvousOrder(StableKeyHash(key), nodes_);
      open.push_back(i);
    }
    auto finish = [&](size_t i) {
      Pending& p = pending[i];
      if (p.successes > 0) {
        out[i] = {p.loaded ? BlockState::kLoaded : BlockState::kAlreadyCached, ""};
      } else {
        out[i] = {BlockState::kFailed,
                  p.last_error.empty() ? "no live worker left to cache it" : p.last_error};
      }
    };
    uint32_t want = std::min<uint32_t>(replicas_, static_cast<uint32_t>(targets_.size()));
    while (!open.empty()) {
      std::map<size_t, std::vector<size_t>> groups;  // target -> blocks
      for (size_t i : open) {
        Pending& p = pending[i];
        while (p.pos < p.order.size() && targets_[p.order[p.pos]]->failed.load()) ++p.pos;
        if (p.pos == p.order.size()) {
          finish(i);
        } else {
          groups[p.order[p.pos]].push_back(i);
        }
      }
      open.clear();
      for (auto& [t, members] : groups) {
        Target& target = *targets_[t];
        rpc::LoadBlocksRequest request;
        for (size_t i : members) *request.add_blocks() = rpc::ToBlockId(ns, blocks[i]);
        rpc::LoadBlocksResponse response;
        grpc::Status status = Call(target, request, &response, kLoadTimeout);
        if (!status.ok()) {
          Status failed = rpc::FromGrpcStatus(status, target.Name());
          std::string error = failed.ToString();
          bool retry_elsewhere = failed.peer_failed();
          if (retry_elsewhere) MarkFailed(target, error);
          for (size_t i : members) {
            pending[i].last_error = error;
            if (retry_elsewhere) {
              ++pending[i].pos;
              open.push_back(i);
            } else {
              out[i] = {BlockState::kFailed, error};
            }
          }
          continue;
        }
        for (size_t k = 0; k < members.size(); ++k) {
          size_t i = members[k];
          Pending& p = pending[i];
          BlockOutcome got = k < static_cast<size_t>(response.results_size())
                                 ? rpc::FromProto(response.results(static_cast<int>(k)))
                                 : BlockOutcome{BlockState::kFailed, "no answer for this block"};
          if (got.state == BlockState::kLoaded || got.state == BlockState::kAlreadyCached) {
            ++p.successes;
            p.loaded = p.loaded || got.state == BlockState::kLoaded;
          } else {
            p.last_error = target.Name() + ": " + got.error;
            if (p.successes == 0) {
              out[i] = {BlockState::kFailed, p.last_error};
              continue;
            }
          }
          if (p.successes >= want || got.state == BlockState::kFailed) {
            finish(i);
          } else {
            ++p.pos;
            open.push_back(i);
          }
        }
      }
    }
    return out;
  }

  Result<uint64_t> Free(const std::string& ns, std::span<const ObjectSpec> objects) override {
    rpc::FreeRequest request;
    for (const ObjectSpec& o : objects) *request.add_objects() = rpc::ToObjectVersion(ns, o);
    uint64_t freed = 0;
    for (const auto& target : targets_) {
      grpc::ClientContext ctx;
      rpc::SetTimeout(&ctx, kCallTimeout);
      rpc::FreeResponse response;
      grpc::Status status = target->stub->Free(&ctx, request, &response);
      if (!status.ok()) {
        Status failed = rpc::FromGrpcStatus(status, target->Name());
        if (!failed.peer_failed()) return failed;
        spdlog::warn("free: {} did not answer: {}", target->Name(), status.error_message());
        continue;
      }
      freed += response.blocks_freed();
    }
    return freed;
  }

  bool TakeLost() override { return lost_.exchange(false); }

 private:
  // Cached on any live worker: every one is asked.
  std::vector<BlockOutcome> Check(const std::string& ns, std::span<const BlockSpec> blocks) {
    std::vector<BlockOutcome> out(blocks.size());
    rpc::LoadBlocksRequest request;
    request.set_check_only(true);
    for (const BlockSpec& b : blocks) *request.add_blocks() = rpc::ToBlockId(ns, b);
    for (const auto& target : targets_) {
      rpc::LoadBlocksResponse response;
      if (!Call(*target, request, &response, kCallTimeout).ok()) continue;
      for (int k = 0; k < response.results_size() && k < static_cast<int>(out.size()); ++k) {
        if (response.results(k).state() == rpc::BLOCK_ALREADY_CACHED) {
          out[k].state = BlockState::kAlreadyCached;
        }
      }
    }
    return out;
  }

  // One LoadBlocks call, waiting for one of the target's kMaxBatchesPerWorker slots.
  static grpc::Status Call(Target& target, const rpc::LoadBlocksRequest& request,
                           rpc::LoadBlocksResponse* response, std::chrono::milliseconds timeout) {
    {
      MutexLock lock(&target.mu);
      while (target.in_flight >= kMaxBatchesPerWorker) target.cv.Wait(&target.mu);
      ++target.in_flight;
    }
    grpc::ClientContext ctx;
    rpc::SetTimeout(&ctx, timeout);
    grpc::Status status = target.stub->LoadBlocks(&ctx, request, response);
    {
      MutexLock lock(&target.mu);
      --target.in_flight;
    }
    target.cv.Signal();
    return status;
  }

  void MarkFailed(Target& target, const std::string& error) {
    if (target.failed.exchange(true)) return;
    lost_ = true;
    spdlog::warn("load: {} failed, its blocks go to the next worker: {}", target.Name(), error);
  }

  std::vector<std::unique_ptr<Target>> targets_;
  std::vector<RendezvousNode> nodes_;
  const uint32_t replicas_;
  std::atomic<bool> lost_{false};
};

}  // namespace

std::shared_ptr<rpc::WorkerService::Stub> ClusterAdmin::Stub(const rpc::WorkerInfo& worker) {
  MutexLock lock(&mu_);
  auto& stub = stubs_[worker.id() + "@" + worker.address()];
  if (stub == nullptr) {
    stub = rpc::WorkerService::NewStub(
        security::WorkerChannel(worker.address(), worker.id(), credentials_.get()));
  }
  return stub;
}

Result<std::unique_ptr<BlockSink>> ClusterAdmin::MakeSink(uint32_t replicas, uint32_t* aimed) {
  rpc::ClusterView view = registry_.View();
  std::vector<std::unique_ptr<Target>> targets;
  for (const rpc::WorkerInfo& info : view.workers()) {
    auto target = std::make_unique<Target>();
    target->info = info;
    target->stub = Stub(info);
    targets.push_back(std::move(target));
  }
  uint32_t asked = std::max<uint32_t>(1, replicas);
  *aimed = std::max<uint32_t>(1, std::min<uint32_t>(asked, static_cast<uint32_t>(targets.size())));
  return std::unique_ptr<BlockSink>(new ClusterSink(std::move(targets), asked));
}

Result<rpc::Report> ClusterAdmin::GetReport() {
  rpc::Report report;
  rpc::ClusterView view = registry_.View();
  for (const rpc::WorkerInfo& info : view.workers()) {
    grpc::ClientContext ctx;
    rpc::SetTimeout(&ctx, kCallTimeout);
    rpc::WorkerStats stats;
    grpc::Status status = Stub(info)->Stats(&ctx, rpc::WorkerStatsRequest(), &stats);
    if (status.ok()) {
      *report.add_workers() = std::move(stats);
    } else {
      report.add_unreachable(info.id() + " " + info.address() + ": " + status.error_message());
    }
  }
  return report;
}

}  // namespace lakecache
