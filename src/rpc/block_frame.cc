#include "rpc/block_frame.h"

#include <array>
#include <cstring>

namespace lakecache::rpc {
namespace {

constexpr char kMagic[4] = {'L', 'C', 'B', 'F'};
constexpr uint8_t kVersion = 1;

// The wire value of each status code is its index here: fixed, whatever the enum's order.
constexpr std::array<StatusCode, 13> kWireCodes = {
    StatusCode::kOk,
    StatusCode::kInvalidArgument,
    StatusCode::kNotFound,
    StatusCode::kAccessDenied,
    StatusCode::kUnavailable,
    StatusCode::kDeadlineExceeded,
    StatusCode::kIoError,
    StatusCode::kNoSpace,
    StatusCode::kCorruption,
    StatusCode::kPreconditionFailed,
    StatusCode::kUnimplemented,
    StatusCode::kInternal,
    StatusCode::kUnauthenticated,
};

uint8_t WireCode(StatusCode code) {
  for (size_t i = 0; i < kWireCodes.size(); ++i) {
    if (kWireCodes[i] == code) return static_cast<uint8_t>(i);
  }
  return 11;  // kInternal
}

void Put32(char* at, uint32_t v) {
  for (int i = 0; i < 4; ++i) at[i] = static_cast<char>(v >> (8 * i));
}
void Put64(char* at, uint64_t v) {
  for (int i = 0; i < 8; ++i) at[i] = static_cast<char>(v >> (8 * i));
}
uint32_t Get32(const char* at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<uint8_t>(at[i])} << (8 * i);
  return v;
}
uint64_t Get64(const char* at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<uint8_t>(at[i])} << (8 * i);
  return v;
}

// `tail`: bytes at the end of the body that field 12 counts (a request's requester id).
std::string Frame(FrameKind kind, uint8_t code, std::string_view body, uint64_t a, uint64_t b,
                  uint8_t flags = 0, std::string_view tail = {}) {
  std::string out(kFrameHeaderBytes, '\0');
  std::memcpy(out.data(), kMagic, sizeof(kMagic));
  out[4] = static_cast<char>(kVersion);
  out[5] = static_cast<char>(kind);
  out[6] = static_cast<char>(code);
  out[7] = static_cast<char>(flags);
  Put32(out.data() + 8, static_cast<uint32_t>(body.size() + tail.size()));
  Put32(out.data() + 12, static_cast<uint32_t>(tail.size()));
  Put64(out.data() + 16, a);
  Put64(out.data() + 24, b);
  out.append(body);
  out.append(tail);
  return out;
}

Status Malformed(std::string_view what) {
  return Status::InvalidArgument("malformed bulk frame: " + std::string(what));
}

// The checked fixed header of a whole frame (header and body, nothing more).
Result<size_t> CheckWhole(std::span<const char> frame, FrameKind kind) {
  if (frame.size() < kFrameHeaderBytes) return Malformed("truncated header");
  LC_ASSIGN_OR_RETURN(size_t body, FrameBodyBytes(frame.first(kFrameHeaderBytes), kind));
  if (frame.size() != kFrameHeaderBytes + body) {
    return Malformed(frame.size() < kFrameHeaderBytes + body ? "truncated body"
                                                             : "bytes past the body");
  }
  return body;
}

}  // namespace

std::string EncodeReadRequest(const BlockReadRequest& request) {
  std::string_view requester(request.requester);
  if (requester.size() > kMaxWorkerIdBytes) requester = requester.substr(0, kMaxWorkerIdBytes);
  return Frame(FrameKind::kReadRequest, 0, request.block.SerializeAsString(), request.offset,
               request.length, request.flags, requester);
}

std::string EncodeHello(std::string_view token) { return Frame(FrameKind::kHello, 0, token, 0, 0); }

std::string EncodeReplyHeader(const Status& status, uint64_t data_length,
                              std::optional<uint64_t> digest, std::string_view redirect) {
  uint8_t flags = 0;
  if (!status.ok()) {
    data_length = 0;
    digest.reset();
    redirect = {};
  }
  if (!redirect.empty()) {
    data_length = 0;
    flags |= kReplyRedirect;
    if (redirect.size() > kMaxWorkerIdBytes) redirect = redirect.substr(0, kMaxWorkerIdBytes);
  }
  if (digest) flags |= kReplyDigest;
  std::string_view message(status.ok() ? redirect : std::string_view(status.message()));
  if (message.size() > kMaxReplyMessageBytes) message = message.substr(0, kMaxReplyMessageBytes);
  return Frame(FrameKind::kReadReply, WireCode(status.code()), message, data_length,
               digest.value_or(0), flags);
}

Result<size_t> FrameBodyBytes(std::span<const char> header, FrameKind kind) {
  if (header.size() != kFrameHeaderBytes) return Malformed("truncated header");
  if (std::memcmp(header.data(), kMagic, sizeof(kMagic)) != 0) {
    return Malformed("bad magic (not a lakecache bulk peer?)");
  }
  if (static_cast<uint8_t>(header[4]) != kVersion) {
    return Malformed("unknown version " + std::to_string(static_cast<uint8_t>(header[4])));
  }
  if (static_cast<uint8_t>(header[5]) != static_cast<uint8_t>(kind)) {
    return Malformed("unexpected frame kind " + std::to_string(static_cast<uint8_t>(header[5])));
  }
  const uint8_t flags = static_cast<uint8_t>(header[7]);
  const uint32_t tail = Get32(header.data() + 12);
  const uint8_t known =
      kind == FrameKind::kReadRequest
          ? kReadForReplica | kReadNoRedirect | kReadHeldOnly | kReadAsReplica | kReadPlaceOnly
      : kind == FrameKind::kReadReply ? kReplyDigest | kReplyRedirect
                                      : 0;
  if ((flags & ~known) != 0) return Malformed("unknown flags " + std::to_string(flags));
  if (kind != FrameKind::kReadRequest && tail != 0) return Malformed("reserved bytes set");
  if (tail > kMaxWorkerIdBytes)
    return Malformed("requester id of " + std::to_string(tail) + " bytes");
  uint32_t body = Get32(header.data() + 8);
  if (tail > body) return Malformed("requester id past the body");
  size_t limit = kind == FrameKind::kReadRequest ? kMaxBlockIdBytes + kMaxWorkerIdBytes
                 : kind == FrameKind::kHello     ? kMaxHelloBytes
                                                 : kMaxReplyMessageBytes;
  if (body > limit) {
    return Malformed("body of " + std::to_string(body) + " bytes (at most " +
                     std::to_string(limit) + ")");
  }
  return body;
}

Result<BlockReadRequest> DecodeReadRequest(std::span<const char> frame) {
  LC_ASSIGN_OR_RETURN(size_t body, CheckWhole(frame, FrameKind::kReadRequest));
  if (frame[6] != 0) return Malformed("status code in a request");
  BlockReadRequest request;
  const size_t tail = Get32(frame.data() + 12);
  if (!request.block.ParseFromArray(frame.data() + kFrameHeaderBytes,
                                    static_cast<int>(body - tail))) {
    return Malformed("unparsable block id");
  }
  request.offset = Get64(frame.data() + 16);
  request.length = Get64(frame.data() + 24);
  request.flags = static_cast<uint8_t>(frame[7]);
  request.requester.assign(frame.data() + kFrameHeaderBytes + body - tail, tail);
  if ((request.flags & kReadForReplica) != 0 && request.requester.empty()) {
    return Malformed("a read for a replica without the requester's id");
  }
  return request;
}

Result<std::string> DecodeHello(std::span<const char> frame) {
  LC_ASSIGN_OR_RETURN(size_t body, CheckWhole(frame, FrameKind::kHello));
  if (frame[6] != 0 || Get64(frame.data() + 16) != 0 || Get64(frame.data() + 24) != 0) {
    return Malformed("fields set in a hello");
  }
  return std::string(frame.data() + kFrameHeaderBytes, body);
}

Result<BlockReplyHeader> DecodeReplyHeader(std::span<const char> frame, uint64_t max_data_length) {
  LC_ASSIGN_OR_RETURN(size_t body, CheckWhole(frame, FrameKind::kReadReply));
  uint8_t code = static_cast<uint8_t>(frame[6]);
  if (code >= kWireCodes.size()) return Malformed("unknown status code " + std::to_string(code));
  const uint8_t flags = static_cast<uint8_t>(frame[7]);
  const uint64_t digest = Get64(frame.data() + 24);
  if ((flags & kReplyDigest) == 0 && digest != 0) return Malformed("reserved bytes set");
  BlockReplyHeader reply;
  reply.data_length = Get64(frame.data() + 16);
  std::string message(frame.data() + kFrameHeaderBytes, body);
  if (kWireCodes[code] == StatusCode::kOk) {
    if ((flags & kReplyRedirect) != 0) {
      if (body == 0) return Malformed("a redirect naming no worker");
      if (reply.data_length != 0) return Malformed("data after a redirect");
      reply.redirect = std::move(message);
    } else if (body != 0) {
      return Malformed("a message in a successful reply");
    }
    if ((flags & kReplyDigest) != 0) reply.digest = digest;
  } else {
    if (flags != 0) return Malformed("flags in an error");
    if (reply.data_length != 0) return Malformed("data after an error");
    reply.status = Status(kWireCodes[code], std::move(message));
  }
  if (reply.data_length > max_data_length) {
    return Malformed(std::to_string(reply.data_length) + " data bytes for a request of " +
                     std::to_string(max_data_length));
  }
  return reply;
}

}  // namespace lakecache::rpc
