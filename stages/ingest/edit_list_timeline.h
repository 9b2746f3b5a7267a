// An MP4's (MOV's, 3GP's) frames on the timeline its edit list gives them: the times players, ffprobe
// and editors show. A file with B-frames starts its video's edit list two frames into its media (x264's
// B-pyramid: its first frame is shown at media time 66.667 ms), and qtdemux plays the edit list through
// its time segment (start 66.667 ms, time 0) while each buffer keeps its media time. Ingest took the
// buffers' times as they were, so such a file's pts_ms began at 66.667 where every player says 0, and
// `streams[].from: 2` began 2 frames early and `to: 4` ended 2 frames early; the same video remuxed to
// Matroska disagreed with it (found 2026-12-07).
//
// Each time segment from qtdemux is put on that timeline before anything downstream sees it: its buffers
// are moved by (segment.start - segment.time) and the segment by as much, so that a buffer's timestamp
// is its time on the edit list's timeline (what `gst_segment_to_stream_time` gives) and its running time
// is unchanged. A decoding time that would fall before 0 (the first frames' with B-frames) is left out:
// put at 0, three frames with one decoding time made the decoder give the second frame the third's
// timestamp. Seeks by time were already on that timeline: the demuxer reads them as edit-list times.
//
// A file trimmed without re-encoding (`ffmpeg -ss 1.3 -c copy`, a phone's or QuickTime's trim) has an
// edit list that starts between two key frames: qtdemux sends the frames from the key frame before its
// start, which the decoder needs for the first frames shown, and a decoder would clip those before the
// segment. On this timeline they would be before 0: they are marked hidden (DECODE_ONLY, and a
// reference-timestamp meta the decoder copies to their pictures) and their pictures are left out after
// the decoder (leave_out_hidden_pictures). Their timestamps, all put at 0, made the decoder invent times
// for their pictures (0, 40, 80 ...) and hold the first frames shown at the last of those (200, 240 x 7):
// the frames after a hidden one in its segment carry their own time in a meta too, which the pictures
// get back (found 2026-12-07: a 67-frame trim gave 75 results, 7 of them at one time).
#pragma once

#include <gst/gst.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

namespace vapipe {

// The offset to take off a time segment's buffers (its start minus its time, either sign), and the
// segment to send instead; nothing for a segment already on that timeline or not in time format.
// When the segment starts into its media (offset > 0), the segment sent ends `offset` later than the
// part shown: the frames before the part shown, all at 0, get pictures the decoder times 0, 40, 80 ...
// itself, and a decoder ends its stream at the first picture past its segment's end, so that a trim
// hiding more than it shows (3 s of a GOP before 2 s shown) gave no picture at all. Frames past the
// part shown (`shown_stop`) are hidden as those before it are (found 2026-12-07).
struct EditListShift {
  GstClockTimeDiff offset = 0;
  GstSegment segment{};
  GstClockTime shown_stop = GST_CLOCK_TIME_NONE;
};
std::optional<EditListShift> edit_list_shift(const GstSegment& segment);

// A timestamp moved back by `offset`: GST_CLOCK_TIME_NONE stays so; one before 0 becomes 0.
GstClockTime shifted_by_edit_list(GstClockTime t, GstClockTimeDiff offset);
// A decoding time moved back by `offset`: one before 0 becomes GST_CLOCK_TIME_NONE.
GstClockTime decoding_time_on_edit_list(GstClockTime dts, GstClockTimeDiff offset);

// What the video's segments said, for the stream's `started` event (edit_list_ms) and for results of
// earlier versions read again (their pts_ms were media times): the latest video segment's offset.
struct EditListOffset {
  std::atomic<int64_t> video_ns{0};
  std::atomic<uint64_t> hidden_frames{0};  // its video's frames before the part shown (decoded, not shown)
};

// Whether a buffer of a time segment whose start is `segment_start` (its media time) is before the part
// its edit list shows: its frame is decoded, not shown.
bool hidden_by_edit_list(GstClockTime pts, GstClockTime segment_start);

// Puts each source pad of a qtdemux on its edit list's timeline; `offset` (may be null) is kept
// up to date with its video pad's.
void put_on_edit_list_timeline(GstElement* qtdemux, std::shared_ptr<EditListOffset> offset);
// The same for each qtdemux that `bin` (a uridecodebin, decodebin or parsebin) adds. Only for files:
// an HLS or DASH stream's fragments are timed by their playlist, not by an edit list.
void put_on_edit_list_timeline_in(GstElement* bin, std::shared_ptr<EditListOffset> offset);
// On a video decoder's source pad, before any other probe there: the pictures of the frames marked
// hidden above are dropped, and those after them get back the time their frame had.
void leave_out_hidden_pictures(GstPad* decoder_src);

}  // namespace vapipe
