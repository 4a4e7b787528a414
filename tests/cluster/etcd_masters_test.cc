// Masters sharing their membership through a real etcd and electing a leader (--etcd).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "cluster_client/cluster_client.h"
#include "master/master_server.h"
#include "support/etcd_cluster.h"
#include "support/slowdown.h"
#include "support/test_servers.h"
#include "worker/worker_server.h"

namespace lakecache {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTtl = std::chrono::seconds(3);  // the shortest lease the test etcd grants

class EtcdMastersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto etcd = testing::EtcdCluster::Start(3);
    ASSERT_TRUE(etcd.ok()) << etcd.status().message();
    etcd_ = std::move(etcd).value();
    ASSERT_TRUE(testing::WriteFile(data_.path() + "/a.txt", "hello\n").ok());
    config_.namespaces["lake"] = testing::LocalNamespace("lake", data_.path(), 4096);
    config_.cluster.heartbeat_interval = std::chrono::milliseconds(200);
    config_.cluster.heartbeat_timeout = kTtl;
    for (int i = 0; i < 2; ++i) {
      MasterOptions options;
      options.listen = "127.0.0.1:0";
      for (int m = 0; m < etcd_->size(); ++m) options.etcd.endpoints.push_back(etcd_->endpoint(m));
      options.election_ttl = kTtl;
      auto master = MasterServer::Start(config_, options);
      ASSERT_TRUE(master.ok()) << master.status().ToString();
      masters_.push_back(std::move(*master));
    }
  }

  // Waits until `master`'s view has `n` workers (20 s at most).
  bool WaitForWorkers(MasterServer& master, size_t n) {
    auto client = ClusterClient::Connect(master.address(), {});
    if (!client.ok()) return false;
    auto deadline = Clock::now() + std::chrono::seconds(20) * testing::kSlowdown;
    while (Clock::now() < deadline) {
      if ((*client)->RefreshView().ok() && (*client)->Workers().size() == n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // The index of the one master that leads, once both agree on it (-1 after 20 s).
  int WaitForLeader() {
    auto deadline = Clock::now() + std::chrono::seconds(20);
    while (Clock::now() < deadline) {
      int leaders = 0, leader = -1;
      for (size_t i = 0; i < masters_.size(); ++i) {
        if (masters_[i] && masters_[i]->leading()) {
          ++leaders;
          leader = static_cast<int>(i);
        }
      }
      bool agree = leader >= 0;
      for (const auto& m : masters_)
        if (m && agree && m->leader() != masters_[leader]->address()) agree = false;
      if (leaders == 1 && agree) return leader;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }

  testing::TempDir data_;
  Config config_;
  std::unique_ptr<testing::EtcdCluster> etcd_;
  std::vector<std::unique_ptr<MasterServer>> masters_;
};

TEST_F(EtcdMastersTest, AWorkerJoinedThroughOneMasterIsInEveryMastersViewAndOneLeads) {
  WorkerOptions options;
  options.master = masters_[0]->address();
  Config config = config_;
  config.cache.memory_capacity = 16 << 20;
  auto worker = WorkerServer::Start(config, options);
  ASSERT_TRUE(worker.ok()) << worker.status().ToString();
  EXPECT_TRUE(WaitForWorkers(*masters_[0], 1));
  EXPECT_TRUE(WaitForWorkers(*masters_[1], 1));  // it never talked to this one
  int leader = WaitForLeader();
  ASSERT_GE(leader, 0);
  EXPECT_NE(masters_[1 - leader]->Health().detail.find("following " + masters_[leader]->address()),
            std::string::npos)
      << masters_[1 - leader]->Health().detail;

  // The worker stays through several leases: heartbeats to one master renew its lease in etcd.
  // Kept, a window of etcd's time (its leases), which no fake moves.
  std::this_thread::sleep_for(3 * kTtl);
  EXPECT_TRUE(WaitForWorkers(*masters_[1], 1));

  // A leader that shuts down resigns: the other leads at once.
  auto stopped = Clock::now();
  masters_[leader]->Shutdown();
  masters_[leader].reset();
  int next = WaitForLeader();
  ASSERT_EQ(next, 1 - leader);
  EXPECT_LT(Clock::now() - stopped, 2 * kTtl);

  // A worker that stops leaves every view within its lease.
  (*worker)->Shutdown();
  EXPECT_TRUE(WaitForWorkers(*masters_[next], 0));
}

}  // namespace
}  // namespace lakecache
