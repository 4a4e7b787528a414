// BlockStore::Prefetch and the staging area, and the MemoryBudget they share: prefetched blocks
// wait outside the tiers (no policy sees them) until a reader takes them, within the budget.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <thread>

#include "cache/block_store.h"
#include "cache/memory_budget.h"
#include "cache/memory_tier.h"

namespace lakecache {
namespace {

constexpr uint64_t kBlockSize = 64 * 1024;

BlockRequest RequestFor(uint64_t index) {
  BlockRequest r;
  r.key = BlockKey{MakeContentId("ns", "obj", "etag", kBlockSize), index};
  r.object_key = "obj";
  r.etag = "etag";
  r.offset = index * kBlockSize;
  r.length = kBlockSize;
  return r;
}

char ByteAt(uint64_t i) { return static_cast<char>(i * 13 + i / 1000); }

struct Source {
  std::atomic<int> calls{0};
  BlockSource Get() {
    return [this](const BlockRequest& r) -> Result<BlockRef> {
      calls.fetch_add(1);
      auto b = Block::Allocate(r.length);
      for (uint64_t i = 0; i < r.length; ++i) b->mutable_data()[i] = ByteAt(r.offset + i);
      return BlockRef(std::move(b));
    };
  }
};

class PrefetchTest : public ::testing::Test {
 protected:
  explicit PrefetchTest(uint64_t budget_blocks = 4) {
    budget_ = std::make_shared<MemoryBudget>(budget_blocks * kBlockSize);
    auto memory = MemoryTier::Create(64 * kBlockSize, "lru");
    EXPECT_TRUE(memory.ok());
    memory_ = memory->get();
    std::vector<std::unique_ptr<CacheTier>> tiers;
    tiers.push_back(std::move(*memory));
    store_ = std::make_unique<BlockStore>(std::move(tiers), budget_);
  }
  // Waits until the pool has run everything queued so far.
  void Drain() {
    pool_.Submit([] {}).wait();
  }

  Source source_;
  std::shared_ptr<MemoryBudget> budget_;
  MemoryTier* memory_ = nullptr;
  std::unique_ptr<BlockStore> store_;
  ThreadPool pool_{1};  // last: destroyed first, finishing its tasks while the store exists
};

TEST(MemoryBudgetTest, TryAcquireRespectsCapacityAndForceDoesNot) {
  MemoryBudget budget(100);
  EXPECT_TRUE(budget.TryAcquire(60));
  EXPECT_FALSE(budget.TryAcquire(41));
  EXPECT_TRUE(budget.TryAcquire(40));
  budget.ForceAcquire(50);
  EXPECT_EQ(budget.used(), 150u);
  EXPECT_EQ(budget.peak(), 150u);
  budget.Release(150);
  EXPECT_EQ(budget.used(), 0u);
  EXPECT_TRUE(budget.TryAcquire(100));
}

TEST_F(PrefetchTest, PrefetchedBlockIsStagedNotAdmittedUntilRead) {
  EXPECT_EQ(store_->Prefetch(RequestFor(1), source_.Get(), pool_),
            BlockStore::PrefetchResult::kStarted);
  Drain();
  EXPECT_EQ(source_.calls, 1);
  EXPECT_FALSE(store_->Contains(RequestFor(1).key)) << "read-ahead must not reach the tiers";
  EXPECT_EQ(memory_->Stats().inserts, 0u);
  EXPECT_EQ(budget_->used(), kBlockSize);
  // A second prefetch of it is a no-op.
  EXPECT_EQ(store_->Prefetch(RequestFor(1), source_.Get(), pool_),
            BlockStore::PrefetchResult::kPresent);

  char buf[100];
  Result<size_t> n = store_->Read(RequestFor(1), 500, buf, source_.Get());
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  ASSERT_EQ(*n, sizeof(buf));
  for (size_t i = 0; i < sizeof(buf); ++i) ASSERT_EQ(buf[i], ByteAt(kBlockSize + 500 + i));
  EXPECT_EQ(source_.calls, 1) << "the staged block served the read";
  EXPECT_TRUE(store_->Contains(RequestFor(1).key)) << "admitted once actually read";
  EXPECT_EQ(budget_->used(), 0u);
  BlockStoreStats stats = store_->Stats();
  EXPECT_EQ(stats.prefetches, 1u);
  EXPECT_EQ(stats.prefetch_used, 1u);
  EXPECT_EQ(stats.tiers[0].hits, 0u);
  EXPECT_EQ(stats.tiers[0].misses, 1u) << "one access: the read, not the prefetch";
}

TEST_F(PrefetchTest, CachedBlockIsNotPrefetched) {
  ASSERT_TRUE(store_->Get(RequestFor(2), source_.Get()).ok());
  EXPECT_EQ(store_->Prefetch(RequestFor(2), source_.Get(), pool_),
            BlockStore::PrefetchResult::kPresent);
  Drain();
  EXPECT_EQ(source_.calls, 1);
  EXPECT_EQ(memory_->Stats().hits, 0u) << "a prefetch check is not an access";
}

TEST_F(PrefetchTest, BudgetRefusesPrefetchButNeverADemandRead) {
  for (uint64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(store_->Prefetch(RequestFor(i), source_.Get(), pool_),
              BlockStore::PrefetchResult::kStarted);
  }
  Drain();
  // Full, and the staged blocks are too young to drop.
  EXPECT_EQ(store_->Prefetch(RequestFor(9), source_.Get(), pool_),
            BlockStore::PrefetchResult::kNoBudget);
  Result<BlockRef> demand = store_->Get(RequestFor(10), source_.Get());
  ASSERT_TRUE(demand.ok());
  EXPECT_EQ(store_->Stats().prefetch_refused, 1u);
  EXPECT_GT(store_->Stats().budget_peak_bytes, 4 * kBlockSize) << "demand fetches are counted";
  EXPECT_EQ(budget_->used(), 4 * kBlockSize);
}

TEST_F(PrefetchTest, OldUnreadStagedBlocksAreDroppedOldestFirstWhenBudgetIsNeeded) {
  for (uint64_t i = 0; i < 4; ++i) {
    ASSERT_EQ(store_->Prefetch(RequestFor(i), source_.Get(), pool_),
              BlockStore::PrefetchResult::kStarted);
    Drain();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_EQ(store_->Prefetch(RequestFor(20), source_.Get(), pool_),
            BlockStore::PrefetchResult::kStarted);
  Drain();
  EXPECT_EQ(store_->Stats().prefetch_dropped, 1u);
  EXPECT_EQ(budget_->used(), 4 * kBlockSize);
  // Block 0 was the oldest: reading it fetches again; block 1 is still staged.
  ASSERT_TRUE(store_->Get(RequestFor(1), source_.Get()).ok());
  EXPECT_EQ(source_.calls, 5);
  ASSERT_TRUE(store_->Get(RequestFor(0), source_.Get()).ok());
  EXPECT_EQ(source_.calls, 6);
}

TEST_F(PrefetchTest, DropStagedGivesTheBudgetBack) {
  ASSERT_EQ(store_->Prefetch(RequestFor(3), source_.Get(), pool_),
            BlockStore::PrefetchResult::kStarted);
  Drain();
  store_->DropStaged(RequestFor(3).key);
  EXPECT_EQ(budget_->used(), 0u);
  EXPECT_EQ(store_->Stats().prefetch_dropped, 1u);
}

TEST_F(PrefetchTest, ReaderJoiningAPrefetchInFlightGetsItAndAdmitsIt) {
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<int> calls{0};
  BlockSource slow = [&](const BlockRequest& r) -> Result<BlockRef> {
    calls.fetch_add(1);
    gate.wait();
    return source_.Get()(r);
  };
  ASSERT_EQ(store_->Prefetch(RequestFor(5), slow, pool_), BlockStore::PrefetchResult::kStarted);
  while (calls.load() == 0) std::this_thread::yield();
  auto reader = std::async(std::launch::async, [&] { return store_->Get(RequestFor(5), slow); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  release.set_value();
  Result<BlockRef> got = reader.get();
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)->data()[7], ByteAt(5 * kBlockSize + 7));
  EXPECT_EQ(calls, 1) << "single flight across prefetch and demand";
  EXPECT_TRUE(store_->Contains(RequestFor(5).key));
  EXPECT_EQ(budget_->used(), 0u);
}

TEST_F(PrefetchTest, ReadPinnedReturnsTheMemoryBlockWithoutCopying) {
  ASSERT_TRUE(store_->Get(RequestFor(4), source_.Get()).ok());
  char buf[16];
  Result<BlockStore::PinnedRead> read = store_->ReadPinned(RequestFor(4), 10, buf, source_.Get());
  ASSERT_TRUE(read.ok());
  ASSERT_NE(read->block, nullptr);
  EXPECT_EQ(read->block->data()[10], ByteAt(4 * kBlockSize + 10));
  EXPECT_EQ(memory_->Stats().hits, 1u);
}

}  // namespace
}  // namespace lakecache
