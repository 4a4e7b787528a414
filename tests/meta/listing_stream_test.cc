// A folder's listing as its pages come: ListingStream (entries numbered across pages, readers
// waiting for what has not come, the end and a failure), and MetadataCache::List handing a
// listing of more than one page to its reader after the first page while it lists the rest,
// over a synthetic:// folder whose second page the test holds back.
#include "meta/listing_stream.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "meta/metadata_cache.h"
#include "ufs/synthetic_store.h"

namespace lakecache {
namespace {

DirListing PageOf(const std::vector<std::string>& names) {
  std::vector<DirEntry> entries;
  for (const std::string& name : names) entries.push_back(DirEntry{name, false, 1, "e", 0});
  return DirListing::FromEntries(entries, true);
}

TEST(ListingStreamTest, EntriesAreNumberedAcrossPagesAndReadersWaitForWhatHasNotCome) {
  ListingStream stream;
  stream.Add(PageOf({"a", "b"}));
  EXPECT_EQ(stream.size(), 2u);
  auto waiting = std::async(std::launch::async, [&] { return stream.Wait(3); });
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  stream.Add(PageOf({"c", "d", "e"}));
  std::optional<ListingStream::Entry> d = waiting.get();
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->page->name_at(d->index), "d");
  EXPECT_EQ(stream.Wait(1)->page->name_at(stream.Wait(1)->index), "b");
  stream.Finish(Status::Ok());
  EXPECT_FALSE(stream.Wait(5).has_value());
  EXPECT_TRUE(stream.status().ok());
}

TEST(ListingStreamTest, AFailedListingEndsItsReadersWithTheError) {
  ListingStream stream;
  stream.Add(PageOf({"a"}));
  auto waiting = std::async(std::launch::async, [&] { return stream.Wait(1); });
  stream.Finish(Status::Unavailable("the store went away"));
  EXPECT_FALSE(waiting.get().has_value());
  EXPECT_EQ(stream.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(stream.Wait(0).has_value()) << "what came stays readable";
}

// Holds back every List call that continues a listing (a page after the first) until Open().
class GatedStore : public ObjectStoreWrapper {
 public:
  using ObjectStoreWrapper::ObjectStoreWrapper;
  Result<ListPage> List(const ListRequest& request, const IoOptions& options) override {
    if (!request.continuation_token.empty()) {
      MutexLock lock(&mu_);
      while (!open_) opened_.Wait(&mu_);
    }
    return ObjectStoreWrapper::List(request, options);
  }
  void Open() {
    MutexLock lock(&mu_);
    open_ = true;
    opened_.SignalAll();
  }

 private:
  Mutex mu_;
  CondVar opened_;
  bool open_ GUARDED_BY(mu_) = false;
};

std::shared_ptr<ObjectStore> Synthetic(const std::string& spec) {
  return std::make_shared<SyntheticStore>(*SyntheticSpec::Parse(spec), spec);
}

TEST(MetadataCacheStreamTest, AListingOfManyPagesIsHandedOverAfterItsFirstPage) {
  auto store = std::make_shared<GatedStore>(Synthetic("2500,fanout=2500"));
  MetadataCache cache(store, "", MetadataCacheOptions{});
  std::promise<std::shared_ptr<const ListingStream>> handed;
  auto listing = std::async(std::launch::async, [&] {
    return cache.List("", [&](std::shared_ptr<const ListingStream> s) { handed.set_value(s); });
  });
  // The second page is held back: the first was handed over all the same.
  std::shared_ptr<const ListingStream> stream = handed.get_future().get();
  EXPECT_EQ(stream->size(), 1000u);
  EXPECT_EQ(listing.wait_for(std::chrono::milliseconds(20)), std::future_status::timeout);
  store->Open();
  auto whole = listing.get();
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  ASSERT_EQ((*whole)->size(), 2500u);
  // The stream has every entry of the listing, once.
  std::set<std::string> names;
  for (size_t i = 0;; ++i) {
    std::optional<ListingStream::Entry> e = stream->Wait(i);
    if (!e) break;
    names.insert(std::string(e->page->name_at(e->index)));
  }
  EXPECT_TRUE(stream->status().ok());
  ASSERT_EQ(names.size(), 2500u);
  for (size_t i = 0; i < (*whole)->size(); ++i) {
    EXPECT_TRUE(names.contains(std::string((*whole)->name_at(i))));
  }
  // Listed now: the next List answers from the cache and hands nothing over.
  bool again = false;
  ASSERT_TRUE(cache.List("", [&](auto) { again = true; }).ok());
  EXPECT_FALSE(again);
}

TEST(MetadataCacheStreamTest, AListingOfOnePageIsNotHandedOver) {
  MetadataCache cache(Synthetic("1000,fanout=1000"), "", MetadataCacheOptions{});
  bool handed = false;
  auto listed = cache.List("", [&](auto) { handed = true; });
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ((*listed)->size(), 1000u);
  EXPECT_FALSE(handed);
}

TEST(MetadataCacheStreamTest, AFolderThisMountChangedIsOnlyListedWhole) {
  MetadataCache cache(Synthetic("2500,fanout=2500"), "", MetadataCacheOptions{});
  cache.NoteEntry("", DirEntry{"new.bin", false, 3, "etag", 0});
  bool handed = false;
  auto listed = cache.List("", [&](auto) { handed = true; });
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ((*listed)->size(), 2501u) << "the entry written here shows";
  EXPECT_FALSE(handed);
}

}  // namespace
}  // namespace lakecache
