// The native data path's wire: what a reader and the mount's server exchange beside FUSE. Shared by
// the server (native/native_server.h) and the client library (native_client/); it depends on
// nothing of lakecache, so the client library links none of it.
//
// A reader attaches to the mount's native socket (a Unix SOCK_SEQPACKET socket whose path the
// mount's `.lakecache/native` control file holds; the server checks the peer's uid as the control
// socket does). The server answers Welcome with four descriptors: the request ring (a memfd the
// reader maps read-write), an eventfd the reader writes to say "requests are waiting", an eventfd
// the server writes to say "completions are waiting", and the session's staging area (a memfd the
// reader maps read-only). Files are opened on the socket (by path inside the mount, checked
// against the reader's uid and gids as the kernel checks a FUSE open, or by a descriptor opened
// through the mount); reads go through the ring:
// - the reader fills submission entries (Sqe) and advances sq_tail, then writes the submit eventfd;
// - the server answers each with a completion entry (Cqe): a range of an arena, named by arena id,
//   that the reader reads in place. Arena 0 is the session's staging area (bytes the server copied
//   there); other ids are memfds of the node's memory (a co-located worker's memory tier, or the
//   mount's own), sent on the socket as an Arena message before the first completion naming them.
//   The range stays valid until the reader releases its anchor (kRelease) or its session ends.
// A reader never writes what the server reads without the server checking it: the server keeps its
// own copy of the indices it owns and bounds every index and field it reads from the ring.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace lakecache::native {

inline constexpr uint32_t kMagic = 0x4c434e31;  // "LCN1"
inline constexpr uint32_t kVersion = 1;
inline constexpr size_t kMaxMessage = 64 * 1024;  // one socket message, paths included
inline constexpr size_t kMaxPath = 4096;
inline constexpr uint32_t kStagingArena = 0;

// ---- socket messages: a MessageHeader, then the type's body --------------------------------
enum MessageType : uint32_t {
  // reader -> server
  kHello = 1,      // HelloBody
  kOpenPaths = 2,  // OpenPathsBody, then `count` NUL-terminated paths (inside the mount)
  kOpenFd = 3,     // OpenFdBody, with one descriptor opened through the mount
  kClose = 4,      // file ids to close, uint32_t each (0: none); CloseBody is the one-id form
  // server -> reader
  kWelcome = 101,  // WelcomeBody, with 4 descriptors: ring, submit eventfd, complete eventfd,
                   // staging memfd
  kRefused = 102,  // the reason, text
  kOpened = 103,   // OpenedBody, then `count` OpenedFile, then the error texts, NUL-terminated
  kArena = 104,    // ArenaBody, with the arena's memfd
  kHold = 105,     // no body, with a descriptor the reader keeps while it holds views of the
                   // memory of a co-located worker (its session there: see native.md)
};

struct MessageHeader {
  uint32_t type = 0;
  uint32_t reserved = 0;
  uint64_t request_id = 0;  // echoed in the answer to kOpenPaths and kOpenFd
};

struct HelloBody {
  uint32_t magic = kMagic;
  uint32_t version = kVersion;
  uint32_t ring_entries = 0;  // wanted submission entries (0: the server's default)
  uint32_t reserved = 0;
};

struct WelcomeBody {
  uint32_t version = kVersion;
  uint32_t sq_entries = 0;  // a power of two
  uint32_t cq_entries = 0;  // a power of two, >= sq_entries
  uint32_t max_read = 0;    // the largest length of one read entry
  uint64_t ring_bytes = 0;
  uint64_t staging_bytes = 0;
  uint64_t anchor_bytes = 0;  // how many bytes the reader may hold anchored at once
};

struct OpenPathsBody {
  uint32_t count = 0;
  uint32_t reserved = 0;
};

struct OpenFdBody {
  uint64_t reserved = 0;
};

struct CloseBody {
  uint32_t file_id = 0;
  uint32_t reserved = 0;
};

struct OpenedBody {
  uint32_t count = 0;
  uint32_t reserved = 0;
};

struct OpenedFile {
  int32_t error = 0;  // 0, or an errno; its text follows the entries
  uint32_t file_id = 0;
  uint64_t size = 0;
  uint64_t block_size = 0;  // a read entry never crosses a multiple of it
  uint64_t reserved = 0;    // the object version's hash: a file opened again must show the same
};

struct ArenaBody {
  uint32_t arena_id = 0;
  uint32_t reserved = 0;
  uint64_t bytes = 0;  // map this many bytes, read-only
};

// The paths of a kOpenPaths body (after its MessageHeader): at most `limit` of them. False when the
// body is cut short or a path is empty, longer than kMaxPath or not NUL-terminated; *paths then
// holds those before it.
inline bool ParseOpenPaths(const char* body, size_t size, size_t limit,
                           std::vector<std::string_view>* paths) {
  paths->clear();
  OpenPathsBody b;
  if (size < sizeof(b)) return false;
  std::memcpy(&b, body, sizeof(b));
  const char* at = body + sizeof(b);
  size_t left = size - sizeof(b);
  for (uint32_t i = 0; i < b.count; ++i) {
    if (paths->size() >= limit) return false;
    const char* end = static_cast<const char*>(std::memchr(at, '\0', left));
    if (end == nullptr || end == at || static_cast<size_t>(end - at) > kMaxPath) return false;
    paths->emplace_back(at, static_cast<size_t>(end - at));
    left -= paths->back().size() + 1;
    at = end + 1;
  }
  return true;
}

// ---- the ring ---------------------------------------------------------------------------------
enum Op : uint8_t {
  kRead = 1,     // file_id, offset, length: a completion with up to `length` bytes (short at the
                 // end of the file or of a block), anchored until released
  kRelease = 2,  // anchor: let go of a completion's range; completes with result 0 only when
                 // kFlagAck is set (otherwise it is silent)
};

enum SqeFlags : uint8_t {
  kFlagAck = 1,  // kRelease: post a completion too
};

struct Sqe {
  uint64_t user_data = 0;  // echoed in the completion
  uint8_t op = 0;
  uint8_t flags = 0;
  uint16_t reserved0 = 0;
  uint32_t file_id = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t anchor = 0;
  uint64_t reserved[3] = {};
};
static_assert(sizeof(Sqe) == 64);

struct Cqe {
  uint64_t user_data = 0;
  int64_t result = 0;  // bytes (>= 0), or -errno
  uint32_t arena_id = 0;
  uint32_t reserved0 = 0;
  uint64_t arena_offset = 0;
  uint64_t anchor = 0;  // 0: nothing to release
  uint64_t reserved1 = 0;
};
static_assert(sizeof(Cqe) == 48);

// The ring's first page; the submission entries follow at kRingHeaderBytes, the completion entries
// after them. Each index counts up forever (mod 2^32); an entry's slot is the index mod the count.
struct alignas(64) RingHeader {
  alignas(64) std::atomic<uint32_t> sq_head;         // server: entries taken
  alignas(64) std::atomic<uint32_t> sq_tail;         // reader: entries written
  alignas(64) std::atomic<uint32_t> cq_head;         // reader: completions consumed
  alignas(64) std::atomic<uint32_t> cq_tail;         // server: completions written
  alignas(64) std::atomic<uint32_t> reader_waiting;  // reader: set while it sleeps on the eventfd
  // server: set while it looks at the ring for more requests (the reader need not write the
  // submit eventfd); cleared before it sleeps, after which it looks once more.
  alignas(64) std::atomic<uint32_t> server_awake;
};
static_assert(std::atomic<uint32_t>::is_always_lock_free);
inline constexpr size_t kRingHeaderBytes = 4096;
static_assert(sizeof(RingHeader) <= kRingHeaderBytes);

inline constexpr size_t RingBytes(uint32_t sq_entries, uint32_t cq_entries) {
  return kRingHeaderBytes + size_t{sq_entries} * sizeof(Sqe) + size_t{cq_entries} * sizeof(Cqe);
}
inline Sqe* SubmissionEntries(void* ring) {
  return reinterpret_cast<Sqe*>(static_cast<char*>(ring) + kRingHeaderBytes);
}
inline Cqe* CompletionEntries(void* ring, uint32_t sq_entries) {
  return reinterpret_cast<Cqe*>(static_cast<char*>(ring) + kRingHeaderBytes +
                                size_t{sq_entries} * sizeof(Sqe));
}

}  // namespace lakecache::native
