// MPEG-PS files whose first frames mpegpsdemux leaves out. GStreamer 1.22's demuxer finds a file's
// first timestamp by looking for a PES packet right after a pack header (and a system header), and
// passes over a pack that has a program stream map (or a DVD's navigation packet) between them: the
// one that opens a file written by GStreamer's mpegpsmux, and each key frame's of Hikvision's
// recordings. The time segment it sends then starts at a later frame, and the decoder, which clips to
// the segment, sends no picture of the frames before it: 21 of a 150-frame H.264 file's, 18 of a
// 60-frame MPEG-2 one's (found 2026-12-06; players show them). They are in the file and reach the
// decoder with their timestamps; only the segment's start is wrong.
//
// Ingest moves the start of such a segment back to the first frame the demuxer gives after it: that of
// the file's start, and that of a seek the demuxer took back to that same start (a seek to 0 goes to
// its first timestamp too). A segment of a seek elsewhere is the seek's and is left alone.
#pragma once

#include <gst/gst.h>

#include <optional>

namespace vapipe {

class PsSegmentStart {
 public:
  // A time segment from the demuxer (the file's first, or a seek's after a flush).
  void on_segment(const GstSegment& segment);
  void on_flush() { awaiting_buffer_ = false; }
  // The first buffer after a segment: the segment to send before it instead, where it starts later
  // than this buffer and at the file's start as the demuxer placed it.
  std::optional<GstSegment> on_buffer(GstClockTime pts);

 private:
  std::optional<GstClockTime> file_start_;  // the start of the demuxer's first time segment
  GstSegment segment_{};
  bool awaiting_buffer_ = false;
};

// Applies PsSegmentStart to each source pad of an mpegpsdemux (before anything downstream sees its
// segment); the corrected segment is pushed, with the original's seqnum, just before the buffer.
void start_ps_segments_at_first_frame(GstElement* mpegpsdemux);
// The same for each mpegpsdemux that `decodebin` (a uridecodebin or decodebin) adds.
void start_ps_segments_at_first_frame_in(GstElement* decodebin);

}  // namespace vapipe
