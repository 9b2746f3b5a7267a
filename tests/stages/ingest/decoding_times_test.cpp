// Decoding times worked out from presentation times in decoding order (stages/ingest/decoding_times.h),
// as an RTSP camera's frames come: each rises, none is after its frame's presentation time, and they
// are the stream's presentation times in order, a reorder depth behind.
#include "stages/ingest/decoding_times.h"

#include <cstdint>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace vapipe {
namespace {

constexpr int64_t kFrame = 33'333'333;

// Every frame of `pts` (decoding order) through a DecodingTimes, taken as soon as each is decided.
std::vector<DecodingTimes::Frame> run(const std::vector<int64_t>& pts, size_t lookahead = DecodingTimes::kDefaultLookahead,
                                     size_t* depth = nullptr) {
  DecodingTimes times(lookahead);
  std::vector<DecodingTimes::Frame> out;
  for (int64_t p : pts) {
    times.add(p, kFrame);
    while (auto f = times.take()) out.push_back(*f);
  }
  times.end();
  while (auto f = times.take()) out.push_back(*f);
  EXPECT_EQ(times.waiting(), 0u);
  if (depth) *depth = times.reorder_depth();
  return out;
}

std::vector<int64_t> frames(std::initializer_list<int> at) {
  std::vector<int64_t> out;
  for (int a : at) out.push_back(a * kFrame);
  return out;
}

std::vector<int64_t> dts_of(const std::vector<DecodingTimes::Frame>& out) {
  std::vector<int64_t> dts;
  for (const auto& f : out) dts.push_back(f.dts);
  return dts;
}

TEST(DecodingTimes, WithoutBFramesEachFramesDecodingTimeIsItsPresentationTime) {
  size_t depth = 9;
  const std::vector<int64_t> pts = frames({0, 1, 2, 3, 4, 5});
  const auto out = run(pts, DecodingTimes::kDefaultLookahead, &depth);
  EXPECT_EQ(depth, 0u);
  ASSERT_EQ(out.size(), pts.size());
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].pts, pts[i]);
    EXPECT_EQ(out[i].dts, pts[i]);
  }
}

// I0 P3 B1 B2 P6 B4 B5: a B-frame's P comes a frame before it; decoding begins a frame before 0.
TEST(DecodingTimes, IpbbIsDecodedAFrameBehindItsPresentationTimes) {
  size_t depth = 0;
  const std::vector<int64_t> pts = frames({0, 3, 1, 2, 6, 4, 5, 9, 7, 8});
  const auto out = run(pts, DecodingTimes::kDefaultLookahead, &depth);
  EXPECT_EQ(depth, 1u);
  EXPECT_EQ(dts_of(out), frames({-1, 0, 1, 2, 3, 4, 5, 6, 7, 8}));
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].pts, pts[i]) << i;
}

// x264's B-pyramid: I0 P4 B2 b1 b3: b1 comes after P4 and B2, two frames behind.
TEST(DecodingTimes, ABPyramidIsDecodedTwoFramesBehind) {
  size_t depth = 0;
  const std::vector<int64_t> pts = frames({0, 4, 2, 1, 3, 8, 6, 5, 7});
  const auto out = run(pts, DecodingTimes::kDefaultLookahead, &depth);
  EXPECT_EQ(depth, 2u);
  EXPECT_EQ(dts_of(out), frames({-2, -1, 0, 1, 2, 3, 4, 5, 6}));
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].pts, pts[i]) << i;
}

TEST(DecodingTimes, AFrameWaitsForItsLookaheadOrTheEnd) {
  DecodingTimes times(2);
  times.add(0);
  times.add(3 * kFrame);
  EXPECT_FALSE(times.take().has_value());
  times.add(kFrame);
  auto first = times.take();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->pts, 0);
  EXPECT_EQ(first->dts, -kFrame) << "a depth of one frame, a frame being the smallest gap (no duration given)";
  EXPECT_FALSE(times.take().has_value());
  times.end();
  EXPECT_EQ(times.take()->dts, 0);
  EXPECT_EQ(times.take()->dts, kFrame);
  EXPECT_FALSE(times.take().has_value());
}

// A depth that shows only after earlier frames were decided (a lookahead shorter than its wait): the
// times still rise, and no frame is decoded after it is shown.
TEST(DecodingTimes, ADepthThatGrowsLateNeverTurnsTimesBack) {
  std::vector<int64_t> pts = frames({0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  for (int64_t p : frames({13, 11, 10, 12, 17, 15, 14, 16})) pts.push_back(p);
  size_t depth = 0;
  const auto out = run(pts, 1, &depth);
  EXPECT_EQ(depth, 2u);
  ASSERT_EQ(out.size(), pts.size());
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_LE(out[i].dts, out[i].pts) << i;
    EXPECT_GE(out[i].pts, pts[i]) << i;
    if (i > 0) {
      EXPECT_GT(out[i].dts, out[i - 1].dts) << i;
    }
  }
}

// A jitter buffer leaves frames untimed (while it learns the camera's clock): each is placed between
// the timed frames around it in decoding order, evenly; after the last, a frame duration apart; where
// the next is shown earlier (a B-frame), a millisecond apart after the one before.
TEST(DecodingTimes, UntimedFramesArePlacedBetweenTheTimedFramesAroundThem) {
  std::vector<int64_t> pts = frames({0, 1});
  pts.insert(pts.end(), {-1, -1});
  pts.push_back(4 * kFrame);
  pts.push_back(-1);
  auto out = run(pts);
  ASSERT_EQ(out.size(), 6u);
  EXPECT_EQ(dts_of(out), (std::vector<int64_t>{0, kFrame, 2 * kFrame, 3 * kFrame, 4 * kFrame, 5 * kFrame}));
  for (const auto& f : out) EXPECT_EQ(f.pts, f.dts);

  pts = frames({0, 3});
  pts.push_back(-1);
  pts.push_back(kFrame);
  out = run(pts);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[2].pts, 3 * kFrame + DecodingTimes::kMinStep);
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_LE(out[i].dts, out[i].pts) << i;
    if (i > 0) {
      EXPECT_GT(out[i].dts, out[i - 1].dts) << i;
    }
  }
}

// Times that go back by more than any reordering (a jitter buffer's resync): the frames after are
// placed from a frame past the latest, each at its own time, as they are shown.
TEST(DecodingTimes, ATimelineThatGoesBackGoesOnAfterTheLatestFrame) {
  std::vector<int64_t> pts = frames({100, 103, 101, 102, 106, 104, 105});
  for (int64_t p : frames({0, 3, 1, 2, 6, 4, 5})) pts.push_back(p);
  const auto out = run(pts);
  ASSERT_EQ(out.size(), pts.size());
  for (size_t i = 0; i < 7; ++i) EXPECT_EQ(out[i].pts, pts[i]) << i;
  for (size_t i = 7; i < out.size(); ++i) EXPECT_EQ(out[i].pts, pts[i] + 107 * kFrame) << i;  // from 107 on
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_LE(out[i].dts, out[i].pts) << i;
    if (i > 0) {
      EXPECT_GT(out[i].dts, out[i - 1].dts) << i;
    }
  }
  EXPECT_EQ(out[8].dts, 107 * kFrame) << "a frame behind, as before";
}

// Encoders' GOPs of every shape (1 to 3 B-frames, pyramids or not, closed GOPs), frame times with a
// camera's jitter: the decoding times are the presentation times sorted, the depth behind, and
// presentation times are kept.
TEST(DecodingTimes, AnyGopStructureGivesTheSortedPresentationTimesDepthBehind) {
  std::mt19937 random(20261204);
  for (int trial = 0; trial < 200; ++trial) {
    const int bframes = 1 + static_cast<int>(random() % 3);
    const bool pyramid = bframes >= 2 && random() % 2;
    std::vector<int64_t> display;  // presentation times in display order, each a frame apart with jitter
    int64_t t = static_cast<int64_t>(random() % 1'000'000'000);
    for (int i = 0; i < 60; ++i) {
      display.push_back(t);
      t += kFrame + static_cast<int64_t>(random() % 2'000'000) - 1'000'000;
    }
    std::vector<int64_t> decoding{display[0]};  // an I-frame, then mini-GOPs: the P first, its Bs after
    size_t expected_depth = 0;
    for (size_t at = 1; at < display.size(); at += bframes + 1) {
      const size_t p = std::min(at + bframes, display.size() - 1);
      decoding.push_back(display[p]);
      std::vector<size_t> bs;
      for (size_t b = at; b < p; ++b) bs.push_back(b);
      if (pyramid && bs.size() >= 2) {
        std::rotate(bs.begin(), bs.begin() + bs.size() / 2, bs.begin() + bs.size() / 2 + 1);  // the middle first
        expected_depth = std::max<size_t>(expected_depth, 2);
      } else if (!bs.empty()) {
        expected_depth = std::max<size_t>(expected_depth, 1);
      }
      for (size_t b : bs) decoding.push_back(display[b]);
    }
    ASSERT_EQ(decoding.size(), display.size());
    size_t depth = 0;
    const auto out = run(decoding, DecodingTimes::kDefaultLookahead, &depth);
    EXPECT_EQ(depth, expected_depth) << trial;
    ASSERT_EQ(out.size(), decoding.size());
    for (size_t i = 0; i < out.size(); ++i) {
      EXPECT_EQ(out[i].pts, decoding[i]) << trial << " " << i;
      EXPECT_LE(out[i].dts, out[i].pts) << trial << " " << i;
      if (i >= depth) {
        EXPECT_EQ(out[i].dts, display[i - depth]) << trial << " " << i;
      }
      if (i > 0) {
        EXPECT_GT(out[i].dts, out[i - 1].dts) << trial << " " << i;
      }
    }
  }
}

}  // namespace
}  // namespace vapipe
