// StatusBoard over workers whose Stats the test writes (a fake AdminBackend) and mounts' reports
// in a real ClientTable, stepped by hand: what the page's per-worker hit ratio and its hit-ratio
// plot say about loads, reads over the network and reads a mount makes on a worker's host.
#include "master/status_board.h"

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "master/client_table.h"
#include "master/worker_registry.h"
#include "meta/namespace_table.h"
#include "support/fake_clock.h"

namespace lakecache {
namespace {

using json = nlohmann::json;

constexpr uint64_t kBlock = 1 << 20;
constexpr uint64_t kBlocks = 8;

// What a worker's Stats counts.
struct WorkerCounts {
  uint64_t lookup_hits = 0, lookup_misses = 0;
  uint64_t hit_bytes = 0;      // its tiers gave readers
  uint64_t served_bytes = 0;   // it served over the network
  uint64_t fetched_bytes = 0;  // from the object store, for loads and readers alike
  uint64_t shm_sessions = 0;   // mounts on its host mapping its memory

  // `blocks` loaded: each looked up (a miss) and fetched.
  void Load(uint64_t blocks) {
    lookup_misses += blocks;
    fetched_bytes += blocks * kBlock;
  }
  // `blocks` read over the network, `cached` of them from its tiers, the rest fetched.
  void Serve(uint64_t blocks, uint64_t cached) {
    lookup_hits += cached;
    lookup_misses += blocks - cached;
    hit_bytes += cached * kBlock;
    served_bytes += blocks * kBlock;
    fetched_bytes += (blocks - cached) * kBlock;
  }
};

class FakeWorkers final : public AdminBackend {
 public:
  explicit FakeWorkers(const NamespaceTable* namespaces) : namespaces_(namespaces) {}

  const NamespaceTable& namespaces() const override { return *namespaces_; }
  Result<std::unique_ptr<BlockSink>> MakeSink(uint32_t, uint32_t*) override {
    return Status::Unimplemented("no loads here");
  }
  Result<rpc::Report> GetReport() override {
    MutexLock lock(&mu_);
    rpc::Report report;
    for (const auto& [id, c] : counts_) {
      rpc::WorkerStats* w = report.add_workers();
      w->mutable_worker()->set_id(id);
      w->mutable_worker()->set_start_time_ms(1);
      rpc::TierStatsProto* memory = w->add_tiers();
      memory->set_tier("memory");
      memory->set_hits(c.lookup_hits);
      memory->set_misses(c.lookup_misses);
      memory->set_hit_bytes(c.hit_bytes);
      w->set_bytes_served(c.served_bytes);
      w->set_fetched_bytes(c.fetched_bytes);
      w->set_shm_sessions(c.shm_sessions);
    }
    return report;
  }
  rpc::HelloResponse Hello() override { return {}; }

  void Set(const std::string& id, const WorkerCounts& counts) {
    MutexLock lock(&mu_);
    counts_[id] = counts;
  }

 private:
  const NamespaceTable* namespaces_;
  Mutex mu_;
  std::map<std::string, WorkerCounts> counts_ GUARDED_BY(mu_);
};

class StatusBoardTest : public ::testing::Test {
 protected:
  StatusBoardTest() : registry_(std::chrono::seconds(1), std::chrono::hours(1)) {
    for (const char* id : {"w1", "w2"}) {
      rpc::WorkerInfo info;
      info.set_id(id);
      info.set_address(std::string(id) + ".example:7401");
      registry_.Register(info);
      workers_.Set(id, {});
    }
  }

  // The mount's counters since it started: bytes its readers got, of them from this host.
  void MountReports(uint64_t read_bytes, uint64_t local_bytes) {
    rpc::ClientReport r;
    r.set_id("mount-1");
    r.set_host("node-a");
    r.set_mountpoint("/mnt/lake");
    r.set_read_bytes(read_bytes);
    r.set_local_bytes(local_bytes);
    r.set_fetched_bytes(read_bytes - local_bytes);
    clients_.Note(r);
  }

  // Starts the board on what is set now; it samples once by itself, then only when stepped (its
  // interval is an hour of the fake clock, which only Step moves, by seconds).
  void Start() {
    StatusBoardOptions options;
    options.interval = std::chrono::hours(1);
    options.history = std::chrono::hours(1);
    options.clock = &clock_;
    board_ = std::make_unique<StatusBoard>(&workers_, namespaces_.get(), &registry_, &clients_,
                                           &loads_, options);
    // The sampler waits on the clock once its first sample is taken.
    ASSERT_TRUE(clock_.WaitForWaiters(1));
    ASSERT_EQ(Worker("w1")["state"], "live");
  }

  void Step() {
    clock_.Advance(std::chrono::seconds(1));  // an interval of some length
    board_->Sample();
  }

  json Worker(const std::string& id) const {
    json status = json::parse(board_->StatusJson());
    for (const json& w : status["workers"]) {
      if (w["id"] == id) return w;
    }
    return nullptr;
  }

  // The hit ratio the plot shows for the last interval.
  json PlottedHitRatio() const {
    json points = json::parse(board_->StatusJson())["history"]["points"];
    return points.empty() ? json() : points.back()["hit_ratio"];
  }

  testing::FakeClock clock_;
  std::unique_ptr<NamespaceTable> namespaces_ = NamespaceTable::FromStores({});
  FakeWorkers workers_{namespaces_.get()};
  WorkerRegistry registry_;
  ClientTable clients_{std::chrono::hours(1)};
  LoadJobTable loads_;
  std::unique_ptr<StatusBoard> board_;
};

TEST_F(StatusBoardTest, LoadedBlocksReadOnTheirHostAreNoMissesInColumnOrPlot) {
  MountReports(0, 0);
  Start();
  // A load fills w1; a mount on its host reads every block from its shared memory, which w1
  // never sees.
  WorkerCounts w1;
  w1.Load(kBlocks);
  w1.shm_sessions = 1;
  workers_.Set("w1", w1);
  MountReports(kBlocks * kBlock, kBlocks * kBlock);
  Step();

  EXPECT_EQ(PlottedHitRatio(), 1.0);
  json worker = Worker("w1");
  // No reads over the network: nothing to count, and certainly no misses.
  EXPECT_TRUE(worker["hit_ratio"].is_null()) << worker.dump();
  EXPECT_TRUE(worker["hit_ratio_at_least"].is_null()) << worker.dump();
  EXPECT_EQ(worker["short_circuit_readers"], true) << worker.dump();
}

TEST_F(StatusBoardTest, LoadedBlocksReadOverTheNetworkShowOneHitRatioInColumnAndPlot) {
  MountReports(0, 0);
  Start();
  WorkerCounts w2;
  w2.Load(kBlocks);
  w2.Serve(kBlocks, kBlocks);
  workers_.Set("w2", w2);
  MountReports(kBlocks * kBlock, 0);
  Step();

  EXPECT_EQ(PlottedHitRatio(), 1.0);
  json worker = Worker("w2");
  EXPECT_EQ(worker["hit_ratio"], 1.0) << worker.dump();
  EXPECT_EQ(worker["hit_bytes"], kBlocks * kBlock);
  EXPECT_EQ(worker["short_circuit_readers"], false);
}

TEST_F(StatusBoardTest, ReadersMissesShowInColumnAndPlot) {
  MountReports(0, 0);
  Start();
  WorkerCounts w1;
  w1.Serve(4, 3);
  workers_.Set("w1", w1);
  MountReports(4 * kBlock, 0);
  Step();

  EXPECT_EQ(PlottedHitRatio(), 0.75);
  EXPECT_EQ(Worker("w1")["hit_ratio"], 0.75);
}

TEST_F(StatusBoardTest, WithShortCircuitReadersTheColumnIsALowerBound) {
  MountReports(0, 0);
  Start();
  WorkerCounts w1;
  w1.shm_sessions = 1;
  w1.Serve(4, 1);
  workers_.Set("w1", w1);
  MountReports(8 * kBlock, 4 * kBlock);  // 4 blocks read over the network, 4 on w1's host
  Step();

  EXPECT_EQ(PlottedHitRatio(), 1.0 - 3.0 / 8.0);
  json worker = Worker("w1");
  EXPECT_TRUE(worker["hit_ratio"].is_null()) << worker.dump();
  EXPECT_EQ(worker["hit_ratio_at_least"], 0.25) << worker.dump();
}

TEST_F(StatusBoardTest, WithoutMountReportsThePlotCountsTheWorkersReadsNotTheirLoads) {
  Start();
  WorkerCounts w1;
  w1.Load(kBlocks);
  w1.Serve(4, 2);
  workers_.Set("w1", w1);
  Step();

  EXPECT_EQ(PlottedHitRatio(), 0.5);
  EXPECT_EQ(Worker("w1")["hit_ratio"], 0.5);
}

TEST_F(StatusBoardTest, AnIntervalWithoutReadsPlotsNoHitRatio) {
  MountReports(0, 0);
  Start();
  WorkerCounts w1;
  w1.Load(kBlocks);
  workers_.Set("w1", w1);
  Step();

  EXPECT_TRUE(PlottedHitRatio().is_null());
  EXPECT_TRUE(Worker("w1")["hit_ratio"].is_null());
}

}  // namespace
}  // namespace lakecache
