// The start-up gate between ingest and the stages after it (opening_mark, wait_for_downstream_open).
#include "pipeline/stage_runner.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "pipeline/job_layout.h"
#include "pipeline/signals.h"

namespace vapipe {
namespace {

class StartUpGate : public ::testing::Test {
 protected:
  void SetUp() override {
    Config config;
    layout_ = make_job_layout(config, "gate-test-" + std::to_string(getpid()), 1);
    std::filesystem::remove_all(layout_.run_dir);
    std::filesystem::create_directories(layout_.run_dir);
  }
  void TearDown() override { std::filesystem::remove_all(layout_.run_dir); }
  void mark(StageKind kind) { std::ofstream(opening_mark(layout_, kind)).flush(); }

  JobLayout layout_;
  ShutdownFlags flags_;
};

TEST_F(StartUpGate, MarksArePerLaneExceptPublishs) {
  EXPECT_EQ(opening_mark(layout_, StageKind::kInfer), layout_.run_dir + "/infer-1.opening");
  EXPECT_EQ(opening_mark(layout_, StageKind::kPublish), layout_.run_dir + "/publish.opening");
}

TEST_F(StartUpGate, WithoutMarksIngestStartsAtOnce) {
  const DownstreamOpenWait wait = wait_for_downstream_open(layout_, flags_);
  EXPECT_TRUE(wait.opened);
  EXPECT_TRUE(wait.last.empty());
}

TEST_F(StartUpGate, IngestWaitsUntilEveryStageAfterItHasOpened) {
  for (StageKind k : {StageKind::kPreprocess, StageKind::kBatch, StageKind::kInfer, StageKind::kPublish}) mark(k);
  std::thread opener([this] {
    for (StageKind k : {StageKind::kPublish, StageKind::kPreprocess, StageKind::kBatch, StageKind::kInfer}) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      std::filesystem::remove(opening_mark(layout_, k));
    }
  });
  const DownstreamOpenWait wait = wait_for_downstream_open(layout_, flags_);
  opener.join();
  EXPECT_TRUE(wait.opened);
  EXPECT_EQ(wait.last, "infer");  // the last to open
  EXPECT_FALSE(std::filesystem::exists(opening_mark(layout_, StageKind::kInfer)));  // not before it had
}

TEST_F(StartUpGate, AStopEndsTheWaitAndNamesTheStageStillOpening) {
  mark(StageKind::kInfer);
  std::thread stopper([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    flags_.stop = true;
  });
  const DownstreamOpenWait wait = wait_for_downstream_open(layout_, flags_);
  stopper.join();
  EXPECT_FALSE(wait.opened);
  EXPECT_EQ(wait.last, "infer");
}

TEST_F(StartUpGate, AnotherLanesMarksDoNotHoldThisOne) {
  Config config;
  JobLayout lane0 = make_job_layout(config, layout_.job_id, 0);
  std::ofstream(opening_mark(lane0, StageKind::kInfer)).flush();
  const DownstreamOpenWait wait = wait_for_downstream_open(layout_, flags_);
  EXPECT_TRUE(wait.opened);
  EXPECT_TRUE(wait.last.empty());
}

}  // namespace
}  // namespace vapipe
