// The request ring of the native data path (layout: native_wire.h), both ends. Header-only, on
// libc alone, for the server and the client library.
//
// The server trusts nothing in the ring: it keeps the indices it owns (sq_head, cq_tail) in its own
// memory and only publishes them; an index it reads (sq_tail, cq_head) that is out of range breaks
// the ring (TakeRequest answers kBroken) and the server ends the session. It never takes a request
// whose completion might not fit: requests taken and not yet completed, plus completions the
// reader has not consumed, stay within cq_entries.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include "native/native_wire.h"

namespace lakecache::native {

struct RingMapping {
  void* base = nullptr;
  size_t bytes = 0;
  uint32_t sq_entries = 0;
  uint32_t cq_entries = 0;

  RingHeader* header() const { return static_cast<RingHeader*>(base); }
  Sqe* sq() const { return SubmissionEntries(base); }
  Cqe* cq() const { return CompletionEntries(base, sq_entries); }

  RingMapping() = default;
  RingMapping(RingMapping&& o) noexcept { *this = std::move(o); }
  RingMapping& operator=(RingMapping&& o) noexcept {
    if (this != &o) {
      Unmap();
      base = std::exchange(o.base, nullptr);
      bytes = o.bytes;
      sq_entries = o.sq_entries;
      cq_entries = o.cq_entries;
    }
    return *this;
  }
  ~RingMapping() { Unmap(); }
  void Unmap() {
    if (base != nullptr) ::munmap(base, bytes);
    base = nullptr;
  }

  // Maps the ring memfd `fd` read-write; false (errno set) on failure. Both counts must be powers
  // of two.
  bool MapFd(int fd, uint32_t sq, uint32_t cq) {
    if (sq == 0 || cq == 0 || (sq & (sq - 1)) != 0 || (cq & (cq - 1)) != 0 || sq > 65536 ||
        cq > 131072) {
      errno = EINVAL;
      return false;
    }
    size_t n = RingBytes(sq, cq);
    void* m = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) return false;
    Unmap();
    base = m;
    bytes = n;
    sq_entries = sq;
    cq_entries = cq;
    return true;
  }
};

// ---- the server's end -------------------------------------------------------------------------

struct RingServerState {
  uint32_t sq_head = 0;
  uint32_t cq_tail = 0;
};

enum class TakeResult { kTaken, kEmpty, kFull, kBroken };

// Takes the next request into *out, given `in_flight` requests taken and not yet completed.
inline TakeResult TakeRequest(const RingMapping& ring, RingServerState* state, uint32_t in_flight,
                              Sqe* out) {
  RingHeader* h = ring.header();
  uint32_t tail = h->sq_tail.load(std::memory_order_acquire);
  uint32_t waiting = tail - state->sq_head;
  if (waiting > ring.sq_entries) return TakeResult::kBroken;
  if (waiting == 0) return TakeResult::kEmpty;
  uint32_t consumed = h->cq_head.load(std::memory_order_acquire);
  uint32_t unread = state->cq_tail - consumed;
  if (unread > ring.cq_entries) return TakeResult::kBroken;
  if (uint64_t{unread} + in_flight >= ring.cq_entries) return TakeResult::kFull;
  std::memcpy(out, &ring.sq()[state->sq_head & (ring.sq_entries - 1)], sizeof(Sqe));
  ++state->sq_head;
  h->sq_head.store(state->sq_head, std::memory_order_release);
  return TakeResult::kTaken;
}

// Writes a completion (room is guaranteed by TakeRequest). True when the reader sleeps on the
// completion eventfd and must be woken.
inline bool PostCompletion(const RingMapping& ring, RingServerState* state, const Cqe& c) {
  RingHeader* h = ring.header();
  std::memcpy(&ring.cq()[state->cq_tail & (ring.cq_entries - 1)], &c, sizeof(Cqe));
  ++state->cq_tail;
  h->cq_tail.store(state->cq_tail, std::memory_order_seq_cst);
  return h->reader_waiting.load(std::memory_order_seq_cst) != 0;
}

// The bytes a read entry may return of a file of `size` bytes in blocks of `block_size`: up to
// the end of the file, of the block and of `max_read`; 0 at or past the end.
inline uint64_t ReadLength(const Sqe& e, uint64_t size, uint64_t block_size, uint64_t max_read) {
  if (e.offset >= size || e.length == 0) return 0;
  uint64_t end = e.length < size - e.offset ? e.offset + e.length : size;  // never overflows
  if (block_size > 0 && e.offset / block_size < (UINT64_MAX - block_size) / block_size) {
    end = std::min(end, (e.offset / block_size + 1) * block_size);
  }
  return std::min(end - e.offset, max_read);
}

// Whether the reader has queued requests the server has not taken (a cheap look at the ring).
inline bool RequestsQueued(const RingMapping& ring, const RingServerState& state) {
  // seq_cst: paired with the store of server_awake before it (no wake-up lost; no fence, which
  // ThreadSanitizer does not model).
  return ring.header()->sq_tail.load(std::memory_order_seq_cst) != state.sq_head;
}

// ---- the reader's end ----------------------------------------------------------------------

struct RingClientState {
  uint32_t sq_tail = 0;
  uint32_t cq_head = 0;
};

// Queues one request; false when the ring is full (the server has not taken enough yet).
inline bool SubmitRequest(const RingMapping& ring, RingClientState* state, const Sqe& e) {
  RingHeader* h = ring.header();
  uint32_t taken = h->sq_head.load(std::memory_order_acquire);
  if (state->sq_tail - taken >= ring.sq_entries) return false;
  std::memcpy(&ring.sq()[state->sq_tail & (ring.sq_entries - 1)], &e, sizeof(Sqe));
  ++state->sq_tail;
  h->sq_tail.store(state->sq_tail, std::memory_order_seq_cst);
  return true;
}

// The next completion into *out; false when there is none.
inline bool TakeCompletion(const RingMapping& ring, RingClientState* state, Cqe* out) {
  RingHeader* h = ring.header();
  // seq_cst: paired with the store of reader_waiting before a reader sleeps.
  uint32_t tail = h->cq_tail.load(std::memory_order_seq_cst);
  if (tail == state->cq_head) return false;
  std::memcpy(out, &ring.cq()[state->cq_head & (ring.cq_entries - 1)], sizeof(Cqe));
  ++state->cq_head;
  h->cq_head.store(state->cq_head, std::memory_order_release);
  return true;
}

// Whether the server must be woken (the submit eventfd written) for requests just queued: false
// while it looks at the ring anyway.
inline bool ServerSleeps(const RingMapping& ring) {
  return ring.header()->server_awake.load(std::memory_order_seq_cst) == 0;
}

// Whether requests the reader queued wait for the server to take them.
inline bool RequestsWaiting(const RingMapping& ring, const RingClientState& state) {
  return ring.header()->sq_head.load(std::memory_order_acquire) != state.sq_tail;
}

}  // namespace lakecache::native
