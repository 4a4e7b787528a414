#include "cache/block_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <new>
#include <system_error>
#include <utility>

namespace lakecache {
namespace {

// Fields are stored little-endian; copying them as host integers is only right on such hosts.
static_assert(std::endian::native == std::endian::little, "block files are little-endian");

constexpr uint32_t kMagic = 0x4B42434C;  // the bytes "LCBK"
// magic, version, header length, chunk size, content id (2), index, data length, data offset,
// object key length, etag length: see docs/cache-format.md.
constexpr size_t kFixedLength = 64;
// Bounds what a corrupt length field can make us allocate; a real header is ~0.6 KiB + the key.
constexpr size_t kMaxHeaderLength = 1 << 20;
// WriteBlockFile writes "<name>.blk" through "<name>.blk.tmp.<pid>.<n>".
constexpr std::string_view kTempMarker = ".blk.tmp.";

uint64_t RoundUp(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }
uint64_t ChunkCount(uint64_t data_length) {
  return (data_length + kBlockFileChunkSize - 1) / kBlockFileChunkSize;
}

size_t HeaderLength(size_t object_key_length, size_t etag_length, uint64_t data_length) {
  return kFixedLength + object_key_length + etag_length + 8 * ChunkCount(data_length) + 8;
}

Status ErrnoStatus(int err, std::string_view what, const std::string& path) {
  std::string msg = path + ": " + std::string(what) + ": " + std::generic_category().message(err);
  if (err == ENOENT) return Status::NotFound(std::move(msg));
  if (err == ENOSPC || err == EDQUOT) return Status::NoSpace(std::move(msg));
  return Status::IoError(std::move(msg));
}

template <typename T>
void Put(std::string* out, T value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(value));
}

// Reads fields front to back, refusing to run past the end.
class Cursor {
 public:
  explicit Cursor(std::string_view bytes) : rest_(bytes) {}
  template <typename T>
  bool Get(T* value) {
    if (rest_.size() < sizeof(T)) return false;
    std::memcpy(value, rest_.data(), sizeof(T));
    rest_.remove_prefix(sizeof(T));
    return true;
  }
  bool GetString(size_t n, std::string* value) {
    if (rest_.size() < n) return false;
    value->assign(rest_.substr(0, n));
    rest_.remove_prefix(n);
    return true;
  }

 private:
  std::string_view rest_;
};

// The header followed by zero padding up to the data offset.
std::string EncodeHeader(const BlockRequest& request, std::span<const char> data) {
  size_t length = HeaderLength(request.object_key.size(), request.etag.size(), data.size());
  std::string out;
  out.reserve(RoundUp(length, kBlockFileAlignment));
  Put<uint32_t>(&out, kMagic);
  Put<uint32_t>(&out, kBlockFileVersion);
  Put<uint32_t>(&out, static_cast<uint32_t>(length));
  Put<uint32_t>(&out, static_cast<uint32_t>(kBlockFileChunkSize));
  Put<uint64_t>(&out, request.key.content.hi);
  Put<uint64_t>(&out, request.key.content.lo);
  Put<uint64_t>(&out, request.key.index);
  Put<uint64_t>(&out, data.size());
  Put<uint64_t>(&out, RoundUp(length, kBlockFileAlignment));
  Put<uint32_t>(&out, static_cast<uint32_t>(request.object_key.size()));
  Put<uint32_t>(&out, static_cast<uint32_t>(request.etag.size()));
  out += request.object_key;
  out += request.etag;
  for (uint64_t at = 0; at < data.size(); at += kBlockFileChunkSize) {
    size_t n = std::min<uint64_t>(kBlockFileChunkSize, data.size() - at);
    Put<uint64_t>(&out, XXH3_64bits(data.data() + at, n));
  }
  Put<uint64_t>(&out, XXH3_64bits(out.data(), out.size()));
  out.resize(RoundUp(out.size(), kBlockFileAlignment), '\0');
  return out;
}

// Decodes a header whose checksum was verified; still checks that the lengths agree.
Result<BlockFileHeader> DecodeHeader(std::string_view bytes, const std::string& path) {
  Cursor in(bytes);
  uint32_t magic = 0, version = 0, length = 0, chunk_size = 0, key_length = 0, etag_length = 0;
  BlockFileHeader h;
  bool ok = in.Get(&magic) && in.Get(&version) && in.Get(&length) && in.Get(&chunk_size) &&
            in.Get(&h.key.content.hi) && in.Get(&h.key.content.lo) && in.Get(&h.key.index) &&
            in.Get(&h.data_length) && in.Get(&h.data_offset) && in.Get(&key_length) &&
            in.Get(&etag_length);
  ok = ok && chunk_size == kBlockFileChunkSize &&
       length == HeaderLength(key_length, etag_length, h.data_length) &&
       h.data_offset == RoundUp(length, kBlockFileAlignment) &&
       in.GetString(key_length, &h.object_key) && in.GetString(etag_length, &h.etag);
  h.chunk_size = chunk_size;
  h.chunk_checksums.resize(ok ? ChunkCount(h.data_length) : 0);
  for (uint64_t& sum : h.chunk_checksums) ok = ok && in.Get(&sum);
  if (!ok) return Status::Corruption(path + ": block file header lengths disagree");
  return h;
}

// Reads exactly dst.size() bytes at `offset`; running into the end of the file is corruption
// (a file truncated after its header was written).
Status PreadFull(int fd, std::span<char> dst, uint64_t offset, const std::string& path) {
  size_t done = 0;
  while (done < dst.size()) {
    ssize_t n =
        ::pread(fd, dst.data() + done, dst.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, "read", path);
    if (n == 0) return Status::Corruption(path + ": block file truncated");
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

// The header from `buf`, the file's first bytes; `more` reads the rest of a header longer than
// `buf` (nullptr: such a header is kUnimplemented here, for the caller to read another way).
Result<BlockFileHeader> ParseHeader(std::string_view buf, uint64_t file_size,
                                    const std::function<Status(std::string*)>& more,
                                    const std::string& path) {
  uint32_t magic = 0, version = 0, length = 0;
  Cursor in(buf);
  if (!in.Get(&magic) || magic != kMagic) return Status::Corruption(path + ": not a block file");
  if (!in.Get(&version) || version != kBlockFileVersion) {
    return Status::Unimplemented(path + ": block file format version " + std::to_string(version) +
                                 " (this build reads " + std::to_string(kBlockFileVersion) + ")");
  }
  if (!in.Get(&length) || length < kFixedLength + 8 || length > kMaxHeaderLength ||
      length > file_size) {
    return Status::Corruption(path + ": bad block file header length");
  }
  std::string longer;
  if (length > buf.size()) {
    if (!more) return Status::Unimplemented(path + ": header longer than its first page");
    longer.assign(buf);
    longer.resize(length);
    LC_RETURN_IF_ERROR(more(&longer));
    buf = longer;
  }
  uint64_t stored;
  std::memcpy(&stored, buf.data() + length - 8, 8);
  if (XXH3_64bits(buf.data(), length - 8) != stored) {
    return Status::Corruption(path + ": block file header checksum mismatch");
  }
  LC_ASSIGN_OR_RETURN(BlockFileHeader h, DecodeHeader(buf.substr(0, length), path));
  // Compared without a sum that can wrap: a data length near 2^64 must not pass as a short one.
  if (h.data_offset > file_size || h.data_length > file_size - h.data_offset) {
    return Status::Corruption(path + ": block file truncated");
  }
  return h;
}

Result<BlockFileHeader> ReadHeader(int fd, const std::string& path) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoStatus(errno, "stat", path);
  uint64_t file_size = static_cast<uint64_t>(st.st_size);
  // Most headers fit the first page, so one pread usually reads the whole header.
  std::string buf(std::min<uint64_t>(file_size, kBlockFileAlignment), '\0');
  LC_RETURN_IF_ERROR(PreadFull(fd, buf, 0, path));
  size_t had = buf.size();
  return ParseHeader(
      buf, file_size,
      [&](std::string* longer) {
        return PreadFull(fd, std::span(*longer).subspan(had), had, path);
      },
      path);
}

Status VerifyChunks(const BlockFileHeader& h, uint64_t first, uint64_t last, const char* data,
                    const std::string& path) {
  for (uint64_t i = first; i <= last; ++i) {
    uint64_t at = i * h.chunk_size;
    size_t n = std::min(h.chunk_size, h.data_length - at);
    if (XXH3_64bits(data + (at - first * h.chunk_size), n) != h.chunk_checksums[i]) {
      return Status::Corruption(path + ": checksum mismatch in chunk " + std::to_string(i));
    }
  }
  return Status::Ok();
}

// A name no other writer uses, so concurrent writers of one block never share a temp file.
std::string TempPathFor(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return path + ".tmp." + std::to_string(::getpid()) + "." +
         std::to_string(counter.fetch_add(1, std::memory_order_relaxed));
}

int OpenTemp(const std::string& tmp) {
  constexpr int kFlags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC;
  int fd = ::open(tmp.c_str(), kFlags | O_DIRECT, 0644);
  if (fd < 0 && errno == EINVAL) fd = ::open(tmp.c_str(), kFlags, 0644);  // tmpfs: no O_DIRECT
  return fd;
}

// Opened with O_DIRECT where the file system allows it (see WriteAll).
Result<int> CreateTemp(const std::string& tmp) {
  int fd = OpenTemp(tmp);
  if (fd < 0 && errno == ENOENT) {  // first block in this subfolder
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(tmp).parent_path(), ec);
    if (ec) return ErrnoStatus(ec.value(), "create directory", tmp);
    fd = OpenTemp(tmp);
  }
  if (fd < 0) return ErrnoStatus(errno, "create", tmp);
  return fd;
}

Status WriteFully(int fd, const char* p, uint64_t n, const std::string& tmp) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return ErrnoStatus(errno, "write", tmp);
    p += w;
    n -= static_cast<uint64_t>(w);
  }
  return Status::Ok();
}

bool PageAligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % kBlockFileAlignment == 0;
}

// With O_DIRECT the disk reads the block's own pages: no copy into the page cache, which was half
// the CPU time of a cold read. O_DIRECT needs page-aligned memory, offsets and lengths: the header
// goes through an aligned copy, the data's unaligned tail (an object's last block) and blocks in
// unaligned memory through the page cache.
Status WriteDirect(int fd, const std::string& header, std::span<const char> data,
                   const std::string& tmp) {
  size_t header_len = header.size();  // a multiple of the page size (EncodeHeader pads it)
  std::unique_ptr<char, decltype(&std::free)> aligned(
      static_cast<char*>(std::aligned_alloc(kBlockFileAlignment, header_len)), &std::free);
  if (aligned == nullptr) throw std::bad_alloc();
  std::memcpy(aligned.get(), header.data(), header_len);
  LC_RETURN_IF_ERROR(WriteFully(fd, aligned.get(), header_len, tmp));
  uint64_t direct =
      PageAligned(data.data()) ? data.size() / kBlockFileAlignment * kBlockFileAlignment : 0;
  LC_RETURN_IF_ERROR(WriteFully(fd, data.data(), direct, tmp));
  if (direct == data.size()) return Status::Ok();
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_DIRECT) != 0) {
    return ErrnoStatus(errno, "write", tmp);
  }
  return WriteFully(fd, data.data() + direct, data.size() - direct, tmp);
}

// Writes header then data. Space is allocated first so a full disk fails before 4 MiB are copied.
Status WriteAll(int fd, const std::string& header, std::span<const char> data,
                const std::string& tmp) {
  uint64_t total = header.size() + data.size();
  if (::fallocate(fd, 0, 0, static_cast<off_t>(total)) != 0 && errno != EOPNOTSUPP &&
      errno != ENOSYS) {
    return ErrnoStatus(errno, "allocate", tmp);
  }
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0 && (flags & O_DIRECT) != 0 && header.size() % kBlockFileAlignment == 0) {
    return WriteDirect(fd, header, data, tmp);
  }
  uint64_t done = 0;
  while (done < total) {
    iovec iov[2];
    int n = 0;
    if (done < header.size()) {
      iov[n++] = {const_cast<char*>(header.data()) + done, header.size() - done};
    }
    uint64_t at = done > header.size() ? done - header.size() : 0;
    if (at < data.size()) iov[n++] = {const_cast<char*>(data.data()) + at, data.size() - at};
    ssize_t w = ::writev(fd, iov, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return ErrnoStatus(errno, "write", tmp);
    done += static_cast<uint64_t>(w);
  }
  return Status::Ok();
}

}  // namespace

uint64_t BlockFileSize(size_t object_key_length, size_t etag_length, uint64_t data_length) {
  uint64_t header =
      RoundUp(HeaderLength(object_key_length, etag_length, data_length), kBlockFileAlignment);
  return RoundUp(header + data_length, kBlockFileAlignment);
}

bool IsBlockFileTempName(std::string_view file_name) {
  return file_name.find(kTempMarker) != std::string_view::npos;
}

// No fsync: this is a cache of bytes the object store still holds, and every read verifies them,
// so a file that lost its contents in a crash is found and dropped like any corrupt one. Syncing
// would add milliseconds to every miss for no gain in what readers can observe.
Status WriteBlockFile(const std::string& path, const BlockRequest& request,
                      std::span<const char> data) {
  if (HeaderLength(request.object_key.size(), request.etag.size(), data.size()) >
      kMaxHeaderLength) {
    return Status::InvalidArgument(path + ": object key or block too long for a block file");
  }
  std::string header = EncodeHeader(request, data);
  std::string tmp = TempPathFor(path);
  LC_ASSIGN_OR_RETURN(int created, CreateTemp(tmp));
  ScopedFd fd(created);
  Status st = WriteAll(fd.get(), header, data, tmp);
  if (fd.Close() != 0 && st.ok()) st = ErrnoStatus(errno, "close", tmp);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) st = ErrnoStatus(errno, "rename", path);
  if (!st.ok()) ::unlink(tmp.c_str());
  return st;
}

BlockFile::BlockFile(int fd, std::string path, BlockFileHeader header)
    : fd_(fd), path_(std::move(path)), header_(std::move(header)) {}

Result<BlockFile> BlockFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "open", path);
  BlockFile file(fd, path, {});  // owns fd from here on
  LC_ASSIGN_OR_RETURN(file.header_, ReadHeader(fd, path));
  // Whole-page reads into page-aligned memory go around the page cache (see ReadChunks); a file
  // system without O_DIRECT (tmpfs) reads through it.
  file.direct_fd_.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT));
  return file;
}

Status BlockFile::ReadChunks(uint64_t first, uint64_t last, char* out) const {
  const uint64_t cs = header_.chunk_size;
  uint64_t begin = first * cs;
  uint64_t end = std::min((last + 1) * cs, header_.data_length);
  // The disk writes into `out` itself (no copy from the page cache) when O_DIRECT's alignment
  // holds: the blocks are written with O_DIRECT too, so the page cache would only hold a second
  // copy of what the memory tier keeps.
  bool direct = direct_fd_.valid() && (end - begin) % kBlockFileAlignment == 0 &&
                (header_.data_offset + begin) % kBlockFileAlignment == 0 &&
                reinterpret_cast<uintptr_t>(out) % kBlockFileAlignment == 0;
  Status read = Status::Unimplemented("");
  if (direct) {
    read = PreadFull(direct_fd_.get(), std::span(out, end - begin), header_.data_offset + begin,
                     path_);
  }
  if (!direct || read.code() == StatusCode::kIoError) {  // EINVAL on an odd device: buffered
    read = PreadFull(fd_.get(), std::span(out, end - begin), header_.data_offset + begin, path_);
  }
  LC_RETURN_IF_ERROR(read);
  return VerifyChunks(header_, first, last, out, path_);
}

Result<size_t> BlockFile::Read(uint64_t offset, std::span<char> dst) const {
  if (offset >= header_.data_length || dst.empty()) return size_t{0};
  size_t n = std::min<uint64_t>(dst.size(), header_.data_length - offset);
  const uint64_t cs = header_.chunk_size;
  uint64_t first = offset / cs;
  uint64_t last = (offset + n - 1) / cs;
  uint64_t end = std::min((last + 1) * cs, header_.data_length);
  if (offset == first * cs && offset + n == end) {  // whole chunks: no bounce buffer needed
    LC_RETURN_IF_ERROR(ReadChunks(first, last, dst.data()));
    return n;
  }
  // One buffer per thread, grown to the largest range seen: no allocation per read.
  thread_local std::vector<char> buffer;
  if (buffer.size() < end - first * cs) buffer.resize(end - first * cs);
  LC_RETURN_IF_ERROR(ReadChunks(first, last, buffer.data()));
  std::memcpy(dst.data(), buffer.data() + (offset - first * cs), n);
  return n;
}

namespace {

// A small block's file: one page of header, then its data.
constexpr uint64_t kReadWholeMax = kSmallBlockMax + kBlockFileAlignment;

// Reads the file's first `want` bytes into the iovecs (which have room for at least that many);
// running into the end of the file is corruption.
Status PreadvFull(int fd, iovec* iov, int count, uint64_t want, const std::string& path) {
  uint64_t done = 0;
  while (done < want) {
    ssize_t n = ::preadv(fd, iov, count, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, "read", path);
    if (n == 0) return Status::Corruption(path + ": block file truncated");
    done += static_cast<uint64_t>(n);
    size_t left = static_cast<size_t>(n);
    for (; count > 0 && left >= iov->iov_len; --count, ++iov) left -= iov->iov_len;
    if (count > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return Status::Ok();
}

Status CheckKey(const BlockFileHeader& header, const BlockKey& key, const std::string& path) {
  if (header.key == key) return Status::Ok();
  return Status::Corruption(path + ": holds block " + header.key.ToString());
}

}  // namespace

Result<BlockRef> BlockFile::ReadWhole(const std::string& path, const BlockKey& key) {
  // O_DIRECT: the disk writes into the block itself, with no page-cache copy to fill, copy out
  // of and give back (a third of the CPU time of a small block read through the page cache).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
  bool direct = fd >= 0;
  if (fd < 0 && errno == EINVAL) fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);  // tmpfs
  if (fd < 0) return ErrnoStatus(errno, "open", path);
  ScopedFd closer(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoStatus(errno, "stat", path);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > kBlockFileAlignment && size <= kReadWholeMax) {
    // The first page holds the header of every block but one of a very long object key.
    alignas(kBlockFileAlignment) char page[kBlockFileAlignment];
    std::shared_ptr<Block> block = Block::AllocatePages(size - kBlockFileAlignment);
    auto read = [&] {
      iovec iov[2] = {{page, sizeof(page)},
                      {block->mutable_data(), RoundUp(block->size(), kBlockFileAlignment)}};
      return PreadvFull(fd, iov, 2, size, path);
    };
    Status status = read();
    if (!status.ok() && direct && status.code() == StatusCode::kIoError) {
      // A device that refuses O_DIRECT reads (EINVAL): through the page cache.
      int flags = ::fcntl(fd, F_GETFL);
      direct = !(flags >= 0 && ::fcntl(fd, F_SETFL, flags & ~O_DIRECT) == 0);
      if (!direct) status = read();
    }
    LC_RETURN_IF_ERROR(status);
    Result<BlockFileHeader> h =
        ParseHeader(std::string_view(page, sizeof(page)), size, nullptr, path);
    if (!h.ok() && h.status().code() != StatusCode::kUnimplemented) return h.status();
    if (h.ok() && h->data_offset == kBlockFileAlignment && h->data_length == block->size()) {
      LC_RETURN_IF_ERROR(CheckKey(*h, key, path));
      LC_RETURN_IF_ERROR(VerifyChunks(*h, 0, h->chunk_checksums.size() - 1, block->data(), path));
      // The memory tier keeps these bytes: a second copy in the page cache only takes memory.
      if (!direct) ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      return BlockRef(std::move(block));
    }
  }
  LC_ASSIGN_OR_RETURN(BlockFile file, Open(path));  // large, or laid out another way
  LC_RETURN_IF_ERROR(CheckKey(file.header(), key, path));
  return file.ReadAll();
}

Result<BlockRef> BlockFile::ReadAll() const {
  std::shared_ptr<Block> block = Block::Allocate(header_.data_length);
  if (header_.data_length > 0) {
    LC_RETURN_IF_ERROR(ReadChunks(0, header_.chunk_checksums.size() - 1, block->mutable_data()));
  }
  return BlockRef(std::move(block));
}

bool BlockFile::Unlinked() const {
  struct stat st {};
  return ::fstat(fd_.get(), &st) == 0 && st.st_nlink == 0;
}

}  // namespace lakecache
