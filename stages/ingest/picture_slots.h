// Pictures whose decoder's timestamps go wrong.
//
// A GIF: avdec_gif gives every picture pts 0, though the demuxer's packets are timed right. Each packet
// into the decoder gives its slot (its presentation time, or its decoding time), and each picture out
// takes the earliest slot still waiting (time_pictures_by_their_slots). One picture a packet, in order.
//
// An AVI of MPEG-4 Part 2 with B-frames (Xvid, DivX, ffmpeg's mpeg4: the usual AVI codec): AVI chunks
// carry decoding times only, and the decoder's guess at presentation times fell a frame behind at each
// GOP (a 60-frame file at 29.97 frames/s: times 11 and 22 twice, 57 and 59 missing, and a false "1 frame
// missing" warning; found 2026-12-07). Slots do not serve there: a B-frame that gives no picture (an open
// GOP's after a seek, a damaged one) would put every later picture a slot early. Instead a picture timed
// at or before the one before it is put one frame after it, by the caps' frame rate
// (keep_picture_times_rising): the times fall back into step at each duplicate, and a picture that is
// not there leaves its gap.
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

// Probes on `decoder`'s sink and source pads that time its pictures by their packets' slots. Put on
// after the probes that may drop packets before the decoder (a dropped packet gives no slot).
void time_pictures_by_their_slots(GstElement* decoder);

// The time for a picture the decoder timed `pts`, after one at `previous` (NONE: the first since a
// seek): `pts` when it comes half a frame or more after it, else one frame (`frame_ns`; 0: not known, left
// as it is) after it.
GstClockTime rising_picture_time(GstClockTime pts, GstClockTime previous, GstClockTime frame_ns);
// On `decoder`'s source pad: each picture's time so, the frame from its caps' frame rate.
void keep_picture_times_rising(GstElement* decoder);

}  // namespace vapipe
