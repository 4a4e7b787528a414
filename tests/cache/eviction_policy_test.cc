#include "cache/eviction_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cache/tinylfu_policy.h"

namespace lakecache {
namespace {

constexpr uint64_t kBlock = 4 << 20;

BlockKey Key(uint64_t dataset, uint64_t index) { return BlockKey{ContentId{dataset, 7}, index}; }

// "tinylfu-onmiss": tinylfu deciding admission on miss (Admission::kOnMiss), as a disk tier's.
std::unique_ptr<EvictionPolicy> Make(std::string_view name, uint64_t capacity, uint64_t seed = 1) {
  const bool on_miss = name == "tinylfu-onmiss";
  auto policy = MakeEvictionPolicy(on_miss ? "tinylfu" : name, capacity, seed,
                                   on_miss ? Admission::kOnMiss : Admission::kAfterWindow);
  EXPECT_TRUE(policy.ok()) << policy.status().ToString();
  return std::move(policy).value();
}

// What a tier would hold if it obeyed the policy's decisions, checked against the policy's own
// byte accounting after every call.
class TierModel {
 public:
  explicit TierModel(EvictionPolicy* policy) : policy_(policy) {}

  // One reader access: OnHit when held, else OnMiss. Returns true on a hit.
  bool Access(const BlockKey& key, uint64_t bytes) {
    if (held_.contains(key)) {
      policy_->OnHit(key);
      return true;
    }
    std::vector<BlockKey> evict;
    const bool admit = policy_->OnMiss(key, bytes, &evict);
    Drop(evict);
    if (admit) Hold(key, bytes);
    return false;
  }

  void Restore(const BlockKey& key, uint64_t bytes) {
    std::vector<BlockKey> evict;
    policy_->Restore(key, bytes, &evict);
    Hold(key, bytes);  // the tier holds it already; the policy may tell it to drop it again
    Drop(evict);
  }

  void Remove(const BlockKey& key) {
    policy_->Remove(key);
    if (auto it = held_.find(key); it != held_.end()) {
      bytes_ -= it->second;
      held_.erase(it);
    }
  }

  void CheckAccounting() const {
    ASSERT_EQ(policy_->used_bytes(), bytes_);
    ASSERT_LE(bytes_, policy_->capacity_bytes());
  }

  bool holds(const BlockKey& key) const { return held_.contains(key); }
  const std::unordered_map<BlockKey, uint64_t, BlockKeyHash>& held() const { return held_; }

 private:
  void Hold(const BlockKey& key, uint64_t bytes) {
    if (held_.emplace(key, bytes).second) bytes_ += bytes;
  }
  void Drop(const std::vector<BlockKey>& evict) {
    for (const BlockKey& k : evict) {
      auto it = held_.find(k);
      ASSERT_NE(it, held_.end()) << "evicted a block that was not admitted: " << k.ToString();
      bytes_ -= it->second;
      held_.erase(it);
    }
  }

  EvictionPolicy* policy_;
  std::unordered_map<BlockKey, uint64_t, BlockKeyHash> held_;
  uint64_t bytes_ = 0;
};

class AnyPolicyTest : public testing::TestWithParam<std::string> {};

TEST_P(AnyPolicyTest, RandomOperationsKeepAccountingExact) {
  constexpr uint64_t kCapacity = 40 * kBlock;
  auto policy = Make(GetParam(), kCapacity, 42);
  TierModel tier(policy.get());
  std::mt19937_64 rng(7);
  std::vector<uint64_t> sizes(300);  // a block's size never changes; a few exceed the capacity
  for (auto& s : sizes) s = rng() % 50 == 0 ? kCapacity + 1 : 1 + rng() % kBlock;
  for (int op = 0; op < 20000; ++op) {
    const uint64_t i = rng() % sizes.size();
    const BlockKey key = Key(1, i);
    switch (rng() % 10) {
      case 0:
        tier.Remove(rng() % 2 ? key : Key(1, 1000 + i));  // held or not
        break;
      case 1:
        if (!tier.holds(key)) tier.Restore(key, sizes[i]);
        break;
      default:
        tier.Access(key, sizes[i]);
    }
    ASSERT_NO_FATAL_FAILURE(tier.CheckAccounting()) << "after op " << op;
  }
}

TEST_P(AnyPolicyTest, TooLargeBlockIsNotAdmitted) {
  auto policy = Make(GetParam(), 10 * kBlock);
  TierModel tier(policy.get());
  tier.Access(Key(1, 0), kBlock);
  std::vector<BlockKey> evict;
  EXPECT_FALSE(policy->OnMiss(Key(1, 1), 10 * kBlock + 1, &evict));
  EXPECT_TRUE(evict.empty());
  EXPECT_EQ(policy->used_bytes(), kBlock);
}

TEST_P(AnyPolicyTest, RemoveFreesBytes) {
  auto policy = Make(GetParam(), 10 * kBlock);
  TierModel tier(policy.get());
  for (int i = 0; i < 3; ++i) tier.Access(Key(1, i), kBlock);
  tier.Remove(Key(1, 1));
  EXPECT_EQ(policy->used_bytes(), 2 * kBlock);
  tier.Remove(Key(1, 1));  // unknown now: no-op
  EXPECT_EQ(policy->used_bytes(), 2 * kBlock);
  EXPECT_FALSE(tier.Access(Key(1, 1), kBlock));
  EXPECT_TRUE(tier.holds(Key(1, 1)));
  EXPECT_EQ(policy->used_bytes(), 3 * kBlock);
}

TEST_P(AnyPolicyTest, RestoreBeyondCapacityEvicts) {
  auto policy = Make(GetParam(), 4 * kBlock);
  TierModel tier(policy.get());
  for (int i = 0; i < 6; ++i) tier.Restore(Key(1, i), kBlock);
  EXPECT_EQ(tier.held().size(), 4u);
  ASSERT_NO_FATAL_FAILURE(tier.CheckAccounting());
}

TEST_P(AnyPolicyTest, SameSeedSameDecisions) {
  auto a = Make(GetParam(), 20 * kBlock, 9);
  auto b = Make(GetParam(), 20 * kBlock, 9);
  TierModel ta(a.get()), tb(b.get());
  std::mt19937_64 rng(3);
  for (int op = 0; op < 5000; ++op) {
    const BlockKey key = Key(1, rng() % 100);
    ASSERT_EQ(ta.Access(key, kBlock), tb.Access(key, kBlock)) << "op " << op;
  }
}

// Threads with their own keys miss, hit and remove at once; the capacity holds throughout.
TEST_P(AnyPolicyTest, ConcurrentUseStaysWithinCapacity) {
  auto policy = Make(GetParam(), 64 * kBlock);
  std::atomic<bool> over{false};
  std::vector<std::thread> threads;
  for (uint64_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      std::vector<BlockKey> evict;
      for (int op = 0; op < 5000; ++op) {
        const BlockKey key = Key(t, rng() % 200);
        if (rng() % 8 == 0) {
          policy->Remove(key);
        } else if (rng() % 2) {
          policy->OnHit(key);  // may be unknown or evicted by another thread meanwhile
        } else {
          policy->Remove(key);  // keeps the REQUIRES of OnMiss: not admitted now
          policy->OnMiss(key, kBlock, &evict);
        }
        if (policy->used_bytes() > policy->capacity_bytes()) over = true;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_FALSE(over);
}

INSTANTIATE_TEST_SUITE_P(Policies, AnyPolicyTest,
                         testing::Values("lru", "tinylfu", "tinylfu-onmiss"),
                         [](const testing::TestParamInfo<std::string>& p) {
                           std::string name = p.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(MakeEvictionPolicyTest, KnowsTheNames) {
  for (std::string_view name :
       {std::string_view("lru"), std::string_view("tinylfu"), kDefaultEvictionPolicy}) {
    auto policy = MakeEvictionPolicy(name, kBlock);
    ASSERT_TRUE(policy.ok()) << name;
    EXPECT_EQ((*policy)->name(), name);
    EXPECT_EQ((*policy)->capacity_bytes(), kBlock);
  }
}

TEST(MakeEvictionPolicyTest, UnknownNameListsValidOnes) {
  auto policy = MakeEvictionPolicy("arc", kBlock);
  ASSERT_FALSE(policy.ok());
  EXPECT_EQ(policy.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(policy.status().message().find("lru, tinylfu"), std::string::npos);
}

TEST(LruPolicyTest, EvictsLeastRecentlyUsedFirst) {
  auto policy = Make("lru", 3 * kBlock);
  std::vector<BlockKey> evict;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(policy->OnMiss(Key(1, i), kBlock, &evict));
  policy->OnHit(Key(1, 0));
  ASSERT_TRUE(policy->OnMiss(Key(1, 3), kBlock, &evict));
  ASSERT_TRUE(policy->OnMiss(Key(1, 4), kBlock, &evict));
  EXPECT_EQ(evict, (std::vector<BlockKey>{Key(1, 1), Key(1, 2)}));
}

TEST(LruPolicyTest, LargeBlockEvictsSeveralInOrder) {
  auto policy = Make("lru", 4 * kBlock);
  std::vector<BlockKey> evict;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(policy->OnMiss(Key(1, i), kBlock, &evict));
  ASSERT_TRUE(policy->OnMiss(Key(1, 9), 3 * kBlock, &evict));
  EXPECT_EQ(evict, (std::vector<BlockKey>{Key(1, 0), Key(1, 1), Key(1, 2)}));
  EXPECT_EQ(policy->used_bytes(), 4 * kBlock);
}

constexpr uint64_t kCacheBlocks = 100;

// Fraction of `keys` the tier holds.
double HeldFraction(const TierModel& tier, uint64_t dataset, uint64_t n) {
  uint64_t held = 0;
  for (uint64_t i = 0; i < n; ++i) held += tier.holds(Key(dataset, i));
  return static_cast<double>(held) / n;
}

TEST(TinyLfuPolicyTest, OnePassScanLeavesWorkingSetCached) {
  auto policy = Make("tinylfu", kCacheBlocks * kBlock);
  TierModel tier(policy.get());
  constexpr uint64_t kWorkingSet = 80;
  for (int round = 0; round < 5; ++round) {
    for (uint64_t i = 0; i < kWorkingSet; ++i) tier.Access(Key(1, i), kBlock);
  }
  ASSERT_EQ(HeldFraction(tier, 1, kWorkingSet), 1.0);
  for (uint64_t i = 0; i < 10 * kCacheBlocks; ++i) tier.Access(Key(2, i), kBlock);
  EXPECT_GE(HeldFraction(tier, 1, kWorkingSet), 0.9);
  ASSERT_NO_FATAL_FAILURE(tier.CheckAccounting());
}

TEST(TinyLfuPolicyTest, LruLosesTheWorkingSetToTheSameScan) {  // the contrast the default is for
  auto policy = Make("lru", kCacheBlocks * kBlock);
  TierModel tier(policy.get());
  for (int round = 0; round < 5; ++round) {
    for (uint64_t i = 0; i < 80; ++i) tier.Access(Key(1, i), kBlock);
  }
  for (uint64_t i = 0; i < 10 * kCacheBlocks; ++i) tier.Access(Key(2, i), kBlock);
  EXPECT_EQ(HeldFraction(tier, 1, 80), 0.0);
}

TEST(TinyLfuPolicyTest, NewDatasetEventuallyTakesOver) {
  auto policy = Make("tinylfu", kCacheBlocks * kBlock);
  TierModel tier(policy.get());
  for (int epoch = 0; epoch < 20; ++epoch) {  // hot: counters saturate
    for (uint64_t i = 0; i < 90; ++i) tier.Access(Key(1, i), kBlock);
  }
  int epochs = 0;
  while (HeldFraction(tier, 2, 90) < 0.9 && epochs < 30) {
    for (uint64_t i = 0; i < 90; ++i) tier.Access(Key(2, i), kBlock);
    ++epochs;
  }
  EXPECT_GE(HeldFraction(tier, 2, 90), 0.9) << "after " << epochs << " epochs";
  EXPECT_LE(epochs, 10);
}

// Many shuffled epochs, so that counter halvings fall in mid-epoch: each epoch after the first hits
// close to the bound of C/D, whatever the ratio.
TEST(TinyLfuPolicyTest, ShuffledEpochsHitNearCacheOverDataset) {
  for (uint64_t dataset : {2 * kCacheBlocks, 4 * kCacheBlocks, 10 * kCacheBlocks}) {
    auto policy = Make("tinylfu", kCacheBlocks * kBlock);
    TierModel tier(policy.get());
    std::vector<uint64_t> order(dataset);
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 rng(5);
    for (int epoch = 1; epoch <= 20; ++epoch) {
      std::shuffle(order.begin(), order.end(), rng);
      int hits = 0;
      for (uint64_t i : order) hits += tier.Access(Key(1, i), kBlock);
      if (epoch >= 2) {
        EXPECT_GE(hits, 0.9 * kCacheBlocks) << "dataset " << dataset << ", epoch " << epoch;
      }
    }
  }
}

// Admission after a window: a block read once is admitted (the tier stores it), and dropped when it
// leaves the window and loses to the CLOCK victim. On miss: the same block is declined at once, so
// the tier never stores it; a block read often enough still gets in, in place of one victim.
TEST(TinyLfuPolicyTest, AdmissionOnMissDeclinesBeforeTheTierStoresTheBlock) {
  constexpr uint64_t kFull = 10;
  std::vector<BlockKey> evict;
  auto windowed = Make("tinylfu", kFull * kBlock);
  for (uint64_t i = 0; i < kFull; ++i) ASSERT_TRUE(windowed->OnMiss(Key(1, i), kBlock, &evict));
  EXPECT_TRUE(windowed->OnMiss(Key(2, 0), kBlock, &evict)) << "into the window";
  evict.clear();
  for (uint64_t i = 1; i <= 4; ++i) windowed->OnMiss(Key(2, i), kBlock, &evict);
  EXPECT_NE(std::find(evict.begin(), evict.end(), Key(2, 0)), evict.end())
      << "stored, then dropped for losing admission";

  auto on_miss = Make("tinylfu-onmiss", kFull * kBlock);
  TierModel tier(on_miss.get());
  for (uint64_t i = 0; i < kFull; ++i) EXPECT_FALSE(tier.Access(Key(1, i), kBlock));
  EXPECT_EQ(tier.held().size(), kFull) << "room: everything is admitted";
  evict.clear();
  EXPECT_FALSE(on_miss->OnMiss(Key(2, 0), kBlock, &evict)) << "as frequent as the victim";
  EXPECT_TRUE(evict.empty());
  // Counted 2, 3, then 4 > 1 + the margin of 2: admitted, in place of exactly one block.
  EXPECT_FALSE(on_miss->OnMiss(Key(2, 0), kBlock, &evict));
  EXPECT_FALSE(on_miss->OnMiss(Key(2, 0), kBlock, &evict));
  EXPECT_TRUE(evict.empty());
  EXPECT_FALSE(tier.Access(Key(2, 0), kBlock));
  EXPECT_TRUE(tier.holds(Key(2, 0)));
  EXPECT_EQ(tier.held().size(), kFull);
  ASSERT_NO_FATAL_FAILURE(tier.CheckAccounting());
}

// Without a window nothing of the capacity goes to blocks on their way out: sequential and shuffled
// epochs hit exactly C/D from the second on (Belady's bound).
TEST(TinyLfuPolicyTest, AdmissionOnMissEpochsHitTheBound) {
  for (bool shuffled : {false, true}) {
    auto policy = Make("tinylfu-onmiss", kCacheBlocks * kBlock);
    TierModel tier(policy.get());
    std::vector<uint64_t> order(4 * kCacheBlocks);
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 rng(5);
    for (int epoch = 1; epoch <= 10; ++epoch) {
      if (shuffled) std::shuffle(order.begin(), order.end(), rng);
      uint64_t hits = 0;
      for (uint64_t i : order) hits += tier.Access(Key(1, i), kBlock);
      if (epoch >= 2) {
        EXPECT_EQ(hits, kCacheBlocks) << "shuffled " << shuffled << ", epoch " << epoch;
      }
    }
  }
}

TEST(TinyLfuPolicyTest, EstimatesTheDatasetSize) {
  TinyLfuPolicy policy(100 * kBlock, 1);
  std::vector<BlockKey> evict;
  for (int pass = 0; pass < 2; ++pass) {
    for (uint64_t i = 0; i < 5000; ++i) policy.OnMiss(Key(1, i), kBlock, &evict);
  }
  EXPECT_NEAR(static_cast<double>(policy.estimated_dataset_blocks()), 5000, 250);
}

}  // namespace
}  // namespace lakecache
