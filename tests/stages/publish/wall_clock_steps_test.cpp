// The wall clock stepped while a job runs: capture times from before the step are put on the clock as
// it is now, those after it left as they are.
#include "stages/publish/wall_clock_steps.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace vapipe {
namespace {

constexpr int64_t kS = 1'000'000'000;
constexpr int64_t kDay = 86'400 * kS;

TEST(WallClockSteps, CaptureTimesFromBeforeAStepAreMovedByIt) {
  WallClockSteps steps;
  const int64_t wall = 1'800'000'000 * kS, mono = 5'000 * kS;
  steps.look(wall, mono);
  steps.look(wall + kS / 2, mono + kS / 2);  // half a second on both: no step
  EXPECT_EQ(steps.latest_step_ns(), 0);
  EXPECT_EQ(steps.now_clock(wall), wall);

  // Two days forward, 100 ms after a frame was captured at wall + 0.9 s (old clock).
  steps.look(wall + 2 * kDay + kS, mono + kS);
  EXPECT_EQ(steps.latest_step_ns(), 2 * kDay);
  EXPECT_EQ(steps.now_clock(wall + 9 * kS / 10), wall + 2 * kDay + 9 * kS / 10);  // captured before it
  EXPECT_EQ(steps.now_clock(wall + 2 * kDay + kS), wall + 2 * kDay + kS);          // after it
  EXPECT_EQ(steps.now_clock(0), 0);                                                 // none

  // An hour back: those captured before it (on the clock two days on) come back by the hour.
  const int64_t at = wall + 2 * kDay + 3 * kS;
  steps.look(at - 3600 * kS, mono + 3 * kS);
  EXPECT_EQ(steps.latest_step_ns(), -3600 * kS);
  EXPECT_EQ(steps.now_clock(at - kS / 10), at - kS / 10 - 3600 * kS);
  EXPECT_EQ(steps.now_clock(at - 3600 * kS), at - 3600 * kS);
  // Slewing (NTP's small corrections) is no step.
  steps.look(at - 3600 * kS + kS + kS / 100, mono + 4 * kS);
  EXPECT_EQ(steps.latest_step_ns(), -3600 * kS);
}

}  // namespace
}  // namespace vapipe
