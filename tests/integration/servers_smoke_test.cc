// Proves the test harness itself: s3rver and Swift start on loopback ports, take a bulk upload of
// awkward keys, and answer listings and GETs signed by curl. Product tests build on this API.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>

#include "support/test_servers.h"

namespace lakecache::testing {
namespace {

using Objects = std::vector<std::pair<std::string, std::string>>;

Objects SampleObjects() {
  Objects objects = {{"a b.txt", "space"},
                     {"ünï.txt", "unicode"},
                     {"x+y", "plus"},
                     {"p%q", "percent"},
                     {"dir/", ""}};
  for (int i = 0; i < 45; ++i) {
    objects.emplace_back("many/" + std::to_string(i), "content of " + std::to_string(i));
  }
  return objects;
}

// The <Key> elements of a ListObjectsV2 answer. Our keys need no XML entities.
std::vector<std::string> ListedKeys(const std::string& xml) {
  std::vector<std::string> keys;
  for (size_t pos = 0; (pos = xml.find("<Key>", pos)) != std::string::npos;) {
    size_t end = xml.find("</Key>", pos);
    keys.push_back(xml.substr(pos + 5, end - pos - 5));
    pos = end;
  }
  return keys;
}

RunResult Curl(const S3Server& server, std::vector<std::string> args) {
  std::vector<std::string> argv = server.SignedCurl();
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv);
}

void ExpectServesUploadedObjects(const S3Server& server) {
  ASSERT_TRUE(server.CreateBucket("smoke").ok());
  Objects objects = SampleObjects();
  Status put = server.PutObjects("smoke", objects);
  ASSERT_TRUE(put.ok()) << put.ToString();

  RunResult list = Curl(server, {"--fail-with-body", server.BucketUrl("smoke") + "?list-type=2"});
  ASSERT_EQ(list.exit_code, 0) << list.out << list.err;
  std::vector<std::string> listed = ListedKeys(list.out);
  std::vector<std::string> expected;
  for (const auto& [key, content] : objects) expected.push_back(key);
  std::sort(listed.begin(), listed.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(listed, expected);

  for (const auto& [key, content] : objects) {
    if (key != "ünï.txt" && key != "p%q") continue;
    RunResult get = Curl(server, {"--fail-with-body", server.ObjectUrl("smoke", key)});
    EXPECT_EQ(get.exit_code, 0) << get.err;
    EXPECT_EQ(get.out, content) << key;
  }
}

class ServersSmokeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto s3rver = S3rver::Start();
    ASSERT_TRUE(s3rver.ok()) << s3rver.status().ToString();
    s3rver_ = std::move(s3rver).value();
    auto swift = SwiftS3::Start();
    ASSERT_TRUE(swift.ok()) << swift.status().ToString();
    swift_ = std::move(swift).value();
    std::cout << "start-up: s3rver " << s3rver_->startup_time().count() << " ms, Swift "
              << swift_->startup_time().count() << " ms\n";
  }
  static void TearDownTestSuite() {
    s3rver_.reset();
    swift_.reset();
  }
  void SetUp() override {
    if (s3rver_ == nullptr || swift_ == nullptr) GTEST_FAIL() << "servers did not start";
  }

  static std::unique_ptr<S3rver> s3rver_;
  static std::unique_ptr<SwiftS3> swift_;
};

std::unique_ptr<S3rver> ServersSmokeTest::s3rver_;
std::unique_ptr<SwiftS3> ServersSmokeTest::swift_;

TEST_F(ServersSmokeTest, S3rverServesUploadedObjects) { ExpectServesUploadedObjects(*s3rver_); }

TEST_F(ServersSmokeTest, SwiftServesUploadedObjects) { ExpectServesUploadedObjects(*swift_); }

TEST_F(ServersSmokeTest, SwiftRejectsWrongSecret) {
  std::vector<std::string> argv = swift_->SignedCurl(swift_->access_key(), "wrong-secret");
  argv.insert(argv.end(), {"-w", "\n%{http_code}", swift_->endpoint() + "/"});
  RunResult r = RunCommand(argv);
  EXPECT_TRUE(r.out.ends_with("\n403")) << r.out << r.err;
  EXPECT_TRUE(r.out.find("SignatureDoesNotMatch") != std::string::npos ||
              r.out.find("AccessDenied") != std::string::npos)
      << r.out;
}

TEST_F(ServersSmokeTest, PutObjectsReportsFailedUploads) {
  Status put = swift_->PutObjects("no-such-bucket", {{"k", "v"}});
  EXPECT_FALSE(put.ok());
  EXPECT_NE(put.message().find("HTTP 404"), std::string::npos) << put.ToString();
}

TEST(ServersSmokeTlsTest, S3rverServesHttps) {
  TempDir certs;
  auto tls = MakeSelfSignedCert(certs.path());
  ASSERT_TRUE(tls.ok()) << tls.status().ToString();
  auto server = S3rver::Start(
      {.buckets = {"tls"}, .tls_key_path = tls->key_path, .tls_cert_path = tls->cert_path});
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_TRUE((*server)->endpoint().starts_with("https://127.0.0.1:"));
  Status put = (*server)->PutObjects("tls", {{"k", "v"}});
  ASSERT_TRUE(put.ok()) << put.ToString();
  RunResult get = Curl(**server, {"--fail-with-body", (*server)->ObjectUrl("tls", "k")});
  EXPECT_EQ(get.out, "v") << get.err;
}

TEST(RunCommandTest, CapturesStreamsAppliesEnvAndEnforcesTimeout) {
  RunResult r =
      RunCommand({"sh", "-c", "echo out; echo err >&2; echo \"$A-${HOME:-unset}\"; exit 3"},
                 {"A=set", "-HOME"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "out\nset-unset\n");
  EXPECT_EQ(r.err, "err\n");

  RunResult slow = RunCommand({"sleep", "30"}, {}, std::chrono::seconds(1));
  EXPECT_TRUE(slow.timed_out);
  EXPECT_NE(slow.exit_code, 0);
}

}  // namespace
}  // namespace lakecache::testing
