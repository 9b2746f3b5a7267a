#include "stages/infer/auto_batch.h"

#include <cstdint>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "stages/batch/batch_stage.h"
#include "tests/fakes/stage_harness.h"

namespace vapipe {
namespace {

// Seconds per pass for a model whose throughput grows up to `saturation` images and then stays flat.
std::vector<BatchCost> saturating(size_t saturation, size_t limit) {
  std::vector<BatchCost> costs;
  for (size_t b = 1; b <= limit; b *= 2) {
    const double per_second = 1000.0 * std::min(b, saturation) / saturation;
    costs.push_back({b, b / per_second});
  }
  return costs;
}

TEST(AutoBatch, PicksTheSmallestBatchNearTheBestThroughput) {
  EXPECT_EQ(choose_batch_size(saturating(32, 256)), 32u);
  EXPECT_EQ(choose_batch_size(saturating(1, 64)), 1u);
  // Within 5% of the best counts as the best: 64 gives 960/s, 128 gives 1000/s.
  std::vector<BatchCost> costs = {{16, 16 / 600.0}, {32, 32 / 900.0}, {64, 64 / 960.0}, {128, 128 / 1000.0}};
  EXPECT_EQ(choose_batch_size(costs), 64u);
  EXPECT_EQ(choose_batch_size({}), 1u);
}

TEST(AutoBatch, SearchStopsWhenThroughputStopsGrowingOrAtTheLimit) {
  std::vector<BatchCost> costs = {{1, 1 / 100.0}, {2, 2 / 190.0}};
  EXPECT_FALSE(batch_search_done(costs, 256));
  costs.push_back({4, 4 / 200.0});  // +5%: still growing
  EXPECT_FALSE(batch_search_done(costs, 256));
  costs.push_back({8, 8 / 202.0});  // +1%: flat
  EXPECT_TRUE(batch_search_done(costs, 256));
  EXPECT_TRUE(batch_search_done({{16, 0.1}}, 16));
}

TEST(AutoBatch, NextBatchMustLeaveTheReserveFree) {
  constexpr uint64_t GiB = 1ull << 30;
  EXPECT_TRUE(next_batch_fits(100 * GiB, 90 * GiB, 14 * GiB));   // used 10, 76 to spare
  EXPECT_FALSE(next_batch_fits(100 * GiB, 50 * GiB, 14 * GiB));  // used 50, only 36 to spare
  EXPECT_FALSE(next_batch_fits(20 * GiB, 10 * GiB, 14 * GiB));   // already under the reserve
}

TEST(PaddedBatchSizes, PowersOfTwoAndOneAndAHalfTimesThemUpToTheLargest) {
  EXPECT_EQ(padded_batch_sizes(256),
            (std::vector<size_t>{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256}));
  EXPECT_EQ(padded_batch_sizes(20), (std::vector<size_t>{1, 2, 3, 4, 6, 8, 12, 16, 20}));
  EXPECT_EQ(padded_batch_sizes(1), (std::vector<size_t>{1}));
  EXPECT_TRUE(padded_batch_sizes(0).empty());
  // No size is more than half again the one before it (the padding costs at most that much work).
  const std::vector<size_t> sizes = padded_batch_sizes(1000);
  for (size_t i = 1; i < sizes.size(); ++i) EXPECT_LE(2 * sizes[i], 3 * sizes[i - 1] + 1) << sizes[i];
}

TEST(PaddedBatchSizes, ABatchRunsAtTheSmallestSizeThatHoldsIt) {
  const std::vector<size_t> sizes = padded_batch_sizes(100);
  EXPECT_EQ(padded_size_for(sizes, 1), 1u);
  EXPECT_EQ(padded_size_for(sizes, 5), 6u);
  EXPECT_EQ(padded_size_for(sizes, 64), 64u);
  EXPECT_EQ(padded_size_for(sizes, 65), 96u);
  EXPECT_EQ(padded_size_for(sizes, 97), 100u);
  EXPECT_EQ(padded_size_for(sizes, 101), 101u);  // larger than any: as it is
  EXPECT_EQ(padded_size_for({}, 7), 7u);
}

class AutoBatchFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("vapipe-auto-batch-" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(AutoBatchFile, TheBatchStageTakesTheSizeInferWrites) {
  Config config = testing::test_config();
  config.batch.auto_size = true;
  config.batch.max_batch_size = config.batch.auto_limit;
  JobLayout layout = make_job_layout(config, "auto-batch-test", 1);
  layout.run_dir = dir_.string();
  std::thread infer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // batch is already waiting
    ASSERT_TRUE(write_auto_batch_size(auto_batch_file(dir_.string(), 1), 3).ok());
  });
  BatchStage stage;
  Status opened = stage.open(StageContext{config, nullptr, nullptr, &layout});
  infer.join();
  ASSERT_TRUE(opened.ok()) << opened.message();
  // Three tensors make a full batch: the size came from the file, not from auto_limit.
  testing::CollectingEmitter out;
  for (uint64_t seq = 0; seq < 3; ++seq) ASSERT_TRUE(stage.process(testing::tensor_message(0, seq), out).ok());
  ASSERT_EQ(out.messages.size(), 1u);
  EXPECT_EQ(out.messages[0].items.size(), 3u);
}

TEST_F(AutoBatchFile, WaitingEndsWithAClearErrorOrOnStop) {
  const std::string path = auto_batch_file(dir_.string(), 0);
  auto timed_out = wait_for_auto_batch_size(path, 0.2, nullptr);
  ASSERT_FALSE(timed_out.ok());
  EXPECT_EQ(timed_out.status().code(), StatusCode::kTimeout);
  EXPECT_NE(timed_out.status().message().find(path), std::string::npos);
  std::atomic<bool> stop{true};
  auto stopped = wait_for_auto_batch_size(path, 10, &stop);
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.status().code(), StatusCode::kCancelled);
}

}  // namespace
}  // namespace vapipe
