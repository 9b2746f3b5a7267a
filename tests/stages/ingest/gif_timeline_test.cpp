#include "stages/ingest/gif_timeline.h"

#include <cstdint>
#include <cstdio>
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace vapipe {
namespace {

const std::string kAnimation = std::string(VAPIPE_SOURCE_DIR) + "/tests/media/anim-32x24.gif";
constexpr int64_t kMs = 1'000'000;

// tests/media/anim-32x24.gif: 12 frames, as libav's demuxer times them (a delay of 0 is shown for 10
// hundredths of a second).
TEST(GifTimeline, EachFrameIsTimedByTheDelaysBeforeIt) {
  const auto t = read_gif_timeline(kAnimation);
  ASSERT_TRUE(t.ok()) << t.status().message();
  const std::vector<int64_t> pts{0, 100 * kMs, 200 * kMs, 300 * kMs, 400 * kMs, 500 * kMs, 550 * kMs,
                                 600 * kMs, 650 * kMs, 700 * kMs, 750 * kMs, 800 * kMs};
  EXPECT_EQ(t->pts_ns, pts);
  ASSERT_EQ(t->duration_ns.size(), 12u);
  EXPECT_EQ(t->duration_ns[4], 100 * kMs);
  EXPECT_EQ(t->duration_ns[11], 50 * kMs);
  EXPECT_EQ(t->last_pts_ns(), 800 * kMs);
  EXPECT_TRUE(t->loops);
}

std::string file_bytes() {
  FILE* f = std::fopen(kAnimation.c_str(), "rb");
  std::string bytes;
  if (!f) return bytes;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) bytes.append(buf, n);
  std::fclose(f);
  return bytes;
}

// A file cut short (a download that stopped) keeps its whole frames; one cut before its first frame
// ended, and one that is no GIF, are errors saying so.
TEST(GifTimeline, AFileCutShortKeepsItsWholeFramesAndOtherBytesAreErrors) {
  const std::string bytes = file_bytes();
  ASSERT_GT(bytes.size(), 5000u);
  const auto cut = parse_gif_timeline(std::string_view(bytes).substr(0, bytes.size() * 6 / 10));
  ASSERT_TRUE(cut.ok()) << cut.status().message();
  EXPECT_GE(cut->pts_ns.size(), 6u);
  EXPECT_LT(cut->pts_ns.size(), 9u);
  EXPECT_FALSE(cut->whole);
  const auto without_trailer = parse_gif_timeline(std::string_view(bytes).substr(0, bytes.size() - 1));
  ASSERT_TRUE(without_trailer.ok());
  EXPECT_EQ(without_trailer->pts_ns.size(), 12u);
  EXPECT_FALSE(without_trailer->whole);
  EXPECT_EQ(without_trailer->frames_end, bytes.size() - 1);  // (where its trailer would be)
  EXPECT_TRUE(parse_gif_timeline(bytes)->whole);
  EXPECT_LT(cut->frames_end, bytes.size() * 6 / 10);
  EXPECT_EQ(bytes[cut->frames_end], '\x21');  // (the next frame's Graphic Control Extension)

  const auto first_cut = parse_gif_timeline(std::string_view(bytes).substr(0, 200));
  ASSERT_FALSE(first_cut.ok());
  EXPECT_EQ(first_cut.status().message(), "the GIF is cut short at byte 200, before its first frame ended (0 whole)");
  const auto png = parse_gif_timeline("\x89PNG\r\n\x1a\n0000000000000000");
  ASSERT_FALSE(png.ok());
  EXPECT_EQ(png.status().message(), "not a GIF (it does not begin with GIF87a or GIF89a and a screen descriptor)");
  const auto missing = read_gif_timeline("/nonexistent/a.gif");
  EXPECT_FALSE(missing.ok());
}

// A still GIF87a: one frame, no delay given (10 hundredths), no loop.
TEST(GifTimeline, AStillGifIsOneFrame) {
  std::string g = "GIF87a";
  g += std::string("\x02\x00\x02\x00\x80\x00\x00", 7);             // 2x2, a global table of 2 colours
  g += std::string("\x00\x00\x00\xff\xff\xff", 6);                 // black, white
  g += std::string("\x2c\x00\x00\x00\x00\x02\x00\x02\x00\x00", 10);  // the image descriptor
  g += std::string("\x02\x02\x4c\x01\x00", 5);                     // LZW: min code 2, one sub-block, end
  g += ";";
  const auto t = parse_gif_timeline(g);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->pts_ns, std::vector<int64_t>{0});
  EXPECT_EQ(t->duration_ns, std::vector<int64_t>{100 * kMs});
  EXPECT_FALSE(t->loops);
}

}  // namespace
}  // namespace vapipe
