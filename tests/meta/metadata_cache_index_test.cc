// MetadataCache over a ListingIndex: what a new cache (a restarted process) serves from the index,
// and a memory budget's evictions read back without asking the store.
#include <chrono>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "meta/metadata_cache.h"
#include "support/fake_clock.h"
#include "support/test_servers.h"
#include "ufs/fault_injecting_store.h"
#include "ufs/local_store.h"

namespace lakecache {
namespace {

using std::chrono::seconds;

class MetadataCacheIndexTest : public ::testing::Test {
 protected:
  static constexpr auto kTtl = seconds(60);

  void SetUp() override {
    local_ = std::make_shared<LocalStore>(data_.path());
    store_ = std::make_shared<FaultInjectingStore>(local_);
    index_ = OpenIndex();
  }

  std::unique_ptr<ListingIndex> OpenIndex(ListingIndexOptions options = {}) {
    auto index = ListingIndex::Open(index_dir_.path() + "/index", options);
    EXPECT_TRUE(index.ok()) << index.status().ToString();
    return index.ok() ? std::move(*index) : nullptr;
  }

  // A new cache over the index: what a restarted process has.
  MetadataCache& Cache() {
    cache_.reset();
    MetadataCacheOptions options = options_;
    options.clock = &clock_;
    options.ttl = kTtl;
    options.index = index_.get();
    options.index_scope = Scope();
    cache_ = std::make_unique<MetadataCache>(store_, "", options);
    return *cache_;
  }

  std::string Scope() const { return "lake\nfile://" + data_.path(); }

  void Put(const std::string& key, const std::string& data = "x") {
    Status st = local_->Put(key, data, {}).status();
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  std::shared_ptr<const DirListing> MustList(const std::string& dir) {
    auto listed = cache_->List(dir);
    EXPECT_TRUE(listed.ok()) << listed.status().ToString();
    return listed.ok() ? *listed : std::make_shared<const DirListing>();
  }
  std::vector<std::string> Names(const std::string& dir) {
    std::vector<std::string> names;
    for (const DirEntry& e : MustList(dir)->ToEntries()) names.push_back(e.name);
    return names;
  }

  int64_t Lists() const { return store_->Calls(StoreOp::kList); }

  testing::TempDir data_{"lakecache-meta-data"};
  testing::TempDir index_dir_{"lakecache-meta-index"};
  std::shared_ptr<LocalStore> local_;
  std::shared_ptr<FaultInjectingStore> store_;
  testing::FakeClock clock_;
  MetadataCacheOptions options_;
  std::unique_ptr<ListingIndex> index_;
  std::unique_ptr<MetadataCache> cache_;
};

TEST_F(MetadataCacheIndexTest, ANewCacheServesIndexedFoldersWithinTheTtlWithoutListing) {
  Put("a.txt");
  Put("sub/b.txt");
  Cache();
  EXPECT_EQ(Names(""), (std::vector<std::string>{"a.txt", "sub"}));
  EXPECT_EQ(Names("sub"), (std::vector<std::string>{"b.txt"}));
  const int64_t before = Lists();
  Put("sub/new.txt");  // the store changed; the TTL says the listing holds
  Cache();
  EXPECT_EQ(Names(""), (std::vector<std::string>{"a.txt", "sub"}));
  EXPECT_EQ(Names("sub"), (std::vector<std::string>{"b.txt"}));
  auto stat = cache_->Stat("sub/b.txt");
  ASSERT_TRUE(stat.ok());
  EXPECT_EQ(stat->size, 1u);
  EXPECT_EQ(Lists(), before);
}

TEST_F(MetadataCacheIndexTest, ANewCacheRevalidatesPastTheTtl) {
  Put("sub/b.txt");
  Cache();
  MustList("sub");
  Put("sub/new.txt");
  Cache();
  MustList("sub");  // read back, as old as it was
  clock_.Advance(kTtl + seconds(1));
  const int64_t before = Lists();
  EXPECT_EQ(Names("sub"), (std::vector<std::string>{"b.txt", "new.txt"}));
  EXPECT_EQ(Lists(), before + 1);
}

TEST_F(MetadataCacheIndexTest, AListingIsAgedFromTheWallTimeItWasListed) {
  Put("sub/b.txt");
  Cache();
  auto listed = MustList("sub");
  Put("sub/new.txt");
  IndexedListing old{listed, std::chrono::system_clock::now() - 2 * kTtl};
  ASSERT_TRUE(index_->Put(Scope(), "sub", old));
  Cache();
  const int64_t before = Lists();
  EXPECT_EQ(Names("sub"), (std::vector<std::string>{"b.txt", "new.txt"}));
  EXPECT_EQ(Lists(), before + 1);
}

TEST_F(MetadataCacheIndexTest, AnImmutableNamespaceIsNeverRevalidatedFromTheIndex) {
  options_.immutable = true;
  Put("sub/b.txt");
  Cache();
  MustList("sub");
  Cache();
  clock_.Advance(std::chrono::hours(48));
  const int64_t before = Lists();
  EXPECT_EQ(Names("sub"), (std::vector<std::string>{"b.txt"}));
  EXPECT_EQ(Lists(), before);
}

TEST_F(MetadataCacheIndexTest, APinSurvivesAndUnpinErasesBelow) {
  Put("data/x/1.bin");
  Put("data/2.bin");
  Cache();
  cache_->Pin("data", MustList("data"));
  cache_->Pin("data/x", MustList("data/x"));
  Cache();
  clock_.Advance(std::chrono::hours(2));
  const int64_t before = Lists();
  EXPECT_EQ(Names("data"), (std::vector<std::string>{"2.bin", "x"}));
  EXPECT_EQ(Names("data/x"), (std::vector<std::string>{"1.bin"}));
  EXPECT_EQ(Lists(), before);
  cache_->Unpin("data");
  Cache();
  MustList("data");
  MustList("data/x");
  EXPECT_EQ(Lists(), before + 2);
}

TEST_F(MetadataCacheIndexTest, AFolderSaidChangedIsListedAgainAfterARestart) {
  Put("sub/b.txt");
  Cache();
  MustList("sub");
  Cache();
  cache_->ExpireFolder("sub");  // no slot yet: the index's listing goes
  const int64_t before = Lists();
  MustList("sub");
  EXPECT_EQ(Lists(), before + 1);
}

TEST_F(MetadataCacheIndexTest, AWriteNotedHereIsNotHiddenByTheIndexAfterARestart) {
  Put("sub/b.txt");
  Cache();
  MustList("sub");
  Put("sub/c.txt");
  cache_->NoteEntry("sub", DirEntry{"c.txt", false, 1, "etag", 1});
  Cache();
  EXPECT_EQ(Names("sub"), (std::vector<std::string>{"b.txt", "c.txt"}));
}

TEST_F(MetadataCacheIndexTest, ListingsBeyondTheBudgetLeaveMemoryAndComeBackWithoutListing) {
  constexpr int kFolders = 12;
  for (int d = 0; d < kFolders; ++d) {
    for (int f = 0; f < 40; ++f) Put("d" + std::to_string(d) + "/file-" + std::to_string(f));
  }
  Cache();
  MustList("d0");
  const uint64_t one = ListingCost(*MustList("d0"));
  options_.memory_budget = 4 * one;
  Cache();
  for (int d = 0; d < kFolders; ++d) MustList("d" + std::to_string(d));
  EXPECT_LE(cache_->memory_used(), options_.memory_budget);
  const int64_t before = Lists();
  for (int d = 0; d < kFolders; ++d) {
    EXPECT_EQ(MustList("d" + std::to_string(d))->size(), 40u);
  }
  EXPECT_EQ(Lists(), before);
  EXPECT_LE(cache_->memory_used(), options_.memory_budget);
  clock_.Advance(kTtl + seconds(1));  // the evicted keep their age: revalidated as usual
  MustList("d3");
  EXPECT_EQ(Lists(), before + 1);
}

TEST_F(MetadataCacheIndexTest, AFullIndexKeepsListingsInMemory) {
  index_ = OpenIndex(ListingIndexOptions{.map_size = 64 << 10});
  for (int f = 0; f < 3000; ++f) Put("big/file-" + std::to_string(f));
  options_.memory_budget = 1;
  Cache();
  EXPECT_EQ(MustList("big")->size(), 3000u);
  EXPECT_TRUE(index_->full());
  const int64_t before = Lists();
  EXPECT_EQ(MustList("big")->size(), 3000u);
  EXPECT_EQ(Lists(), before);
}

}  // namespace
}  // namespace lakecache
