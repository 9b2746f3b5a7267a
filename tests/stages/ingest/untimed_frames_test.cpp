#include "stages/ingest/untimed_frames.h"

#include <gtest/gtest.h>

namespace vapipe {
namespace {

constexpr GstClockTime kMs = GST_MSECOND;

// One frame after the one before: by its duration, else by the caps' frame rate, else at 25 frames/s;
// the first of a segment at the segment's start.
TEST(UntimedFrames, APictureWithoutATimestampIsOneFrameAfterTheOneBefore) {
  EXPECT_EQ(untimed_picture_pts(GST_CLOCK_TIME_NONE, GST_CLOCK_TIME_NONE, 0, GST_CLOCK_TIME_NONE), 0u);
  EXPECT_EQ(untimed_picture_pts(GST_CLOCK_TIME_NONE, GST_CLOCK_TIME_NONE, 0, 2000 * kMs), 2000 * kMs);
  EXPECT_EQ(untimed_picture_pts(0, GST_CLOCK_TIME_NONE, 0, 0), 40 * kMs);
  EXPECT_EQ(untimed_picture_pts(40 * kMs, GST_CLOCK_TIME_NONE, 100 * kMs, 0), 140 * kMs);
  EXPECT_EQ(untimed_picture_pts(40 * kMs, 33 * kMs, 100 * kMs, 0), 73 * kMs);
  EXPECT_EQ(untimed_picture_pts(40 * kMs, 0, 0, 0), 80 * kMs);  // a duration of 0 says nothing
}

}  // namespace
}  // namespace vapipe
