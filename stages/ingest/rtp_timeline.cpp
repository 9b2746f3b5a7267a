#include "stages/ingest/rtp_timeline.h"

#include <cstdint>

namespace vapipe {

GstClockTime RtpTimeline::restamp(GstClockTime pts, uint32_t rtp_time, uint32_t ssrc, uint32_t clock_rate) {
  if (!GST_CLOCK_TIME_IS_VALID(pts) || clock_rate == 0) return pts;
  auto anchor = [&] {
    anchored_ = true;
    ssrc_ = ssrc;
    clock_rate_ = clock_rate;
    // Extended from 2^32 up, so that a B-frame's earlier RTP time at the start does not go below 0.
    last_ = first_ = (uint64_t{1} << 32) + rtp_time;
    first_pts_ = pts;
    return pts;
  };
  if (!anchored_ || ssrc != ssrc_ || clock_rate != clock_rate_) return anchor();
  // The nearest 64-bit value whose low 32 bits are rtp_time: a wrap forward, or a reordered packet.
  const auto step = static_cast<int32_t>(rtp_time - static_cast<uint32_t>(last_));
  const int64_t extended = static_cast<int64_t>(last_) + step;
  // Back by more than kStepBack: the camera's clock stepped back (its encoder restarted it within the
  // session), not a reordered packet; its times would go back and stand still until it caught up.
  if (extended < 0 || static_cast<int64_t>(-step) > static_cast<int64_t>(kStepBack / GST_MSECOND) * clock_rate / 1000) {
    return anchor();
  }
  const int64_t since_first = extended - static_cast<int64_t>(first_);
  const int64_t offset = since_first >= 0
                             ? static_cast<int64_t>(gst_util_uint64_scale(static_cast<uint64_t>(since_first), GST_SECOND, clock_rate))
                             : -static_cast<int64_t>(gst_util_uint64_scale(static_cast<uint64_t>(-since_first), GST_SECOND, clock_rate));
  const int64_t restamped = static_cast<int64_t>(first_pts_) + offset;
  const int64_t apart = restamped - static_cast<int64_t>(pts);
  if (restamped < 0 || apart > static_cast<int64_t>(kResync) || -apart > static_cast<int64_t>(kResync)) return anchor();
  if (step > 0) last_ = static_cast<uint64_t>(extended);
  return static_cast<GstClockTime>(restamped);
}

namespace {

struct PadTimeline {
  RtpTimeline timeline;
  uint32_t clock_rate = 0;
  GstCaps* caps = nullptr;  // the caps clock_rate was read from (compared by pointer: re-read on new caps)
  ~PadTimeline() {
    if (caps) gst_caps_unref(caps);
  }
};

// The RTP timestamp and SSRC of an RTP packet (RFC 3550's fixed header); false when it is none.
bool rtp_header(GstBuffer* buffer, uint32_t* rtp_time, uint32_t* ssrc) {
  uint8_t header[12];
  if (gst_buffer_extract(buffer, 0, header, sizeof header) != sizeof header || (header[0] >> 6) != 2) return false;
  *rtp_time = (uint32_t{header[4]} << 24) | (uint32_t{header[5]} << 16) | (uint32_t{header[6]} << 8) | header[7];
  *ssrc = (uint32_t{header[8]} << 24) | (uint32_t{header[9]} << 16) | (uint32_t{header[10]} << 8) | header[11];
  return true;
}

GstPadProbeReturn on_packet(GstPad* pad, GstPadProbeInfo* info, gpointer user) {
  auto* state = static_cast<PadTimeline*>(user);
  GstBuffer* buffer = gst_pad_probe_info_get_buffer(info);
  uint32_t rtp_time = 0, ssrc = 0;
  if (!buffer || !GST_BUFFER_PTS_IS_VALID(buffer) || !rtp_header(buffer, &rtp_time, &ssrc)) return GST_PAD_PROBE_OK;
  if (GstCaps* caps = gst_pad_get_current_caps(pad)) {
    if (caps != state->caps) {
      if (state->caps) gst_caps_unref(state->caps);
      state->caps = gst_caps_ref(caps);
      gint rate = 0;
      const GstStructure* s = gst_caps_get_size(caps) > 0 ? gst_caps_get_structure(caps, 0) : nullptr;
      state->clock_rate = s && gst_structure_get_int(s, "clock-rate", &rate) && rate > 0 ? static_cast<uint32_t>(rate) : 0;
    }
    gst_caps_unref(caps);
  }
  const GstClockTime pts = GST_BUFFER_PTS(buffer);
  const GstClockTime restamped = state->timeline.restamp(pts, rtp_time, ssrc, state->clock_rate);
  if (restamped == pts) return GST_PAD_PROBE_OK;
  buffer = gst_buffer_make_writable(buffer);
  GST_PAD_PROBE_INFO_DATA(info) = buffer;
  // Its decoding time moves with it: their order (a B-frame's) stays as the jitter buffer gave it.
  if (GST_BUFFER_DTS_IS_VALID(buffer)) {
    const int64_t dts = static_cast<int64_t>(GST_BUFFER_DTS(buffer)) + (static_cast<int64_t>(restamped) - static_cast<int64_t>(pts));
    GST_BUFFER_DTS(buffer) = dts >= 0 ? static_cast<GstClockTime>(dts) : GST_CLOCK_TIME_NONE;
  }
  GST_BUFFER_PTS(buffer) = restamped;
  return GST_PAD_PROBE_OK;
}

}  // namespace

void restamp_from_rtp_clock(GstElement* rtpjitterbuffer) {
  GstPad* src = gst_element_get_static_pad(rtpjitterbuffer, "src");
  if (!src) return;
  gst_pad_add_probe(src, GST_PAD_PROBE_TYPE_BUFFER, &on_packet, new PadTimeline,
                    [](gpointer p) { delete static_cast<PadTimeline*>(p); });
  gst_object_unref(src);
}

}  // namespace vapipe
