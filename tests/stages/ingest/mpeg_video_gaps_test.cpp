// MPEG-1/2 anchor pictures missing, told by temporal_reference: hand-made picture headers in the orders
// encoders send them (closed and open GOPs, field pairs, intra frames past 1023), then mpeg2enc's
// streams read back through tsdemux and mpegvideoparse, as ingest's decoder gate reads them.
#include "stages/ingest/mpeg_video_gaps.h"

#include <gst/codecparsers/gstmpegvideometa.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "tests/fakes/encoded_frames.h"

namespace vapipe {
namespace {

using Bytes = std::vector<uint8_t>;
constexpr int kI = 1, kP = 2, kB = 3;

constexpr int kTopField = 1, kFrame = 3;  // picture_structure

// A picture as a parser sends it: a GOP header first where `group` says, then the picture header
// (temporal_reference, picture_coding_type, vbv_delay), MPEG-2's picture coding extension where
// `structure` says (its f_codes, intra_dc_precision, picture_structure; 0: none, as MPEG-1 has), and a
// slice of a few bytes.
Bytes picture(uint32_t temporal_reference, int type, bool group = false, int structure = 0) {
  Bytes out;
  if (group) out.insert(out.end(), {0, 0, 1, 0xB8, 0x00, 0x08, 0x00, 0x40});  // time code, closed_gop, broken_link
  out.insert(out.end(), {0, 0, 1, 0x00, static_cast<uint8_t>(temporal_reference >> 2),
                         static_cast<uint8_t>(((temporal_reference & 3) << 6) | (type << 3) | 0x7), 0xFF, 0xF8});
  if (structure) out.insert(out.end(), {0, 0, 1, 0xB5, 0x8F, 0xFF, static_cast<uint8_t>(0xF0 | structure), 0x80});
  out.insert(out.end(), {0, 0, 1, 0x01, 0x12, 0x34, 0x56});
  return out;
}
struct Picture {
  uint32_t temporal_reference;
  int type;
  bool group = false;
  int structure = 0;
};
// The indexes of the pictures told missing an anchor before them, `left_out` not passed.
std::vector<size_t> missing_in(const std::vector<Picture>& pictures, std::vector<size_t> left_out = {}) {
  TemporalReferenceGaps gaps;
  std::vector<size_t> missing;
  for (size_t i = 0; i < pictures.size(); ++i) {
    if (std::find(left_out.begin(), left_out.end(), i) != left_out.end()) continue;
    const Bytes bytes = picture(pictures[i].temporal_reference, pictures[i].type, pictures[i].group, pictures[i].structure);
    if (gaps.missing_before(bytes.data(), bytes.size())) missing.push_back(i);
  }
  return missing;
}

TEST(TemporalReferenceGaps, AnAnchorLostIsToldByThePicturesAfterIt) {
  // Closed GOPs, IBBP: decoding order I0 P3 B1 B2 P6 B4 B5, then the next GOP.
  const std::vector<Picture> closed = {{0, kI, true}, {3, kP}, {1, kB}, {2, kB}, {6, kP}, {4, kB}, {5, kB},
                                       {0, kI, true}, {3, kP}, {1, kB}, {2, kB}};
  EXPECT_EQ(missing_in(closed), std::vector<size_t>{});
  EXPECT_EQ(missing_in(closed, {1}), (std::vector<size_t>{2, 3})) << "P3 lost: B1 and B2 are shown after the I";
  EXPECT_EQ(missing_in(closed, {4}), (std::vector<size_t>{5, 6})) << "P6 lost";
  EXPECT_EQ(missing_in(closed, {2}), std::vector<size_t>{}) << "a B-frame lost harms nothing";
  EXPECT_EQ(missing_in(closed, {7}), std::vector<size_t>{8}) << "the next GOP's I lost: P3 goes back from 6";
  // Open GOPs: decoding order I2 B0 B1 P5 B3 B4 P8 B6 B7, the next GOP's leading B-frames after its I.
  const std::vector<Picture> open = {{2, kI, true}, {0, kB}, {1, kB}, {5, kP},       {3, kB}, {4, kB},
                                     {8, kP},       {6, kB}, {7, kB}, {2, kI, true}, {0, kB}, {1, kB},
                                     {5, kP},       {3, kB}, {4, kB}};
  EXPECT_EQ(missing_in(open), std::vector<size_t>{});
  EXPECT_EQ(missing_in(open, {3}), (std::vector<size_t>{4, 5})) << "P5 lost";
  EXPECT_EQ(missing_in(open, {9}), std::vector<size_t>{12}) << "the next I lost: its leading B-frames are not seen, its P is";
  // Field pictures: each field a picture of its own, the pair sharing a temporal_reference (an I field
  // and a P field make the first frame).
  const std::vector<Picture> fields = {{0, kI, true, kTopField}, {0, kP, false, kTopField + 1},
                                      {3, kP, false, kTopField},  {3, kP, false, kTopField + 1},
                                      {1, kB, false, kTopField},  {1, kB, false, kTopField + 1},
                                      {2, kB, false, kTopField},  {2, kB, false, kTopField + 1}};
  EXPECT_EQ(missing_in(fields), std::vector<size_t>{});
  // A GOP lost whole, its header with it, between two P-frames numbered alike (open GOPs: I2 B0 B1 P5
  // B3 B4, then the next GOP's I2 B0 B1 lost, its P5): a frame picture at the last anchor's place is no
  // second field.
  const std::vector<Picture> gops = {{2, kI, true, kFrame}, {0, kB, false, kFrame}, {1, kB, false, kFrame},
                                     {5, kP, false, kFrame},  {3, kB, false, kFrame}, {4, kB, false, kFrame},
                                     {2, kI, true, kFrame},   {0, kB, false, kFrame}, {1, kB, false, kFrame},
                                     {5, kP, false, kFrame},  {3, kB, false, kFrame}, {4, kB, false, kFrame}};
  EXPECT_EQ(missing_in(gops), std::vector<size_t>{});
  EXPECT_EQ(missing_in(gops, {6}), std::vector<size_t>{9}) << "the second GOP's I-frame lost with its header";
  // I- and P-frames only: a P-frame lost is told by the next one's step.
  const std::vector<Picture> ip = {{0, kI, true}, {1, kP}, {2, kP}, {3, kP}, {0, kI, true}, {1, kP}};
  EXPECT_EQ(missing_in(ip), std::vector<size_t>{});
  EXPECT_EQ(missing_in(ip, {2}), std::vector<size_t>{3}) << "P2 lost";
  EXPECT_EQ(missing_in(ip, {4}), std::vector<size_t>{5}) << "the next I lost";
  // A P-frame lost with its B-frames (one cut): the next P-frame is twice M after the one before, and
  // its B-frames fill only its last M - 1 places. Told at its first B-frame, once M is known; B-frames
  // lost alone are not.
  const std::vector<Picture> long_gop = {{0, kI, true}, {3, kP}, {1, kB},  {2, kB},  {6, kP},
                                         {4, kB},       {5, kB}, {9, kP},  {7, kB},  {8, kB},
                                         {12, kP},      {10, kB}, {11, kB}, {0, kI, true}, {3, kP}};
  EXPECT_EQ(missing_in(long_gop), std::vector<size_t>{});
  EXPECT_EQ(missing_in(long_gop, {4, 5, 6}), std::vector<size_t>{8}) << "P6, B4 and B5 lost";
  EXPECT_EQ(missing_in(long_gop, {7, 8, 9}), std::vector<size_t>{11}) << "P9, B7 and B8 lost";
  EXPECT_EQ(missing_in(long_gop, {5, 6}), std::vector<size_t>{}) << "B4 and B5 lost";
  EXPECT_EQ(missing_in(long_gop, {8}), std::vector<size_t>{}) << "B7 lost";
  EXPECT_EQ(missing_in(long_gop, {1, 2, 3}), std::vector<size_t>{}) << "before M is known: not seen";
  // Intra frames without GOP headers: temporal_reference wraps past 1023.
  EXPECT_EQ(missing_in({{1022, kI}, {1023, kI}, {0, kI}, {1, kI}}), std::vector<size_t>{});
}

TEST(TemporalReferenceGaps, AnOpenGopIsToldByItsHeader) {
  const Bytes closed = picture(0, kI, true);  // closed_gop set
  EXPECT_FALSE(TemporalReferenceGaps::opens_open_gop(closed.data(), closed.size()));
  Bytes open = closed;
  open[7] = 0x00;  // closed_gop and broken_link 0
  EXPECT_TRUE(TemporalReferenceGaps::opens_open_gop(open.data(), open.size()));
  open[7] = 0x20;  // broken_link: its leading B-frames are not decodable anyway
  EXPECT_FALSE(TemporalReferenceGaps::opens_open_gop(open.data(), open.size()));
  const Bytes no_header = picture(3, kP);
  EXPECT_FALSE(TemporalReferenceGaps::opens_open_gop(no_header.data(), no_header.size()));
}

TEST(TemporalReferenceGaps, ARestartExpectsNothing) {
  TemporalReferenceGaps gaps;
  for (const Bytes& p : {picture(0, kI, true), picture(3, kP), picture(1, kB)}) gaps.missing_before(p.data(), p.size());
  gaps.restart();
  const Bytes elsewhere = picture(7, kB);  // a seek that landed after an anchor the decoder never had
  EXPECT_FALSE(gaps.missing_before(elsewhere.data(), elsewhere.size()));
  const Bytes cut = {0, 0, 1, 0x00, 0x12};  // a header cut short
  EXPECT_FALSE(gaps.missing_before(cut.data(), cut.size()));
}

TEST(TemporalReferenceGaps, FollowsMpegVideoCapsOnly) {
  gst_init(nullptr, nullptr);
  for (const auto& [text, followed] : std::vector<std::pair<std::string, bool>>{
           {"video/mpeg, mpegversion=(int)2, systemstream=(boolean)false", true},
           {"video/mpeg, mpegversion=(int)1, systemstream=(boolean)false", true},
           {"video/mpeg, mpegversion=(int)4, systemstream=(boolean)false", false},
           {"video/mpeg, mpegversion=(int)2, systemstream=(boolean)true", false},
           {"video/x-h264", false}}) {
    GstCaps* caps = gst_caps_from_string(text.c_str());
    EXPECT_EQ(TemporalReferenceGaps::for_caps(caps).has_value(), followed) << text;
    gst_caps_unref(caps);
  }
}

// mpeg2enc's streams (B-frames, open and closed GOPs; MPEG-1 too), read back as ingest reads them: none
// missing whole; an anchor taken out is told at the next picture, which is a B-frame shown before it; a
// B-frame taken out is not. Which pictures are B-frames: as mpegvideoparse's picture header meta says.
TEST(TemporalReferenceGaps, Mpeg2encStreamsMissingAnAnchorAreTold) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("vapipe-mpeg-gaps-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string raw = "video/x-raw,width=352,height=288,framerate=25/1,format=I420";
  for (const std::string& encoder : {std::string("mpeg2enc"), std::string("mpeg2enc b-per-refframe=2"),
                                     std::string("mpeg2enc closed-gop=true b-per-refframe=1"),
                                     std::string("mpeg2enc format=0 b-per-refframe=2")}) {
    const testing::EncodedFrames stream((dir / "clip.ts").string(), encoder + " ! mpegvideoparse ! mpegtsmux",
                                        "tsdemux ! mpegvideoparse", 48, raw);
    ASSERT_EQ(stream.error(), "") << encoder;
    const std::vector<GstBuffer*>& frames = stream.buffers();
    ASSERT_EQ(frames.size(), 48u) << encoder;
    auto is_b = [&](size_t i) {
      const GstMpegVideoMeta* meta = gst_buffer_get_mpeg_video_meta(frames[i]);
      return meta && meta->pichdr && meta->pichdr->pic_type == GST_MPEG_VIDEO_PICTURE_TYPE_B;
    };
    auto missing_without = [&](size_t left_out) {
      std::optional<TemporalReferenceGaps> gaps = TemporalReferenceGaps::for_caps(stream.caps());
      std::vector<size_t> missing;
      for (size_t i = 0; i < frames.size(); ++i) {
        if (i != left_out && gaps->missing_before(frames[i])) missing.push_back(i);
      }
      return missing;
    };
    ASSERT_TRUE(TemporalReferenceGaps::for_caps(stream.caps())) << encoder;
    EXPECT_EQ(missing_without(frames.size()), std::vector<size_t>{}) << encoder;
    // A P-frame (past the first GOP's start) taken out: told at the next picture, a B-frame shown before
    // it or (I- and P-frames only) the next P-frame.
    size_t anchor = 0, b_frame = 0;
    for (size_t i = 4; i + 1 < frames.size(); ++i) {
      if (!anchor && !is_b(i) && GST_BUFFER_FLAG_IS_SET(frames[i], GST_BUFFER_FLAG_DELTA_UNIT)) anchor = i;
      if (!b_frame && is_b(i)) b_frame = i;
    }
    ASSERT_NE(anchor, 0u) << encoder;
    const std::vector<size_t> missing = missing_without(anchor);
    ASSERT_FALSE(missing.empty()) << encoder << ": P-frame " << anchor << " taken out";
    EXPECT_EQ(missing.front(), anchor + 1) << encoder;
    if (encoder.find("b-per-refframe") != std::string::npos) {
      ASSERT_NE(b_frame, 0u) << encoder;
      EXPECT_EQ(missing_without(b_frame), std::vector<size_t>{}) << encoder << ": B-frame " << b_frame << " taken out";
      // A P-frame taken out with the B-frames after it (a burst of lost packets): the second P-frame of a
      // GOP past the first (mpeg2enc's first GOP has an irregular M: I0 P3 P6 P8 P11), so that the one
      // before shows M, with a P-frame after them: told at the next P-frame's first B-frame.
      size_t key_frames = 0, p_frames = 0, burst = 0, burst_end = 0;
      for (size_t i = 0; i < frames.size() && !burst; ++i) {
        if (!GST_BUFFER_FLAG_IS_SET(frames[i], GST_BUFFER_FLAG_DELTA_UNIT)) {
          ++key_frames;
          p_frames = 0;
          continue;
        }
        if (is_b(i) || key_frames < 2 || ++p_frames != 2) continue;
        size_t end = i + 1;
        while (end < frames.size() && is_b(end)) ++end;
        if (end + 1 < frames.size() && GST_BUFFER_FLAG_IS_SET(frames[end], GST_BUFFER_FLAG_DELTA_UNIT) && is_b(end + 1)) {
          burst = i;
          burst_end = end;
        }
      }
      ASSERT_NE(burst, 0u) << encoder;
      std::optional<TemporalReferenceGaps> gaps = TemporalReferenceGaps::for_caps(stream.caps());
      std::vector<size_t> told;
      for (size_t i = 0; i < frames.size(); ++i) {
        if ((i < burst || i >= burst_end) && gaps->missing_before(frames[i])) told.push_back(i);
      }
      ASSERT_FALSE(told.empty()) << encoder << ": frames " << burst << " to " << burst_end - 1 << " taken out";
      EXPECT_EQ(told.front(), burst_end + 1) << encoder;
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace vapipe
