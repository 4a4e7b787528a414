#include <gtest/gtest.h>

#include <chrono>

#include "cache/block.h"
#include "common/idle_trim.h"

namespace lakecache {
namespace {

// A freed block of 1 MiB or more is kept for the next one of its size, and unmapped once it has
// sat unused for the trim's idle time, so an idle daemon gives back its last burst's blocks.
TEST(BlockPoolTest, FreedMappingsAreReusedThenUnmappedOnceIdle) {
  Block::TrimPool(std::chrono::seconds(0));  // what other tests left
  ASSERT_EQ(Block::PooledBytes(), 0u);
  const size_t size = (3 << 20) + 4096 * 3 + 17;  // an odd length: the last block of a file
  const char* first = nullptr;
  {
    auto block = Block::Allocate(size);
    first = block->data();
  }
  size_t pooled = Block::PooledBytes();
  EXPECT_GE(pooled, size);
  {
    auto again = Block::Allocate(size);
    EXPECT_EQ(again->data(), first);  // the same mapping, no page faults
    EXPECT_EQ(Block::PooledBytes(), 0u);
  }
  Block::TrimPool(std::chrono::seconds(30));  // given back just now: kept
  EXPECT_EQ(Block::PooledBytes(), pooled);
  Block::TrimPool(std::chrono::seconds(0));
  EXPECT_EQ(Block::PooledBytes(), 0u);
  RunIdleTrims();  // the pool's trim is registered (30 s: nothing to do here)
  EXPECT_EQ(Block::PooledBytes(), 0u);
}

}  // namespace
}  // namespace lakecache
