// H.264's reference lists followed as the decoder builds them: hand-made pictures (each slice header
// written field by field) whose lists, buffer and marking are worked out by hand from the standard
// (8.2.4, 8.2.5), then a real encoder's stream (x264's B-pyramid) with a reference B-frame damaged.
#include "stages/ingest/h264_reference_lists.h"

#include <gst/gst.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "stages/ingest/h26x_access_unit.h"
#include "tests/fakes/encoded_frames.h"
#include "tests/fakes/h26x_bits.h"

namespace vapipe {
namespace {

using testing::annex_b;
using testing::BitWriter;
using testing::Bytes;
using testing::length_prefixed;
using testing::nal;

constexpr int kIdr = 5, kSlice = 1;
constexpr uint32_t kP = 0, kB = 1, kI = 2;

// SPS 0: High profile, MaxFrameNum 16, POC type 0 with a 6-bit lsb, 3 reference frames, frames only.
// SPS 1: Main profile, the same but fields allowed (frame_mbs_only_flag 0).
Bytes sps(uint32_t id) {
  BitWriter w;
  w.bits(id == 0 ? 100 : 77, 8).bits(0, 8).bits(30, 8).ue(id);
  if (id == 0) w.ue(1).ue(0).ue(0).bit(0).bit(0);  // chroma 4:2:0, 8 bits, no scaling matrices
  w.ue(0).ue(0).ue(2).ue(3).bit(0);              // log2_max_frame_num 4, POC type 0, lsb 6 bits, 3 refs, no gaps
  w.ue(19).ue(14).bit(id == 0 ? 1 : 0);          // 320x240, frame_mbs_only_flag
  if (id == 1) w.bit(0);                         // mb_adaptive_frame_field_flag
  w.bit(1).bit(0).bit(0);                        // direct_8x8_inference_flag, no cropping, no VUI
  return nal({0x67}, w.finish());
}
// PPS 0: SPS 0, one active entry each way by default. PPS 1: SPS 0, weighted prediction in P slices and
// delta_pic_order_cnt_bottom in each frame's slice header. PPS 2: SPS 1.
Bytes pps(uint32_t id) {
  BitWriter w;
  w.ue(id).ue(id == 2 ? 1 : 0).bit(0).bit(id == 1 ? 1 : 0).ue(0);  // ids, CAVLC, bottom POC field, no FMO
  w.ue(0).ue(0).bit(id == 1 ? 1 : 0).bits(0, 2);                  // defaults 1 and 1, weighted_pred_flag
  w.se(0).se(0).se(0).bit(1).bit(0).bit(0);
  return nal({0x68}, w.finish());
}

struct Pic {
  int nal_type = kSlice;
  int ref_idc = 2;
  uint32_t type = kP;
  uint32_t frame_num = 0;
  uint32_t poc_lsb = 0;
  uint32_t pps = 0;
  std::optional<std::pair<uint32_t, uint32_t>> active;  // num_ref_idx_active override (l0, l1)
  std::vector<std::pair<uint32_t, uint32_t>> modifications[2];  // (modification_of_pic_nums_idc, value)
  std::vector<std::vector<uint32_t>> marking;                   // {operation, its values}
  bool field = false;
  uint32_t first_mb = 0;
};
Pic idr() { return Pic{kIdr, 3, kI, 0, 0}; }
Pic picture(uint32_t type, uint32_t frame_num, uint32_t poc_lsb, int ref_idc = 2) {
  return Pic{kSlice, ref_idc, type, frame_num, poc_lsb};
}

// A slice NAL unit with its header as 7.3.3 writes it, then a few bits of slice data.
Bytes slice(const Pic& p) {
  BitWriter w;
  w.ue(p.first_mb).ue(p.type).ue(p.pps).bits(p.frame_num, 4);
  if (p.pps == 2) {
    w.bit(p.field ? 1 : 0);
    if (p.field) w.bit(0);  // bottom_field_flag
  }
  if (p.nal_type == kIdr) w.ue(7);  // idr_pic_id
  w.bits(p.poc_lsb, 6);
  if (p.pps == 1) w.se(1);  // delta_pic_order_cnt_bottom
  if (p.type == kB) w.bit(1);  // direct_spatial_mv_pred_flag
  const uint32_t active0 = p.active ? p.active->first : 1, active1 = p.active ? p.active->second : 1;
  if (p.type != kI) {
    w.bit(p.active ? 1 : 0);
    if (p.active) {
      w.ue(active0 - 1);
      if (p.type == kB) w.ue(active1 - 1);
    }
    for (int list = 0; list < (p.type == kB ? 2 : 1); ++list) {
      w.bit(p.modifications[list].empty() ? 0 : 1);
      if (p.modifications[list].empty()) continue;
      for (const auto& [idc, value] : p.modifications[list]) w.ue(idc).ue(value);
      w.ue(3);
    }
  }
  if (p.pps == 1 && p.type == kP) {  // pred_weight_table: denominators, then each entry's weights
    w.ue(6).ue(5);
    for (uint32_t i = 0; i < active0; ++i) w.bit(1).se(3).se(-2).bit(1).se(1).se(0).se(-1).se(2);
  }
  if (p.ref_idc != 0) {
    if (p.nal_type == kIdr) {
      w.bit(0).bit(0);
    } else {
      w.bit(p.marking.empty() ? 0 : 1);
      if (!p.marking.empty()) {
        for (const auto& op : p.marking) {
          for (uint32_t v : op) w.ue(v);
        }
        w.ue(0);
      }
    }
  }
  w.se(-3).bits(0x2D, 7);  // slice_qp_delta and slice data: not read
  return nal({static_cast<uint8_t>((p.ref_idc << 5) | p.nal_type)}, w.finish());
}

Bytes unit(const std::vector<Bytes>& nals, int length_size) {
  return length_size ? length_prefixed(nals, length_size) : annex_b(nals);
}

// The pictures the gate would call damaged (as decoder_input_gate.cpp's follow_picture_damage does: its
// data lost, or a picture its lists hold damaged or missing), each picture passed in order but those
// `taken_out` (never reached the decoder); `lost` lost data.
std::vector<size_t> damaged_in(const std::vector<Pic>& pictures, const std::set<size_t>& taken_out,
                               const std::set<size_t>& lost, int length_size = 0) {
  RefPicListGaps lists(length_size, nullptr);
  std::vector<size_t> damaged;
  for (size_t i = 0; i < pictures.size(); ++i) {
    if (taken_out.count(i)) continue;
    std::vector<Bytes> nals;
    if (i == 0) nals = {sps(0), sps(1), pps(0), pps(1), pps(2)};
    nals.push_back(slice(pictures[i]));
    const Bytes au = unit(nals, length_size);
    lists.missing_before(au.data(), au.size());
    EXPECT_TRUE(lists.last_read()) << "picture " << i;
    if (lost.count(i) || lists.last_uses_damaged()) {
      lists.damage_last();
      damaged.push_back(i);
    }
  }
  return damaged;
}

using Indices = std::vector<size_t>;

// x264's open GOP with a B-pyramid (bframes=2), as tools/h264-slice-headers.py read it: one active
// entry each way; each P-frame's list modification (idc 0, abs_diff_pic_num_minus1 1) puts the P-frame
// before it first, past the B-reference between. POCs count fields (2 a frame).
std::vector<Pic> pyramid(bool p_frames_skip_b_references = true) {
  std::vector<Pic> gop = {idr(), picture(kP, 1, 6), picture(kB, 2, 2), picture(kB, 3, 4, 0)};
  for (uint32_t k = 0; k < 3; ++k) {
    const uint32_t fn = 3 + 2 * k, poc = 12 + 6 * k;
    Pic p = picture(kP, fn, poc);
    if (p_frames_skip_b_references) p.modifications[0] = {{0, 1}};
    gop.push_back(p);
    gop.push_back(picture(kB, fn + 1, poc - 4));
    gop.push_back(picture(kB, fn + 2, poc - 2, 0));
  }
  return gop;  // decoding order: I0 P6 B2 b4 | P12 B8 b10 | P18 B14 b16 | P24 B20 b22 (POCs)
}

TEST(RefPicListGaps, AReferenceBFramesDamageReachesThePicturesWhoseListsHoldIt) {
  for (int length_size : {0, 4}) {
    const std::string at = "length size " + std::to_string(length_size);
    EXPECT_EQ(damaged_in(pyramid(), {}, {}, length_size), Indices{}) << at;
    // The B-reference (POC 2) lost data: the b-frame after it uses it (list 0: the nearest before);
    // P12 is predicted from P6 (its modification), B8 from P6 and P12.
    EXPECT_EQ(damaged_in(pyramid(), {}, {2}, length_size), (Indices{2, 3})) << at;
    // Without the modification P12's list starts with the highest PicNum, the B-reference: from there on
    // every picture uses a damaged one.
    EXPECT_EQ(damaged_in(pyramid(false), {}, {2}, length_size), (Indices{2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}))
        << at;
    // P6 lost data: every picture after it is predicted from it, or from those that were.
    EXPECT_EQ(damaged_in(pyramid(), {}, {1}, length_size), (Indices{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})) << at;
    // The B-reference taken out whole (an MPEG-TS frame tsdemux dropped): the b-frame after it skips a
    // frame_num (missing), and the decoder puts a concealed frame in its place; P12 does not use it; B8
    // cannot be placed against it (its order count is not known), and is called damaged, and b10 with
    // it; by B14 the concealed frame has left the buffer (3 frames: P12 and P18 pushed it out).
    EXPECT_EQ(damaged_in(pyramid(), {2}, {}, length_size), (Indices{3, 5, 6})) << at;
  }
}

// Reference frames leave the buffer as 8.2.5 says: by the sliding window (3 frames here), by a memory
// management control operation (after a weighted prediction table, read past), into long-term frames
// that modifications name.
TEST(RefPicListGaps, TheBufferKeepsWhatTheMarkingKeeps) {
  // IDR, P1 (lost data), I2, I3, then P4 with three active entries: I3, I2, P1.
  std::vector<Pic> base = {idr(), picture(kP, 1, 2), picture(kI, 2, 4), picture(kI, 3, 6), picture(kP, 4, 8)};
  base[4].active = {{3, 0}};
  EXPECT_EQ(damaged_in(base, {}, {1}), (Indices{1, 4}));
  // P1 taken out: I2 comes after a frame_num gap, yet uses nothing (whole); the frame the decoder put in
  // P1's place is in P4's list, damaged.
  EXPECT_EQ(damaged_in(base, {1}, {}), (Indices{4}));
  // One more I-frame first: the window lets P1 go (the oldest of three), and P5's entries are whole.
  std::vector<Pic> slid = base;
  slid.insert(slid.begin() + 4, picture(kI, 4, 8));
  slid[5].frame_num = 5;
  slid[5].poc_lsb = 10;
  EXPECT_EQ(damaged_in(slid, {}, {1}), (Indices{1}));
  // I3 as a P-frame of PPS 1 (a weight table in its header) whose operation 1 unmarks P1 (PicNum 3 - 2):
  // P1 is gone without the window (which would have let IDR go instead), so P4's entries are whole.
  std::vector<Pic> unmarked = base;
  unmarked[3].type = kP;
  unmarked[3].pps = 1;
  unmarked[3].modifications[0] = {{0, 0}};  // (I2, whole)
  unmarked[3].marking = {{1, 1}};
  EXPECT_EQ(damaged_in(unmarked, {}, {1}), (Indices{1}));
  // Operation 3 makes P1 long-term (index 0) at I2, so I3 and two more I-frames do not push it out; a
  // P-frame whose modification names long-term picture 0 uses it, one without does not.
  std::vector<Pic> long_term = {idr(), picture(kP, 1, 2), picture(kI, 2, 4), picture(kI, 3, 6), picture(kI, 4, 8),
                                picture(kI, 5, 10), picture(kP, 6, 12), picture(kP, 7, 14)};
  long_term[2].marking = {{3, 0, 0}};
  long_term[6].modifications[0] = {{2, 0}};
  long_term[7].modifications[0] = {{0, 1}};  // (I5, whole: P6 is damaged)
  EXPECT_EQ(damaged_in(long_term, {}, {1}), (Indices{1, 6}));
  // Operation 2 unmarks it again (at I3): nothing names it after.
  long_term[3].marking = {{2, 0}};
  EXPECT_EQ(damaged_in(long_term, {}, {1}), (Indices{1}));
}

// memory_management_control_operation 5 starts frame_num over: the next reference frame's is 1, no
// gap. Fields (PAFF) are not followed picture by picture until an IDR frame, but their frame_num is.
// A restart (a seek) passes what follows as it comes. Two slices with different lists: either's
// entries count.
TEST(RefPicListGaps, FrameNumStartsOverAfterOperation5FieldsAreNotFollowedAndSlicesEachCount) {
  std::vector<Pic> reset = {idr(), picture(kP, 1, 2), picture(kP, 2, 4), picture(kP, 1, 2), picture(kP, 2, 4)};
  reset[2].marking = {{5}};
  EXPECT_EQ(damaged_in(reset, {}, {}), Indices{});

  RefPicListGaps lists(0, nullptr);
  auto pass = [&](const Pic& p, bool with_parameter_sets = false) {
    std::vector<Bytes> nals;
    if (with_parameter_sets) nals = {sps(0), sps(1), pps(0), pps(1), pps(2)};
    nals.push_back(slice(p));
    const Bytes au = annex_b(nals);
    return lists.missing_before(au.data(), au.size());
  };
  Pic frame = idr();
  frame.pps = 2;
  EXPECT_FALSE(pass(frame, true));
  EXPECT_TRUE(lists.last_read());
  Pic top = picture(kP, 1, 2), bottom = picture(kP, 1, 3);
  top.pps = bottom.pps = 2;
  top.field = bottom.field = true;
  EXPECT_FALSE(pass(top));
  EXPECT_FALSE(lists.last_read());
  EXPECT_FALSE(pass(bottom));  // (the second field shares its frame_num)
  Pic next = picture(kP, 3, 6);  // frame_num 2 never came
  next.pps = 2;
  EXPECT_TRUE(pass(next));
  EXPECT_FALSE(lists.last_read());
  EXPECT_FALSE(pass(frame));
  EXPECT_TRUE(lists.last_read());

  // Started again at B8 of the pyramid: its references were decoded before the seek, never passed here.
  const std::vector<Pic> gop = pyramid();
  lists.restart();
  for (size_t i = 5; i < gop.size(); ++i) {
    EXPECT_FALSE(pass(gop[i], i == 5)) << "picture " << i;
    EXPECT_FALSE(lists.last_uses_damaged()) << "picture " << i;
  }

  // P12 in two slices: the first predicted from P6 (the modification), the second from B2 (none).
  RefPicListGaps sliced(0, nullptr);
  for (size_t i = 0; i < 5; ++i) {
    std::vector<Bytes> nals;
    if (i == 0) nals = {sps(0), sps(1), pps(0), pps(1), pps(2)};
    nals.push_back(slice(gop[i]));
    if (i == 4) {
      Pic second = gop[i];
      second.first_mb = 150;
      second.modifications[0].clear();
      nals.push_back(slice(second));
    }
    const Bytes au = annex_b(nals);
    sliced.missing_before(au.data(), au.size());
    if (i == 2) sliced.damage_last();
  }
  EXPECT_TRUE(sliced.last_uses_damaged());
}

// A real encoder's B-pyramid (x264 bframes=3 b-pyramid=true, one slice a frame): a reference
// B-frame's damage reaches the b-frames shown around it and no P-frame, as x264's modifications put the
// P-frame before first; taken out whole, the frames after it are told missing at the first that skips
// its frame_num, and no P-frame is damaged either.
TEST(RefPicListGaps, X264sPFramesDoNotUseItsReferenceBFrames) {
  gst_init(nullptr, nullptr);
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("vapipe-ref-lists-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  testing::EncodedFrames encoded((dir / "pyramid.ts").string(),
                                 "x264enc speed-preset=ultrafast key-int-max=60 bframes=3 b-pyramid=true ! "
                                 "h264parse ! mpegtsmux",
                                 "tsdemux ! h264parse", 60);
  ASSERT_EQ(encoded.error(), "");
  const std::vector<GstBuffer*> frames = encoded.buffers();
  ASSERT_EQ(frames.size(), 60u);
  const std::optional<AccessUnitReader> reader = AccessUnitReader::for_caps(encoded.caps());
  ASSERT_TRUE(reader);
  // A reference B-frame: a reference frame shown before the frame decoded before it.
  size_t b_reference = 0;
  for (size_t i = 5; i < frames.size() && b_reference == 0; ++i) {
    if (reader->read(frames[i]).reference && GST_BUFFER_PTS(frames[i]) < GST_BUFFER_PTS(frames[i - 1])) b_reference = i;
  }
  ASSERT_NE(b_reference, 0u);
  for (bool taken_out : {false, true}) {
    std::optional<RefPicListGaps> lists = RefPicListGaps::for_caps(encoded.caps());
    ASSERT_TRUE(lists);
    size_t damaged = 0, damaged_p = 0;
    for (size_t i = 0; i < frames.size(); ++i) {
      if (taken_out && i == b_reference) continue;
      lists->missing_before(frames[i]);
      ASSERT_TRUE(lists->last_read()) << i;
      if ((!taken_out && i == b_reference) || lists->last_uses_damaged()) {
        lists->damage_last();
        ++damaged;
        // A P-frame: shown after every frame decoded before it.
        bool shown_last = true;
        for (size_t k = 0; k < i; ++k) shown_last = shown_last && GST_BUFFER_PTS(frames[k]) < GST_BUFFER_PTS(frames[i]);
        damaged_p += shown_last;
      }
    }
    EXPECT_GE(damaged, taken_out ? 1u : 2u) << "taken out " << taken_out;
    EXPECT_LE(damaged, 4u) << "taken out " << taken_out << ": a B-reference's damage stays among its B-frames";
    EXPECT_EQ(damaged_p, 0u) << "taken out " << taken_out;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace vapipe
