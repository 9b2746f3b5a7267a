// `vapipe segments`: a job's results as segments, the runs of consecutive frames of a stream with
// the same top-1 label ("ball from 0:01:12.400 to 0:01:31.900"), so that an archive analyst sees where
// in hours of video a class appears without reading each frame's result. Reads the JSON-lines file a
// job writes (publish.jsonl_path), whole or while it grows.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <istream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "pipeline/status.h"

namespace vapipe::cli {

struct Segment {
  std::string stream_id;
  std::string label;
  std::string uri;  // its stream's, from the stream's events in the results ("": none seen)
  // What its stream classified of each frame, as its started (or a reload's changed) event says
  // (streams[].roi, and rotate / mirror in GStreamer's words, "rotate-180"; "": as the file says): what
  // a picture shows.
  std::array<double, 4> roi{0, 0, 1, 1};
  std::string turn;
  double start_ms = -1, end_ms = -1;  // pts_ms of its first and last frame (-1: the decoder gave none)
  // Their capture_unix_ms and camera_unix_ms (-1: not in the results, or the camera's not known).
  double start_capture_ms = -1, end_capture_ms = -1, start_camera_ms = -1, end_camera_ms = -1;
  uint64_t start_seq = 0, end_seq = 0;
  // Where its first and last frames stand among its stream's frames: their seq, or, for a --join of
  // files, their place across the files (what says whether two frames are consecutive).
  uint64_t start_pos = 0, end_pos = 0;
  // A --join's segment: the stream (file) its first, last and best frames are in ("" otherwise).
  // start_seq, end_seq and best_seq are then those frames' numbers in their own stream, start_ms,
  // end_ms and best_ms their times in their own file, and uri the first frame's file.
  std::string start_stream, end_stream, best_stream;
  std::string best_uri;  // the file of its best frame (a --join's segment; "": uri)
  // The size of its file (and of its best frame's, for a --join's) when the job opened it (the
  // `started` event's bytes; -1: not said): a recording replaced or cut since is no longer the one
  // whose frames the results are of.
  int64_t file_bytes = -1, best_file_bytes = -1;
  std::string file_head, best_file_head;  // and the hash of its beginning then (head_hash; "": not said)
  // Their results' pts_ms are media times (results of vapipe before 2026-12-07: no edit_list_ms), which
  // for an MP4 with an edit list are later than its frames' times (edit_list_timeline.h).
  bool pts_media_times = false, best_pts_media_times = false;
  uint64_t frames = 0;
  double score_sum = 0;
  double score_mean() const { return frames ? score_sum / static_cast<double>(frames) : 0.0; }
  // Its best frame: the highest top-1 score of its label (the first of equals): the truck in full view
  // rather than its bumper coming in, for a picture of the segment; of its whole pictures, where it has
  // one (below).
  uint64_t best_seq = 0;
  double best_ms = -1, best_score = -1, best_capture_ms = -1;
  // Of its frames, those whose results say "damaged" (decoded after a packet lost on a camera's
  // network: maybe smeared); its best frame is a whole one where it has any.
  uint64_t damaged_frames = 0;
  bool best_damaged = false;
  // The lost connections of its camera it went on across (--reconnect-grace: the camera back in time
  // with the same label), as the bus's segments count them; `reconnects_before`: its stream's count of
  // those at its first frame.
  uint64_t reconnections = 0;
  uint64_t reconnects_before = 0;
  // The JPEG its live job took as it began (publish.segments_pictures_dir: a `picture` message on
  // segments/<id> of its label, begun within it), where that job wrote it; "": none.
  std::string live_picture;
  // Where the timestamps of the file of its first frame, and of its best frame's, start over (files
  // joined end to end: the stream's eos event's timeline_restart_ms; -1: they do not, or not known).
  // ingest times the frames after it on as one timeline, which a seek by time in the file does not
  // know: those frames cannot be found again.
  double timeline_restart_ms = -1, best_timeline_restart_ms = -1;
};

// --join NAME=PATTERN: a camera recorded as consecutive files (an NVR's hourly export, `ffmpeg -f
// segment`), each file a stream of the job (a glob), read as one stream NAME.
struct JoinedStreams {
  std::string name;
  std::string pattern;  // a shell pattern on stream ids (fnmatch: "cam1-*")
};

// Which frame of a segment stands for it in a picture (vapipe segments --frames, --picture).
enum class SegmentPicture { kFirst, kBest };

struct SegmentOptions {
  uint64_t min_frames = 1;    // shorter runs are left out (a label that flickers for a frame or two)
  // Also join two runs of one label when what came between them (other labels, errors, missing
  // frames) was shorter than min_frames: a classifier's flicker does not cut a segment in two. The
  // joined segment counts only its label's frames; each segment then leaves when the stream's next
  // one of min_frames or more begins (or at the end).
  bool bridge = false;
  std::set<std::string> stream_ids;  // only these streams (--stream, given once for each; empty: all)
  std::set<std::string> labels;      // only segments of these labels (--label, the same way)
  // A frame whose top-1 score is below this belongs to no segment, as an error result (the classifier
  // unsure: a truck that left, the street behind it); 0: every frame's label counts.
  double min_score = 0;
  // Labels with a minimum score of their own (--min-score LABEL=S), over min_score.
  std::map<std::string, double> min_score_by_label;
  double min_score_for(const std::string& label) const {
    auto it = min_score_by_label.find(label);
    return it != min_score_by_label.end() ? it->second : min_score;
  }
  // Segments of each label of a frame's top_k whose score reaches min_score (a multi-label model's:
  // "person" and "smoke" at once), overlapping; a frame without the label ends its run. Else of the
  // top-1 label only, one at a time per stream.
  bool each_label = false;
  // A result that says "damaged" (decoded after a lost packet: maybe a smear) counts as an error result
  // (--skip-damaged, as publish.segments_skip_damaged).
  bool skip_damaged = false;
  // A live camera lost (its `reconnecting` event, or its lane's restart onto a new timeline) whose next
  // frame came within this many seconds (by the event's and the frame's time_unix_ms and
  // capture_unix_ms) does not end its segments: they go on as its labels do
  // (--reconnect-grace, as publish.segments_reconnect_grace_s). 0: the loss ends them.
  double reconnect_grace_s = 0;
  // The streams whose ids match a join's pattern (the first that matches) are its files: their frames
  // are kept until the inputs end, then taken in the order of their camera clock (camera_unix_ms, which
  // streams[].recorded_at gives files) as one stream `name` (`stream_id` selects it by that name), so a
  // run of one label that goes on from a file's last frame into the next file's first frame is one
  // segment. Two files are consecutive when the next begins no more than join_gap_ms after the one
  // before ends; otherwise, or when they overlap by more than that, what lies between them counts as a
  // missing frame (a segment ends there). A file without camera times is an error naming it.
  std::vector<JoinedStreams> joins;
  double join_gap_ms = 2000;
  // Where notes go: files of a join that overlap. Null: nowhere.
  std::function<void(const std::string&)> note;
  // A name given that no result has (--stream, --label, --min-score LABEL=S, a --join's pattern: a
  // typo's), with the names they have: `vapipe segments` says it and exits 1 (a script would take the
  // empty or unfiltered table for an answer). Null: said through `note`, if anywhere.
  std::function<void(const std::string&)> unmatched;
  // Read a live job's pictures of its segments (Segment::live_picture) and the streams' timeline
  // restarts (Segment::timeline_restart_ms) from all of each input before its segments, when it can be
  // read twice (a file; standard input cannot): a picture's message comes a little after its
  // segment's beginning, often after a short segment has ended, and a stream's eos after all of them.
  bool read_events_first = false;
};

// Segments of every stream in `in` (JSON lines {"topic": "results/<id>", "payload": {...}}), per stream
// in the order they end (a join's once the inputs have ended); a label change, an error result, or a
// frame missing in between (`seq` not the next: a live drop) ends a segment. Lines of other topics
// are skipped. A line that is not JSON is an error naming `name` and its line number, except an
// incomplete last line (a file being written), which is left out and counted in `*incomplete_lines`.
Result<std::vector<Segment>> read_segments(std::istream& in, const std::string& name, const SegmentOptions& options,
                                           uint64_t* incomplete_lines = nullptr);
// The same, handing each segment to `on_segment` as soon as it ends (a live job's results read from
// `vapipe sub --with-topic` give a log of label runs as they end); the open ones at the end of `in`.
Status for_each_segment(std::istream& in, const std::string& name, const SegmentOptions& options,
                        const std::function<void(const Segment&)>& on_segment, uint64_t* incomplete_lines = nullptr);
// Several inputs read as one, in order (a live job's results files named by the date: a run that goes
// on past midnight is one segment); each one's errors name it, and each may end in an incomplete line.
struct SegmentInput {
  std::istream* in;
  std::string name;
};
Status for_each_segment(const std::vector<SegmentInput>& inputs, const SegmentOptions& options,
                        const std::function<void(const Segment&)>& on_segment, uint64_t* incomplete_lines = nullptr);

// --csv: a segment as a line of comma-separated values (RFC 4180: a field holding a comma, a quote or
// a line break is quoted, its quotes doubled), for a spreadsheet. `from` and `to` are the table's
// (the clock asked for), `picture` its picture's path ("": none); unknown numbers are empty fields.
std::string segment_csv_header();
std::string segment_csv_row(const Segment& s, const std::string& from, const std::string& to,
                            const std::string& picture);
std::string csv_field(const std::string& text);

// "1:02:03.456" (hours only when there are some); "-" for no timestamp.
std::string media_time_text(double ms);

// A Unix time in milliseconds as this machine's local time, "2026-12-01 14:03:22.125" (TZ decides the
// zone); "-" for none (negative).
std::string clock_time_text(double unix_ms);

}  // namespace vapipe::cli
