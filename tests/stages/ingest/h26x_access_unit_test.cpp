// What an H.264/H.265 access unit holds: hand-made NAL units (each field written bit by bit), then
// the real encoders' streams (x264 with IDR, open GOP and intra refresh; x265) through their parsers.
#include "stages/ingest/h26x_access_unit.h"
#include "stages/ingest/h264_reference_lists.h"

#include <cstdint>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <optional>
#include <vector>

#include "tests/fakes/encoded_frames.h"
#include "tests/fakes/h26x_bits.h"

namespace vapipe {
namespace {

using testing::annex_b;
using testing::BitWriter;
using testing::Bytes;
using testing::length_prefixed;
using testing::nal;
using Picture = AccessUnitKind::Picture;

Bytes h264_slice(int nal_type, uint32_t slice_type) {
  return nal({static_cast<uint8_t>(0x60 | nal_type)}, BitWriter().ue(0).ue(slice_type).ue(0).bits(0, 4).finish());
}
// An SEI NAL unit whose messages are (type, payload) pairs; `h265` prefix SEI.
Bytes sei(const std::vector<std::pair<int, Bytes>>& messages, bool h265 = false) {
  Bytes rbsp;
  for (const auto& [type, payload] : messages) {
    rbsp.push_back(static_cast<uint8_t>(type));
    size_t size = payload.size();
    for (; size >= 255; size -= 255) rbsp.push_back(0xFF);
    rbsp.push_back(static_cast<uint8_t>(size));
    rbsp.insert(rbsp.end(), payload.begin(), payload.end());
  }
  rbsp.push_back(0x80);
  return h265 ? nal({39 << 1, 1}, rbsp) : nal({0x06}, rbsp);
}
Bytes h264_recovery_point(uint32_t frames) {
  return BitWriter().ue(frames).bit(0).bit(0).bits(0, 2).finish();
}
Bytes h265_nal(int type) { return nal({static_cast<uint8_t>(type << 1), 1}, BitWriter().bit(1).ue(0).finish()); }

const Bytes kSps = {0x67, 0x64, 0x00, 0x1F, 0xAC};  // header and a few bytes: never read
const Bytes kPps = {0x68, 0xEE, 0x3C, 0x80};

TEST(AccessUnitReader, H264IdrIntraAndPredictedPicturesAreToldApart) {
  for (int length_size : {0, 2, 4}) {
    auto read = [&](const std::vector<Bytes>& nals) {
      const Bytes au = length_size ? length_prefixed(nals, length_size) : annex_b(nals);
      return AccessUnitReader(AccessUnitReader::Codec::kH264, length_size).read(au.data(), au.size());
    };
    const std::string at = "length size " + std::to_string(length_size);
    EXPECT_EQ(read({kSps, kPps, h264_slice(5, 7), h264_slice(5, 7)}).picture, Picture::kRandomAccess) << at;
    EXPECT_EQ(read({h264_slice(1, 7)}).picture, Picture::kIntra) << at << ": an open GOP's I-frame";
    EXPECT_EQ(read({h264_slice(1, 2), h264_slice(1, 9)}).picture, Picture::kIntra) << at << ": I and SI slices";
    EXPECT_EQ(read({h264_slice(1, 5)}).picture, Picture::kPartial) << at << ": P";
    EXPECT_EQ(read({h264_slice(1, 6)}).picture, Picture::kPartial) << at << ": B";
    EXPECT_EQ(read({h264_slice(1, 7), h264_slice(1, 5)}).picture, Picture::kPartial) << at << ": I and P slices";
    EXPECT_EQ(read({kSps, kPps}).picture, Picture::kUnknown) << at << ": no slice";
    EXPECT_FALSE(read({h264_slice(5, 7)}).recovery_frames) << at;
  }
}

TEST(AccessUnitReader, H264RecoveryPointCountIsReadPastOtherMessagesAndEmulationPrevention) {
  // x264 puts a long user-data message (its settings) in front; zeros in it need emulation prevention.
  const Bytes user_data(40, 0);
  const Bytes au = length_prefixed(
      {kSps, kPps, sei({{5, user_data}, {6, h264_recovery_point(29)}}), h264_slice(1, 5), h264_slice(1, 5)}, 4);
  const AccessUnitKind kind = AccessUnitReader(AccessUnitReader::Codec::kH264, 4).read(au.data(), au.size());
  EXPECT_EQ(kind.picture, Picture::kPartial);
  ASSERT_TRUE(kind.recovery_frames);
  EXPECT_EQ(*kind.recovery_frames, 29u);
  // A payload over 255 bytes has its size in several bytes.
  const Bytes big = annex_b({sei({{5, Bytes(300, 7)}, {6, h264_recovery_point(0)}}), h264_slice(1, 7)});
  const AccessUnitKind open_gop = AccessUnitReader(AccessUnitReader::Codec::kH264, 0).read(big.data(), big.size());
  EXPECT_EQ(open_gop.picture, Picture::kIntra);
  ASSERT_TRUE(open_gop.recovery_frames);
  EXPECT_EQ(*open_gop.recovery_frames, 0u);
}

TEST(AccessUnitReader, H265IrapPicturesAreRandomAccessAndOthersPartial) {
  const AccessUnitReader reader(AccessUnitReader::Codec::kH265, 4);
  auto read = [&](const std::vector<Bytes>& nals) {
    const Bytes au = length_prefixed(nals, 4);
    return reader.read(au.data(), au.size());
  };
  const Bytes vps = {32 << 1, 1, 0x0C}, sps = {33 << 1, 1, 0x01}, pps = {34 << 1, 1, 0xC1};
  for (int irap : {16, 19, 20, 21}) {  // BLA_W_LP, IDR_W_RADL, IDR_N_LP, CRA
    EXPECT_EQ(read({vps, sps, pps, h265_nal(irap)}).picture, Picture::kRandomAccess) << irap;
  }
  for (int other : {0, 1, 8, 9}) EXPECT_EQ(read({h265_nal(other)}).picture, Picture::kPartial) << other;
  const Bytes recovery = BitWriter().se(8).bit(0).bit(0).finish();
  const AccessUnitKind kind = read({sei({{6, recovery}}, /*h265=*/true), h265_nal(1)});
  EXPECT_EQ(kind.picture, Picture::kPartial);
  ASSERT_TRUE(kind.recovery_frames);
  EXPECT_EQ(*kind.recovery_frames, 8u);
}

TEST(AccessUnitReader, ACutShortUnitGivesWhatItCouldRead) {
  Bytes au = length_prefixed({h264_slice(1, 5)}, 4);
  au[3] += 50;  // the length runs past the end
  EXPECT_EQ(AccessUnitReader(AccessUnitReader::Codec::kH264, 4).read(au.data(), au.size()).picture, Picture::kUnknown);
  const Bytes nothing;
  EXPECT_EQ(AccessUnitReader(AccessUnitReader::Codec::kH264, 0).read(nothing.data(), 0).picture, Picture::kUnknown);
}

// An H.265 SPS written field by field (7.3.2.2.1), with what may come before its reference picture sets:
// two temporal sub-layers (their profile and level, their ordering), 4:4:4 with separate colour planes,
// a conformance window, an 8-bit POC lsb, scaling list data, PCM. Its three short-term reference picture
// sets (7.3.7; derived as 7.4.8 says):
//   0: before -1 (used), -3 (kept for later pictures, not used);
//   1: predicted from 0 with deltaRps -1: before -1, -2 (both used; set 0's -3, now -4, dropped);
//   2: predicted from 1 with deltaRps +2: after +1 (used), +2 (kept, not used).
Bytes h265_sps() {
  BitWriter w;
  w.bits(0, 4).bits(1, 3).bit(1);                              // VPS id, max_sub_layers_minus1 1, nesting
  w.bits(0x01600000, 32).bits(0x90000000, 32).bits(0x5D, 32);  // general profile, tier, level
  w.bit(1).bit(1).bits(0, 14);                                 // the sub-layer's profile and level present
  w.bits(0x01600000, 32).bits(0x90000000, 32).bits(0, 24).bits(0x5A, 8);
  w.ue(0).ue(3).bit(1);                        // sps id 0, chroma_format_idc 3, separate_colour_plane_flag
  w.ue(320).ue(240).bit(1).ue(0).ue(1).ue(0).ue(2);  // size, conformance window
  w.ue(0).ue(0).ue(4);                         // bit depths, log2_max_pic_order_cnt_lsb_minus4 (8 bits)
  w.bit(1).ue(4).ue(2).ue(0).ue(4).ue(2).ue(0);  // ordering info for each sub-layer
  w.ue(0).ue(3).ue(0).ue(3).ue(1).ue(1);       // block sizes and depths
  w.bit(1).bit(1);                             // scaling_list_enabled_flag, sps_scaling_list_data_present_flag
  for (int size_id = 0; size_id < 4; ++size_id) {
    for (int matrix_id = 0; matrix_id < 6; matrix_id += size_id == 3 ? 3 : 1) {
      if (matrix_id % 2 == 0) {
        w.bit(0).ue(matrix_id > 0 ? 1 : 0);  // predicted from another matrix
        continue;
      }
      w.bit(1);
      if (size_id > 1) w.se(-3);  // scaling_list_dc_coef_minus8
      for (int i = 0; i < std::min(64, 1 << (4 + (size_id << 1))); ++i) w.se(i % 3 - 1);
    }
  }
  w.bit(1).bit(1).bit(1).bits(7, 4).bits(7, 4).ue(0).ue(1).bit(0);  // AMP, SAO, PCM and its fields
  w.ue(3);                                                          // num_short_term_ref_pic_sets
  w.ue(2).ue(0).ue(0).bit(1).ue(1).bit(0);                          // 0: -1 used, -3 not
  w.bit(1).bit(1).ue(0).bit(1).bit(0).bit(0).bit(1);                // 1: from 0, deltaRps -1
  w.bit(1).bit(0).ue(1).bit(1).bit(0).bit(1).bit(0).bit(1);         // 2: from 1, deltaRps +2
  w.bit(0).bit(1).bit(1).bit(0).bit(0);  // no long-term pictures, temporal MVP, strong intra smoothing, no VUI
  return nal({33 << 1, 1}, w.finish());
}
// Its PPS: dependent slice segments, pic_output_flag and two extra bits in each slice header.
Bytes h265_pps() {
  return nal({34 << 1, 1}, BitWriter().ue(0).ue(0).bit(1).bit(1).bits(2, 3).bit(0).bit(0).ue(0).finish());
}
constexpr int kOwnSet = -1;
// A picture's first slice segment: NAL unit `type`, its POC lsb, the SPS's reference picture set `set`
// or (kOwnSet) one of its own in the header: predicted from set 0 with deltaRps -1, before -2 and -4,
// both used (set 0's -1 and the -1 of set 0's own picture dropped).
Bytes h265_picture(int type, uint32_t poc_lsb, int set, int temporal_id = 0) {
  BitWriter w;
  w.bit(1);                       // first_slice_segment_in_pic_flag
  if (type >= 16) w.bit(0);       // no_output_of_prior_pics_flag
  w.ue(0).bits(3, 2).ue(1).bit(1).bits(2, 2);  // PPS id, extra bits, slice_type P, pic_output_flag, colour plane
  if (type != 19 && type != 20) {
    w.bits(poc_lsb, 8);
    if (set == kOwnSet) {
      w.bit(0).bit(1).ue(2).bit(1).ue(0).bit(1).bit(1).bit(0).bit(0);
    } else {
      w.bit(1).bits(static_cast<uint32_t>(set), 2);
    }
  }
  w.bit(1).bits(0x5A5, 12);  // the header's further fields: not read
  return nal({static_cast<uint8_t>(type << 1), static_cast<uint8_t>(temporal_id + 1)}, w.finish());
}
// A later (dependent) slice segment of the same picture: no picture header of its own.
Bytes h265_next_segment(int type) {
  BitWriter w;
  w.bit(0);
  if (type >= 16) w.bit(0);
  w.ue(0).bit(1).bits(37, 9).bits(0x3FF, 10);  // PPS id, dependent_slice_segment_flag, address, data
  return nal({static_cast<uint8_t>(type << 1), 1}, w.finish());
}

// What RefPicSetGaps reads of hand-made pictures whose POCs and reference picture sets are known: a
// picture whose set uses one never passed is told, one whose set only keeps it is not; POCs past the
// 8-bit lsb's wrap; a start at a CRA whose RASL picture uses one from before it, and at a delta frame
// whose later pictures use those.
TEST(RefPicSetGaps, PicturesUsingReferencesNeverPassedAreToldByTheirSets) {
  constexpr int kTrailN = 0, kTrailR = 1, kRaslN = 8, kIdr = 19, kCra = 21;
  struct Picture {
    int type;
    uint32_t poc;
    int set;
  };
  // POC 0 (IDR); 1 uses 0; 2 uses 1, 0; 4 uses 2, 0 (its own set); 3 uses 4 and keeps 5; 5 uses 4.
  const std::vector<Picture> gop = {{kIdr, 0, 0},        {kTrailR, 1, 0},       {kTrailR, 2, 1},
                                    {kTrailR, 4, kOwnSet}, {kTrailN, 3, 2},     {kTrailR, 5, 0}};
  for (int length_size : {0, 4}) {
    auto unit = [&](const Picture& p, bool with_parameter_sets) {
      std::vector<Bytes> nals;
      if (with_parameter_sets) nals = {h265_sps(), h265_pps()};
      nals.push_back(h265_picture(p.type, p.poc, p.set));
      nals.push_back(h265_next_segment(p.type));
      return length_size ? length_prefixed(nals, length_size) : annex_b(nals);
    };
    auto missing_without = [&](const std::vector<Picture>& pictures, std::optional<size_t> left_out) {
      RefPicSetGaps gaps(length_size, nullptr);
      std::vector<size_t> missing;
      for (size_t i = 0; i < pictures.size(); ++i) {
        if (left_out && i == *left_out) continue;
        const Bytes au = unit(pictures[i], i == 0);
        if (gaps.missing_before(au.data(), au.size())) missing.push_back(i);
      }
      return missing;
    };
    const std::string at = "length size " + std::to_string(length_size);
    EXPECT_EQ(missing_without(gop, std::nullopt), std::vector<size_t>{}) << at;
    EXPECT_EQ(missing_without(gop, 1), std::vector<size_t>{2}) << at << ": POC 1 left out";
    EXPECT_EQ(missing_without(gop, 2), std::vector<size_t>{3}) << at << ": POC 2 left out";
    EXPECT_EQ(missing_without(gop, 3), (std::vector<size_t>{4, 5})) << at << ": POC 4 left out";
    EXPECT_EQ(missing_without(gop, 4), std::vector<size_t>{}) << at << ": POC 3 left out (nothing uses it)";
    // 300 P-frames, each using the one before: the POC lsb wraps at 256.
    std::vector<Picture> long_gop = {{kIdr, 0, 0}};
    for (uint32_t poc = 1; poc < 300; ++poc) long_gop.push_back({kTrailR, poc % 256, 0});
    EXPECT_EQ(missing_without(long_gop, std::nullopt), std::vector<size_t>{}) << at;
    EXPECT_EQ(missing_without(long_gop, 270), std::vector<size_t>{271}) << at << ": POC 270 left out";
    // Joined at a CRA (POC 8, keeps 7 and 6 for its RASL picture): the RASL picture (POC 6) uses 7, from
    // before the CRA, and keeps 8; 9 uses 8; 10 uses 9 and 8: nothing missing.
    RefPicSetGaps joined(length_size, nullptr);
    const std::vector<Bytes> cra_start = {unit({kCra, 8, 1}, true), unit({kRaslN, 6, 2}, false),
                                          unit({kTrailR, 9, 0}, false), unit({kTrailR, 10, 1}, false)};
    for (size_t i = 0; i < cra_start.size(); ++i) {
      EXPECT_FALSE(joined.missing_before(cra_start[i].data(), cra_start[i].size())) << at << " CRA start, picture " << i;
    }
    // Started again (a seek) at a P-frame: 12 uses 11 and keeps 9, both decoded before it; 13 uses 12 and
    // 11; 15 (its own set) uses 13 and 11: nothing missing.
    joined.restart();
    const std::vector<Bytes> delta_start = {unit({kTrailR, 12, 0}, false), unit({kTrailR, 13, 1}, false),
                                            unit({kTrailR, 15, kOwnSet}, false)};
    for (size_t i = 0; i < delta_start.size(); ++i) {
      EXPECT_FALSE(joined.missing_before(delta_start[i].data(), delta_start[i].size())) << at << " P start, picture " << i;
    }
    // Without the restart, 12 uses 11, never passed.
    const Bytes after_10 = unit({kTrailR, 12, 0}, false);
    RefPicSetGaps on(length_size, nullptr);
    for (const Bytes& au : cra_start) on.missing_before(au.data(), au.size());
    EXPECT_TRUE(on.missing_before(after_10.data(), after_10.size())) << at;
    EXPECT_TRUE(on.last_uses_damaged()) << at << ": a picture it uses never passed";
  }
}

GstCaps* caps_of(const std::string& text) { return gst_caps_from_string(text.c_str()); }

TEST(AccessUnitReader, FollowsTheCapsOfItsInput) {
  gst_init(nullptr, nullptr);
  struct Case {
    std::string caps;
    bool readable;
  };
  const std::vector<Case> cases = {
      {"video/x-h264,stream-format=byte-stream,alignment=au", true},
      {"video/x-h264,stream-format=avc,alignment=au,codec_data=(buffer)0164001fffe1", true},
      {"video/x-h264,stream-format=avc3,alignment=au,codec_data=(buffer)0164001ffde1", true},  // 2-byte lengths
      {"video/x-h264,stream-format=avc,alignment=au", false},  // lengths of unknown size
      {"video/x-h264,stream-format=byte-stream,alignment=nal", false},  // a buffer is a NAL unit, not a frame
      {"video/x-h265,stream-format=hvc1,alignment=au,codec_data=(buffer)"
       "01016000000090000000000078f000fcfdf8f800000f",
       true},
      {"video/x-h265,stream-format=byte-stream,alignment=au", true},
      {"video/x-vp8", false},
  };
  for (const Case& c : cases) {
    GstCaps* caps = caps_of(c.caps);
    ASSERT_NE(caps, nullptr) << c.caps;
    EXPECT_EQ(AccessUnitReader::for_caps(caps).has_value(), c.readable) << c.caps;
    gst_caps_unref(caps);
  }
  // The length size is read from the record: a 2-byte prefixed P slice reads as such.
  GstCaps* caps = caps_of("video/x-h264,stream-format=avc3,alignment=au,codec_data=(buffer)0164001ffde1");
  const auto reader = AccessUnitReader::for_caps(caps);
  gst_caps_unref(caps);
  ASSERT_TRUE(reader);
  const Bytes au = length_prefixed({h264_slice(1, 5)}, 2);
  EXPECT_EQ(reader->read(au.data(), au.size()).picture, Picture::kPartial);
}

// The parsers' key frames of real encoders' streams, read as the decoder gate reads them.
class EncodedStream : public ::testing::Test {
 protected:
  void SetUp() override {
    gst_init(nullptr, nullptr);
    dir_ = std::filesystem::temp_directory_path() / ("vapipe-access-unit-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Each key frame of `frames` encoded by `encoder` (parsed by `parse`, muxed by `mux`, read back by
  // `demux`), in order.
  std::vector<AccessUnitKind> key_frames(const std::string& encoder, const std::string& parse, const std::string& mux,
                                         const std::string& demux, int frames = 90) {
    GstCaps* caps = nullptr;
    const std::vector<GstBuffer*> buffers = all_frames(encoder, parse, mux, demux, frames, &caps);
    const auto reader = AccessUnitReader::for_caps(caps);
    EXPECT_TRUE(reader) << encoder;
    std::vector<AccessUnitKind> kinds;
    for (GstBuffer* buffer : buffers) {
      if (reader && !GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_DELTA_UNIT)) kinds.push_back(reader->read(buffer));
    }
    return kinds;
  }
  // Every frame of `frames` encoded by `encoder` (parsed by `parse`, muxed by `mux`, read back by
  // `demux`), in order, as the decoder takes them, with their caps; the buffers are the fixture's.
  std::vector<GstBuffer*> all_frames(const std::string& encoder, const std::string& parse, const std::string& mux,
                                     const std::string& demux, int frames, GstCaps** caps) {
    encoded_.push_back(std::make_unique<testing::EncodedFrames>(
        (dir_ / ("all" + std::to_string(encoded_.size()))).string(), encoder + " ! " + parse + " ! " + mux,
        demux + " ! " + parse, frames));
    EXPECT_EQ(encoded_.back()->error(), "");
    *caps = encoded_.back()->caps();
    return encoded_.back()->buffers();
  }
  std::filesystem::path dir_;
  std::vector<std::unique_ptr<testing::EncodedFrames>> encoded_;
};

// Whether a frame is a reference picture: its first slice's nal_ref_idc (H.264), or its NAL unit type
// not a sub-layer non-reference picture's (H.265; the frames here are x264's and x265's, an access unit
// delimiter or parameter sets before it, 4-byte lengths where prefixed).
bool is_reference(GstBuffer* buffer, bool length_prefixed, bool h265 = false) {
  auto is_slice = [&](uint8_t header) {
    return h265 ? ((header >> 1) & 0x3F) <= 31 : (header & 0x1F) == 1 || (header & 0x1F) == 5;
  };
  GstMapInfo map;
  if (!gst_buffer_map(buffer, &map, GST_MAP_READ)) return false;
  bool reference = false;
  for (size_t i = 0; i + 4 < map.size; ++i) {
    size_t header = SIZE_MAX;
    if (length_prefixed) {
      const size_t length = (size_t{map.data[i]} << 24) | (size_t{map.data[i + 1]} << 16) | (size_t{map.data[i + 2]} << 8) | map.data[i + 3];
      header = i + 4;
      if (!is_slice(map.data[header])) {
        i = header + length - 1;
        continue;
      }
    } else if (map.data[i] == 0 && map.data[i + 1] == 0 && map.data[i + 2] == 1) {
      header = i + 3;
      if (!is_slice(map.data[header])) continue;
    } else {
      continue;
    }
    const int h265_type = (map.data[header] >> 1) & 0x3F;
    reference = h265 ? !(h265_type <= 14 && h265_type % 2 == 0) : ((map.data[header] >> 5) & 3) != 0;
    break;
  }
  gst_buffer_unmap(buffer, &map);
  return reference;
}

// H.264's frame_num says where reference frames went missing, as the decoder gate reads it (each
// frame in decoding order): none in a whole stream (B-frames that are references too, b-pyramid; SPS
// in the MP4's avcC or in band in MPEG-TS; intra refresh); at the first frame after a reference
// frame taken out, and at no other; not for a non-reference B-frame taken out (nothing refers to it);
// not across a restart (a seek), after which the next frame is taken as it comes.
TEST_F(EncodedStream, X264FramesMissingBeforeAFrameAreToldByItsFrameNum) {
  struct Case {
    std::string encoder, mux, demux;
  };
  for (const Case& c : {Case{"x264enc speed-preset=ultrafast key-int-max=30 bframes=2", "mp4mux", "qtdemux"},
                        Case{"x264enc speed-preset=ultrafast key-int-max=30 bframes=3 b-pyramid=true", "mpegtsmux",
                             "tsdemux"},
                        Case{"x264enc speed-preset=ultrafast intra-refresh=true key-int-max=30 tune=zerolatency",
                             "matroskamux", "matroskademux"},
                        // SPSs read past their scaling lists (JVT's matrices), 4:4:4 and 10-bit profiles' fields.
                        Case{"x264enc speed-preset=ultrafast key-int-max=30 bframes=2 option-string=cqm=jvt",
                             "matroskamux", "matroskademux"},
                        Case{"videoconvert ! video/x-raw,format=Y444 ! x264enc speed-preset=ultrafast key-int-max=30 "
                             "bframes=2 option-string=cqm=jvt",
                             "mpegtsmux", "tsdemux"},
                        Case{"videoconvert ! video/x-raw,format=I420_10LE ! x264enc speed-preset=ultrafast "
                             "key-int-max=30 bframes=2",
                             "mp4mux", "qtdemux"}}) {
    GstCaps* caps = nullptr;
    const std::vector<GstBuffer*> frames = all_frames(c.encoder, "h264parse", c.mux, c.demux, 90, &caps);
    ASSERT_EQ(frames.size(), 90u) << c.encoder;
    ASSERT_NE(caps, nullptr);
    // As h264parse gives it to the appsink: NAL units with length prefixes (avc), or start codes.
    const gchar* format = gst_structure_get_string(gst_caps_get_structure(caps, 0), "stream-format");
    const bool prefixed = !format || !g_str_equal(format, "byte-stream");
    std::optional<RefPicListGaps> whole = RefPicListGaps::for_caps(caps);
    ASSERT_TRUE(whole) << c.encoder;
    for (size_t i = 0; i < frames.size(); ++i) EXPECT_FALSE(whole->missing_before(frames[i])) << c.encoder << " frame " << i;
    // A reference frame (past the first key frame, before the next) taken out, then a non-reference one.
    constexpr size_t kNone = SIZE_MAX;
    size_t reference = kNone, other = kNone;  // (intra refresh here has no B-frame: no other)
    for (size_t i = 5; i < 25; ++i) {
      const bool delta_reference = is_reference(frames[i], prefixed) &&
                                   GST_BUFFER_FLAG_IS_SET(frames[i], GST_BUFFER_FLAG_DELTA_UNIT);
      if (reference == kNone && delta_reference) {
        reference = i;
      } else if (reference != kNone && other == kNone && !is_reference(frames[i], prefixed)) {
        other = i;
      }
    }
    ASSERT_NE(reference, kNone) << c.encoder;
    std::optional<RefPicListGaps> lossy = RefPicListGaps::for_caps(caps);
    std::vector<size_t> missing;
    for (size_t i = 0; i < frames.size(); ++i) {
      if (i == reference || i == other) continue;
      if (lossy->missing_before(frames[i])) missing.push_back(i);
    }
    const size_t next = reference + 1 == other ? reference + 2 : reference + 1;  // the first frame after it
    EXPECT_EQ(missing, (std::vector<size_t>{next})) << c.encoder << ": reference frame " << reference
                                                               << " taken out, non-reference " << other;
    // A seek: the frames after it are taken as they come.
    std::optional<RefPicListGaps> sought = RefPicListGaps::for_caps(caps);
    for (size_t i = 0; i < 10; ++i) sought->missing_before(frames[i]);
    sought->restart();
    for (size_t i = 40; i < frames.size(); ++i) EXPECT_FALSE(sought->missing_before(frames[i])) << c.encoder << " frame " << i;
  }
}

// H.265's reference picture sets say where reference pictures went missing, as the decoder gate reads
// them (each frame in decoding order): none in a whole stream (B-frames that are references, b-pyramid;
// parameter sets in the MKV's hvcC or in band in MPEG-TS; IDR or open GOPs; 10-bit, slices, temporal
// layers); soon after a reference picture taken out (at the first picture that uses it), and not past
// the next key frame; not for a non-reference picture taken out; not across a restart (a seek).
TEST_F(EncodedStream, X265PicturesMissingReferencesAreToldByTheirReferencePictureSets) {
  struct Case {
    std::string encoder, mux, demux;
  };
  const std::string x265 = "x265enc speed-preset=ultrafast key-int-max=30 option-string=";
  for (const Case& c : {Case{x265 + "bframes=3:b-pyramid=1", "mpegtsmux", "tsdemux"},
                        Case{x265 + "bframes=4:ref=4:open-gop=0", "matroskamux", "matroskademux"},
                        Case{"videoconvert ! video/x-raw,format=I420_10LE ! " + x265 +
                                 "bframes=2:scaling-list=default:slices=4",
                             "mp4mux", "qtdemux"},
                        Case{x265 + "bframes=2:temporal-layers=1", "mpegtsmux", "tsdemux"},
                        Case{x265 + "bframes=0:ref=3", "matroskamux", "matroskademux"}}) {
    GstCaps* caps = nullptr;
    const std::vector<GstBuffer*> frames = all_frames(c.encoder, "h265parse", c.mux, c.demux, 90, &caps);
    ASSERT_EQ(frames.size(), 90u) << c.encoder;
    ASSERT_NE(caps, nullptr);
    const gchar* format = gst_structure_get_string(gst_caps_get_structure(caps, 0), "stream-format");
    const bool prefixed = !format || !g_str_equal(format, "byte-stream");
    std::optional<RefPicSetGaps> whole = RefPicSetGaps::for_caps(caps);
    ASSERT_TRUE(whole) << c.encoder;
    for (size_t i = 0; i < frames.size(); ++i) EXPECT_FALSE(whole->missing_before(frames[i])) << c.encoder << " frame " << i;
    constexpr size_t kNone = SIZE_MAX;
    size_t reference = kNone, other = kNone, next_key = kNone;
    for (size_t i = 5; i < frames.size(); ++i) {
      const bool delta = GST_BUFFER_FLAG_IS_SET(frames[i], GST_BUFFER_FLAG_DELTA_UNIT);
      const bool ref = is_reference(frames[i], prefixed, /*h265=*/true);
      if (reference == kNone && delta && ref) {
        reference = i;
      } else if (reference != kNone && other == kNone && delta && !ref) {
        other = i;
      } else if (reference != kNone && next_key == kNone && !delta) {
        next_key = i;
      }
    }
    ASSERT_NE(reference, kNone) << c.encoder;
    ASSERT_NE(next_key, kNone) << c.encoder;
    auto missing_without = [&](size_t left_out) {
      std::optional<RefPicSetGaps> lossy = RefPicSetGaps::for_caps(caps);
      std::vector<size_t> missing;
      for (size_t i = 0; i < frames.size(); ++i) {
        if (i != left_out && lossy->missing_before(frames[i])) missing.push_back(i);
      }
      return missing;
    };
    const std::vector<size_t> missing = missing_without(reference);
    ASSERT_FALSE(missing.empty()) << c.encoder << ": reference picture " << reference << " taken out";
    EXPECT_GT(missing.front(), reference) << c.encoder;
    EXPECT_LE(missing.front(), reference + 3) << c.encoder << ": reference picture " << reference << " taken out";
    EXPECT_LT(missing.back(), next_key) << c.encoder << ": reference picture " << reference << " taken out";
    if (other != kNone) {
      EXPECT_EQ(missing_without(other), std::vector<size_t>{}) << c.encoder << ": non-reference picture " << other;
    }
    std::optional<RefPicSetGaps> sought = RefPicSetGaps::for_caps(caps);
    for (size_t i = 0; i < 10; ++i) sought->missing_before(frames[i]);
    sought->restart();
    for (size_t i = 40; i < frames.size(); ++i) EXPECT_FALSE(sought->missing_before(frames[i])) << c.encoder << " frame " << i;
  }
}

// Three key frames: an IDR first, then two of `picture` whose recovery point count is within [least, most].
void expect_idr_then(const std::vector<AccessUnitKind>& keys, Picture picture, uint32_t least, uint32_t most) {
  ASSERT_EQ(keys.size(), 3u);
  EXPECT_EQ(keys[0].picture, Picture::kRandomAccess);
  for (size_t i = 1; i < keys.size(); ++i) {
    EXPECT_EQ(keys[i].picture, picture) << i;
    ASSERT_TRUE(keys[i].recovery_frames) << i;
    EXPECT_GE(*keys[i].recovery_frames, least) << i;
    EXPECT_LE(*keys[i].recovery_frames, most) << i;
  }
}

TEST_F(EncodedStream, X264KeyFramesAreIdrOrWithAnOpenGopIntra) {
  const auto idr = key_frames("x264enc speed-preset=ultrafast key-int-max=30 bframes=2", "h264parse", "mp4mux", "qtdemux");
  ASSERT_EQ(idr.size(), 3u);
  for (const AccessUnitKind& k : idr) EXPECT_EQ(k.picture, Picture::kRandomAccess);
  // x264 marks an open GOP's I-frames recovery points of count 0.
  expect_idr_then(key_frames("x264enc speed-preset=ultrafast key-int-max=30 bframes=2 option-string=open-gop=1",
                             "h264parse", "mp4mux", "qtdemux"),
                  Picture::kIntra, 0, 0);
}

// Intra refresh: after the first (IDR) frame, the parser's key frames are recovery points whose
// pictures are whole some frames later.
TEST_F(EncodedStream, X264IntraRefreshKeyFramesAreRecoveryPoints) {
  expect_idr_then(key_frames("x264enc speed-preset=ultrafast intra-refresh=true key-int-max=30 tune=zerolatency",
                             "h264parse", "matroskamux", "matroskademux"),
                  Picture::kPartial, 1, 30);
}

TEST_F(EncodedStream, X265KeyFramesAreIrap) {
  const auto keys = key_frames("x265enc speed-preset=ultrafast key-int-max=30", "h265parse", "matroskamux",
                               "matroskademux");
  ASSERT_EQ(keys.size(), 3u);
  for (const AccessUnitKind& k : keys) EXPECT_EQ(k.picture, Picture::kRandomAccess);
}

}  // namespace
}  // namespace vapipe
