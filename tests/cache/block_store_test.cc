#include "cache/block_store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <latch>
#include <map>
#include <thread>
#include <vector>

#include "cache/block_file.h"
#include "cache/content_index.h"
#include "cache/memory_tier.h"
#include "common/thread_pool.h"
#include "support/wait_for.h"

namespace lakecache {
namespace {

constexpr uint64_t kBlockSize = 256 * 1024;

BlockRequest RequestFor(uint64_t index, uint64_t length = kBlockSize) {
  BlockRequest r;
  r.key = BlockKey{MakeContentId("ns", "train/shard-0001", "etag-1", kBlockSize), index};
  r.object_key = "train/shard-0001";
  r.etag = "etag-1";
  r.offset = index * kBlockSize;
  r.length = length;
  return r;
}

// The bytes the fake object store holds: byte i of the object is (i * 7 + i / 4096) mod 256.
char ObjectByte(uint64_t i) { return static_cast<char>(i * 7 + i / 4096); }

BlockRef ObjectBlock(const BlockRequest& r) {
  std::shared_ptr<Block> b = Block::Allocate(r.length);
  for (uint64_t i = 0; i < r.length; ++i) b->mutable_data()[i] = ObjectByte(r.offset + i);
  return b;
}

// A BlockSource over the fake object that counts its calls; `delay` slows each call down.
class CountingSource {
 public:
  BlockSource Source() {
    return [this](const BlockRequest& r) -> Result<BlockRef> {
      calls.fetch_add(1);
      if (before_answer) before_answer();
      if (!error.ok()) return error;
      return ObjectBlock(r);
    };
  }
  std::atomic<int> calls{0};
  Status error;
  std::function<void()> before_answer;
};

// A tier that holds everything it is given (unless told it is full) and records the calls made.
class RecordingTier : public CacheTier {
 public:
  const std::string& name() const override { return name_; }
  Result<BlockRef> Get(const BlockKey& key) override {
    std::lock_guard lock(mu_);
    ++gets;
    auto it = blocks_.find(key.index);
    if (it == blocks_.end()) return Status::NotFound("fake tier: miss");
    return it->second;
  }
  Result<size_t> Read(const BlockKey& key, uint64_t offset, std::span<char> dst,
                      bool count_access) override {
    (count_access ? counted_reads : uncounted_reads).fetch_add(1);
    LC_ASSIGN_OR_RETURN(BlockRef block, Get(key));
    size_t n = offset >= block->size() ? 0 : std::min<uint64_t>(dst.size(), block->size() - offset);
    std::memcpy(dst.data(), block->data() + offset, n);
    return n;
  }
  bool Insert(const BlockRequest& request, const BlockRef& block) override {
    std::lock_guard lock(mu_);
    ++inserts;
    if (full) return false;  // as a disk tier does on ENOSPC
    blocks_[request.key.index] = block;
    return true;
  }
  void Touch(const BlockKey&) override { touches.fetch_add(1); }
  bool Contains(const BlockKey& key) const override {
    std::lock_guard lock(mu_);
    return blocks_.contains(key.index);
  }
  void Erase(const BlockKey& key) override {
    std::lock_guard lock(mu_);
    blocks_.erase(key.index);
  }
  TierStats Stats() const override { return TierStats{.tier = name_}; }

  bool full = false;
  int gets = 0, inserts = 0;  // GUARDED_BY(mu_)
  std::atomic<int> touches{0};
  std::atomic<int> counted_reads{0}, uncounted_reads{0};

 private:
  const std::string name_ = "recording";
  mutable std::mutex mu_;
  std::map<uint64_t, BlockRef> blocks_;  // GUARDED_BY(mu_)
};

std::unique_ptr<MemoryTier> Memory(uint64_t capacity = 64 * kBlockSize) {
  auto tier = MemoryTier::Create(capacity, "lru");
  EXPECT_TRUE(tier.ok()) << tier.status().ToString();
  return std::move(*tier);
}

// A store of a memory tier over a RecordingTier, which the test keeps a pointer to.
std::unique_ptr<BlockStore> TwoTierStore(RecordingTier** lower,
                                         uint64_t memory_capacity = 64 * kBlockSize) {
  std::vector<std::unique_ptr<CacheTier>> tiers;
  tiers.push_back(Memory(memory_capacity));
  auto recording = std::make_unique<RecordingTier>();
  *lower = recording.get();
  tiers.push_back(std::move(recording));
  return std::make_unique<BlockStore>(std::move(tiers));
}

void ExpectObjectBytes(const Block& block, const BlockRequest& r) {
  ASSERT_EQ(block.size(), r.length);
  for (uint64_t i = 0; i < r.length; i += 997) {
    ASSERT_EQ(block.data()[i], ObjectByte(r.offset + i)) << "at " << i;
  }
}

TEST(BlockStoreTest, MissFetchesOnceAndFillsEveryTier) {
  RecordingTier* lower;
  auto store = TwoTierStore(&lower);
  CountingSource source;
  Result<BlockRef> block = store->Get(RequestFor(3), source.Source());
  ASSERT_TRUE(block.ok()) << block.status().ToString();
  ExpectObjectBytes(**block, RequestFor(3));
  EXPECT_EQ(source.calls, 1);
  EXPECT_TRUE(lower->Contains(RequestFor(3).key));
  EXPECT_TRUE(store->Contains(RequestFor(3).key));
  ASSERT_TRUE(store->Get(RequestFor(3), source.Source()).ok());
  EXPECT_EQ(source.calls, 1);
}

TEST(BlockStoreTest, StatsCountHitsMissesAndFetches) {
  std::vector<std::unique_ptr<CacheTier>> tiers;
  tiers.push_back(Memory());
  BlockStore store(std::move(tiers));
  CountingSource source;
  for (uint64_t i : {1, 2, 1, 1, 2}) ASSERT_TRUE(store.Get(RequestFor(i), source.Source()).ok());
  char buf[100];
  ASSERT_TRUE(store.Read(RequestFor(1), 0, buf, source.Source()).ok());
  BlockStoreStats stats = store.Stats();
  ASSERT_EQ(stats.tiers.size(), 1u);
  EXPECT_EQ(stats.tiers[0].tier, "memory");
  EXPECT_EQ(stats.tiers[0].hits, 4u);
  EXPECT_EQ(stats.tiers[0].misses, 2u);
  EXPECT_EQ(stats.tiers[0].inserts, 2u);
  EXPECT_EQ(stats.tiers[0].blocks, 2u);
  EXPECT_EQ(stats.tiers[0].used_bytes, 2 * kBlockSize);
  EXPECT_EQ(stats.fetches, 2u);
  EXPECT_EQ(stats.fetch_errors, 0u);
  EXPECT_EQ(stats.fetched_bytes, 2 * kBlockSize);
  EXPECT_EQ(stats.singleflight_waits, 0u);
  uint64_t histogram_total = 0;
  for (uint64_t n : stats.fetch_latency_us_log2) histogram_total += n;
  EXPECT_EQ(histogram_total, 2u);
}

// Runs `threads` concurrent Gets of one block. The source holds its answer until every other reader
// has joined the flight, so the test does not depend on thread scheduling.
std::vector<Result<BlockRef>> ConcurrentGets(BlockStore& store, CountingSource& source,
                                             int threads) {
  source.before_answer = [&store, threads] {
    EXPECT_TRUE(testing::WaitFor(
        [&] { return store.Stats().singleflight_waits >= static_cast<uint64_t>(threads - 1); }));
  };
  std::vector<std::optional<Result<BlockRef>>> results(threads);
  std::latch start(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      start.arrive_and_wait();
      results[t].emplace(store.Get(RequestFor(5), source.Source()));
    });
  }
  for (auto& w : workers) w.join();
  source.before_answer = nullptr;
  std::vector<Result<BlockRef>> out;
  for (auto& r : results) out.push_back(std::move(*r));
  return out;
}

TEST(BlockStoreSingleFlightTest, SixteenConcurrentMissesMakeOneSourceCall) {
  RecordingTier* lower;
  auto store = TwoTierStore(&lower);
  CountingSource source;
  std::vector<Result<BlockRef>> results = ConcurrentGets(*store, source, 16);
  EXPECT_EQ(source.calls, 1);
  ASSERT_TRUE(results[0].ok()) << results[0].status().ToString();
  ExpectObjectBytes(**results[0], RequestFor(5));
  for (const Result<BlockRef>& r : results) {
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->get(), results[0]->get());  // the very same bytes
  }
  BlockStoreStats stats = store->Stats();
  EXPECT_EQ(stats.fetches, 1u);
  EXPECT_EQ(stats.singleflight_waits, 15u);
  EXPECT_EQ(lower->inserts, 1);
}

TEST(BlockStoreSingleFlightTest, SourceErrorReachesAllWaitersAndIsNotCached) {
  RecordingTier* lower;
  auto store = TwoTierStore(&lower);
  CountingSource source;
  source.error = Status::Unavailable("s3://bucket/train/shard-0001: SlowDown (HTTP 503)");
  for (const Result<BlockRef>& r : ConcurrentGets(*store, source, 16)) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
    EXPECT_EQ(r.status().message(), source.error.message());
  }
  EXPECT_EQ(source.calls, 1);
  EXPECT_FALSE(store->Contains(RequestFor(5).key));
  source.error = Status::Ok();
  Result<BlockRef> retry = store->Get(RequestFor(5), source.Source());
  ASSERT_TRUE(retry.ok()) << retry.status().ToString();
  EXPECT_EQ(source.calls, 2);
  EXPECT_EQ(store->Stats().fetch_errors, 1u);
}

TEST(BlockStoreTest, WrongLengthFromSourceIsAnErrorNamingTheObject) {
  std::vector<std::unique_ptr<CacheTier>> tiers;
  tiers.push_back(Memory());
  BlockStore store(std::move(tiers));
  BlockSource short_source = [](const BlockRequest& r) -> Result<BlockRef> {
    BlockRequest shorter = r;
    shorter.length = r.length - 1;
    return ObjectBlock(shorter);
  };
  Result<BlockRef> block = store.Get(RequestFor(2), short_source);
  ASSERT_FALSE(block.ok());
  EXPECT_EQ(block.status().code(), StatusCode::kInternal);
  EXPECT_NE(block.status().message().find("train/shard-0001"), std::string::npos)
      << block.status().message();
  EXPECT_FALSE(store.Contains(RequestFor(2).key));
  BlockSource null_source = [](const BlockRequest&) -> Result<BlockRef> { return BlockRef(); };
  EXPECT_EQ(store.Get(RequestFor(2), null_source).status().code(), StatusCode::kInternal);
  EXPECT_EQ(store.Stats().fetch_errors, 2u);
}

TEST(BlockStoreTest, ThrowingSourceIsAnInternalError) {
  std::vector<std::unique_ptr<CacheTier>> tiers;
  tiers.push_back(Memory());
  BlockStore store(std::move(tiers));
  BlockSource throwing = [](const BlockRequest&) -> Result<BlockRef> { throw std::bad_alloc(); };
  EXPECT_EQ(store.Get(RequestFor(1), throwing).status().code(), StatusCode::kInternal);
}

TEST(BlockStoreTest, LowerTierHitIsPromotedOnGet) {
  RecordingTier* lower;
  auto store = TwoTierStore(&lower);
  ASSERT_TRUE(lower->Insert(RequestFor(4), ObjectBlock(RequestFor(4))));
  CountingSource source;
  Result<BlockRef> block = store->Get(RequestFor(4), source.Source());
  ASSERT_TRUE(block.ok()) << block.status().ToString();
  ExpectObjectBytes(**block, RequestFor(4));
  EXPECT_EQ(source.calls, 0);
  BlockStoreStats stats = store->Stats();
  EXPECT_EQ(stats.tiers[0].misses, 1u);
  EXPECT_EQ(stats.tiers[0].inserts, 1u);  // promoted
  // The next Get is a memory hit that never asks the lower tier.
  int lower_gets = lower->gets;
  ASSERT_TRUE(store->Get(RequestFor(4), source.Source()).ok());
  EXPECT_EQ(lower->gets, lower_gets);
  EXPECT_EQ(store->Stats().tiers[0].hits, 1u);
}

// A large block is read from a lower tier by range: reading it whole to serve one range could
// cost a 4 MiB disk read for a 4 KiB request.
TEST(BlockStoreTest, RangeReadOfALargeLowerTierBlockDoesNotPromote) {
  RecordingTier* lower;
  auto store = TwoTierStore(&lower, 64 << 20);
  BlockRequest large = RequestFor(4, kSmallBlockMax + 1);
  ASSERT_TRUE(lower->Insert(large, ObjectBlock(large)));
  CountingSource source;
  std::vector<char> buf(1000);
  Result<size_t> n = store->Read(large, 500, buf, source.Source());
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 1000u);
  EXPECT_EQ(buf[0], ObjectByte(large.offset + 500));
  EXPECT_EQ(source.calls, 0);
  EXPECT_EQ(lower->counted_reads, 1);
  EXPECT_EQ(store->Stats().tiers[0].inserts, 0u);
}

// A small block (a small file's one block) is read from a lower tier whole, once, and kept in
// memory: the file's later reads, and later passes, never go to the lower tier again.
TEST(BlockStoreTest, SmallLowerTierBlockIsReadWholeAndPromoted) {
  RecordingTier* lower;
  auto store = TwoTierStore(&lower);
  ASSERT_TRUE(lower->Insert(RequestFor(4), ObjectBlock(RequestFor(4))));
  CountingSource source;
  std::vector<char> buf(1000);
  for (uint64_t offset : {500u, 100000u}) {
    Result<BlockStore::PinnedRead> read =
        store->ReadPinned(RequestFor(4), offset, buf, source.Source());
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    ASSERT_NE(read->block, nullptr);
    ExpectObjectBytes(*read->block, RequestFor(4));
  }
  EXPECT_EQ(source.calls, 0);
  EXPECT_EQ(lower->gets, 1);  // the first read; the second is a memory hit
  EXPECT_EQ(lower->counted_reads + lower->uncounted_reads, 0);
  BlockStoreStats stats = store->Stats();
  EXPECT_EQ(stats.tiers[0].inserts, 1u);
  EXPECT_EQ(stats.tiers[0].hits, 1u);
}

TEST(BlockStoreTest, UpperTierHitTouchesLowerTiers) {
  RecordingTier* lower;
  auto store = TwoTierStore(&lower);
  CountingSource source;
  ASSERT_TRUE(store->Get(RequestFor(6), source.Source()).ok());  // now in both tiers
  EXPECT_EQ(lower->touches, 0);
  ASSERT_TRUE(store->Get(RequestFor(6), source.Source()).ok());
  char buf[10];
  ASSERT_TRUE(store->Read(RequestFor(6), 0, buf, source.Source()).ok());
  EXPECT_EQ(lower->touches, 2);
  EXPECT_EQ(source.calls, 1);
}

// A stream's further small reads of one block count once: eviction policies see one access per
// block per reader, not one per 128 KiB read.
TEST(BlockStoreTest, RepeatAccessIsNeitherCountedNorTouchedBelow) {
  RecordingTier* lower;
  auto store = TwoTierStore(&lower, /*memory_capacity=*/0);  // memory holds nothing: reads go below
  CountingSource source;
  const BlockRequest large = RequestFor(3, kSmallBlockMax + 1);  // read by range
  ASSERT_TRUE(store->Get(large, source.Source()).ok());
  char buf[10];
  BlockRequest first = large;
  ASSERT_TRUE(store->Read(first, 0, buf, source.Source()).ok());
  BlockRequest repeat = large;
  repeat.repeat_access = true;
  ASSERT_TRUE(store->Read(repeat, 10, buf, source.Source()).ok());
  ASSERT_TRUE(store->Read(repeat, 20, buf, source.Source()).ok());
  EXPECT_EQ(lower->counted_reads, 1);
  EXPECT_EQ(lower->uncounted_reads, 2);
  EXPECT_EQ(source.calls, 1);
}

TEST(BlockStoreTest, ReadFetchesAndCopiesTheClampedRange) {
  RecordingTier* lower;
  auto store = TwoTierStore(&lower);
  CountingSource source;
  BlockRequest last = RequestFor(7, 1000);  // an object's short last block
  std::vector<char> buf(600);
  Result<size_t> n = store->Read(last, 700, buf, source.Source());
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 300u);
  EXPECT_EQ(buf[0], ObjectByte(last.offset + 700));
  EXPECT_EQ(buf[299], ObjectByte(last.offset + 999));
  n = store->Read(last, 1000, buf, source.Source());
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
  EXPECT_EQ(source.calls, 1);
}

TEST(BlockStoreTest, FullLowerTierStillYieldsTheBytes) {
  RecordingTier* lower;
  // A memory tier too small to keep the block, over a disk-like tier that is full (ENOSPC).
  auto store = TwoTierStore(&lower, kBlockSize / 2);
  lower->full = true;
  CountingSource source;
  Result<BlockRef> block = store->Get(RequestFor(8), source.Source());
  ASSERT_TRUE(block.ok()) << block.status().ToString();
  ExpectObjectBytes(**block, RequestFor(8));
  std::vector<char> buf(kBlockSize);
  Result<size_t> n = store->Read(RequestFor(8), 0, buf, source.Source());
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, kBlockSize);
  EXPECT_EQ(buf[kBlockSize - 1], ObjectByte(RequestFor(8).offset + kBlockSize - 1));
  EXPECT_EQ(lower->inserts, 2);
  EXPECT_FALSE(store->Contains(RequestFor(8).key));
  EXPECT_EQ(store->Stats().tiers[0].rejected, 2u);
}

TEST(BlockStoreTest, EraseDropsFromEveryTier) {
  RecordingTier* lower;
  auto store = TwoTierStore(&lower);
  CountingSource source;
  ASSERT_TRUE(store->Get(RequestFor(1), source.Source()).ok());
  store->Erase(RequestFor(1).key);
  EXPECT_FALSE(store->Contains(RequestFor(1).key));
  EXPECT_FALSE(lower->Contains(RequestFor(1).key));
  ASSERT_TRUE(store->Get(RequestFor(1), source.Source()).ok());
  EXPECT_EQ(source.calls, 2);
}

TEST(BlockStoreOpenTest, BuildsAMemoryTierFromConfig) {
  CacheConfig config;
  config.memory_capacity = 8 * kBlockSize;
  Result<std::unique_ptr<BlockStore>> store = BlockStore::Open(config);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  BlockStoreStats stats = (*store)->Stats();
  ASSERT_EQ(stats.tiers.size(), 1u);
  EXPECT_EQ(stats.tiers[0].tier, "memory");
  EXPECT_EQ(stats.tiers[0].capacity_bytes, 8 * kBlockSize);
}

TEST(BlockStoreOpenTest, UnknownPolicyNamesTheKey) {
  CacheConfig config;
  config.policy = "mru";
  Result<std::unique_ptr<BlockStore>> store = BlockStore::Open(config);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(store.status().message().find("cache.policy"), std::string::npos)
      << store.status().message();
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "lc_store_test.XXXXXX").string();
    path_ = mkdtemp(tmpl.data()) != nullptr ? tmpl : "";
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Memory for `memory_blocks` blocks over one disk directory with room for many, both LRU.
CacheConfig DiskConfig(const std::string& dir, double memory_blocks) {
  CacheConfig config;
  config.memory_capacity = static_cast<uint64_t>(memory_blocks * kBlockSize);
  config.policy = "lru";
  config.disks = {DiskCacheConfig{.path = dir, .capacity = 64 * kBlockSize, .min_free_ratio = 0}};
  return config;
}

TEST(BlockStoreDiskTest, BlockEvictedFromMemoryIsServedFromDisk) {
  TempDir dir;
  Result<std::unique_ptr<BlockStore>> store = BlockStore::Open(DiskConfig(dir.path(), 1.5));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  CountingSource source;
  ASSERT_TRUE((*store)->Get(RequestFor(0), source.Source()).ok());
  ASSERT_TRUE((*store)->Get(RequestFor(1), source.Source()).ok());  // evicts block 0 from memory
  Result<BlockRef> again = (*store)->Get(RequestFor(0), source.Source());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ExpectObjectBytes(**again, RequestFor(0));
  std::vector<char> buf(1000);
  Result<size_t> n = (*store)->Read(RequestFor(1), 100, buf, source.Source());  // now disk only
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(buf[0], ObjectByte(RequestFor(1).offset + 100));
  EXPECT_EQ(source.calls, 2);
  BlockStoreStats stats = (*store)->Stats();
  ASSERT_EQ(stats.tiers.size(), 2u);
  EXPECT_EQ(stats.tiers[1].tier, "disk:" + dir.path());
  EXPECT_EQ(stats.tiers[1].hits, 2u);
  // 0 for 1, 1 for the promoted 0, then 0 for 1, which a read of the small block promoted too.
  EXPECT_EQ(stats.tiers[0].evictions, 3u);
}

TEST(BlockStoreDiskTest, DiskBlocksSurviveReopening) {
  TempDir dir;
  CountingSource source;
  {
    auto store = BlockStore::Open(DiskConfig(dir.path(), 4));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->Get(RequestFor(3), source.Source()).ok());
  }
  auto reopened = BlockStore::Open(DiskConfig(dir.path(), 4));
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  Result<BlockRef> block = (*reopened)->Get(RequestFor(3), source.Source());
  ASSERT_TRUE(block.ok()) << block.status().ToString();
  ExpectObjectBytes(**block, RequestFor(3));
  EXPECT_EQ(source.calls, 1);
}

// Found by fuzz/key_path_fuzz: the sizes a version is noted with come from a worker's clients, and
// CachedBytes walked every block they claimed (2^64 of 1-byte blocks: a Stats call that never
// returned). It now looks up the blocks the store holds, in memory and on disk, each once.
TEST(BlockStoreDiskTest, ContentIndexCountsHeldBlocksWhateverSizesItWasTold) {
  TempDir dir;
  auto store = BlockStore::Open(DiskConfig(dir.path(), 1.5));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  CountingSource source;
  for (uint64_t index : {0, 1}) {  // block 0 goes to disk only, block 1 stays in memory too
    ASSERT_TRUE((*store)->Get(RequestFor(index), source.Source()).ok());
  }
  (*store)->Flush();
  ContentIndex index;
  ContentId held = RequestFor(0).key.content;
  index.Note("train", held, 2 * kBlockSize + 100, kBlockSize);
  index.Note("claims", MakeContentId("ns", "k", "e", 1), UINT64_MAX, 1);
  std::vector<ContentIndex::Usage> usage = index.CachedBytes(**store);
  ASSERT_EQ(usage.size(), 2u);
  EXPECT_EQ(usage[0].ns, "claims");
  EXPECT_EQ(usage[0].blocks, 0u);
  EXPECT_EQ(usage[1].ns, "train");
  EXPECT_EQ(usage[1].blocks, 2u);
  EXPECT_EQ(usage[1].cached_bytes, 2 * kBlockSize);
}

// Read-ahead over a block that only the disk holds loads it into staging off the reader's thread;
// the reader then takes it from there (no disk read of its own, no source call).
TEST(BlockStoreDiskTest, ReadAheadLoadsDiskOnlyBlocksIntoStaging) {
  TempDir dir;
  CountingSource source;
  {
    auto store = BlockStore::Open(DiskConfig(dir.path(), 4));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->Get(RequestFor(6), source.Source()).ok());
  }  // flushed: block 6 is on disk, and memory starts empty below
  auto store = BlockStore::Open(DiskConfig(dir.path(), 4));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ThreadPool pool(1);
  // kLoading, not kStarted: the caller must not add it to a run of blocks fetched from the store.
  EXPECT_EQ((*store)->Prefetch(RequestFor(6), source.Source(), pool),
            BlockStore::PrefetchResult::kLoading);
  pool.Submit([] {}).wait();
  uint64_t disk_hits = (*store)->Stats().tiers[1].hits;
  EXPECT_EQ(disk_hits, 1u) << "the prefetch read the disk once";
  char buf[64];
  Result<BlockStore::PinnedRead> read =
      (*store)->ReadPinned(RequestFor(6), 100, buf, source.Source());
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_NE(read->block, nullptr) << "served from staging, not copied from disk";
  ExpectObjectBytes(*read->block, RequestFor(6));
  BlockStoreStats stats = (*store)->Stats();
  EXPECT_EQ(stats.tiers[1].hits, disk_hits) << "no second disk read";
  EXPECT_EQ(stats.prefetches, 0u) << "nothing was fetched from the source";
  EXPECT_EQ(stats.prefetch_used, 1u);
  EXPECT_EQ(source.calls, 1);  // the first store's fetch only
  EXPECT_TRUE((*store)->Contains(RequestFor(6).key));
  // Now in memory: a second prefetch has nothing to do.
  EXPECT_EQ((*store)->Prefetch(RequestFor(6), source.Source(), pool),
            BlockStore::PrefetchResult::kPresent);
}

TEST(BlockStoreDiskTest, DiskPastItsFreeSpaceFloorStillYieldsTheBytes) {
  TempDir dir;
  CacheConfig config = DiskConfig(dir.path(), 0.5);  // memory cannot keep the block either
  config.disks[0].min_free_bytes = 1ull << 60;       // no file system has this much free
  auto store = BlockStore::Open(config);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  CountingSource source;
  Result<BlockRef> block = (*store)->Get(RequestFor(2), source.Source());
  ASSERT_TRUE(block.ok()) << block.status().ToString();
  ExpectObjectBytes(**block, RequestFor(2));
  (*store)->Flush();  // the disk tier writes behind: let it try
  EXPECT_FALSE((*store)->Contains(RequestFor(2).key));
  EXPECT_EQ((*store)->Stats().tiers[1].inserts, 0u);
}

TEST(BlockStoreDiskTest, OpenErrorNamesTheConfigKey) {
  TempDir dir;
  std::string file = dir.path() + "/not-a-dir";
  std::ofstream(file) << "x";
  auto store = BlockStore::Open(DiskConfig(file + "/cache", 1));
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("cache.disks"), std::string::npos)
      << store.status().message();
  EXPECT_NE(store.status().message().find(file), std::string::npos) << store.status().message();
}

}  // namespace
}  // namespace lakecache
