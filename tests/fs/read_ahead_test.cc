#include "fs/read_ahead.h"

#include <gtest/gtest.h>

#include <random>

namespace lakecache {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kBlock = 4 * kMiB;

ReadAheadOptions Options(uint64_t file_size = 1024 * kMiB, uint64_t max_window = 64 * kMiB) {
  ReadAheadOptions o;
  o.block_size = kBlock;
  o.file_size = file_size;
  o.max_window = max_window;
  return o;
}

using Blocks = ReadAheadWindow::Blocks;

TEST(ReadAheadWindowTest, SequentialReaderGetsOneBlockThenDoublingUpToTheCap) {
  ReadAheadWindow w(Options());
  EXPECT_TRUE(w.OnRead(0, kMiB).empty()) << "one read is not yet a stream";
  Blocks b = w.OnRead(kMiB, kMiB);
  EXPECT_EQ(b.first, 1u);
  EXPECT_EQ(b.end, 2u);
  EXPECT_TRUE(w.OnRead(2 * kMiB, kMiB).empty()) << "block 1 was offered already";
  EXPECT_TRUE(w.sequential());
  w.OnRead(3 * kMiB, kMiB);
  EXPECT_EQ(w.window_blocks(), 1u);
  uint64_t expected_window = 1;
  for (uint64_t block = 1; block < 12; ++block) {
    for (uint64_t mib = 0; mib < 4; ++mib) w.OnRead(block * kBlock + mib * kMiB, kMiB);
    expected_window = std::min<uint64_t>(expected_window * 2, 16);
    EXPECT_EQ(w.window_blocks(), expected_window) << "in block " << block;
  }
  EXPECT_EQ(w.window_blocks(), 16u) << "64 MiB of 4 MiB blocks";
}

TEST(ReadAheadWindowTest, OffersEachBlockOnceAndStaysInsideTheFile) {
  ReadAheadWindow w(Options(10 * kBlock + 5));
  std::vector<int> offered(12, 0);
  for (uint64_t off = 0; off < 10 * kBlock + 5; off += kMiB) {
    Blocks b = w.OnRead(off, kMiB);
    for (uint64_t i = b.first; i < b.end; ++i) ++offered.at(i);
  }
  EXPECT_EQ(offered[0], 0) << "the first block is read, not prefetched";
  for (int i = 1; i <= 10; ++i) EXPECT_EQ(offered[i], 1) << "block " << i;
  EXPECT_EQ(offered[11], 0);
}

TEST(ReadAheadWindowTest, RandomReaderGetsNothing) {
  ReadAheadWindow w(Options(64 * kMiB));
  std::mt19937_64 rng(7);
  for (int i = 0; i < 2000; ++i) {
    uint64_t off = rng() % (64 * kMiB / 4096) * 4096;
    Blocks b = w.OnRead(off, 4096);
    ASSERT_TRUE(b.empty()) << "read " << i << " at " << off;
  }
}

TEST(ReadAheadWindowTest, SmallForwardSkipAndLateNeighbourKeepTheStream) {
  ReadAheadWindow w(Options());
  w.OnRead(0, kMiB);
  w.OnRead(kMiB, kMiB);
  EXPECT_TRUE(w.sequential());
  w.OnRead(2 * kMiB + 100 * 1024, kMiB);  // skipped 100 KiB
  EXPECT_TRUE(w.sequential());
  w.OnRead(kMiB + 512 * 1024, 4096);  // an earlier read arriving late
  EXPECT_TRUE(w.sequential());
  Blocks b = w.OnRead(3 * kMiB + 100 * 1024, kMiB);
  EXPECT_TRUE(w.sequential());
  (void)b;
}

TEST(ReadAheadWindowTest, JumpResetsTheWindowAndANewRunStartsAgain) {
  ReadAheadWindow w(Options());
  for (uint64_t off = 0; off < 20 * kMiB; off += kMiB) w.OnRead(off, kMiB);
  EXPECT_GT(w.window_blocks(), 1u);
  EXPECT_TRUE(w.OnRead(500 * kMiB, kMiB).empty());
  EXPECT_FALSE(w.sequential());
  EXPECT_EQ(w.window_blocks(), 0u);
  EXPECT_TRUE(w.OnRead(501 * kMiB, kMiB).empty() == false ||
              w.OnRead(502 * kMiB, kMiB).empty() == false);
  EXPECT_EQ(w.window_blocks(), 1u) << "starts again at one block";
  // Backwards far: random again.
  EXPECT_TRUE(w.OnRead(0, kMiB).empty());
  EXPECT_FALSE(w.sequential());
}

TEST(ReadAheadWindowTest, UnissuedBlocksAreOfferedAgain) {
  ReadAheadWindow w(Options());
  w.OnRead(0, kMiB);
  Blocks b = w.OnRead(kMiB, kMiB);
  ASSERT_EQ(b.first, 1u);
  w.Unissued(1);  // no budget
  b = w.OnRead(2 * kMiB, kMiB);
  EXPECT_EQ(b.first, 1u);
  EXPECT_EQ(b.end, 2u);
  EXPECT_EQ(w.Offered().first, 1u);
  EXPECT_EQ(w.Offered().end, 2u);
}

TEST(ReadAheadWindowTest, CapBelowABlockMeansNoReadAhead) {
  ReadAheadWindow w(Options(1024 * kMiB, 0));
  for (uint64_t off = 0; off < 40 * kMiB; off += kMiB) EXPECT_TRUE(w.OnRead(off, kMiB).empty());
}

}  // namespace
}  // namespace lakecache
