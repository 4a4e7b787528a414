#include "rpc/tls.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "security/credentials_dir.h"
#include "support/test_servers.h"

namespace lakecache::rpc {
namespace {

TEST(TlsContextTest, LoadsACredentialsFolderAndNamesWhatIsMissing) {
  testing::TempDir dir;
  auto missing = TlsContext::Load(dir.path(), TlsContext::Side::kServer);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(dir.path() + "/tls.key is missing"), std::string::npos)
      << missing.status().message();
  auto no_ca = TlsContext::Load(dir.path(), TlsContext::Side::kClient);
  ASSERT_FALSE(no_ca.ok());
  EXPECT_NE(no_ca.status().message().find(dir.path() + "/ca.crt is missing"), std::string::npos)
      << no_ca.status().message();
  ASSERT_TRUE(security::MakeCredentials(dir.path()).ok());
  for (auto side : {TlsContext::Side::kServer, TlsContext::Side::kClient}) {
    auto loaded = TlsContext::Load(dir.path(), side);
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    EXPECT_EQ((*loaded)->side(), side);
  }
  // A key that is not the certificate's: refused, naming the files, never showing the key.
  testing::TempDir other;
  ASSERT_TRUE(security::MakeCredentials(other.path()).ok());
  std::filesystem::copy_file(other.path() + "/tls.key", dir.path() + "/tls.key",
                             std::filesystem::copy_options::overwrite_existing);
  auto mismatched = TlsContext::Load(dir.path(), TlsContext::Side::kServer);
  ASSERT_FALSE(mismatched.ok());
  EXPECT_NE(mismatched.status().message().find("tls.key"), std::string::npos)
      << mismatched.status().message();
  EXPECT_EQ(mismatched.status().message().find("PRIVATE KEY"), std::string::npos);
}

}  // namespace
}  // namespace lakecache::rpc
