#include "membership/leader_election.h"

#include <gtest/gtest.h>

#include <iostream>
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
  candidates[leader].reset();  // Stop: resigns
  // The key was deleted, not left to expire: once Stop returns it no longer names the old leader
  // (a key left to its lease would, for a whole ttl), so the next round (ttl/4) takes it.
  std::shared_ptr<EtcdClient> reader = Connect(All());
  ASSERT_NE(reader, nullptr);
  auto range = reader->Get(kKey);
  ASSERT_TRUE(range.ok()) << range.status().message();
  for (const EtcdKeyValue& kv : range->kvs)
    EXPECT_NE(kv.value, "master-" + std::to_string(leader)) << "the resigned leader's key remains";
  int next = WaitForOneLeader(candidates, std::chrono::seconds(10));
  ASSERT_GE(next, 0);
  EXPECT_NE(next, leader);
}

// A leader cut off from etcd (the only member it can reach stops answering) steps down before its
// lease can expire, so no poll ever sees it lead beside the candidate that leads next.
TEST_F(LeaderElectionTest, ALeaderCutOffFromEtcdStepsDownBeforeAnotherLeads) {
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
  // Candidate 0 steps down ttl/2 after its last renewal (at most ttl/4 before the cut); its lease
  // runs out a ttl after that renewal, and only then can another lead. The others are read before
  // candidate 0, so a poll that sees both lead saw them lead at once.
  bool two_leaders = false;
  Clock::duration stepped_down = Clock::duration::max();
  int next = -1;
  while (Clock::now() - cut < 10 * kTtl) {
    bool one = candidates[1]->leading(), two = candidates[2]->leading();
    bool old = candidates[0]->leading();
    if (old && (one || two)) two_leaders = true;
    if (!old && stepped_down == Clock::duration::max()) stepped_down = Clock::now() - cut;
    if (one != two) {
      next = one ? 1 : 2;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  auto took = Clock::now() - cut;
  ASSERT_GT(next, 0);
  EXPECT_FALSE(two_leaders) << "candidate 0 still led when candidate " << next << " did";
  EXPECT_FALSE(candidates[0]->leading());
  // Another led only once candidate 0's lease ran out (not, say, a key lost some other way).
  EXPECT_GE(took, kTtl * 3 / 4);
  std::cout << "stepped down "
            << std::chrono::duration_cast<std::chrono::milliseconds>(stepped_down).count()
            << " ms after the cut; master-" << next << " led after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms\n";
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
