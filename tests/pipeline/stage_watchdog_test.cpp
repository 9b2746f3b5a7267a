#include "pipeline/stage_watchdog.h"

#include <cstdlib>
#include <gtest/gtest.h>

#include <csignal>
#include <thread>

#include "pipeline/logging.h"
#include "pipeline/stage_runner.h"
#include "tests/fakes/stage_harness.h"

namespace vapipe {
namespace {

using namespace std::chrono_literals;

// Death tests fork: the child runs the statement with its own watchdog thread.
class StageWatchdogDeathTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(StageWatchdogDeathTest, OwnWorkThatLastsTooLongAbortsTheStuckThreadNamingTheStage) {
  EXPECT_EXIT(
      {
        init_logging("infer", "info");  // on stderr, as in a stage process
        StageWatchdog dog("infer", 0.2);
        dog.working("processing a message");
        std::this_thread::sleep_for(5s);  // stuck
        std::exit(0);
      },
      ::testing::KilledBySignal(SIGABRT), "infer: stuck in its own work \\(processing a message\\) for 0\\.[2-9] s");
}

TEST_F(StageWatchdogDeathTest, WaitsAndSteadyProgressAreNotAHang) {
  EXPECT_EXIT(
      {
        StageWatchdog dog("batch", 0.2);
        for (int i = 0; i < 10; ++i) {  // 0.5 s of own work, each stretch 50 ms
          dog.working("processing a message");
          std::this_thread::sleep_for(50ms);
        }
        dog.waiting();
        std::this_thread::sleep_for(500ms);  // waiting for input: not watched
        dog.working("processing a message");
        {
          WatchdogWait send(&dog);  // blocked downstream: not watched either
          std::this_thread::sleep_for(500ms);
        }
        std::this_thread::sleep_for(50ms);  // and the own work goes on, its clock started again
        std::exit(7);
      },
      ::testing::ExitedWithCode(7), "");
}

TEST_F(StageWatchdogDeathTest, ARaisedTimeoutLetsSlowButLiveWorkFinish) {
  EXPECT_EXIT(
      {
        StageWatchdog dog("infer", 0.2);
        dog.raise_timeout(5);   // the stage measured its work as slow (a big model on a CPU)
        dog.raise_timeout(1);   // never lowered
        dog.working("processing a message");
        std::this_thread::sleep_for(600ms);
        std::exit(dog.timeout_s() == 5 ? 7 : 8);
      },
      ::testing::ExitedWithCode(7), "");
}

TEST(StageWatchdog, ZeroTimeoutIsOffAndAWaitOutsideOwnWorkStaysAWait) {
  StageWatchdog off("preprocess", 0);
  off.raise_timeout(10);  // an off watchdog stays off
  EXPECT_EQ(off.timeout_s(), 0);
  off.working("processing a message");
  std::this_thread::sleep_for(50ms);  // nothing happens
  StageWatchdog dog("preprocess", 10);
  EXPECT_FALSE(dog.is_working());
  {
    WatchdogWait wait(&dog);
  }
  EXPECT_FALSE(dog.is_working());
  dog.working("closing");
  {
    WatchdogWait wait(&dog);
    EXPECT_FALSE(dog.is_working());
  }
  EXPECT_TRUE(dog.is_working());
  EXPECT_STREQ(dog.what(), "closing");
}

}  // namespace
}  // namespace vapipe
