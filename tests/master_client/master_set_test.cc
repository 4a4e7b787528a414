// MasterSet against real gRPC servers on loopback that play masters: one that serves, a follower
// that redirects to the leader (or says no master leads), one that answers about the request, and
// an address where nothing listens.
#include "master_client/master_set.h"

#include <grpcpp/server.h>
#include <grpcpp/server_context.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rpc/grpc_util.h"
#include "rpc/lakecache.grpc.pb.h"
#include "support/test_servers.h"
#include "support/wait_for.h"

namespace lakecache::rpc {
namespace {

using Clock = std::chrono::steady_clock;

class FakeMaster final : public MasterService::Service {
 public:
  enum class Mode { kServe, kRedirect, kNotFound, kDown, kSlowOnce };

  FakeMaster() {
    auto started = StartServer("127.0.0.1:0", {this});
    EXPECT_TRUE(started.ok()) << started.status().ToString();
    server_ = std::move(started->server);
    address_ = started->address;
  }
  ~FakeMaster() override { server_->Shutdown(std::chrono::system_clock::now()); }

  const std::string& address() const { return address_; }
  int calls() const { return calls_.load(); }
  void Serve() { Set(Mode::kServe, ""); }
  void Redirect(const std::string& leader) { Set(Mode::kRedirect, leader); }
  void NotFound() { Set(Mode::kNotFound, ""); }
  // Answers as a master that cannot be reached does (UNAVAILABLE), counting the calls.
  void Down() { Set(Mode::kDown, ""); }
  // Answers the next call after `delay`, then serves.
  void SlowOnce(std::chrono::milliseconds delay) {
    std::lock_guard lock(mu_);
    mode_ = Mode::kSlowOnce;
    delay_ = delay;
  }

  grpc::Status GetClusterView(grpc::ServerContext* ctx, const ClusterViewRequest*,
                              ClusterView* view) override {
    calls_.fetch_add(1);
    std::unique_lock lock(mu_);
    if (mode_ == Mode::kSlowOnce) {
      mode_ = Mode::kServe;
      auto delay = delay_;
      lock.unlock();
      std::this_thread::sleep_for(delay);
      lock.lock();
    }
    switch (mode_) {
      case Mode::kServe:
        view->set_address(address_);
        return grpc::Status::OK;
      case Mode::kRedirect:
        return RedirectToLeader(ctx, address_, leader_, "an election is under way");
      case Mode::kNotFound:
        return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such thing");
      case Mode::kDown:
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection refused");
      case Mode::kSlowOnce:
        break;
    }
    return grpc::Status::OK;
  }

 private:
  void Set(Mode mode, const std::string& leader) {
    std::lock_guard lock(mu_);
    mode_ = mode;
    leader_ = leader;
  }

  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::atomic<int> calls_{0};
  std::mutex mu_;
  Mode mode_ = Mode::kServe;
  std::string leader_;
  std::chrono::milliseconds delay_{0};
};

std::string Nowhere() { return "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort()); }

MasterSet Masters(const std::vector<std::string>& addresses) {
  return MasterSet(addresses, [](const std::string& address) { return OpenChannel(address); });
}

// Asks the set for the view; the answering master's address in *answered.
Status AskView(MasterSet& masters, std::chrono::milliseconds budget, std::string* answered) {
  ClusterView view;
  Status s = masters.Call(
      [&](const MasterSet::Master& m, grpc::ClientContext* ctx) {
        return MasterService::NewStub(m.channel)->GetClusterView(ctx, ClusterViewRequest(), &view);
      },
      std::chrono::seconds(2), std::chrono::system_clock::now() + budget);
  *answered = view.address();
  return s;
}

TEST(MasterListTest, ParsesListsAndRefusesWhatIsNotOne) {
  auto two = ParseMasterList("--master", "a:7400, b:7401,a:7400");
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ(*two, (std::vector<std::string>{"a:7400", "b:7401"}));
  for (const char* bad : {"", "a:7400,,b:7400", "a:7400,b", "a:x", ","}) {
    auto parsed = ParseMasterList("--master", bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(parsed.status().message().find("--master"), std::string::npos)
        << parsed.status().message();
  }
}

TEST(MasterSetTest, AFollowerRedirectsToTheLeaderAndCallsStayThere) {
  FakeMaster follower, leader;
  follower.Redirect(leader.address());
  MasterSet masters = Masters({follower.address(), leader.address()});
  std::string answered;
  ASSERT_TRUE(AskView(masters, std::chrono::seconds(5), &answered).ok());
  EXPECT_EQ(answered, leader.address());
  EXPECT_EQ(masters.Current().address, leader.address());
  ASSERT_TRUE(AskView(masters, std::chrono::seconds(5), &answered).ok());
  EXPECT_EQ(follower.calls(), 1);
  EXPECT_EQ(leader.calls(), 2);
}

TEST(MasterSetTest, AMasterThatDoesNotAnswerIsPassedOver) {
  FakeMaster alive;
  MasterSet masters = Masters({Nowhere(), alive.address()});
  std::string answered;
  Status s = AskView(masters, std::chrono::seconds(5), &answered);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(answered, alive.address());
  // A view naming the dead master as leader does not bring calls back to it at once.
  masters.NoteLeader(masters.addresses()[0]);
  EXPECT_EQ(masters.Current().address, alive.address());
}

// A dead leader's followers name it until its lease ends: the call is not sent back to it over
// and over, nor by the views that name it.
TEST(MasterSetTest, ADeadLeaderTheFollowersStillNameIsNotAskedAgain) {
  FakeMaster dead, follower;
  dead.Down();
  follower.Redirect(dead.address());
  std::thread elected([&] {
    // The call has been redirected to the dead leader several times, pausing between.
    EXPECT_TRUE(testing::WaitFor([&] { return follower.calls() >= 3; }));
    follower.Serve();
  });
  MasterSet masters = Masters({dead.address(), follower.address()});
  std::string answered;
  Status s = AskView(masters, std::chrono::seconds(10), &answered);
  elected.join();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(answered, follower.address());
  EXPECT_EQ(dead.calls(), 1);
  masters.NoteLeader(dead.address());  // a view that still names it
  ASSERT_TRUE(AskView(masters, std::chrono::seconds(10), &answered).ok());
  EXPECT_EQ(dead.calls(), 1);
}

TEST(MasterSetTest, WhileNoMasterLeadsTheCallWaitsForOne) {
  FakeMaster a, b;
  a.Redirect("");
  b.Redirect("");
  std::atomic<int> asked_before_election{0};
  auto start = Clock::now();
  std::thread elected([&] {
    // Both said "no leader" a few times, with pauses between the asks (100, 200, 400 ms...): at
    // least the first two before the fourth ask. A busy host only makes them longer.
    EXPECT_TRUE(testing::WaitFor([&] { return a.calls() + b.calls() >= 4; }));
    EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(300)) << "asked without pausing";
    asked_before_election = a.calls() + b.calls();
    b.Serve();
    a.Redirect(b.address());
  });
  MasterSet masters = Masters({a.address(), b.address()});
  std::string answered;
  Status s = AskView(masters, std::chrono::seconds(30), &answered);
  elected.join();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(answered, b.address());
  // It waited for the election, and asked only a few times more once it was over.
  EXPECT_GE(asked_before_election.load(), 4);
  EXPECT_LT(a.calls() + b.calls(), asked_before_election + 4) << "asked again without pausing";
}

TEST(MasterSetTest, ALeaderThatWasOnlySlowIsAskedAgain) {
  FakeMaster leader, follower;
  follower.Redirect(leader.address());
  MasterSet masters = Masters({leader.address(), follower.address()});
  std::string answered;
  ASSERT_TRUE(AskView(masters, std::chrono::seconds(5), &answered).ok());
  // One call outlives its deadline (a large listing on a busy leader)...
  leader.SlowOnce(std::chrono::milliseconds(2500));
  (void)AskView(masters, std::chrono::milliseconds(2200), &answered);
  // ...the next goes to the leader again, directly or through the follower's redirect.
  auto start = Clock::now();
  Status s = AskView(masters, std::chrono::seconds(5), &answered);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(answered, leader.address());
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
}

TEST(MasterSetTest, NoLeaderUntilTheDeadlineFailsSayingSo) {
  FakeMaster a, b;
  a.Redirect("");
  b.Redirect("");
  MasterSet masters = Masters({a.address(), b.address()});
  std::string answered;
  auto start = Clock::now();
  Status s = AskView(masters, std::chrono::milliseconds(1500), &answered);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(4));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kPreconditionFailed) << s.ToString();
  EXPECT_NE(s.message().find("no master leads the cluster now"), std::string::npos) << s.message();
}

TEST(MasterSetTest, EveryMasterDownFailsAtOnceNamingThem) {
  std::string one = Nowhere(), two = Nowhere();
  MasterSet masters = Masters({one, two});
  std::string answered;
  auto start = Clock::now();
  Status s = AskView(masters, std::chrono::seconds(20), &answered);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find(one), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(two), std::string::npos) << s.message();
}

TEST(MasterSetTest, MastersThatSaidTheSameAreNamedTogether) {
  FakeMaster a, b;
  a.Down();
  b.Down();
  std::string c = Nowhere();
  MasterSet masters = Masters({a.address(), b.address(), c});
  std::string answered;
  Status s = AskView(masters, std::chrono::seconds(20), &answered);
  ASSERT_FALSE(s.ok());
  const std::string& m = s.message();
  EXPECT_EQ(m.rfind("master " + c + ": ", 0), 0u) << m;
  EXPECT_NE(
      m.find("(before that: masters " + a.address() + "," + b.address() + ": connection refused)"),
      std::string::npos)
      << m;
  EXPECT_EQ(m.find("connection refused"), m.rfind("connection refused")) << m;
}

TEST(MasterSetTest, AnAnswerAboutTheRequestIsNotAskedElsewhere) {
  FakeMaster a, b;
  a.NotFound();
  MasterSet masters = Masters({a.address(), b.address()});
  std::string answered;
  Status s = AskView(masters, std::chrono::seconds(5), &answered);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_EQ(a.calls(), 1);
  EXPECT_EQ(b.calls(), 0);
}

}  // namespace
}  // namespace lakecache::rpc
