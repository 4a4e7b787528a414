#include "cache/memory_tier.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <thread>
#include <vector>

namespace lakecache {
namespace {

constexpr uint64_t kKiB = 1024;

BlockRequest RequestFor(uint64_t index, uint64_t length) {
  BlockRequest r;
  r.key = BlockKey{MakeContentId("ns", "data/obj", "etag-1", 4 << 20), index};
  r.object_key = "data/obj";
  r.etag = "etag-1";
  r.offset = index * (4 << 20);
  r.length = length;
  return r;
}

// A block whose byte i is (seed + i) mod 256.
BlockRef PatternBlock(uint64_t size, uint8_t seed) {
  std::shared_ptr<Block> b = Block::Allocate(size);
  for (uint64_t i = 0; i < size; ++i) b->mutable_data()[i] = static_cast<char>(seed + i);
  return b;
}

std::unique_ptr<MemoryTier> MakeTier(uint64_t capacity, std::string_view policy = "lru",
                                     uint64_t seed = 0) {
  auto tier = MemoryTier::Create(capacity, policy, seed);
  EXPECT_TRUE(tier.ok()) << tier.status().ToString();
  return tier.ok() ? std::move(*tier) : nullptr;
}

// Admits whatever it is told to and names the victims it is given; records the calls.
class ScriptedPolicy : public EvictionPolicy {
 public:
  explicit ScriptedPolicy(uint64_t capacity) : capacity_(capacity) {}
  std::string_view name() const override { return "scripted"; }
  void OnHit(const BlockKey& key) override { hits.push_back(key); }
  bool OnMiss(const BlockKey& key, uint64_t, std::vector<BlockKey>* evict) override {
    misses.push_back(key);
    evict->insert(evict->end(), victims.begin(), victims.end());
    return admit;
  }
  void Restore(const BlockKey&, uint64_t, std::vector<BlockKey>*) override {}
  void Remove(const BlockKey& key) override { removed.push_back(key); }
  uint64_t capacity_bytes() const override { return capacity_; }
  uint64_t used_bytes() const override { return 0; }

  bool admit = true;
  std::vector<BlockKey> victims;
  std::vector<BlockKey> hits, misses, removed;

 private:
  uint64_t capacity_;
};

TEST(MemoryTierTest, GetIsZeroCopy) {
  auto tier = MakeTier(1 << 20);
  BlockRef block = PatternBlock(64 * kKiB, 7);
  ASSERT_TRUE(tier->Insert(RequestFor(1, 64 * kKiB), block));
  Result<BlockRef> first = tier->Get(RequestFor(1, 0).key);
  Result<BlockRef> second = tier->Get(RequestFor(1, 0).key);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->get(), block.get());
  EXPECT_EQ((*first)->data(), (*second)->data());
}

TEST(MemoryTierTest, MissIsNotFoundAndCounted) {
  auto tier = MakeTier(1 << 20);
  Result<BlockRef> miss = tier->Get(RequestFor(9, 0).key);
  ASSERT_FALSE(miss.ok());
  EXPECT_EQ(miss.status().code(), StatusCode::kNotFound);
  char buf[16];
  EXPECT_EQ(tier->Read(RequestFor(9, 0).key, 0, buf, true).status().code(), StatusCode::kNotFound);
  TierStats stats = tier->Stats();
  EXPECT_EQ(stats.tier, "memory");
  EXPECT_EQ(stats.misses, 2u);
  EXPECT_EQ(stats.hits, 0u);
}

TEST(MemoryTierTest, ReadCopiesTheRangeClampedToTheBlockEnd) {
  auto tier = MakeTier(1 << 20);
  BlockKey key = RequestFor(2, 0).key;
  ASSERT_TRUE(tier->Insert(RequestFor(2, 1000), PatternBlock(1000, 3)));
  std::vector<char> buf(300);
  Result<size_t> n = tier->Read(key, 100, buf, true);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 300u);
  EXPECT_EQ(buf[0], static_cast<char>(103));
  EXPECT_EQ(buf[299], static_cast<char>(3 + 399));
  n = tier->Read(key, 900, buf, true);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 100u);
  n = tier->Read(key, 1000, buf, true);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
  EXPECT_EQ(tier->Stats().hits, 3u);
}

TEST(MemoryTierTest, InsertEvictsThePolicysVictimsAndCountsThem) {
  auto owned = std::make_unique<ScriptedPolicy>(1 << 20);
  ScriptedPolicy* policy = owned.get();
  MemoryTier tier(std::move(owned));
  ASSERT_TRUE(tier.Insert(RequestFor(1, 100), PatternBlock(100, 1)));
  policy->victims = {RequestFor(1, 0).key};
  ASSERT_TRUE(tier.Insert(RequestFor(2, 100), PatternBlock(100, 2)));
  EXPECT_FALSE(tier.Contains(RequestFor(1, 0).key));
  EXPECT_TRUE(tier.Contains(RequestFor(2, 0).key));
  policy->victims.clear();
  policy->admit = false;
  EXPECT_FALSE(tier.Insert(RequestFor(3, 100), PatternBlock(100, 3)));
  EXPECT_FALSE(tier.Contains(RequestFor(3, 0).key));
  TierStats stats = tier.Stats();
  EXPECT_EQ(stats.inserts, 2u);
  EXPECT_EQ(stats.evictions, 1u);
  EXPECT_EQ(stats.rejected, 1u);
  EXPECT_EQ(stats.blocks, 1u);
  EXPECT_EQ(stats.used_bytes, 100u);
  EXPECT_EQ(stats.capacity_bytes, 1u << 20);
  EXPECT_EQ(policy->misses.size(), 3u);
}

TEST(MemoryTierTest, RefusesWhatWouldOverflowEvenIfThePolicyAdmits) {
  auto owned = std::make_unique<ScriptedPolicy>(1000);
  ScriptedPolicy* policy = owned.get();
  MemoryTier tier(std::move(owned));
  ASSERT_TRUE(tier.Insert(RequestFor(1, 600), PatternBlock(600, 1)));
  EXPECT_FALSE(tier.Insert(RequestFor(2, 600), PatternBlock(600, 2)));
  EXPECT_EQ(tier.Stats().used_bytes, 600u);
  ASSERT_EQ(policy->removed.size(), 1u);  // the policy forgets what the tier refused
  EXPECT_EQ(policy->removed[0], RequestFor(2, 0).key);
}

TEST(MemoryTierTest, HitsAndTouchesReachThePolicyOnlyWhenHeld) {
  auto owned = std::make_unique<ScriptedPolicy>(1 << 20);
  ScriptedPolicy* policy = owned.get();
  MemoryTier tier(std::move(owned));
  ASSERT_TRUE(tier.Insert(RequestFor(1, 100), PatternBlock(100, 1)));
  tier.Touch(RequestFor(1, 0).key);
  tier.Touch(RequestFor(2, 0).key);  // not held: nothing to count
  ASSERT_TRUE(tier.Get(RequestFor(1, 0).key).ok());
  EXPECT_EQ(policy->hits.size(), 2u);
  TierStats stats = tier.Stats();
  EXPECT_EQ(stats.hits, 1u);  // Touch counts no hit
  EXPECT_EQ(stats.misses, 0u);
}

TEST(MemoryTierTest, ErasedBlockStaysValidForItsHolders) {
  auto tier = MakeTier(1 << 20);
  ASSERT_TRUE(tier->Insert(RequestFor(1, 4096), PatternBlock(4096, 5)));
  Result<BlockRef> held = tier->Get(RequestFor(1, 0).key);
  ASSERT_TRUE(held.ok());
  tier->Erase(RequestFor(1, 0).key);
  EXPECT_FALSE(tier->Contains(RequestFor(1, 0).key));
  EXPECT_EQ(tier->Stats().used_bytes, 0u);
  EXPECT_EQ((*held)->data()[4095], static_cast<char>(5 + 4095));
}

TEST(MemoryTierTest, UnknownPolicyIsAnError) {
  auto tier = MemoryTier::Create(1 << 20, "mru");
  ASSERT_FALSE(tier.ok());
  EXPECT_EQ(tier.status().code(), StatusCode::kInvalidArgument);
}

// Property: over seeded random inserts, reads, touches and erases, the bytes held never exceed the
// capacity and the stats agree with what the tier holds.
void CheckCapacityOverRandomOps(std::string_view policy, uint64_t seed) {
  constexpr uint64_t kCapacity = 1 << 20;
  auto tier = MakeTier(kCapacity, policy, seed);
  std::mt19937_64 rng(seed);
  std::map<uint64_t, uint64_t> sizes;  // index -> size, fixed per key as for real blocks
  char buf[512];
  for (int op = 0; op < 20000; ++op) {
    uint64_t index = rng() % 300;
    if (!sizes.contains(index)) sizes[index] = 1 + rng() % (192 * kKiB);
    BlockKey key = RequestFor(index, 0).key;
    switch (rng() % 5) {
      case 0:
      case 1:
        if (!tier->Contains(key))
          tier->Insert(RequestFor(index, sizes[index]), Block::Allocate(sizes[index]));
        break;
      case 2:
        (void)tier->Get(key);
        break;
      case 3:
        (void)tier->Read(key, rng() % 1024, buf, true);
        break;
      default:
        rng() % 4 == 0 ? tier->Erase(key) : tier->Touch(key);
        break;
    }
    TierStats stats = tier->Stats();
    ASSERT_LE(stats.used_bytes, kCapacity) << policy << " seed " << seed << " op " << op;
  }
  uint64_t held_bytes = 0, held_blocks = 0;
  for (const auto& [index, size] : sizes) {
    if (!tier->Contains(RequestFor(index, 0).key)) continue;
    held_bytes += size;
    ++held_blocks;
  }
  TierStats stats = tier->Stats();
  EXPECT_EQ(stats.used_bytes, held_bytes);
  EXPECT_EQ(stats.blocks, held_blocks);
  EXPECT_GT(stats.evictions, 0u);
}

TEST(MemoryTierPropertyTest, CapacityNeverExceededOverRandomOps) {
  for (std::string_view policy : {"lru", "tinylfu"}) {
    for (uint64_t seed : {1, 2, 3}) CheckCapacityOverRandomOps(policy, seed);
  }
}

TEST(MemoryTierPropertyTest, CapacityNeverExceededUnderConcurrentInserts) {
  constexpr uint64_t kCapacity = 512 * kKiB;
  auto tier = MakeTier(kCapacity, "tinylfu");
  std::atomic<bool> over{false};
  std::vector<std::thread> threads;
  for (uint64_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (int op = 0; op < 5000; ++op) {
        uint64_t index = rng() % 200;
        uint64_t size = 4 * kKiB + index * 256;
        if (!tier->Get(RequestFor(index, 0).key).ok()) {
          tier->Insert(RequestFor(index, size), Block::Allocate(size));
        }
        if (tier->Stats().used_bytes > kCapacity) over = true;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(over);
  EXPECT_LE(tier->Stats().used_bytes, kCapacity);
}

}  // namespace
}  // namespace lakecache
