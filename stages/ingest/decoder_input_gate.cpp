#include "stages/ingest/decoder_input_gate.h"

#include <chrono>

#include "pipeline/logging.h"

namespace vapipe {
namespace {

struct ProbeState {
  DecoderInputGate gate;
  DecoderInputCounters* counters;
  std::string stream_id;
};

bool admit(ProbeState& state, GstBuffer* buffer) {
  state.counters->last_input_ns = std::chrono::steady_clock::now().time_since_epoch().count();
  switch (state.gate.admit(GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_DELTA_UNIT))) {
    case DecoderInputGate::Verdict::kPass:
      return true;
    case DecoderInputGate::Verdict::kNotKeyFrame:
      state.counters->not_key_frames.fetch_add(1);
      return false;
    case DecoderInputGate::Verdict::kBeforeKeyFrame:
      state.counters->before_key_frame.fetch_add(1);
      return false;
    case DecoderInputGate::Verdict::kPassAfterWaiting:
      VAPIPE_LOG_WARN("stream '{}': no key frame in {} frames: decoding on from here (the pictures may be smeared "
                      "until the stream refreshes them)", state.stream_id, DecoderInputGate::kMaxWait);
      return true;
  }
  return true;
}

GstPadProbeReturn on_decoder_input(GstPad*, GstPadProbeInfo* info, gpointer user) {
  auto& state = *static_cast<ProbeState*>(user);
  if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER) {
    GstBuffer* buffer = GST_PAD_PROBE_INFO_BUFFER(info);
    return !buffer || admit(state, buffer) ? GST_PAD_PROBE_OK : GST_PAD_PROBE_DROP;
  }
  if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER_LIST) {
    // A depayloader feeding a decoder directly may push lists: each buffer is judged alone.
    GstBufferList* list = gst_buffer_list_make_writable(GST_PAD_PROBE_INFO_BUFFER_LIST(info));
    GST_PAD_PROBE_INFO_DATA(info) = list;
    for (guint i = 0; i < gst_buffer_list_length(list);) {
      if (admit(state, gst_buffer_list_get(list, i))) {
        ++i;
      } else {
        gst_buffer_list_remove(list, i, 1);
      }
    }
    return gst_buffer_list_length(list) > 0 ? GST_PAD_PROBE_OK : GST_PAD_PROBE_DROP;
  }
  return GST_PAD_PROBE_OK;
}

}  // namespace

void gate_decoder_input(GstPad* decoder_sink, bool keyframes_only, DecoderInputCounters* counters,
                        const std::string& stream_id) {
  gst_pad_add_probe(decoder_sink, static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_BUFFER_LIST),
                    &on_decoder_input, new ProbeState{DecoderInputGate(keyframes_only), counters, stream_id},
                    [](gpointer state) { delete static_cast<ProbeState*>(state); });
}

}  // namespace vapipe
