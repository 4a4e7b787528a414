// Feeds the bytes as a cached block file (cache/block_file.h) to BlockFile::Open, Read, ReadAll and
// ReadWhole; a mode byte can first repair the checksums, so the decoder behind them is reached, or
// write the block with WriteBlockFile. Asserts bad files only fail (kCorruption, kUnimplemented),
// an accepted header's lengths fit the file, and what is written reads back unchanged.
#include <fuzzer/FuzzedDataProvider.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cache/block_file.h"

namespace lakecache {
namespace {

constexpr uint8_t kFixHeaderSum = 1;  // mode bits
constexpr uint8_t kFixChunkSums = 2;
constexpr uint8_t kWrite = 4;
constexpr size_t kMaxPadPages = 20;  // files up to 80 KiB: past one 64 KiB chunk

// One file per process, reused by every input; the folder goes at exit.
struct Scratch {
  std::filesystem::path dir;
  std::string path;
  Scratch() {
    dir = std::filesystem::temp_directory_path() /
          ("lakecache-block-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    path = (dir / "block.blk").string();
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

template <typename T>
T Load(const std::string& b, size_t at) {
  T v{};
  if (at + sizeof(T) <= b.size()) std::memcpy(&v, b.data() + at, sizeof(T));
  return v;
}

// The header checksum: xxh3 of the header's bytes before its last 8 (layout:
// docs/cache-format.md), written where the length field says the header ends.
void FixHeaderSum(std::string& file) {
  uint32_t length = Load<uint32_t>(file, 8);
  if (length < 8 || length > file.size()) return;
  uint64_t sum = XXH3_64bits(file.data(), length - 8);
  std::memcpy(file.data() + length - 8, &sum, 8);
}

void FixChunkSums(std::string& file) {
  uint64_t data_length = Load<uint64_t>(file, 40), data_offset = Load<uint64_t>(file, 48);
  uint64_t sums_at = 64 + uint64_t{Load<uint32_t>(file, 56)} + Load<uint32_t>(file, 60);
  if (data_offset > file.size() || data_length > file.size() - data_offset) return;
  uint64_t chunks = (data_length + kBlockFileChunkSize - 1) / kBlockFileChunkSize;
  if (sums_at + 8 * chunks > file.size()) return;
  for (uint64_t i = 0; i < chunks; ++i) {
    uint64_t at = i * kBlockFileChunkSize;
    uint64_t sum = XXH3_64bits(file.data() + data_offset + at,
                               std::min(kBlockFileChunkSize, data_length - at));
    std::memcpy(file.data() + sums_at + 8 * i, &sum, 8);
  }
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
}

void CheckFailure(const Status& s) {
  if (s.code() != StatusCode::kCorruption && s.code() != StatusCode::kUnimplemented) {
    __builtin_trap();
  }
}

// The header Open accepted describes bytes that are in the file.
void CheckHeader(const BlockFileHeader& h, uint64_t file_size) {
  if (h.chunk_size != kBlockFileChunkSize || h.data_offset % kBlockFileAlignment != 0) {
    __builtin_trap();
  }
  if (h.data_offset > file_size || h.data_length > file_size - h.data_offset) __builtin_trap();
  uint64_t chunks = h.data_length / h.chunk_size + (h.data_length % h.chunk_size != 0);
  if (h.chunk_checksums.size() != chunks) __builtin_trap();
}

// Opens and reads the file every way; returns the data when every way agrees on it.
std::optional<std::vector<char>> ReadBack(const std::string& path, uint64_t file_size,
                                          const BlockKey& fallback_key) {
  Result<BlockFile> file = BlockFile::Open(path);
  if (!file.ok()) {
    CheckFailure(file.status());
    CheckFailure(BlockFile::ReadWhole(path, fallback_key).status());
    return std::nullopt;
  }
  const BlockFileHeader& h = file->header();
  CheckHeader(h, file_size);
  Result<BlockRef> all = file->ReadAll();
  Result<BlockRef> whole = BlockFile::ReadWhole(path, h.key);
  if (!all.ok() || !whole.ok()) {
    if (!all.ok()) CheckFailure(all.status());
    if (!whole.ok()) CheckFailure(whole.status());
    if (all.ok() != whole.ok()) __builtin_trap();  // both verify every chunk
    return std::nullopt;
  }
  std::span<const char> bytes = (*all)->bytes();
  if (bytes.size() != h.data_length || !std::ranges::equal(bytes, (*whole)->bytes())) {
    __builtin_trap();
  }
  // A range across the first chunk boundary, clamped at the end.
  std::vector<char> range(100);
  uint64_t offset = h.chunk_size - 50;
  Result<size_t> got = file->Read(offset, range);
  if (!got.ok()) __builtin_trap();
  size_t want = offset < h.data_length ? std::min<uint64_t>(100, h.data_length - offset) : 0;
  if (*got != want || !std::equal(range.begin(), range.begin() + want, bytes.begin() + offset)) {
    __builtin_trap();
  }
  return std::vector<char>(bytes.begin(), bytes.end());
}

// WriteBlockFile, then every read returns the same block.
void RoundTrip(const std::string& path, FuzzedDataProvider& in) {
  BlockRequest request;
  request.object_key = in.ConsumeRandomLengthString(300);
  request.etag = in.ConsumeRandomLengthString(80);
  request.key = {{in.ConsumeIntegral<uint64_t>(), in.ConsumeIntegral<uint64_t>()},
                 in.ConsumeIntegral<uint64_t>()};
  std::vector<char> data(in.ConsumeIntegralInRange<size_t>(0, 3 * kBlockFileChunkSize + 100));
  std::string pattern = in.ConsumeRemainingBytesAsString();
  for (size_t i = 0; i < data.size() && !pattern.empty(); ++i)
    data[i] = pattern[i % pattern.size()];
  if (!WriteBlockFile(path, request, data).ok()) __builtin_trap();
  // BlockFileSize charges whole pages: the file itself ends with the data.
  uint64_t file_size = std::filesystem::file_size(path);
  uint64_t charged = BlockFileSize(request.object_key.size(), request.etag.size(), data.size());
  if (file_size > charged || charged - file_size >= kBlockFileAlignment) __builtin_trap();
  std::optional<std::vector<char>> back = ReadBack(path, file_size, request.key);
  if (!back || *back != data) __builtin_trap();
  Result<BlockFile> file = BlockFile::Open(path);
  if (!file.ok() || file->header().key != request.key ||
      file->header().object_key != request.object_key || file->header().etag != request.etag) {
    __builtin_trap();
  }
}

}  // namespace
}  // namespace lakecache

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lakecache;
  static Scratch scratch;
  FuzzedDataProvider in(data, size);
  uint8_t mode = in.ConsumeIntegral<uint8_t>();
  if (mode & kWrite) {
    RoundTrip(scratch.path, in);
    return 0;
  }
  size_t pad_pages = in.ConsumeIntegralInRange<size_t>(0, kMaxPadPages);
  std::string file = in.ConsumeRemainingBytesAsString();
  if (file.size() < pad_pages * kBlockFileAlignment) file.resize(pad_pages * kBlockFileAlignment);
  if (mode & kFixChunkSums) FixChunkSums(file);
  if (mode & (kFixHeaderSum | kFixChunkSums)) FixHeaderSum(file);
  WriteFile(scratch.path, file);
  // A key that is not the file's: ReadWhole must refuse it or never get that far.
  BlockKey other{{Load<uint64_t>(file, 16) + 1, Load<uint64_t>(file, 24)},
                 Load<uint64_t>(file, 32)};
  (void)ReadBack(scratch.path, file.size(), other);
  if (Result<BlockRef> wrong = BlockFile::ReadWhole(scratch.path, other); wrong.ok()) {
    __builtin_trap();
  }
  return 0;
}
