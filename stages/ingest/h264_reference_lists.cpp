#include "stages/ingest/h264_reference_lists.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "stages/ingest/nal_reading.h"

namespace vapipe {
namespace {

using nal::BitReader;

constexpr uint32_t kMaxListEntries = 32;  // num_ref_idx_lX_active_minus1 <= 31
constexpr size_t kMaxFrames = 16;         // max_num_ref_frames <= MaxDpbFrames <= 16
constexpr size_t kMaxOperations = 66;     // list modifications (active + 1) or marking operations, at most

bool is_high_profile(uint32_t profile) {
  for (uint32_t p : {100u, 110u, 122u, 244u, 44u, 83u, 86u, 118u, 128u, 138u, 139u, 134u, 135u}) {
    if (profile == p) return true;
  }
  return false;
}

// seq_parameter_set_data() (7.3.2.1.1), up to frame_mbs_only_flag.
bool read_sps(BitReader& bits, uint32_t* id, RefPicListGaps::Sps* sps) {
  const uint32_t profile = bits.bits(8);
  bits.bits(16);  // constraint flags, level_idc
  *id = bits.ue();
  if (is_high_profile(profile)) {
    const uint32_t chroma_format = bits.ue();
    if (chroma_format == 3) sps->separate_colour_plane = bits.bit() != 0;
    sps->chroma_array_type = sps->separate_colour_plane ? 0 : chroma_format;
    bits.ue();   // bit_depth_luma_minus8
    bits.ue();   // bit_depth_chroma_minus8
    bits.bit();  // qpprime_y_zero_transform_bypass_flag
    if (bits.bit()) {  // seq_scaling_matrix_present_flag
      for (int k = 0; k < (chroma_format != 3 ? 8 : 12) && bits.ok(); ++k) {
        if (bits.bit()) nal::skip_scaling_list(bits, k < 6 ? 16 : 64);
      }
    }
  }
  sps->log2_max_frame_num = bits.ue() + 4;
  sps->poc_type = bits.ue();
  if (sps->poc_type == 0) {
    sps->log2_max_poc_lsb = bits.ue() + 4;
  } else if (sps->poc_type == 1) {
    sps->delta_pic_order_always_zero = bits.bit() != 0;
    sps->offset_for_non_ref_pic = bits.se();
    sps->offset_for_top_to_bottom_field = bits.se();
    const uint32_t cycle = bits.ue();
    if (cycle > 255) return false;
    for (uint32_t k = 0; k < cycle && bits.ok(); ++k) sps->offset_for_ref_frame.push_back(bits.se());
  }
  sps->max_num_ref_frames = bits.ue();
  sps->gaps_allowed = bits.bit() != 0;
  bits.ue();  // pic_width_in_mbs_minus1
  bits.ue();  // pic_height_in_map_units_minus1
  sps->frame_mbs_only = bits.bit() != 0;
  return bits.ok() && *id < 32 && sps->log2_max_frame_num <= 16 && sps->log2_max_poc_lsb <= 16 &&
         sps->poc_type <= 2 && sps->max_num_ref_frames <= kMaxFrames;
}

// pic_parameter_set_rbsp() (7.3.2.2), up to redundant_pic_cnt_present_flag.
bool read_pps(BitReader& bits, uint32_t* id, RefPicListGaps::Pps* pps) {
  *id = bits.ue();
  pps->sps_id = bits.ue();
  bits.bit();  // entropy_coding_mode_flag
  pps->bottom_field_pic_order_in_frame_present = bits.bit() != 0;
  const uint32_t slice_groups_minus1 = bits.ue();
  if (slice_groups_minus1 > 7) return false;
  if (slice_groups_minus1 > 0) {  // slice groups (FMO): read past
    const uint32_t map_type = bits.ue();
    if (map_type == 0) {
      for (uint32_t g = 0; g <= slice_groups_minus1; ++g) bits.ue();  // run_length_minus1
    } else if (map_type == 2) {
      for (uint32_t g = 0; g < slice_groups_minus1; ++g) {
        bits.ue();  // top_left
        bits.ue();  // bottom_right
      }
    } else if (map_type >= 3 && map_type <= 5) {
      bits.bit();  // slice_group_change_direction_flag
      bits.ue();   // slice_group_change_rate_minus1
    } else if (map_type == 6) {
      const uint32_t units = bits.ue() + 1;  // pic_size_in_map_units_minus1
      if (units > (1u << 20)) return false;
      int width = 0;  // Ceil(Log2(num_slice_groups_minus1 + 1))
      while ((1u << width) < slice_groups_minus1 + 1) ++width;
      for (uint32_t u = 0; u < units && bits.ok(); ++u) bits.bits(width);
    }
  }
  pps->num_ref_idx_default_active[0] = bits.ue() + 1;
  pps->num_ref_idx_default_active[1] = bits.ue() + 1;
  pps->weighted_pred = bits.bit() != 0;
  pps->weighted_bipred_idc = bits.bits(2);
  bits.se();   // pic_init_qp_minus26
  bits.se();   // pic_init_qs_minus26
  bits.se();   // chroma_qp_index_offset
  bits.bit();  // deblocking_filter_control_present_flag
  bits.bit();  // constrained_intra_pred_flag
  pps->redundant_pic_cnt_present = bits.bit() != 0;
  return bits.ok() && *id < 256 && pps->num_ref_idx_default_active[0] <= kMaxListEntries &&
         pps->num_ref_idx_default_active[1] <= kMaxListEntries;
}

// ref_pic_list_modification() for one list (7.3.3.1).
bool read_list_modification(BitReader& bits, std::vector<RefPicListGaps::ListModification>* out) {
  if (!bits.bit()) return true;  // ref_pic_list_modification_flag_lX
  for (size_t n = 0; n < kMaxOperations && bits.ok(); ++n) {
    RefPicListGaps::ListModification m;
    m.idc = bits.ue();
    if (m.idc == 3) return true;
    if (m.idc > 2) return false;
    m.value = bits.ue();  // abs_diff_pic_num_minus1, or long_term_pic_num
    out->push_back(m);
  }
  return false;
}

// pred_weight_table() (7.3.3.2): read past.
void skip_pred_weight_table(BitReader& bits, uint32_t chroma_array_type, const uint32_t active[2], bool b_slice) {
  bits.ue();  // luma_log2_weight_denom
  if (chroma_array_type != 0) bits.ue();  // chroma_log2_weight_denom
  for (int list = 0; list < (b_slice ? 2 : 1); ++list) {
    for (uint32_t i = 0; i < active[list] && bits.ok(); ++i) {
      if (bits.bit()) {  // luma_weight_lX_flag
        bits.se();
        bits.se();
      }
      if (chroma_array_type != 0 && bits.bit()) {  // chroma_weight_lX_flag
        for (int j = 0; j < 4; ++j) bits.se();
      }
    }
  }
}

// dec_ref_pic_marking() (7.3.3.3).
bool read_marking(BitReader& bits, RefPicListGaps::Slice* slice) {
  if (slice->idr) {
    bits.bit();  // no_output_of_prior_pics_flag
    slice->long_term_reference = bits.bit() != 0;
    return bits.ok();
  }
  slice->adaptive_marking = bits.bit() != 0;
  if (!slice->adaptive_marking) return bits.ok();
  for (size_t n = 0; n < kMaxOperations && bits.ok(); ++n) {
    RefPicListGaps::MarkingOperation m;
    m.op = bits.ue();
    if (m.op == 0) return true;
    if (m.op > 6) return false;
    if (m.op == 1 || m.op == 3) m.difference_of_pic_nums_minus1 = bits.ue();
    if (m.op == 2) m.long_term_pic_num = bits.ue();
    if (m.op == 3 || m.op == 6) m.long_term_frame_idx = bits.ue();
    if (m.op == 4) m.max_long_term_frame_idx_plus1 = bits.ue();
    slice->marking.push_back(m);
  }
  return false;
}

}  // namespace

RefPicListGaps::RefPicListGaps(int length_size, GstBuffer* codec_data) : length_size_(length_size) {
  nal::for_each_parameter_set(codec_data, /*h265=*/false, [&](const uint8_t* unit, size_t size) { take_nal(unit, size); });
}

std::optional<RefPicListGaps> RefPicListGaps::for_caps(const GstCaps* caps) {
  // The reader knows the NAL units' layout (its length size read from the avcC, or start codes).
  const std::optional<AccessUnitReader> reader = AccessUnitReader::for_caps(caps);
  if (!reader || reader->codec() != AccessUnitReader::Codec::kH264) return std::nullopt;
  return RefPicListGaps(reader->length_size(), nal::parameter_set_record(caps, reader->length_size()));
}

void RefPicListGaps::take_nal(const uint8_t* data, size_t size) {
  if (size < 2) return;
  const int type = data[0] & 0x1F;
  if (type == 7) {
    const std::vector<uint8_t> rbsp = nal::rbsp_of(data + 1, size - 1, size);
    BitReader bits(rbsp.data(), rbsp.size());
    uint32_t id = 0;
    Sps sps;
    if (read_sps(bits, &id, &sps)) sps_[id] = std::move(sps);
  } else if (type == 8) {
    const std::vector<uint8_t> rbsp = nal::rbsp_of(data + 1, size - 1, size);
    BitReader bits(rbsp.data(), rbsp.size());
    uint32_t id = 0;
    Pps pps;
    if (read_pps(bits, &id, &pps)) pps_[id] = pps;
  } else if (type == 1 || type == 2 || type == 5) {  // a slice, its partition A (which has the header), IDR
    // The header is at most a few hundred bytes (a weight table of 32 entries each way).
    const std::vector<uint8_t> rbsp = nal::rbsp_of(data + 1, size - 1, 1024);
    BitReader bits(rbsp.data(), rbsp.size());
    Slice slice;
    slice.idr = type == 5;
    slice.reference = ((data[0] >> 5) & 3) != 0;  // nal_ref_idc
    bits.ue();                                     // first_mb_in_slice
    slice.slice_type = bits.ue();
    slice.pps_id = bits.ue();
    const auto pps = pps_.find(slice.pps_id);
    const auto sps = pps == pps_.end() ? sps_.end() : sps_.find(pps->second.sps_id);
    if (!bits.ok() || slice.slice_type > 9 || sps == sps_.end()) {
      unreadable_slice_ = true;
      return;
    }
    // A slice read as far as its frame_num still tells frame_num's gaps (unreadable_slice_: no more).
    auto read_part_only = [&] {
      unreadable_slice_ = true;
      slice.marking.clear();
      if (slices_.empty()) {
        first_sps_ = sps->second;
        slices_.push_back(std::move(slice));
      }
    };
    slice.slice_type %= 5;
    const Sps& s = sps->second;
    const Pps& p = pps->second;
    if (s.separate_colour_plane) bits.bits(2);  // colour_plane_id
    slice.frame_num = bits.bits(static_cast<int>(s.log2_max_frame_num));
    if (!s.frame_mbs_only) {
      slice.field = bits.bit() != 0;  // field_pic_flag
      if (slice.field) bits.bit();    // bottom_field_flag
    }
    if (slice.idr) bits.ue();  // idr_pic_id
    if (!bits.ok()) {
      unreadable_slice_ = true;
      return;
    }
    if (s.poc_type == 0) {
      slice.poc_lsb = bits.bits(static_cast<int>(s.log2_max_poc_lsb));
      if (p.bottom_field_pic_order_in_frame_present && !slice.field) slice.delta_poc_bottom = bits.se();
    } else if (s.poc_type == 1 && !s.delta_pic_order_always_zero) {
      slice.delta_poc[0] = bits.se();
      if (p.bottom_field_pic_order_in_frame_present && !slice.field) slice.delta_poc[1] = bits.se();
    }
    if (p.redundant_pic_cnt_present && bits.ue() > 0) return;  // a redundant slice: decoders leave it
    const bool p_slice = slice.slice_type == 0 || slice.slice_type == 3, b_slice = slice.slice_type == 1;
    if (b_slice) bits.bit();  // direct_spatial_mv_pred_flag
    if (p_slice || b_slice) {
      slice.num_ref_idx_active[0] = p.num_ref_idx_default_active[0];
      if (b_slice) slice.num_ref_idx_active[1] = p.num_ref_idx_default_active[1];
      if (bits.bit()) {  // num_ref_idx_active_override_flag
        slice.num_ref_idx_active[0] = bits.ue() + 1;
        if (b_slice) slice.num_ref_idx_active[1] = bits.ue() + 1;
      }
    }
    bool ok = bits.ok() && slice.num_ref_idx_active[0] <= kMaxListEntries &&
              slice.num_ref_idx_active[1] <= kMaxListEntries;
    if (ok && (p_slice || b_slice)) ok = read_list_modification(bits, &slice.modifications[0]);
    if (ok && b_slice) ok = read_list_modification(bits, &slice.modifications[1]);
    if (ok && ((p.weighted_pred && p_slice) || (p.weighted_bipred_idc == 1 && b_slice))) {
      skip_pred_weight_table(bits, s.chroma_array_type, slice.num_ref_idx_active, b_slice);
    }
    if (ok && slice.reference) ok = read_marking(bits, &slice);
    if (!ok || !bits.ok()) {
      read_part_only();
      return;
    }
    if (slices_.empty()) first_sps_ = s;  // (a parameter set later in the unit may replace it)
    slices_.push_back(std::move(slice));
  }
}

void RefPicListGaps::restart() {
  known_ = false;
  following_ = true;  // from an empty buffer: what the decoder holds is what passes from here
  frames_.clear();
  max_long_term_frame_idx_plus1_.reset();
  prev_poc_msb_ = prev_poc_lsb_ = 0;
  prev_frame_num_ = 0;
  prev_frame_num_offset_ = 0;
  prev_had_mmco5_ = false;
  last_read_ = last_uses_damaged_ = false;
  last_id_ = 0;
}

void RefPicListGaps::damage_last() {
  for (Frame& frame : frames_) {
    if (last_id_ != 0 && frame.id == last_id_) frame.damaged = true;
  }
}

void RefPicListGaps::heal() {
  for (Frame& frame : frames_) frame.damaged = false;
}

// frame_num (7.4.3), as the gate has always read it: whether the frame comes after reference frames
// that never reached the decoder. Updates prev_ref_.
bool RefPicListGaps::frame_num_skips(const Slice& slice, const Sps& sps) {
  const uint32_t max_frame_num = 1u << sps.log2_max_frame_num;
  const uint32_t frame_num = slice.frame_num;
  bool missing = false;
  if (slice.idr) {
    known_ = true;
  } else if (known_ && !sps.gaps_allowed) {
    // The frame after the last reference picture (or that picture's second field, sharing its frame_num).
    missing = frame_num != prev_ref_ && frame_num != (prev_ref_ + 1) % max_frame_num;
    // Taken up from there: a non-reference frame's reference before it is the one numbered before it.
    if (missing && !slice.reference) prev_ref_ = (frame_num + max_frame_num - 1) % max_frame_num;
  }
  if (slice.reference || slice.idr) {
    prev_ref_ = frame_num;
    known_ = true;
  } else if (!known_) {
    // A non-reference frame first (a connection joined at a recovery point): the reference before it
    // is the one numbered before it.
    prev_ref_ = (frame_num + max_frame_num - 1) % max_frame_num;
    known_ = true;
  }
  return missing;
}

// The picture's order count (8.2.1), a frame's: the least of its two fields'. Updates the state the
// next picture's count is derived from (for a reference picture, with type 0).
int32_t RefPicListGaps::picture_order_count(const Slice& slice, const Sps& sps) {
  const int64_t max_frame_num = int64_t{1} << sps.log2_max_frame_num;
  const bool mmco5 = std::any_of(slice.marking.begin(), slice.marking.end(), [](const MarkingOperation& m) { return m.op == 5; });
  int64_t top = 0, bottom = 0;
  if (sps.poc_type == 0) {
    const int64_t max_lsb = int64_t{1} << sps.log2_max_poc_lsb;
    if (slice.idr) prev_poc_msb_ = prev_poc_lsb_ = 0;
    const int64_t lsb = slice.poc_lsb, prev_lsb = prev_poc_lsb_;
    int64_t msb = prev_poc_msb_;
    if (lsb < prev_lsb && prev_lsb - lsb >= max_lsb / 2) {
      msb += max_lsb;
    } else if (lsb > prev_lsb && lsb - prev_lsb > max_lsb / 2) {
      msb -= max_lsb;
    }
    top = msb + lsb;
    bottom = top + slice.delta_poc_bottom;
    if (slice.reference) {
      // After memory_management_control_operation 5 the picture counts from 0 (its top field's count).
      prev_poc_msb_ = mmco5 ? 0 : static_cast<int32_t>(msb);
      prev_poc_lsb_ = mmco5 ? static_cast<int32_t>(top - std::min(top, bottom)) : static_cast<int32_t>(lsb);
    }
  } else {
    const int64_t prev_offset = prev_had_mmco5_ ? 0 : prev_frame_num_offset_;
    const int64_t offset = slice.idr ? 0 : prev_frame_num_ > slice.frame_num ? prev_offset + max_frame_num : prev_offset;
    if (sps.poc_type == 2) {
      top = slice.idr ? 0 : 2 * (offset + slice.frame_num) - (slice.reference ? 0 : 1);
      bottom = top;
    } else {
      const auto cycle = static_cast<int64_t>(sps.offset_for_ref_frame.size());
      int64_t abs_frame_num = cycle != 0 ? offset + slice.frame_num : 0;
      if (!slice.reference && abs_frame_num > 0) --abs_frame_num;
      int64_t expected = 0;
      if (abs_frame_num > 0) {
        int64_t delta_per_cycle = 0;
        for (int32_t o : sps.offset_for_ref_frame) delta_per_cycle += o;
        const int64_t cycles = (abs_frame_num - 1) / cycle, in_cycle = (abs_frame_num - 1) % cycle;
        expected = cycles * delta_per_cycle;
        for (int64_t i = 0; i <= in_cycle; ++i) expected += sps.offset_for_ref_frame[static_cast<size_t>(i)];
      }
      if (!slice.reference) expected += sps.offset_for_non_ref_pic;
      top = expected + slice.delta_poc[0];
      bottom = top + sps.offset_for_top_to_bottom_field + slice.delta_poc[1];
    }
    prev_frame_num_offset_ = offset;
  }
  prev_frame_num_ = mmco5 ? 0 : slice.frame_num;  // (7.4.3: frame_num is 0 after operation 5)
  prev_had_mmco5_ = mmco5;
  const int64_t poc = std::min(top, bottom);
  return static_cast<int32_t>(std::clamp<int64_t>(poc, INT32_MIN / 2, INT32_MAX / 2));
}

// FrameNumWrap (8.2.4.1): a short-term frame's PicNum, relative to the current picture's frame_num.
int32_t RefPicListGaps::frame_num_wrap(const Frame& frame, uint32_t current_frame_num, uint32_t max_frame_num) const {
  return frame.frame_num > current_frame_num ? static_cast<int32_t>(frame.frame_num) - static_cast<int32_t>(max_frame_num)
                                             : static_cast<int32_t>(frame.frame_num);
}

// The sliding window (8.2.5.3): a full buffer lets its oldest short-term frame go.
void RefPicListGaps::slide_window(uint32_t current_frame_num, const Sps& sps) {
  const size_t capacity = std::max<size_t>(sps.max_num_ref_frames, 1);
  const uint32_t max_frame_num = 1u << sps.log2_max_frame_num;
  while (frames_.size() >= capacity) {
    auto oldest = frames_.end();
    for (auto it = frames_.begin(); it != frames_.end(); ++it) {
      if (it->long_term) continue;
      if (oldest == frames_.end() ||
          frame_num_wrap(*it, current_frame_num, max_frame_num) < frame_num_wrap(*oldest, current_frame_num, max_frame_num)) {
        oldest = it;
      }
    }
    if (oldest == frames_.end()) return;  // long-term frames only
    frames_.erase(oldest);
  }
}

// A frame_num gap (8.2.5.2): the decoder puts a frame of its own in each missing frame_num's place, as
// a short-term reference frame through the sliding window; after a loss they are concealed, damaged.
// prev_ref: the frame_num of the reference picture before. Only the last max_num_ref_frames of them
// can still be in the buffer.
void RefPicListGaps::fill_gap(const Slice& slice, const Sps& sps, uint32_t prev_ref, bool damaged) {
  const uint32_t max_frame_num = 1u << sps.log2_max_frame_num;
  const uint32_t missing = (slice.frame_num + max_frame_num - prev_ref - 1) % max_frame_num;
  const uint32_t kept = std::min<uint32_t>(missing, std::max<uint32_t>(sps.max_num_ref_frames, 1));
  for (uint32_t k = kept; k > 0; --k) {
    Frame frame;
    frame.id = next_id_++;
    frame.frame_num = (slice.frame_num + max_frame_num - k) % max_frame_num;
    frame.non_existing = true;
    frame.damaged = damaged;
    slide_window(frame.frame_num, sps);
    frames_.push_back(frame);
  }
}

// Whether a slice's active reference lists (8.2.4: initialised from the buffer, then modified) hold a
// damaged frame.
bool RefPicListGaps::slice_uses_damaged(const Slice& slice, const Sps& sps, int32_t poc) const {
  const bool b_slice = slice.slice_type == 1;
  if (slice.slice_type == 2 || slice.slice_type == 4) return false;  // I, SI
  const uint32_t max_frame_num = 1u << sps.log2_max_frame_num;
  std::vector<const Frame*> short_term, long_term;
  for (const Frame& frame : frames_) {
    if (frame.long_term) {
      long_term.push_back(&frame);
    } else if (!b_slice || !frame.non_existing) {
      short_term.push_back(&frame);
    } else if (frame.damaged) {
      return true;  // a concealed frame's order count is not known: where it stands in a B-slice's lists neither
    }
  }
  std::sort(long_term.begin(), long_term.end(),
            [](const Frame* a, const Frame* b) { return a->long_term_frame_idx < b->long_term_frame_idx; });
  std::vector<const Frame*> lists[2];
  if (!b_slice) {
    // 8.2.4.2.1: PicNum descending, then LongTermPicNum ascending.
    std::sort(short_term.begin(), short_term.end(), [&](const Frame* a, const Frame* b) {
      return frame_num_wrap(*a, slice.frame_num, max_frame_num) > frame_num_wrap(*b, slice.frame_num, max_frame_num);
    });
    lists[0] = short_term;
    lists[0].insert(lists[0].end(), long_term.begin(), long_term.end());
  } else {
    // 8.2.4.2.3: list 0 the frames shown before this one, nearest first, then those after; list 1 the
    // other way round; long-term frames after both.
    std::vector<const Frame*> before, after;
    for (const Frame* frame : short_term) (frame->poc < poc ? before : after).push_back(frame);
    std::sort(before.begin(), before.end(), [](const Frame* a, const Frame* b) { return a->poc > b->poc; });
    std::sort(after.begin(), after.end(), [](const Frame* a, const Frame* b) { return a->poc < b->poc; });
    lists[0] = before;
    lists[0].insert(lists[0].end(), after.begin(), after.end());
    lists[0].insert(lists[0].end(), long_term.begin(), long_term.end());
    lists[1] = after;
    lists[1].insert(lists[1].end(), before.begin(), before.end());
    lists[1].insert(lists[1].end(), long_term.begin(), long_term.end());
    if (lists[1].size() > 1 && lists[1] == lists[0]) std::swap(lists[1][0], lists[1][1]);
  }
  const auto curr_pic_num = static_cast<int32_t>(slice.frame_num);
  const auto max_pic_num = static_cast<int32_t>(max_frame_num);
  for (int x = 0; x < (b_slice ? 2 : 1); ++x) {
    const uint32_t active = slice.num_ref_idx_active[x];
    std::vector<const Frame*> list = lists[x];
    list.resize(active + 1, nullptr);  // (entries past the active ones dropped; one more while modified)
    // 8.2.4.3: each modification puts the frame it names at the next index, and takes it out further on.
    uint32_t index = 0;
    int32_t pred = curr_pic_num;
    for (const ListModification& m : slice.modifications[x]) {
      if (index >= active) break;
      const Frame* named = nullptr;
      if (m.idc == 2) {
        for (const Frame* f : long_term) {
          if (f->long_term_frame_idx == m.value) named = f;
        }
      } else {
        const int32_t diff = static_cast<int32_t>(std::min<uint32_t>(m.value, max_frame_num - 1)) + 1;
        int32_t no_wrap = m.idc == 0 ? pred - diff : pred + diff;
        if (no_wrap < 0) no_wrap += max_pic_num;
        if (no_wrap >= max_pic_num) no_wrap -= max_pic_num;
        pred = no_wrap;
        const int32_t pic_num = no_wrap > curr_pic_num ? no_wrap - max_pic_num : no_wrap;
        for (const Frame& f : frames_) {
          if (!f.long_term && frame_num_wrap(f, slice.frame_num, max_frame_num) == pic_num) named = &f;
        }
      }
      list.insert(list.begin() + index, named);
      ++index;
      if (named) {
        for (size_t c = index; c < list.size(); ++c) {
          if (list[c] == named) {
            list.erase(list.begin() + static_cast<std::ptrdiff_t>(c));
            break;
          }
        }
      }
      list.resize(active + 1, nullptr);
    }
    for (uint32_t i = 0; i < active; ++i) {
      if (list[i] && list[i]->damaged) return true;
    }
  }
  return false;
}

// The picture's marking (8.2.5): an IDR empties the buffer; otherwise its memory management control
// operations, or the sliding window; then the picture itself is kept, short- or long-term.
void RefPicListGaps::mark(const Slice& slice, const Sps& sps, int32_t poc) {
  if (!slice.reference) return;
  const uint32_t max_frame_num = 1u << sps.log2_max_frame_num;
  Frame current;
  current.id = next_id_++;
  current.frame_num = slice.frame_num;
  current.poc = poc;
  auto erase_if = [&](auto&& pred) { frames_.erase(std::remove_if(frames_.begin(), frames_.end(), pred), frames_.end()); };
  if (slice.idr) {
    frames_.clear();
    current.long_term = slice.long_term_reference;
    if (current.long_term) {
      max_long_term_frame_idx_plus1_ = 1;
    } else {
      max_long_term_frame_idx_plus1_.reset();
    }
  } else if (slice.adaptive_marking) {
    const auto curr_pic_num = static_cast<int32_t>(slice.frame_num);
    for (const MarkingOperation& m : slice.marking) {
      const int32_t pic_num_x = curr_pic_num - static_cast<int32_t>(std::min<uint32_t>(m.difference_of_pic_nums_minus1, max_frame_num)) - 1;
      auto short_term_x = [&](const Frame& f) { return !f.long_term && frame_num_wrap(f, slice.frame_num, max_frame_num) == pic_num_x; };
      switch (m.op) {
        case 1:
          erase_if(short_term_x);
          break;
        case 2:
          erase_if([&](const Frame& f) { return f.long_term && f.long_term_frame_idx == m.long_term_pic_num; });
          break;
        case 3: {
          const auto it = std::find_if(frames_.begin(), frames_.end(), short_term_x);
          if (it == frames_.end()) break;
          const uint64_t id = it->id;
          erase_if([&](const Frame& f) { return f.long_term && f.long_term_frame_idx == m.long_term_frame_idx; });
          for (Frame& f : frames_) {
            if (f.id == id) {
              f.long_term = true;
              f.long_term_frame_idx = m.long_term_frame_idx;
            }
          }
          break;
        }
        case 4:
          max_long_term_frame_idx_plus1_ = m.max_long_term_frame_idx_plus1;
          erase_if([&](const Frame& f) { return f.long_term && f.long_term_frame_idx >= m.max_long_term_frame_idx_plus1; });
          break;
        case 5:
          frames_.clear();
          max_long_term_frame_idx_plus1_.reset();
          current.frame_num = 0;
          current.poc = 0;  // (8.2.1: its fields' counts less the least of them)
          break;
        case 6:
          erase_if([&](const Frame& f) { return f.long_term && f.long_term_frame_idx == m.long_term_frame_idx; });
          current.long_term = true;
          current.long_term_frame_idx = m.long_term_frame_idx;
          break;
        default:
          break;
      }
    }
  } else {
    slide_window(slice.frame_num, sps);
  }
  frames_.push_back(current);
  while (frames_.size() > kMaxFrames) frames_.erase(frames_.begin());  // a stream that breaks the rules
  last_id_ = current.id;
}

bool RefPicListGaps::missing_before(const uint8_t* data, size_t size) {
  slices_.clear();
  unreadable_slice_ = false;
  last_read_ = last_uses_damaged_ = false;
  last_id_ = 0;
  nal::for_each_nal(data, size, length_size_, [&](const uint8_t* unit, size_t n) {
    take_nal(unit, n);
    return true;
  });
  if (slices_.empty()) {
    if (unreadable_slice_) following_ = false;  // a picture not read: what the buffer holds is not known
    return false;  // nothing to follow it by
  }
  const Slice& first = slices_.front();
  const Sps& sps = first_sps_;
  const uint32_t prev_ref = prev_ref_;
  const bool was_known = known_;
  const bool missing = frame_num_skips(first, sps);
  const bool mmco5 = std::any_of(first.marking.begin(), first.marking.end(), [](const MarkingOperation& m) { return m.op == 5; });
  if (mmco5 && first.reference) prev_ref_ = 0;  // (7.4.3: its frame_num is 0 after the operation)
  const bool fields = std::any_of(slices_.begin(), slices_.end(), [](const Slice& s) { return s.field; });
  if (first.idr) following_ = true;
  if (unreadable_slice_ || fields) following_ = false;
  const int32_t poc = picture_order_count(first, sps);
  if (!following_) return missing;
  const uint32_t max_frame_num = 1u << sps.log2_max_frame_num;
  if (was_known && !first.idr && first.frame_num != prev_ref && first.frame_num != (prev_ref + 1) % max_frame_num) {
    fill_gap(first, sps, prev_ref, /*damaged=*/!sps.gaps_allowed);
  }
  bool uses_damaged = false;
  for (const Slice& slice : slices_) uses_damaged = uses_damaged || slice_uses_damaged(slice, sps, poc);
  last_read_ = true;
  last_uses_damaged_ = uses_damaged;
  mark(first, sps, poc);
  return missing;
}

bool RefPicListGaps::missing_before(GstBuffer* buffer) {
  return nal::read_mapped(buffer, [this](const uint8_t* data, size_t size) { return missing_before(data, size); });
}

}  // namespace vapipe
