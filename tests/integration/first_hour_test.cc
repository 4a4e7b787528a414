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

// Its own namespace: the files of integration_tests are compiled in unity batches.
namespace lakecache::first_hour_test {
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

TEST_F(FirstHourTest, UpMountLoadIdleReportStatusDown) {
  ASSERT_TRUE(CanMount()) << "the walkthrough mounts: needs root and /dev/fuse";
  dir_ = fs::canonical(Folder("cluster")).string();
  std::string config = BucketConfig("    metadata_ttl: 10m\n");

  RunResult up = Lc({"--config", config, "cluster", "up", "--dir", dir_, "--workers", "2",
                     "--cache-size", "64MiB", "--mem-cache", "32MiB"},
                    {kKeepalive}, std::chrono::seconds(90));
  ASSERT_EQ(up.exit_code, 0) << up.out << up.err;
  std::string master = LastLine(up.out);

  std::string mnt = Mountpoint();
  RunResult mounted = Lc({"--log-file", Folder("logs") + "/mount.log", "mount", mnt, "--master",
                          master, "--credentials", dir_, "--background"},
                         {kKeepalive});
  ASSERT_EQ(mounted.exit_code, 0) << mounted.out << mounted.err;
  // The mount and the master have listed the namespace root before the dataset is staged.
  ASSERT_TRUE(fs::is_directory(mnt + "/cli/data"));

  ASSERT_TRUE(server_
                  ->PutObjects(kBucket, {{"staged/x.bin", std::string(300 * 1024, 'x')},
                                         {"staged/sub/y.bin", "why"}})
                  .ok());
  // A path inside the cluster mount: the mount's credentials are used, the store is asked.
  RunResult load = Lc({"load", "-R", mnt + "/cli/staged"}, {kKeepalive});
  EXPECT_EQ(load.exit_code, 0) << load.out << load.err;
  EXPECT_NE(load.out.find("2 files"), std::string::npos) << load.out;

  // Idle: no call from anyone but the keepalive pings and the heartbeats. Kept, a window: what is
  // measured is an idle stretch of real time (the daemons' own clocks); load only lengthens it.
  std::this_thread::sleep_for(kIdle);

  RunResult report =
      Lc({"report", "--json", "--master", master, "--credentials", dir_}, {kKeepalive});
  ASSERT_EQ(report.exit_code, 0) << report.out << report.err;
  nlohmann::json parsed = nlohmann::json::parse(report.out, nullptr, false);
  ASSERT_FALSE(parsed.is_discarded()) << report.out;
  EXPECT_EQ(report.out.find("unreachable"), std::string::npos) << report.out;
  EXPECT_EQ(report.out.find("Too many pings"), std::string::npos) << report.out;

  RunResult status =
      Lc({"cluster", "status", "--master", master}, {kKeepalive, "-LAKECACHE_CREDENTIALS"});
  EXPECT_NE(status.exit_code, 0) << status.out;
  EXPECT_NE(status.err.find("--credentials"), std::string::npos) << status.err;

  RunResult down = Lc({"cluster", "down", "--dir", dir_}, {kKeepalive});
  EXPECT_EQ(down.exit_code, 0) << down.out << down.err;
  EXPECT_NE(down.out.find(mnt), std::string::npos)
      << "`cluster down` names the mount it unmounted\n"
      << down.out;
  EXPECT_FALSE(testing::IsMounted(mnt)) << down.out << down.err;
  // The master's log names no idle worker as failed.
  std::string master_log = testing::ReadFileTail(dir_ + "/master.log", 1 << 20);
  for (const char* refused : {"Too many pings", "too_many_pings"}) {
    EXPECT_EQ(master_log.find(refused), std::string::npos) << master_log;
  }
}

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
}  // namespace lakecache::first_hour_test
