#include "meta/metadata_cache.h"

#include <atomic>
#include <chrono>
#include <ctime>
#include <functional>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/fake_clock.h"
#include "support/test_servers.h"
#include "support/wait_for.h"
#include "ufs/fault_injecting_store.h"
#include "ufs/local_store.h"

namespace lakecache {
namespace {

using std::chrono::seconds;

// A MetadataCache over file:// (a temp dir) behind a FaultInjectingStore, with a fake clock.
class MetadataCacheTest : public ::testing::Test {
 protected:
  static constexpr auto kTtl = seconds(60);
  static constexpr auto kStaleIfError = seconds(600);

  void SetUp() override {
    local_ = std::make_shared<LocalStore>(dir_.path());
    store_ = std::make_shared<FaultInjectingStore>(local_);
  }
  // A test that failed before it ended its store's stall leaves the revalidation that waits in
  // it free to end, so the cache's destructor need not wait it out.
  void TearDown() override { store_->EndDelays(); }

  // Builds the cache; tests may change options_ first.
  MetadataCache& Cache(const std::string& prefix = "") {
    options_.clock = &clock_;
    cache_ = std::make_unique<MetadataCache>(store_, prefix, options_);
    return *cache_;
  }

  void Put(const std::string& key, const std::string& data) {
    Status st = local_->Put(key, data, {}).status();
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  // The listing of `dir`, failing the test on an error.
  std::shared_ptr<const DirListing> MustList(const std::string& dir) {
    auto listed = cache_->List(dir);
    EXPECT_TRUE(listed.ok()) << listed.status().ToString();
    return listed.ok() ? *listed : std::make_shared<const DirListing>();
  }

  static MetadataCacheOptions DefaultOptions() {
    MetadataCacheOptions options;
    options.ttl = kTtl;
    options.stale_if_error = kStaleIfError;
    return options;
  }

  int64_t Lists() const { return store_->Calls(StoreOp::kList); }

  // Waits for `done`, a background revalidation's effect.
  static bool WaitUntil(const std::function<bool()>& done) { return testing::WaitFor(done); }

  // Waits until the background revalidations started have settled.
  bool RevalidationsSettle() const {
    return testing::WaitFor([this] { return cache_->revalidations_in_flight() == 0; });
  }

  testing::TempDir dir_{"lakecache-meta"};
  std::shared_ptr<LocalStore> local_;
  std::shared_ptr<FaultInjectingStore> store_;
  testing::FakeClock clock_;
  MetadataCacheOptions options_ = DefaultOptions();
  std::unique_ptr<MetadataCache> cache_;
};

TEST_F(MetadataCacheTest, ListShowsFilesAndFoldersOfOneLevel) {
  Put("a.txt", "hello");
  Put("sub/b.txt", "x");
  Put("sub/deeper/c.txt", "y");
  Cache();
  auto root = MustList("");
  ASSERT_EQ(root->size(), 2u);
  EXPECT_EQ(root->at(0).name, "a.txt");
  EXPECT_EQ(root->at(0).size, 5u);
  EXPECT_FALSE(root->at(0).is_dir);
  EXPECT_EQ(root->at(1).name, "sub");
  EXPECT_TRUE(root->at(1).is_dir);
  auto sub = MustList("sub");
  ASSERT_EQ(sub->size(), 2u);
  EXPECT_EQ(sub->at(0).name, "b.txt");
  EXPECT_EQ(sub->at(1).name, "deeper");
  EXPECT_TRUE(sub->exists());
  EXPECT_FALSE(MustList("nothing-here")->exists());
}

TEST_F(MetadataCacheTest, PrefixMapsPathsToKeysBelowIt) {
  Put("ns/dir/f", "12345");
  Put("other/g", "x");
  MetadataCache& cache = Cache("ns/");
  auto root = MustList("");
  ASSERT_EQ(root->size(), 1u);
  EXPECT_EQ(root->at(0).name, "dir");
  auto entry = cache.Stat("dir/f");
  ASSERT_TRUE(entry.ok()) << entry.status().ToString();
  EXPECT_EQ(entry->size, 5u);
  EXPECT_EQ(cache.ObjectKey("dir/f"), "ns/dir/f");
}

TEST_F(MetadataCacheTest, ListingIsCachedWithinTtl) {
  Put("dir/f1", "1");
  Put("dir/f2", "22");
  MetadataCache& cache = Cache();
  for (int i = 0; i < 50; ++i) {
    MustList("dir");
    ASSERT_TRUE(cache.Stat("dir/f1").ok());
    ASSERT_TRUE(cache.Stat("dir/f2").ok());
    clock_.Advance(kTtl / 100);
  }
  EXPECT_EQ(Lists(), 1);  // 50 lists and 100 stats of one folder: one listing
}

TEST_F(MetadataCacheTest, EachFolderIsListedOnce) {
  Put("a/f", "1");
  Put("b/f", "1");
  MetadataCache& cache = Cache();
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(cache.Stat("a/f").ok());
    ASSERT_TRUE(cache.Stat("b/f").ok());
    ASSERT_TRUE(cache.Stat("a").ok());  // from the root's listing
  }
  EXPECT_EQ(Lists(), 3);
}

TEST_F(MetadataCacheTest, AfterTtlRelistsAndSeesTheChangedFile) {
  Put("dir/f", "old");
  MetadataCache& cache = Cache();
  auto before = cache.Stat("dir/f");
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->size, 3u);

  Put("dir/f", "new and longer");
  clock_.Advance(kTtl / 2);  // (not yet the last quarter, where it would be refreshed ahead)
  auto within = cache.Stat("dir/f");
  ASSERT_TRUE(within.ok());
  EXPECT_EQ(within->etag, before->etag);  // still the cached listing
  EXPECT_EQ(Lists(), 1);

  clock_.Advance(kTtl / 2);
  auto after = cache.Stat("dir/f");
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(Lists(), 2);
  EXPECT_EQ(after->size, 14u);
  EXPECT_NE(after->etag, before->etag);
}

TEST_F(MetadataCacheTest, AfterTtlSeesNewAndDeletedFiles) {
  Put("dir/keep", "k");
  Put("dir/gone", "g");
  MetadataCache& cache = Cache();
  ASSERT_TRUE(cache.Stat("dir/gone").ok());
  ASSERT_TRUE(local_->Delete("dir/gone", {}).ok());
  Put("dir/new", "n");
  clock_.Advance(kTtl);
  EXPECT_EQ(cache.Stat("dir/gone").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(cache.Stat("dir/new").ok());
  EXPECT_TRUE(cache.Stat("dir/keep").ok());
}

// A folder read in the last quarter of its TTL is listed again behind the read: a read just past
// the first listing's TTL needs no listing of its own, and what changed before the refresh shows.
TEST_F(MetadataCacheTest, FolderInUseIsRelistedAheadOfItsTtl) {
  Put("dir/f", "old");
  MetadataCache& cache = Cache();
  MustList("dir");
  clock_.Advance(kTtl / 2);
  MustList("dir");
  EXPECT_EQ(Lists(), 1);  // half a TTL: nothing to refresh
  Put("dir/g", "new");
  clock_.Advance(kTtl / 4 + seconds(1));
  EXPECT_EQ(MustList("dir")->Find("g"), nullptr);  // answered at once, from the cached listing
  ASSERT_TRUE(WaitUntil([&] { return cache.Stat("dir/g").ok(); }));
  EXPECT_EQ(Lists(), 2);
  clock_.Advance(kTtl / 2);  // past the first listing's TTL, within the second's
  ASSERT_TRUE(cache.Stat("dir/g").ok());
  EXPECT_EQ(Lists(), 2);
}

// A refresh ahead that fails keeps the listing and says nothing; past the TTL the store is asked
// in the caller's path, as ever, and a final error there is the caller's.
TEST_F(MetadataCacheTest, FailedRefreshAheadLeavesTheTtlToDecide) {
  Put("dir/f", "abc");
  MetadataCache& cache = Cache();
  ASSERT_TRUE(cache.Stat("dir/f").ok());
  store_->FailAlways(StoreOp::kList, store_->AccessDenied("dir/"));
  clock_.Advance(kTtl - seconds(5));
  ASSERT_TRUE(cache.Stat("dir/f").ok());
  ASSERT_TRUE(RevalidationsSettle());  // the refresh ahead failed
  EXPECT_EQ(Lists(), 2);
  ASSERT_TRUE(cache.Stat("dir/f").ok());
  // One refresh ahead per TTL, failed or not: this Stat started none (one would be in flight
  // until it settled, or have listed).
  EXPECT_EQ(cache.revalidations_in_flight(), 0);
  EXPECT_EQ(Lists(), 2);
  clock_.Advance(seconds(6));
  auto listed = cache.List("dir");
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(listed.status().code(), StatusCode::kAccessDenied);
}

TEST_F(MetadataCacheTest, ImmutableNamespaceNeverRelists) {
  Put("f", "old");
  options_.immutable = true;
  MetadataCache& cache = Cache();
  auto before = cache.Stat("f");
  ASSERT_TRUE(before.ok());
  Put("f", "changed content");
  clock_.Advance(std::chrono::hours(24 * 365));
  auto after = cache.Stat("f");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->etag, before->etag);
  EXPECT_EQ(after->size, 3u);
  EXPECT_EQ(Lists(), 1);
}

TEST_F(MetadataCacheTest, ConcurrentListsOfOneFolderShareOneListing) {
  Put("dir/f", "x");
  Cache();
  // The listing takes long enough that every thread asks while it is in flight.
  FaultRule slow;
  slow.op = StoreOp::kList;
  slow.delay = std::chrono::milliseconds(200);
  store_->AddRule(slow);
  constexpr int kThreads = 8;
  std::latch start(kThreads);
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      start.arrive_and_wait();
      auto listed = cache_->List("dir");
      if (listed.ok() && (*listed)->Find("f") != nullptr) ok.fetch_add(1);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), kThreads);
  EXPECT_EQ(Lists(), 1);
}

TEST_F(MetadataCacheTest, StaleListingIsServedWhileStoreIsUnavailable) {
  Put("dir/f", "abc");
  MetadataCache& cache = Cache();
  auto fresh = cache.Stat("dir/f");
  ASSERT_TRUE(fresh.ok());

  store_->FailAlways(StoreOp::kList, store_->ServerError("dir/"));
  clock_.Advance(kTtl + seconds(1));
  auto stale = cache.Stat("dir/f");
  ASSERT_TRUE(stale.ok()) << stale.status().ToString();
  EXPECT_EQ(stale->etag, fresh->etag);
  EXPECT_EQ(Lists(), 2);  // it did try to revalidate

  clock_.Advance(kStaleIfError - seconds(2));  // just inside ttl + stale_if_error
  EXPECT_TRUE(cache.List("dir").ok());

  clock_.Advance(seconds(1));  // exactly ttl + stale_if_error: no longer served
  auto expired = cache.List("dir");
  ASSERT_FALSE(expired.ok());
  EXPECT_EQ(expired.status().code(), StatusCode::kUnavailable);
}

TEST_F(MetadataCacheTest, PinnedListingIsNeverRevalidatedUntilUnpinned) {
  Put("dir/f", "abc");
  MetadataCache& cache = Cache();
  cache.Pin("dir", MustList("dir"));
  Put("dir/new", "n");
  clock_.Advance(kTtl + kStaleIfError + seconds(1));
  store_->FailAlways(StoreOp::kList, store_->ServerError("dir/"));
  EXPECT_TRUE(cache.Stat("dir/f").ok());
  EXPECT_EQ(cache.Stat("dir/new").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Lists(), 1);
  store_->ClearRules();
  EXPECT_EQ(cache.Unpin("dir"), 1u);
  EXPECT_TRUE(cache.Stat("dir/new").ok());
  EXPECT_EQ(Lists(), 2);
}

TEST_F(MetadataCacheTest, AnchoredListingRevalidatesInTheBackgroundAndOutlivesAnOutage) {
  Put("dir/f", "abc");
  MetadataCache& cache = Cache();
  cache.Pin("dir", MustList("dir"), MetadataCache::PinKind::kAnchored);
  Put("dir/new", "n");
  clock_.Advance(kTtl);
  // Past the TTL the last listing answers at once; the revalidation it starts brings the new file.
  EXPECT_EQ(cache.Stat("dir/new").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(WaitUntil([&] { return cache.Stat("dir/new").ok(); }));
  EXPECT_EQ(Lists(), 2);
  store_->FailAlways(StoreOp::kList, store_->ServerError("dir/"));
  clock_.Advance(kTtl + kStaleIfError * 10);  // far past the stale-if-error bound
  EXPECT_TRUE(cache.Stat("dir/new").ok());
  EXPECT_TRUE(WaitUntil([&] { return Lists() == 3; }));
  EXPECT_TRUE(cache.Stat("dir/new").ok());
}

TEST_F(MetadataCacheTest, ExpiredAnchoredListingAnswersAtOnceWhileTheStoreHangs) {
  Put("dir/f", "abc");
  MetadataCache& cache = Cache();
  cache.Pin("dir", MustList("dir"), MetadataCache::PinKind::kAnchored);
  Put("dir/new", "n");
  FaultRule hang;  // a store that hangs: every listing waits until the test ends its delay
  hang.op = StoreOp::kList;
  hang.delay = std::chrono::minutes(10);
  store_->AddRule(hang);
  clock_.Advance(kTtl + seconds(1));
  auto start = Clock::now();
  for (int i = 0; i < 20; ++i) {
    auto entry = cache.Stat("dir/f");
    ASSERT_TRUE(entry.ok()) << entry.status().ToString();
    EXPECT_EQ(cache.Stat("dir/new").status().code(), StatusCode::kNotFound);
  }
  // Had one of them waited for the store, it would have waited the whole 10 minutes.
  EXPECT_LT(Clock::now() - start, std::chrono::minutes(1))
      << "40 stats of an anchored folder waited for the store";
  // The listing they started hangs still: none of them waited for it.
  EXPECT_TRUE(WaitUntil([&] { return Lists() == 2; }));
  EXPECT_EQ(cache.revalidations_in_flight(), 1);
  EXPECT_EQ(cache.Stat("dir/new").status().code(), StatusCode::kNotFound);
  // Once it ends, its listing replaces the old one; there was only ever one in flight.
  store_->EndDelays();
  EXPECT_TRUE(WaitUntil([&] { return cache.Stat("dir/new").ok(); }));
  EXPECT_EQ(Lists(), 2);
}

TEST_F(MetadataCacheTest, AnchoredListingIsKeptWhateverTheRevalidationFailsWith) {
  Put("dir/f", "abc");
  MetadataCache& cache = Cache();
  cache.Pin("dir", MustList("dir"), MetadataCache::PinKind::kAnchored);
  store_->FailAlways(StoreOp::kList, store_->AccessDenied("dir/"));
  clock_.Advance(kTtl);
  EXPECT_TRUE(cache.Stat("dir/f").ok());
  EXPECT_TRUE(RevalidationsSettle());
  EXPECT_EQ(Lists(), 2);
  // The failed revalidation backs off: the listing stays, and this Stat starts no new one.
  EXPECT_TRUE(cache.Stat("dir/f").ok());
  EXPECT_EQ(cache.revalidations_in_flight(), 0);
  EXPECT_EQ(Lists(), 2);
  clock_.Advance(seconds(10));  // the back-off is the TTL, within [1 s, 10 s]
  EXPECT_TRUE(WaitUntil([&] { return cache.Stat("dir/f").ok() && Lists() == 3; }));
}

TEST_F(MetadataCacheTest, StaleListingIsServedWhenTheStoreAnswersGarbage) {
  Put("dir/f", "abc");
  MetadataCache& cache = Cache();
  ASSERT_TRUE(cache.Stat("dir/f").ok());
  store_->FailAlways(StoreOp::kList, Status::Internal("s3://b/dir/: unparsable XML"));
  clock_.Advance(kTtl * 2);
  EXPECT_TRUE(cache.Stat("dir/f").ok());
}

TEST_F(MetadataCacheTest, StaleListingIsServedOnConnectionReset) {
  Put("dir/f", "abc");
  MetadataCache& cache = Cache();
  ASSERT_TRUE(cache.Stat("dir/f").ok());
  store_->FailAlways(StoreOp::kList, store_->ConnectionReset("dir/"));
  clock_.Advance(kTtl * 2);
  EXPECT_TRUE(cache.Stat("dir/f").ok());
}

TEST_F(MetadataCacheTest, RecoveredStoreRefreshesTheStaleListing) {
  Put("dir/f", "abc");
  MetadataCache& cache = Cache();
  ASSERT_TRUE(cache.Stat("dir/f").ok());
  store_->FailNext(StoreOp::kList, store_->ServerError("dir/"));
  Put("dir/f", "abcdef");
  clock_.Advance(kTtl);
  auto stale = cache.Stat("dir/f");
  ASSERT_TRUE(stale.ok());
  EXPECT_EQ(stale->size, 3u);
  EXPECT_EQ(cache.Stat("dir/f")->size, 3u);  // backing off: the store is not asked again yet
  EXPECT_EQ(Lists(), 2);
  clock_.Advance(std::chrono::seconds(10));
  auto fresh = cache.Stat("dir/f");  // the store answers again
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->size, 6u);
  EXPECT_EQ(Lists(), 3);
}

TEST_F(MetadataCacheTest, AccessDeniedIsNotMaskedByStaleListing) {
  Put("dir/f", "abc");
  MetadataCache& cache = Cache();
  ASSERT_TRUE(cache.Stat("dir/f").ok());
  store_->FailAlways(StoreOp::kList, store_->AccessDenied("dir/"));
  clock_.Advance(kTtl + seconds(1));
  auto listed = cache.List("dir");
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(listed.status().code(), StatusCode::kAccessDenied);
}

TEST_F(MetadataCacheTest, NotFoundIsNotMaskedByStaleListing) {
  Put("dir/f", "abc");
  MetadataCache& cache = Cache();
  ASSERT_TRUE(cache.Stat("dir/f").ok());
  store_->FailAlways(StoreOp::kList, store_->NotFound("dir/"));
  clock_.Advance(kTtl + seconds(1));
  auto entry = cache.Stat("dir/f");
  ASSERT_FALSE(entry.ok());
  EXPECT_EQ(entry.status().code(), StatusCode::kNotFound);
}

TEST_F(MetadataCacheTest, ErrorWithoutAnyCachedListingIsReturned) {
  Put("dir/f", "abc");
  MetadataCache& cache = Cache();
  store_->FailAlways(StoreOp::kList, store_->ServerError(""));
  auto listed = cache.List("dir");
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(listed.status().code(), StatusCode::kUnavailable);
}

TEST_F(MetadataCacheTest, StatOfMissingNameIsNotFound) {
  Put("dir/f", "abc");
  MetadataCache& cache = Cache();
  EXPECT_EQ(cache.Stat("dir/missing").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(cache.Stat("missing").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(cache.Stat("nodir/f").status().code(), StatusCode::kNotFound);
  auto folder = cache.Stat("dir");
  ASSERT_TRUE(folder.ok());
  EXPECT_TRUE(folder->is_dir);
}

// A reader found an object changed: its folder is listed again at once, within the TTL, whatever
// kind of folder it is.
TEST_F(MetadataCacheTest, ExpiredFolderIsListedAgainAtOnce) {
  for (auto kind : {0, 1, 2, 3}) {  // plain, anchored, pinned, immutable namespace
    SCOPED_TRACE(kind);
    options_ = DefaultOptions();
    options_.immutable = kind == 3;
    Put("dir/f", "version one");
    MetadataCache& cache = Cache();
    if (kind == 1) cache.Pin("dir", MustList("dir"), MetadataCache::PinKind::kAnchored);
    if (kind == 2) cache.Pin("dir", MustList("dir"));
    std::string old_etag = cache.Stat("dir/f")->etag;
    Put("dir/f", "version two!");
    EXPECT_EQ(cache.Stat("dir/f")->etag, old_etag);  // within the TTL: the cached listing
    int64_t lists = Lists();
    cache.ExpireFolder("dir");
    auto entry = cache.Stat("dir/f");
    ASSERT_TRUE(entry.ok()) << entry.status().ToString();
    EXPECT_NE(entry->etag, old_etag);
    EXPECT_EQ(entry->size, 12u);
    EXPECT_EQ(Lists(), lists + 1);
    EXPECT_TRUE(cache.Stat("dir/f").ok());
    EXPECT_EQ(Lists(), lists + 1);  // once: then the TTL rules again
  }
}

// A pinned folder that was expired stays readable with the store down (it is anchored now).
TEST_F(MetadataCacheTest, ExpiredPinnedFolderOutlivesAnOutage) {
  Put("dir/f", "abc");
  MetadataCache& cache = Cache();
  cache.Pin("dir", MustList("dir"));
  store_->FailAlways(StoreOp::kList, store_->ServerError("dir/"));
  cache.ExpireFolder("dir");
  EXPECT_TRUE(cache.Stat("dir/f").ok());
  clock_.Advance(kTtl + kStaleIfError * 10);
  EXPECT_TRUE(cache.Stat("dir/f").ok());
}

// A write through the mount shows in the cached listing of its folder at once, within the TTL.
TEST_F(MetadataCacheTest, NotedEntryShowsInTheCachedListingAtOnce) {
  Put("dir/old", "1");
  MetadataCache& cache = Cache();
  MustList("dir");
  cache.NoteEntry("dir", DirEntry{"new", false, 5, "etag-new", 0});
  auto listing = MustList("dir");
  ASSERT_NE(listing->Find("new"), nullptr);
  EXPECT_EQ(listing->Find("new")->etag, "etag-new");
  auto entry = cache.Stat("dir/new");
  ASSERT_TRUE(entry.ok()) << entry.status().ToString();
  EXPECT_EQ(entry->size, 5u);
  EXPECT_EQ(Lists(), 1) << "without asking the store";
}

TEST_F(MetadataCacheTest, NotedRemovalHidesTheEntryAtOnce) {
  Put("dir/a", "1");
  Put("dir/b", "2");
  MetadataCache& cache = Cache();
  MustList("dir");
  cache.NoteRemoved("dir", "a");
  EXPECT_EQ(MustList("dir")->Find("a"), nullptr);
  EXPECT_EQ(cache.Stat("dir/a").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(cache.Stat("dir/b").ok());
  EXPECT_EQ(Lists(), 1);
}

// A store that lists a write late (Swift, when its servers are busy) is here one that never lists
// it: what this mount wrote, removed or made shows in its listings until `note_grace` passes.
TEST_F(MetadataCacheTest, ThisMountsChangesOutlastListingsThatDoNotShowThemYet) {
  Put("dir/gone", "1");
  Put("dir/kept", "2");
  MetadataCache& cache = Cache();
  MustList("dir");
  cache.NoteEntry("dir", DirEntry{"written", false, 5, "etag-w", std::time(nullptr)});
  cache.NoteRemoved("dir", "gone");
  cache.NoteEntry("dir", DirEntry{"made", true, 0, "", 0});
  cache.NoteFolderMade("dir/made");
  clock_.Advance(kTtl + seconds(1));
  auto listing = MustList("dir");
  EXPECT_EQ(Lists(), 2) << "listed again after the TTL";
  ASSERT_NE(listing->Find("written"), nullptr);
  EXPECT_EQ(listing->Find("written")->etag, "etag-w");
  EXPECT_NE(listing->Find("made"), nullptr);
  EXPECT_EQ(listing->Find("gone"), nullptr);
  EXPECT_NE(listing->Find("kept"), nullptr);
  EXPECT_TRUE(MustList("dir/made")->exists()) << "listed before the store lists its marker";
  // Past the grace, the store's listing is taken as it is.
  clock_.Advance(options_.note_grace + kTtl);
  listing = MustList("dir");
  EXPECT_EQ(listing->Find("written"), nullptr);
  EXPECT_EQ(listing->Find("made"), nullptr);
  EXPECT_NE(listing->Find("gone"), nullptr);
  EXPECT_FALSE(MustList("dir/made")->exists());
}

TEST_F(MetadataCacheTest, AnotherWritersNewerObjectShowsOverWhatThisMountWrote) {
  MetadataCache& cache = Cache();
  cache.NoteEntry("dir", DirEntry{"f", false, 5, "etag-mine", std::time(nullptr) - 100});
  Put("dir/f", "theirs");
  auto listing = MustList("dir");
  ASSERT_NE(listing->Find("f"), nullptr);
  EXPECT_NE(listing->Find("f")->etag, "etag-mine");
  EXPECT_EQ(listing->Find("f")->size, 6u);
}

TEST(SplitParentTest, SplitsAtTheLastSlash) {
  EXPECT_EQ(SplitParent("a/b/c"), std::make_pair(std::string("a/b"), std::string("c")));
  EXPECT_EQ(SplitParent("a/b"), std::make_pair(std::string("a"), std::string("b")));
  EXPECT_EQ(SplitParent("c"), std::make_pair(std::string(""), std::string("c")));
}

}  // namespace
}  // namespace lakecache
