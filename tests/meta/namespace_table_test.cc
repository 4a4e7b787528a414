// NamespaceTable's lookups and the one check of a namespace-relative path, shared by the master's
// service and the admin service.
#include "meta/namespace_table.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "support/test_servers.h"
#include "ufs/local_store.h"

namespace lakecache {
namespace {

TEST(NamespaceTableTest, GetOfAnUnknownNamespaceNamesTheOnesThereAre) {
  testing::TempDir dir("lakecache-ns");
  std::vector<NamespaceTable::Source> sources;
  for (const char* name : {"train", "eval"}) {
    sources.push_back({testing::LocalNamespace(name, dir.path(), 1 << 20),
                       std::make_shared<LocalStore>(dir.path()), ""});
  }
  std::unique_ptr<NamespaceTable> table = NamespaceTable::FromStores(std::move(sources));
  auto found = table->Get("eval");
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ((*found)->name, "eval");
  auto missing = table->Get("test");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "unknown namespace 'test' (there are: eval, train)");
}

TEST(NamespaceTableTest, RelativePathsStayInsideTheNamespace) {
  for (const char* ok : {"", "a", "a/b/c", "a.b/..c/c..", ".hidden/x"}) {
    EXPECT_TRUE(CheckRelativePath("path", ok).ok()) << "'" << ok << "'";
  }
  for (const char* bad : {"/a", "a/", "a//b", "./a", "a/.", "..", "a/../b", "/"}) {
    Status s = CheckRelativePath("ListDir: dir", bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << "'" << bad << "'";
    EXPECT_NE(s.message().find("ListDir: dir '" + std::string(bad) + "'"), std::string::npos)
        << s.message();
  }
  EXPECT_FALSE(CheckRelativePath("path", std::string_view("a\0b", 3)).ok());
}

}  // namespace
}  // namespace lakecache
