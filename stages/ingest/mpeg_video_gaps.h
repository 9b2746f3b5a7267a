// Anchor pictures (I and P) missing from an MPEG-1 or MPEG-2 video stream, told by each picture's
// temporal_reference (ISO 13818-2 6.3.9): its place in display order within its GOP. MPEG-2 has neither
// H.264's frame_num nor H.265's reference picture sets, but its order is fixed: an anchor is sent before
// the B-frames shown before it, so in decoding order a B-frame's temporal_reference is below that of the
// anchor before it, and each anchor's is above the last one's until a GOP header starts the count over.
// A B-frame shown after the last anchor comes after an anchor that never reached the decoder (an
// MPEG-TS file's or stream's lost packets: tsdemux drops the picture they were in and marks nothing):
// it, and the P-frames after it until the next I-frame, refer to the missing one. So does an anchor
// whose temporal_reference went back without a GOP header: the next GOP's I-frame (with its header) was
// lost. In a stream of I- and P-frames only (no B-frame since the start, after its first two anchors),
// each P-frame's is the last one's plus 1: a P-frame that skips comes after a lost one. A lost B-frame
// harms nothing, and is not seen. (An encoder that sends its first B-frames only later, choosing them
// scene by scene, would be seen losing frames there: MPEG-2's encoders keep one GOP structure.)
//
// An anchor lost together with every B-frame after it (a P-frame and its B-frames in one cut) is told
// by the B-frames after the next anchor: the anchors' distance (M, learnt from a run of B-frames that
// filled it) doubled, and the B-frames only the last M - 1 places of it (since stop 66). Not seen: that
// loss before M is known (the first anchors of the stream); a GOP's leading B-frames after its lost
// I-frame (the stretch starts at its first P-frame).
#pragma once

#include <gst/gst.h>

#include <cstddef>
#include <cstdint>
#include <optional>

namespace vapipe {

class TemporalReferenceGaps {
 public:
  // For a decoder input's caps (video/mpeg, mpegversion 1 or 2, not a system stream); nullopt otherwise.
  static std::optional<TemporalReferenceGaps> for_caps(const GstCaps* caps);

  // The next picture passed to the decoder (a frame as mpegvideoparse sends it, or a field picture), in
  // decoding order: whether an anchor picture before it is missing.
  bool missing_before(const uint8_t* data, size_t size);
  bool missing_before(GstBuffer* buffer);
  // Whether a picture (as missing_before takes it) is a B-frame, which no other picture refers to.
  static bool is_b_frame(GstBuffer* buffer);
  // Whether a picture begins an open GOP (its GOP header's closed_gop and broken_link 0): the B-frames
  // sent after its I-frame and shown before it refer to the GOP before.
  static bool opens_open_gop(const uint8_t* data, size_t size);
  static bool opens_open_gop(GstBuffer* buffer);
  // The decoder starts again (a seek's flush, a new connection): no picture is expected.
  void restart() {
    anchor_.reset();
    b_frames_ = false;
    anchors_ = 0;
    step_.reset();
    usual_step_.reset();
    first_b_after_anchor_ = false;
    last_frame_picture_ = true;
  }

 private:
  // Whether the first B-frame after an anchor (temporal_reference `tr`) shows an anchor lost with all
  // of its B-frames before that anchor; learns the usual step from one that shows none.
  bool anchor_lost_with_its_b_frames(uint32_t tr);

  std::optional<uint32_t> anchor_;  // the temporal_reference of the last anchor passed, in its GOP
  bool b_frames_ = false;           // a B-frame passed since the start
  int anchors_ = 0;                 // the anchors passed since the start, up to 2
  std::optional<uint32_t> step_;    // the last anchor's distance from the one before (same GOP)
  std::optional<uint32_t> usual_step_;  // M: a step the B-frames after its anchor filled
  bool first_b_after_anchor_ = false;   // no B-frame since the last anchor yet
  bool last_frame_picture_ = true;      // the last anchor was a frame, not a field
};

}  // namespace vapipe
