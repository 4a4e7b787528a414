#include "common/mount_table.h"

#include <gtest/gtest.h>

namespace lakecache {
namespace {

// Lines as the kernel writes them: optional fields before "-", paths octal-escaped.
constexpr char kMountInfo[] =
    "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
    "61 22 0:52 / /mnt/data\\040set rw,nosuid,nodev shared:30 master:2 - fuse.lakecache "
    "lakecache:s3://b/a\\040b rw,user_id=0\n"
    "not a mountinfo line\n"
    "62 22 0:53 / /mnt/data\\040set rw - fuse.lakecache lakecache:cluster:a:7400,b:7400 rw\n";

TEST(MountTableTest, ParsesEntriesUnescapedInOrder) {
  std::vector<MountEntry> entries = ParseMountInfo(kMountInfo);
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].mountpoint, "/");
  EXPECT_EQ(entries[0].type, "ext4");
  EXPECT_EQ(entries[0].source, "/dev/sda1");
  EXPECT_EQ(entries[0].device, "8:1");
  EXPECT_EQ(entries[1].mountpoint, "/mnt/data set");
  EXPECT_EQ(entries[1].type, kLakecacheFsType);
  EXPECT_EQ(entries[1].source, "lakecache:s3://b/a b");
  EXPECT_EQ(entries[1].device, "0:52");
  EXPECT_EQ(entries[2].device, "0:53");  // the newest mount at the same place comes last
}

TEST(MountTableTest, SkipsLinesWithoutTheSeparatorOrItsFields) {
  EXPECT_TRUE(ParseMountInfo("1 2 3:4 / /x rw shared:1\n").empty());
  EXPECT_TRUE(ParseMountInfo("1 2 3:4 / /x rw - ext4\n").empty());
  EXPECT_TRUE(ParseMountInfo("").empty());
}

TEST(MountTableTest, NormalizedPathIsAbsoluteWithoutATrailingSlash) {
  EXPECT_EQ(NormalizedPath("/tmp/../tmp/x/"), "/tmp/x");
  EXPECT_EQ(NormalizedPath("/"), "/");
}

}  // namespace
}  // namespace lakecache
