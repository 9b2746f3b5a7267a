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

// A B-VOP is a VOP start code (00 00 01 B6) whose next two bits say 2; I is 0, P 1.
TEST(PictureSlots, AnMpeg4PacketHoldsABVopWhenAVopsCodingTypeIs2) {
  const uint8_t i_vop[] = {0, 0, 1, 0xB6, 0x10, 0xff};
  const uint8_t p_vop[] = {0, 0, 1, 0xB6, 0x50, 0xff};
  const uint8_t packed_p_and_b[] = {0, 0, 1, 0xB6, 0x50, 0xff, 0x12, 0, 0, 1, 0xB6, 0x90, 0x00};
  const uint8_t cut[] = {0, 0, 1, 0xB6};
  EXPECT_FALSE(holds_mpeg4_b_vop(i_vop, sizeof i_vop));
  EXPECT_FALSE(holds_mpeg4_b_vop(p_vop, sizeof p_vop));
  EXPECT_TRUE(holds_mpeg4_b_vop(packed_p_and_b, sizeof packed_p_and_b));
  EXPECT_FALSE(holds_mpeg4_b_vop(cut, sizeof cut));
}

}  // namespace
}  // namespace vapipe
