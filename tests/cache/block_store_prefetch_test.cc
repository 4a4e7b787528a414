// BlockStore::Prefetch and the staging area, and the MemoryBudget they share: prefetched blocks
// wait outside the tiers (no policy sees them) until a reader takes them, within the budget.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cache/block_store.h"
#include "cache/cache_tier.h"
#include "cache/memory_budget.h"
#include "cache/memory_tier.h"
#include "support/fake_clock.h"
#include "support/wait_for.h"

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
  static constexpr uint64_t kMaxBlocks = 64;
  std::atomic<int> calls{0};
  std::array<std::atomic<int>, kMaxBlocks> per_block{};  // calls for block i
  BlockSource Get() {
    return [this](const BlockRequest& r) -> Result<BlockRef> {
      calls.fetch_add(1);
      if (r.key.index < kMaxBlocks) per_block[r.key.index].fetch_add(1);
      auto b = Block::Allocate(r.length);
      for (uint64_t i = 0; i < r.length; ++i) b->mutable_data()[i] = ByteAt(r.offset + i);
      return BlockRef(std::move(b));
    };
  }
};

class PrefetchTest : public ::testing::Test {
 protected:
  explicit PrefetchTest(uint64_t budget_blocks = 4, uint64_t memory_blocks = 64) {
    budget_ = std::make_shared<MemoryBudget>(budget_blocks * kBlockSize);
    auto memory = MemoryTier::Create(memory_blocks * kBlockSize, "lru");
    EXPECT_TRUE(memory.ok());
    memory_ = memory->get();
    std::vector<std::unique_ptr<CacheTier>> tiers;
    tiers.push_back(std::move(*memory));
    store_ = std::make_unique<BlockStore>(std::move(tiers), budget_, &clock_);
  }
  // Waits until the pool has run everything queued so far.
  void Drain() {
    pool_.Submit([] {}).wait();
  }

  testing::FakeClock clock_;  // ages the staged blocks
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
    clock_.Advance(std::chrono::milliseconds(1));  // block 0 the oldest
  }
  clock_.Advance(std::chrono::milliseconds(600));  // older than the patience for their readers
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
  ASSERT_TRUE(testing::WaitFor([&] { return store_->Stats().singleflight_waits == 1; }));
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

// A memory tier whose inserts wait at a gate: `entered` is set when an insert reaches it.
class GatedMemoryTier : public CacheTier {
 public:
  GatedMemoryTier(std::unique_ptr<CacheTier> inner, std::shared_future<void> gate)
      : inner_(std::move(inner)), gate_(std::move(gate)) {}

  std::promise<void> entered;

  const std::string& name() const override { return inner_->name(); }
  Result<BlockRef> Get(const BlockKey& key) override { return inner_->Get(key); }
  Result<size_t> Read(const BlockKey& key, uint64_t offset, std::span<char> dst,
                      bool count_access) override {
    return inner_->Read(key, offset, dst, count_access);
  }
  BlockRef Pin(const BlockKey& key, bool count_access) override {
    return inner_->Pin(key, count_access);
  }
  bool resident() const override { return true; }
  bool Insert(const BlockRequest& request, const BlockRef& block) override {
    if (!signalled_.exchange(true)) entered.set_value();
    gate_.wait();
    return inner_->Insert(request, block);
  }
  void Touch(const BlockKey& key) override { inner_->Touch(key); }
  bool Contains(const BlockKey& key) const override { return inner_->Contains(key); }
  void Erase(const BlockKey& key) override { inner_->Erase(key); }
  TierStats Stats() const override { return inner_->Stats(); }

 private:
  std::unique_ptr<CacheTier> inner_;
  std::shared_future<void> gate_;
  std::atomic<bool> signalled_{false};
};

// FUSE hands the parts of one read to several threads. While the first one to take a staged block
// offers it to the tiers (here held at the memory tier's insert), another reading the same block
// must find it (still staged), not miss everywhere and fetch it a second time.
TEST(StagedBlockTest, ConcurrentReaderOfABlockBeingAdmittedDoesNotFetchIt) {
  std::promise<void> open;
  auto memory = MemoryTier::Create(64 * kBlockSize, "lru");
  ASSERT_TRUE(memory.ok());
  auto gated = std::make_unique<GatedMemoryTier>(std::move(*memory), open.get_future().share());
  GatedMemoryTier* tier = gated.get();
  std::vector<std::unique_ptr<CacheTier>> tiers;
  tiers.push_back(std::move(gated));
  BlockStore store(std::move(tiers), std::make_shared<MemoryBudget>(4 * kBlockSize));
  Source source;
  ThreadPool pool(1);
  ASSERT_EQ(store.Prefetch(RequestFor(1), source.Get(), pool),
            BlockStore::PrefetchResult::kStarted);
  pool.Submit([] {}).wait();

  auto first = std::async(std::launch::async, [&] {
    char buf[16];
    return store.Read(RequestFor(1), 0, buf, source.Get());
  });
  tier->entered.get_future().wait();  // the first reader is offering the block
  char buf[16];
  auto second = std::async(std::launch::async, [&] {
    BlockRequest request = RequestFor(1);
    request.repeat_access = true;
    return store.Read(request, kBlockSize / 2, buf, source.Get());
  });
  // It needs nothing the first reader holds up; one that fetched the block would wait at the
  // gate too, which opens only after this wait: a generous wait tells them apart on a busy
  // machine.
  EXPECT_EQ(second.wait_for(testing::kWaitTimeout), std::future_status::ready);
  open.set_value();
  Result<size_t> n = second.get();
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(buf[3], ByteAt(kBlockSize + kBlockSize / 2 + 3));
  ASSERT_TRUE(first.get().ok());
  EXPECT_EQ(source.calls, 1) << "the block was fetched again";
  BlockStoreStats stats = store.Stats();
  EXPECT_EQ(stats.prefetch_used, 1u);
  EXPECT_TRUE(store.Contains(RequestFor(1).key));
  EXPECT_EQ(store.budget().used(), 0u);
}

// A memory tier of 2 blocks under a read-ahead window of 8, as a mount's small memory tier under
// its 16-block window.
class SmallMemoryTest : public PrefetchTest {
 protected:
  SmallMemoryTest() : PrefetchTest(/*budget_blocks=*/16, /*memory_blocks=*/2) {}

  // Reads blocks [0, n) in order, each in 4 small reads, as one sequential pass does.
  Status ReadPass(uint64_t n) {
    char buf[kBlockSize / 4];
    for (uint64_t i = 0; i < n; ++i) {
      for (uint64_t off = 0; off < kBlockSize; off += sizeof(buf)) {
        BlockRequest request = RequestFor(i);
        request.repeat_access = off > 0;
        Result<size_t> got = store_->Read(request, off, buf, source_.Get());
        if (!got.ok()) return got.status();
        if (*got != sizeof(buf) || buf[5] != ByteAt(i * kBlockSize + off + 5)) {
          return Status::Internal("wrong bytes in block " + std::to_string(i));
        }
      }
    }
    return Status::Ok();
  }
};

// The read-ahead of blocks 1-8 is accepted but waits in the pool's queue (its threads busy with
// other fetches) while the reader goes through them. The reader must wait for those fetches, not
// fetch the blocks itself: otherwise the queued tasks fetched them again once the pool got to them,
// the small memory tier having dropped them by then.
TEST_F(SmallMemoryTest, ReaderAheadOfQueuedReadAheadFetchesEachBlockOnce) {
  std::promise<void> open;
  std::shared_future<void> busy = open.get_future().share();
  pool_.Post([busy] { busy.wait(); });
  for (uint64_t i = 1; i <= 8; ++i) {
    ASSERT_EQ(store_->Prefetch(RequestFor(i), source_.Get(), pool_),
              BlockStore::PrefetchResult::kStarted)
        << i;
  }
  auto pass = std::async(std::launch::async, [this] { return ReadPass(10); });
  // The reader waits for block 1's fetch, queued behind the busy task.
  ASSERT_TRUE(testing::WaitFor([&] { return store_->Stats().singleflight_waits == 1; }));
  open.set_value();
  Status read = pass.get();
  ASSERT_TRUE(read.ok()) << read.ToString();
  Drain();
  for (uint64_t i = 0; i < 10; ++i) EXPECT_EQ(source_.per_block[i], 1) << "block " << i;
  BlockStoreStats stats = store_->Stats();
  EXPECT_EQ(stats.fetches, 10u);
  EXPECT_EQ(stats.prefetch_used, 8u);
  EXPECT_EQ(stats.prefetch_dropped, 0u);
  EXPECT_EQ(budget_->used(), 0u);
}

}  // namespace
}  // namespace lakecache
