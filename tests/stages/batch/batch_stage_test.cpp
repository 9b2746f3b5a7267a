#include "stages/batch/batch_stage.h"

#include <cstdint>
#include <gtest/gtest.h>

#include <thread>

#include "tests/fakes/stage_harness.h"

namespace vapipe {
namespace {

using testing::CollectingEmitter;

TEST(BatchStage, EndOfStreamNeverOvertakesThatStreamsFrames) {
  Config config = testing::test_config(2);
  config.batch.max_batch_size = 8;
  config.batch.max_delay_ms = 60000;  // no timer: only the end flushes
  BatchStage stage;
  ASSERT_TRUE(stage.open(StageContext{config}).ok());
  CollectingEmitter out;
  for (uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(stage.process(testing::tensor_message(0, i), out).ok());
  ASSERT_TRUE(stage.process(testing::tensor_message(1, 0), out).ok());
  EXPECT_TRUE(out.messages.empty());
  ASSERT_TRUE(stage.process(testing::end_message(0, 3), out).ok());
  ASSERT_EQ(out.messages.size(), 2u);
  EXPECT_EQ(out.messages[0].kind, MessageKind::kBatch);
  size_t stream0 = 0;
  for (const Message& m : out.messages[0].items) stream0 += m.env.stream_index == 0;
  EXPECT_EQ(stream0, 3u);
  EXPECT_EQ(out.messages[1].kind, MessageKind::kStreamEnd);
}

TEST(BatchStage, DeadlineEmitsAPartialBatch) {
  Config config = testing::test_config();
  config.batch.max_batch_size = 8;
  config.batch.max_delay_ms = 1;
  BatchStage stage;
  ASSERT_TRUE(stage.open(StageContext{config}).ok());
  CollectingEmitter out;
  ASSERT_TRUE(stage.process(testing::tensor_message(0, 0), out).ok());
  ASSERT_TRUE(stage.next_deadline().has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  ASSERT_TRUE(stage.on_deadline(out).ok());
  ASSERT_EQ(out.messages.size(), 1u);
  EXPECT_EQ(out.messages[0].items.size(), 1u);
  EXPECT_FALSE(stage.next_deadline().has_value());
}

TEST(BatchStage, FullBatchesLeaveAtOnce) {
  Config config = testing::test_config();
  config.batch.max_batch_size = 4;
  BatchStage stage;
  ASSERT_TRUE(stage.open(StageContext{config}).ok());
  CollectingEmitter out;
  for (uint64_t i = 0; i < 9; ++i) ASSERT_TRUE(stage.process(testing::tensor_message(0, i), out).ok());
  ASSERT_EQ(out.messages.size(), 2u);
  ASSERT_TRUE(stage.close(out).ok());
  ASSERT_EQ(out.messages.size(), 3u);
  EXPECT_EQ(out.messages[2].items.size(), 1u);
  EXPECT_EQ(out.messages[2].items[0].env.seq, 8u);
  // What the metrics show: 3 batches of 9 frames, 2 of them full.
  EXPECT_EQ(stage.counters(), (StageCounters{{"batches", 3}, {"frames", 9}, {"full_batches", 2}}));
}

}  // namespace
}  // namespace vapipe
