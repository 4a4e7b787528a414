#include "cache/disk_tier.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cache/block_file.h"
#include "support/scoped_tmpfs.h"
#include "support/test_servers.h"

namespace lakecache {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kBlockSize = 4 * kMiB;

BlockRef RandomBlock(size_t n, uint64_t seed) {
  std::shared_ptr<Block> block = Block::Allocate(n);
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v = rng();
    std::memcpy(block->mutable_data() + i, &v, std::min<size_t>(8, n - i));
  }
  return block;
}

BlockRequest Request(uint64_t index, uint64_t length, const std::string& object = "data/a.bin") {
  BlockRequest r;
  r.key = BlockKey{MakeContentId("ns", object, "etag", kBlockSize), index};
  r.object_key = object;
  r.etag = "etag";
  r.offset = index * kBlockSize;
  r.length = length;
  return r;
}

DiskCacheConfig Dir(const std::string& path, uint64_t capacity, uint64_t min_free_bytes = 0) {
  DiskCacheConfig c;
  c.path = path;
  c.capacity = capacity;
  c.min_free_bytes = min_free_bytes;
  c.min_free_ratio = 0;
  return c;
}

bool SameBytes(const Block& a, const Block& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}

// The block files under `dir` (recursively), and what they take on disk.
std::vector<std::string> BlockFiles(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.path().extension() == kBlockFileSuffix) out.push_back(e.path().string());
  }
  return out;
}
uint64_t BytesOnDisk(const std::string& dir) {
  uint64_t total = 0;
  for (const std::string& f : BlockFiles(dir)) {
    struct stat st;
    if (::stat(f.c_str(), &st) == 0) total += static_cast<uint64_t>(st.st_blocks) * 512;
  }
  return total;
}
size_t TempFiles(const std::string& dir) {
  size_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    n += IsBlockFileTempName(e.path().filename().string());
  }
  return n;
}
std::string FileOf(const std::string& dir, const BlockKey& key) {
  for (const std::string& f : BlockFiles(dir)) {
    if (fs::path(f).filename() == key.ToString() + std::string(kBlockFileSuffix)) return f;
  }
  return "";
}

void FlipByte(const std::string& path, uint64_t offset) {
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << path;
  char c;
  ASSERT_EQ(::pread(fd, &c, 1, static_cast<off_t>(offset)), 1);
  c ^= 0x5a;
  ASSERT_EQ(::pwrite(fd, &c, 1, static_cast<off_t>(offset)), 1);
  ::close(fd);
}

uint64_t FreeBytes(const std::string& path) {
  struct statvfs st;
  return ::statvfs(path.c_str(), &st) == 0 ? st.f_bavail * st.f_frsize : 0;
}

using testing::ScopedTmpfs;

class DiskTierTest : public ::testing::Test {
 protected:
  std::unique_ptr<DiskTier> Open(const std::vector<DiskCacheConfig>& dirs,
                                 std::string_view policy = "lru") {
    Result<std::unique_ptr<DiskTier>> tier = DiskTier::Open(dirs, policy);
    EXPECT_TRUE(tier.ok()) << tier.status().ToString();
    return tier.ok() ? std::move(tier).value() : nullptr;
  }
  std::string Sub(const std::string& name) { return dir_.path() + "/" + name; }

  testing::TempDir dir_;
};

TEST_F(DiskTierTest, InsertThenGetAndRangeReadReturnSameBytes) {
  auto tier = Open({Dir(Sub("c"), 64 * kMiB)}, "tinylfu");
  ASSERT_NE(tier, nullptr);
  const uint64_t short_size = kBlockSize * 3 / 8 + 123;  // an object's last block
  BlockRef full = RandomBlock(kBlockSize, 1);
  BlockRef last = RandomBlock(short_size, 2);
  BlockRef empty = RandomBlock(0, 3);
  ASSERT_TRUE(tier->Insert(Request(0, kBlockSize), full));
  ASSERT_TRUE(tier->Insert(Request(1, short_size), last));
  ASSERT_TRUE(tier->Insert(Request(0, 0, "empty"), empty));

  for (auto [index, block] : {std::pair{0, full}, std::pair{1, last}}) {
    Result<BlockRef> got = tier->Get(Request(index, 0).key);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_TRUE(SameBytes(**got, *block));
  }
  EXPECT_EQ((*tier->Get(Request(0, 0, "empty").key))->size(), 0u);

  struct Range {
    uint64_t offset, length, expect;
  };
  const uint64_t chunk = kBlockFileChunkSize;
  for (const Range& r : std::vector<Range>{{0, 10, 10},
                                           {chunk - 7, 20, 20},    // crosses a chunk boundary
                                           {chunk, chunk, chunk},  // exactly one chunk
                                           {100, 3 * chunk, 3 * chunk},
                                           {short_size - 5, 100, 5},  // clamped at the end
                                           {short_size, 10, 0},
                                           {short_size + 100, 10, 0}}) {
    std::vector<char> out(r.length, '\0');
    Result<size_t> n = tier->Read(Request(1, 0).key, r.offset, out, true);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    ASSERT_EQ(*n, r.expect) << "offset " << r.offset;
    EXPECT_EQ(std::memcmp(out.data(), last->data() + r.offset, *n), 0) << "offset " << r.offset;
  }
  std::vector<char> tail(2 * chunk);
  ASSERT_EQ(*tier->Read(Request(0, 0).key, kBlockSize - chunk - 1, tail, true), chunk + 1);
  EXPECT_EQ(std::memcmp(tail.data(), full->data() + kBlockSize - chunk - 1, chunk + 1), 0);

  TierStats stats = tier->Stats();
  EXPECT_EQ(stats.tier, "disk:" + Sub("c"));
  EXPECT_EQ(stats.blocks, 3u);
  EXPECT_EQ(stats.inserts, 3u);
  EXPECT_EQ(stats.hits, 11u);
  EXPECT_EQ(stats.used_bytes, BytesOnDisk(Sub("c")));
  EXPECT_FALSE(tier->Get(Request(7, 0).key).ok());
  EXPECT_EQ(tier->Stats().misses, 1u);
}

TEST_F(DiskTierTest, FlippedByteCausesMissAndFileRemoval) {
  auto tier = Open({Dir(Sub("c"), 64 * kMiB)});
  ASSERT_NE(tier, nullptr);
  BlockRef block = RandomBlock(kBlockSize, 4);
  BlockRequest data_rot = Request(0, kBlockSize);
  BlockRequest header_rot = Request(1, kBlockSize);
  ASSERT_TRUE(tier->Insert(data_rot, block));
  ASSERT_TRUE(tier->Insert(header_rot, block));

  std::string file = FileOf(Sub("c"), data_rot.key);
  FlipByte(file, kBlockFileAlignment + 1234567);  // a data byte
  Result<BlockRef> got = tier->Get(data_rot.key);
  EXPECT_EQ(got.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(tier->Stats().corrupt_blocks, 1u);
  EXPECT_FALSE(fs::exists(file));
  EXPECT_FALSE(tier->Contains(data_rot.key));

  file = FileOf(Sub("c"), header_rot.key);
  FlipByte(file, 70);  // a byte of the object key, in the header
  std::vector<char> out(10);
  EXPECT_EQ(tier->Read(header_rot.key, 0, out, true).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(tier->Stats().corrupt_blocks, 2u);
  EXPECT_FALSE(fs::exists(file));
  EXPECT_EQ(tier->Stats().blocks, 0u);
  EXPECT_EQ(tier->Stats().used_bytes, 0u);

  // The policy forgot it too: the refetched block is admitted again.
  EXPECT_TRUE(tier->Insert(data_rot, block));
  EXPECT_TRUE(SameBytes(**tier->Get(data_rot.key), *block));
}

// design.md: a small read verifies only the chunks it reads; rot elsewhere is found when read.
TEST_F(DiskTierTest, RangeReadVerifiesOnlyTouchedChunks) {
  auto tier = Open({Dir(Sub("c"), 64 * kMiB)});
  ASSERT_NE(tier, nullptr);
  BlockRef block = RandomBlock(kBlockSize, 5);
  BlockRequest request = Request(0, kBlockSize);
  ASSERT_TRUE(tier->Insert(request, block));
  const uint64_t chunk = kBlockFileChunkSize;
  FlipByte(FileOf(Sub("c"), request.key), kBlockFileAlignment + 5 * chunk + 100);

  std::vector<char> out(chunk);
  ASSERT_EQ(*tier->Read(request.key, 0, out, true), chunk);
  EXPECT_EQ(std::memcmp(out.data(), block->data(), chunk), 0);
  ASSERT_TRUE(tier->Read(request.key, 6 * chunk, out, true).ok());
  EXPECT_EQ(tier->Stats().corrupt_blocks, 0u);

  EXPECT_EQ(tier->Read(request.key, 5 * chunk - 10, std::span(out).first(20), true).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(tier->Stats().corrupt_blocks, 1u);
  EXPECT_FALSE(tier->Contains(request.key));
  EXPECT_TRUE(BlockFiles(Sub("c")).empty());
}

TEST_F(DiskTierTest, ReopenFindsEarlierBlocks) {
  std::vector<DiskCacheConfig> dirs = {Dir(Sub("a"), 64 * kMiB), Dir(Sub("b"), 64 * kMiB)};
  std::vector<BlockRef> blocks;
  for (int i = 0; i < 12; ++i) blocks.push_back(RandomBlock(256 * 1024 + i, 10 + i));
  TierStats before;
  {
    auto tier = Open(dirs);
    ASSERT_NE(tier, nullptr);
    for (int i = 0; i < 12; ++i)
      ASSERT_TRUE(tier->Insert(Request(i, blocks[i]->size()), blocks[i]));
    before = tier->Stats();
  }
  EXPECT_FALSE(BlockFiles(Sub("a")).empty());  // both directories got blocks
  EXPECT_FALSE(BlockFiles(Sub("b")).empty());

  auto tier = Open(dirs);
  ASSERT_NE(tier, nullptr);
  TierStats after = tier->Stats();
  EXPECT_EQ(after.blocks, 12u);
  EXPECT_EQ(after.used_bytes, before.used_bytes);
  EXPECT_EQ(after.corrupt_blocks, 0u);
  for (int i = 0; i < 12; ++i) {
    Result<BlockRef> got = tier->Get(Request(i, 0).key);
    ASSERT_TRUE(got.ok()) << i << ": " << got.status().ToString();
    EXPECT_TRUE(SameBytes(**got, *blocks[i]));
  }
}

TEST_F(DiskTierTest, BlocksSpreadOverDirectoriesByCapacity) {
  auto tier = Open({Dir(Sub("small"), 100 * kMiB), Dir(Sub("large"), 300 * kMiB)});
  ASSERT_NE(tier, nullptr);
  BlockRef block = RandomBlock(100, 6);
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(tier->Insert(Request(i, 100), block));
  size_t small = BlockFiles(Sub("small")).size();
  EXPECT_EQ(small + BlockFiles(Sub("large")).size(), 200u);
  EXPECT_GT(small, 30u);  // 50 expected, standard deviation ~6
  EXPECT_LT(small, 70u);
}

TEST_F(DiskTierTest, UnknownFormatVersionIsRemovedOnOpen) {
  BlockRequest old = Request(0, 1000);
  BlockRequest kept = Request(1, 1000);
  {
    auto tier = Open({Dir(Sub("c"), 64 * kMiB)});
    ASSERT_NE(tier, nullptr);
    ASSERT_TRUE(tier->Insert(old, RandomBlock(1000, 7)));
    ASSERT_TRUE(tier->Insert(kept, RandomBlock(1000, 8)));
  }
  std::string file = FileOf(Sub("c"), old.key);
  FlipByte(file, 4);  // the format version field
  auto tier = Open({Dir(Sub("c"), 64 * kMiB)});
  ASSERT_NE(tier, nullptr);
  EXPECT_FALSE(fs::exists(file));
  EXPECT_FALSE(tier->Contains(old.key));
  EXPECT_TRUE(tier->Contains(kept.key));
  EXPECT_EQ(tier->Stats().corrupt_blocks, 0u);  // an upgrade, not rot
  EXPECT_EQ(tier->Stats().blocks, 1u);
}

TEST_F(DiskTierTest, TempFilesRemovedOnOpen) {
  {
    auto tier = Open({Dir(Sub("c"), 64 * kMiB)});
    ASSERT_NE(tier, nullptr);
    ASSERT_TRUE(tier->Insert(Request(0, 1000), RandomBlock(1000, 9)));
  }
  std::string folder = Sub("c") + "/blocks/ab/cd";
  fs::create_directories(folder);
  std::ofstream(folder + "/0123-4.blk.tmp.99.0") << "half a block";
  std::ofstream(folder + "/0123-5.blk") << "not a block file at all";  // corrupt header
  std::ofstream(folder + "/README") << "someone else's";
  auto tier = Open({Dir(Sub("c"), 64 * kMiB)});
  ASSERT_NE(tier, nullptr);
  EXPECT_EQ(TempFiles(Sub("c")), 0u);
  EXPECT_FALSE(fs::exists(folder + "/0123-5.blk"));
  EXPECT_TRUE(fs::exists(folder + "/README"));  // not ours: left alone
  EXPECT_EQ(tier->Stats().corrupt_blocks, 1u);
  EXPECT_TRUE(tier->Contains(Request(0, 0).key));
}

TEST_F(DiskTierTest, CapacityNeverExceeded) {
  const uint64_t size = 256 * 1024;
  const uint64_t capacity = 10 * (size + kBlockFileAlignment) - 1;  // 9 blocks fit
  for (std::string_view policy : {"lru", "tinylfu"}) {
    SCOPED_TRACE(policy);
    std::string path = Sub(std::string(policy));
    auto tier = Open({Dir(path, capacity)}, policy);
    ASSERT_NE(tier, nullptr);
    BlockRef block = RandomBlock(size, 11);
    for (int i = 0; i < 200; ++i) {
      tier->Insert(Request(i % 60, size), block);
      if (i % 3 == 0) (void)tier->Get(Request(i % 7, 0).key);  // some reuse for the policy
      TierStats stats = tier->Stats();
      ASSERT_LE(stats.used_bytes, capacity);
      ASSERT_LE(BytesOnDisk(path), capacity);
      ASSERT_EQ(BlockFiles(path).size(), stats.blocks);
    }
    EXPECT_GT(tier->Stats().evictions, 0u);
  }
}

TEST_F(DiskTierTest, ConcurrentInsertsAndReadsKeepCapacityAndBytes) {
  const uint64_t size = 64 * 1024 + 100;
  const uint64_t capacity = 40 * (size + 2 * kBlockFileAlignment);
  auto tier = Open({Dir(Sub("a"), capacity), Dir(Sub("b"), capacity)}, "tinylfu");
  ASSERT_NE(tier, nullptr);
  std::vector<BlockRef> blocks;
  for (int i = 0; i < 200; ++i) blocks.push_back(RandomBlock(size, 100 + i));
  std::atomic<int> bad_bytes{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<char> out(1000);
      for (int n = 0; n < 1500; ++n) {
        int i = static_cast<int>(rng() % 200);
        BlockRequest request = Request(i, size);
        if (rng() % 2) {
          tier->Insert(request, blocks[i]);
        } else if (Result<size_t> r = tier->Read(request.key, 65000, out, true); r.ok()) {
          bad_bytes += std::memcmp(out.data(), blocks[i]->data() + 65000, *r) != 0;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(bad_bytes.load(), 0);
  TierStats stats = tier->Stats();
  EXPECT_LE(stats.used_bytes, 2 * capacity);
  EXPECT_EQ(stats.used_bytes, BytesOnDisk(Sub("a")) + BytesOnDisk(Sub("b")));
  EXPECT_EQ(stats.blocks, BlockFiles(Sub("a")).size() + BlockFiles(Sub("b")).size());
  EXPECT_EQ(TempFiles(dir_.path()), 0u);
  EXPECT_EQ(stats.corrupt_blocks, 0u);
}

// The policy decides before the block is written: a declined block leaves no file (nor a temp
// file) and counts as rejected, not as an insert later evicted. Inline and write-behind alike.
TEST_F(DiskTierTest, RejectedBlockIsNeverWritten) {
  const uint64_t size = 64 * 1024;
  const uint64_t capacity = 8 * (size + 2 * kBlockFileAlignment);  // 8 blocks and their headers
  for (uint64_t write_behind : {uint64_t{0}, 16 * kMiB}) {
    SCOPED_TRACE(write_behind);
    std::string path = Sub("wb" + std::to_string(write_behind));
    Result<std::unique_ptr<DiskTier>> opened =
        DiskTier::Open({Dir(path, capacity)}, "tinylfu", /*seed=*/0, write_behind);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    std::unique_ptr<DiskTier> tier = std::move(opened).value();
    BlockRef block = RandomBlock(size, 21);
    uint64_t held = 0;
    while (tier->Insert(Request(held, size), block)) ++held;  // until full
    tier->Flush();
    ASSERT_GE(held, 7u);
    const BlockRequest late = Request(100, size);
    EXPECT_FALSE(tier->Insert(late, block)) << "as frequent as any block held";
    EXPECT_FALSE(tier->Contains(late.key)) << "not even queued";
    tier->Flush();
    TierStats stats = tier->Stats();
    EXPECT_EQ(stats.inserts, held);
    EXPECT_EQ(stats.rejected, 2u);  // the one that did not fit, and `late`
    EXPECT_EQ(stats.evictions, 0u);
    EXPECT_EQ(stats.write_errors, 0u);
    EXPECT_EQ(FileOf(path, late.key), "");
    EXPECT_EQ(BlockFiles(path).size(), held);
    EXPECT_EQ(TempFiles(path), 0u);
    EXPECT_EQ(stats.used_bytes, BytesOnDisk(path));
  }
}

// A block read often enough still replaces a held one: written once admitted, its victim's file
// removed.
TEST_F(DiskTierTest, FrequentBlockIsAdmittedInPlaceOfAVictim) {
  const uint64_t size = 64 * 1024;
  const uint64_t capacity = 4 * (size + 2 * kBlockFileAlignment);
  auto tier = Open({Dir(Sub("c"), capacity)}, "tinylfu");
  ASSERT_NE(tier, nullptr);
  BlockRef block = RandomBlock(size, 22);
  uint64_t held = 0;
  while (tier->Insert(Request(held, size), block)) ++held;
  const BlockRequest hot = Request(100, size);
  int tries = 1;
  while (!tier->Insert(hot, block) && tries < 10) ++tries;
  EXPECT_EQ(tries, 4) << "admitted once more than 2 counts above the victim's 1";
  EXPECT_NE(FileOf(Sub("c"), hot.key), "");
  TierStats stats = tier->Stats();
  EXPECT_EQ(stats.evictions, 1u);
  EXPECT_EQ(stats.inserts, held + 1);
  EXPECT_EQ(BlockFiles(Sub("c")).size(), held);
}

TEST_F(DiskTierTest, EraseRemovesTheFileAndTouchCountsNoHit) {
  auto tier = Open({Dir(Sub("c"), 64 * kMiB)});
  ASSERT_NE(tier, nullptr);
  BlockRequest request = Request(0, 1000);
  ASSERT_TRUE(tier->Insert(request, RandomBlock(1000, 12)));
  tier->Touch(request.key);
  EXPECT_EQ(tier->Stats().hits, 0u);
  tier->Erase(request.key);
  EXPECT_FALSE(tier->Contains(request.key));
  EXPECT_TRUE(BlockFiles(Sub("c")).empty());
  EXPECT_EQ(tier->Stats().used_bytes, 0u);
}

TEST_F(DiskTierTest, OpenFailsNamingAnUnusableDirectory) {
  std::ofstream(Sub("file")) << "x";
  Result<std::unique_ptr<DiskTier>> tier = DiskTier::Open({Dir(Sub("file/cache"), kMiB)}, "lru");
  ASSERT_FALSE(tier.ok());
  EXPECT_NE(tier.status().message().find(Sub("file/cache")), std::string::npos)
      << tier.status().ToString();
  EXPECT_FALSE(DiskTier::Open({Dir(Sub("c"), kMiB)}, "no-such-policy").ok());
}

TEST_F(DiskTierTest, DirectoryInUseByAnotherTierIsRefused) {
  auto first = Open({Dir(Sub("c"), kMiB)});
  ASSERT_NE(first, nullptr);
  Result<std::unique_ptr<DiskTier>> second = DiskTier::Open({Dir(Sub("c"), kMiB)}, "lru");
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("in use"), std::string::npos);
}

// A 64 MiB file system with a 48 MiB floor holds three 4 MiB blocks; the capacity (1 GiB) is
// lowered to what fits above the floor, and blocks are declined when other files eat the room.
TEST_F(DiskTierTest, FreeSpaceFloorRespected) {
  const std::string mnt = Sub("mnt");
  ScopedTmpfs tmpfs(mnt, 64 * kMiB);
  ASSERT_MOUNTED(tmpfs);
  const uint64_t floor = 48 * kMiB;
  auto tier = Open({Dir(mnt + "/cache", 1024 * kMiB, floor)});
  ASSERT_NE(tier, nullptr);
  EXPECT_LE(tier->Stats().capacity_bytes, 16 * kMiB);
  BlockRef block = RandomBlock(kBlockSize, 13);
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(tier->Insert(Request(i, kBlockSize), block)) << i;  // older blocks make room
    ASSERT_GE(FreeBytes(mnt), floor) << "after block " << i;
    ASSERT_LE(tier->Stats().blocks, 3u);
  }
  EXPECT_EQ(tier->Stats().blocks, 3u);
  EXPECT_TRUE(tier->Contains(Request(9, 0).key));

  // Another program takes 8 MiB: writing a block now would cross the floor, so it is declined.
  std::ofstream(mnt + "/other") << std::string(8 * kMiB, 'x');
  uint64_t free_before = FreeBytes(mnt);
  uint64_t rejected = tier->Stats().rejected;
  EXPECT_FALSE(tier->Insert(Request(20, kBlockSize), block));
  EXPECT_EQ(tier->Stats().rejected, rejected + 1);
  EXPECT_GE(FreeBytes(mnt), free_before);
  EXPECT_EQ(TempFiles(mnt), 0u);

  fs::remove(mnt + "/other");
  EXPECT_TRUE(tier->Insert(Request(21, kBlockSize), block));
  EXPECT_GE(FreeBytes(mnt), floor);

  // Reopened on a fuller disk, the directory gives back space until the floor holds again.
  tier.reset();
  std::ofstream(mnt + "/other") << std::string(10 * kMiB, 'x');
  tier = Open({Dir(mnt + "/cache", 1024 * kMiB, floor)});
  ASSERT_NE(tier, nullptr);
  EXPECT_GE(FreeBytes(mnt), floor);
  EXPECT_EQ(tier->Stats().blocks, 1u);
  tier.reset();
}

TEST_F(DiskTierTest, EnospcWhileWritingIsCountedNotFatal) {
  const std::string mnt = Sub("mnt");
  ScopedTmpfs tmpfs(mnt, 9 * kMiB);
  ASSERT_MOUNTED(tmpfs);
  auto tier = Open({Dir(mnt + "/cache", 1024 * kMiB, /*min_free_bytes=*/0)});
  ASSERT_NE(tier, nullptr);
  BlockRef a = RandomBlock(kBlockSize, 14);
  BlockRef b = RandomBlock(kBlockSize, 15);
  ASSERT_TRUE(tier->Insert(Request(0, kBlockSize), a));
  ASSERT_TRUE(tier->Insert(Request(1, kBlockSize), b));
  EXPECT_FALSE(tier->Insert(Request(2, kBlockSize), a));  // ENOSPC

  TierStats stats = tier->Stats();
  EXPECT_EQ(stats.write_errors, 1u);
  EXPECT_EQ(stats.blocks, 2u);
  EXPECT_EQ(TempFiles(mnt), 0u);
  EXPECT_EQ(BlockFiles(mnt).size(), 2u);
  EXPECT_FALSE(tier->Contains(Request(2, 0).key));
  EXPECT_TRUE(SameBytes(**tier->Get(Request(0, 0).key), *a));
  EXPECT_TRUE(SameBytes(**tier->Get(Request(1, 0).key), *b));
  tier.reset();
}

TEST_F(DiskTierTest, WriteBehindServesQueuedBlocksAndFlushesThemToDisk) {
  Result<std::unique_ptr<DiskTier>> opened =
      DiskTier::Open({Dir(Sub("c"), 64 * kMiB)}, "lru", /*seed=*/0, /*write_behind=*/16 * kMiB);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<DiskTier> tier = std::move(opened).value();
  std::vector<BlockRef> blocks;
  for (uint64_t i = 0; i < 8; ++i) {  // 32 MiB: half go to the queue, the rest are written inline
    blocks.push_back(RandomBlock(kBlockSize, 100 + i));
    ASSERT_TRUE(tier->Insert(Request(i, kBlockSize), blocks.back()));
  }
  for (uint64_t i = 0; i < 8; ++i) {  // queued or written, every block reads back the same
    ASSERT_TRUE(tier->Contains(Request(i, 0).key)) << i;
    Result<BlockRef> got = tier->Get(Request(i, 0).key);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_TRUE(SameBytes(**got, *blocks[i])) << i;
    char buf[100];
    Result<size_t> n = tier->Read(Request(i, 0).key, kBlockSize - 50, buf, true);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    ASSERT_EQ(*n, 50u);
    EXPECT_EQ(std::memcmp(buf, blocks[i]->data() + kBlockSize - 50, 50), 0) << i;
  }
  tier->Erase(Request(7, 0).key);
  tier->Flush();
  EXPECT_EQ(BlockFiles(Sub("c")).size(), 7u);
  EXPECT_EQ(TempFiles(Sub("c")), 0u);
  EXPECT_FALSE(tier->Contains(Request(7, 0).key));
  EXPECT_EQ(tier->Stats().blocks, 7u);

  // Queue again and close at once: the destructor writes what was accepted.
  BlockRef late = RandomBlock(kBlockSize, 200);
  ASSERT_TRUE(tier->Insert(Request(9, kBlockSize), late));
  tier.reset();
  auto reopened = Open({Dir(Sub("c"), 64 * kMiB)});
  ASSERT_NE(reopened, nullptr);
  Result<BlockRef> got = reopened->Get(Request(9, 0).key);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(SameBytes(**got, *late));
  EXPECT_EQ(reopened->Stats().blocks, 8u);
}

}  // namespace
}  // namespace lakecache
