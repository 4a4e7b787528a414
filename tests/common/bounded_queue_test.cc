// BoundedQueue: a full queue holds its producer back, closing it ends both sides.
#include "common/bounded_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace lakecache {
namespace {

TEST(BoundedQueueTest, AProducerWaitsForRoomAndTheQueueNeverHoldsMore) {
  BoundedQueue<int> queue(3);
  std::thread producer([&] {
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(queue.Push(i));
    queue.Close();
  });
  int next = 0;
  int got = 0;
  auto deadline = [] { return CondVar::Clock::now() + std::chrono::seconds(10); };
  while (queue.Pop(&got, deadline()) == BoundedQueue<int>::Popped::kItem) EXPECT_EQ(got, next++);
  producer.join();
  EXPECT_EQ(next, 100);
  EXPECT_LE(queue.max_size(), 3u);
}

TEST(BoundedQueueTest, PopTimesOutWhenEmptyAndClosingReleasesAWaitingProducer) {
  BoundedQueue<int> queue(1);
  int got = 0;
  EXPECT_EQ(queue.Pop(&got, CondVar::Clock::now() + std::chrono::milliseconds(10)),
            BoundedQueue<int>::Popped::kTimeout);
  ASSERT_TRUE(queue.Push(1));
  std::atomic<bool> pushed{true};
  std::thread producer([&] { pushed = queue.Push(2); });  // waits: the queue is full
  queue.Close();
  producer.join();
  EXPECT_FALSE(pushed.load());
  EXPECT_EQ(queue.Pop(&got, CondVar::Clock::now()), BoundedQueue<int>::Popped::kItem);  // drains
  EXPECT_EQ(queue.Pop(&got, CondVar::Clock::now()), BoundedQueue<int>::Popped::kClosed);
}

}  // namespace
}  // namespace lakecache
