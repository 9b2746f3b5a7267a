// Pictures timed by the time slots of the packets they were decoded from, where a decoder's own
// timestamps go wrong:
//  - a GIF (avdec_gif gives every picture pts 0, though the demuxer's packets are timed right);
//  - an AVI, whose chunks carry one time each, the slot of one frame at the file's frame rate, in the
//    order they are decoded: with B-frames (MPEG-4 Part 2 from Xvid, DivX or ffmpeg, the usual AVI
//    codec) the decoder's own guess at presentation times gave some pictures the same time as the one
//    before and left slots empty (a 60-frame file at 29.97 frames/s: times 11 and 22 twice, 57 and 59
//    missing, and a false "1 frame missing" warning; found 2026-12-07).
// Each packet into the decoder gives its slot (its decoding time, or its presentation time when it has
// none); each picture out takes the earliest slot still waiting. Pictures come out in presentation
// order, and a file's presentation times are the same set as its slots, so the n-th picture takes
// the n-th slot, whatever the reordering. A picture with no slot waiting (a decoder that gives more
// pictures than packets) keeps its own time; a seek starts over.
#pragma once

#include <gst/gst.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <queue>
#include <utility>
#include <vector>

namespace vapipe {

// The slots waiting, earliest first (what the probes below keep, apart from GStreamer for tests).
class PictureSlots {
 public:
  // A packet's slot: its decoding time, else its presentation time; none when it has neither.
  void packet(GstClockTime dts, GstClockTime pts, GstClockTime duration);
  // The slot (time, duration) for the next picture, none when none waits.
  std::optional<std::pair<GstClockTime, GstClockTime>> picture();
  void clear() { waiting_ = {}; }
  size_t waiting() const { return waiting_.size(); }

 private:
  using Slot = std::pair<GstClockTime, GstClockTime>;
  std::priority_queue<Slot, std::vector<Slot>, std::greater<Slot>> waiting_;
};

// Whether an MPEG-4 Part 2 packet holds a B-VOP (a start code 00 00 01 B6 whose coding type is 2).
bool holds_mpeg4_b_vop(const uint8_t* data, size_t size);

// Probes on `decoder`'s sink and source pads that time its pictures so. Put on after the probes that
// may drop packets before the decoder (a dropped packet gives no slot). `after_b_frames`: only from the
// first B-VOP a packet holds (MPEG-4 Part 2 in AVI, whose decoder's times are right without B-frames,
// and where a damaged packet that gives no picture would put every later picture one slot early):
// the slots are kept from the start, and used from then on.
void time_pictures_by_their_slots(GstElement* decoder, bool after_b_frames = false);

}  // namespace vapipe
