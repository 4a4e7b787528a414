#include "rpc/block_chunk.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace lakecache::rpc {
namespace {

constexpr uint8_t kDataTag = 0x0a;  // field 1, length-delimited

}  // namespace

grpc::ByteBuffer ChunkMessage(const BlockRef& owner, const char* data, uint64_t length) {
  uint8_t header[11];
  size_t n = 0;
  header[n++] = kDataTag;
  for (uint64_t v = length;; v >>= 7) {
    header[n++] = static_cast<uint8_t>((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
    if (v < 0x80) break;
  }
  auto* keep = new BlockRef(owner);
  grpc::Slice slices[2] = {grpc::Slice(header, n),  // copied: 2-11 bytes
                           grpc::Slice(
                               const_cast<char*>(data), length,
                               [](void* p) { delete static_cast<BlockRef*>(p); }, keep)};
  return grpc::ByteBuffer(slices, 2);
}

Status CopyChunk(const grpc::ByteBuffer& buffer, std::span<char> dst, size_t* got) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return Status::Internal("unreadable block chunk");
  size_t slice = 0, at = 0;
  auto skip_empty = [&] {
    while (slice < slices.size() && at == slices[slice].size()) ++slice, at = 0;
    return slice < slices.size();
  };
  auto next_byte = [&](uint8_t* b) {
    if (!skip_empty()) return false;
    *b = slices[slice].begin()[at++];
    return true;
  };
  uint8_t tag = 0;
  if (!next_byte(&tag)) return Status::Ok();  // an empty chunk
  if (tag != kDataTag) return Status::Internal("unexpected field in block chunk");
  uint64_t length = 0;
  uint8_t b = 0x80;
  int shift = 0;
  for (; (b & 0x80) != 0; shift += 7) {
    if (shift >= 64) return Status::Internal("overlong length in block chunk");
    if (!next_byte(&b)) return Status::Internal("truncated block chunk");
    length |= static_cast<uint64_t>(b & 0x7f) << shift;
  }
  if (length > dst.size() - *got) return Status::Internal("block chunk past the requested range");
  while (length > 0) {
    if (!skip_empty()) return Status::Internal("truncated block chunk");
    size_t n = std::min<size_t>(length, slices[slice].size() - at);
    std::memcpy(dst.data() + *got, slices[slice].begin() + at, n);
    *got += n;
    at += n;
    length -= n;
  }
  if (skip_empty()) return Status::Internal("bytes past the data of a block chunk");
  return Status::Ok();
}

}  // namespace lakecache::rpc
