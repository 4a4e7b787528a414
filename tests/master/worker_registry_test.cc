#include "master/worker_registry.h"

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace lakecache {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr auto kInterval = seconds(1);
constexpr auto kTimeout = seconds(5);

rpc::WorkerInfo Worker(const std::string& id, const std::string& address,
                       uint64_t capacity = 1000) {
  rpc::WorkerInfo info;
  info.set_id(id);
  info.set_address(address);
  info.set_capacity_bytes(capacity);
  info.set_start_time_ms(1700000000000);
  return info;
}

class WorkerRegistryTest : public ::testing::Test {
 protected:
  std::vector<std::string> LiveIds() {
    rpc::ClusterView view = registry_.View();
    std::vector<std::string> ids;
    for (const rpc::WorkerInfo& w : view.workers()) ids.push_back(w.id());
    return ids;
  }
  uint64_t Epoch() { return registry_.View().epoch(); }

  WorkerRegistry::Clock::time_point now_ = WorkerRegistry::Clock::now();
  WorkerRegistry registry_{kInterval, kTimeout, [this] { return now_; }};
};

TEST_F(WorkerRegistryTest, EmptyViewCarriesHeartbeatSettings) {
  rpc::ClusterView view = registry_.View();
  EXPECT_EQ(view.workers_size(), 0);
  EXPECT_GT(view.epoch(), 0u);
  EXPECT_EQ(view.heartbeat_interval_ms(), 1000u);
  EXPECT_EQ(view.heartbeat_timeout_ms(), 5000u);
}

TEST_F(WorkerRegistryTest, JoinBumpsEpochAndViewIsSortedById) {
  uint64_t before = Epoch();
  uint64_t after_b = registry_.Register(Worker("b", "127.0.0.1:2"));
  uint64_t after_a = registry_.Register(Worker("a", "127.0.0.1:1"));
  EXPECT_EQ(after_b, before + 1);
  EXPECT_EQ(after_a, before + 2);
  EXPECT_EQ(LiveIds(), (std::vector<std::string>{"a", "b"}));
  rpc::ClusterView view = registry_.View();
  EXPECT_EQ(view.epoch(), after_a);
  EXPECT_EQ(view.workers(0).address(), "127.0.0.1:1");
  EXPECT_EQ(view.workers(0).capacity_bytes(), 1000u);
}

TEST_F(WorkerRegistryTest, RegisteringAgainUnchangedKeepsEpoch) {
  uint64_t epoch = registry_.Register(Worker("a", "127.0.0.1:1"));
  EXPECT_EQ(registry_.Register(Worker("a", "127.0.0.1:1")), epoch);
  EXPECT_EQ(LiveIds(), (std::vector<std::string>{"a"}));
}

// Whether a worker serves plain text beyond loopback comes with every heartbeat; it moves no
// block, so the epoch stays.
TEST_F(WorkerRegistryTest, HeartbeatTakesInsecureWithoutChangingTheEpoch) {
  rpc::WorkerInfo insecure = Worker("a", "127.0.0.1:1");
  insecure.set_insecure(true);
  uint64_t epoch = registry_.Register(insecure);
  EXPECT_TRUE(registry_.View().workers(0).insecure());
  ASSERT_EQ(registry_.Heartbeat(Worker("a", "127.0.0.1:1")), epoch);
  EXPECT_FALSE(registry_.View().workers(0).insecure());
}

TEST_F(WorkerRegistryTest, HeartbeatsKeepAWorkerAlivePastTheTimeout) {
  registry_.Register(Worker("a", "127.0.0.1:1"));
  uint64_t epoch = Epoch();
  for (int i = 0; i < 20; ++i) {
    now_ += kInterval;
    ASSERT_EQ(registry_.Heartbeat(Worker("a", "127.0.0.1:1")), epoch);
  }
  EXPECT_EQ(LiveIds(), (std::vector<std::string>{"a"}));
  EXPECT_EQ(Epoch(), epoch);
}

TEST_F(WorkerRegistryTest, SilentWorkerIsDroppedAfterTheTimeout) {
  registry_.Register(Worker("a", "127.0.0.1:1"));
  registry_.Register(Worker("b", "127.0.0.1:2"));
  uint64_t epoch = Epoch();
  now_ += kTimeout - seconds(1);
  ASSERT_TRUE(registry_.Heartbeat(Worker("b", "127.0.0.1:2")).has_value());
  now_ += seconds(1);  // exactly the timeout: still alive
  EXPECT_EQ(LiveIds(), (std::vector<std::string>{"a", "b"}));
  now_ += milliseconds(1);
  EXPECT_EQ(LiveIds(), (std::vector<std::string>{"b"}));
  EXPECT_EQ(Epoch(), epoch + 1);
}

TEST_F(WorkerRegistryTest, HeartbeatOfUnknownWorkerAsksToRegister) {
  EXPECT_EQ(registry_.Heartbeat(Worker("a", "127.0.0.1:1")), std::nullopt);
  EXPECT_TRUE(LiveIds().empty());
}

TEST_F(WorkerRegistryTest, DroppedWorkerMustRegisterAgain) {
  registry_.Register(Worker("a", "127.0.0.1:1"));
  now_ += kTimeout + seconds(1);
  // Dropped on this very call, whether or not a view was read since.
  EXPECT_EQ(registry_.Heartbeat(Worker("a", "127.0.0.1:1")), std::nullopt);
  uint64_t epoch = Epoch();
  EXPECT_EQ(registry_.Register(Worker("a", "127.0.0.1:1")), epoch + 1);
}

TEST_F(WorkerRegistryTest, NewIdOnAReusedAddressReplacesTheOldWorker) {
  registry_.Register(Worker("old", "127.0.0.1:1"));
  registry_.Register(Worker("other", "127.0.0.1:2"));
  uint64_t epoch = Epoch();
  EXPECT_EQ(registry_.Register(Worker("new", "127.0.0.1:1")), epoch + 2);  // one left, one joined
  EXPECT_EQ(LiveIds(), (std::vector<std::string>{"new", "other"}));
}

TEST_F(WorkerRegistryTest, AddressChangeBumpsEpoch) {
  uint64_t epoch = registry_.Register(Worker("a", "127.0.0.1:1"));
  EXPECT_EQ(registry_.Register(Worker("a", "127.0.0.1:9")), epoch + 1);
  EXPECT_EQ(registry_.View().workers(0).address(), "127.0.0.1:9");
}

TEST_F(WorkerRegistryTest, RestartBumpsEpoch) {
  uint64_t epoch = registry_.Register(Worker("a", "127.0.0.1:1"));
  rpc::WorkerInfo restarted = Worker("a", "127.0.0.1:1");
  restarted.set_start_time_ms(restarted.start_time_ms() + 1);
  EXPECT_EQ(registry_.Register(restarted), epoch + 1);
}

TEST_F(WorkerRegistryTest, CapacityChangeInHeartbeatBumpsEpoch) {
  uint64_t epoch = registry_.Register(Worker("a", "127.0.0.1:1", 1000));
  EXPECT_EQ(registry_.Heartbeat(Worker("a", "127.0.0.1:1", 2000)), epoch + 1);
  EXPECT_EQ(registry_.View().workers(0).capacity_bytes(), 2000u);
}

TEST_F(WorkerRegistryTest, UsedBytesChangeKeepsEpoch) {
  uint64_t epoch = registry_.Register(Worker("a", "127.0.0.1:1"));
  rpc::WorkerInfo busy = Worker("a", "127.0.0.1:1");
  busy.set_used_bytes(777);
  EXPECT_EQ(registry_.Heartbeat(busy), epoch);
  EXPECT_EQ(registry_.View().workers(0).used_bytes(), 777u);
  EXPECT_EQ(Epoch(), epoch);
}

TEST_F(WorkerRegistryTest, HeartbeatWithOnlyIdKeepsRegisteredFields) {
  uint64_t epoch = registry_.Register(Worker("a", "127.0.0.1:1", 1000));
  rpc::WorkerInfo bare;
  bare.set_id("a");
  bare.set_used_bytes(5);
  EXPECT_EQ(registry_.Heartbeat(bare), epoch);
  rpc::WorkerInfo seen = registry_.View().workers(0);
  EXPECT_EQ(seen.address(), "127.0.0.1:1");
  EXPECT_EQ(seen.capacity_bytes(), 1000u);
  EXPECT_EQ(seen.used_bytes(), 5u);
}

TEST_F(WorkerRegistryTest, EpochOfANewRegistryIsLaterThanAnOldOnes) {
  // The epoch starts at the wall clock in ms: a master restarted later does not repeat an epoch
  // its clients saw before, as long as it changed less than once a millisecond.
  uint64_t old_epoch = registry_.Register(Worker("a", "127.0.0.1:1"));
  // Kept: a sleep is what makes the wall clock's millisecond move on; it can only be longer.
  std::this_thread::sleep_for(milliseconds(2));
  WorkerRegistry restarted(kInterval, kTimeout);
  EXPECT_GT(restarted.View().epoch(), old_epoch);
}

}  // namespace
}  // namespace lakecache
