// One input stream: a GStreamer pipeline (uridecodebin for files and network URIs, videotestsrc for
// test:// URIs) ending in an appsink. Decoded frames pass a bounded queue with the job's policy
// (block: back-pressure reaches the decoder; drop_oldest: latency stays bounded and drops are
// counted), then are copied once into a payload buffer (a shared memory slot, host or GPU) and emitted.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "pipeline/config.h"
#include "pipeline/placement.h"
#include "pipeline/seq_reservation.h"
#include "pipeline/signals.h"
#include "pipeline/stage.h"
#include "pipeline/stage_watchdog.h"
#include "stages/ingest/clip_recorder.h"

namespace vapipe {

struct ReaderOptions {
  // nvdec: nvcodec decoders ranked first and their output kept in CUDA memory of `gpu` (copied device
  // to device into a device pool slot, or downloaded into a host one). A codec NVDEC lacks, or a
  // machine where the CUDA context cannot be had, decodes on the CPU (logged once).
  Decoder decoder = Decoder::kCpu;
  int gpu = -1;
  // Tests: build nvdec's pipeline shape even where no CUDA context can be had (no GPU), so that the
  // software-decoder path of that shape runs here.
  bool nvdec_shape_without_cuda = false;
  // The frame pool's slot size (transport.frame_slot_bytes; 0: frames are not pooled, no limit).
  // Frames in host memory that are larger (a 4K camera with the default slots) are scaled down to fit,
  // their shape kept, and said once per stream and size; NVDEC frames in GPU memory are not scaled:
  // such a stream ends with an error naming the key and the size it needs.
  size_t max_frame_bytes = 0;
  // Threads for a CPU decoder (libav's max-threads, libvpx's threads, dav1d's n-threads); 0: the
  // decoder's own default (one per CPU). ingest works it out (decoder_threads_per_stream, placement.h).
  uint32_t decoder_threads = 0;
  // Live mode: a network stream is watched for stalls (ingest.stall_timeout_s) and, with
  // ingest.reconnect, reconnected when it fails, ends or stalls. Archive mode: a file with no frame
  // for 3 x stall_timeout_s is said once (its read has not returned: a share that hangs).
  bool live = false;
  // --resume: frames 0 .. skip_frames-1 have results from an earlier run, and numbering goes on from
  // skip_frames. With resume_after_pts_ns (the timestamp of frame skip_frames-1, when the kept
  // timestamps rose strictly), a file is sought there (accurately) and frames up to that timestamp
  // are dropped; otherwise, or if the seek fails, they are decoded and dropped by count.
  uint64_t skip_frames = 0;
  int64_t resume_after_pts_ns = -1;
  // That timestamp is a media time (results of vapipe before 2026-12-07): an MP4's edit list's offset
  // is taken off it (edit_list_timeline.h), so that the same frames are dropped.
  bool resume_pts_media_times = false;
  // A live job's lane restarted after a crash (pipeline/supervisor.h): numbering starts at first_seq
  // (the reserved mark, pipeline/seq_reservation.h), and with a restart_reason the stream was running
  // before: it says kStreamReconnecting (attempt 0, the reason) at once and kStreamResumed (attempt 0)
  // before its first frame, instead of kStreamStart.
  uint64_t first_seq = 0;
  std::string restart_reason = "";
  // With a restart_reason, a file: the timestamp of its last frame the crashed instance sent
  // (SeqReservations::last_sent). The file is sought to a keyframe before it and frames up to it are
  // dropped by timestamp, numbered from first_seq on; -1: read from its start (streams[].from).
  int64_t resume_after_sent_pts_ns = -1;
  // The message of its kStreamStart event: why a stream that had ended starts again (a reload brought
  // it back; numbered from first_seq); "" for a first start.
  std::string start_message = "";
  // Where each frame's number is reserved before the frame leaves (live jobs); null: nowhere.
  SeqReservations* seq_reservations = nullptr;
  // Watches the reader's pipeline state changes (stages/ingest/watched_state_change.h) and each
  // decoded frame's copy; null: none. Made on, and watching, the thread that runs the reader, and
  // given to its emitter too (whose waits for slots and room downstream pause it).
  StageWatchdog* watchdog = nullptr;
  // A file in which no video stream is found in this long after it started, with no error said, ends
  // with one (decodebin can drop a demuxer's error; nothing else would end the stream).
  std::chrono::milliseconds file_open_timeout{60'000};
  // publish.segments_pictures_dir (live jobs): how many of its last frames sent a picture can be asked
  // of (publish.segments_min_frames; their compressed frames are kept, recent_frames.h); 0: none kept,
  // every picture is of the next frame.
  uint32_t picture_frames_back = 0;
  // publish.segments_clips (with picture_frames_back): clips of segments, their compressed frames
  // kept `clip_options.pre` further back (clip_recorder.h).
  bool clips = false;
  ClipRecorder::Options clip_options{};
};

// A picture for a segment (publish.segments_pictures_dir), for the stream `stream_index` (the reader's
// own, or a stream of its `source` group) with that stream's region: of the frame sent with timestamp
// `frame_pts_ns` while the reader still keeps it (ReaderOptions::picture_frames_back), else of the next
// frame it decodes.
struct PictureOrder {
  uint32_t stream_index = 0;
  std::string stream_id;
  std::array<double, 4> roi{0, 0, 1, 1};
  std::string label;               // the segment's, said back in the picture event
  uint64_t segment_start_seq = 0;
  std::string path;
  int64_t frame_pts_ns = -1;  // -1: the next frame's
};

// An RTSP camera's RTP packets (StreamReader::rtp_packets).
struct RtpPackets {
  uint64_t lost = 0;
  uint64_t received = 0;
};

class StreamReader {
 public:
  // Builds the GStreamer pipeline (not started). Errors name the stream.
  static Result<std::unique_ptr<StreamReader>> create(const StreamConfig& stream, uint32_t stream_index,
                                                      const IngestConfig& ingest, ReaderOptions options = {});
  ~StreamReader();
  StreamReader(const StreamReader&) = delete;
  StreamReader& operator=(const StreamReader&) = delete;

  // Takes the pipeline to PAUSED without waiting: sources open (an RTSP session is set up), decoders
  // start (NVDEC's take seconds) and a file's first frame is decoded, while nothing reaches the queue
  // (appsink hands samples over only when playing). A failure surfaces in run(), from the bus.
  void preroll();
  // After preroll(): true once the pipeline is paused with its first frame decoded (or, for a live
  // source, which does not preroll, paused); false on a failure or after `timeout`.
  bool wait_prerolled(std::chrono::milliseconds timeout);

  // Plays the stream to its end (from PAUSED after preroll()). Emits kStreamStart before the first
  // frame, then the frames, then kStreamEnd (end-of-stream, or "stopped" after `flags.stop`) or
  // kStreamError. A live network stream that fails, ends or stalls is reconnected instead (see
  // ReaderOptions::live): kStreamReconnecting for each attempt, kStreamResumed before the first frame
  // of the new connection; sequence numbers go on from where they were. Returns an error only if
  // `out` failed (the downstream is gone).
  Status run(Emitter& out, const ShutdownFlags& flags);
  // Ends this stream alone, from any thread, as after flags.stop: what was decoded goes out, then
  // kStreamEnd with `reason` as its message (e.g. "removed from the config").
  void stop(std::string reason);
  // From any thread: a reload changed settings of this stream that its connection was made with
  // (pipeline/stream_table.h: its uri, TLS trust; its id stays). What
  // was decoded goes out, the connection ends, and the next is made at once with `settings` (a stream
  // waiting to reconnect tries them now): a kStreamChanged event (its message says `what` changed; its
  // roi and turn the new ones), a kStreamReconnecting event that says so too, then kStreamResumed at the
  // new connection's first frame; numbering goes on. Not for files (they would start over).
  void reconfigure(StreamConfig settings, std::string what);
  // From any thread: a reload changed how this stream samples, buffers or is turned (its max_fps,
  // keyframes_only and rtsp_latency_ms in `settings`, falling back on `ingest`'s, and its rotate/mirror):
  // taken while the connection goes on, with a kStreamChanged event (its message says `what` changed;
  // its turn the new one) before the next frame kept under them. The next frame kept is the first at or
  // after the new period's next multiple past the last one kept, and is turned as `settings` say (with
  // none, as its file's image-orientation tag says, ingest.orientation: upright); keyframes_only turned
  // off decodes again from the next key frame; an RTSP camera's jitter buffer takes the new latency at
  // once (jitter_buffer_ms()). A file's stream takes them too (nothing is read again).
  void retune(const StreamConfig& settings, const IngestConfig& ingest, std::string what);
  // From any thread: a reload changed the job's ingest settings (pipeline/ingest_reload.h). How the
  // stream is reconnected (reconnect, its delays and attempts, stall_timeout_s) is taken at once: the
  // next attempt, the wait under way (it lasts the new delay, counted from its start), the
  // next look for a stall; with no attempts left under the new count, or `reconnect: false`, it ends
  // now. Its sampling and jitter buffer defaults (max_fps, keyframes_only, rtsp_latency_ms) are taken
  // by retune() and reconfigure() when the stream samples or decodes with them.
  void set_ingest(const IngestConfig& ingest);
  // From any thread: a picture written at order.path (upright, its region) and said by a
  // kStreamPicture event whose envelope is the pictured frame's. Of the frame at order.frame_pts_ns
  // when it is still kept: decoded again on the reader's picture thread, said at the reader's next
  // frame or idle moment (before its end). Otherwise of the next frame that goes out, said right after
  // it. At most 16 wait of each kind; more are refused (logged). Orders still waiting when the stream
  // ends are said in the log.
  void take_picture(PictureOrder order);
  // From any thread: a clip of a segment (publish.segments_clips), said by a kStreamClip event once
  // written (or why not), at the reader's next frame or idle moment, or before its end. end_clip: the
  // segment ended with its frame at `last_pts_ns`.
  void start_clip(ClipOrder order);
  void end_clip(const std::string& stream_id, const std::string& label, uint64_t segment_start_seq,
                int64_t last_pts_ns);
  // The segment went on across a reconnection with its frame at `pts_ns`: its clip goes on in a next
  // part (ClipRecorder::go_on_after_restart).
  void go_on_clip(const std::string& stream_id, const std::string& label, uint64_t segment_start_seq, int64_t pts_ns);
  // A reload changed publish.segments_reconnect_grace_s (ClipRecorder::set_hold_across_reconnections).
  void hold_clips_across_reconnections(bool hold);
  // publish started again: the clips begun before `before_unix_ns` end (ClipRecorder::end_clips_before).
  void end_clips_before(int64_t before_unix_ns);

  const std::string& stream_id() const;
  // Frames its decoder gave so far (numbered or not: those left out or dropped count too); any thread.
  uint64_t decoded() const;
  // Frames that arrived in CUDA memory (NVDEC) so far, and in host memory.
  uint64_t device_frames() const;
  uint64_t host_frames() const;
  // Frames the stream's queue has dropped so far (live mode's drop_oldest); any thread.
  uint64_t dropped() const;
  // Frames left out so far by ingest.max_fps (decoded), ingest.keyframes_only (not decoded) and the
  // decoder gate (decoder_input_gate.h: before a connection's first key frame, or partial pictures after
  // a recovery point); any thread.
  uint64_t left_out() const;
  // MPEG-TS continuity errors on the video's packets so far (lost or damaged packets), as its bus said
  // them: at a file's end, and once a second while a stream's frames come.
  uint64_t continuity_errors() const;
  // Frames its decoders took and gave no picture for, counted as later pictures came out (damaged or
  // incomplete frames: a camera's lost packets, a file's damage); any thread.
  uint64_t undecoded_frames() const;
  // An RTSP camera's RTP packets so far, all its connections: lost on the network (its jitter buffers'
  // count of sequence numbers that never came) and received; any thread.
  RtpPackets rtp_packets() const;
  // The threads its CPU decoder was given (ReaderOptions::decoder_threads), read back from the decoder;
  // 0 until a decoder that takes a thread count has been made (NVDEC takes none).
  uint32_t decoder_threads() const;
  // The RTSP jitter buffer's latency (ms): as the connection was made with, or as read back from the
  // jitter buffer once retune() set it; -1 before the first RTSP connection (or for another source). Any
  // thread.
  int32_t jitter_buffer_ms() const;

  struct Impl;

 private:
  explicit StreamReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Gives the heap memory freed by finished threads back to the system (malloc_trim). A rebuilt
// pipeline (a reconnection) or a removed stream leaves it in glibc's per-thread arenas otherwise.
void release_freed_heap_memory();

// The wait before reconnection attempt `attempt` (from 1): reconnect_delay_s, doubled for each
// attempt after the first, at most reconnect_max_delay_s.
double reconnect_delay_s(const IngestConfig& ingest, uint32_t attempt);

// What to tell the operator when a camera's clock (camera_unix_ms) is this far behind this machine's
// at a frame's capture (capture minus camera, in ns; a few seconds of that are network and decoding):
// nothing under 5 s, else by how much and what to do. Said once per stream.
std::optional<std::string> camera_clock_offset_note(int64_t capture_minus_camera_ns);

// gst_init, once per process; false (with the reason logged) if GStreamer cannot start.
bool ensure_gstreamer();

// For a network URI whose scheme no GStreamer source here reads ("rstp://", a typo; "rtmp://" without
// its plug-in): what to say, with the scheme it probably meant ("no GStreamer source here reads
// rstp:// URIs (did you mean rtsp://?)"). Empty when a source reads it, or GStreamer cannot start.
std::string unreadable_uri_scheme(const std::string& uri);

}  // namespace vapipe
