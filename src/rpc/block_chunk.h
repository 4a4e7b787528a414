// ReadBlockChunk messages (lakecache.proto) of the gRPC ReadBlock stream, built and read by hand
// so that neither side copies the block through a message object: the worker's message is a few
// bytes of protobuf framing and a gRPC slice over the pinned block; the client copies the bytes
// of the buffer it received once, straight into the block's buffer. The bytes are exactly what
// protobuf would write for ReadBlockChunk{data} (tested). Pure functions; thread-safe.
#pragma once

#include <grpcpp/support/byte_buffer.h>

#include <cstdint>
#include <span>

#include "cache/block.h"
#include "common/status.h"

namespace lakecache::rpc {

// A serialized ReadBlockChunk{data = [data, data + length)}; the slice keeps `owner` alive until
// gRPC lets go of it. REQUIRES: the bytes lie within `owner`.
grpc::ByteBuffer ChunkMessage(const BlockRef& owner, const char* data, uint64_t length);

// Appends the data of one serialized ReadBlockChunk to dst at *got (advanced), reading the
// buffer's slices in place. An empty buffer is an empty chunk. kInternal for a buffer that is not
// such a message or whose data would run past dst.
Status CopyChunk(const grpc::ByteBuffer& buffer, std::span<char> dst, size_t* got);

}  // namespace lakecache::rpc
