#include "stages/ingest/joined_timeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tests/fakes/linked_pads.h"

namespace vapipe {
namespace {

constexpr GstClockTime kMs = GST_MSECOND;
constexpr GstClockTime kFrame = 40 * kMs;  // 25 frames/s

// Frames of one part in decode order, as tsdemux gives an H.264 stream with B-frames: decode times
// step on; presentation times are 2 frames later and reordered (I P B B P B B ...).
struct Frame {
  GstClockTime pts, dts;
};
std::vector<Frame> part(GstClockTime start, int frames) {
  std::vector<Frame> out;
  for (int i = 0; i < frames; ++i) {
    const int shown = i == 0 ? 0 : (i % 3 == 1 ? i + 2 : i - 1);  // P ahead of the two B-frames shown before it
    out.push_back({start + 2 * kFrame + static_cast<GstClockTime>(shown) * kFrame, start + static_cast<GstClockTime>(i) * kFrame});
  }
  return out;
}

TEST(JoinedTimeline, ReorderedFramesAndAForwardGapLeaveTheTimestampsAlone) {
  JoinedTimeline timeline;
  for (const Frame& f : part(1400 * kMs, 100)) EXPECT_EQ(timeline.offset_for(f.pts, f.dts, kFrame), 0);
  // A recording's gap: 10 minutes later.
  for (const Frame& f : part(601400 * kMs, 10)) EXPECT_EQ(timeline.offset_for(f.pts, f.dts, kFrame), 0);
  EXPECT_EQ(timeline.restarts(), 0u);
}

TEST(JoinedTimeline, APartThatStartsOverIsTimedOnFromTheEndOfTheOneBefore) {
  JoinedTimeline timeline;
  const std::vector<Frame> first = part(1400 * kMs, 90);  // decoded 1.4 s .. 4.96 s, shown up to 5.04 s
  GstClockTime first_end = 0;
  for (const Frame& f : first) {
    EXPECT_EQ(timeline.offset_for(f.pts, f.dts, kFrame), 0);
    first_end = std::max(first_end, f.pts + kFrame);
  }
  // The next file of the three: its clock starts again at 1.4 s, and so does the third's.
  GstClockTimeDiff second_offset = 0;
  std::vector<GstClockTime> shown;
  for (const Frame& f : part(1400 * kMs, 90)) {
    second_offset = timeline.offset_for(f.pts, f.dts, kFrame);
    shown.push_back(f.pts + second_offset);
  }
  EXPECT_EQ(timeline.restarts(), 1u);
  // Its first frame decodes where the first part's last shown frame ends.
  EXPECT_EQ(static_cast<GstClockTime>(1400 * kMs + second_offset), first_end);
  EXPECT_EQ(timeline.last_joined_at(), first_end);
  EXPECT_EQ(timeline.last_went_back_to(), 1400 * kMs);
  for (GstClockTime t : shown) EXPECT_GE(t, first_end);
  GstClockTimeDiff third_offset = 0;
  for (const Frame& f : part(1400 * kMs, 90)) third_offset = timeline.offset_for(f.pts, f.dts, kFrame);
  EXPECT_EQ(timeline.restarts(), 2u);
  EXPECT_EQ(third_offset, 2 * second_offset);  // parts of one length, each after the one before
  // A seek: the first timeline again.
  timeline.reset();
  EXPECT_EQ(timeline.offset_for(3000 * kMs, 3000 * kMs, kFrame), 0);
  EXPECT_EQ(timeline.restarts(), 0u);
}

// Presentation times only (Matroska, or a demuxer that gives no decode times) of slow video with
// reordered frames: a frame shown 2 s before the one before it is a B-frame, not a new part.
TEST(JoinedTimeline, SlowVideosReorderedFramesAreNotRestarts) {
  JoinedTimeline timeline;
  const GstClockTime second = GST_SECOND;
  for (GstClockTime pts : {0 * second, 3 * second, 1 * second, 2 * second, 6 * second, 4 * second, 5 * second}) {
    EXPECT_EQ(timeline.offset_for(pts, GST_CLOCK_TIME_NONE, second), 0);
  }
  EXPECT_EQ(timeline.restarts(), 0u);
  // Untimed frames are passed over.
  EXPECT_EQ(timeline.offset_for(GST_CLOCK_TIME_NONE, GST_CLOCK_TIME_NONE, GST_CLOCK_TIME_NONE), 0);
  // Back by more than 8 of its frames: a restart.
  EXPECT_EQ(timeline.offset_for(20 * second, GST_CLOCK_TIME_NONE, second), 0);
  EXPECT_EQ(timeline.offset_for(0, GST_CLOCK_TIME_NONE, second), static_cast<GstClockTimeDiff>(21 * second));
  EXPECT_EQ(timeline.restarts(), 1u);
}

// Presentation times only, with B-frames across a pause (Matroska: a motion-triggered recording, a
// phone's VFR clip): the P-frame after a 1.1 s pause is decoded before the B-frames shown before it, whose
// times then go back 1.3 s, more than kLeap, but never before every one of the frames before them: no
// restart (found 2026-12-07: one was taken, and every frame from there was retimed 1.33 s later). A part
// that starts over still is one.
TEST(JoinedTimeline, ReorderedFramesAcrossAPauseAreNotRestarts) {
  JoinedTimeline timeline;
  const GstClockTime frame = 33333333;  // 30 frames/s
  // ffmpeg's x264 in Matroska, in decoding order (ms): 0.1 s apart from 0.333 s, a pause after 1.833 s.
  for (int ms : {0,    100,  33,   67,   233,  167,  133,  200,  333,  267,  300,  533,  433,  933,  733,  633,  800,
                 1333, 1133, 1033, 1233, 1733, 1533, 1433, 1633, 3133, 2933, 1833, 3033, 3533, 3333, 3233, 3433, 3933,
                 3733, 3633, 3833}) {
    EXPECT_EQ(timeline.offset_for(static_cast<GstClockTime>(ms) * kMs, GST_CLOCK_TIME_NONE, frame), 0) << ms;
  }
  EXPECT_EQ(timeline.restarts(), 0u);
  // The next part: back before every frame shown.
  EXPECT_EQ(timeline.offset_for(0, GST_CLOCK_TIME_NONE, frame), static_cast<GstClockTimeDiff>(3933 * kMs + frame));
  EXPECT_EQ(timeline.restarts(), 1u);
  // A time-lapse, a frame an hour, without frame durations: I P B B B shown at 0, 4, 2, 1 and 3 h.
  JoinedTimeline hourly;
  const GstClockTime hour = 3600 * GST_SECOND;
  for (GstClockTime pts : {0 * hour, 4 * hour, 2 * hour, 1 * hour, 3 * hour}) {
    EXPECT_EQ(hourly.offset_for(pts, GST_CLOCK_TIME_NONE, GST_CLOCK_TIME_NONE), 0);
  }
  EXPECT_EQ(hourly.restarts(), 0u);
}

// An MP4 time-lapse with B-frames, a frame every 2 s: its edit list starts 2 frames into its media, so
// the first two frames come without a decode time (before 0: edit_list_timeline.h) and the third's is
// 0. The second's presentation time, 8 s, is no decode time for the third's to go back from (it was: the
// frames from the third were retimed 8 s later, and the last 5, past the file's end, were dropped).
TEST(JoinedTimeline, DecodeTimesAreComparedWithDecodeTimesOnly) {
  JoinedTimeline timeline;
  const GstClockTime second = GST_SECOND;
  EXPECT_EQ(timeline.offset_for(0, GST_CLOCK_TIME_NONE, kFrame), 0);
  EXPECT_EQ(timeline.offset_for(8 * second, GST_CLOCK_TIME_NONE, kFrame), 0);
  const std::vector<Frame> frames = {{4 * second, 0},           {2 * second, 2 * second},   {6 * second, 4 * second},
                                     {16 * second, 6 * second}, {12 * second, 8 * second},  {10 * second, 10 * second},
                                     {14 * second, 12 * second}, {24 * second, 14 * second}, {20 * second, 16 * second}};
  for (const Frame& f : frames) EXPECT_EQ(timeline.offset_for(f.pts, f.dts, kFrame), 0);
  EXPECT_EQ(timeline.restarts(), 0u);
}

// The probe on a pad: buffers and buffer lists after a restart arrive retimed; the restart is counted
// for the stream's end and said in its warning.
class JoinedTimelinePad : public ::testing::Test {
 protected:
  static GstBuffer* frame(GstClockTime pts) {
    GstBuffer* b = gst_buffer_new();
    GST_BUFFER_PTS(b) = GST_BUFFER_DTS(b) = pts;
    GST_BUFFER_DURATION(b) = kFrame;
    return b;
  }
  testing::LinkedPads pads_{"joined"};
  GstPad* src_ = pads_.src();
  GstPad* sink_ = pads_.sink();
  const std::vector<GstClockTime>& arrived = pads_.arrived();
};

TEST_F(JoinedTimelinePad, FramesAfterARestartArriveRetimedAloneAndInLists) {
  TimelineRestarts restarts;
  EXPECT_EQ(timeline_restarts_warning(restarts), "");
  join_restarted_timelines(sink_, &restarts, "joined");
  for (int i = 0; i < 50; ++i) ASSERT_EQ(gst_pad_push(src_, frame(i * kFrame)), GST_FLOW_OK);  // 0 .. 2 s
  ASSERT_EQ(gst_pad_push(src_, frame(0)), GST_FLOW_OK);                                     // the next file
  GstBufferList* list = gst_buffer_list_new();
  gst_buffer_list_add(list, frame(kFrame));
  gst_buffer_list_add(list, frame(2 * kFrame));
  ASSERT_EQ(gst_pad_push_list(src_, list), GST_FLOW_OK);
  ASSERT_EQ(arrived.size(), 53u);
  EXPECT_EQ(arrived[49], 49 * kFrame);
  EXPECT_EQ(arrived[50], 50 * kFrame);
  EXPECT_EQ(arrived[51], 51 * kFrame);
  EXPECT_EQ(arrived[52], 52 * kFrame);
  EXPECT_EQ(restarts.count.load(), 1u);
  EXPECT_EQ(restarts.first_joined_at_ns.load(), static_cast<int64_t>(50 * kFrame));
  EXPECT_EQ(timeline_restarts_warning(restarts),
            "its timestamps started over once, first at 0:02.000 (files joined end to end?): its pts_ms go on across "
            "them as one timeline, which the file's own clock does not have (vapipe segments --frames and --clips "
            "read it on that timeline, from its start)");
  // A seek (a flush) starts over on the first timeline.
  pads_.flush();
  ASSERT_EQ(gst_pad_push(src_, frame(10 * kFrame)), GST_FLOW_OK);
  EXPECT_EQ(arrived.back(), 10 * kFrame);
}

}  // namespace
}  // namespace vapipe
