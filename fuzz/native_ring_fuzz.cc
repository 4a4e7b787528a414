// The native data path's request ring as a hostile reader may write it (native/native_ring.h),
// and the open message it may send (native_wire.h). The input is the ring's whole memory (header,
// submission and completion entries, at their exact size, so any access beyond is an
// AddressSanitizer report) plus a message. The server's invariants must hold whatever it holds:
// every request taken leaves room for its completion, lengths stay within the file, the block and
// the largest read, and draining ends.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "native/native_ring.h"
#include "native/native_wire.h"

using namespace lakecache::native;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr uint32_t kSq = 16, kCq = 32;
  const size_t ring_bytes = RingBytes(kSq, kCq);
  std::vector<char> memory(ring_bytes, 0);
  size_t take = std::min(size, ring_bytes);
  std::memcpy(memory.data(), data, take);
  RingMapping ring;
  ring.base = memory.data();
  ring.bytes = ring_bytes;
  ring.sq_entries = kSq;
  ring.cq_entries = kCq;
  RingServerState state;
  if (size >= 8) std::memcpy(&state, data, sizeof(state));  // any starting point
  uint32_t in_flight = size > 8 ? data[8] % (kCq + 1) : 0;
  const uint64_t file_size = size > 16 ? (uint64_t{data[9]} << 24) * 3 + data[10] : 5;
  const uint64_t block_size = size > 16 ? (uint64_t{data[11]} + 1) << 12 : 4096;
  for (int step = 0; step < 4 * static_cast<int>(kSq); ++step) {
    Sqe e;
    uint32_t unread = state.cq_tail - ring.header()->cq_head.load();
    TakeResult r = TakeRequest(ring, &state, in_flight, &e);
    if (r == TakeResult::kBroken || r == TakeResult::kEmpty || r == TakeResult::kFull) break;
    if (uint64_t{unread} + in_flight >= kCq) std::abort();  // taken without room
    uint64_t n = ReadLength(e, file_size, block_size, 1u << 20);
    if (n > 0 && (e.offset >= file_size || n > file_size - e.offset || n > e.length ||
                  n > (1u << 20) || (e.offset % block_size) + n > block_size)) {
      std::abort();
    }
    Cqe c;
    c.user_data = e.user_data;
    c.result = static_cast<int64_t>(n);
    PostCompletion(ring, &state, c);
  }
  ring.base = nullptr;  // not a mapping: nothing to unmap
  if (size > ring_bytes) {
    std::vector<std::string_view> paths;
    ParseOpenPaths(reinterpret_cast<const char*>(data) + ring_bytes, size - ring_bytes, 1024,
                   &paths);
    for (std::string_view p : paths) {
      if (p.empty() || p.size() > kMaxPath || p.find('\0') != std::string_view::npos) std::abort();
    }
  }
  return 0;
}
