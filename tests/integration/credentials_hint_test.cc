// A client and a cluster of different kinds, as a new user meets them: commands without
// --credentials at a cluster with credentials (TLS), and with them at a plain-text one. Each is
// told at once which flag to pass or drop, and the master's log names the client and the flag
// (gRPC's own line named neither). A path inside a cluster mount needs no --credentials: the
// command uses the mount's folder. Real processes over s3rver; needs root and /dev/fuse.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "support/cluster_procs.h"
#include "support/test_servers.h"

// Its own namespace: the files of integration_tests are compiled in unity batches.
namespace lakecache::credentials_hint_test {
namespace {

namespace fs = std::filesystem;
using testing::RunCommand;
using testing::RunResult;
using testing::WorkerProcess;
using Clock = std::chrono::steady_clock;

constexpr char kBucket[] = "hint";

class CredentialsHintTest : public testing::ClusterProcessFixture {
 protected:
  static void SetUpTestSuite() {
    auto started = testing::S3rver::Start({.buckets = {kBucket}});
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    server_ = std::move(started).value().release();
    Status put = server_->PutObjects(kBucket, {{"data/a.bin", std::string(200 << 10, 'a')},
                                               {"data/b.bin", std::string(70 << 10, 'b')}});
    ASSERT_TRUE(put.ok()) << put.ToString();
  }

  void SetUp() override {
    SetUpScratch("lakecache-hint");
    if (HasFatalFailure()) return;
    WriteConfig({{kBucket, server_->endpoint(), "64KiB"}});
  }

  // `lakecache ARGS` without LAKECACHE_CREDENTIALS or LAKECACHE_MASTER from the environment.
  static RunResult Lc(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {LAKECACHE_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    RunResult r =
        RunCommand(argv, {"-LAKECACHE_CREDENTIALS", "-LAKECACHE_MASTER"}, std::chrono::seconds(60));
    EXPECT_FALSE(r.timed_out) << testing::JoinArgv(argv) << "\n" << r.err;
    return r;
  }

  std::string MasterLog() const {
    return testing::ReadFileTail(dir_->path() + "/master.log", 1 << 20);
  }
};

// `cluster status`, `report` and `mount --master` without --credentials at a cluster with them:
// each fails saying to pass --credentials (they said "Socket closed", or so after 10 s), and the
// master's log says a plain-text client at 127.0.0.1 called it and needs --credentials.
TEST_F(CredentialsHintTest, PlainClientsAtATlsClusterAreToldToPassCredentials) {
  credentials_ = MakeCredentials("credentials");
  StartMaster();
  ASSERT_FALSE(master_address_.empty());
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"cluster", "status", "--master", master_address_},
                                             {"report", "--master", master_address_}}) {
    auto start = Clock::now();
    RunResult r = Lc(args);
    double took = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_NE(r.exit_code, 0) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("master " + master_address_ + " serves TLS"), std::string::npos)
        << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("pass --credentials DIR"), std::string::npos) << args[0] << ": " << r.err;
    std::cout << args[0] << " without --credentials at a TLS master failed after " << took
              << " s\n";
  }
  auto start = Clock::now();
  RunResult mount = Lc({"mount", "--master", master_address_, mountpoint_});
  double took = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_NE(mount.exit_code, 0) << mount.err;
  EXPECT_NE(mount.err.find("pass --credentials DIR"), std::string::npos) << mount.err;
  EXPECT_FALSE(testing::IsMounted(mountpoint_));
  std::cout << "mount without --credentials at a TLS master failed after " << took << " s\n";

  std::string log = MasterLog();
  EXPECT_NE(log.find("a plain-text client at 127.0.0.1 called this TLS server: it needs "
                     "--credentials DIR"),
            std::string::npos)
      << log;
  // gRPC's own line, which names no client, is kept for --log-level debug.
  EXPECT_EQ(log.find("wrong version number"), std::string::npos) << log;
}

// The reverse: a client with --credentials at a plain-text cluster (`cluster up --insecure`, or a
// master without --credentials) is told the cluster is plain text and to drop them; the master's
// log names the TLS client.
TEST_F(CredentialsHintTest, TlsClientsAtAPlainClusterAreToldToDropCredentials) {
  StartMaster();
  ASSERT_FALSE(master_address_.empty());
  std::string mine = MakeCredentials("mine");
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"cluster", "status", "--master", master_address_, "--credentials", mine},
           {"report", "--master", master_address_, "--credentials", mine}}) {
    RunResult r = Lc(args);
    EXPECT_NE(r.exit_code, 0) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("master " + master_address_ + " serves plain text"), std::string::npos)
        << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("drop --credentials"), std::string::npos) << args[0] << ": " << r.err;
  }
  std::string log = MasterLog();
  EXPECT_NE(log.find("a TLS client at 127.0.0.1 called this plain-text server"), std::string::npos)
      << log;
}

// `load` and `report` of a path in a cluster mount need no --credentials: they call the master
// with the folder the mount was given, as the admin role. A mount whose folder lacks admin.token
// makes them say so, naming the folder.
TEST_F(CredentialsHintTest, AdminCommandsOnAPathInAClusterMountUseTheMountsCredentials) {
  StartTlsCluster();
  if (HasFatalFailure()) return;
  Mount({}, {"LAKECACHE_CREDENTIALS=" + credentials_});
  if (HasFatalFailure()) return;
  std::string data = mountpoint_ + "/" + kBucket + "/data";
  RunResult load = Lc({"load", data, "-R"});
  EXPECT_EQ(load.exit_code, 0) << load.err << load.out;
  EXPECT_NE(load.out.find("loaded /" + std::string(kBucket) + "/data"), std::string::npos)
      << load.out;
  RunResult report = Lc({"report", data});
  EXPECT_EQ(report.exit_code, 0) << report.err << report.out;
  Unmount();

  // The client role alone: what a Kubernetes mount gets.
  std::string client_only = dir_->path() + "/client-only";
  fs::create_directory(client_only);
  for (const char* file : {"ca.crt", "client.token"}) {
    fs::copy_file(credentials_ + "/" + file, client_only + "/" + file);
  }
  Mount({}, {"LAKECACHE_CREDENTIALS=" + client_only});
  if (HasFatalFailure()) return;
  RunResult refused = Lc({"load", data, "-R"});
  EXPECT_NE(refused.exit_code, 0) << refused.err;
  EXPECT_NE(refused.err.find("credentials folder " + client_only + " has no usable admin.token"),
            std::string::npos)
      << refused.err;
  EXPECT_NE(refused.err.find("pass --credentials DIR"), std::string::npos) << refused.err;
}

}  // namespace
}  // namespace lakecache::credentials_hint_test
