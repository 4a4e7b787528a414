// `lakecache cert` end to end: what it writes and keeps in a credentials folder, the files' modes,
// its exit codes, and that its output names files but never shows a key or a token.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "support/process.h"
#include "support/test_data.h"
#include "support/test_servers.h"

// Its own namespace: the files of integration_tests are compiled in unity batches.
namespace lakecache::cli_cert_test {
namespace {

using testing::RunResult;

const std::vector<std::string> kFiles = {"ca.crt",       "ca.key",       "tls.crt",
                                         "tls.key",      "admin.token",  "client.token",
                                         "worker.token", "master.token", "metrics.token"};

class CliCertTest : public ::testing::Test {
 protected:
  RunResult Cert(std::vector<std::string> args) {
    args.insert(args.begin(), {LAKECACHE_BINARY, "cert"});
    RunResult r = testing::RunCommand(args, {}, std::chrono::seconds(60));
    EXPECT_FALSE(r.timed_out) << testing::JoinArgv(args);
    return r;
  }
  std::map<std::string, std::string> Contents() const {
    std::map<std::string, std::string> out;
    for (const std::string& name : kFiles)
      out[name] = testing::ReadWholeFile(dir_ + "/" + name).bytes;
    return out;
  }
  // Fails when `output` holds a token, or any line of a key, of the folder.
  void ExpectNoSecretIn(const std::string& output) const {
    for (const auto& [name, text] : Contents()) {
      if (name.ends_with(".token")) {
        EXPECT_EQ(output.find(text.substr(0, 64)), std::string::npos) << name;
        EXPECT_EQ(output.find(text.substr(0, 16)), std::string::npos) << name;
      } else if (name.ends_with(".key")) {
        for (size_t at = 0, end; (end = text.find('\n', at)) != std::string::npos; at = end + 1) {
          std::string line = text.substr(at, end - at);
          if (line.starts_with("-----")) continue;
          EXPECT_EQ(output.find(line), std::string::npos) << name;
        }
      }
    }
    EXPECT_EQ(output.find("PRIVATE KEY"), std::string::npos);
    EXPECT_EQ(output.find("BEGIN"), std::string::npos);
  }

  testing::TempDir tmp_;
  std::string dir_ = tmp_.path() + "/credentials";
};

TEST_F(CliCertTest, CertTwiceKeepsTheCaAndTokensAndSaysNothingChanged) {
  RunResult first = Cert({"--dir", dir_, "--name", "master.lake", "--name", "10.1.2.3"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  for (const std::string& name : kFiles) {
    EXPECT_NE(first.out.find("wrote " + dir_ + "/" + name), std::string::npos) << first.out;
  }
  EXPECT_NE(first.out.find("lakecache-master, localhost, 127.0.0.1, master.lake, 10.1.2.3; valid "
                           "until "),
            std::string::npos)
      << first.out;
  auto before = Contents();
  RunResult second = Cert({"--dir", dir_});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.out.find("wrote"), std::string::npos) << second.out;
  EXPECT_NE(second.out.find("nothing changed"), std::string::npos) << second.out;
  EXPECT_NE(second.out.find("kept  " + dir_ + "/ca.key"), std::string::npos) << second.out;
  EXPECT_EQ(Contents(), before);
  ExpectNoSecretIn(first.out + first.err + second.out + second.err);
}

TEST_F(CliCertTest, CertRenewChangesOnlyTheMasterCertificate) {
  ASSERT_EQ(Cert({"--dir", dir_}).exit_code, 0);
  auto before = Contents();
  RunResult renew = Cert({"--dir", dir_, "--renew", "--days", "30"});
  ASSERT_EQ(renew.exit_code, 0) << renew.err;
  EXPECT_NE(renew.out.find("wrote " + dir_ + "/tls.crt"), std::string::npos) << renew.out;
  auto after = Contents();
  for (const std::string& name : kFiles) {
    bool renewed = name == "tls.crt" || name == "tls.key";
    EXPECT_EQ(after[name] != before[name], renewed) << name;
  }
  RunResult verify =
      testing::RunCommand({"openssl", "verify", "-CAfile", dir_ + "/ca.crt", dir_ + "/tls.crt"});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  ExpectNoSecretIn(renew.out + renew.err);
}

TEST_F(CliCertTest, CertMakesKeysAndTokensOwnerOnly) {
  ASSERT_EQ(Cert({"--dir", dir_}).exit_code, 0);
  struct stat st;
  ASSERT_EQ(::stat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  for (const std::string& name : kFiles) {
    ASSERT_EQ(::stat((dir_ + "/" + name).c_str(), &st), 0) << name;
    EXPECT_EQ(st.st_mode & 0777, name.ends_with(".crt") ? 0644u : 0600u) << name;
  }
}

TEST_F(CliCertTest, CertForceMakesANewCa) {
  ASSERT_EQ(Cert({"--dir", dir_}).exit_code, 0);
  auto before = Contents();
  RunResult force = Cert({"--dir", dir_, "--force"});
  ASSERT_EQ(force.exit_code, 0) << force.err;
  auto after = Contents();
  for (const std::string& name : kFiles) EXPECT_NE(after[name], before[name]) << name;
  ExpectNoSecretIn(force.out + force.err);
}

TEST_F(CliCertTest, CertUsageErrorsExitTwo) {
  EXPECT_EQ(Cert({}).exit_code, 2);  // no --dir
  EXPECT_EQ(Cert({"--dir", dir_, "--days", "0"}).exit_code, 2);
  EXPECT_EQ(Cert({"--dir", dir_, "--renew", "--force"}).exit_code, 2);
  RunResult bad_name = Cert({"--dir", dir_, "--name", "two words"});
  EXPECT_EQ(bad_name.exit_code, 2);
  EXPECT_NE(bad_name.err.find("'two words'"), std::string::npos) << bad_name.err;
  RunResult renew = Cert({"--dir", dir_, "--renew"});
  EXPECT_EQ(renew.exit_code, 2);
  EXPECT_NE(renew.err.find(dir_ + "/ca.crt is missing"), std::string::npos) << renew.err;
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/tls.crt"));
}

}  // namespace
}  // namespace lakecache::cli_cert_test
