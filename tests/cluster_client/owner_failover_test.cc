// OwnerFailover, the one failover of every call to a block's or an object's workers: the order it
// tries them in, what makes it go on to the next, and what it marks down. No master and no worker
// runs: the view comes from a fake master, and the attempts are the test's.
#include "cluster_client/owner_failover.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cluster_client/fake_master_client.h"
#include "cluster_client/live_view.h"

namespace lakecache {
namespace {

using testing::FakeMasterClient;

class OwnerFailoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Never dialled: the attempts are the test's.
    master_.AddView(FakeMasterClient::MakeView(
        1, {{"w1", "127.0.0.1:1"}, {"w2", "127.0.0.1:2"}, {"w3", "127.0.0.1:3"}}));
    ASSERT_TRUE(live_.Refresh().ok());
    view_ = live_.Current();
  }

  // The ids of the workers in the order the failover tries them for kKey, with none down.
  std::vector<std::string> PlacementOrder() const {
    std::vector<std::string> ids;
    for (size_t i : RendezvousOrder(kKey, view_->nodes)) ids.push_back(view_->workers[i].id);
    return ids;
  }
  bool Down(const std::string& id) const {
    for (const ViewWorker& w : view_->workers) {
      if (w.id == id) return !w.peer->up(SteadyNowMs());
    }
    return false;
  }

  // Runs the failover for kKey; `answer` gives each attempt's status by worker id.
  template <typename Answer>
  Status Run(const Answer& answer, std::vector<std::string>* tried,
             Clock::time_point deadline = Clock::time_point::max()) {
    return failover_.Run(
        *view_, kKey, OwnerCall{"read", "reading"}, [] { return std::string("k block 0"); },
        deadline,
        [&](const ViewWorker& worker) {
          tried->push_back(worker.id);
          return answer(worker.id);
        });
  }

  static constexpr uint64_t kKey = 0x5eed;
  FakeMasterClient master_;
  LiveView live_{master_, ClusterClientOptions{}, nullptr};
  std::atomic<uint64_t> calls_{0};
  OwnerFailover failover_{live_, "fake", calls_};
  std::shared_ptr<const ClientView> view_;
};

TEST_F(OwnerFailoverTest, AFailedOwnerIsMarkedDownAndTheNextInOrderAnswers) {
  std::vector<std::string> order = PlacementOrder();
  std::vector<std::string> tried;
  Status s = Run(
      [&](const std::string& id) {
        return id == order[0] ? Status::Unavailable("refused") : Status::Ok();
      },
      &tried);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(tried, (std::vector<std::string>{order[0], order[1]}));
  EXPECT_TRUE(Down(order[0]));
  EXPECT_FALSE(Down(order[1]));
  EXPECT_EQ(calls_.load(), 2u);

  // The owner marked down goes last: the next call asks the second owner first.
  tried.clear();
  ASSERT_TRUE(Run([](const std::string&) { return Status::Ok(); }, &tried).ok());
  EXPECT_EQ(tried, (std::vector<std::string>{order[1]}));
}

TEST_F(OwnerFailoverTest, AnAnswerAboutTheRequestIsNotFailedOver) {
  std::vector<std::string> tried;
  Status s = Run([](const std::string&) { return Status::NotFound("no such key"); }, &tried);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(tried.size(), 1u) << "every worker would give the object store's same answer";
  EXPECT_FALSE(Down(tried[0]));
}

TEST_F(OwnerFailoverTest, EveryWorkerFailingIsUnavailableAndNamesTheCall) {
  std::vector<std::string> tried;
  Status s =
      Run([](const std::string& id) { return Status::Unavailable(id + " refused"); }, &tried);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("every worker failed reading k block 0"), std::string::npos)
      << s.message();
  EXPECT_EQ(tried, PlacementOrder());
  for (const std::string& id : tried) EXPECT_TRUE(Down(id)) << id;
}

TEST_F(OwnerFailoverTest, APassedDeadlineEndsTheFailoverAfterAFailure) {
  std::vector<std::string> tried;
  Status s = Run([](const std::string&) { return Status::Unavailable("refused"); }, &tried,
                 Clock::now() - std::chrono::seconds(1));
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_EQ(tried.size(), 1u) << "the first owner is always asked; no failover past the deadline";
}

TEST_F(OwnerFailoverTest, AViewWithoutWorkersSaysSo) {
  ClientView empty;
  std::vector<std::string> tried;
  Status s = failover_.Run(
      empty, kKey, OwnerCall{"write", "writing"}, [] { return std::string("k"); },
      Clock::time_point::max(),
      [&](const ViewWorker& w) {
        tried.push_back(w.id);
        return Status::Ok();
      });
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("no workers in the cluster (master fake) to write k"),
            std::string::npos)
      << s.message();
  EXPECT_TRUE(tried.empty());
}

}  // namespace
}  // namespace lakecache
