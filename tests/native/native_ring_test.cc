// The native data path's ring (native/native_ring.h): a server and a reader thread over one ring
// memory, and what the server does with indices a hostile reader wrote.
#include "native/native_ring.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace lakecache::native {
namespace {

struct Ring {
  explicit Ring(uint32_t sq, uint32_t cq) : memory(RingBytes(sq, cq) / 8 + 1, 0) {
    mapping.base = memory.data();
    mapping.bytes = RingBytes(sq, cq);
    mapping.sq_entries = sq;
    mapping.cq_entries = cq;
  }
  ~Ring() { mapping.base = nullptr; }  // not a mapping: nothing to unmap
  std::vector<uint64_t> memory;
  RingMapping mapping;
};

TEST(NativeRingTest, EveryRequestCompletesOnceAcrossThreads) {
  Ring ring(16, 32);
  constexpr uint64_t kRequests = 200000;
  std::atomic<bool> stop{false};
  std::thread server([&] {
    RingServerState state;
    while (!stop.load()) {
      Sqe e;
      if (TakeRequest(ring.mapping, &state, 0, &e) != TakeResult::kTaken) continue;
      Cqe c;
      c.user_data = e.user_data;
      c.result = static_cast<int64_t>(e.offset * 3);
      PostCompletion(ring.mapping, &state, c);
    }
  });
  RingClientState client;
  uint64_t next = 0, done = 0, in_flight = 0;
  std::vector<bool> seen(kRequests, false);
  while (done < kRequests) {
    while (next < kRequests && in_flight < 16) {
      Sqe e;
      e.op = kRead;
      e.user_data = next + 1;
      e.offset = next;
      if (!SubmitRequest(ring.mapping, &client, e)) break;
      ++next;
      ++in_flight;
    }
    Cqe c;
    while (TakeCompletion(ring.mapping, &client, &c)) {
      ASSERT_GE(c.user_data, 1u);
      ASSERT_LE(c.user_data, kRequests);
      ASSERT_FALSE(seen[c.user_data - 1]) << "completed twice";
      seen[c.user_data - 1] = true;
      ASSERT_EQ(c.result, static_cast<int64_t>((c.user_data - 1) * 3));
      ++done;
      --in_flight;
    }
  }
  stop = true;
  server.join();
}

TEST(NativeRingTest, IndicesOutOfRangeBreakTheRing) {
  Ring ring(16, 32);
  RingServerState state;
  Sqe e;
  ring.mapping.header()->sq_tail.store(17);  // more waiting than the ring holds
  EXPECT_EQ(TakeRequest(ring.mapping, &state, 0, &e), TakeResult::kBroken);
  ring.mapping.header()->sq_tail.store(1);
  ring.mapping.header()->cq_head.store(5);  // consumed completions never written
  EXPECT_EQ(TakeRequest(ring.mapping, &state, 0, &e), TakeResult::kBroken);
  ring.mapping.header()->cq_head.store(0);
  EXPECT_EQ(TakeRequest(ring.mapping, &state, 32, &e), TakeResult::kFull);  // no room to answer
  EXPECT_EQ(TakeRequest(ring.mapping, &state, 31, &e), TakeResult::kTaken);
  EXPECT_EQ(TakeRequest(ring.mapping, &state, 0, &e), TakeResult::kEmpty);
  // The server's own index is its copy: a reader that rewinds sq_head changes nothing.
  ring.mapping.header()->sq_head.store(0);
  EXPECT_EQ(TakeRequest(ring.mapping, &state, 0, &e), TakeResult::kEmpty);
}

TEST(NativeRingTest, ReadLengthsStayWithinTheFileTheBlockAndTheLargestRead) {
  Sqe e;
  e.offset = 100;
  e.length = UINT64_MAX - 50;  // would overflow offset + length
  EXPECT_EQ(ReadLength(e, 10 << 20, 4 << 20, 16 << 20), (4u << 20) - 100);
  e.offset = 10 << 20;
  EXPECT_EQ(ReadLength(e, 10 << 20, 4 << 20, 16 << 20), 0u);  // at the end
  e.offset = 9 << 20;
  e.length = 5 << 20;
  EXPECT_EQ(ReadLength(e, 10 << 20, 4 << 20, 16 << 20), 1u << 20);  // the file ends first
  e.offset = 0;
  e.length = 0;
  EXPECT_EQ(ReadLength(e, 10 << 20, 4 << 20, 16 << 20), 0u);
  e.length = 64 << 20;
  EXPECT_EQ(ReadLength(e, 100 << 20, 64 << 20, 16 << 20), 16u << 20);  // the largest read
  e.offset = UINT64_MAX - 1;
  e.length = 10;
  EXPECT_EQ(ReadLength(e, UINT64_MAX, UINT64_MAX, 16 << 20), 1u);
}

}  // namespace
}  // namespace lakecache::native
