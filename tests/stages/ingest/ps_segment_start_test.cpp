#include "stages/ingest/ps_segment_start.h"

#include <gtest/gtest.h>

#include <optional>

namespace vapipe {
namespace {

constexpr GstClockTime kMs = GST_MSECOND;

GstSegment time_segment(GstClockTime start) {
  GstSegment s;
  gst_segment_init(&s, GST_FORMAT_TIME);
  s.start = start;
  s.time = start;
  s.position = start;
  return s;
}

// The demuxer's first segment starts at 840 ms (its first timestamp found after the first pack); the
// file's first frame is at 0: the segment starts there instead, its stream time moved back as much.
TEST(PsSegmentStart, TheFilesFirstSegmentStartsAtTheFirstFrameTheDemuxerGives) {
  PsSegmentStart start;
  start.on_segment(time_segment(840 * kMs));
  const std::optional<GstSegment> moved = start.on_buffer(0);
  ASSERT_TRUE(moved.has_value());
  EXPECT_EQ(moved->start, 0u);
  EXPECT_EQ(moved->time, 0u);
  EXPECT_EQ(moved->position, 0u);
  EXPECT_EQ(moved->format, GST_FORMAT_TIME);
  EXPECT_FALSE(start.on_buffer(40 * kMs).has_value()) << "only the first buffer after a segment";
}

// A file the demuxer placed right, a buffer without a timestamp, or a segment in bytes: left alone.
TEST(PsSegmentStart, ASegmentThatStartsAtOrBeforeItsFirstFrameIsLeftAlone) {
  PsSegmentStart right;
  right.on_segment(time_segment(0));
  EXPECT_FALSE(right.on_buffer(0).has_value());
  PsSegmentStart later;
  later.on_segment(time_segment(200 * kMs));
  EXPECT_FALSE(later.on_buffer(240 * kMs).has_value());
  PsSegmentStart untimed;
  untimed.on_segment(time_segment(840 * kMs));
  EXPECT_FALSE(untimed.on_buffer(GST_CLOCK_TIME_NONE).has_value());
  PsSegmentStart bytes;
  GstSegment b;
  gst_segment_init(&b, GST_FORMAT_BYTES);
  b.start = 1000;
  bytes.on_segment(b);
  EXPECT_FALSE(bytes.on_buffer(0).has_value());
}

// A seek: its segment is the seek's (the frames before it decode only to reach it), unless the demuxer
// took it back to the file's start as it placed it (a seek to 0 goes to its first timestamp too).
TEST(PsSegmentStart, ASeeksSegmentIsMovedOnlyWhenItIsTheFilesStart) {
  PsSegmentStart start;
  start.on_segment(time_segment(840 * kMs));
  ASSERT_TRUE(start.on_buffer(0).has_value());
  start.on_flush();
  start.on_segment(time_segment(2000 * kMs));  // a seek to 2 s: from the key frame at 1.6 s
  EXPECT_FALSE(start.on_buffer(1600 * kMs).has_value());
  start.on_flush();
  start.on_segment(time_segment(840 * kMs));  // a seek to 0
  const std::optional<GstSegment> moved = start.on_buffer(0);
  ASSERT_TRUE(moved.has_value());
  EXPECT_EQ(moved->start, 0u);
  // A flush between the segment and its first buffer: that buffer is not the segment's first.
  start.on_flush();
  start.on_segment(time_segment(840 * kMs));
  start.on_flush();
  EXPECT_FALSE(start.on_buffer(0).has_value());
}

}  // namespace
}  // namespace vapipe
