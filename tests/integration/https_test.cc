// HTTPS endpoints: a certificate from a private CA is trusted with --ca-bundle, and refused with a
// clear certificate error without it.
#include <gtest/gtest.h>

#include "support/test_servers.h"

// Its own namespace: the files of integration_tests are compiled in unity batches.
namespace lakecache::https_test {
namespace {

using testing::RunCommand;
using testing::RunResult;

class HttpsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new testing::TempDir("lakecache-certs");
    auto tls = testing::MakeSelfSignedCert(certs_->path());
    ASSERT_TRUE(tls.ok()) << tls.status().ToString();
    tls_ = *tls;
    testing::S3rver::Options options;
    options.buckets = {"secure"};
    options.tls_key_path = tls_.key_path;
    options.tls_cert_path = tls_.cert_path;
    auto started = testing::S3rver::Start(options);
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    server_ = std::move(started).value().release();
    ASSERT_TRUE(server_->PutObjects("secure", {{"k.txt", "over tls"}}).ok());
  }
  static void TearDownTestSuite() {
    delete server_;
    delete certs_;
  }

  RunResult Cat(std::vector<std::string> extra, std::vector<std::string> env) {
    std::vector<std::string> argv = {LAKECACHE_BINARY, "cat",        "s3://secure/k.txt",
                                     "--path-style",   "--endpoint", server_->endpoint()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    env.push_back("AWS_ACCESS_KEY_ID=S3RVER");
    env.push_back("AWS_SECRET_ACCESS_KEY=S3RVER");
    return RunCommand(argv, env);
  }

  static inline testing::TempDir* certs_ = nullptr;
  static inline testing::TlsFiles tls_;
  static inline testing::S3Server* server_ = nullptr;
};

TEST_F(HttpsTest, ReadSucceedsWithCaBundleFlag) {
  ASSERT_EQ(server_->endpoint().rfind("https://", 0), 0u) << server_->endpoint();
  RunResult r = Cat({"--ca-bundle", tls_.cert_path}, {"-AWS_CA_BUNDLE"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "over tls");
}

TEST_F(HttpsTest, ReadSucceedsWithAwsCaBundleVariable) {
  RunResult r = Cat({}, {"AWS_CA_BUNDLE=" + tls_.cert_path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "over tls");
}

TEST_F(HttpsTest, UntrustedCertificateFailsWithClearError) {
  RunResult r = Cat({}, {"-AWS_CA_BUNDLE", "-CURL_CA_BUNDLE", "-SSL_CERT_FILE", "-SSL_CERT_DIR"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("certificate"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--ca-bundle"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

}  // namespace
}  // namespace lakecache::https_test
