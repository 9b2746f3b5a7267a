#include "stages/ingest/untimed_frames.h"

#include <cstdint>

#include "pipeline/logging.h"

namespace vapipe {

GstClockTime untimed_picture_pts(GstClockTime previous, GstClockTime previous_duration, GstClockTime frame_ns,
                                 GstClockTime segment_start) {
  if (!GST_CLOCK_TIME_IS_VALID(previous)) return GST_CLOCK_TIME_IS_VALID(segment_start) ? segment_start : 0;
  if (GST_CLOCK_TIME_IS_VALID(previous_duration) && previous_duration > 0) return previous + previous_duration;
  return previous + (frame_ns > 0 ? frame_ns : GST_SECOND / kUntimedFramesPerSecond);
}

GstClockTime frame_ns_of_caps_event(GstEvent* event) {
  if (!event || GST_EVENT_TYPE(event) != GST_EVENT_CAPS) return 0;
  GstCaps* caps = nullptr;
  gst_event_parse_caps(event, &caps);
  gint n = 0, d = 0;
  if (!caps || gst_caps_get_size(caps) == 0 ||
      !gst_structure_get_fraction(gst_caps_get_structure(caps, 0), "framerate", &n, &d) || n <= 0 || d <= 0) {
    return 0;
  }
  return gst_util_uint64_scale_int_round(GST_SECOND, d, n);
}

namespace {

struct UntimedState {
  std::string stream_id;
  GstClockTime previous = GST_CLOCK_TIME_NONE;
  GstClockTime previous_duration = GST_CLOCK_TIME_NONE;
  GstClockTime frame_ns = 0;  // from the caps' frame rate
  GstClockTime segment_start = GST_CLOCK_TIME_NONE;
  bool said = false;
};

GstPadProbeReturn on_picture(GstPad*, GstPadProbeInfo* info, gpointer user) {
  auto& s = *static_cast<UntimedState*>(user);
  if (info->type & GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM) {
    GstEvent* event = GST_PAD_PROBE_INFO_EVENT(info);
    if (!event) return GST_PAD_PROBE_OK;
    if (GST_EVENT_TYPE(event) == GST_EVENT_CAPS) {
      if (const GstClockTime frame_ns = frame_ns_of_caps_event(event); frame_ns > 0) s.frame_ns = frame_ns;
    } else if (GST_EVENT_TYPE(event) == GST_EVENT_SEGMENT) {
      const GstSegment* segment = nullptr;
      gst_event_parse_segment(event, &segment);
      if (segment && segment->format == GST_FORMAT_TIME) s.segment_start = segment->start;
      s.previous = GST_CLOCK_TIME_NONE;
    } else if (GST_EVENT_TYPE(event) == GST_EVENT_FLUSH_STOP) {
      s.previous = GST_CLOCK_TIME_NONE;
    }
    return GST_PAD_PROBE_OK;
  }
  GstBuffer* buffer = GST_PAD_PROBE_INFO_BUFFER(info);
  if (!buffer) return GST_PAD_PROBE_OK;
  if (GST_BUFFER_PTS_IS_VALID(buffer)) {
    s.previous = GST_BUFFER_PTS(buffer);
    s.previous_duration = GST_BUFFER_DURATION(buffer);
    return GST_PAD_PROBE_OK;
  }
  buffer = gst_buffer_make_writable(buffer);
  const GstClockTime pts = untimed_picture_pts(s.previous, s.previous_duration, s.frame_ns, s.segment_start);
  GST_BUFFER_PTS(buffer) = pts;
  GST_PAD_PROBE_INFO_DATA(info) = buffer;
  s.previous = pts;
  s.previous_duration = GST_BUFFER_DURATION(buffer);
  if (!s.said) {
    s.said = true;
    if (s.frame_ns > 0) {
      VAPIPE_LOG_INFO("stream '{}': pictures without timestamps (a raw MJPEG or elementary stream file?): each is "
                      "timed one frame after the one before it, at the {:.3f} frames/s its stream says",
                      s.stream_id, 1e9 / static_cast<double>(s.frame_ns));
    } else {
      VAPIPE_LOG_INFO("stream '{}': pictures without timestamps or a frame rate (a raw MJPEG file?): timed at {} "
                      "frames/s, as ffmpeg and players take such a file; its pts_ms, from, to and max_fps count so",
                      s.stream_id, kUntimedFramesPerSecond);
    }
  }
  return GST_PAD_PROBE_OK;
}

}  // namespace

void time_untimed_pictures(GstPad* decoder_src, const std::string& stream_id) {
  auto* state = new UntimedState();
  state->stream_id = stream_id;
  gst_pad_add_probe(decoder_src, static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM),
                    &on_picture, state, [](gpointer data) { delete static_cast<UntimedState*>(data); });
}

}  // namespace vapipe
