// SyntheticStore: the spec, the tree's layout, S3's listing rules against a flat model of the
// same keys, and deterministic sizes, ETags and bytes.
#include "ufs/synthetic_store.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "ufs/list_model.h"

namespace lakecache {
namespace {

using Strings = std::vector<std::string>;

SyntheticStore Make(std::string_view spec) {
  Result<SyntheticSpec> parsed = SyntheticSpec::Parse(spec);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return SyntheticStore(parsed.ok() ? *parsed : SyntheticSpec{.objects = 1}, std::string(spec));
}

std::string ErrorOf(std::string_view spec) {
  Result<SyntheticSpec> parsed = SyntheticSpec::Parse(spec);
  return parsed.ok() ? "" : parsed.status().message();
}

TEST(SyntheticSpecTest, CountsSizesAndErrors) {
  Result<SyntheticSpec> spec = SyntheticSpec::Parse("1M");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->objects, 1000000u);
  EXPECT_EQ(spec->fanout, 1000u);
  spec = SyntheticSpec::Parse("objects=10k,fanout=10,size=4KiB,seed=3");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->objects, 10000u);
  EXPECT_EQ(spec->fanout, 10u);
  EXPECT_EQ(spec->min_size, 4096u);
  EXPECT_EQ(spec->max_size, 4096u);
  EXPECT_EQ(spec->seed, 3u);
  EXPECT_NE(ErrorOf("fanout=10").find("no object count"), std::string::npos);
  EXPECT_NE(ErrorOf("0").find("invalid object count '0'"), std::string::npos);
  EXPECT_NE(ErrorOf("1X").find("invalid object count '1X'"), std::string::npos);
  EXPECT_NE(ErrorOf("1M,fanout=1").find("invalid fanout '1'"), std::string::npos);
  EXPECT_NE(ErrorOf("1M,size=2KiB-1KiB").find("invalid size '2KiB-1KiB'"), std::string::npos);
  EXPECT_NE(ErrorOf("1M,colour=red").find("unknown option 'colour'"), std::string::npos);
  EXPECT_NE(ErrorOf("1M,seed=").find("invalid seed"), std::string::npos);
}

TEST(SyntheticStoreTest, KeysFillFoldersOfFanoutInIndexOrder) {
  SyntheticStore million = Make("1M");
  EXPECT_EQ(million.KeyOf(0), "d000/f000.bin");
  EXPECT_EQ(million.KeyOf(1001), "d001/f001.bin");
  EXPECT_EQ(million.KeyOf(999999), "d999/f999.bin");
  SyntheticStore deep = Make("12,fanout=2");  // 6 leaf folders: 3 levels
  EXPECT_EQ(deep.KeyOf(0), "d0/d0/d0/f0.bin");
  EXPECT_EQ(deep.KeyOf(11), "d1/d0/d1/f1.bin");
  SyntheticStore flat = Make("5,fanout=1000000");  // one folder
  EXPECT_EQ(flat.KeyOf(4), "f000004.bin");
  for (uint64_t i = 1; i < 12; ++i) EXPECT_LT(deep.KeyOf(i - 1), deep.KeyOf(i));
}

using list_model::Keys;
using list_model::ModelPage;

TEST(SyntheticStoreTest, ListingMatchesAFlatModelOfS3) {
  SyntheticStore store = Make("1234,fanout=10");  // 124 leaf folders: 3 levels
  std::set<std::string> keys;
  for (uint64_t i = 0; i < store.objects(); ++i) keys.insert(store.KeyOf(i));
  const Strings prefixes = {
      "",          "d0",  "d0/", "d1/d2/",          "d1/d2/d3/f", "d1/d2/d3/f4.bin",
      "d1/d2/d4/", "d9/", "e",   "d0/d0/d0/f0.bin/"};
  list_model::ExpectListingsMatchTheModel(store, keys, prefixes, {"", "/", "b", "n", "0"},
                                          {1, 7, 1000});
  // A token from anywhere (S3's start-after) lists what follows it.
  for (const std::string& token : Strings{"d0/d5", "d1/", "d1/d2/d3/f4.bin", "c", "zzz"}) {
    ListRequest req{"", "/", token, 1000};
    ListPage want = ModelPage(keys, req);
    Result<ListPage> got = store.List(req, {});
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(Keys(*got), Keys(want)) << token;
    EXPECT_EQ(got->common_prefixes, want.common_prefixes) << token;
  }
}

TEST(SyntheticStoreTest, AHundredMillionObjectsListInPagesWithoutBuildingThem) {
  SyntheticStore store = Make("100M");  // 100,000 leaf folders of 1,000: 2 levels
  Result<ListPage> top = store.List({"", "/", "", 1000}, {});
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(top->common_prefixes.size(), 100u);  // d000/ .. d099/
  EXPECT_EQ(top->common_prefixes.back(), "d099/");
  EXPECT_FALSE(top->truncated);
  Result<ListPage> last = store.List({"d099/d999/", "/", "d099/d999/f997.bin", 1000}, {});
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(Keys(*last), (Strings{"d099/d999/f998.bin", "d099/d999/f999.bin"}));
  Result<ObjectInfo> info = store.Head("d099/d999/f999.bin", {});
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(store.Head("d100/d000/f000.bin", {}).status().code(), StatusCode::kNotFound);
}

TEST(SyntheticStoreTest, PagesHoldAtMostAThousandEntries) {
  SyntheticStore store = Make("1005,fanout=10000");
  Result<ListPage> page = store.List({"", "/", "", 5000}, {});
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->objects.size(), 1000u);
  EXPECT_TRUE(page->truncated);
  Result<ListPage> rest = store.List({"", "/", page->next_token, 5000}, {});
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(rest->objects.size(), 5u);
  EXPECT_FALSE(rest->truncated);
}

TEST(SyntheticStoreTest, SizesEtagsAndBytesAreFunctionsOfTheIndexAndSeed) {
  SyntheticStore a = Make("1000,size=1KiB-64KiB");
  SyntheticStore again = Make("1000,size=1KiB-64KiB");
  SyntheticStore seeded = Make("1000,size=1KiB-64KiB,seed=9");
  std::set<uint64_t> sizes;
  for (uint64_t i = 0; i < 100; ++i) {
    ObjectInfo info = a.InfoOf(i);
    EXPECT_GE(info.size, 1024u);
    EXPECT_LE(info.size, 65536u);
    EXPECT_EQ(info.etag.size(), 32u);
    EXPECT_EQ(info.etag, again.InfoOf(i).etag);
    EXPECT_NE(info.etag, seeded.InfoOf(i).etag);
    sizes.insert(info.size);
  }
  EXPECT_GT(sizes.size(), 90u);  // sizes vary with the index
  Result<ObjectInfo> head = a.Head(a.KeyOf(17), {});
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->size, a.InfoOf(17).size);
  EXPECT_EQ(head->etag, a.InfoOf(17).etag);
}

TEST(SyntheticStoreTest, ReadsGiveTheSameBytesAtAnyOffsetAndStopAtTheEnd) {
  SyntheticStore store = Make("10,size=10000");
  std::string key = store.KeyOf(3);
  std::string whole(10000, '\0');
  Result<size_t> n = store.Read(key, 0, whole, {});
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  ASSERT_EQ(*n, 10000u);
  for (uint64_t at = 0; at < 10000; ++at) ASSERT_EQ(whole[at], store.ByteOf(3, at)) << at;
  // Unaligned pieces into two buffers, past the end.
  std::string first(13, '\0'), second(100, '\0');
  std::span<char> bufs[] = {first, second};
  n = store.ReadV(key, 9901, bufs, {});
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 99u);
  EXPECT_EQ(first, whole.substr(9901, 13));
  EXPECT_EQ(second.substr(0, 86), whole.substr(9914, 86));
  std::string other(100, '\0');
  ASSERT_TRUE(store.Read(store.KeyOf(4), 0, other, {}).ok());
  EXPECT_NE(other, whole.substr(0, 100));
  ReadOptions stale;
  stale.if_match = "0123";
  EXPECT_EQ(store.Read(key, 0, other, stale).status().code(), StatusCode::kPreconditionFailed);
  EXPECT_EQ(store.Read("d0/f0.bin", 0, other, {}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store.Read("f10.bin", 0, other, {}).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace lakecache
