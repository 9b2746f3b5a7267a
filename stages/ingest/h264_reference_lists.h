// Which reference pictures each H.264 picture is predicted from, built as the decoder builds them
// (8.2.4: its reference picture lists; 8.2.5: the decoded picture buffer's marking), so that ingest's
// decoder-input gate can tell two things of a stream's compressed frames:
//
// - Reference frames missing (missing_before), told by frame_num (7.4.3): each reference picture's is
//   the one before's plus 1 (modulo MaxFrameNum), a non-reference picture's the next one, an IDR
//   picture's 0 (and so is the picture's after one with memory_management_control_operation 5). A
//   frame whose frame_num skips comes after reference frames that never reached the decoder: an
//   MPEG-TS file's or stream's packets lost (tsdemux drops the frame they were in, and marks nothing on
//   the frames after it), a whole frame lost on RTP. A lost non-reference frame (most B-frames) is not
//   seen, and harms no other.
// - Damage picture by picture (last_uses_damaged, damage_last): a picture uses the entries of its
//   slices' active lists (every entry a slice may be predicted from; whether a block of it does is not
//   read), so a lost reference B-frame (B-pyramid) harms the B-frames whose lists hold it, not the
//   P-frames after it, which x264 predicts from P-frames alone (their lists' modifications skip the
//   B-frame). The decoder fills a frame_num gap with frames of its own (concealed, so damaged): they
//   take the lost frames' places in the buffer and the lists.
//
// Not followed picture by picture (last_read() false from there until the next IDR picture, while
// missing_before goes on): field pictures (PAFF: the lists are of fields), MVC/SVC layers (only the base
// is read), a picture whose slice headers or parameter sets could not be read. Not missing (never a
// gap): streams whose SPS allows gaps (gaps_in_frame_num_value_allowed_flag; their inferred frames are
// whole), and frames before the SPS and PPS they name were seen (in band, or in the caps' avcC).
#pragma once

#include <gst/gst.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "stages/ingest/h26x_access_unit.h"

namespace vapipe {

class RefPicListGaps final : public ReferencePictures {
 public:
  // length_size as AccessUnitReader's; codec_data: the caps' avcC record (its SPS and PPS), or null.
  RefPicListGaps(int length_size, GstBuffer* codec_data);
  // For a decoder input's caps; nullopt for anything but H.264 whose frames it can read.
  static std::optional<RefPicListGaps> for_caps(const GstCaps* caps);

  bool missing_before(const uint8_t* data, size_t size);
  bool missing_before(GstBuffer* buffer) override;
  void restart() override;
  bool last_read() const override { return last_read_; }
  bool last_uses_damaged() const override { return last_uses_damaged_; }
  void damage_last() override;
  void heal() override;

  // The SPS fields the lists and picture order counts need (7.3.2.1.1).
  struct Sps {
    uint32_t chroma_array_type = 1;
    uint32_t log2_max_frame_num = 4;
    uint32_t poc_type = 0;
    uint32_t log2_max_poc_lsb = 4;
    bool delta_pic_order_always_zero = false;
    int32_t offset_for_non_ref_pic = 0;
    int32_t offset_for_top_to_bottom_field = 0;
    std::vector<int32_t> offset_for_ref_frame;
    uint32_t max_num_ref_frames = 1;
    bool gaps_allowed = false;
    bool frame_mbs_only = true;
    bool separate_colour_plane = false;
  };
  // The PPS fields a slice header needs (7.3.2.2).
  struct Pps {
    uint32_t sps_id = 0;
    bool bottom_field_pic_order_in_frame_present = false;
    uint32_t num_ref_idx_default_active[2] = {1, 1};
    bool weighted_pred = false;
    uint32_t weighted_bipred_idc = 0;
    bool redundant_pic_cnt_present = false;
  };
  // One operation of ref_pic_list_modification (7.3.3.1): modification_of_pic_nums_idc 0 to 2, its value.
  struct ListModification {
    uint32_t idc = 0;
    uint32_t value = 0;
  };
  // One memory_management_control_operation (7.3.3.3) and its values.
  struct MarkingOperation {
    uint32_t op = 0;
    uint32_t difference_of_pic_nums_minus1 = 0;
    uint32_t long_term_pic_num = 0;
    uint32_t long_term_frame_idx = 0;
    uint32_t max_long_term_frame_idx_plus1 = 0;
  };
  // What a slice header says of the picture and of its lists (7.3.3).
  struct Slice {
    uint32_t slice_type = 0;  // modulo 5: 0 P, 1 B, 2 I, 3 SP, 4 SI
    uint32_t pps_id = 0;
    uint32_t frame_num = 0;
    bool field = false;
    bool idr = false;
    bool reference = false;  // nal_ref_idc not 0
    uint32_t poc_lsb = 0;
    int32_t delta_poc_bottom = 0;
    int32_t delta_poc[2] = {0, 0};
    uint32_t num_ref_idx_active[2] = {0, 0};
    std::vector<ListModification> modifications[2];
    bool long_term_reference = false;  // an IDR picture's long_term_reference_flag
    bool adaptive_marking = false;
    std::vector<MarkingOperation> marking;
  };

 private:
  // A frame of the decoded picture buffer marked "used for reference" (8.2.5), or one the decoder put
  // in a frame_num gap's place (non_existing: its POC is not known).
  struct Frame {
    uint64_t id = 0;
    uint32_t frame_num = 0;
    int32_t poc = 0;
    bool long_term = false;
    uint32_t long_term_frame_idx = 0;
    bool non_existing = false;
    bool damaged = false;
  };
  void take_nal(const uint8_t* data, size_t size);
  bool frame_num_skips(const Slice& slice, const Sps& sps);
  int32_t picture_order_count(const Slice& slice, const Sps& sps);
  int32_t frame_num_wrap(const Frame& frame, uint32_t current_frame_num, uint32_t max_frame_num) const;
  void fill_gap(const Slice& slice, const Sps& sps, uint32_t prev_ref, bool damaged);
  bool slice_uses_damaged(const Slice& slice, const Sps& sps, int32_t poc) const;
  void mark(const Slice& slice, const Sps& sps, int32_t poc);
  void slide_window(uint32_t current_frame_num, const Sps& sps);

  int length_size_;
  std::map<uint32_t, Sps> sps_;  // by seq_parameter_set_id
  std::map<uint32_t, Pps> pps_;  // by pic_parameter_set_id
  // The access unit being read: its slices' headers (the first one's says what the picture is), and
  // whether one of them could not be read.
  std::vector<Slice> slices_;
  Sps first_sps_;  // the first slice's SPS, as it was when the slice was read
  bool unreadable_slice_ = false;

  // frame_num, as FrameNumGaps did: whether prev_ref_ is a frame_num passed since the last restart.
  bool known_ = false;
  uint32_t prev_ref_ = 0;
  // The lists: whether the buffer is followed (since the last restart or IDR picture), and its frames.
  bool following_ = true;
  std::vector<Frame> frames_;
  uint64_t next_id_ = 1;
  std::optional<uint32_t> max_long_term_frame_idx_plus1_;  // none: no long-term frame index allowed
  // Picture order counts (8.2.1): the previous reference picture's msb and lsb (type 0); the previous
  // picture's frame_num and FrameNumOffset (types 1 and 2); whether it had memory_management_control_operation 5.
  int32_t prev_poc_msb_ = 0;
  int32_t prev_poc_lsb_ = 0;
  uint32_t prev_frame_num_ = 0;
  int64_t prev_frame_num_offset_ = 0;
  bool prev_had_mmco5_ = false;
  // The picture just read.
  bool last_read_ = false, last_uses_damaged_ = false;
  uint64_t last_id_ = 0;  // its frame in frames_ (0: not a reference picture, or not followed)
};

}  // namespace vapipe
