// Feeds the bytes to the bulk data path's frame decoders (rpc/block_frame.h) as a request, a hello
// and a reply, and as the slices of a ReadBlockChunk message (rpc/block_chunk.h). Asserts a frame
// that decodes is exactly what the encoder writes for the decoded value, encode-then-decode gives
// back what was encoded, and CopyChunk takes only what protobuf would read as the same data.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "rpc/block_chunk.h"
#include "rpc/block_frame.h"

namespace lakecache::rpc {
namespace {

bool Same(const BlockReadRequest& a, const BlockReadRequest& b) {
  return a.offset == b.offset && a.length == b.length && a.flags == b.flags &&
         a.requester == b.requester && a.block.SerializeAsString() == b.block.SerializeAsString();
}

// Decoding checks every field, so a frame that decodes is the encoding of what it decoded to.
void CheckDecode(std::span<const char> frame) {
  std::string bytes(frame.begin(), frame.end());
  if (frame.size() >= kFrameHeaderBytes) {
    for (FrameKind kind : {FrameKind::kReadRequest, FrameKind::kReadReply, FrameKind::kHello}) {
      Result<size_t> body = FrameBodyBytes(frame.first(kFrameHeaderBytes), kind);
      if (body.ok() && *body > kMaxBlockIdBytes + kMaxWorkerIdBytes) __builtin_trap();
    }
  }
  if (Result<BlockReadRequest> request = DecodeReadRequest(frame); request.ok()) {
    Result<BlockReadRequest> again = DecodeReadRequest(EncodeReadRequest(*request));
    if (!again.ok() || !Same(*again, *request)) __builtin_trap();
  }
  if (Result<std::string> token = DecodeHello(frame); token.ok()) {
    if (EncodeHello(*token) != bytes) __builtin_trap();
  }
  if (Result<BlockReplyHeader> reply = DecodeReplyHeader(frame, UINT64_MAX); reply.ok()) {
    if (EncodeReplyHeader(reply->status, reply->data_length, reply->digest, reply->redirect) !=
        bytes) {
      __builtin_trap();
    }
    Result<BlockReplyHeader> bounded = DecodeReplyHeader(frame, reply->data_length);
    if (!bounded.ok()) __builtin_trap();
    if (reply->data_length > 0 && DecodeReplyHeader(frame, reply->data_length - 1).ok()) {
      __builtin_trap();
    }
  }
}

// BlockId's fields are protobuf strings, which hold UTF-8 (a parser refuses anything else), as S3
// keys are; ASCII keeps the generated ones valid.
std::string Text(FuzzedDataProvider& in, size_t max) {
  std::string s = in.ConsumeRandomLengthString(max);
  for (char& c : s) c = static_cast<char>(c & 0x7f);
  return s;
}

void CheckEncode(FuzzedDataProvider& in) {
  BlockReadRequest request;
  request.block.set_ns(Text(in, 16));
  request.block.set_key(Text(in, 128));
  request.block.set_etag(Text(in, 40));
  request.block.set_object_size(in.ConsumeIntegral<uint64_t>());
  request.block.set_block_size(in.ConsumeIntegral<uint64_t>());
  request.block.set_index(in.ConsumeIntegral<uint64_t>());
  request.offset = in.ConsumeIntegral<uint64_t>();
  request.length = in.ConsumeIntegral<uint64_t>();
  Result<BlockReadRequest> request_back = DecodeReadRequest(EncodeReadRequest(request));
  if (!request_back.ok() || !Same(*request_back, request)) __builtin_trap();

  std::string token = in.ConsumeRandomLengthString(kMaxHelloBytes);
  Result<std::string> token_back = DecodeHello(EncodeHello(token));
  if (!token_back.ok() || *token_back != token) __builtin_trap();

  auto code = static_cast<StatusCode>(
      in.ConsumeIntegralInRange<int>(0, static_cast<int>(StatusCode::kRefused)));
  Status status(code, in.ConsumeRandomLengthString(2 * kMaxReplyMessageBytes));
  uint64_t data_length = in.ConsumeIntegral<uint64_t>();
  Result<BlockReplyHeader> reply =
      DecodeReplyHeader(EncodeReplyHeader(status, data_length), UINT64_MAX);
  if (!reply.ok()) __builtin_trap();
  if (status.ok()) {
    if (!reply->status.ok() || reply->data_length != data_length) __builtin_trap();
  } else if (reply->status.ok() || reply->data_length != 0 ||
             // a code the wire does not carry goes as kInternal
             (reply->status.code() != code && reply->status.code() != StatusCode::kInternal) ||
             !status.message().starts_with(reply->status.message()) ||
             reply->status.message().size() > kMaxReplyMessageBytes) {
    __builtin_trap();
  }
}

// The bytes cut into up to four slices, as gRPC may deliver one message.
void CheckChunk(FuzzedDataProvider& in) {
  size_t room = in.ConsumeIntegralInRange<size_t>(0, 4096);
  size_t got_before = in.ConsumeIntegralInRange<size_t>(0, room);
  std::string bytes = in.ConsumeRemainingBytesAsString();
  std::vector<grpc::Slice> slices;
  for (size_t at = 0, n = 0; at < bytes.size() || n == 0; ++n) {
    size_t len = n == 3 ? bytes.size() - at : std::min(bytes.size() - at, (at * 7 + 5) % 23);
    slices.emplace_back(bytes.data() + at, len);
    at += len;
    if (n == 3) break;
  }
  grpc::ByteBuffer buffer(slices.data(), slices.size());
  std::string dst(room, '\0');
  size_t got = got_before;
  if (!CopyChunk(buffer, std::span<char>(dst), &got).ok()) return;
  ReadBlockChunk typed;
  if (got < got_before || !typed.ParseFromString(bytes) ||
      typed.data() != dst.substr(got_before, got - got_before)) {
    __builtin_trap();
  }
  // What ChunkMessage writes for those bytes copies back the same.
  std::shared_ptr<Block> block = Block::Allocate(typed.data().size());
  std::memcpy(block->mutable_data(), typed.data().data(), typed.data().size());
  std::string again(block->size(), '\0');
  size_t copied = 0;
  if (!CopyChunk(ChunkMessage(block, block->data(), block->size()), std::span<char>(again), &copied)
           .ok() ||
      copied != again.size() || again != typed.data()) {
    __builtin_trap();
  }
}

}  // namespace
}  // namespace lakecache::rpc

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lakecache::rpc;
  CheckDecode(std::span(reinterpret_cast<const char*>(data), size));
  FuzzedDataProvider in(data, size);
  CheckEncode(in);
  CheckChunk(in);
  return 0;
}
