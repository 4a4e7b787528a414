#include "security/credentials_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "rpc/tls.h"
#include "security/x509.h"
#include "support/process.h"
#include "support/test_data.h"
#include "support/test_servers.h"

namespace lakecache::security {
namespace {

const std::vector<std::string> kFiles = {"ca.crt",       "ca.key",       "tls.crt",
                                         "tls.key",      "admin.token",  "client.token",
                                         "worker.token", "master.token", "metrics.token"};

class CredentialsDirTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  std::string Read(const std::string& name) const {
    return testing::ReadWholeFile(Path(name)).bytes;
  }
  std::map<std::string, std::string> Contents() const {
    std::map<std::string, std::string> out;
    for (const std::string& name : kFiles) out[name] = Read(name);
    return out;
  }
  mode_t Mode(const std::string& path) const {
    struct stat st;
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
    return st.st_mode & 07777;
  }

  testing::TempDir tmp_;
  std::string dir_ = tmp_.path() + "/creds";  // not there yet
};

TEST_F(CredentialsDirTest, MakesEveryFileKeysAndTokensOwnerOnly) {
  CredentialOptions options;
  options.names = {"master.example.com", "10.0.0.7", "localhost"};
  Result<CredentialsChange> change = UpdateCredentials(dir_, options);
  ASSERT_TRUE(change.ok()) << change.status().ToString();
  EXPECT_EQ(change->written.size(), kFiles.size());
  EXPECT_TRUE(change->kept.empty());
  EXPECT_EQ(Mode(dir_), 0700u);
  for (const std::string& name : kFiles) {
    bool is_public = name.ends_with(".crt");
    EXPECT_EQ(Mode(Path(name)), is_public ? 0644u : 0600u) << name;
    EXPECT_FALSE(std::filesystem::exists(Path(name) + ".tmp")) << name;
  }
  for (const char* token : kTokenFiles) {
    std::string text = Read(token);
    EXPECT_EQ(text.size(), 6u + 65u) << token;
    EXPECT_TRUE(text.starts_with(kTokenPrefix)) << token;
    EXPECT_EQ(text.find_first_not_of("0123456789abcdef", 6), 70u) << token;
    EXPECT_EQ(text.back(), '\n');
  }
  EXPECT_NE(Read("admin.token"), Read("client.token"));
  Result<CertificateInfo> info = ParseCertificate(Read("tls.crt"));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->dns_names, (std::vector<std::string>{"lakecache-master", "localhost", "127.0.0.1",
                                                       "master.example.com", "10.0.0.7"}));
  EXPECT_EQ(info->key_fingerprint, *KeyFingerprint(Read("tls.key")));
  auto days = std::chrono::duration_cast<std::chrono::hours>(info->not_after -
                                                             std::chrono::system_clock::now());
  EXPECT_NEAR(days.count() / 24.0, 365, 0.1);
  auto ca_days = std::chrono::duration_cast<std::chrono::hours>(
      ParseCertificate(Read("ca.crt"))->not_after - std::chrono::system_clock::now());
  EXPECT_NEAR(ca_days.count() / 24.0, 3650, 0.1);
  testing::RunResult verify =
      testing::RunCommand({"openssl", "verify", "-CAfile", Path("ca.crt"), Path("tls.crt")});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  // The bulk data path's TLS loads the folder as it is.
  EXPECT_TRUE(rpc::TlsContext::Load(dir_, rpc::TlsContext::Side::kServer).ok());
}

TEST_F(CredentialsDirTest, SecondRunKeepsEverything) {
  ASSERT_TRUE(MakeCredentials(dir_).ok());
  auto before = Contents();
  Result<CredentialsChange> again = UpdateCredentials(dir_, {});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->written.empty());
  EXPECT_EQ(again->kept, kFiles);
  EXPECT_EQ(Contents(), before);
}

TEST_F(CredentialsDirTest, RenewReplacesOnlyTheMasterCertificateAndKey) {
  ASSERT_TRUE(MakeCredentials(dir_).ok());
  auto before = Contents();
  CredentialOptions renew;
  renew.renew = true;
  renew.days = 7;
  Result<CredentialsChange> change = UpdateCredentials(dir_, renew);
  ASSERT_TRUE(change.ok()) << change.status().ToString();
  EXPECT_EQ(change->written, (std::vector<std::string>{"tls.key", "tls.crt"}));
  auto after = Contents();
  for (const std::string& name : kFiles) {
    bool renewed = name == "tls.crt" || name == "tls.key";
    EXPECT_EQ(after[name] != before[name], renewed) << name;
  }
  testing::RunResult verify =
      testing::RunCommand({"openssl", "verify", "-CAfile", Path("ca.crt"), Path("tls.crt")});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  auto left = ParseCertificate(after["tls.crt"])->not_after - std::chrono::system_clock::now();
  EXPECT_NEAR(std::chrono::duration_cast<std::chrono::hours>(left).count(), 7 * 24, 1);
}

TEST_F(CredentialsDirTest, RenewKeepsTheCertificatesNamesAndAddsNewOnes) {
  CredentialOptions first;
  first.names = {"master.lake"};
  ASSERT_TRUE(MakeCredentials(dir_, first).ok());
  CredentialOptions renew;
  renew.renew = true;
  renew.names = {"10.0.0.9"};
  ASSERT_TRUE(MakeCredentials(dir_, renew).ok());
  EXPECT_EQ(ParseCertificate(Read("tls.crt"))->dns_names,
            (std::vector<std::string>{"lakecache-master", "localhost", "127.0.0.1", "10.0.0.9",
                                      "master.lake"}));
}

TEST_F(CredentialsDirTest, RenewWithoutTheCaIsAnErrorNamingIt) {
  CredentialOptions renew;
  renew.renew = true;
  Status empty = MakeCredentials(dir_, renew);
  EXPECT_EQ(empty.code(), StatusCode::kNotFound);
  EXPECT_NE(empty.message().find(Path("ca.crt") + " is missing"), std::string::npos)
      << empty.message();
  EXPECT_FALSE(std::filesystem::exists(Path("tls.crt")));
  // ca.crt alone (a worker's folder) cannot issue either.
  ASSERT_TRUE(MakeCredentials(dir_).ok());
  std::filesystem::remove(Path("ca.key"));
  Status no_key = MakeCredentials(dir_, renew);
  EXPECT_EQ(no_key.code(), StatusCode::kNotFound);
  EXPECT_NE(no_key.message().find(Path("ca.key") + " is missing"), std::string::npos)
      << no_key.message();
}

TEST_F(CredentialsDirTest, ForceMakesEverythingNew) {
  ASSERT_TRUE(MakeCredentials(dir_).ok());
  auto before = Contents();
  CredentialOptions force;
  force.force = true;
  ASSERT_TRUE(MakeCredentials(dir_, force).ok());
  auto after = Contents();
  for (const std::string& name : kFiles) EXPECT_NE(after[name], before[name]) << name;
  CredentialOptions both = force;
  both.renew = true;
  EXPECT_EQ(MakeCredentials(dir_, both).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Contents(), after);
}

TEST_F(CredentialsDirTest, MissingFilesAreMadeAndTheRestKept) {
  ASSERT_TRUE(MakeCredentials(dir_).ok());
  auto before = Contents();
  std::filesystem::remove(Path("worker.token"));
  std::filesystem::remove(Path("tls.key"));
  Result<CredentialsChange> change = UpdateCredentials(dir_, {});
  ASSERT_TRUE(change.ok()) << change.status().ToString();
  EXPECT_EQ(change->written, (std::vector<std::string>{"tls.key", "tls.crt", "worker.token"}));
  auto after = Contents();
  for (const char* kept : {"ca.crt", "ca.key", "admin.token", "client.token", "master.token"}) {
    EXPECT_EQ(after[kept], before[kept]) << kept;
  }
  EXPECT_EQ(ParseCertificate(after["tls.crt"])->key_fingerprint, *KeyFingerprint(after["tls.key"]));
}

TEST_F(CredentialsDirTest, ANewCaComesWithANewCertificate) {
  ASSERT_TRUE(MakeCredentials(dir_).ok());
  std::string old_cert = Read("tls.crt");
  std::filesystem::remove(Path("ca.crt"));
  std::filesystem::remove(Path("ca.key"));
  ASSERT_TRUE(MakeCredentials(dir_).ok());
  EXPECT_NE(Read("tls.crt"), old_cert);
  testing::RunResult verify =
      testing::RunCommand({"openssl", "verify", "-CAfile", Path("ca.crt"), Path("tls.crt")});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
}

TEST_F(CredentialsDirTest, CaKeyWithoutItsCertificateIsNotReplaced) {
  ASSERT_TRUE(MakeCredentials(dir_).ok());
  std::string key = Read("ca.key");
  std::filesystem::remove(Path("ca.crt"));
  Status s = MakeCredentials(dir_);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("--force"), std::string::npos) << s.message();
  EXPECT_EQ(Read("ca.key"), key);
}

TEST_F(CredentialsDirTest, AFolderWithoutTheCaKeyKeepsItsCertificate) {
  ASSERT_TRUE(MakeCredentials(dir_).ok());
  std::filesystem::remove(Path("ca.key"));
  auto before = Contents();
  EXPECT_TRUE(MakeCredentials(dir_).ok());
  EXPECT_EQ(Contents(), before);
  std::filesystem::remove(Path("tls.crt"));
  Status s = MakeCredentials(dir_);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("cannot issue " + Path("tls.crt")), std::string::npos) << s.message();
}

TEST_F(CredentialsDirTest, BadOptionsWriteNothing) {
  CredentialOptions bad_name;
  bad_name.names = {"two words"};
  Status s = MakeCredentials(dir_, bad_name);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'two words'"), std::string::npos) << s.message();
  CredentialOptions no_days;
  no_days.days = 0;
  EXPECT_EQ(MakeCredentials(dir_, no_days).code(), StatusCode::kInvalidArgument);
  for (const std::string& name : kFiles) EXPECT_FALSE(std::filesystem::exists(Path(name))) << name;
}

}  // namespace
}  // namespace lakecache::security
