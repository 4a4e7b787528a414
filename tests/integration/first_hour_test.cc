// A new user's first hour with a cluster, as the README and docs/admin.md walk it: `cluster up`
// (TLS, the default), `mount --master`, a dataset staged a moment before `load`, an idle spell
// several keepalive intervals long, `report` and `cluster status`, then `cluster down`. Every step
// is a real process (the CLI, the master, two workers, the FUSE mount) over s3rver. The keepalive
// interval is shortened through LAKECACHE_KEEPALIVE_INTERVAL, which every process of the cluster
// inherits, so the idle spell costs seconds instead of minutes.
#include <gtest/gtest.h>
#include <signal.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "integration/cli_fixture.h"

namespace lakecache {
namespace {

namespace fs = std::filesystem;
using testing::RunResult;

constexpr char kKeepalive[] = "LAKECACHE_KEEPALIVE_INTERVAL=500ms";
constexpr auto kIdle = std::chrono::seconds(4);  // 8 intervals: gRPC's defaults GOAWAY by the 3rd

class FirstHourTest : public testing::CliFixture {
 protected:
  void TearDown() override {
    if (!dir_.empty() && fs::exists(dir_ + "/cluster.pids")) {
      Lc({"cluster", "down", "--dir", dir_}, {kKeepalive});
    }
    CliFixture::TearDown();
  }

  // The master's HOST:PORT: the last line `cluster up` prints.
  static std::string LastLine(const std::string& out) {
    std::string text = out;
    while (!text.empty() && text.back() == '\n') text.pop_back();
    return text.substr(text.rfind('\n') + 1);
  }

  std::string dir_;
};

// A cache bigger than its disk is said where the user looks: on the terminal, not only in a log.
TEST_F(FirstHourTest, ACacheLargerThanItsDiskIsWarnedOnTheTerminal) {
  ASSERT_TRUE(CanMount()) << "needs root and /dev/fuse";
  std::string mnt = Mountpoint();
  RunResult r = Lc({"--log-file", Folder("logs") + "/m.log", "mount", "s3://cli/data", mnt,
                    "--cache-dir", Folder("cache"), "--cache-size", "1000TiB", "--background"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(
      r.err.find("warning: disk cache dir " + scratch_->path() + "/cache: 1000.0 TiB configured"),
      std::string::npos)
      << r.err;
}

// One namespace whose store refuses it does not keep the master from serving the others, and a
// master that cannot start says why in its --log-file as well as on stderr.
TEST_F(FirstHourTest, AMasterServesTheNamespacesThatAnswerAndLogsWhyOneDoesNot) {
  std::string config = WriteConfig(
      "two.yaml", "namespaces:\n  cli:\n    uri: s3://cli/\n    endpoint: " + server_->endpoint() +
                      "\n    access_key: S3RVER\n    secret_key: S3RVER\n  gone:\n    uri: "
                      "s3://no-such-bucket-here/\n    endpoint: " +
                      server_->endpoint() + "\n    access_key: S3RVER\n    secret_key: S3RVER\n");
  std::string log = Folder("logs") + "/master.log";
  std::string address_file = scratch_->path() + "/master.addr";
  testing::ChildProcess* master = Start({"--config", config, "--log-file", log, "master",
                                         "--listen", "127.0.0.1:0", "--address-file", address_file},
                                        "master.out");
  ASSERT_NE(master, nullptr);
  ASSERT_TRUE(WaitFor([&] { return fs::exists(address_file) || !master->Running(); },
                      std::chrono::seconds(60)));
  EXPECT_TRUE(master->Running()) << master->LogTail();
  std::string logged = testing::ReadFileTail(log, 1 << 20);
  EXPECT_NE(logged.find("namespace 'gone'"), std::string::npos) << logged;
  EXPECT_NE(logged.find("no-such-bucket-here"), std::string::npos) << logged;

  std::string only_gone = WriteConfig(
      "gone.yaml", "namespaces:\n  gone:\n    uri: s3://no-such-bucket-here/\n    endpoint: " +
                       server_->endpoint() + "\n    access_key: S3RVER\n    secret_key: S3RVER\n");
  std::string failed_log = Folder("logs") + "/failed.log";
  RunResult failed =
      Lc({"--config", only_gone, "--log-file", failed_log, "master", "--listen", "127.0.0.1:0"});
  EXPECT_NE(failed.exit_code, 0);
  EXPECT_NE(failed.err.find("no-such-bucket-here"), std::string::npos) << failed.err;
  std::string failed_logged = testing::ReadFileTail(failed_log, 1 << 20);
  EXPECT_NE(failed_logged.find("not started"), std::string::npos) << failed_logged;
  EXPECT_NE(failed_logged.find("no-such-bucket-here"), std::string::npos) << failed_logged;
}

}  // namespace
}  // namespace lakecache
