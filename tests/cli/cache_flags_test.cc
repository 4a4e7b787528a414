#include "cli/cache_flags.h"

#include <gtest/gtest.h>

namespace lakecache {
namespace {

CacheConfig TwoDisks() {
  CacheConfig cache;
  cache.disks = {DiskCacheConfig{.path = "/a", .capacity = 1ull << 30},
                 DiskCacheConfig{.path = "/b", .capacity = 2ull << 30}};
  return cache;
}

CacheFlags Flags(std::string mem_cache, std::string cache_dir = "", std::string cache_size = "") {
  CacheFlags flags;
  flags.mem_cache = std::move(mem_cache);
  flags.cache_dir = std::move(cache_dir);
  flags.cache_size = std::move(cache_size);
  return flags;
}

// The message of a call that must fail; the config must be left as it was.
std::string ErrorOf(const CacheFlags& flags, CacheConfig cache = TwoDisks()) {
  CacheConfig before = cache;
  Status s = ApplyCacheFlags(flags, &cache);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cache.memory_capacity, before.memory_capacity);
  EXPECT_EQ(cache.disks.size(), before.disks.size());
  return s.message();
}

TEST(CacheFlagsTest, NoFlagsKeepTheConfig) {
  CacheConfig cache = TwoDisks();
  ASSERT_TRUE(ApplyCacheFlags(CacheFlags{}, &cache).ok());
  EXPECT_EQ(cache.memory_capacity, 1ull << 30);
  EXPECT_EQ(cache.disks.size(), 2u);
}

TEST(CacheFlagsTest, MemCacheSetsTheMemoryCapacity) {
  CacheConfig cache;
  ASSERT_TRUE(ApplyCacheFlags(Flags("512MiB"), &cache).ok());
  EXPECT_EQ(cache.memory_capacity, 512u << 20);
  EXPECT_TRUE(cache.disks.empty());
}

TEST(CacheFlagsTest, CacheDirReplacesTheDisksWith10GiBByDefault) {
  CacheConfig cache = TwoDisks();
  ASSERT_TRUE(ApplyCacheFlags(Flags("", "/var/cache/lakecache"), &cache).ok());
  ASSERT_EQ(cache.disks.size(), 1u);
  EXPECT_EQ(cache.disks[0].path, "/var/cache/lakecache");
  EXPECT_EQ(cache.disks[0].capacity, 10ull << 30);
  EXPECT_DOUBLE_EQ(cache.disks[0].min_free_ratio, 0.05);
}

TEST(CacheFlagsTest, CacheSizeSetsTheCacheDirCapacity) {
  CacheConfig cache;
  ASSERT_TRUE(ApplyCacheFlags(Flags("", "/ssd/lc", "200GiB"), &cache).ok());
  ASSERT_EQ(cache.disks.size(), 1u);
  EXPECT_EQ(cache.disks[0].capacity, 200ull << 30);
}

TEST(CacheFlagsTest, CacheSizeAloneResizesTheOneConfiguredDisk) {
  CacheConfig cache;
  cache.disks = {DiskCacheConfig{.path = "/a", .capacity = 1ull << 30}};
  ASSERT_TRUE(ApplyCacheFlags(Flags("", "", "5GiB"), &cache).ok());
  EXPECT_EQ(cache.disks[0].capacity, 5ull << 30);
  EXPECT_EQ(ErrorOf(Flags("", "", "5GiB")),
            "--cache-size: needs --cache-dir, or exactly one directory in the config's "
            "cache.disks (it has 2)");
}

TEST(CacheFlagsTest, ErrorsNameTheFlag) {
  EXPECT_EQ(ErrorOf(Flags("lots")),
            "--mem-cache: invalid size 'lots' (expected e.g. 4MiB, 512M, 10GiB)");
  EXPECT_EQ(ErrorOf(Flags("0")), "--mem-cache: must be more than 0");
  EXPECT_EQ(ErrorOf(Flags("", "cache")),
            "--cache-dir: 'cache' is not an absolute path (e.g. /var/cache/lakecache)");
  EXPECT_EQ(ErrorOf(Flags("", "/c", "0GiB")), "--cache-size: must be more than 0");
  // A bad disk flag leaves a good --mem-cache unapplied too.
  EXPECT_NE(ErrorOf(Flags("1GiB", "rel")).find("--cache-dir"), std::string::npos);
}

}  // namespace
}  // namespace lakecache
