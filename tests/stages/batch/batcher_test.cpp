#include "stages/batch/batcher.h"

#include <cstdint>
#include <gtest/gtest.h>

#include <map>

#include "tests/fakes/stage_harness.h"

namespace vapipe {
namespace {

using namespace std::chrono_literals;
using testing::tensor_message;

const SteadyTime t0 = std::chrono::steady_clock::now();

TEST(Batcher, FullBatchLeavesAtMaxSize) {
  Batcher b({4, 10ms});
  for (uint64_t i = 0; i < 3; ++i) b.add(tensor_message(0, i), t0);
  EXPECT_FALSE(b.take_full().has_value());
  b.add(tensor_message(0, 3), t0);
  auto batch = b.take_full();
  ASSERT_TRUE(batch.has_value());
  ASSERT_EQ(batch->items.size(), 4u);
  for (uint64_t i = 0; i < 4; ++i) EXPECT_EQ(batch->items[i].env.seq, i);
  EXPECT_EQ(b.pending(), 0u);
}

TEST(Batcher, PartialBatchLeavesAfterMaxDelay) {
  Batcher b({8, 10ms});
  b.add(tensor_message(0, 0), t0);
  b.add(tensor_message(1, 0), t0 + 5ms);
  EXPECT_EQ(b.deadline(), t0 + 10ms);
  EXPECT_FALSE(b.take_due(t0 + 9ms).has_value());
  auto batch = b.take_due(t0 + 10ms);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->items.size(), 2u);
  EXPECT_FALSE(b.deadline().has_value());
}

TEST(Batcher, RoundRobinKeepsAFastStreamFromStarvingASlowOne) {
  Batcher b({4, 10ms});
  for (uint64_t i = 0; i < 20; ++i) b.add(tensor_message(0, i), t0);  // a fast stream
  b.add(tensor_message(1, 0), t0 + 1ms);                              // a slow one, arriving later
  auto batch = b.take_full();
  ASSERT_TRUE(batch.has_value());
  int slow = 0;
  for (const Message& m : batch->items) slow += m.env.stream_index == 1;
  EXPECT_EQ(slow, 1) << "the slow stream's frame must be in the first batch";
}

TEST(Batcher, PerStreamOrderIsKeptAcrossBatches) {
  Batcher b({3, 10ms});
  for (uint64_t i = 0; i < 10; ++i) {
    for (uint32_t s = 0; s < 3; ++s) b.add(tensor_message(s, i), t0);
  }
  std::map<uint32_t, uint64_t> next;
  size_t seen = 0;
  while (auto batch = b.take_full()) {
    for (const Message& m : batch->items) {
      EXPECT_EQ(m.env.seq, next[m.env.stream_index]++) << "stream " << m.env.stream_index;
      ++seen;
    }
  }
  EXPECT_EQ(seen, 30u);
}

TEST(Batcher, FlushStreamEmptiesThatStream) {
  Batcher b({4, 10ms});
  for (uint64_t i = 0; i < 6; ++i) b.add(tensor_message(0, i), t0);
  b.add(tensor_message(1, 0), t0);
  auto batches = b.flush_stream(0);
  size_t stream0 = 0;
  for (const Message& batch : batches) {
    EXPECT_LE(batch.items.size(), 4u);
    for (const Message& m : batch.items) stream0 += m.env.stream_index == 0;
  }
  EXPECT_EQ(stream0, 6u);
  // Stream 1's frame either rode along or is still waiting; flush_all takes what is left.
  size_t left = b.pending();
  size_t flushed = 0;
  for (const Message& batch : b.flush_all()) flushed += batch.items.size();
  EXPECT_EQ(flushed, left);
  EXPECT_EQ(b.pending(), 0u);
}

}  // namespace
}  // namespace vapipe
