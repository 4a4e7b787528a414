#include "meta/listing_index.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/resident.h"
#include "support/test_servers.h"

namespace lakecache {
namespace {

using std::chrono::system_clock;

DirEntry File(std::string name, std::string etag, uint64_t size = 7, int64_t mtime = 1700000000) {
  return DirEntry{std::move(name), false, size, std::move(etag), mtime};
}

IndexedListing Folder(std::vector<DirEntry> entries, bool pinned = false) {
  IndexedListing out;
  out.listing =
      std::make_shared<const DirListing>(DirListing::FromEntries(std::move(entries), true));
  out.listed = system_clock::time_point(std::chrono::milliseconds(1733500000123));
  out.pinned = pinned;
  return out;
}

// A folder of `n` files with MD5-like ETags.
IndexedListing Numbered(size_t n, const std::string& stem = "file-") {
  std::vector<DirEntry> entries;
  for (size_t i = 0; i < n; ++i) {
    char etag[33];
    std::snprintf(etag, sizeof(etag), "%032zx", i * 2654435761u);
    char name[32];
    std::snprintf(name, sizeof(name), "%06zu", i);
    entries.push_back(File(stem + name, etag, i));
  }
  return Folder(std::move(entries));
}

void ExpectSame(const DirListing& a, const DirListing& b) {
  EXPECT_EQ(a.exists(), b.exists());
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const DirEntry x = a.at(i), y = b.at(i);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.is_dir, y.is_dir);
    EXPECT_EQ(x.size, y.size);
    EXPECT_EQ(x.etag, y.etag);
    EXPECT_EQ(x.mtime, y.mtime);
  }
}

class ListingIndexTest : public ::testing::Test {
 protected:
  std::unique_ptr<ListingIndex> Open(ListingIndexOptions options = {}) {
    auto index = ListingIndex::Open(path(), options);
    EXPECT_TRUE(index.ok()) << index.status().ToString();
    return index.ok() ? std::move(*index) : nullptr;
  }
  std::string path() const { return dir_.path() + "/index"; }

  testing::TempDir dir_{"lakecache-index"};
};

TEST(ListingCodecTest, RoundTripsEveryKindOfEntry) {
  IndexedListing folder =
      Folder({DirEntry{"a dir", true, 0, "", 0}, File("b.bin", "0123456789abcdef0123456789abcdef"),
              File("b.bin2", "0123456789ABCDEF0123456789ABCDEF"),  // uppercase: kept as a string
              File("c", "5d41402abc4b2a76b9719d911017c592-3", 1ull << 40, -5), File("d", "")},
             /*pinned=*/true);
  folder.anchored = true;
  std::string bytes = ListingIndex::Encode(folder);
  auto back = ListingIndex::Decode(bytes);
  ASSERT_TRUE(back.has_value());
  ExpectSame(*folder.listing, *back->listing);
  EXPECT_EQ(back->listed, folder.listed);
  EXPECT_TRUE(back->pinned);
  EXPECT_TRUE(back->anchored);
}

TEST(ListingCodecTest, MostlyMd5FoldersTakeAFewBytesPerEntryBeyondTheEtag) {
  std::string bytes = ListingIndex::Encode(Numbered(1000));
  EXPECT_LT(bytes.size(), 1000u * (16 + 12));
}

TEST(ListingCodecTest, ADamagedValueIsRefused) {
  std::string bytes = ListingIndex::Encode(Numbered(10));
  for (size_t at : {size_t{0}, bytes.size() / 2, bytes.size() - 1}) {
    std::string bad = bytes;
    bad[at] ^= 0x20;
    EXPECT_FALSE(ListingIndex::Decode(bad).has_value()) << "byte " << at;
  }
  EXPECT_FALSE(ListingIndex::Decode(bytes.substr(0, bytes.size() - 3)).has_value());
  EXPECT_FALSE(ListingIndex::Decode("").has_value());
}

TEST_F(ListingIndexTest, PutGetEraseAndEraseBelow) {
  auto index = Open();
  for (const char* dir : {"", "a", "a/b", "a/b/c", "a-x", "b"}) {
    ASSERT_TRUE(index->Put("ns", dir, Numbered(3)));
  }
  ASSERT_TRUE(index->Put("other", "a", Numbered(3)));
  auto got = index->Get("ns", "a/b");
  ASSERT_TRUE(got.has_value());
  ExpectSame(*got->listing, *Numbered(3).listing);
  EXPECT_FALSE(index->Get("ns", "nope").has_value());
  index->Erase("ns", "b");
  EXPECT_FALSE(index->Get("ns", "b").has_value());
  EXPECT_EQ(index->EraseBelow("ns", "a"), 3u);
  EXPECT_TRUE(index->Get("ns", "a-x").has_value());
  EXPECT_TRUE(index->Get("ns", "").has_value());
  EXPECT_EQ(index->EraseBelow("ns", ""), 2u);  // the root and a-x
  EXPECT_TRUE(index->Get("other", "a").has_value());
}

// Listings read through the index's map leave this process's pages as they are read: its RSS
// does not grow with the index (a stat of 100M objects reads gigabytes of it).
TEST_F(ListingIndexTest, ReadingListingsDoesNotKeepTheIndexMapped) {
  ListingIndexOptions options;
  options.unmap_every = 2ull << 20;  // 64 MiB by default: the same at a thirty-second of the size
  auto index = Open(options);
  const IndexedListing folder = Numbered(10000);
  constexpr int kFolders = 48;  // about 300 KB each
  for (int i = 0; i < kFolders; ++i) ASSERT_TRUE(index->Put("ns", "d" + std::to_string(i), folder));
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < kFolders; ++i) ASSERT_TRUE(index->Get("ns", "d" + std::to_string(i)));
  }
  const std::string file = std::filesystem::canonical(path() + "/data.mdb").string();
  const size_t file_kib = std::filesystem::file_size(file) / 1024;
  ASSERT_GT(file_kib, 12u << 10) << "the folders should take several times the 2 MiB between drops";
  EXPECT_LT(testing::MappedResidentKib([&](std::string_view path) { return path == file; }),
            file_kib / 2)
      << "of " << file_kib << " KiB";
}

// A new mount asks for an empty index: what the last one left is not served.
TEST_F(ListingIndexTest, AnIndexOpenedEmptyServesNothingOfTheLastProcess) {
  {
    auto index = Open();
    ASSERT_TRUE(index->Put("ns", "a", Numbered(3)));
  }
  EXPECT_TRUE(Open()->Get("ns", "a").has_value()) << "kept by default";
  ListingIndexOptions empty;
  empty.empty = true;
  auto index = Open(empty);
  EXPECT_FALSE(index->Get("ns", "a").has_value());
  ASSERT_TRUE(index->Put("ns", "b", Numbered(2)));
  EXPECT_TRUE(index->Get("ns", "b").has_value());
}

TEST_F(ListingIndexTest, ListingsSurviveTheWriterBeingKilled) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto index = ListingIndex::Open(path());
    bool ok = index.ok();
    for (int i = 0; ok && i < 200; ++i)
      ok = (*index)->Put("ns", "d" + std::to_string(i), Numbered(50));
    char c = ok ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    while (true) ::pause();  // killed here, the index open
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_EQ(c, 'y');
  auto index = Open();
  for (int i = 0; i < 200; ++i) {
    auto got = index->Get("ns", "d" + std::to_string(i));
    ASSERT_TRUE(got.has_value()) << i;
    EXPECT_EQ(got->listing->size(), 50u);
  }
}

TEST_F(ListingIndexTest, AFileThatIsNoIndexIsRebuiltEmpty) {
  Open()->Put("ns", "a", Numbered(5));
  {
    std::fstream data(path() + "/data.mdb", std::ios::in | std::ios::out | std::ios::binary);
    std::string junk(32 << 10, '\x5a');
    data.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  auto index = Open();
  ASSERT_NE(index, nullptr);
  EXPECT_FALSE(index->Get("ns", "a").has_value());
  EXPECT_TRUE(index->Put("ns", "a", Numbered(5)));
  EXPECT_TRUE(index->Get("ns", "a").has_value());
}

TEST_F(ListingIndexTest, ADamagedListingIsErasedNotServed) {
  Open()->Put("ns", "a", Numbered(20, "NEEDLE-"));
  {
    std::fstream data(path() + "/data.mdb", std::ios::in | std::ios::out | std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(data)), std::istreambuf_iterator<char>());
    size_t at = bytes.find("NEEDLE-");
    ASSERT_NE(at, std::string::npos);
    data.seekp(static_cast<std::streamoff>(at + 3));
    data.put('X');
  }
  auto index = Open();
  EXPECT_FALSE(index->Get("ns", "a").has_value());
  EXPECT_FALSE(index->broken());
}

TEST_F(ListingIndexTest, AnIndexOpenWhenTheMachineWentDownIsRebuiltEmpty) {
  Open()->Put("ns", "a", Numbered(5));
  std::ofstream(path() + "/state") << "open some-other-boot 1\n";
  EXPECT_FALSE(Open()->Get("ns", "a").has_value());
}

TEST_F(ListingIndexTest, AnIndexLeftOpenByAKilledProcessOfThisBootIsKept) {
  Open()->Put("ns", "a", Numbered(5));
  std::string state;
  std::getline(std::ifstream(path() + "/state"), state);
  EXPECT_TRUE(state.starts_with("closed ")) << state;
  std::ofstream(path() + "/state") << "open" << state.substr(6, state.rfind(' ') - 6) << " 1\n";
  EXPECT_TRUE(Open()->Get("ns", "a").has_value());
}

TEST_F(ListingIndexTest, AFullIndexRefusesWritesAndKeepsServing) {
  auto index = Open(ListingIndexOptions{.map_size = 1 << 20});
  ASSERT_TRUE(index->Put("ns", "small", Numbered(10)));
  EXPECT_FALSE(index->Put("ns", "big", Numbered(100000)));
  EXPECT_TRUE(index->full());
  EXPECT_FALSE(index->Get("ns", "big").has_value());
  EXPECT_TRUE(index->Get("ns", "small").has_value());
  EXPECT_TRUE(index->Put("ns", "small2", Numbered(10)));
}

}  // namespace
}  // namespace lakecache
