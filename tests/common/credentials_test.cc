#include "common/credentials.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace lakecache {
namespace {

using EnvVars = std::map<std::string, std::string>;

// An environment holding exactly `vars`.
EnvLookup FakeEnv(EnvVars vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

NamespaceConfig Namespace(const std::string& uri) {
  NamespaceConfig ns;
  ns.name = "test";
  ns.uri = uri;
  ns.location = *ParseObjectUri(uri);
  return ns;
}

class CredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "lc_cred_test.XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, std::string_view content) {
    std::string path = dir_ + "/" + name;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path) << content;
    return path;
  }

  // HOME points into the temp dir so the developer's own ~/.aws is never read.
  EnvVars BaseEnv() { return {{"HOME", dir_}}; }

  std::string dir_;
};

constexpr char kSharedFile[] = R"(# comment
[default]
aws_access_key_id = AKIDFILE
aws_secret_access_key = file-secret

[prod]
aws_access_key_id=AKIDPROD
aws_secret_access_key=prod-secret
aws_session_token=prod-token
region=eu-west-1
)";

TEST_F(CredentialsTest, ConfigWinsOverEnvironmentAndFile) {
  Write(".aws/credentials", kSharedFile);
  NamespaceConfig ns = Namespace("s3://b");
  ns.access_key = "AKIDCONF";
  ns.secret_key = Secret("conf-secret");
  ns.session_token = Secret("conf-token");
  EnvVars env = BaseEnv();
  env["AWS_ACCESS_KEY_ID"] = "AKIDENV";
  env["AWS_SECRET_ACCESS_KEY"] = "env-secret";
  Result<Credentials> creds = ResolveCredentials(ns, FakeEnv(env));
  ASSERT_TRUE(creds.ok()) << creds.status().ToString();
  EXPECT_EQ(creds->access_key_id, "AKIDCONF");
  EXPECT_EQ(creds->secret_access_key.Reveal(), "conf-secret");
  EXPECT_EQ(creds->session_token.Reveal(), "conf-token");
  EXPECT_EQ(creds->source, "config");
}

TEST_F(CredentialsTest, EnvironmentWinsOverFile) {
  Write(".aws/credentials", kSharedFile);
  EnvVars env = BaseEnv();
  env["AWS_ACCESS_KEY_ID"] = "AKIDENV";
  env["AWS_SECRET_ACCESS_KEY"] = "env-secret";
  env["AWS_SESSION_TOKEN"] = "env-token";
  Result<Credentials> creds = ResolveCredentials(Namespace("s3://b"), FakeEnv(env));
  ASSERT_TRUE(creds.ok()) << creds.status().ToString();
  EXPECT_EQ(creds->access_key_id, "AKIDENV");
  EXPECT_EQ(creds->session_token.Reveal(), "env-token");
  EXPECT_EQ(creds->source, "environment");
}

TEST_F(CredentialsTest, SharedFileDefaultProfileUnderHome) {
  Write(".aws/credentials", kSharedFile);
  Result<Credentials> creds = ResolveCredentials(Namespace("s3://b"), FakeEnv(BaseEnv()));
  ASSERT_TRUE(creds.ok()) << creds.status().ToString();
  EXPECT_EQ(creds->access_key_id, "AKIDFILE");
  EXPECT_EQ(creds->secret_access_key.Reveal(), "file-secret");
  EXPECT_TRUE(creds->session_token.empty());
  EXPECT_EQ(creds->source, "shared credentials file (profile default)");
}

TEST_F(CredentialsTest, SharedFileNamedProfileFromExplicitPath) {
  EnvVars env = BaseEnv();
  env["AWS_SHARED_CREDENTIALS_FILE"] = Write("elsewhere/creds", kSharedFile);
  env["AWS_PROFILE"] = "prod";
  Result<Credentials> creds = ResolveCredentials(Namespace("s3://b"), FakeEnv(env));
  ASSERT_TRUE(creds.ok()) << creds.status().ToString();
  EXPECT_EQ(creds->access_key_id, "AKIDPROD");
  EXPECT_EQ(creds->session_token.Reveal(), "prod-token");
  EXPECT_EQ(creds->source, "shared credentials file (profile prod)");
}

TEST_F(CredentialsTest, NamedProfileMissingFromFileIsError) {
  Write(".aws/credentials", kSharedFile);
  EnvVars env = BaseEnv();
  env["AWS_PROFILE"] = "staging";
  Result<Credentials> creds = ResolveCredentials(Namespace("s3://b"), FakeEnv(env));
  ASSERT_FALSE(creds.ok());
  EXPECT_NE(creds.status().message().find("AWS_PROFILE 'staging'"), std::string::npos);
}

TEST_F(CredentialsTest, NothingFoundIsAnonymous) {
  Result<Credentials> creds = ResolveCredentials(Namespace("s3://b"), FakeEnv(BaseEnv()));
  ASSERT_TRUE(creds.ok()) << creds.status().ToString();
  EXPECT_TRUE(creds->anonymous());
  EXPECT_EQ(creds->source, "none");
  Result<Credentials> no_home = ResolveCredentials(Namespace("s3://b"), FakeEnv({}));
  ASSERT_TRUE(no_home.ok());
  EXPECT_TRUE(no_home->anonymous());
}

TEST_F(CredentialsTest, OssNamespacePrefersOssEnvironment) {
  EnvVars env = BaseEnv();
  env["AWS_ACCESS_KEY_ID"] = "AKIDAWS";
  env["AWS_SECRET_ACCESS_KEY"] = "aws-secret";
  env["OSS_ACCESS_KEY_ID"] = "AKIDOSS";
  env["OSS_ACCESS_KEY_SECRET"] = "oss-secret";
  env["OSS_SESSION_TOKEN"] = "oss-token";
  Result<Credentials> oss = ResolveCredentials(Namespace("oss://b.e.com/d"), FakeEnv(env));
  ASSERT_TRUE(oss.ok()) << oss.status().ToString();
  EXPECT_EQ(oss->access_key_id, "AKIDOSS");
  EXPECT_EQ(oss->secret_access_key.Reveal(), "oss-secret");
  EXPECT_EQ(oss->session_token.Reveal(), "oss-token");
  EXPECT_EQ(oss->source, "environment");
  Result<Credentials> s3 = ResolveCredentials(Namespace("s3://b"), FakeEnv(env));
  ASSERT_TRUE(s3.ok());
  EXPECT_EQ(s3->access_key_id, "AKIDAWS");
}

TEST_F(CredentialsTest, OssNamespaceFallsBackToAwsEnvironment) {
  EnvVars env = BaseEnv();
  env["AWS_ACCESS_KEY_ID"] = "AKIDAWS";
  env["AWS_SECRET_ACCESS_KEY"] = "aws-secret";
  Result<Credentials> creds = ResolveCredentials(Namespace("oss://b.e.com/d"), FakeEnv(env));
  ASSERT_TRUE(creds.ok()) << creds.status().ToString();
  EXPECT_EQ(creds->access_key_id, "AKIDAWS");
}

TEST_F(CredentialsTest, KeyFilesAreReadAndTrimmed) {
  NamespaceConfig ns = Namespace("file:///data");
  ns.access_key_file = Write("id", "  AKIDFROMFILE\n");
  ns.secret_key_file = Write("secret", "file-secret-value\n\n");
  Result<Credentials> creds = ResolveCredentials(ns, FakeEnv(BaseEnv()));
  ASSERT_TRUE(creds.ok()) << creds.status().ToString();
  EXPECT_EQ(creds->access_key_id, "AKIDFROMFILE");
  EXPECT_EQ(creds->secret_access_key.Reveal(), "file-secret-value");
  EXPECT_EQ(creds->source, "config");
}

TEST_F(CredentialsTest, KeyFileErrorsNameKeyAndPathNotContent) {
  NamespaceConfig ns = Namespace("s3://b");
  ns.access_key = "AKID";
  ns.secret_key_file = dir_ + "/absent";
  Result<Credentials> missing = ResolveCredentials(ns, FakeEnv(BaseEnv()));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("namespaces.test.secret_key_file"), std::string::npos);
  EXPECT_NE(missing.status().message().find(ns.secret_key_file), std::string::npos);

  ns.secret_key_file = Write("blank", " \n");
  Result<Credentials> empty = ResolveCredentials(ns, FakeEnv(BaseEnv()));
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("is empty"), std::string::npos);
}

TEST_F(CredentialsTest, HalfSpecifiedCredentialsAreErrors) {
  NamespaceConfig ns = Namespace("s3://b");
  ns.access_key = "AKID";
  Result<Credentials> config_half = ResolveCredentials(ns, FakeEnv(BaseEnv()));
  ASSERT_FALSE(config_half.ok());
  EXPECT_NE(config_half.status().message().find("namespaces.test.secret_key"), std::string::npos);

  NamespaceConfig secret_only = Namespace("s3://b");
  secret_only.secret_key = Secret("only-the-secret");
  Result<Credentials> secret_half = ResolveCredentials(secret_only, FakeEnv(BaseEnv()));
  ASSERT_FALSE(secret_half.ok());
  EXPECT_EQ(secret_half.status().message().find("only-the-secret"), std::string::npos);

  EnvVars env = BaseEnv();
  env["AWS_SECRET_ACCESS_KEY"] = "env-secret";
  Result<Credentials> env_half = ResolveCredentials(Namespace("s3://b"), FakeEnv(env));
  ASSERT_FALSE(env_half.ok());
  EXPECT_NE(env_half.status().message().find("AWS_ACCESS_KEY_ID"), std::string::npos);
  EXPECT_EQ(env_half.status().message().find("env-secret"), std::string::npos);
}

TEST_F(CredentialsTest, HalfProfileInFileIsError) {
  Write(".aws/credentials", "[default]\naws_access_key_id = AKID\n");
  Result<Credentials> creds = ResolveCredentials(Namespace("s3://b"), FakeEnv(BaseEnv()));
  ASSERT_FALSE(creds.ok());
  EXPECT_NE(creds.status().message().find("aws_secret_access_key"), std::string::npos);
}

TEST(ProcessEnvTest, ReadsTheProcessEnvironment) {
  ASSERT_EQ(setenv("LAKECACHE_CREDENTIALS_TEST_VAR", "value", 1), 0);
  EXPECT_STREQ(ProcessEnv("LAKECACHE_CREDENTIALS_TEST_VAR"), "value");
  unsetenv("LAKECACHE_CREDENTIALS_TEST_VAR");
  EXPECT_EQ(ProcessEnv("LAKECACHE_CREDENTIALS_TEST_VAR"), nullptr);
}

}  // namespace
}  // namespace lakecache
