// `lakecache health`, the exec probe of the Kubernetes pods, against real master, worker and
// mount processes: healthy while each serves, unhealthy with the reason once it cannot, alive
// (--live) for as long as the process answers, and a dead FUSE mount named as such.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "support/cluster_procs.h"
#include "support/fuse_mounts.h"
#include "support/test_servers.h"

// Its own namespace: the files of integration_tests are compiled in unity batches.
namespace lakecache::health_test {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kBucket[] = "probe";

class HealthTest : public testing::ClusterProcessFixture {
 protected:
  static void SetUpTestSuite() {
    auto started = testing::S3rver::Start({.buckets = {kBucket}});
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    server_ = std::move(started).value().release();
    Status put = server_->PutObjects(kBucket, {{"a.bin", std::string(100000, 'a')}});
    ASSERT_TRUE(put.ok()) << put.ToString();
  }

  void SetUp() override {
    SetUpScratch("lakecache-health");
    if (HasFatalFailure()) return;
    WriteConfig({{kBucket, server_->endpoint(), "64KiB"}});
    run_dir_ = dir_->path() + "/run";
    std::filesystem::create_directory(run_dir_);
  }

  testing::RunResult Health(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {LAKECACHE_BINARY, "health", "--timeout", "2s"};
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::RunCommand(argv, {"LAKECACHE_RUN_DIR=" + run_dir_}, std::chrono::seconds(30));
  }

  // Polls until `lakecache health args` exits with `code`; returns the last result.
  testing::RunResult WaitForHealth(const std::vector<std::string>& args, int code) const {
    auto deadline = Clock::now() + std::chrono::seconds(15);
    testing::RunResult r = Health(args);
    while (r.exit_code != code && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      r = Health(args);
    }
    return r;
  }

  std::string run_dir_;
};

TEST_F(HealthTest, UsageErrorsExitTwo) {
  EXPECT_EQ(Health({}).exit_code, 2);
  testing::RunResult both = Health({"--socket", run_dir_ + "/x.health", mountpoint_});
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("not both"), std::string::npos) << both.err;
  EXPECT_EQ(Health({"--socket", run_dir_ + "/x", "--timeout", "soon"}).exit_code, 2);
}

TEST_F(HealthTest, NothingListeningIsUnhealthyAndNamesTheSocket) {
  std::string socket = run_dir_ + "/nobody.health";
  testing::RunResult r = Health({"--socket", socket});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("unhealthy: no health socket at " + socket), std::string::npos) << r.err;
  r = Health({"--live", "--socket", socket});
  EXPECT_EQ(r.exit_code, 1) << "nothing answers: not even alive";
}

TEST_F(HealthTest, MasterWorkerAndMountAreHealthyUntilTheMasterGoesThenOnlyAlive) {
  std::string master_socket = run_dir_ + "/master.health";
  std::string worker_socket = run_dir_ + "/worker.health";
  master_args_ = {"--health-socket", master_socket};
  StartCluster({{"16MiB", "64MiB"}}, "127.0.0.1:0", {"--health-socket", worker_socket});
  ASSERT_FALSE(HasFatalFailure());

  testing::RunResult r = Health({"--socket", master_socket});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("healthy: master " + master_address_ +
                       " serving 1 namespace(s), 1 live "
                       "worker(s)"),
            std::string::npos)
      << r.out;
  r = WaitForHealth({"--socket", worker_socket}, 0);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("registered with master " + master_address_), std::string::npos) << r.out;

  Mount({}, {"LAKECACHE_RUN_DIR=" + run_dir_});
  ASSERT_FALSE(HasFatalFailure());
  r = WaitForHealth({mountpoint_}, 0);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("the mount at " + std::filesystem::canonical(mountpoint_).string()),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("1 live worker(s)"), std::string::npos) << r.out;

  // The master goes: its socket with it; the worker and the mount stop being ready (the master is
  // silent for three heartbeat intervals, 1.5 s here) but stay alive.
  master_->Stop();
  r = Health({"--socket", master_socket});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no health socket"), std::string::npos) << r.err;
  r = WaitForHealth({"--socket", worker_socket}, 1);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("master " + master_address_ + " has not answered for"), std::string::npos)
      << r.err;
  r = Health({"--live", "--socket", worker_socket});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("alive: "), std::string::npos) << r.out;
  r = WaitForHealth({mountpoint_}, 1);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("has not answered for"), std::string::npos) << r.err;
  EXPECT_EQ(Health({"--live", mountpoint_}).exit_code, 0);
}

TEST_F(HealthTest, AKilledMountIsDeadAndTheProbeSaysHowToClearIt) {
  StartCluster({{"16MiB", "64MiB"}});
  ASSERT_FALSE(HasFatalFailure());
  Mount({}, {"LAKECACHE_RUN_DIR=" + run_dir_});
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_EQ(WaitForHealth({mountpoint_}, 0).exit_code, 0);
  ::kill(-mount_->pid(), SIGKILL);  // the holder and its server
  while (mount_->Running()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  testing::RunResult r = Health({"--live", mountpoint_});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is dead (its FUSE process is gone); clear it with `fusermount3 -u " +
                       mountpoint_ + "`"),
            std::string::npos)
      << r.err;
  // Not a mount at all: nothing answers for it.
  std::string plain = dir_->path() + "/plain";
  std::filesystem::create_directory(plain);
  r = Health({plain});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no lakecache mount answers for " + plain), std::string::npos) << r.err;
}

}  // namespace
}  // namespace lakecache::health_test
