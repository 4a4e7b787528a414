#include "cache/block_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <xxhash.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "support/test_servers.h"

namespace lakecache {
namespace {

namespace fs = std::filesystem;

std::vector<char> RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<char> out(n);
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v = rng();
    std::memcpy(out.data() + i, &v, std::min<size_t>(8, n - i));
  }
  return out;
}

BlockRequest Request(std::string object_key, uint64_t index, uint64_t length) {
  BlockRequest r;
  r.key = BlockKey{MakeContentId("ns", object_key, "etag-1", 4 << 20), index};
  r.object_key = std::move(object_key);
  r.etag = "etag-1";
  r.offset = index * (4 << 20);
  r.length = length;
  return r;
}

size_t TempFilesIn(const std::string& dir) {
  size_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    n += IsBlockFileTempName(e.path().filename().string());
  }
  return n;
}

class BlockFileTest : public ::testing::Test {
 protected:
  std::string PathOf(const char* name) { return dir_.path() + "/" + name; }
  testing::TempDir dir_;
};

TEST_F(BlockFileTest, WriteThenOpenRoundTripsHeaderAndData) {
  std::vector<char> data = RandomBytes(300 * 1024 + 17, 1);
  BlockRequest request = Request("train/shard-0001.tfrecord", 3, data.size());
  std::string path = PathOf("sub/dir/a.blk");  // parents are created
  ASSERT_TRUE(WriteBlockFile(path, request, data).ok());

  Result<BlockFile> file = BlockFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const BlockFileHeader& h = file->header();
  EXPECT_EQ(h.key, request.key);
  EXPECT_EQ(h.object_key, request.object_key);
  EXPECT_EQ(h.etag, "etag-1");
  EXPECT_EQ(h.data_length, data.size());
  EXPECT_EQ(h.chunk_size, kBlockFileChunkSize);
  EXPECT_EQ(h.data_offset, kBlockFileAlignment);
  EXPECT_EQ(h.chunk_checksums.size(), 5u);
  Result<BlockRef> all = file->ReadAll();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(std::memcmp((*all)->data(), data.data(), data.size()), 0);
  EXPECT_EQ(TempFilesIn(dir_.path()), 0u);
}

TEST_F(BlockFileTest, FileSizeIsHeaderPageAndDataInWholePages) {
  EXPECT_EQ(BlockFileSize(30, 10, 4 << 20), (4u << 20) + 4096);
  EXPECT_EQ(BlockFileSize(30, 10, 1), 8192u);
  EXPECT_EQ(BlockFileSize(30, 10, 0), 4096u);
  std::vector<char> data = RandomBytes(100000, 2);
  std::string path = PathOf("b.blk");
  BlockRequest request = Request("k", 0, data.size());
  ASSERT_TRUE(WriteBlockFile(path, request, data).ok());
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_LE(static_cast<uint64_t>(st.st_blocks) * 512,
            BlockFileSize(request.object_key.size(), request.etag.size(), data.size()));
}

TEST_F(BlockFileTest, LongObjectKeyPushesDataToTheNextPage) {
  std::vector<char> data = RandomBytes(70000, 3);
  BlockRequest request = Request(std::string(5000, 'k'), 0, data.size());
  std::string path = PathOf("long.blk");
  ASSERT_TRUE(WriteBlockFile(path, request, data).ok());
  Result<BlockFile> file = BlockFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->header().data_offset, 2 * kBlockFileAlignment);
  EXPECT_EQ(file->header().object_key, request.object_key);
  std::vector<char> out(100);
  ASSERT_EQ(*file->Read(65500, out), 100u);
  EXPECT_EQ(std::memcmp(out.data(), data.data() + 65500, 100), 0);
}

TEST_F(BlockFileTest, TruncatedFileIsCorruption) {
  std::vector<char> data = RandomBytes(200000, 4);
  std::string path = PathOf("t.blk");
  ASSERT_TRUE(WriteBlockFile(path, Request("k", 0, data.size()), data).ok());
  fs::resize_file(path, 100000);
  Result<BlockFile> file = BlockFile::Open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kCorruption);
  fs::resize_file(path, 10);
  EXPECT_EQ(BlockFile::Open(path).status().code(), StatusCode::kCorruption);
}

// Found by fuzz/block_file_fuzz: a header whose data offset plus length wraps past 2^64 (its
// checksum right) passed the size check, and ReadAll then asked for 2^64 bytes.
TEST_F(BlockFileTest, HeaderLengthsThatWrapPastTheFileAreCorruption) {
  std::string path = PathOf("wrap.blk");
  ASSERT_TRUE(WriteBlockFile(path, Request("k", 0, 0), {}).ok());
  std::string bytes(kBlockFileAlignment, '\0');
  std::ifstream(path, std::ios::binary).read(bytes.data(), bytes.size());
  // Data length at byte 40 (docs/cache-format.md); the rounding of the chunk count wraps as
  // well, so the header still lists no chunk checksums and its lengths agree. Then re-sign it.
  uint64_t data_length = UINT64_MAX - 3999;
  std::memcpy(bytes.data() + 40, &data_length, 8);
  uint32_t header_length = 0;
  std::memcpy(&header_length, bytes.data() + 8, 4);
  uint64_t sum = XXH3_64bits(bytes.data(), header_length - 8);
  std::memcpy(bytes.data() + header_length - 8, &sum, 8);
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());

  EXPECT_EQ(BlockFile::Open(path).status().code(), StatusCode::kCorruption);
  EXPECT_EQ(BlockFile::ReadWhole(path, Request("k", 0, 0).key).status().code(),
            StatusCode::kCorruption);
}

TEST_F(BlockFileTest, MissingFileIsNotFound) {
  EXPECT_EQ(BlockFile::Open(PathOf("none.blk")).status().code(), StatusCode::kNotFound);
}

TEST_F(BlockFileTest, FailedWriteLeavesNoTempFile) {
  std::string path = PathOf("c.blk");
  fs::create_directory(path);  // the rename onto a directory fails
  std::vector<char> data = RandomBytes(1000, 5);
  Status st = WriteBlockFile(path, Request("k", 0, data.size()), data);
  EXPECT_EQ(st.code(), StatusCode::kIoError) << st.ToString();
  EXPECT_EQ(TempFilesIn(dir_.path()), 0u);
}

// ReadWhole reads a small block's file in one call and a large one through Open; both give the
// same verified bytes.
TEST_F(BlockFileTest, ReadWholeReturnsTheDataOfSmallAndLargeBlocks) {
  for (uint64_t size : {uint64_t{1}, uint64_t{4096}, uint64_t{100000}, kSmallBlockMax,
                        kSmallBlockMax + 1, uint64_t{3 << 20}}) {
    std::vector<char> data = RandomBytes(size, size);
    BlockRequest request = Request("images/cat-" + std::to_string(size) + ".jpg", 0, size);
    std::string path = PathOf(("w" + std::to_string(size) + ".blk").c_str());
    ASSERT_TRUE(WriteBlockFile(path, request, data).ok());
    Result<BlockRef> block = BlockFile::ReadWhole(path, request.key);
    ASSERT_TRUE(block.ok()) << size << ": " << block.status().ToString();
    ASSERT_EQ((*block)->size(), size);
    EXPECT_EQ(std::memcmp((*block)->data(), data.data(), size), 0) << size;
  }
}

TEST_F(BlockFileTest, ReadWholeOfALongKeyHeaderReadsTheHeaderWhole) {
  std::vector<char> data = RandomBytes(70000, 6);
  BlockRequest request = Request(std::string(5000, 'k'), 0, data.size());
  std::string path = PathOf("long-whole.blk");
  ASSERT_TRUE(WriteBlockFile(path, request, data).ok());
  Result<BlockRef> block = BlockFile::ReadWhole(path, request.key);
  ASSERT_TRUE(block.ok()) << block.status().ToString();
  EXPECT_EQ(std::memcmp((*block)->data(), data.data(), data.size()), 0);
}

TEST_F(BlockFileTest, ReadWholeRefusesAnotherBlockRottenBytesAndATruncatedFile) {
  std::vector<char> data = RandomBytes(150000, 7);
  BlockRequest request = Request("k", 0, data.size());
  std::string path = PathOf("r.blk");
  ASSERT_TRUE(WriteBlockFile(path, request, data).ok());
  EXPECT_EQ(BlockFile::ReadWhole(path, Request("other", 0, data.size()).key).status().code(),
            StatusCode::kCorruption);
  {  // one flipped byte in the data's last chunk
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(kBlockFileAlignment + 140000);
    f.put(static_cast<char>(data[140000] ^ 0x20));
  }
  Result<BlockRef> rotten = BlockFile::ReadWhole(path, request.key);
  EXPECT_EQ(rotten.status().code(), StatusCode::kCorruption) << rotten.status().ToString();
  fs::resize_file(path, 100000);
  EXPECT_EQ(BlockFile::ReadWhole(path, request.key).status().code(), StatusCode::kCorruption);
  EXPECT_EQ(BlockFile::ReadWhole(PathOf("none.blk"), request.key).status().code(),
            StatusCode::kNotFound);
}

TEST_F(BlockFileTest, TempNamesAreRecognised) {
  EXPECT_TRUE(IsBlockFileTempName("0123-4.blk.tmp.77.0"));
  EXPECT_FALSE(IsBlockFileTempName("0123-4.blk"));
  EXPECT_FALSE(IsBlockFileTempName("notes.tmp"));
}

}  // namespace
}  // namespace lakecache
