#include "membership/leader_election.h"

#include <gtest/gtest.h>

#include <thread>

#include "support/etcd_cluster.h"

namespace lakecache {
namespace {

using testing::EtcdCluster;
using Clock = std::chrono::steady_clock;
constexpr auto kTtl = std::chrono::seconds(3);  // the shortest the test etcd grants
const std::string kKey = "/lakecache/test/leader";

class LeaderElectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cluster = EtcdCluster::Start(3);
    ASSERT_TRUE(cluster.ok()) << cluster.status().message();
    etcd_ = std::move(cluster).value();
  }

  std::shared_ptr<EtcdClient> Connect(std::vector<std::string> endpoints) {
    EtcdOptions options;
    options.endpoints = std::move(endpoints);
    options.timeout = std::chrono::milliseconds(750);  // ttl/4
    auto client = EtcdClient::Connect(std::move(options));
    EXPECT_TRUE(client.ok()) << client.status().message();
    return client.ok() ? *client : nullptr;
  }
  std::vector<std::string> All() const {
    std::vector<std::string> all;
    for (int i = 0; i < etcd_->size(); ++i) all.push_back(etcd_->endpoint(i));
    return all;
  }

  // Waits until exactly one of `candidates` leads and every one names it; its index, or -1.
  // master-0, master-1 and master-2, each with a client of every member.
  std::vector<std::unique_ptr<LeaderElection>> ThreeCandidates() {
    std::vector<std::unique_ptr<LeaderElection>> candidates;
    for (int i = 0; i < 3; ++i) {
      candidates.push_back(std::make_unique<LeaderElection>(Connect(All()), kKey,
                                                            "master-" + std::to_string(i), kTtl));
    }
    return candidates;
  }

  static int WaitForOneLeader(const std::vector<std::unique_ptr<LeaderElection>>& candidates,
                              Clock::duration timeout) {
    auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      int leaders = 0, leader = -1;
      bool agree = true;
      for (size_t i = 0; i < candidates.size(); ++i) {
        if (!candidates[i]) continue;
        if (candidates[i]->leading()) {
          ++leaders;
          leader = static_cast<int>(i);
        }
      }
      for (const auto& c : candidates)
        if (c && leader >= 0 && c->leader() != "master-" + std::to_string(leader)) agree = false;
      if (leaders == 1 && agree) return leader;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }

  std::unique_ptr<EtcdCluster> etcd_;
};

TEST_F(LeaderElectionTest, OneOfThreeLeadsAndEveryOneKnowsWhich) {
  std::vector<std::unique_ptr<LeaderElection>> candidates = ThreeCandidates();
  int leader = WaitForOneLeader(candidates, std::chrono::seconds(10));
  ASSERT_GE(leader, 0);
  // It stays the leader while it lives: several lease lengths later, still one and the same. Kept,
  // a window: the leases are etcd's, timed by its clock, which no fake moves.
  std::this_thread::sleep_for(3 * kTtl);
  EXPECT_EQ(WaitForOneLeader(candidates, std::chrono::seconds(1)), leader);
}

TEST_F(LeaderElectionTest, AResigningLeaderHandsOverAtOnce) {
  std::vector<std::unique_ptr<LeaderElection>> candidates = ThreeCandidates();
  int leader = WaitForOneLeader(candidates, std::chrono::seconds(10));
  ASSERT_GE(leader, 0);
  auto stopped = Clock::now();
  candidates[leader].reset();  // Stop: resigns
  int next = WaitForOneLeader(candidates, std::chrono::seconds(10));
  ASSERT_GE(next, 0);
  EXPECT_NE(next, leader);
  // The key was deleted, not left to expire: the next round (ttl/4) takes it.
  EXPECT_LT(Clock::now() - stopped, kTtl);
}

// A leader cut off from etcd (the only member it can reach stops answering) steps down before its
// lease can expire, and another candidate leads within two lease lengths.
TEST_F(LeaderElectionTest, ALeaderCutOffFromEtcdStepsDownAndAnotherLeadsWithinTwoTtls) {
  int raft_leader = etcd_->RaftLeader();
  ASSERT_GE(raft_leader, 0);
  int lonely = (raft_leader + 1) % etcd_->size();  // not the raft leader: etcd keeps its quorum
  std::vector<std::unique_ptr<LeaderElection>> candidates;
  candidates.push_back(
      std::make_unique<LeaderElection>(Connect({etcd_->endpoint(lonely)}), kKey, "master-0", kTtl));
  ASSERT_EQ(WaitForOneLeader(candidates, std::chrono::seconds(10)), 0);
  std::vector<std::string> others;
  for (int i = 0; i < etcd_->size(); ++i)
    if (i != lonely) others.push_back(etcd_->endpoint(i));
  for (int i = 1; i < 3; ++i)
    candidates.push_back(std::make_unique<LeaderElection>(Connect(others), kKey,
                                                          "master-" + std::to_string(i), kTtl));
  ASSERT_EQ(WaitForOneLeader(candidates, std::chrono::seconds(10)), 0);

  etcd_->Pause(lonely);
  auto cut = Clock::now();
  // Candidate 0 stops believing it leads within ttl/2 and its renewal's timeouts.
  while (candidates[0]->leading() && Clock::now() - cut < 10 * kTtl)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto stepped_down = Clock::now() - cut;
  int next = -1;
  while (Clock::now() - cut < 10 * kTtl) {
    bool one = candidates[1]->leading() != candidates[2]->leading();
    if (one) {
      next = candidates[1]->leading() ? 1 : 2;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  auto took = Clock::now() - cut;
  ASSERT_GT(next, 0);
  EXPECT_FALSE(candidates[0]->leading());
  // Stepped down ttl/2 after its last renewal (at most ttl/4 before the cut), before its lease
  // could run out; another leads within two lease lengths.
  EXPECT_LE(stepped_down, kTtl / 2 + std::chrono::milliseconds(100));
  EXPECT_LT(took, 2 * kTtl);
  etcd_->Resume(lonely);
  // Back in reach, candidate 0 follows the new leader.
  auto deadline = Clock::now() + std::chrono::seconds(15);
  while (candidates[0]->leader() != "master-" + std::to_string(next) && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(candidates[0]->leader(), "master-" + std::to_string(next));
  EXPECT_FALSE(candidates[0]->leading());
}

}  // namespace
}  // namespace lakecache
