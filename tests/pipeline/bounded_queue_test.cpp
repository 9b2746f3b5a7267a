#include "pipeline/bounded_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace vapipe {
namespace {

using namespace std::chrono_literals;

TEST(BoundedQueue, DropOldestKeepsTheNewestAndCountsDrops) {
  BoundedQueue<int> q(3, QueuePolicy::kDropOldest);
  for (int i = 0; i < 5; ++i) q.push(i);
  EXPECT_EQ(q.dropped(), 2u);
  EXPECT_EQ(q.pop(0ms), 2);
  EXPECT_EQ(q.pop(0ms), 3);
  EXPECT_EQ(q.pop(0ms), 4);
  EXPECT_FALSE(q.pop(0ms).has_value());
}

TEST(BoundedQueue, BlockPolicyWaitsForRoomAndLosesNothing) {
  BoundedQueue<int> q(2, QueuePolicy::kBlock);
  std::atomic<int> pushed{0};
  std::thread producer([&] {
    for (int i = 0; i < 100; ++i) {
      ASSERT_EQ(q.push(i), PushResult::kPushed);
      ++pushed;
    }
  });
  std::this_thread::sleep_for(20ms);
  EXPECT_LE(pushed.load(), 2);  // blocked on a full queue
  for (int i = 0; i < 100; ++i) {
    auto v = q.pop(5s);
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(*v, i);
  }
  producer.join();
  EXPECT_EQ(q.dropped(), 0u);
}

TEST(BoundedQueue, CloseWakesABlockedProducerAndDrains) {
  BoundedQueue<int> q(1, QueuePolicy::kBlock);
  q.push(1);
  std::thread producer([&] { EXPECT_EQ(q.push(2), PushResult::kClosed); });
  std::this_thread::sleep_for(10ms);
  q.close();
  producer.join();
  EXPECT_EQ(q.pop(0ms), 1);
  EXPECT_TRUE(q.closed_and_empty());
}

// A stream that reconnects: the old pipeline's producer is released by close(), its items drained,
// and the queue takes the new producer's items; the drop count goes on.
TEST(BoundedQueue, ReopenTakesANewProducerAfterTheOldOneWasReleased) {
  BoundedQueue<int> q(1, QueuePolicy::kBlock);
  q.push(1);
  std::thread old_producer([&] { EXPECT_EQ(q.push(2), PushResult::kClosed); });
  std::this_thread::sleep_for(10ms);
  q.close();
  old_producer.join();
  EXPECT_EQ(q.pop(0ms), 1);
  EXPECT_EQ(q.pop(0ms), std::nullopt);
  q.reopen();
  EXPECT_FALSE(q.closed_and_empty());
  EXPECT_EQ(q.push(3), PushResult::kPushed);
  EXPECT_EQ(q.pop(0ms), 3);
  EXPECT_EQ(q.pop(1ms), std::nullopt);  // open and empty: waits, times out
}

}  // namespace
}  // namespace vapipe
