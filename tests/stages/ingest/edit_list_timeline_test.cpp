#include "stages/ingest/edit_list_timeline.h"

#include <gtest/gtest.h>

#include <optional>

namespace vapipe {
namespace {

constexpr GstClockTime kMs = GST_MSECOND;

GstSegment time_segment(GstClockTime start, GstClockTime time, GstClockTime stop) {
  GstSegment s;
  gst_segment_init(&s, GST_FORMAT_TIME);
  s.start = start;
  s.time = time;
  s.position = start;
  s.stop = stop;
  return s;
}

// qtdemux's segment of an MP4 whose edit list starts its video 2 frames into its media (x264's
// B-frames): start 66.667 ms, time 0. Its buffers go back by 66.667 ms and the segment with them, so
// that a buffer's timestamp is its stream time and its running time does not change.
TEST(EditListShift, AnEditListsSegmentIsMovedSoThatTimestampsAreStreamTimes) {
  const GstClockTime media_start = 66'666'666;
  const GstSegment qt = time_segment(media_start, 0, 4'066'666'666);
  const std::optional<EditListShift> shift = edit_list_shift(qt);
  ASSERT_TRUE(shift.has_value());
  EXPECT_EQ(shift->offset, static_cast<GstClockTimeDiff>(media_start));
  EXPECT_EQ(shift->segment.start, 0u);
  EXPECT_EQ(shift->segment.time, 0u);
  EXPECT_EQ(shift->shown_stop, 4'000'000'000u);
  // (the segment sent ends later by as much: the decoder's own times for the hidden frames' pictures
  // stay inside it; frames past the part shown are hidden instead of clipped)
  EXPECT_EQ(shift->segment.stop, 4'066'666'666u);
  EXPECT_EQ(shift->segment.position, 0u);
  for (const GstClockTime media : {media_start, GstClockTime{2'066'666'666}, GstClockTime{4'033'333'333}}) {
    const GstClockTime moved = shifted_by_edit_list(media, shift->offset);
    EXPECT_EQ(moved, gst_segment_to_stream_time(&qt, GST_FORMAT_TIME, media));
    EXPECT_EQ(gst_segment_to_running_time(&shift->segment, GST_FORMAT_TIME, moved),
              gst_segment_to_running_time(&qt, GST_FORMAT_TIME, media));
  }
  // The first frames' decoding times come before the first shown frame: left out, not 0 for all.
  EXPECT_EQ(decoding_time_on_edit_list(0, shift->offset), GST_CLOCK_TIME_NONE);
  EXPECT_EQ(decoding_time_on_edit_list(33'333'333, shift->offset), GST_CLOCK_TIME_NONE);
  EXPECT_EQ(decoding_time_on_edit_list(media_start, shift->offset), 0u);
  EXPECT_EQ(decoding_time_on_edit_list(GST_CLOCK_TIME_NONE, shift->offset), GST_CLOCK_TIME_NONE);
  EXPECT_EQ(shifted_by_edit_list(0, shift->offset), 0u);
  EXPECT_EQ(shifted_by_edit_list(GST_CLOCK_TIME_NONE, shift->offset), GST_CLOCK_TIME_NONE);
}

// An edit list that starts with an empty edit (the video shown from 1 s): its frames go later.
TEST(EditListShift, AnEmptyEditFirstMovesFramesLater) {
  const GstSegment qt = time_segment(0, 1000 * kMs, 3000 * kMs);
  const std::optional<EditListShift> shift = edit_list_shift(qt);
  ASSERT_TRUE(shift.has_value());
  EXPECT_EQ(shift->offset, -static_cast<GstClockTimeDiff>(1000 * kMs));
  EXPECT_EQ(shift->segment.start, 1000 * kMs);
  EXPECT_EQ(shift->segment.stop, 4000 * kMs);
  EXPECT_EQ(shift->shown_stop, 4000 * kMs);  // (nothing hidden: not made longer)
  EXPECT_EQ(shifted_by_edit_list(40 * kMs, shift->offset), 1040 * kMs);
}

// A segment already on its stream's timeline, one in bytes, or one played backwards: left alone.
TEST(EditListShift, ASegmentOnItsTimelineOrNotInTimeIsLeftAlone) {
  EXPECT_FALSE(edit_list_shift(time_segment(0, 0, GST_CLOCK_TIME_NONE)).has_value());
  EXPECT_FALSE(edit_list_shift(time_segment(2000 * kMs, 2000 * kMs, GST_CLOCK_TIME_NONE)).has_value());
  GstSegment bytes;
  gst_segment_init(&bytes, GST_FORMAT_BYTES);
  bytes.start = 1000;
  EXPECT_FALSE(edit_list_shift(bytes).has_value());
  GstSegment backwards = time_segment(66 * kMs, 0, 1000 * kMs);
  backwards.rate = -1.0;
  EXPECT_FALSE(edit_list_shift(backwards).has_value());
  // (A stop not given stays so.)
  const std::optional<EditListShift> open_ended = edit_list_shift(time_segment(66 * kMs, 0, GST_CLOCK_TIME_NONE));
  ASSERT_TRUE(open_ended.has_value());
  EXPECT_EQ(open_ended->segment.stop, GST_CLOCK_TIME_NONE);
}

}  // namespace
}  // namespace vapipe
