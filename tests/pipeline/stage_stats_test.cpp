#include "pipeline/stage_stats.h"

#include <cstdint>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

namespace vapipe {
namespace {

TEST(StageStats, SnapshotsOfEveryStageReadBackInPipelineOrder) {
  JobLayout layout;
  layout.run_dir = (std::filesystem::temp_directory_path() / ("vapipe-stage-stats-" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(layout.run_dir);
  StageStatsSnapshot infer;
  infer.stage = "infer";
  infer.lane = 1;
  infer.up_s = 10;
  infer.messages_in = 42;
  infer.errors = 1;
  infer.busy_s = 2.5;
  infer.send_blocked_s = 0.5;
  infer.slot_wait_s = 0.25;
  infer.input_wait_s = 7;
  infer.counters = {{"batches", 42}, {"classify_seconds", 1.75}};
  infer.facts = {{"model", "door-v2"}, {"model_file", "/models/door-v2.pt"}};
  infer.working_s = 3.5;
  infer.working_on = "processing messages";
  infer.stuck_after_s = 120;
  layout.lane = 1;
  const double before_s = static_cast<double>(std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch()).count()) / 1000.0;
  ASSERT_TRUE(write_stage_stats(infer, stage_stats_path(layout, StageKind::kInfer)).ok());
  StageStatsSnapshot pre;
  pre.stage = "preprocess";
  pre.has_input = false;
  pre.ended = true;
  pre.stream_dropped = {{"door", 3}, {"yard", 0}};  // ingest's, in practice
  pre.stream_continuity_errors = {{"tv", 12}};
  pre.stream_undecoded = {{"door", 2}};
  pre.stream_rtp_lost = {{"door", 7}};
  pre.stream_rtp_received = {{"door", 7000}};
  layout.lane = 0;
  ASSERT_TRUE(write_stage_stats(pre, stage_stats_path(layout, StageKind::kPreprocess)).ok());
  std::ofstream(layout.run_dir + "/stats-batch-0.json") << "{\"stage\": ";  // half a file: skipped
  std::ofstream(layout.run_dir + "/streams.json") << "{}";                   // not a stats file

  const auto all = read_stage_stats(layout.run_dir);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].stage, "preprocess");
  EXPECT_FALSE(all[0].has_input);
  EXPECT_TRUE(all[1].has_input);
  EXPECT_EQ(all[1].stage, "infer");
  EXPECT_EQ(all[1].lane, 1u);
  EXPECT_EQ(all[1].messages_in, 42u);
  EXPECT_EQ(all[1].errors, 1u);
  EXPECT_DOUBLE_EQ(all[1].busy_s, 2.5);
  EXPECT_DOUBLE_EQ(all[1].send_blocked_s, 0.5);
  EXPECT_DOUBLE_EQ(all[1].slot_wait_s, 0.25);
  EXPECT_DOUBLE_EQ(all[1].input_wait_s, 7);
  // Whether its work moves: when it was written (by the writer's clock), and the stretch under way.
  EXPECT_GE(all[1].written_unix_s, before_s - 1);
  EXPECT_LE(all[1].written_unix_s, before_s + 60);
  EXPECT_DOUBLE_EQ(all[1].working_s, 3.5);
  EXPECT_EQ(all[1].working_on, "processing messages");
  EXPECT_DOUBLE_EQ(all[1].stuck_after_s, 120);
  EXPECT_FALSE(all[1].ended);
  EXPECT_TRUE(all[0].ended);
  EXPECT_EQ(all[0].working_on, "");
  EXPECT_EQ(all[1].counters, (StageCounters{{"batches", 42}, {"classify_seconds", 1.75}}));
  EXPECT_EQ(all[0].stream_dropped, (std::vector<std::pair<std::string, uint64_t>>{{"door", 3}, {"yard", 0}}));
  EXPECT_TRUE(all[1].stream_dropped.empty());
  EXPECT_EQ(all[0].stream_continuity_errors, (std::vector<std::pair<std::string, uint64_t>>{{"tv", 12}}));
  EXPECT_TRUE(all[1].stream_continuity_errors.empty());
  EXPECT_EQ(all[0].stream_undecoded, (std::vector<std::pair<std::string, uint64_t>>{{"door", 2}}));
  EXPECT_EQ(all[0].stream_rtp_lost, (std::vector<std::pair<std::string, uint64_t>>{{"door", 7}}));
  EXPECT_EQ(all[0].stream_rtp_received, (std::vector<std::pair<std::string, uint64_t>>{{"door", 7000}}));
  EXPECT_EQ(all[1].facts, (StageFacts{{"model", "door-v2"}, {"model_file", "/models/door-v2.pt"}}));
  EXPECT_TRUE(all[0].facts.empty());
  EXPECT_TRUE(read_stage_stats(layout.run_dir + "/absent").empty());
  std::filesystem::remove_all(layout.run_dir);
}

}  // namespace
}  // namespace vapipe
