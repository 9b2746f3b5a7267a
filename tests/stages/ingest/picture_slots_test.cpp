#include "stages/ingest/picture_slots.h"

#include <cstdint>
#include <gtest/gtest.h>

#include <vector>

namespace vapipe {
namespace {

constexpr GstClockTime kFrame = 33'366'667;  // 29.97 frames/s

// An AVI with B-frames: packets in decoding order I0 P3 B1 B2 P6 B4 B5, each with the slot of its chunk
// (0, 1, 2, ...). Pictures come out in presentation order and take the slots in order: 0, 1, 2, ...
TEST(PictureSlots, PicturesTakeThePacketsSlotsEarliestFirst) {
  PictureSlots slots;
  std::vector<GstClockTime> got;
  auto out = [&] {
    const auto slot = slots.picture();
    ASSERT_TRUE(slot.has_value());
    got.push_back(slot->first);
  };
  slots.packet(0, 0, kFrame);  // I0
  slots.packet(1 * kFrame, GST_CLOCK_TIME_NONE, kFrame);  // P3
  out();                                                  // I0 out once P3 is in
  slots.packet(2 * kFrame, GST_CLOCK_TIME_NONE, kFrame);  // B1
  out();
  slots.packet(3 * kFrame, GST_CLOCK_TIME_NONE, kFrame);  // B2
  out();
  slots.packet(4 * kFrame, GST_CLOCK_TIME_NONE, kFrame);  // P6
  out();                                                  // P3
  EXPECT_EQ(got, (std::vector<GstClockTime>{0, kFrame, 2 * kFrame, 3 * kFrame}));
  EXPECT_EQ(slots.waiting(), 1u);
  // A packet with neither time gives no slot; a GIF's packets have presentation times only.
  slots.clear();
  slots.packet(GST_CLOCK_TIME_NONE, GST_CLOCK_TIME_NONE, kFrame);
  EXPECT_FALSE(slots.picture().has_value());
  slots.packet(GST_CLOCK_TIME_NONE, 100 * GST_MSECOND, 50 * GST_MSECOND);
  const auto gif = slots.picture();
  ASSERT_TRUE(gif.has_value());
  EXPECT_EQ(gif->first, 100 * GST_MSECOND);
  EXPECT_EQ(gif->second, 50 * GST_MSECOND);
}

// A picture timed at or before the one before it is one frame after it; others keep their time; the
// first after a seek, and a decoder or stream that says no frame rate, are left as they are.
TEST(PictureSlots, APictureTimedAtOrBeforeTheOneBeforeIsOneFrameAfterIt) {
  EXPECT_EQ(rising_picture_time(11 * kFrame, 11 * kFrame, kFrame), 12 * kFrame);  // a duplicate
  EXPECT_EQ(rising_picture_time(12 * kFrame, 13 * kFrame, kFrame), 14 * kFrame);  // behind
  EXPECT_EQ(rising_picture_time(15 * kFrame, 13 * kFrame, kFrame), 15 * kFrame);  // a gap stays
  EXPECT_EQ(rising_picture_time(14 * kFrame, 14 * kFrame - 40, kFrame), 15 * kFrame - 40);  // (a few ns of drift)
  EXPECT_EQ(rising_picture_time(5 * kFrame, GST_CLOCK_TIME_NONE, kFrame), 5 * kFrame);
  EXPECT_EQ(rising_picture_time(5 * kFrame, 5 * kFrame, 0), 5 * kFrame);
  EXPECT_EQ(rising_picture_time(GST_CLOCK_TIME_NONE, 5 * kFrame, kFrame), GST_CLOCK_TIME_NONE);
  // The decoder's times of a 60-frame MPEG-4 AVI with B-frames (found 2026-12-07): one frame behind
  // from the first GOP's end, two from the second's, back in step at its last frame.
  std::vector<GstClockTime> decoder;
  for (int i = 0; i <= 11; ++i) decoder.push_back(i * kFrame);
  for (int i = 11; i <= 22; ++i) decoder.push_back(i * kFrame);
  for (int i = 22; i <= 56; ++i) decoder.push_back(i * kFrame);
  decoder.push_back(58 * kFrame);
  ASSERT_EQ(decoder.size(), 60u);
  GstClockTime previous = GST_CLOCK_TIME_NONE;
  for (size_t i = 0; i < decoder.size(); ++i) {
    previous = rising_picture_time(decoder[i], previous, kFrame);
    EXPECT_EQ(previous, i * kFrame) << i;
  }
}

}  // namespace
}  // namespace vapipe
