// The wire format of the bulk data path (worker BulkServer <-> client BulkClient): one read
// request frame, answered by one reply frame header and then the data bytes.
//
// Every frame starts with a fixed 32-byte header (little-endian):
//   0  magic "LCBF"     4  version (1)     5  kind (1 request, 2 reply, 3 hello)
//   6  status code (reply; 0 in a request)  7  flags (below; 0 in a hello)
//   8  u32: bytes that follow the header (request: the serialized BlockId, then the requester's
//      id; reply: the message, or the worker a redirect names)
//   12 u32: request: bytes of the requester's id at the end of the body; otherwise 0
//   16 u64: request: offset within the block; reply: data bytes after the message
//   24 u64: request: length wanted; reply: the block's digest with kReplyDigest, else 0
// A worker that reads a block from another to keep it as a replica says so (kReadForReplica, with
// its id): the owner may answer with a redirect to a worker that holds (or is fetching) the block
// instead of the bytes, and says the digest of the whole block it recorded when it fetched it from
// the store, which the replica's bytes must match wherever they come from.
// A connection to a worker with credentials starts with a hello (body: the client's role token,
// fields 16 and 24 zero), answered by a reply without data: OK, or why the token is refused.
// A request with an empty BlockId and length 0 is a ping, answered by an OK reply without data.
// A reply with an error carries its message and no data. Decoding checks every field and refuses
// truncated, oversized or garbage input with an InvalidArgument naming what is wrong, so a reader
// never trusts a length it has not checked. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
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
inline constexpr size_t kMaxWorkerIdBytes = 256;

enum class FrameKind : uint8_t { kReadRequest = 1, kReadReply = 2, kHello = 3 };

// Request flags.
inline constexpr uint8_t kReadForReplica = 1;  // a worker reads to keep a replica (`requester`)
inline constexpr uint8_t kReadNoRedirect = 2;  // the bytes, not a redirect (the holder failed)
inline constexpr uint8_t kReadHeldOnly = 4;    // from what the worker holds or is fetching, else
                                               // NotFound: never a fetch (a redirected read)
inline constexpr uint8_t kReadAsReplica = 8;   // a mount asks the worker of its host to get the
                                               // block from the cluster and keep it as a replica
inline constexpr uint8_t kReadPlaceOnly = 16;  // with kReadAsReplica: an empty reply once the block
                                               // is in the worker's memory, which the mount maps
                                               // (the bytes when it was not kept there)
// Reply flags.
inline constexpr uint8_t kReplyDigest = 1;    // `digest` is the owner's, of the whole block
inline constexpr uint8_t kReplyRedirect = 2;  // no data: read it from the worker `redirect` names

struct BlockReadRequest {
  BlockId block;
  uint64_t offset = 0;  // within the block
  uint64_t length = 0;  // clamped by the worker to the block's end
  uint8_t flags = 0;
  std::string requester;  // the reading worker's id, with kReadForReplica
};

struct BlockReplyHeader {
  Status status;                   // the worker's answer; not OK: no data follows
  uint64_t data_length = 0;        // bytes that follow the frame
  std::optional<uint64_t> digest;  // XXH3-64 of the whole block, as its owner fetched it
  std::string redirect;            // not empty: no data; the worker (id) to read the block from
};

// The whole request frame.
std::string EncodeReadRequest(const BlockReadRequest& request);
// The whole hello frame.
std::string EncodeHello(std::string_view token);
// The reply frame up to the data (header and message); `data_length` bytes are sent after it.
// With `redirect` (status OK) no data follows.
std::string EncodeReplyHeader(const Status& status, uint64_t data_length,
                              std::optional<uint64_t> digest = std::nullopt,
                              std::string_view redirect = {});

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
