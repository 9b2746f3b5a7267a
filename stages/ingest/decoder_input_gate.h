// Which compressed frames reach a stream's video decoder (ingest), and which of its pictures leave it:
// nothing before the stream's first key frame, and with ingest.keyframes_only nothing but key frames.
// One gate per decoder, that is per GStreamer pipeline: each connection and reconnection of a camera
// waits for its own key frame.
//
// Why wait: a camera stream joined between two key frames (the usual case for a stream that another
// client already watches, and for every reconnection) decodes into smears until the next key frame,
// and a classifier labels smears with confidence. A delta unit is dropped even when it carries the
// codec's headers too (an encoder's SPS/PPS repeated in front of a P-frame): decoded, it is a smear;
// the headers the decoder needs come in the caps or with the key frames. A stream whose parser marks
// no key frame in kMaxWait frames is trusted from there.
//
// Key frame or recovery point: the parsers mark both "not a delta unit". A stream refreshed by intra
// slices (intra refresh: no key frame after its first) marks each refresh's recovery point, a P-frame
// whose picture is whole only some frames later; an open GOP (H.264) marks its I-frames, whose leading
// B-frames need the GOP before (h26x_access_unit.h tells them from IDR/IRAP frames). A camera joined at
// one is decoded from there, and the decoder's pictures are held back until the recovery SEI says they
// are whole (libav holds them back itself; NVDEC's decoders need not). keyframes_only decodes IDR/IRAP
// frames only: a recovery point decoded alone is a smear, and libav fed open-GOP I-frames alone sends
// pictures it invented for the frames between them.
//
// An intra-only codec (Motion JPEG, PNG, ProRes, DV, FFV1, ...) has no delta units: each of its frames is
// a key frame, whatever the container's index says. Some files mark them all "not key" (an AVI or MKV
// written without key-frame flags: GStreamer's pngenc into avimux does), which a gate that believed them
// would drop whole, and keyframes_only would drop every frame of.
#pragma once

#include <gst/gst.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

namespace vapipe {

class DecoderInputGate {
 public:
  static constexpr uint64_t kMaxWait = 300;

  enum class Frame {
    kKey,            // decodable alone
    kRecoveryPoint,  // the parser says key frame; the NAL units say not IDR/IRAP (intra refresh, open GOP)
    kDelta,          // the parser marked it a delta unit
  };
  enum class Verdict {
    kPass,
    kBeforeKeyFrame,         // dropped: no key frame yet
    kNotKeyFrame,            // dropped: keyframes_only
    kRecoveryPointNotWhole,  // dropped: keyframes_only, and a recovery point is not decoded alone
    kPassAfterWaiting,       // passed: kMaxWait frames without a key frame; the wait is over (say so once)
    kPassFromRecoveryPoint,  // passed: the wait ends at a recovery point; its pictures are whole later
  };

  explicit DecoderInputGate(bool keyframes_only) : keyframes_only_(keyframes_only) {}

  // A reload changed keyframes_only while the connection runs. On: only key frames from the next frame.
  // Off: the frames after the last key frame passed reference frames the decoder never had, so it waits
  // for the next key frame (or recovery point) as a new connection does, then passes everything.
  void set_keyframes_only(bool on) {
    if (on == keyframes_only_) return;
    keyframes_only_ = on;
    if (!on) {
      started_ = false;
      waited_ = 0;
    }
  }
  bool keyframes_only() const { return keyframes_only_; }

  // A flush (a seek): the decoder drops what it held and decodes from a key frame again. A demuxer
  // that does not place a seek on a key frame (MPEG-PS, MPEG-TS) sends the frames before the next one,
  // which give no picture: they are waited past, as a new connection's are, not counted as lost.
  void restart() {
    started_ = false;
    waited_ = 0;
  }

  // Whether admit() still tells frames apart: not once a connection has started, unless keyframes_only
  // (then a frame's NAL units need not be read: an all-intra stream marks every frame a key frame).
  bool tells_frames_apart() const { return keyframes_only_ || !started_; }

  Verdict admit(Frame frame) {
    if (keyframes_only_) {
      if (frame == Frame::kKey) return Verdict::kPass;
      return frame == Frame::kRecoveryPoint ? Verdict::kRecoveryPointNotWhole : Verdict::kNotKeyFrame;
    }
    if (started_) return Verdict::kPass;
    if (frame != Frame::kDelta) {
      started_ = true;
      return frame == Frame::kKey ? Verdict::kPass : Verdict::kPassFromRecoveryPoint;
    }
    if (waited_ >= kMaxWait) {
      started_ = true;
      return Verdict::kPassAfterWaiting;
    }
    ++waited_;
    return Verdict::kBeforeKeyFrame;
  }

 private:
  bool keyframes_only_;
  bool started_ = false;
  uint64_t waited_ = 0;
};

// The decoder's pictures from a recovery point on are partial until its recovery count of frames
// later: which of them leave the decoder. Input side: start() at the recovery point, input() for each
// later frame; output side: admit_output() for each picture. Until the count's last frame has gone in,
// no picture leaves; then those before its timestamp (the latest of the frames counted, to be safe
// with reordered frames) are held back too. A decoder that held them back itself loses nothing more.
class RecoveryWatch {
 public:
  // The most frames it waits for: a larger count is not believed.
  static constexpr uint32_t kMaxFrames = 300;

  void start(GstClockTime pts, uint32_t frames);
  void input(GstClockTime pts);
  bool admit_output(GstClockTime pts);

 private:
  enum class State { kIdle, kCounting, kKnown };
  std::mutex mutex_;  // input and output run on different threads in some decoders
  State state_ = State::kIdle;
  uint32_t remaining_ = 0;
  GstClockTime whole_from_ = 0;
};

// What a stream's decoders left out, for its log line, /metrics and its stall check; any thread.
struct DecoderInputCounters {
  std::atomic<uint64_t> not_key_frames{0};    // dropped by keyframes_only (recovery points among them)
  std::atomic<uint64_t> before_key_frame{0};  // dropped while waiting for a connection's first key frame
  std::atomic<uint64_t> before_recovery{0};   // pictures held back after a recovery point
  std::atomic<uint64_t> arrived{0};           // compressed frames that reached a decoder's input, all
  // Of the frames passed to a decoder, those that should each give it a picture: not a codec's headers
  // (Theora's), not an invisible frame (VP8's alternate reference), not outside the container's segment
  // (an edit list's or a seek's frames before it, a muxer's past its end: the decoder clips those).
  std::atomic<uint64_t> expected_pictures{0};
  std::atomic<uint64_t> pictures{0};       // pictures the decoders gave (before a RecoveryWatch's hold)
  // Of the frames expected to give a picture, those whose picture never came: a later one came out
  // first (decoders send pictures in presentation order), as it happens, so that a camera's damaged
  // or incomplete frames (packets lost on its network) are seen while it runs, not only at a file's
  // end. Frames still in a decoder are not counted, nor are a field-coded stream's.
  std::atomic<uint64_t> undecoded{0};
  std::atomic<bool> field_coded{false};    // interlaced: two fields may come as two frames for one picture
  // Pictures decoded from incomplete data, marked GST_BUFFER_FLAG_CORRUPTED on their way out (see
  // gate_decoder_input): after a lost packet, until the next key frame.
  std::atomic<uint64_t> damaged_pictures{0};
  // When a decoder input last saw a compressed frame, passed or dropped (steady clock ns; 0: never): a
  // camera whose frames are all left out for a while is sending, not stalled.
  std::atomic<int64_t> last_input_ns{0};
  std::atomic<bool> recovery_points_logged{false};  // keyframes_only met one: said once per stream
};

// Frames, by timestamp, that come after a key frame their demuxer dropped whole (MPEG-TS: packets lost
// inside it, TsTailLossWatch::sent): every frame to the next key frame refers to it, but an H.264
// IDR frame's loss need not show in frame_num. Added on the demuxer's thread in decoding order, taken
// on the decoder input's; at most kMaxFrames kept.
class FramesAfterLostKeyFrames {
 public:
  static constexpr size_t kMaxFrames = 64;
  void add(GstClockTime pts);
  // Whether the frame at `pts` is one (those added before it are forgotten).
  bool take(GstClockTime pts);

 private:
  std::mutex mutex_;
  std::deque<GstClockTime> frames_;
};

// The frames a decoder took that gave no picture, for a file's end: "its decoder gave no picture for 52
// of its 300 frames ..." (a warning), or "" when none or too few to say (a decoder that drops the last
// frame of a cut file, say: fewer than 2, or under 1%), or when the counts cannot be compared (fields).
std::string frames_without_pictures(const DecoderInputCounters& counters);

// Whether every frame of a stream with these caps (a decoder's input) decodes alone: an intra-only
// codec, whose delta-unit flags the gate ignores.
bool is_intra_only_codec(const GstCaps* caps);

// Puts a new DecoderInputGate on a decoder: on `decoder_sink`, its input pad, the buffers it does not
// admit, alone or in buffer lists, are dropped and counted in `counters`, which must outlive the pads;
// on `decoder_src` (may be null), its output pad, the pictures a RecoveryWatch holds back.
//
// Damaged pictures: a frame that reaches the decoder marked DISCONT, after the first frame, lost data
// (a depayloader marks the frame it was assembling when a gap in the RTP sequence numbers came: a packet
// lost on a camera's network). The decoder conceals what is missing and goes on, so that frame's
// picture and those of every frame after it until the next whole key frame (they refer to it) may be
// smeared, and so may an open GOP's leading pictures after that key frame (an H.264 I-frame not IDR's,
// an H.265 CRA's RASL pictures), and an intra-refreshed stream's until its recovery point's count of
// frames after the next recovery point; so may those after the gate stopped waiting for a key frame (kPassAfterWaiting),
// and those from a frame that uses reference frames never passed (MPEG-TS: H.264's frame_num skips,
// RefPicListGaps; H.265's reference picture set names one, RefPicSetGaps).
// H.264 and H.265 (their pictures' headers read) with `exact_timestamps` (a file's, an MPEG-TS stream's:
// the decoder gives each picture its frame's timestamp) are followed picture by picture instead: a
// picture is damaged when its data was lost or a reference picture it uses is damaged (H.264's
// reference lists, RefPicListGaps; H.265's sets, RefPicSetGaps), so a lost B-frame that a few others
// use damages those few, not the pictures to the next key frame. But an H.264 reference picture that lost
// part of its data still starts a stretch: libav's concealment of it leaves small differences in the
// pictures after it that do not use it (measured). Not for an RTP camera's (`exact_timestamps` false):
// its timestamps jitter and the decoder gives some pictures another frame's, which only a stretch's
// range of timestamps covers.
// On `decoder_src` their pictures, and any its decoder marked corrupt itself, leave with
// GST_BUFFER_FLAG_CORRUPTED set (elements such as videoconvert copy it) and are counted in
// counters->damaged_pictures. The DISCONT of the first frame (a connection's, a seek's) is no loss, nor is
// that of the first frame after a new segment (a parser marks it so: matroskademux's second segment). The gate
// follows `keyframes_only` (read at each frame: a reload may change it; it must outlive the pads too).
// The log names `stream_id` where the gate stops waiting without a key frame.
// `lost_key_frames` (may be null): the frames after a key frame their demuxer dropped, where a damaged
// stretch starts too.
void gate_decoder_input(GstPad* decoder_sink, GstPad* decoder_src, const std::atomic<bool>* keyframes_only,
                        DecoderInputCounters* counters, const std::string& stream_id, bool exact_timestamps = true,
                        std::shared_ptr<FramesAfterLostKeyFrames> lost_key_frames = nullptr);

// A pad probe's answer for its buffer, or for each buffer of its buffer list (a depayloader feeding a
// decoder directly may push lists): those `keep(GstBuffer*)` refuses are dropped. Other probe types: OK.
template <typename Keep>
GstPadProbeReturn keep_buffers_where(GstPadProbeInfo* info, Keep&& keep) {
  if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER) {
    GstBuffer* buffer = GST_PAD_PROBE_INFO_BUFFER(info);
    return !buffer || keep(buffer) ? GST_PAD_PROBE_OK : GST_PAD_PROBE_DROP;
  }
  if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER_LIST) {
    GstBufferList* list = gst_buffer_list_make_writable(GST_PAD_PROBE_INFO_BUFFER_LIST(info));
    GST_PAD_PROBE_INFO_DATA(info) = list;
    for (guint i = 0; i < gst_buffer_list_length(list);) {
      if (keep(gst_buffer_list_get(list, i))) {
        ++i;
      } else {
        gst_buffer_list_remove(list, i, 1);
      }
    }
    return gst_buffer_list_length(list) > 0 ? GST_PAD_PROBE_OK : GST_PAD_PROBE_DROP;
  }
  return GST_PAD_PROBE_OK;
}

}  // namespace vapipe
