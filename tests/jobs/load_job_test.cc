// RunLoad, StatPath and FreePath over a file:// namespace and a real BlockStore (StoreSink): what a
// standalone mount does for `lakecache load/stat/free`. The store is wrapped to count calls and to
// fail on demand.
#include "jobs/load_job.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "cache/block_store.h"
#include "jobs/store_sink.h"
#include "support/test_servers.h"
#include "ufs/fault_injecting_store.h"
#include "ufs/synthetic_store.h"

namespace lakecache {
namespace {

constexpr uint64_t kBlock = 64 * 1024;

class LoadJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Write("top.txt", 10);
    Write("a/x.bin", 100 * 1024);    // 2 blocks
    Write("a/b/y.bin", 200 * 1024);  // 4 blocks
    Write("a/b/c/z.bin", 3);         // 1 block
    Write("a/empty", 0);             // no blocks
    Open(/*memory=*/8 << 20);
  }

  void Write(const std::string& rel, size_t size) {
    std::filesystem::path p = std::filesystem::path(dir_.path()) / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << std::string(size, static_cast<char>('a' + rel.size() % 26));
    sizes_[rel] = size;
  }

  void Open(uint64_t memory) {
    Config config;
    config.namespaces["lake"] = testing::LocalNamespace("lake", dir_.path(), kBlock);
    StoreOptions options;
    options.retries = false;
    auto table = NamespaceTable::Open(config, options, /*probe=*/false);
    ASSERT_TRUE(table.ok()) << table.status().ToString();
    table_ = std::move(*table);
    ns_ = table_->Find("lake");
    store_ = std::make_shared<FaultInjectingStore>(ns_->store);
    ns_->store = store_;
    ns_->meta = std::make_unique<MetadataCache>(store_, ns_->prefix, MetadataCacheOptions{});
    CacheConfig cache;
    cache.memory_capacity = memory;
    auto blocks = BlockStore::Open(cache);
    ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
    blocks_ = std::move(*blocks);
    pool_ = std::make_unique<ThreadPool>(4);
    sink_ = std::make_unique<StoreSink>(table_.get(), blocks_.get(), &index_, pool_.get());
  }

  LoadProgress Load(const std::string& path, bool recursive = true) {
    LoadOptions options;
    options.recursive = recursive;
    options.parallel_batches = 3;
    options.batch_blocks = 2;  // several batches even for this small tree
    auto got = RunLoad(*ns_, path, *sink_, options, [this](const LoadProgress& p) {
      ++progress_calls_;
      if (p.done) final_seen_ = true;
      return true;
    });
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    return got.ok() ? *got : LoadProgress{};
  }

  testing::TempDir dir_;
  std::map<std::string, uint64_t> sizes_;
  std::unique_ptr<NamespaceTable> table_;
  Namespace* ns_ = nullptr;
  std::shared_ptr<FaultInjectingStore> store_;
  std::unique_ptr<BlockStore> blocks_;
  ContentIndex index_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<StoreSink> sink_;
  int progress_calls_ = 0;
  bool final_seen_ = false;
};

// The store sent bytes of another version (it ignored If-Match): the load fails those blocks and
// caches none of them; the other files load.
TEST_F(LoadJobTest, ReplyOfAnotherVersionFailsTheFileAndCachesNothing) {
  store_->ReplyWithVersion("etag-of-a-newer-version", std::nullopt, FaultRule::kForever, "y.bin");
  LoadProgress p = Load("a");
  EXPECT_TRUE(p.done);
  EXPECT_EQ(p.failed.files, 1u);
  ASSERT_FALSE(p.failures.empty());
  EXPECT_NE(p.failures[0].error.find("changed"), std::string::npos) << p.failures[0].error;
  auto y = StatPath(*ns_, "a/b/y.bin", *sink_);
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  EXPECT_EQ(y->blocks_cached, 0u);
  auto x = StatPath(*ns_, "a/x.bin", *sink_);
  ASSERT_TRUE(x.ok()) << x.status().ToString();
  EXPECT_EQ(x->blocks_cached, x->blocks_total);
}

TEST_F(LoadJobTest, LoadsEveryBlockAndTheTreeListsWithTheStoreDown) {
  LoadProgress p = Load("a");
  EXPECT_TRUE(p.done && p.complete && final_seen_);
  EXPECT_EQ(p.total.files, 4u);
  EXPECT_EQ(p.total.bytes, 300u * 1024 + 3);
  EXPECT_EQ(p.loaded.files, 3u);
  EXPECT_EQ(p.loaded.bytes, p.total.bytes);
  EXPECT_EQ(p.already_cached.files, 1u);  // the empty file
  EXPECT_EQ(p.failed.files, 0u);
  EXPECT_EQ(p.files_done, 4u);
  EXPECT_EQ(p.dirs, 4u);  // the root above "a", then a, a/b, a/b/c
  for (const char* file : {"a/x.bin", "a/b/y.bin", "a/b/c/z.bin"}) {
    auto status = StatPath(*ns_, file, *sink_);
    ASSERT_TRUE(status.ok()) << status.status().ToString();
    EXPECT_EQ(status->blocks_cached, status->blocks_total) << file;
    EXPECT_EQ(status->cached_bytes, sizes_[file]) << file;
  }
  auto usage = index_.CachedBytes(*blocks_);
  ASSERT_EQ(usage.size(), 1u);
  EXPECT_EQ(usage[0].cached_bytes, p.total.bytes);
  EXPECT_EQ(usage[0].blocks, 7u);

  // Every listing the load read is pinned: nothing below asks the (now failing) store.
  store_->ResetCalls();
  store_->FailAlways(StoreOp::kAny, store_->ServerError(""));
  for (const char* dir : {"", "a", "a/b", "a/b/c"}) {
    EXPECT_TRUE(ns_->meta->List(dir).ok()) << dir;
  }
  EXPECT_TRUE(ns_->meta->Stat("a/b/y.bin").ok());
  EXPECT_EQ(store_->Calls(StoreOp::kAny), 0);
}

// `lakecache load` is what a user runs right after staging a dataset: it looks at the store, not at
// listings cached a moment before the upload (metadata_ttl is a minute here).
TEST_F(LoadJobTest, AFolderUploadedAfterItsParentWasListedLoadsAtOnce) {
  ASSERT_TRUE(ns_->meta->List("").ok());
  ASSERT_TRUE(ns_->meta->List("a").ok());
  Write("staged/new.bin", 70 * 1024);
  Write("a/late.bin", 5);
  EXPECT_EQ(ns_->meta->Stat("staged").status().code(), StatusCode::kNotFound);  // cached root
  LoadProgress tree = Load("staged");
  EXPECT_EQ(tree.total.files, 1u);
  EXPECT_EQ(tree.loaded.bytes, 70u * 1024);
  LoadProgress flat = Load("a", /*recursive=*/false);
  EXPECT_EQ(flat.total.files, 3u);  // x.bin, empty and late.bin
  // With the store down, a load of what was listed still walks the cached listings.
  store_->FailAlways(StoreOp::kList, store_->ServerError(""));
  LoadProgress again = Load("a/x.bin", /*recursive=*/false);
  EXPECT_EQ(again.total.files, 1u);
}

TEST_F(LoadJobTest, ASecondLoadFetchesNothing) {
  Load("a");
  store_->ResetCalls();
  LoadProgress p = Load("a");
  EXPECT_EQ(p.loaded.files, 0u);
  EXPECT_EQ(p.already_cached.files, 4u);
  EXPECT_EQ(p.already_cached.bytes, p.total.bytes);
  EXPECT_EQ(store_->Calls(StoreOp::kRead), 0);
}

TEST_F(LoadJobTest, AFileAndAFolderWithoutRecursion) {
  LoadProgress file = Load("a/b/y.bin", /*recursive=*/false);
  EXPECT_EQ(file.total.files, 1u);
  EXPECT_EQ(file.loaded.bytes, 200u * 1024);
  LoadProgress folder = Load("a", /*recursive=*/false);
  EXPECT_EQ(folder.total.files, 2u);  // x.bin and empty; not the subfolders' files
}

TEST_F(LoadJobTest, AMissingPathIsNotFound) {
  LoadOptions options;
  auto got = RunLoad(*ns_, "a/nope", *sink_, options, [](const LoadProgress&) { return true; });
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kNotFound);
  EXPECT_NE(got.status().message().find("a/nope"), std::string::npos);
}

TEST_F(LoadJobTest, FailedFetchesAreReportedPerFileWithTheReason) {
  store_->FailAlways(StoreOp::kRead, store_->ServerError("a/b/y.bin"), "y.bin");
  LoadProgress p = Load("a");
  EXPECT_EQ(p.failed.files, 1u);
  EXPECT_EQ(p.failed.bytes, 200u * 1024);
  EXPECT_EQ(p.loaded.files, 2u);
  ASSERT_EQ(p.failures.size(), 1u);
  EXPECT_EQ(p.failures[0].path, "a/b/y.bin");
  EXPECT_NE(p.failures[0].error.find("503"), std::string::npos) << p.failures[0].error;
}

TEST_F(LoadJobTest, ACacheSmallerThanTheDataIsNotReportedAsLoaded) {
  Open(/*memory=*/2 * kBlock);  // 7 blocks do not fit in 2
  LoadProgress p = Load("a");
  EXPECT_GT(p.failed.files, 0u);
  uint64_t cached = 0;
  for (const auto& u : index_.CachedBytes(*blocks_)) cached += u.cached_bytes;
  // What the report calls loaded is exactly what the cache holds.
  EXPECT_EQ(p.loaded.bytes + p.already_cached.bytes, cached);
  EXPECT_EQ(p.failed.bytes, p.total.bytes - cached);
}

TEST_F(LoadJobTest, CancellingStopsTheJobAndAResumeCompletes) {
  LoadOptions options;
  options.parallel_batches = 1;
  options.batch_blocks = 1;
  options.progress_interval = std::chrono::milliseconds(20);
  FaultRule slow;
  slow.op = StoreOp::kRead;
  slow.delay = std::chrono::milliseconds(100);
  store_->AddRule(slow);
  // Cancelled as soon as anything is loaded: 7 blocks at 100 ms each, at most 2 in flight.
  auto got = RunLoad(*ns_, "a", *sink_, options,
                     [](const LoadProgress& p) { return p.done || p.loaded.bytes == 0; });
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got->complete);
  EXPECT_LT(got->loaded.files + got->already_cached.files, 4u);
  store_->ClearRules();
  LoadProgress resumed = Load("a");
  EXPECT_TRUE(resumed.complete);
  EXPECT_EQ(resumed.failed.files, 0u);
  EXPECT_EQ(resumed.loaded.bytes + resumed.already_cached.bytes, resumed.total.bytes);
}

TEST_F(LoadJobTest, FreeEvictsAndUnpins) {
  Load("a");
  auto freed = FreePath(*ns_, "a/b", /*recursive=*/true, *sink_);
  ASSERT_TRUE(freed.ok()) << freed.status().ToString();
  EXPECT_EQ(freed->files, 2u);
  EXPECT_EQ(freed->blocks_freed, 5u);
  // a/b is no longer pinned: listing it asks the store again.
  store_->ResetCalls();
  EXPECT_TRUE(ns_->meta->List("a/b").ok());
  EXPECT_EQ(store_->Calls(StoreOp::kList), 1);
  auto y = StatPath(*ns_, "a/b/y.bin", *sink_);
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(y->blocks_cached, 0u);
  auto x = StatPath(*ns_, "a/x.bin", *sink_);
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(x->blocks_cached, 2u);
}

// Counts the objects its listings return.
class ListCountingStore : public ObjectStoreWrapper {
 public:
  using ObjectStoreWrapper::ObjectStoreWrapper;
  Result<ListPage> List(const ListRequest& request, const IoOptions& options) override {
    auto page = ObjectStoreWrapper::List(request, options);
    if (page.ok()) listed += page->objects.size();
    return page;
  }
  std::atomic<uint64_t> listed{0};
};

// Says every block loaded, and records how many files were listed and not yet given to it.
class CountingSink : public BlockSink {
 public:
  explicit CountingSink(const ListCountingStore& store) : store_(store) {}

  std::vector<BlockOutcome> Load(const std::string&, std::span<const BlockSpec> blocks,
                                 bool check_only) override {
    if (!check_only) {
      uint64_t listed = store_.listed.load();
      uint64_t seen = seen_ += blocks.size();  // one block a file here
      uint64_t held = listed > seen ? listed - seen : 0;
      for (uint64_t m = max_held_.load(); held > m && !max_held_.compare_exchange_weak(m, held);) {
      }
      if (first_listed_ == 0) first_listed_ = listed;
    }
    return std::vector<BlockOutcome>(
        blocks.size(), {check_only ? BlockState::kAlreadyCached : BlockState::kLoaded, ""});
  }
  Result<uint64_t> Free(const std::string&, std::span<const ObjectSpec>) override { return 0; }

  const ListCountingStore& store_;
  std::atomic<uint64_t> seen_{0};
  std::atomic<uint64_t> max_held_{0};
  std::atomic<uint64_t> first_listed_{0};  // objects listed when the first blocks came
};

// A load of 200,000 small files is a stream: the first blocks go out while the tree is still being
// listed, and what was listed and not loaded yet stays within the queue and the batches in flight
// (a few thousand files), whatever the tree. The report counts every file and byte.
TEST(LoadStreamTest, ALoadOf200kFilesHoldsAFewThousandAtOnce) {
  auto spec = SyntheticSpec::Parse("200k,fanout=1000,size=1KiB-4KiB");
  ASSERT_TRUE(spec.ok());
  auto synthetic = std::make_shared<SyntheticStore>(*spec, "syn");
  auto store = std::make_shared<ListCountingStore>(synthetic);
  Namespace ns;
  ns.name = "syn";
  ns.config.block_size = 1 << 20;
  ns.store = store;
  ns.meta = std::make_unique<MetadataCache>(store, "", MetadataCacheOptions{});
  CountingSink sink(*store);
  LoadOptions options;
  options.recursive = true;
  int calls = 0;
  auto got = RunLoad(ns, "", sink, options, [&](const LoadProgress&) { return ++calls > 0; });
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  uint64_t bytes = 0;
  for (uint64_t i = 0; i < synthetic->objects(); ++i) bytes += synthetic->InfoOf(i).size;
  EXPECT_TRUE(got->complete && got->listed);
  EXPECT_EQ(got->total.files, 200'000u);
  EXPECT_EQ(got->total.bytes, bytes);
  EXPECT_EQ(got->loaded.files, 200'000u);
  EXPECT_EQ(got->loaded.bytes, bytes);
  EXPECT_EQ(got->failed.files + got->already_cached.files, 0u);
  EXPECT_EQ(got->files_done, 200'000u);
  EXPECT_EQ(got->dirs, 201u);
  EXPECT_EQ(sink.seen_.load(), 200'000u);
  EXPECT_LT(sink.first_listed_.load(), 200'000u);
  // The queue (4,096), a page and a folder in the walk (2,000), the batches in flight and one
  // being filled (33 x 32).
  EXPECT_LE(sink.max_held_.load(), options.queue_files + 2'000 + 33 * options.batch_blocks);
}

}  // namespace
}  // namespace lakecache
