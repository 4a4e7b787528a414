// `lakecache master`, `worker` and `cluster status` as an operator meets them: what the master logs
// at the default level when workers join and leave, the warning of a listen address beyond
// loopback, and the epoch shown as a time.
#include <gtest/gtest.h>
#include <signal.h>

#include <nlohmann/json.hpp>

#include <regex>
#include <string>
#include <vector>

#include "integration/cli_fixture.h"

namespace lakecache {
namespace {

using testing::ChildProcess;
using testing::RunResult;

class CliServerTest : public testing::CliFixture {
 protected:
  // Heartbeats every 200 ms, dropped after 1 s of silence.
  std::string ClusterConfig() const {
    return BucketConfig("cluster: {heartbeat_interval: 200ms, heartbeat_timeout: 1s}\n");
  }

  // `lakecache --config CFG ARGS... --address-file F` as a child logging to NAME.log at the
  // default level; returns the address it bound ("" after recording a failure).
  std::string StartServer(const std::string& name, std::vector<std::string> args,
                          ChildProcess** child) {
    std::string address_file = scratch_->path() + "/" + name + ".addr";
    args.insert(args.begin(), {"--config", config_});
    args.insert(args.end(), {"--address-file", address_file});
    *child = Start(args, name + ".log");
    if (*child == nullptr) return "";
    std::string address;
    WaitFor(
        [&] {
          address = ReadAll(address_file);
          return !address.empty() || !(*child)->Running();
        },
        std::chrono::seconds(20));
    EXPECT_FALSE(address.empty()) << name << " did not start: " << (*child)->LogTail();
    return address;
  }

  // A master on a free loopback port and one worker of it.
  struct Cluster {
    ChildProcess* master = nullptr;
    std::string master_address;
    ChildProcess* worker = nullptr;
    std::string worker_address;
  };
  Cluster StartCluster() {
    Cluster c;
    c.master_address = StartServer("master", {"master", "--listen", "127.0.0.1:0"}, &c.master);
    if (c.master_address.empty()) return c;
    c.worker_address = StartServer("worker", {"worker", "--master", c.master_address}, &c.worker);
    return c;
  }

  void SetUp() override {
    CliFixture::SetUp();
    config_ = ClusterConfig();
  }

  std::string config_;
};

TEST_F(CliServerTest, MasterLogsEachJoinAndExpiryOnceAtTheDefaultLevel) {
  Cluster c = StartCluster();
  ASSERT_FALSE(c.worker_address.empty());
  ChildProcess* master = c.master;
  std::string joined = " joined the cluster at " + c.worker_address;
  ASSERT_TRUE(WaitFor([&] { return ReadAll(master->log_path()).find(joined) != std::string::npos; },
                      std::chrono::seconds(10)))
      << ReadAll(master->log_path());

  ::kill(c.worker->pid(), SIGKILL);
  std::string left = " at " + c.worker_address + " left the cluster: no heartbeat for 1s";
  ASSERT_TRUE(WaitFor([&] { return ReadAll(master->log_path()).find(left) != std::string::npos; },
                      std::chrono::seconds(10)))
      << ReadAll(master->log_path());
  std::this_thread::sleep_for(std::chrono::seconds(2));  // heartbeats would have come meanwhile
  std::string log = ReadAll(master->log_path());
  EXPECT_EQ(Count(log, joined), 1u) << log;
  EXPECT_EQ(Count(log, left), 1u) << log;
  EXPECT_EQ(log.find("beyond loopback"), std::string::npos) << log;
}

// Until the protocol has authentication, a listen address beyond loopback is worth a warning.
// (192.0.2.1 is no address of this host: the server warns, then fails to bind, and nothing
// listens beyond loopback.)
TEST_F(CliServerTest, ListenBeyondLoopbackWarnsThatThereIsNoAuthentication) {
  RunResult master = Lc({"--config", config_, "master", "--listen", "192.0.2.1:0"});
  EXPECT_NE(master.exit_code, 0);
  EXPECT_NE(master.err.find("listening on 192.0.2.1:0, beyond loopback: the protocol has no "
                            "authentication yet"),
            std::string::npos)
      << master.err;
  RunResult worker =
      Lc({"--config", config_, "worker", "--master", "127.0.0.1:1", "--listen", "192.0.2.1:0"});
  EXPECT_NE(worker.exit_code, 0);
  EXPECT_NE(worker.err.find("listening on 192.0.2.1:0, beyond loopback"), std::string::npos)
      << worker.err;
  // The bulk data path without credentials (plain text) too.
  RunResult data = Lc(
      {"--config", config_, "worker", "--master", "127.0.0.1:1", "--data-listen", "192.0.2.1:0"});
  EXPECT_NE(data.exit_code, 0);
  EXPECT_NE(data.err.find("listening on 192.0.2.1:0, beyond loopback"), std::string::npos)
      << data.err;
}

TEST_F(CliServerTest, ClusterStatusShowsTheEpochAsATimeAndDefaultsToTheEnvironment) {
  Cluster c = StartCluster();
  ASSERT_FALSE(c.worker_address.empty());
  const std::string& master_address = c.master_address;

  RunResult table = Lc({"cluster", "status"}, {"LAKECACHE_MASTER=" + master_address});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  std::regex first_line(
      R"(^epoch \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \((just now|(\d+[hms])+ ago); \d{13}\), 1 worker\n)");
  EXPECT_TRUE(std::regex_search(table.out, first_line)) << table.out;

  RunResult json = Lc({"cluster", "status", "--json", "--master", master_address});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  nlohmann::json j = nlohmann::json::parse(json.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << json.out;
  EXPECT_TRUE(
      std::regex_match(j.value("epoch_time", ""), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")))
      << json.out;

  RunResult none = Lc({"cluster", "status"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("Pass --master HOST:PORT or set LAKECACHE_MASTER=HOST:PORT"),
            std::string::npos)
      << none.err;
}

}  // namespace
}  // namespace lakecache
