#include "membership/etcd_membership.h"

#include <gtest/gtest.h>

#include <thread>

#include "support/etcd_cluster.h"
#include "support/wait_for.h"

namespace lakecache {
namespace {

using testing::EtcdCluster;
using Clock = std::chrono::steady_clock;
constexpr auto kTtl = std::chrono::seconds(3);  // the shortest the test etcd grants
const std::string kPrefix = "/lakecache/test/workers/";

rpc::WorkerInfo Worker(const std::string& id, const std::string& address, uint64_t capacity) {
  rpc::WorkerInfo w;
  w.set_id(id);
  w.set_address(address);
  w.set_capacity_bytes(capacity);
  w.set_start_time_ms(1000);
  return w;
}

class EtcdMembershipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cluster = EtcdCluster::Start(3);
    ASSERT_TRUE(cluster.ok()) << cluster.status().message();
    etcd_ = std::move(cluster).value();
  }

  // A master's membership: its own etcd client, starting with the first member it is given.
  std::unique_ptr<EtcdMembership> Master(int first_member) {
    EtcdOptions options;
    for (int i = 0; i < etcd_->size(); ++i)
      options.endpoints.push_back(etcd_->endpoint((first_member + i) % etcd_->size()));
    options.timeout = std::chrono::milliseconds(1000);
    auto client = EtcdClient::Connect(options);
    EXPECT_TRUE(client.ok()) << client.status().message();
    if (!client.ok()) return nullptr;
    auto m = EtcdMembership::Start(*client, kPrefix, kTtl);
    EXPECT_TRUE(m.ok()) << m.status().message();
    return m.ok() ? std::move(m).value() : nullptr;
  }

  // Waits (10 s at most) until `m`'s view is `ids` with the given capacities (0: any).
  static bool WaitForView(const EtcdMembership& m, std::map<std::string, uint64_t> ids) {
    auto deadline = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < deadline) {
      std::map<std::string, uint64_t> seen;
      for (const auto& w : m.Workers(nullptr)) seen[w.id()] = w.capacity_bytes();
      bool match = seen.size() == ids.size();
      for (const auto& [id, capacity] : ids)
        match = match && seen.count(id) && (capacity == 0 || seen[id] == capacity);
      if (match) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  std::unique_ptr<EtcdCluster> etcd_;
};

TEST_F(EtcdMembershipTest, EveryMasterSeesAWorkerThatJoinedThroughAnyOfThem) {
  auto a = Master(0), b = Master(1);
  ASSERT_TRUE(a && b);
  auto epoch = a->Register(Worker("w1", "10.0.0.1:7001", 100));
  ASSERT_TRUE(epoch.ok()) << epoch.status().message();
  EXPECT_TRUE(WaitForView(*b, {{"w1", 100}}));
  // Heartbeats through the other master renew the same lease and carry a capacity change.
  auto beat = b->Heartbeat(Worker("w1", "10.0.0.1:7001", 200));
  ASSERT_TRUE(beat.ok()) << beat.status().message();
  ASSERT_TRUE(beat->has_value());
  EXPECT_GT(**beat, *epoch);
  EXPECT_TRUE(WaitForView(*a, {{"w1", 200}}));
  uint64_t ea = 0, eb = 0;
  a->Workers(&ea);
  b->Workers(&eb);
  EXPECT_EQ(ea, eb);  // the same view has the same epoch on every master
  // Heartbeats keep it alive past several lease lengths.
  for (int i = 0; i < 8; ++i) {
    std::this_thread::sleep_for(kTtl / 3);
    auto again = (i % 2 ? a : b)->Heartbeat(Worker("w1", "", 0));
    ASSERT_TRUE(again.ok() && again->has_value());
  }
  EXPECT_TRUE(WaitForView(*a, {{"w1", 200}}));
  // A new worker on w1's address replaces it.
  ASSERT_TRUE(b->Register(Worker("w2", "10.0.0.1:7001", 300)).ok());
  EXPECT_TRUE(WaitForView(*a, {{"w2", 300}}));
}

TEST_F(EtcdMembershipTest, AWorkerThatStopsHeartbeatingLeavesWithinItsLeaseAndMayComeBack) {
  auto a = Master(0), b = Master(2);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->Register(Worker("w1", "10.0.0.1:7001", 100)).ok());
  ASSERT_TRUE(a->Register(Worker("w2", "10.0.0.2:7001", 100)).ok());
  EXPECT_TRUE(WaitForView(*b, {{"w1", 0}, {"w2", 0}}));
  // w2 keeps heartbeating while w1's lease runs out. No bound on when: how soon etcd expires a
  // lease on a busy machine is etcd's business; the deadline is only for "never".
  auto deadline = Clock::now() + testing::kWaitTimeout;
  while (Clock::now() < deadline) {
    ASSERT_TRUE(b->Heartbeat(Worker("w2", "", 0)).ok());
    if (b->Workers(nullptr).size() == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  EXPECT_TRUE(WaitForView(*b, {{"w2", 0}}));
  EXPECT_TRUE(WaitForView(*a, {{"w2", 0}}));
  auto gone = a->Heartbeat(Worker("w1", "", 0));
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone->has_value());                                    // must register again
  ASSERT_TRUE(a->Register(Worker("w1", "10.0.0.1:7001", 100)).ok());  // the same id
  EXPECT_TRUE(WaitForView(*b, {{"w1", 0}, {"w2", 0}}));
}

TEST_F(EtcdMembershipTest, WithEtcdDownTheLastViewStaysStaleAndWritesFailClearly) {
  auto a = Master(0);
  ASSERT_TRUE(a);
  ASSERT_TRUE(a->Register(Worker("w1", "10.0.0.1:7001", 100)).ok());
  for (int i = 0; i < etcd_->size(); ++i) etcd_->Kill(i);
  auto deadline = Clock::now() + std::chrono::seconds(15);
  while (!a->stale() && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(a->stale());
  EXPECT_EQ(a->Workers(nullptr).size(), 1u);  // never emptied
  auto refused = a->Register(Worker("w3", "10.0.0.3:7001", 100));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable) << refused.status().message();
  EXPECT_NE(refused.status().message().find("etcd 127.0.0.1:"), std::string::npos);
  ASSERT_TRUE(etcd_->RestartStopped().ok());
  deadline = Clock::now() + std::chrono::seconds(20);
  while (a->stale() && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(a->stale());
  // And writes work again.
  ASSERT_TRUE(a->Register(Worker("w3", "10.0.0.3:7001", 100)).ok());
  EXPECT_TRUE(WaitForView(*a, {{"w1", 0}, {"w3", 0}}));
}

}  // namespace
}  // namespace lakecache
