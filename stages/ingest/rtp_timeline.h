// An RTSP camera's frame times from its own RTP clock. rtspsrc's jitter buffer (buffer-mode slave,
// its default for a live source) stamps packets with their arrival time corrected for clock skew.
// A stall longer than 1 s (a busy host, a paused process, a Wi-Fi blip) makes it reset that
// correction: the late frames' timestamps jump ahead by the stall, are squeezed together, and one is
// repeated; the parser then sends the repeats with none, and the decoder guesses them ahead and clamps
// the next frames' to its last (measured: 12 results of one stream at one pts_ms while the camera's
// clock went on 100 ms a frame, and each counted as undecodable). Restamped from the RTP timestamps
// after the jitter buffer, a connection's frames keep the camera's spacing whatever their arrival:
// pts_ms is the RTP clock's running time from the connection's first packet (that packet at the
// pipeline's running time when it came: the connection's set-up), as documented. The jitter
// buffer's own scheduling is untouched (it runs before).
#pragma once

#include <gst/gst.h>

#include <cstdint>

namespace vapipe {

class RtpTimeline {
 public:
  // The time for a packet the jitter buffer stamped `pts`, of RTP timestamp `rtp_time` from source
  // `ssrc` at `clock_rate` Hz: the first packet's `pts` plus the RTP time since it. Starts again from
  // this packet (its `pts` as it is) on a new source, another clock rate, or an RTP time more than
  // kResync away from the jitter buffer's (a camera whose encoder restarted its RTP clock); `pts`
  // unchanged when it or the clock rate is not known.
  GstClockTime restamp(GstClockTime pts, uint32_t rtp_time, uint32_t ssrc, uint32_t clock_rate);
  // The clocks of a camera and of this host drift apart by some 10 to 100 parts per million: a day
  // at most. More than this apart, the RTP time jumped.
  static constexpr GstClockTime kResync = 60 * GST_SECOND;
  // A B-frame's RTP time is before the frames sent ahead of it, by a few frames; a packet more than this
  // before the last is of a clock that stepped back (found 2026-12-07: 8 s back froze a camera's pts_ms
  // for 8 s, 241 results at one time, and max_fps sampled none of them).
  static constexpr GstClockTime kStepBack = GST_SECOND;

 private:
  bool anchored_ = false;
  uint32_t ssrc_ = 0, clock_rate_ = 0;
  uint64_t last_ = 0;   // the last RTP time, extended to 64 bits (its 32 wrap every 13 h at 90 kHz)
  uint64_t first_ = 0;  // the first packet's, extended
  GstClockTime first_pts_ = 0;
};

// Restamps what leaves each rtpjitterbuffer of an RTSP source `rtspsrc` (its src pads), per pad.
void restamp_from_rtp_clock(GstElement* rtpjitterbuffer);

}  // namespace vapipe
