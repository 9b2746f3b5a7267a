// A file whose timestamps start over part way through: MPEG-TS (or MPEG-PS) files joined end to end
// (`cat 1.ts 2.ts > day.ts`, a DVR's export of several recordings, a camera's files put together). Each
// part's timestamps begin again near 0. tsdemux reading a file (pull mode, as uridecodebin reads one)
// passes them on as they are, and the video decoder, which will not send a picture earlier than the
// one before, held every later picture at the first part's last timestamp: found 2026-12-06, a file of
// three 3 s parts gave frames 90..269 all at pts_ms 3158. (Fed by a push source, tsdemux joins the parts
// itself; seeking and the duration are worse there, so files stay in pull mode.)
//
// Ingest puts the parts on one timeline at the decoder's input, as ffmpeg does with a demuxer's
// timestamp discontinuities: a frame whose decode time goes back by more than kLeap (and by more than
// 8 frames, for slow video with reordered frames) starts a new part, which is timed on from the end of
// the one before. A jump forward is left alone: a recording's gap is a gap.
//
// A frame without a decode time (Matroska gives none; qtdemux none for an MP4's first frames with
// B-frames, before its edit list's start) is placed by its presentation time, which in decoding order
// goes back at each reordered frame (B-frame) by as much as the video paused before the frame decoded
// ahead of it: far more than kLeap in a time-lapse, or across a motion recording's gap (found 2026-12-07:
// a Matroska file's B-frame after a 1.1 s pause was taken for a new part, its pts_ms moved 1.33 s and
// three frames stamped alike; an MP4 time-lapse lost the frames pushed past its end). H.264 and H.265
// reorder at most 16 frames, so one at least of the kReorderWindow frames before a reordered frame is
// shown before it: such a frame starts a new part only where it is shown before all of those too, and
// a decode time is compared with the decode times before it only.
#pragma once

#include <gst/gst.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>

namespace vapipe {

class JoinedTimeline {
 public:
  static constexpr GstClockTime kLeap = GST_SECOND;
  // Of this many frames before a reordered one in decoding order, one at least is shown before it.
  static constexpr size_t kReorderWindow = 17;

  // The offset to add to this frame's timestamps (0 until a part begins again), frames in decode order.
  // `pts`, `dts` and `duration` are the frame's as the demuxer gave them (any may be GST_CLOCK_TIME_NONE).
  GstClockTimeDiff offset_for(GstClockTime pts, GstClockTime dts, GstClockTime duration);

  // A seek: where it lands is on the file's first timeline as far as anyone knows.
  void reset() { *this = JoinedTimeline(); }

  uint64_t restarts() const { return restarts_; }
  // The latest restart: the time on the one timeline where its part begins, and where it went back to.
  GstClockTime last_joined_at() const { return joined_at_; }
  GstClockTime last_went_back_to() const { return went_back_to_; }

 private:
  GstClockTimeDiff offset_ = 0;
  GstClockTime last_decode_ = GST_CLOCK_TIME_NONE;  // the previous decode time given, as the demuxer gave it
  std::deque<GstClockTime> shown_;                   // the last kReorderWindow presentation times given, this part's
  GstClockTime end_ = GST_CLOCK_TIME_NONE;          // the latest end of a frame so far, offset applied
  GstClockTime frame_ = 0;                          // a frame's duration, as last seen
  uint64_t restarts_ = 0;
  GstClockTime joined_at_ = GST_CLOCK_TIME_NONE;
  GstClockTime went_back_to_ = GST_CLOCK_TIME_NONE;
};

// What a stream's files said of their timelines, for its end's warning; any thread.
struct TimelineRestarts {
  std::atomic<uint64_t> count{0};
  std::atomic<int64_t> first_joined_at_ns{-1};  // the first restart's place on the one timeline
};

// Puts a JoinedTimeline on a decoder's input pad: frames after a restart are retimed (their buffers
// made writable) before anything else on the pad sees them; restarts are counted in `restarts`, which
// must outlive the pad, and the first of a pad's is logged as a warning naming `stream_id`. A flush (a
// seek) starts over on the first timeline. Add it before the pad's other probes. `say_first`: false
// where the restarts are known already (`vapipe segments` reading the file again): nothing is logged.
void join_restarted_timelines(GstPad* decoder_sink, TimelineRestarts* restarts, const std::string& stream_id,
                              bool say_first = true);

// The warning for a stream's end, or "" when its timestamps never started over.
std::string timeline_restarts_warning(const TimelineRestarts& restarts);

}  // namespace vapipe
