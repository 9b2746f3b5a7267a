#include "stages/ingest/h26x_access_unit.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iterator>
#include <vector>

#include "stages/ingest/nal_reading.h"

namespace vapipe {
namespace {

using nal::BitReader;
using nal::for_each_nal;
using nal::rbsp_of;

// SEI messages (H.264 7.3.2.3, H.265 7.3.5): the recovery point's count, if one is there.
std::optional<uint32_t> recovery_point_in(const std::vector<uint8_t>& sei, AccessUnitReader::Codec codec) {
  size_t i = 0;
  while (i < sei.size() && !(sei[i] == 0x80 && i + 1 == sei.size())) {
    uint32_t type = 0, size = 0;
    while (i < sei.size() && sei[i] == 0xFF) type += sei[i++];
    if (i >= sei.size()) break;
    type += sei[i++];
    while (i < sei.size() && sei[i] == 0xFF) size += sei[i++];
    if (i >= sei.size()) break;
    size += sei[i++];
    if (type == 6) {  // recovery_point
      BitReader bits(sei.data() + i, std::min<size_t>(size, sei.size() - i));
      if (codec == AccessUnitReader::Codec::kH264) {
        const uint32_t frames = bits.ue();
        if (bits.ok()) return frames;
      } else {
        const int32_t poc = bits.se();
        if (bits.ok()) return static_cast<uint32_t>(poc > 0 ? poc : 0);
      }
      return std::nullopt;
    }
    i += size;
  }
  return std::nullopt;
}

struct Reading {
  AccessUnitReader::Codec codec = AccessUnitReader::Codec::kH264;
  bool any_slice = false;
  bool all_random_access = true;  // IDR / IRAP
  bool all_intra = true;
  bool all_cra = true;
  bool rasl = false;
  bool any_reference = false;
  std::optional<uint32_t> recovery_frames;

  void nal(const uint8_t* data, size_t size) {
    if (codec == AccessUnitReader::Codec::kH264) {
      if (size < 2) return;
      const int type = data[0] & 0x1F;
      if (type == 5) {  // IDR slice
        any_slice = true;
        any_reference = true;
      } else if (type == 1 || type == 2) {  // a slice, or its partition A (which has the header)
        any_slice = true;
        if ((data[0] >> 5) & 3) any_reference = true;  // nal_ref_idc
        all_random_access = false;
        const std::vector<uint8_t> header = rbsp_of(data + 1, size - 1, 16);
        BitReader bits(header.data(), header.size());
        bits.ue();  // first_mb_in_slice
        const uint32_t slice_type = bits.ue() % 5;
        if (!bits.ok() || (slice_type != 2 && slice_type != 4)) all_intra = false;  // not I or SI
      } else if (type == 6 && !recovery_frames) {
        recovery_frames = recovery_point_in(rbsp_of(data + 1, size - 1, size), codec);
      }
    } else {
      if (size < 3) return;
      const int type = (data[0] >> 1) & 0x3F;
      if (type <= 31) {  // a VCL NAL unit: IRAP (16..23); whether another is intra would need its PPS
        any_slice = true;
        if (type < 16 || type > 23) all_random_access = all_intra = false;
        if (type != 21) all_cra = false;
        if (type == 8 || type == 9) rasl = true;
        if (type > 14 || type % 2 == 1) any_reference = true;  // not a sub-layer non-reference picture
      } else if (type == 39 && !recovery_frames) {  // prefix SEI
        recovery_frames = recovery_point_in(rbsp_of(data + 2, size - 2, size), codec);
      }
    }
  }
};


// H.265 profile_tier_level(1, max_sub_layers_minus1) (7.3.3): read past.
void skip_profile_tier_level(BitReader& bits, uint32_t max_sub_layers_minus1) {
  bits.bits(32);  // general profile space, tier, profile, the first compatibility flags
  bits.bits(32);
  bits.bits(32);  // the rest of the flags, general_level_idc
  bool profile_present[8] = {}, level_present[8] = {};
  for (uint32_t i = 0; i < max_sub_layers_minus1; ++i) {
    profile_present[i] = bits.bit() != 0;
    level_present[i] = bits.bit() != 0;
  }
  if (max_sub_layers_minus1 > 0) {
    for (uint32_t i = max_sub_layers_minus1; i < 8; ++i) bits.bits(2);  // reserved_zero_2bits
  }
  for (uint32_t i = 0; i < max_sub_layers_minus1; ++i) {
    if (profile_present[i]) {
      bits.bits(32);
      bits.bits(32);
      bits.bits(24);
    }
    if (level_present[i]) bits.bits(8);
  }
}

// H.265 scaling_list_data() (7.3.4): read past.
void skip_h265_scaling_list_data(BitReader& bits) {
  for (int size_id = 0; size_id < 4 && bits.ok(); ++size_id) {
    for (int matrix_id = 0; matrix_id < 6 && bits.ok(); matrix_id += size_id == 3 ? 3 : 1) {
      if (!bits.bit()) {  // scaling_list_pred_mode_flag
        bits.ue();        // scaling_list_pred_matrix_id_delta
        continue;
      }
      const int coefficients = std::min(64, 1 << (4 + (size_id << 1)));
      if (size_id > 1) bits.se();  // scaling_list_dc_coef_minus8
      for (int i = 0; i < coefficients && bits.ok(); ++i) bits.se();
    }
  }
}

// st_ref_pic_set(index) (7.3.7, its derivation 7.4.8): an SPS's set `index`, predicted from the one before
// it (`sets`: those read so far), or a slice header's own (index: the SPS's count), predicted from any.
bool read_ref_set(BitReader& bits, size_t index, bool in_slice_header, const std::vector<RefPicSetGaps::RefSet>& sets,
                  RefPicSetGaps::RefSet* out) {
  constexpr uint32_t kMaxPictures = 16;  // sps_max_dec_pic_buffering_minus1 < 16
  out->before.clear();
  out->after.clear();
  const bool predicted = index != 0 && bits.bit() != 0;  // inter_ref_pic_set_prediction_flag
  if (!predicted) {
    const uint32_t negative = bits.ue(), positive = bits.ue();
    if (!bits.ok() || negative > kMaxPictures || positive > kMaxPictures) return false;
    int32_t poc = 0;
    for (uint32_t i = 0; i < negative; ++i) {
      poc -= static_cast<int32_t>(std::min<uint32_t>(bits.ue(), 1u << 16)) + 1;  // delta_poc_s0_minus1
      out->before.emplace_back(poc, bits.bit() != 0);                             // used_by_curr_pic_s0_flag
    }
    poc = 0;
    for (uint32_t i = 0; i < positive; ++i) {
      poc += static_cast<int32_t>(std::min<uint32_t>(bits.ue(), 1u << 16)) + 1;
      out->after.emplace_back(poc, bits.bit() != 0);
    }
    return bits.ok();
  }
  const uint32_t delta_index = in_slice_header ? bits.ue() + 1 : 1;  // delta_idx_minus1
  if (!bits.ok() || delta_index > index || index > sets.size()) return false;
  const RefPicSetGaps::RefSet& ref = sets[index - delta_index];
  const int32_t sign = bits.bit() ? -1 : 1;  // delta_rps_sign
  const int32_t delta_rps = sign * (static_cast<int32_t>(std::min<uint32_t>(bits.ue(), 1u << 15)) + 1);
  // For each of the reference set's pictures, then the reference picture itself: whether used by this
  // picture, and whether kept in this set at all.
  const size_t count = ref.before.size() + ref.after.size() + 1;
  std::vector<bool> used(count), kept(count);
  for (size_t j = 0; j < count; ++j) {
    used[j] = bits.bit() != 0;             // used_by_curr_pic_flag
    kept[j] = used[j] || bits.bit() != 0;  // use_delta_flag (1 when absent)
  }
  if (!bits.ok()) return false;
  const size_t negative = ref.before.size(), own = count - 1;
  for (size_t j = ref.after.size(); j-- > 0;) {
    const int32_t poc = ref.after[j].first + delta_rps;
    if (poc < 0 && kept[negative + j]) out->before.emplace_back(poc, used[negative + j]);
  }
  if (delta_rps < 0 && kept[own]) out->before.emplace_back(delta_rps, used[own]);
  for (size_t j = 0; j < negative; ++j) {
    const int32_t poc = ref.before[j].first + delta_rps;
    if (poc < 0 && kept[j]) out->before.emplace_back(poc, used[j]);
  }
  for (size_t j = negative; j-- > 0;) {
    const int32_t poc = ref.before[j].first + delta_rps;
    if (poc > 0 && kept[j]) out->after.emplace_back(poc, used[j]);
  }
  if (delta_rps > 0 && kept[own]) out->after.emplace_back(delta_rps, used[own]);
  for (size_t j = 0; j < ref.after.size(); ++j) {
    const int32_t poc = ref.after[j].first + delta_rps;
    if (poc > 0 && kept[negative + j]) out->after.emplace_back(poc, used[negative + j]);
  }
  return out->before.size() <= kMaxPictures && out->after.size() <= kMaxPictures;
}

}  // namespace

RefPicSetGaps::RefPicSetGaps(int length_size, GstBuffer* codec_data) : length_size_(length_size) {
  nal::for_each_parameter_set(codec_data, /*h265=*/true, [&](const uint8_t* unit, size_t size) { take_nal(unit, size); });
}

std::optional<RefPicSetGaps> RefPicSetGaps::for_caps(const GstCaps* caps) {
  const std::optional<AccessUnitReader> reader = AccessUnitReader::for_caps(caps);
  if (!reader || reader->codec() != AccessUnitReader::Codec::kH265) return std::nullopt;
  return RefPicSetGaps(reader->length_size(), nal::parameter_set_record(caps, reader->length_size()));
}

void RefPicSetGaps::take_nal(const uint8_t* data, size_t size) {
  if (size < 3 || (((data[0] & 1) << 5) | (data[1] >> 3)) != 0) return;  // a layer above the base
  const int type = (data[0] >> 1) & 0x3F;
  if (type == 33) {  // SPS (7.3.2.2.1)
    const std::vector<uint8_t> rbsp = rbsp_of(data + 2, size - 2, size);
    BitReader bits(rbsp.data(), rbsp.size());
    bits.bits(4);  // sps_video_parameter_set_id
    const uint32_t max_sub_layers_minus1 = bits.bits(3);
    bits.bit();  // sps_temporal_id_nesting_flag
    skip_profile_tier_level(bits, max_sub_layers_minus1);
    const uint32_t id = bits.ue();
    Sps sps;
    if (bits.ue() == 3) sps.separate_colour_plane = bits.bit() != 0;  // chroma_format_idc
    bits.ue();  // pic_width_in_luma_samples
    bits.ue();  // pic_height_in_luma_samples
    if (bits.bit()) {  // conformance_window_flag
      for (int k = 0; k < 4; ++k) bits.ue();
    }
    bits.ue();  // bit_depth_luma_minus8
    bits.ue();  // bit_depth_chroma_minus8
    sps.log2_max_poc_lsb = bits.ue() + 4;
    const bool ordering_per_layer = bits.bit() != 0;  // sps_sub_layer_ordering_info_present_flag
    for (uint32_t k = ordering_per_layer ? 0 : max_sub_layers_minus1; k <= max_sub_layers_minus1 && bits.ok(); ++k) {
      bits.ue();  // sps_max_dec_pic_buffering_minus1
      bits.ue();  // sps_max_num_reorder_pics
      bits.ue();  // sps_max_latency_increase_plus1
    }
    for (int k = 0; k < 6; ++k) bits.ue();  // coding and transform block sizes, transform depths
    if (bits.bit() && bits.bit()) skip_h265_scaling_list_data(bits);  // scaling_list_enabled, its data present
    bits.bit();  // amp_enabled_flag
    bits.bit();  // sample_adaptive_offset_enabled_flag
    if (bits.bit()) {  // pcm_enabled_flag
      bits.bits(8);    // PCM sample bit depths
      bits.ue();
      bits.ue();
      bits.bit();
    }
    const uint32_t sets = bits.ue();  // num_short_term_ref_pic_sets
    if (!bits.ok() || sets > 64 || id > 15 || max_sub_layers_minus1 > 6 || sps.log2_max_poc_lsb > 16) return;
    for (uint32_t k = 0; k < sets; ++k) {
      RefSet set;
      if (!read_ref_set(bits, k, false, sps.ref_sets, &set)) return;
      sps.ref_sets.push_back(std::move(set));
    }
    if (bits.ok()) sps_[id] = std::move(sps);
  } else if (type == 34) {  // PPS (7.3.2.3.1)
    const std::vector<uint8_t> rbsp = rbsp_of(data + 2, size - 2, 16);
    BitReader bits(rbsp.data(), rbsp.size());
    const uint32_t id = bits.ue();
    Pps pps;
    pps.sps_id = bits.ue();
    pps.dependent_slice_segments = bits.bit() != 0;
    pps.output_flag_present = bits.bit() != 0;
    pps.extra_slice_header_bits = bits.bits(3);
    if (bits.ok() && id < 64) pps_[id] = pps;
  } else if (type == 36 || type == 37) {  // end of sequence, end of bitstream
    sequence_ended_ = true;
  } else if (type <= 21 && (type <= 9 || type >= 16) && !slice_) {  // a picture's slice segment (7.3.6.1)
    const std::vector<uint8_t> rbsp = rbsp_of(data + 2, size - 2, 96);
    BitReader bits(rbsp.data(), rbsp.size());
    if (!bits.bit()) return;  // first_slice_segment_in_pic_flag: the first one has the picture's header
    if (type >= 16) bits.bit();  // no_output_of_prior_pics_flag
    const auto pps = pps_.find(bits.ue());
    if (pps == pps_.end()) return;
    const auto sps = sps_.find(pps->second.sps_id);
    if (sps == sps_.end()) return;
    bits.bits(static_cast<int>(pps->second.extra_slice_header_bits));  // slice_reserved_flag
    bits.ue();  // slice_type
    if (pps->second.output_flag_present) bits.bit();      // pic_output_flag
    if (sps->second.separate_colour_plane) bits.bits(2);  // colour_plane_id
    Slice slice;
    slice.nal_type = type;
    slice.temporal_id = (data[1] & 7) - 1;
    slice.log2_max_poc_lsb = sps->second.log2_max_poc_lsb;
    if (type != 19 && type != 20) {  // not IDR
      slice.poc_lsb = bits.bits(static_cast<int>(sps->second.log2_max_poc_lsb));
      const std::vector<RefSet>& sets = sps->second.ref_sets;
      if (!bits.bit()) {  // short_term_ref_pic_set_sps_flag
        if (!read_ref_set(bits, sets.size(), true, sets, &slice.refs)) return;
      } else {
        int width = 0;  // Ceil(Log2(num_short_term_ref_pic_sets))
        while ((size_t{1} << width) < sets.size()) ++width;
        const uint32_t index = bits.bits(width);
        if (index >= sets.size()) return;
        slice.refs = sets[index];
      }
    }
    if (bits.ok()) slice_ = std::move(slice);
  }
}

bool RefPicSetGaps::missing_before(const uint8_t* data, size_t size) {
  slice_.reset();
  last_read_ = last_uses_damaged_ = false;
  for_each_nal(data, size, length_size_, [&](const uint8_t* nal, size_t n) {
    take_nal(nal, n);
    return !slice_;
  });
  if (!slice_) return false;  // no picture header read: nothing to follow it by
  const Slice& slice = *slice_;
  const bool irap = slice.nal_type >= 16;
  // IDR and BLA pictures start decoding afresh, and so does the first picture (8.1.3: NoRaslOutputFlag).
  const bool idr_or_bla = slice.nal_type >= 16 && slice.nal_type <= 20;
  const bool afresh = idr_or_bla || !started_ || sequence_ended_;
  const int32_t max_lsb = 1 << slice.log2_max_poc_lsb;
  const auto lsb = static_cast<int32_t>(slice.poc_lsb);
  // Its POC (8.3.1): the lsb it carries, the msb taken from the last picture of temporal layer 0.
  int32_t msb = 0;
  if (!(afresh && irap) && started_) {
    const int32_t prev_lsb = prev_tid0_poc_ & (max_lsb - 1), prev_msb = prev_tid0_poc_ - prev_lsb;
    msb = lsb < prev_lsb && prev_lsb - lsb >= max_lsb / 2   ? prev_msb + max_lsb
          : lsb > prev_lsb && lsb - prev_lsb > max_lsb / 2 ? prev_msb - max_lsb
                                                           : prev_msb;
  }
  const int32_t poc = msb + lsb;
  if (afresh) {
    passed_.clear();
    damaged_.clear();
    before_start_.clear();
  }
  bool missing = false, uses_damaged = false;
  std::set<int32_t> kept;  // the passed pictures its set names: the only ones a later picture may use
  for (const auto* list : {&slice.refs.before, &slice.refs.after}) {
    for (const auto& [delta, used] : *list) {
      const int32_t ref = poc + delta;
      if (passed_.count(ref)) {
        kept.insert(ref);
        if (used && !irap && damaged_.count(ref)) uses_damaged = true;
      } else if (afresh) {
        // The pictures the decoder would hold at a start: decoded before it (a CRA's, for its RASL
        // pictures; a stream joined at a recovery point), never passed, and no loss.
        before_start_.insert(ref);
      } else if (used && !irap && !before_start_.count(ref)) {
        missing = true;
      }
    }
  }
  kept.insert(poc);
  for (auto it = damaged_.begin(); it != damaged_.end();) it = kept.count(*it) ? std::next(it) : damaged_.erase(it);
  damaged_.erase(poc);  // (a POC used again: another picture's)
  passed_ = std::move(kept);
  last_read_ = true;
  last_uses_damaged_ = uses_damaged || missing;  // (a picture never passed: the decoder conceals it)
  last_poc_ = poc;
  // 8.3.1's prevTid0Pic: temporal layer 0, not a RASL, RADL or sub-layer non-reference picture.
  const bool sub_layer_non_reference = slice.nal_type <= 14 && slice.nal_type % 2 == 0;
  const bool leading = slice.nal_type >= 6 && slice.nal_type <= 9;
  if ((slice.temporal_id == 0 && !sub_layer_non_reference && !leading) || !started_) prev_tid0_poc_ = poc;
  started_ = true;
  sequence_ended_ = false;
  return missing;
}

bool RefPicSetGaps::missing_before(GstBuffer* buffer) {
  return nal::read_mapped(buffer, [this](const uint8_t* data, size_t size) { return missing_before(data, size); });
}

std::optional<AccessUnitReader> AccessUnitReader::for_caps(const GstCaps* caps) {
  if (!caps || gst_caps_get_size(caps) < 1) return std::nullopt;
  const GstStructure* s = gst_caps_get_structure(caps, 0);
  const gchar* name = gst_structure_get_name(s);
  Codec codec;
  if (g_str_equal(name, "video/x-h264")) {
    codec = Codec::kH264;
  } else if (g_str_equal(name, "video/x-h265")) {
    codec = Codec::kH265;
  } else {
    return std::nullopt;
  }
  const gchar* alignment = gst_structure_get_string(s, "alignment");
  if (alignment && !g_str_equal(alignment, "au")) return std::nullopt;  // a buffer is not one frame
  const gchar* format = gst_structure_get_string(s, "stream-format");
  const GValue* codec_data = gst_structure_get_value(s, "codec_data");
  if (format && g_str_equal(format, "byte-stream")) return AccessUnitReader(codec, 0);
  if (!codec_data || !GST_VALUE_HOLDS_BUFFER(codec_data)) {
    return format ? std::nullopt : std::optional<AccessUnitReader>(AccessUnitReader(codec, 0));
  }
  // avcC (ISO 14496-15 5.3.3.1) keeps lengthSizeMinusOne in byte 4, hvcC (8.3.3.1) in byte 21.
  GstBuffer* record = gst_value_get_buffer(codec_data);
  const size_t at = codec == Codec::kH264 ? 4 : 21;
  uint8_t byte = 0;
  if (gst_buffer_extract(record, at, &byte, 1) != 1) return std::nullopt;
  const int length_size = (byte & 3) + 1;
  if (length_size == 3) return std::nullopt;  // not allowed
  return AccessUnitReader(codec, length_size);
}

AccessUnitKind AccessUnitReader::read(const uint8_t* data, size_t size) const {
  Reading reading;
  reading.codec = codec_;
  for_each_nal(data, size, length_size_, [&](const uint8_t* nal, size_t n) {
    reading.nal(nal, n);
    return true;
  });
  AccessUnitKind kind;
  kind.recovery_frames = reading.recovery_frames;
  if (reading.any_slice) {
    kind.picture = reading.all_random_access ? AccessUnitKind::Picture::kRandomAccess
                   : reading.all_intra       ? AccessUnitKind::Picture::kIntra
                                             : AccessUnitKind::Picture::kPartial;
    kind.open_gop = codec_ == Codec::kH264 ? kind.picture == AccessUnitKind::Picture::kIntra : reading.all_cra;
    kind.rasl = reading.rasl;
    kind.reference = reading.any_reference;
  }
  return kind;
}

AccessUnitKind AccessUnitReader::read(GstBuffer* buffer) const {
  GstMapInfo map;
  if (!gst_buffer_map(buffer, &map, GST_MAP_READ)) return {};
  AccessUnitKind kind = read(map.data, map.size);
  gst_buffer_unmap(buffer, &map);
  return kind;
}

}  // namespace vapipe
