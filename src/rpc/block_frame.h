// The wire format of the bulk data path (worker BulkServer <-> client BulkClient): one read
// request frame, answered by one reply frame header and then the data bytes.
//
// Every frame starts with a fixed 32-byte header (little-endian):
//   0  magic "LCBF"     4  version (1)     5  kind (1 request, 2 reply, 3 hello)
//   6  status code (reply; 0 in a request)  7  reserved (0)
//   8  u32: bytes that follow the header (request: the serialized BlockId; reply: the message)
//   12 u32 reserved (0)
//   16 u64: request: offset within the block; reply: data bytes after the message
//   24 u64: request: length wanted; reply: 0
// A connection to a worker with credentials starts with a hello (body: the client's role token,
// fields 16 and 24 zero), answered by a reply without data: OK, or why the token is refused.
// A request with an empty BlockId and length 0 is a ping, answered by an OK reply without data.
// A reply with an error carries its message and no data. Decoding checks every field and refuses
// truncated, oversized or garbage input with an InvalidArgument naming what is wrong, so a reader
// never trusts a length it has not checked. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "common/result.h"
#include "rpc/lakecache.pb.h"

namespace lakecache::rpc {

inline constexpr size_t kFrameHeaderBytes = 32;
inline constexpr size_t kMaxBlockIdBytes = 64 << 10;        // ns + key + etag, with room to spare
inline constexpr size_t kMaxReplyMessageBytes = 4 << 10;    // longer messages are cut
inline constexpr uint64_t kMaxReplyDataBytes = 1ull << 30;  // the largest block size

inline constexpr size_t kMaxHelloBytes = 4 << 10;

enum class FrameKind : uint8_t { kReadRequest = 1, kReadReply = 2, kHello = 3 };

struct BlockReadRequest {
  BlockId block;
  uint64_t offset = 0;  // within the block
  uint64_t length = 0;  // clamped by the worker to the block's end
};

struct BlockReplyHeader {
  Status status;             // the worker's answer; not OK: no data follows
  uint64_t data_length = 0;  // bytes that follow the frame
};

// The whole request frame.
std::string EncodeReadRequest(const BlockReadRequest& request);
// The whole hello frame.
std::string EncodeHello(std::string_view token);
// The reply frame up to the data (header and message); `data_length` bytes are sent after it.
std::string EncodeReplyHeader(const Status& status, uint64_t data_length);

// REQUIRES: header.size() == kFrameHeaderBytes. Checks the fixed header of a frame of `kind` and
// returns how many bytes follow it before the data (BlockId or message).
Result<size_t> FrameBodyBytes(std::span<const char> header, FrameKind kind);

// `frame`: the fixed header and exactly the body bytes FrameBodyBytes named.
Result<BlockReadRequest> DecodeReadRequest(std::span<const char> frame);
// The token of a hello frame.
Result<std::string> DecodeHello(std::span<const char> frame);
// Also refuses a data length above `max_data_length` (the length the client asked for).
Result<BlockReplyHeader> DecodeReplyHeader(std::span<const char> frame, uint64_t max_data_length);

}  // namespace lakecache::rpc
