// `lakecache master`, `worker` and `cluster status` as an operator meets them: what the master logs
// at the default level when workers join and leave, listen addresses beyond loopback (refused
// without credentials, warned about with --insecure), --advertise, and the epoch shown as a time.
#include <gtest/gtest.h>
#include <signal.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "integration/cli_fixture.h"

// Its own namespace: the files of integration_tests are compiled in unity batches.
namespace lakecache::cli_server_test {
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
  // default level, with Env(env); returns the address it announces ("" after recording a
  // failure).
  std::string StartServer(const std::string& name, std::vector<std::string> args,
                          ChildProcess** child, const std::vector<std::string>& env = {}) {
    std::string address_file = scratch_->path() + "/" + name + ".addr";
    args.insert(args.begin(), {"--config", config_});
    args.insert(args.end(), {"--address-file", address_file});
    *child = Start(args, name + ".log", env);
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

  // `cluster status --json` once it lists one worker (a null value if it does not in 10 s).
  nlohmann::json StatusWithOneWorker(const std::string& master_address) {
    nlohmann::json j;
    bool listed = WaitFor(
        [&] {
          RunResult json = Lc({"cluster", "status", "--json", "--master", master_address});
          j = nlohmann::json::parse(json.out, nullptr, false);
          return j.is_object() && j["workers"].size() == 1;
        },
        std::chrono::seconds(10));
    return listed ? j : nlohmann::json();
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

  // A second worker, to leave later.
  ChildProcess* later = nullptr;
  std::string later_address =
      StartServer("worker-2", {"worker", "--master", c.master_address}, &later);
  ASSERT_FALSE(later_address.empty());
  std::string later_joined = " joined the cluster at " + later_address;
  ASSERT_TRUE(
      WaitFor([&] { return ReadAll(master->log_path()).find(later_joined) != std::string::npos; },
              std::chrono::seconds(10)))
      << ReadAll(master->log_path());

  ::kill(c.worker->pid(), SIGKILL);
  std::string left = " at " + c.worker_address + " left the cluster: no heartbeat for 1s";
  ASSERT_TRUE(WaitFor([&] { return ReadAll(master->log_path()).find(left) != std::string::npos; },
                      std::chrono::seconds(10)))
      << ReadAll(master->log_path());
  // The master's expiry passes run one at a time: once the second worker, killed now, has left
  // (a second of silence later), the passes after the first one's departure have run too.
  ::kill(later->pid(), SIGKILL);
  std::string later_left = " at " + later_address + " left the cluster: no heartbeat for 1s";
  ASSERT_TRUE(
      WaitFor([&] { return ReadAll(master->log_path()).find(later_left) != std::string::npos; },
              std::chrono::seconds(10)))
      << ReadAll(master->log_path());
  std::string log = ReadAll(master->log_path());
  EXPECT_EQ(Count(log, joined), 1u) << log;
  EXPECT_EQ(Count(log, left), 1u) << log;
  EXPECT_EQ(log.find("INSECURE"), std::string::npos) << log;
}

// A master whose port is taken says so in one line of ours: no gRPC core output before it.
TEST_F(CliServerTest, MasterOnAPortInUseSaysSoWithoutGrpcsOwnLines) {
  auto busy = testing::SilentListener::Start();
  ASSERT_TRUE(busy.ok()) << busy.status().ToString();
  RunResult r = Lc({"--config", config_, "master", "--listen", (*busy)->address()});
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("cannot listen on " + (*busy)->address()), std::string::npos) << r.err;
  // gRPC core's lines name their source file (chttp2_server.cc:NNN) or dump an error's JSON.
  EXPECT_EQ(r.err.find(".cc:"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("{\"created\""), std::string::npos) << r.err;
}

// Without --credentials, a server beyond loopback would serve anyone in plain text: it exits 2
// before starting anything, saying how to fix it (0.0.0.0:0: nothing is bound).
TEST_F(CliServerTest, NonLoopbackListenWithoutCredentialsExitsTwoSayingHow) {
  auto expect_refused = [&](const RunResult& r, const std::string& command,
                            const std::string& flag) {
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("lakecache " + command + ": " + flag +
                         " 0.0.0.0:0 is not a loopback address, and without --credentials DIR "
                         "anyone who reaches it can "),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("give --credentials DIR"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("or --insecure to serve in plain text anyway"), std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find("serving"), std::string::npos) << r.err;
  };
  std::string address_file = scratch_->path() + "/never.addr";
  expect_refused(
      Lc({"--config", config_, "master", "--listen", "0.0.0.0:0", "--address-file", address_file}),
      "master", "--listen");
  expect_refused(
      Lc({"--config", config_, "worker", "--master", "127.0.0.1:1", "--listen", "0.0.0.0:0"}),
      "worker", "--listen");
  // The bulk data path too.
  expect_refused(Lc({"--config", config_, "worker", "--master", "127.0.0.1:1", "--data-listen",
                     "0.0.0.0:0", "--address-file", address_file}),
                 "worker", "--data-listen");
  EXPECT_FALSE(std::filesystem::exists(address_file)) << "nothing started";
}

// --insecure lets them serve beyond loopback (0.0.0.0, announced as 127.0.0.1 through POD_IP, so
// every call stays on loopback): each warns at start, and `cluster status` shows who is insecure.
TEST_F(CliServerTest, InsecureServersWarnAtStartAndClusterStatusSaysSo) {
  ChildProcess* master = nullptr;
  std::string master_address = StartServer(
      "master", {"master", "--listen", "0.0.0.0:0", "--insecure"}, &master, {"POD_IP=127.0.0.1"});
  ASSERT_FALSE(master_address.empty());
  EXPECT_TRUE(master_address.starts_with("127.0.0.1:")) << master_address;
  ChildProcess* worker = nullptr;
  std::string worker_address = StartServer(
      "worker", {"worker", "--master", master_address, "--listen", "0.0.0.0:0", "--insecure"},
      &worker, {"POD_IP=127.0.0.1"});
  ASSERT_FALSE(worker_address.empty());
  EXPECT_TRUE(worker_address.starts_with("127.0.0.1:")) << worker_address;
  EXPECT_NE(ReadAll(master->log_path())
                .find("INSECURE: lakecache master: --listen 0.0.0.0:0 is not a loopback address "
                      "and serves in plain text without authentication (--insecure)"),
            std::string::npos)
      << master->LogTail();
  EXPECT_NE(ReadAll(worker->log_path())
                .find("INSECURE: lakecache worker: --listen 0.0.0.0:0 is not a loopback address"),
            std::string::npos)
      << worker->LogTail();

  nlohmann::json j = StatusWithOneWorker(master_address);
  ASSERT_TRUE(j.is_object()) << j.dump();
  EXPECT_EQ(j["insecure"], true) << j.dump();
  EXPECT_EQ(j["master"], master_address) << j.dump();
  EXPECT_EQ(j["workers"][0]["insecure"], true) << j.dump();
  EXPECT_EQ(j["workers"][0]["address"], worker_address) << j.dump();
  EXPECT_EQ(j["workers"][0]["reachable"], true) << j.dump();

  RunResult table = Lc({"cluster", "status", "--master", master_address});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("WARNING: master " + master_address +
                           " serves in plain text beyond loopback without authentication"),
            std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find(" at " + worker_address + " serves in plain text beyond loopback"),
            std::string::npos)
      << table.out;
}

// --advertise: what the master writes to its address file and shows as its own, and what a
// worker registers, exactly as given (nothing listens at the worker's: it shows as unreachable).
TEST_F(CliServerTest, AdvertisedAddressesAreAnnouncedAsGiven) {
  std::string port = std::to_string(testing::FreeLoopbackPort());
  ChildProcess* master = nullptr;
  std::string announced = StartServer(
      "master", {"master", "--listen", "127.0.0.1:" + port, "--advertise", "127.0.0.8:" + port},
      &master);
  EXPECT_EQ(announced, "127.0.0.8:" + port);
  std::string master_address = "127.0.0.1:" + port;
  ChildProcess* worker = nullptr;
  std::string worker_address = StartServer(
      "worker", {"worker", "--master", master_address, "--advertise", "127.0.0.9:4242"}, &worker);
  EXPECT_EQ(worker_address, "127.0.0.9:4242");

  nlohmann::json j = StatusWithOneWorker(master_address);
  ASSERT_TRUE(j.is_object()) << j.dump();
  EXPECT_EQ(j["master"], "127.0.0.8:" + port) << j.dump();
  EXPECT_EQ(j["insecure"], false) << j.dump();
  EXPECT_EQ(j["workers"][0]["address"], "127.0.0.9:4242") << j.dump();
  EXPECT_EQ(j["workers"][0]["insecure"], false) << j.dump();
  RunResult table = Lc({"cluster", "status", "--master", master_address});
  EXPECT_NE(table.out.find("\nmaster 127.0.0.8:" + port + "\n"), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find("WARNING"), std::string::npos) << table.out;
}

TEST_F(CliServerTest, AdvertiseThatIsNotHostPortExitsTwoNamingIt) {
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> env;
    std::string said;
  };
  for (const Case& c :
       {Case{{"master", "--advertise", "fd00::5:7400"},
             {},
             "--advertise: 'fd00::5:7400' is not "
             "HOST:PORT that clients can dial (an "
             "IPv6 address goes in brackets"},
        Case{{"worker", "--master", "127.0.0.1:1", "--advertise", "10.0.0.5"},
             {},
             "--advertise: '10.0.0.5' is not HOST:PORT that clients can dial (the port is "
             "missing"},
        Case{{"worker", "--master", "127.0.0.1:1"},
             {"POD_IP=0.0.0.0"},
             "POD_IP (the default of --advertise): '0.0.0.0:0' is not HOST:PORT"}}) {
    std::vector<std::string> args = {"--config", config_};
    args.insert(args.end(), c.args.begin(), c.args.end());
    RunResult r = Lc(args, c.env);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(c.said), std::string::npos) << r.err;
  }
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
  EXPECT_EQ(table.out.find("WARNING"), std::string::npos) << "loopback is not insecure";

  RunResult json = Lc({"cluster", "status", "--json", "--master", master_address});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  nlohmann::json j = nlohmann::json::parse(json.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << json.out;
  EXPECT_TRUE(
      std::regex_match(j.value("epoch_time", ""), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")))
      << json.out;
  EXPECT_EQ(j["insecure"], false) << json.out;
  EXPECT_EQ(j["master"], master_address) << json.out;

  RunResult none = Lc({"cluster", "status"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("Pass --master HOST:PORT or set LAKECACHE_MASTER=HOST:PORT"),
            std::string::npos)
      << none.err;
}

}  // namespace
}  // namespace lakecache::cli_server_test
