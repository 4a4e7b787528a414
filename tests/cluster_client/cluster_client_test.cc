// ClusterClient against a fake master (which views it installs, what a worker's down mark
// survives, reads failing over without a master) and against a scripted gRPC master (refreshes
// racing each other never move it back to an older view).
#include "cluster_client/cluster_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "cluster_client/fake_master_client.h"
#include "common/mutex.h"
#include "rpc/grpc_util.h"
#include "rpc/lakecache.grpc.pb.h"

namespace lakecache {
namespace {

constexpr uint32_t kNoBackgroundRefresh = 3600 * 1000;  // ms: the tests refresh by hand

// Answers the n-th GetClusterView with epoch epochs[n] (the script's last epoch, plus one per
// call, once it runs out), after a delay on every even call, so that two calls in flight at once
// answer out of order. Every view shows one worker whose capacity is epoch MiB.
class ScriptedMaster final : public rpc::MasterService::Service {
 public:
  ScriptedMaster(std::vector<uint64_t> epochs, std::chrono::milliseconds even_delay)
      : epochs_(std::move(epochs)), even_delay_(even_delay) {}

  grpc::Status GetNamespaces(grpc::ServerContext*, const rpc::NamespacesRequest*,
                             rpc::NamespacesResponse*) override {
    return grpc::Status::OK;
  }

  grpc::Status GetClusterView(grpc::ServerContext*, const rpc::ClusterViewRequest*,
                              rpc::ClusterView* view) override {
    uint64_t epoch = 0;
    size_t call = 0;
    {
      MutexLock lock(&mu_);
      call = calls_++;
      epoch = call < epochs_.size() ? epochs_[call] : epochs_.back() + (call - epochs_.size() + 1);
      newest_ = std::max(newest_, epoch);
    }
    if (call % 2 == 0) std::this_thread::sleep_for(even_delay_);
    view->set_epoch(epoch);
    view->set_heartbeat_interval_ms(kNoBackgroundRefresh);
    view->set_heartbeat_timeout_ms(kNoBackgroundRefresh * 2);
    rpc::WorkerInfo* worker = view->add_workers();
    worker->set_id("w1");
    worker->set_address("127.0.0.1:1");  // never dialled: the tests read no blocks
    worker->set_start_time_ms(1);
    worker->set_capacity_bytes(epoch << 20);
    return grpc::Status::OK;
  }

  uint64_t newest() {
    MutexLock lock(&mu_);
    return newest_;
  }

 private:
  const std::vector<uint64_t> epochs_;
  const std::chrono::milliseconds even_delay_;
  Mutex mu_;
  size_t calls_ GUARDED_BY(mu_) = 0;
  uint64_t newest_ GUARDED_BY(mu_) = 0;  // the highest epoch answered so far
};

class ClusterClientTest : public ::testing::Test {
 protected:
  void Start(std::vector<uint64_t> epochs, std::chrono::milliseconds even_delay) {
    master_ = std::make_unique<ScriptedMaster>(std::move(epochs), even_delay);
    auto started = rpc::StartServer("127.0.0.1:0", {master_.get()});
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    server_ = std::move(started->server);
    auto client = ClusterClient::Connect(started->address);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = *client;
  }

  void TearDown() override {
    client_.reset();
    if (server_ != nullptr) server_->Shutdown();
  }

  std::unique_ptr<ScriptedMaster> master_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<ClusterClient> client_;
};

// Over a fake master: no master runs, and no worker (their addresses refuse).
class FakeMasterTest : public ::testing::Test {
 protected:
  // Opens the client over the fake, whose first view is `first`.
  void Open(rpc::ClusterView first) {
    auto fake = std::make_unique<testing::FakeMasterClient>();
    fake->AddView(std::move(first));
    master_ = fake.get();
    ClusterClientOptions options;
    options.transport = ClusterClientOptions::Transport::kGrpc;
    auto client = ClusterClient::Open("fake", std::move(fake), options);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = *client;
  }
  bool Down(const std::string& id) const {
    for (const ClusterWorker& w : client_->Workers()) {
      if (w.id == id) return w.down;
    }
    ADD_FAILURE() << "no worker " << id;
    return false;
  }

  testing::FakeMasterClient* master_ = nullptr;  // owned by client_
  std::shared_ptr<ClusterClient> client_;
};

rpc::ClusterView ViewWithCapacity(uint64_t epoch) {
  rpc::ClusterView view = testing::FakeMasterClient::MakeView(epoch, {{"w1", "127.0.0.1:1"}});
  view.mutable_workers(0)->set_capacity_bytes(epoch << 20);
  return view;
}

TEST_F(FakeMasterTest, OlderViewIsNotInstalled) {
  Open(ViewWithCapacity(10));
  master_->AddView(ViewWithCapacity(5));
  master_->AddView(ViewWithCapacity(20));
  ASSERT_EQ(client_->epoch(), 10u);
  ASSERT_TRUE(client_->RefreshView().ok());
  EXPECT_EQ(client_->epoch(), 10u) << "epoch 5 is older than the installed 10";
  ASSERT_EQ(client_->Workers().size(), 1u);
  EXPECT_EQ(client_->Workers()[0].capacity_bytes, 10u << 20) << "the workers of epoch 10 stay";
  ASSERT_TRUE(client_->RefreshView().ok());
  EXPECT_EQ(client_->epoch(), 20u);
  EXPECT_EQ(client_->Workers()[0].capacity_bytes, 20u << 20);
}

TEST_F(FakeMasterTest, ReadOfRefusingWorkersFailsOverEveryOneAndMarksThemDown) {
  Open(testing::FakeMasterClient::MakeView(1, {{"w1", "127.0.0.1:1"}, {"w2", "127.0.0.1:2"}}));
  rpc::BlockId block;
  block.set_ns("ns");
  block.set_key("k");
  block.set_etag("e");
  block.set_object_size(10);
  block.set_block_size(10);
  char buf[10];
  Result<size_t> got = client_->ReadBlock(block, 0, buf, Clock::now() + std::chrono::seconds(30));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable) << got.status().ToString();
  EXPECT_NE(got.status().message().find("every worker failed reading k block 0"), std::string::npos)
      << got.status().message();
  EXPECT_EQ(client_->worker_calls(), 2u);
  EXPECT_TRUE(Down("w1"));
  EXPECT_TRUE(Down("w2"));
}

TEST_F(FakeMasterTest, ADownMarkLastsForTheIncarnationAndARestartClearsIt) {
  Open(testing::FakeMasterClient::MakeView(1, {{"w1", "127.0.0.1:1"}}));
  rpc::WriteCallRequest request;
  request.set_key("k");
  ASSERT_FALSE(client_->WriteCall(request, Clock::now() + std::chrono::seconds(30)).ok());
  ASSERT_TRUE(Down("w1"));
  master_->AddView(testing::FakeMasterClient::MakeView(2, {{"w1", "127.0.0.1:1"}}));
  ASSERT_TRUE(client_->RefreshView().ok());
  EXPECT_TRUE(Down("w1")) << "the same incarnation keeps its down mark in a new view";
  rpc::ClusterView restarted = testing::FakeMasterClient::MakeView(3, {{"w1", "127.0.0.1:1"}});
  restarted.mutable_workers(0)->set_start_time_ms(2);
  master_->AddView(restarted);
  ASSERT_TRUE(client_->RefreshView().ok());
  EXPECT_FALSE(Down("w1")) << "a restarted worker starts afresh";
}

TEST_F(FakeMasterTest, AMasterThatStopsAnsweringLeavesTheLastViewInPlace) {
  Open(testing::FakeMasterClient::MakeView(4, {{"w1", "127.0.0.1:1"}, {"w2", "127.0.0.1:2"}}));
  master_->FailViews(Status::Unavailable("the master is down"));
  EXPECT_EQ(client_->RefreshView().code(), StatusCode::kUnavailable);
  EXPECT_EQ(client_->epoch(), 4u);
  EXPECT_EQ(client_->Workers().size(), 2u);
}

TEST_F(ClusterClientTest, RacingRefreshesNeverMoveTheEpochBack) {
  Start({1}, std::chrono::milliseconds(5));
  constexpr int kThreads = 4, kRefreshes = 10;
  std::atomic<bool> done{false};
  std::atomic<uint64_t> backwards{0}, without_worker{0};
  // Watches the installed view while the refreshes race, reading its workers as a mount does.
  std::thread watcher([&] {
    uint64_t last = 0;
    while (!done.load()) {
      uint64_t epoch = client_->epoch();
      if (epoch < last) backwards.fetch_add(1);
      last = std::max(last, epoch);
      if (client_->Workers().size() != 1) without_worker.fetch_add(1);
    }
  });
  std::vector<std::thread> refreshers;
  for (int t = 0; t < kThreads; ++t) {
    refreshers.emplace_back([&] {
      for (int i = 0; i < kRefreshes; ++i) EXPECT_TRUE(client_->RefreshView().ok());
    });
  }
  for (std::thread& t : refreshers) t.join();
  done = true;
  watcher.join();
  EXPECT_EQ(backwards.load(), 0u) << "the installed epoch went back";
  EXPECT_EQ(without_worker.load(), 0u);
  EXPECT_EQ(client_->epoch(), master_->newest()) << "the newest view answered is installed";
  EXPECT_EQ(client_->Workers()[0].capacity_bytes, master_->newest() << 20);
}

}  // namespace
}  // namespace lakecache
