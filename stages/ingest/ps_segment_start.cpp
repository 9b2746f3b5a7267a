#include "stages/ingest/ps_segment_start.h"

#include <cstdint>

namespace vapipe {

void PsSegmentStart::on_segment(const GstSegment& segment) {
  segment_ = segment;
  awaiting_buffer_ = segment.format == GST_FORMAT_TIME;
  if (awaiting_buffer_ && !file_start_) file_start_ = segment.start;
}

std::optional<GstSegment> PsSegmentStart::on_buffer(GstClockTime pts) {
  if (!awaiting_buffer_) return std::nullopt;
  awaiting_buffer_ = false;
  if (!GST_CLOCK_TIME_IS_VALID(pts) || !file_start_ || segment_.start != *file_start_ || pts >= segment_.start) {
    return std::nullopt;
  }
  GstSegment moved = segment_;
  const guint64 back = segment_.start - pts;
  moved.start = pts;
  moved.position = pts;
  if (GST_CLOCK_TIME_IS_VALID(moved.time)) moved.time = moved.time >= back ? moved.time - back : 0;
  if (GST_CLOCK_TIME_IS_VALID(moved.duration)) moved.duration += back;
  return moved;
}

namespace {

struct PadState {
  PsSegmentStart start;
  guint32 seqnum = GST_SEQNUM_INVALID;
};

GstPadProbeReturn on_demuxer_output(GstPad* pad, GstPadProbeInfo* info, gpointer user) {
  auto* state = static_cast<PadState*>(user);
  if (info->type & GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM) {
    GstEvent* event = GST_PAD_PROBE_INFO_EVENT(info);
    if (GST_EVENT_TYPE(event) == GST_EVENT_FLUSH_STOP) {
      state->start.on_flush();
    } else if (GST_EVENT_TYPE(event) == GST_EVENT_SEGMENT) {
      const GstSegment* segment = nullptr;
      gst_event_parse_segment(event, &segment);
      if (segment) state->start.on_segment(*segment);
      state->seqnum = gst_event_get_seqnum(event);
    }
    return GST_PAD_PROBE_OK;
  }
  GstBuffer* buffer = nullptr;
  if (info->type & GST_PAD_PROBE_TYPE_BUFFER) {
    buffer = GST_PAD_PROBE_INFO_BUFFER(info);
  } else if (info->type & GST_PAD_PROBE_TYPE_BUFFER_LIST) {
    GstBufferList* list = GST_PAD_PROBE_INFO_BUFFER_LIST(info);
    if (list && gst_buffer_list_length(list) > 0) buffer = gst_buffer_list_get(list, 0);
  }
  if (!buffer) return GST_PAD_PROBE_OK;
  if (const auto moved = state->start.on_buffer(GST_BUFFER_PTS(buffer))) {
    GstEvent* event = gst_event_new_segment(&*moved);
    if (state->seqnum != GST_SEQNUM_INVALID) gst_event_set_seqnum(event, state->seqnum);
    gst_pad_push_event(pad, event);  // (a sticky event: it replaces the demuxer's on the pad)
  }
  return GST_PAD_PROBE_OK;
}

void on_pad_added(GstElement*, GstPad* pad, gpointer) {
  if (GST_PAD_DIRECTION(pad) != GST_PAD_SRC) return;
  gst_pad_add_probe(pad,
                    static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_BUFFER_LIST |
                                                 GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM | GST_PAD_PROBE_TYPE_EVENT_FLUSH),
                    &on_demuxer_output, new PadState(), [](gpointer state) { delete static_cast<PadState*>(state); });
}

}  // namespace

void start_ps_segments_at_first_frame(GstElement* mpegpsdemux) {
  g_signal_connect(mpegpsdemux, "pad-added", G_CALLBACK(&on_pad_added), nullptr);
}

void start_ps_segments_at_first_frame_in(GstElement* decodebin) {
  g_signal_connect(decodebin, "deep-element-added", G_CALLBACK(+[](GstBin*, GstBin*, GstElement* element, gpointer) {
                     GstElementFactory* factory = gst_element_get_factory(element);
                     if (factory && g_str_equal(GST_OBJECT_NAME(factory), "mpegpsdemux")) {
                       start_ps_segments_at_first_frame(element);
                     }
                   }),
                   nullptr);
}

}  // namespace vapipe
