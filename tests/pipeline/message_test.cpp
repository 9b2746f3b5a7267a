#include "pipeline/message.h"

#include <cstdint>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>

namespace vapipe {
namespace {

TEST(PackedFrameBytes, CountsEachPlaneOfTheFormatWithOddSizesRoundedUp) {
  EXPECT_EQ(packed_frame_bytes(PixelFormat::kI420, 1920, 1080), 1920u * 1080 * 3 / 2);
  EXPECT_EQ(packed_frame_bytes(PixelFormat::kNV12, 3840, 2160), 12441600u);
  EXPECT_EQ(packed_frame_bytes(PixelFormat::kRGB, 640, 480), 640u * 480 * 3);
  EXPECT_EQ(packed_frame_bytes(PixelFormat::kI420, 5, 3), 5u * 3 + 2 * 3 * 2);  // chroma 3x2
}

// What ingest does with a frame larger than a pool slot: the largest size of the same shape that fits.
TEST(FitFrameWithin, AFrameThatFitsKeepsItsSize) {
  const FrameSize same = fit_frame_within(PixelFormat::kI420, 1920, 1080, 1920u * 1080 * 3);
  EXPECT_EQ(same.width, 1920u);
  EXPECT_EQ(same.height, 1080u);
  const FrameSize exact = fit_frame_within(PixelFormat::kRGB, 640, 480, 640u * 480 * 3);
  EXPECT_EQ(exact.width, 640u);
}

TEST(FitFrameWithin, ALargerFrameShrinksToTheLargestEvenSizeOfItsShapeThatFits) {
  for (const auto format : {PixelFormat::kI420, PixelFormat::kNV12, PixelFormat::kRGB}) {
    for (const auto& [w, h, slot] : {std::tuple<uint32_t, uint32_t, size_t>{3840, 2160, 1920 * 1080 * 3},
                                    {4096, 2160, 1920 * 1080 * 3 / 2}, {1080, 1920, 500000}, {321, 239, 60000},
                                    {7680, 4320, 6220800}}) {
      if (packed_frame_bytes(format, w, h) <= slot) continue;
      const FrameSize fit = fit_frame_within(format, w, h, slot);
      const std::string what = std::string(pixel_format_name(format)) + " " + std::to_string(w) + "x" +
                               std::to_string(h) + " into " + std::to_string(slot);
      EXPECT_LE(packed_frame_bytes(format, fit.width, fit.height), slot) << what;
      EXPECT_EQ(fit.width % 2, 0u) << what;
      EXPECT_EQ(fit.height % 2, 0u) << what;
      // The shape within what rounding the height to an even number costs.
      EXPECT_NEAR(static_cast<double>(fit.height), static_cast<double>(fit.width) * h / w, 1.0) << what;
      // Largest: a step of 2 more on each side would not fit.
      EXPECT_GT(packed_frame_bytes(format, fit.width + 2, fit.height + 2), slot) << what;
      // Not far below the slot either (within what a step of 2 pixels costs a small frame).
      EXPECT_GT(packed_frame_bytes(format, fit.width, fit.height), slot * 0.95) << what;
    }
  }
  const FrameSize uhd = fit_frame_within(PixelFormat::kI420, 3840, 2160, 1920u * 1080 * 3);
  EXPECT_EQ(uhd.width, 2714u);
  EXPECT_EQ(uhd.height, 1526u);
}

TEST(FitFrameWithin, ATinySlotStillGivesAFrameThatFits) {
  const FrameSize fit = fit_frame_within(PixelFormat::kRGB, 3840, 2160, 4096);
  EXPECT_GE(fit.width, 2u);
  EXPECT_GE(fit.height, 2u);
  EXPECT_LE(packed_frame_bytes(PixelFormat::kRGB, fit.width, fit.height), 4096u);
}

}  // namespace
}  // namespace vapipe
