#include "meta/dir_listing.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace lakecache {
namespace {

ObjectInfo Object(std::string key, uint64_t size = 1, std::string etag = "e", int64_t mtime = 7) {
  return ObjectInfo{std::move(key), size, std::move(etag), mtime};
}

std::vector<std::string> Names(const DirListing& listing) {
  std::vector<std::string> names;
  for (const DirEntry& e : listing.ToEntries()) names.push_back(e.name);
  return names;
}

TEST(DirListingTest, CommonPrefixesBecomeFolders) {
  ListResult listed;
  listed.common_prefixes = {"data/a/", "data/b/"};
  DirListing listing = DirListing::FromObjects("data/", listed);
  ASSERT_EQ(Names(listing), (std::vector<std::string>{"a", "b"}));
  for (const DirEntry& e : listing.ToEntries()) {
    EXPECT_TRUE(e.is_dir) << e.name;
    EXPECT_EQ(e.size, 0u);
    EXPECT_EQ(e.etag, "");
  }
  EXPECT_TRUE(listing.exists());
}

TEST(DirListingTest, ObjectsBecomeFilesWithTheirAttributes) {
  ListResult listed;
  listed.objects = {Object("data/x.bin", 123, "etag-x", 1700000000)};
  DirListing listing = DirListing::FromObjects("data/", listed);
  ASSERT_EQ(listing.size(), 1u);
  const DirEntry e = listing.at(0);
  EXPECT_EQ(e.name, "x.bin");
  EXPECT_FALSE(e.is_dir);
  EXPECT_EQ(e.size, 123u);
  EXPECT_EQ(e.etag, "etag-x");
  EXPECT_EQ(e.mtime, 1700000000);
}

TEST(DirListingTest, MarkerObjectsAreFoldersAndTheListedFoldersOwnMarkerIsSkipped) {
  ListResult listed;
  // "data/" is the listed folder's own marker; "data/empty/" marks a folder with nothing below it.
  listed.objects = {Object("data/", 0), Object("data/empty/", 0, "marker-etag")};
  DirListing listing = DirListing::FromObjects("data/", listed);
  ASSERT_EQ(Names(listing), (std::vector<std::string>{"empty"}));
  EXPECT_TRUE(listing.at(0).is_dir);
  EXPECT_EQ(listing.at(0).etag, "");  // folders carry no ETag
  EXPECT_TRUE(listing.exists());
}

TEST(DirListingTest, OwnMarkerAloneMeansTheFolderExistsButIsEmpty) {
  ListResult listed;
  listed.objects = {Object("data/", 0)};
  DirListing listing = DirListing::FromObjects("data/", listed);
  EXPECT_TRUE(listing.empty());
  EXPECT_TRUE(listing.exists());
}

TEST(DirListingTest, NameThatIsBothObjectAndPrefixShowsOnceAsFolder) {
  ListResult listed;
  listed.objects = {Object("data/both", 10), Object("data/file", 5)};
  listed.common_prefixes = {"data/both/"};
  DirListing listing = DirListing::FromObjects("data/", listed);
  ASSERT_EQ(Names(listing), (std::vector<std::string>{"both", "file"}));
  EXPECT_TRUE(listing.Find("both")->is_dir);
  EXPECT_EQ(listing.Find("both")->size, 0u);
  EXPECT_FALSE(listing.Find("file")->is_dir);
}

TEST(DirListingTest, MarkerAndPrefixOfTheSameFolderShowOnce) {
  ListResult listed;
  listed.objects = {Object("d/", 0)};
  listed.common_prefixes = {"d/"};
  DirListing listing = DirListing::FromObjects("", listed);
  ASSERT_EQ(Names(listing), (std::vector<std::string>{"d"}));
  EXPECT_TRUE(listing.at(0).is_dir);
}

TEST(DirListingTest, NamesThatCannotBeFileNamesAreSkipped) {
  ListResult listed;
  listed.objects = {Object("p/."), Object("p/.."), Object("p/ok"),
                    Object(std::string("p/nul\0x", 7))};
  // "p//" would name a folder "" and "p/./" and "p/../" would name "." and "..".
  listed.common_prefixes = {"p//", "p/./", "p/../", "p/sub/"};
  DirListing listing = DirListing::FromObjects("p/", listed);
  EXPECT_EQ(Names(listing), (std::vector<std::string>{"ok", "sub"}));
}

TEST(DirListingTest, EntriesOutsideThePrefixAreIgnored) {
  ListResult listed;
  listed.objects = {Object("other/x"), Object("p/in")};
  listed.common_prefixes = {"elsewhere/"};
  DirListing listing = DirListing::FromObjects("p/", listed);
  EXPECT_EQ(Names(listing), (std::vector<std::string>{"in"}));
}

TEST(DirListingTest, EntriesAreSortedByNameWhateverTheInputOrder) {
  ListResult listed;
  // Keys in S3 order, but folders and files interleave differently once the '/' is cut off.
  listed.objects = {Object("b"), Object("a.txt"), Object("c-1"), Object("Z")};
  listed.common_prefixes = {"c/", "a/", "B/"};
  DirListing listing = DirListing::FromObjects("", listed);
  std::vector<std::string> names = Names(listing);
  EXPECT_EQ(names, (std::vector<std::string>{"B", "Z", "a", "a.txt", "b", "c", "c-1"}));
}

TEST(DirListingTest, FindReturnsTheEntryOrNull) {
  ListResult listed;
  listed.objects = {Object("f1", 1), Object("f3", 3)};
  listed.common_prefixes = {"d2/"};
  DirListing listing = DirListing::FromObjects("", listed);
  ASSERT_NE(listing.Find("f1"), nullptr);
  EXPECT_EQ(listing.Find("f1")->size, 1u);
  ASSERT_NE(listing.Find("d2"), nullptr);
  EXPECT_TRUE(listing.Find("d2")->is_dir);
  ASSERT_NE(listing.Find("f3"), nullptr);
  EXPECT_EQ(listing.Find("f3")->size, 3u);
  EXPECT_EQ(listing.Find("f2"), nullptr);  // between two entries
  EXPECT_EQ(listing.Find("a"), nullptr);   // before the first
  EXPECT_EQ(listing.Find("z"), nullptr);   // after the last
  EXPECT_EQ(listing.Find(""), nullptr);
  EXPECT_EQ(listing.Find("f"), nullptr);  // a prefix of a name is no match
}

TEST(DirListingTest, EmptyListingDoesNotExist) {
  DirListing listing = DirListing::FromObjects("gone/", ListResult{});
  EXPECT_FALSE(listing.exists());
  EXPECT_TRUE(listing.empty());
  EXPECT_EQ(listing.Find("x"), nullptr);
}

TEST(DirListingTest, RootListingUsesAnEmptyPrefix) {
  ListResult listed;
  listed.objects = {Object("top.txt", 9)};
  listed.common_prefixes = {"dir/"};
  DirListing listing = DirListing::FromObjects("", listed);
  EXPECT_EQ(Names(listing), (std::vector<std::string>{"dir", "top.txt"}));
}

TEST(DirListingTest, WithAddsInNameOrderAndReplacesByName) {
  ListResult listed;
  listed.objects = {Object("d/b", 2, "eb"), Object("d/d", 4, "ed")};
  DirListing listing = DirListing::FromObjects("d/", listed);
  DirListing added = listing.With(DirEntry{"c", false, 3, "ec", 9});
  EXPECT_EQ(Names(added), (std::vector<std::string>{"b", "c", "d"}));
  EXPECT_EQ(Names(listing), (std::vector<std::string>{"b", "d"})) << "the original is unchanged";
  added = added.With(DirEntry{"a", false, 1, "ea", 9}).With(DirEntry{"e", true, 0, "", 0});
  EXPECT_EQ(Names(added), (std::vector<std::string>{"a", "b", "c", "d", "e"}));
  DirListing replaced = added.With(DirEntry{"b", false, 20, "eb2", 10});
  EXPECT_EQ(Names(replaced), (std::vector<std::string>{"a", "b", "c", "d", "e"}));
  EXPECT_EQ(replaced.Find("b")->size, 20u);
  EXPECT_EQ(replaced.Find("b")->etag, "eb2");
}

TEST(DirListingTest, WithMakesTheFolderExist) {
  DirListing listing = DirListing::FromObjects("new/", ListResult{});
  ASSERT_FALSE(listing.exists());
  DirListing added = listing.With(DirEntry{"f", false, 1, "e", 0});
  EXPECT_TRUE(added.exists());
  ASSERT_NE(added.Find("f"), nullptr);
  EXPECT_FALSE(listing.exists());
}

TEST(DirListingTest, WithoutRemovesTheNamedEntryOnly) {
  ListResult listed;
  listed.objects = {Object("a"), Object("b"), Object("c")};
  DirListing listing = DirListing::FromObjects("", listed);
  DirListing removed = listing.Without("b");
  EXPECT_EQ(Names(removed), (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(removed.Find("b"), nullptr);
  EXPECT_TRUE(removed.Without("a").Without("c").exists()) << "emptied, the folder still exists";
  EXPECT_EQ(Names(removed.Without("missing")), (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(Names(listing), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(DirListingTest, EtagsOfEveryShapeReadBackAsTheyWere) {
  const std::vector<std::string> etags = {
      "0123456789abcdef0123456789abcdef",     // an MD5: packed
      "0123456789ABCDEF0123456789ABCDEF",     // upper case: kept as text
      "0123456789abcdef0123456789abcdef-12",  // a multipart upload's
      "",                                     // a local folder's files have none
      "0123456789abcdef0123456789abcdeg",     // 32 characters, not hex
  };
  ListResult listed;
  for (size_t i = 0; i < etags.size(); ++i) {
    listed.objects.push_back(Object("f" + std::to_string(i), i, etags[i], 100 + i));
  }
  DirListing listing = DirListing::FromObjects("", listed);
  ASSERT_EQ(listing.size(), etags.size());
  for (size_t i = 0; i < etags.size(); ++i) {
    EXPECT_EQ(listing.at(i).etag, etags[i]) << i;
    EXPECT_EQ(listing.at(i).size, i);
    EXPECT_EQ(listing.at(i).mtime, static_cast<int64_t>(100 + i));
    EXPECT_EQ(listing.Find("f" + std::to_string(i))->etag, etags[i]);
  }
  // A change keeps the others' ETags, packed or not.
  DirListing changed = listing.With(DirEntry{"f1", false, 5, "other-etag", 1}).Without("f0");
  EXPECT_EQ(changed.Find("f1")->etag, "other-etag");
  EXPECT_EQ(changed.Find("f2")->etag, etags[2]);
  EXPECT_EQ(changed.Find("f0"), nullptr);
  EXPECT_EQ(changed.at(0).name, "f1");
}

// A large folder costs its packed entries: 40 bytes and the name.
TEST(DirListingTest, EntriesArePacked) {
  ListResult listed;
  constexpr size_t kFiles = 100000;
  for (size_t i = 0; i < kFiles; ++i) {
    char name[32];
    std::snprintf(name, sizeof(name), "d/n01440764_%08zu.JPEG", i);  // 23 characters
    listed.objects.push_back(Object(name, i, "0123456789abcdef0123456789abcdef", 1));
  }
  DirListing listing = DirListing::FromObjects("d/", listed);
  ASSERT_EQ(listing.size(), kFiles);
  EXPECT_LE(listing.bytes(), kFiles * (40 + 23) + 1024);
  EXPECT_EQ(listing.name_at(kFiles - 1), "n01440764_00099999.JPEG");
  EXPECT_EQ(listing.Find("n01440764_00012345.JPEG")->size, 12345u);
}

// Prefixes and objects come as two sorted runs from a store; any order gives the same listing.
TEST(DirListingTest, TheOrderOfTheStoresListingDoesNotMatter) {
  ListResult sorted;
  sorted.common_prefixes = {"b/", "d/", "x/"};
  sorted.objects = {Object("a"), Object("b"), Object("c"), Object("x/"), Object("z")};
  ListResult shuffled = sorted;
  std::reverse(shuffled.common_prefixes.begin(), shuffled.common_prefixes.end());
  std::reverse(shuffled.objects.begin(), shuffled.objects.end());
  for (const ListResult* listed : {&sorted, &shuffled}) {
    DirListing listing = DirListing::FromObjects("", *listed);
    EXPECT_EQ(Names(listing), (std::vector<std::string>{"a", "b", "c", "d", "x", "z"}));
    EXPECT_TRUE(listing.Find("b")->is_dir) << "a folder shadows the file of its name";
    EXPECT_TRUE(listing.Find("x")->is_dir);
    EXPECT_FALSE(listing.Find("c")->is_dir);
  }
}

}  // namespace
}  // namespace lakecache
