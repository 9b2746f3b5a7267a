// What a stream's reader keeps of its recent frames, for the picture of a live segment's best or first
// frame (publish.segments_pictures_dir). Publish decides that a segment began segments_min_frames
// results after its first frame, when that frame and the best of those it began with have long left
// ingest's frame pool. Holding decoded frames that long would cost every stream its frames' memory
// (90 MB a second of 1080p); their compressed frames cost about a hundredth of that, and GStreamer's
// buffers are kept by reference, not copied. So a reader whose stream has pictures keeps:
// - the compressed frames that went into its decoder, from a key frame on (decode order), and
// - the envelope of each frame it sent (seq, timestamps, how it is turned),
// as far back as its last `frames_back` frames sent (10,000 at most), and `in_flight` more of their
// timestamps (the results still on their way to publish when it asks). A picture of a frame still kept is decoded
// again, from the key frame before it to it (decode_kept_frame), off the stream's thread.
//
// A frame is known by its timestamp (the decoder's output keeps its input's); an untimed stream's
// frames (an MJPEG camera over HTTP, stamped as they arrive) are never found, nor a frame of an earlier
// connection (each new decoder starts the keeping over): those pictures are of the next frame instead.
#pragma once

#include <gst/gst.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/message.h"
#include "pipeline/status.h"

namespace vapipe {

struct GstBufferUnref {
  void operator()(GstBuffer* b) const { gst_buffer_unref(b); }
};
struct GstCapsUnref {
  void operator()(GstCaps* c) const { gst_caps_unref(c); }
};
using BufferRef = std::unique_ptr<GstBuffer, GstBufferUnref>;
using CapsRef = std::unique_ptr<GstCaps, GstCapsUnref>;

class RecentFrames {
 public:
  // A compressed run of one caps that a stream's GOP longer than this cannot fill is dropped whole (a
  // stream with no key frame for minutes keeps nothing); a longer run is cut back one GOP at a time.
  static constexpr size_t kDefaultMaxBytes = 64u << 20;
  static constexpr std::chrono::nanoseconds kDefaultInFlight = std::chrono::seconds(5);

  struct Sent {
    Envelope env;
    Orientation turn = Orientation::kAsStored;
  };
  // A kept frame: what was sent of it, and the compressed frames that decode it (the key frame before
  // it first, it last).
  struct Kept {
    Sent sent;
    CapsRef caps;
    std::vector<BufferRef> compressed;
  };

  // keep_before: compressed frames are kept that much further back than the oldest sent frame kept
  // (publish.segments_clips: a clip begins segments_clip_pre_s before its segment's first frame).
  explicit RecentFrames(uint32_t frames_back, std::chrono::nanoseconds in_flight = kDefaultInFlight,
                        size_t max_bytes = kDefaultMaxBytes, std::chrono::nanoseconds keep_before = {})
      : frames_back_(frames_back), in_flight_ns_(in_flight.count()), max_bytes_(max_bytes),
        keep_before_ns_(keep_before.count()) {}

  // The decoder's input (its streaming thread). A new decoder (a new connection, whose timestamps
  // start again) or new caps (another resolution, another codec) start the keeping over.
  void new_decoder();
  void set_caps(GstCaps* caps);
  void add_compressed(GstBuffer* buffer);

  // The stream's thread, for each frame it sends (in order).
  void add_sent(const Envelope& env, Orientation turn);
  // The stream's own thread, before a new connection: what was sent is of the old one.
  void forget_sent();

  // The frame sent with this timestamp, if it and the compressed frames that decode it are still kept:
  // from the key frame before it, or (key_frames_back 1) from the key frame before that one. A frame
  // after a recovery point (an intra-refresh camera's "key frames") is whole only once the refresh it
  // began is over, and an H.265 open GOP's leading B-frames refer to the GOP before: such a frame decodes from
  // the earlier key frame. One GOP more than the frames asked for need is kept for it.
  std::optional<Kept> find(int64_t pts_ns, unsigned key_frames_back = 0) const;
  // How the frame sent with this timestamp was turned, while it is remembered (its compressed frames
  // kept or not): a clip's is its segment's first frame's.
  std::optional<Orientation> turn_sent(int64_t pts_ns) const;

  // A clip's tap (publish.segments_clips, clip_recorder.h): given each compressed frame the decoder
  // takes, in decode order, under the keeper's lock (so it must not call the keeper), with kNo; nullptr
  // when the keeping starts over, with why: a new decoder (a new connection, whose timestamps start
  // again) or new caps (another resolution or codec within one); it is then removed. It returns false
  // to be removed.
  enum class StartOver { kNo, kNewDecoder, kNewCaps };
  using Tap = std::function<bool(GstBuffer* buffer, StartOver why)>;
  // Adds a tap that is first given the compressed frames kept from the key frame at or before
  // `from_pts_ns` (the first kept, when it is later than that), then each that follows: none missed,
  // none twice. `make` gets the caps of the frames, before any is given, and returns the tap (empty:
  // none added). False: nothing is kept to begin from (make not called); with `or_next_frames`, a tap is
  // added when caps are known and nothing is kept yet (just after new caps), given the frames to come.
  // `in_decoder`: only while the keeper is that decoder's (decoder()), else false (make not called).
  bool add_tap(uint64_t id, int64_t from_pts_ns, const std::function<Tap(GstCaps* caps)>& make,
               bool or_next_frames = false, std::optional<uint64_t> in_decoder = std::nullopt);
  // Which decoder's frames are kept: 0 for the first, then one more at each new_decoder().
  uint64_t decoder() const;
  // The caps of the frames kept now (a new reference; null: none yet): what a tap's writer is opened
  // for before add_tap, so that no file is opened under the keeper's lock.
  CapsRef caps() const;
  void remove_tap(uint64_t id);

  // For the log and tests.
  size_t compressed_bytes() const;
  size_t compressed_frames() const;
  size_t sent_frames() const;

 private:
  struct Compressed {
    BufferRef buffer;
    int64_t pts;  // -1: none
    bool key;
    size_t bytes;
  };
  void drop_front(size_t count);
  void end_taps(StartOver why);  // under the lock
  void prune_compressed();

  const uint32_t frames_back_;
  const int64_t in_flight_ns_;
  const size_t max_bytes_;
  const int64_t keep_before_ns_;
  mutable std::mutex mutex_;
  std::map<uint64_t, Tap> taps_;
  uint64_t decoders_ = 0;  // new_decoder() calls
  CapsRef caps_;
  bool intra_only_ = false;  // caps_ of a codec whose every frame is a key frame (Motion JPEG, ...)
  std::deque<Compressed> compressed_;
  size_t bytes_ = 0;
  std::deque<Sent> sent_;
  // The earliest timestamp a picture can still ask for (the oldest sent frame kept); -1: none sent yet.
  int64_t keep_from_ns_ = -1;
};

// Keeps what reaches a decoder's input pad `decoder_sink` in `recent` (caps, buffers, buffer lists),
// after what the pad's earlier probes dropped (decoder_input_gate.h). `recent` must outlive the pad's
// data flow (the pipeline stopped).
void keep_decoder_input(GstPad* decoder_sink, RecentFrames* recent);

// Decodes a kept frame again (a short pipeline of its own: appsrc, decodebin, videoconvert; a decoder
// of one thread), from its key frame to it, two at most at once in a process (a quarter of the CPUs
// on a larger machine; the others wait their turn): the frame as an I420 sample in host memory (a new reference). An error says why
// (the decoder gave no picture of that timestamp: a frame after a recovery point that is not whole yet,
// say).
Result<GstSample*> decode_kept_frame(const RecentFrames::Kept& kept);

// The first error message on a pipeline's bus ("" none); the others are dropped with it.
std::string first_bus_error(GstElement* pipeline);

// Several kept frames that share their key frame (share_key_frame: the streams of a `source` group, or
// labels whose segments began together, asking at once), decoded in one pass: each its frame or why
// not, in their order.
bool share_key_frame(const RecentFrames::Kept& a, const RecentFrames::Kept& b);
std::vector<Result<GstSample*>> decode_kept_frames(const std::vector<const RecentFrames::Kept*>& kept);

}  // namespace vapipe
