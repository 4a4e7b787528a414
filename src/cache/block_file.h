// BlockFile: the on-disk format of one cached block (layout: docs/cache-format.md).
//
// A file is a checksummed header (identity, lengths, one xxh3-64 per 64 KiB chunk of data) followed
// by the data, which starts on a 4 KiB boundary. WriteBlockFile is atomic: a reader sees the whole
// file or none. Every read verifies what it returns, so rotten bytes surface as kCorruption, never
// as data. An open BlockFile owns its descriptor; Read and ReadAll use pread and are safe from many
// threads.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cache/block.h"
#include "cache/block_key.h"
#include "cache/block_source.h"
#include "common/result.h"
#include "common/scoped_fd.h"

namespace lakecache {

inline constexpr uint32_t kBlockFileVersion = 1;
inline constexpr uint64_t kBlockFileChunkSize = 64 * 1024;
inline constexpr uint64_t kBlockFileAlignment = 4096;  // data start and file size granularity
inline constexpr std::string_view kBlockFileSuffix = ".blk";
// A block of at most this many bytes is small: read from disk whole, in one system call
// (BlockFile::ReadWhole), never range by range.
inline constexpr uint64_t kSmallBlockMax = 1ull << 20;

struct BlockFileHeader {
  BlockKey key;
  std::string object_key;
  std::string etag;
  uint64_t data_length = 0;
  uint64_t chunk_size = kBlockFileChunkSize;
  uint64_t data_offset = 0;               // a multiple of kBlockFileAlignment
  std::vector<uint64_t> chunk_checksums;  // xxh3-64 of each chunk; the last chunk may be short
};

// Bytes a block file takes on disk (header, padding and data, in whole 4 KiB pages): what a tier
// charges against its capacity.
uint64_t BlockFileSize(size_t object_key_length, size_t etag_length, uint64_t data_length);

// Writes `data` as the block of `request` to `path` through a temp file in the same directory
// (created with its parents if missing) and a rename. On error nothing is left behind; ENOSPC and
// EDQUOT are kNoSpace, other failures kIoError.
Status WriteBlockFile(const std::string& path, const BlockRequest& request,
                      std::span<const char> data);

// True for the name of a temp file WriteBlockFile did not finish (a crash): safe to delete.
bool IsBlockFileTempName(std::string_view file_name);

class BlockFile {
 public:
  // Opens `path` and verifies its header. kNotFound if there is no such file; kCorruption for a bad
  // magic, checksum or length (including a truncated file); kUnimplemented for a file of another
  // format version, which the caller should delete (the block can be fetched again).
  static Result<BlockFile> Open(const std::string& path);

  BlockFile(BlockFile&& other) noexcept = default;
  BlockFile& operator=(BlockFile&& other) noexcept = default;
  ~BlockFile() = default;

  const BlockFileHeader& header() const { return header_; }

  // Copies [offset, offset + dst.size()) of the data into dst, clamped to the data's end, verifying
  // only the chunks the range touches. Returns the bytes copied; kCorruption on a mismatch (dst
  // then holds unspecified bytes).
  Result<size_t> Read(uint64_t offset, std::span<char> dst) const;

  // The whole data in a new Block, every chunk verified.
  Result<BlockRef> ReadAll() const;

  // The whole data of the block file at `path`, which must hold block `key` (else kCorruption),
  // every chunk verified; errors as Open's. A small file (a one-block object: most of a data set
  // of images) is read with one system call, header and data at once, where Open and ReadAll
  // take three and two disk reads.
  static Result<BlockRef> ReadWhole(const std::string& path, const BlockKey& key);

  // True once the file has been deleted (its descriptor is all that keeps it on disk).
  bool Unlinked() const;

 private:
  BlockFile(int fd, std::string path, BlockFileHeader header);
  // Reads chunks [first, last] into out (room for their bytes) and verifies them.
  Status ReadChunks(uint64_t first, uint64_t last, char* out) const;

  ScopedFd fd_;
  ScopedFd direct_fd_;  // the same file opened with O_DIRECT, or none
  std::string path_;    // for messages
  BlockFileHeader header_;
};

}  // namespace lakecache
