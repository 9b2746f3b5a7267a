#include "stages/ingest/rtp_timeline.h"

#include <cstdint>
#include <gtest/gtest.h>

#include <vector>

namespace vapipe {
namespace {

constexpr GstClockTime kMs = GST_MSECOND;
constexpr uint32_t kRate = 90000;  // video's RTP clock

// A 10 fps camera whose packets the jitter buffer stamped as it does after a 1.5 s stall (measured,
// GStreamer 1.22): the first late frame at its arrival (+1.5 s), the next squeezed together, then one
// time repeated. Restamped, they keep the camera's 100 ms.
TEST(RtpTimeline, AStallsJumpedAndSqueezedTimesFollowTheCamerasClock) {
  RtpTimeline timeline;
  const uint32_t start = 4294967296u - 20 * 9000;  // near the top: its 32 bits wrap at frame 20
  std::vector<GstClockTime> jitter_buffer = {7419, 7519, 7619, 9262, 9361, 9459, 9553, 9637, 9709, 9762, 9792,
                                             9795, 9795, 9795, 9873, 9973, 10073};
  for (size_t i = 0; i < jitter_buffer.size(); ++i) {
    const uint32_t rtp = start + static_cast<uint32_t>(i) * 9000;
    EXPECT_EQ(timeline.restamp(jitter_buffer[i] * kMs, rtp, 7, kRate), (7419 + 100 * i) * kMs) << i;
  }
  // On past the 32-bit wrap of the RTP time (every 13 h at 90 kHz).
  for (uint32_t i = 17; i < 60; ++i) {
    const uint32_t rtp = start + i * 9000;
    EXPECT_EQ(timeline.restamp((7419 + 100 * i + 3) * kMs, rtp, 7, kRate), (7419 + 100 * i) * kMs) << i;
  }
}

// B-frames: RTP times in decoding order, not rising; each keeps its own.
TEST(RtpTimeline, FramesInDecodingOrderKeepTheirOwnTimes) {
  RtpTimeline timeline;
  EXPECT_EQ(timeline.restamp(1000 * kMs, 90000, 1, kRate), 1000 * kMs);
  EXPECT_EQ(timeline.restamp(1010 * kMs, 90000 + 3 * 3000, 1, kRate), 1100 * kMs);  // P, 3 frames on
  EXPECT_EQ(timeline.restamp(1020 * kMs, 90000 + 1 * 3000, 1, kRate), 1033333333u);  // B before it
  EXPECT_EQ(timeline.restamp(1030 * kMs, 90000 + 2 * 3000, 1, kRate), 1066666666u);
  // A B-frame before the first packet's time: below it, not wrapped.
  RtpTimeline first_is_p;
  EXPECT_EQ(first_is_p.restamp(500 * kMs, 10, 1, kRate), 500 * kMs);
  EXPECT_EQ(first_is_p.restamp(510 * kMs, 10 - 3000, 1, kRate), 500 * kMs - 33333333u);
}

// A new source (the camera's SSRC changed), another clock rate, an RTP time a minute away from the
// jitter buffer's (the camera's encoder restarted its clock), or one that stepped back more than a
// second: the times start from that packet's.
TEST(RtpTimeline, ANewSourceOrARestartedRtpClockStartsAgainFromTheJitterBuffersTime) {
  RtpTimeline timeline;
  EXPECT_EQ(timeline.restamp(0, 1000, 1, kRate), 0u);
  EXPECT_EQ(timeline.restamp(100 * kMs, 1000 + 9000, 1, kRate), 100 * kMs);
  EXPECT_EQ(timeline.restamp(205 * kMs, 555, 2, kRate), 205 * kMs);  // another SSRC
  EXPECT_EQ(timeline.restamp(300 * kMs, 555 + 9000, 2, kRate), 305 * kMs);
  EXPECT_EQ(timeline.restamp(400 * kMs, 123456789, 2, kRate), 400 * kMs);  // RTP time jumped 22 min
  EXPECT_EQ(timeline.restamp(500 * kMs, 123456789 + 9000, 2, kRate), 500 * kMs);
  EXPECT_EQ(timeline.restamp(600 * kMs, 123456789 + 18000, 2, 8000), 600 * kMs);  // another clock rate
  // A stall of 30 s (the RTP clock went on as long): within kResync, still the camera's time.
  EXPECT_EQ(timeline.restamp(30700 * kMs, 123456789 + 18000 + 30 * 8000, 2, 8000), 30600 * kMs);
  // Its clock stepped back 8 s (within kResync): the times go on from the jitter buffer's, rising,
  // and follow the camera's clock from there (before: 8 s of frames at one time).
  const uint32_t back = 123456789 + 18000 + 22 * 8000;
  EXPECT_EQ(timeline.restamp(30800 * kMs, back, 2, 8000), 30800 * kMs);
  EXPECT_EQ(timeline.restamp(30905 * kMs, back + 800, 2, 8000), 30900 * kMs);
  // 0.9 s back is a reordered frame's (a 1-frame-a-second camera's B-frame): its own time.
  EXPECT_EQ(timeline.restamp(31000 * kMs, back + 800 - 7200, 2, 8000), 30000 * kMs);
  // Not known: as it is.
  EXPECT_EQ(timeline.restamp(GST_CLOCK_TIME_NONE, 1, 2, 8000), GST_CLOCK_TIME_NONE);
  EXPECT_EQ(timeline.restamp(700 * kMs, 1, 2, 0), 700 * kMs);
}

}  // namespace
}  // namespace vapipe
