// Which compressed frames reach a stream's video decoder (ingest): nothing before the stream's first
// key frame, and with ingest.keyframes_only nothing but key frames. One gate per decoder, that is per
// GStreamer pipeline: each connection and reconnection of a camera waits for its own key frame.
//
// Why wait: a camera stream joined between two key frames (the usual case for a stream that another
// client already watches, and for every reconnection) decodes into smears until the next key frame,
// and a classifier labels smears with confidence. A delta unit is dropped even when it carries the
// codec's headers too (an encoder's SPS/PPS repeated in front of a P-frame): decoded, it is a smear;
// the headers the decoder needs come in the caps or with the key frames. A stream whose parser marks
// no key frame in kMaxWait frames (refreshed by intra slices alone) is trusted from there.
#pragma once

#include <gst/gst.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace vapipe {

class DecoderInputGate {
 public:
  static constexpr uint64_t kMaxWait = 300;

  enum class Verdict {
    kPass,
    kBeforeKeyFrame,   // dropped: no key frame yet
    kNotKeyFrame,      // dropped: keyframes_only
    kPassAfterWaiting  // passed: kMaxWait frames without a key frame; the wait is over (say so once)
  };

  explicit DecoderInputGate(bool keyframes_only) : keyframes_only_(keyframes_only) {}

  // `delta`: the parser marked the frame a delta unit (not decodable on its own).
  Verdict admit(bool delta) {
    if (!delta) {
      key_frame_seen_ = true;
      return Verdict::kPass;
    }
    if (keyframes_only_) return Verdict::kNotKeyFrame;
    if (key_frame_seen_) return Verdict::kPass;
    if (waited_ >= kMaxWait) {
      key_frame_seen_ = true;
      return Verdict::kPassAfterWaiting;
    }
    ++waited_;
    return Verdict::kBeforeKeyFrame;
  }

 private:
  bool keyframes_only_;
  bool key_frame_seen_ = false;
  uint64_t waited_ = 0;
};

// What a stream's decoder inputs left out, for its log line, /metrics and its stall check; any thread.
struct DecoderInputCounters {
  std::atomic<uint64_t> not_key_frames{0};    // dropped by keyframes_only
  std::atomic<uint64_t> before_key_frame{0};  // dropped while waiting for a connection's first key frame
  // When a decoder input last saw a compressed frame, passed or dropped (steady clock ns; 0: never): a
  // camera whose frames are all left out for a while is sending, not stalled.
  std::atomic<int64_t> last_input_ns{0};
};

// Puts a new DecoderInputGate on `decoder_sink`, a decoder's input pad: the buffers it does not admit,
// alone or in buffer lists, are dropped and counted in `counters`, which must outlive the pad. A gate
// that stops waiting without a key frame says so in the log, naming `stream_id`.
void gate_decoder_input(GstPad* decoder_sink, bool keyframes_only, DecoderInputCounters* counters,
                        const std::string& stream_id);

}  // namespace vapipe
