// Video clips of a live stream's segments (publish.segments_clips): the camera's compressed frames as
// they came, put in an MP4 without decoding or encoding them (so a clip costs a muxer, not a
// decoder: its frames are the camera's own, at its quality). Publish decides that a segment began
// segments_min_frames results after its first frame; by then those frames, and the pre-roll before
// them, are still kept by the stream's RecentFrames (keep_before). So a clip begins at the key frame
// at or before `pre` ahead of the segment's first frame, takes every compressed frame that follows
// (a tap on the keeper), and ends at the first frame more than `post` after the segment's last (when
// publish says the segment ended), or when the stream ends. A segment longer than `max` goes on in a
// next clip (its part 2, 3, ...: PATH with .2.mp4, .3.mp4), cut at a key frame, so that its parts hold
// every frame once. New caps (another resolution or codec, within a connection) end a part and the clip
// goes on in the next, from the first key frame of the new caps. When the stream's decoder starts over
// (a reconnection: the next connection's timestamps start again) the clip ends there; with
// publish.segments_reconnect_grace_s the part open then ends, and what it says waits for publish: a
// segment held open across the outage that goes on goes on in a next part, from the new connection's
// frames (go_on_after_restart); one that ends there (end(), or the grace ran out) makes it the clip's last.
//
// A clip is written to PATH.part and renamed to PATH once the muxer has written its index (never a
// half file under the clip's name); each clip, written or not, is then taken by take_done() for the
// stream's thread to say (a kStreamClip event).
#pragma once

#include <gst/gst.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "pipeline/message.h"
#include "pipeline/status.h"
#include "stages/ingest/decoding_times.h"
#include "stages/ingest/recent_frames.h"

namespace vapipe {

// Writes compressed frames of one caps to an MP4 (appsrc, the codec's parser, mp4mux, filesink): at
// `path`.part, renamed to `path` by finish(). Frames are given with their timestamps less
// `base_ns` (the clip's first key frame is at 0).
class ClipWriter {
 public:
  // MP4 (mp4mux), or Matroska (matroskamux) for frames that come without decoding times and may be
  // reordered (a Matroska file's B-frames: MP4 needs decoding times, and mp4mux would show such frames
  // in decoding order).
  enum class Container { kMp4, kMatroska };
  // Errors name the codec that the container cannot hold as it is. `turn`: how the frames are shown
  // upright, which an MP4 says in its track's matrix (mp4_orientation.h: players turn them); Matroska
  // has no such field, and its clip is as stored.
  static Result<std::unique_ptr<ClipWriter>> open(const std::string& path, GstCaps* caps,
                                                  Container container = Container::kMp4,
                                                  Orientation turn = Orientation::kAsStored);
  // Where a clip asked for at `path` (.mp4) of frames of `caps` is written: there, or for Motion JPEG,
  // which GStreamer's mp4mux does not take, in a QuickTime file beside it (qtmux; .mov: the same boxes,
  // its turn said the same way), which players that play MJPEG take (VLC, QuickTime, ffmpeg's).
  static std::string path_for(const std::string& path, GstCaps* caps, Container container = Container::kMp4);
  ~ClipWriter();  // unfinished: stopped, and its .part file removed
  ClipWriter(const ClipWriter&) = delete;
  ClipWriter& operator=(const ClipWriter&) = delete;

  // Never blocks (appsrc's queue is unbounded: the muxer only copies). A frame before `base_ns` (an
  // open GOP's leading frame, shown before its key frame) is left out. Frames without decoding times
  // (an RTSP camera's) wait for them, a few frames behind (decoding_times.h), until end_of_stream().
  void push(GstBuffer* buffer, int64_t base_ns);
  // No frame after this one: the muxer finishes its file.
  void end_of_stream();
  // Waits up to `timeout` for the muxer to finish after end_of_stream(), gives an MP4 its turn, then
  // renames the file.
  Status finish(std::chrono::milliseconds timeout);
  uint64_t frames() const { return frames_; }
  // From the file's 0 (the clip's key frame, or its first decoding time when B-frames come first) to
  // the end of its last frame shown, as the file places them.
  int64_t duration_ns() const { return duration_ns_; }
  // Its muxer or file failed (a codec it refused, a full disk): nothing more is worth giving it.
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  // What waits for the muxer and the file: more than a few seconds of video when the clips' folder
  // does not take them as fast as they come (a share that stalls).
  uint64_t queued_bytes() const;
  // The caps it was opened with (a new reference).
  GstCaps* caps() const;
  static constexpr uint64_t kMostQueuedBytes = 64u << 20;

 private:
  ClipWriter(std::string path, GstElement* pipeline, GstElement* src, Container container, Orientation turn);
  void push_decided(int64_t base_ns);  // the frames waiting whose decoding times are decided
  void place(GstBuffer* buffer, int64_t pts, int64_t dts, bool has_dts, int64_t duration, int64_t base_ns);  // to the muxer
  std::string path_, part_;
  GstElement* pipeline_ = nullptr;
  GstElement* src_ = nullptr;
  Container container_;
  Orientation turn_;
  uint64_t frames_ = 0;
  int64_t latest_pts_ = -1, last_duration_ = 0;  // the latest presentation time given, the last duration
  static constexpr int64_t kNoOrigin = INT64_MIN;
  int64_t origin_ns_ = kNoOrigin;                 // the stream time at the file's 0 (before its first frame: none)
  int64_t base_ns_ = 0;                           // push()'s, for the frames still waiting at end_of_stream()
  int64_t duration_ns_ = 0;
  DecodingTimes decoding_times_;  // frames without decoding times, to an MP4
  // Its first frame came without a decoding time: every frame's is worked out, as the first frames of
  // an MP4 with B-frames have none (edit_list_timeline.h) and those after them do.
  bool decoding_times_worked_out_ = false;
  std::deque<GstBuffer*> waiting_;  // refs: those frames, until their decoding times are decided
  bool finished_ = false;
  std::atomic<bool> failed_{false};
};

struct ClipOrder {
  uint32_t stream_index = 0;  // the stream that asked (the reader's, or a member of its source group)
  std::string stream_id;
  std::string label;
  uint64_t segment_start_seq = 0;
  std::string path;            // the MP4's
  int64_t first_pts_ns = -1;   // the segment's first frame's timestamp
  // How the stream's frames are shown upright (as the segment's first frame was sent): the MP4 says it,
  // so that a player shows the clip as the segment's picture is.
  Orientation turn = Orientation::kAsStored;
};

struct ClipDone {
  ClipOrder order;             // its path the part's
  bool written = false;
  std::string message;        // not written: why; written: why it ended early ("" when it did not)
  int64_t start_pts_ns = -1;  // the clip's first frame's timestamp (the stream's time)
  int64_t duration_ns = 0;
  uint64_t frames = 0;
  uint32_t part = 1;          // of its segment's clips: 1, then 2, 3, ... past `max`
  bool continues = false;     // the segment's video goes on in its next part
};

// The clips a stream's earlier ingest left unwritten (it crashed, or was killed, while writing them):
// DIR/<stream>/<day>/*.part and their *.part.frames, removed; their paths. Only the ingest that reads
// the stream writes its clips, so at its start none of these is being written.
std::vector<std::string> remove_unfinished_clips(const std::string& pictures_dir, const std::string& stream_id);

class ClipRecorder {
 public:
  struct Options {
    std::chrono::nanoseconds pre{std::chrono::seconds(5)};
    std::chrono::nanoseconds post{std::chrono::seconds(5)};
    std::chrono::nanoseconds max{std::chrono::seconds(300)};
    // publish.segments_reconnect_grace_s above 0: publish may hold a segment across a reconnection, so
    // a part cut by a new decoder waits to be told whether its clip goes on; else it is the last at once.
    bool hold_across_reconnections = false;
  };
  ClipRecorder(std::string stream_id, RecentFrames* recent, Options options);
  ~ClipRecorder();  // close(0)
  ClipRecorder(const ClipRecorder&) = delete;
  ClipRecorder& operator=(const ClipRecorder&) = delete;

  // From any thread. A clip that cannot begin (nothing kept: a test:// source, a stream that has just
  // connected; a codec an MP4 does not hold) is done at once, not written, saying why.
  void start(ClipOrder order);
  // The segment ended with its frame at `last_pts_ns`: its clip ends `post` later (or, waiting across a
  // restart, its last part is the one before it). From any thread.
  void end(const std::string& stream_id, const std::string& label, uint64_t segment_start_seq, int64_t last_pts_ns);
  // The segment went on after the stream's decoder started over (a camera back within the reconnect
  // grace), with its frame at `pts_ns`: its clip goes on in a next part, from the new connection's key
  // frame at or before `pre` ahead of it (its frames kept since), and the part before says it continues.
  // A clip not waiting across a restart is left as it is. From any thread.
  void go_on_after_restart(const std::string& stream_id, const std::string& label, uint64_t segment_start_seq,
                           int64_t pts_ns);
  // publish started again after a crash, at `before_unix_ns`: it no longer follows the segments it
  // had begun, and would never end their clips; each clip begun before then ends at its next frame.
  void end_clips_before(int64_t before_unix_ns);
  // Waits until the next parts asked for (past `max`, or after new caps) are open or could not be;
  // false: not within `timeout`. (For tests: a part is opened off the stream's thread and taken at a
  // key frame after.)
  bool wait_next_parts_open(std::chrono::milliseconds timeout);
  // A reload changed publish.segments_reconnect_grace_s (Options::hold_across_reconnections): for the
  // next reconnection.
  void set_hold_across_reconnections(bool hold) { hold_.store(hold, std::memory_order_relaxed); }
  // Clips done (written or not) since the last call, in the order they were done.
  std::vector<ClipDone> take_done();
  bool has_done() const { return done_waiting_.load(std::memory_order_acquire); }
  // The stream ends: each clip still open ends at its last frame taken (`why`), and those being
  // finished are waited for up to `wait`; any left then is not written.
  void close(std::chrono::milliseconds wait, const std::string& why);

 private:
  struct Clip;
  // A part cut by new caps or a new decoder, until it is known whether its clip goes on in a next part
  // (then it `continues`) or ends with it: decided by go_on or release_waiting, under its clip's lock;
  // the part's ClipDone, once written, waits here for it.
  struct PartWait {
    bool decided = false;
    bool continues = false;
    std::string more;  // added to its message
    std::optional<ClipDone> done;
    // The stream changed again (or reconnected again) before the part that went on had its first
    // frame: that part was dropped, not said (it would be a file of nothing); said, not written, only
    // if the clip ends here instead of going on once more.
    std::optional<ClipDone> if_ends;
  };
  // A part taken no more frames, for the finisher: its own writer and what its ClipDone says.
  struct Part {
    ClipDone done;
    std::unique_ptr<ClipWriter> writer;
    // Cut by new caps or a new decoder: its clip and its wait (said once decided).
    std::shared_ptr<Clip> waits_in;
    std::shared_ptr<PartWait> wait;
  };
  // A clip's next part to open, for the finisher (ClipWriter::open makes a file and starts a muxer).
  struct NextPart {
    std::weak_ptr<Clip> clip;
    std::string path;
    CapsRef caps;
    Orientation turn;
  };
  using Key = std::tuple<std::string, std::string, uint64_t>;  // stream, label, segment_start_seq
  bool tap(const std::shared_ptr<Clip>& clip, GstBuffer* buffer, RecentFrames::StartOver why);  // under the keeper's lock
  // The clip's current part goes to the finisher (under clip->mutex); `continues`: a next part
  // follows, the clip stays open.
  void finish_part(Clip& clip, const std::string& why, bool continues, std::shared_ptr<Clip> waits_in = nullptr);
  // The part waiting across a restart is the clip's last (`more`: added to its message) or not; the
  // clip ends when it is (under clip.mutex).
  void release_waiting(const std::shared_ptr<Clip>& clip, bool continues, const std::string& more = "");
  // A clip waiting after its part was cut goes on in its next part: from the key frame at or before
  // `from_pts_ns` of the frames kept now, or (from_next_frames, after new caps) from the first key frame
  // that comes when none is kept yet. Or, when it cannot, the part before is its last.
  void go_on(const std::shared_ptr<Clip>& clip, int64_t from_pts_ns, bool from_next_frames);
  void finish_later(const std::shared_ptr<Clip>& clip, const std::string& why);  // under clip->mutex
  void open_next_part(const std::shared_ptr<Clip>& clip);                         // under clip->mutex
  void done(ClipDone d);
  void run_finisher();

  const std::string stream_id_;
  RecentFrames* const recent_;
  const Options options_;
  std::atomic<bool> hold_;  // options_.hold_across_reconnections, as reloads leave it
  std::atomic<uint64_t> next_id_{1};
  std::mutex start_close_mutex_;  // taken first, alone or before the others
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<Key, std::shared_ptr<Clip>> open_;
  std::deque<Part> finishing_;
  std::deque<NextPart> opening_;
  std::deque<std::shared_ptr<Clip>> going_on_;  // cut by new caps: to go on (go_on), by the finisher
  size_t opening_now_ = 0;
  size_t finishing_now_ = 0;
  bool closed_ = false;
  std::vector<ClipDone> done_;
  std::atomic<bool> done_waiting_{false};
  std::thread finisher_;
};

}  // namespace vapipe
