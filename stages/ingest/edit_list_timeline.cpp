#include "stages/ingest/edit_list_timeline.h"

#include <gst/video/video.h>

#include <utility>

#include "stages/ingest/mp4_movie_duration.h"

namespace vapipe {

std::optional<EditListShift> edit_list_shift(const GstSegment& segment) {
  if (segment.format != GST_FORMAT_TIME || segment.rate <= 0 || !GST_CLOCK_TIME_IS_VALID(segment.start) ||
      !GST_CLOCK_TIME_IS_VALID(segment.time) || segment.start == segment.time) {
    return std::nullopt;
  }
  EditListShift shift;
  shift.offset = static_cast<GstClockTimeDiff>(segment.start) - static_cast<GstClockTimeDiff>(segment.time);
  shift.segment = segment;
  shift.segment.start = segment.time;
  shift.shown_stop = shifted_by_edit_list(segment.stop, shift.offset);
  shift.segment.stop = shift.shown_stop;
  if (shift.offset > 0 && GST_CLOCK_TIME_IS_VALID(shift.shown_stop)) shift.segment.stop += static_cast<GstClockTime>(shift.offset);
  shift.segment.position = shifted_by_edit_list(segment.position, shift.offset);
  return shift;
}

GstClockTime shifted_by_edit_list(GstClockTime t, GstClockTimeDiff offset) {
  if (!GST_CLOCK_TIME_IS_VALID(t)) return t;
  const GstClockTimeDiff moved = static_cast<GstClockTimeDiff>(t) - offset;
  return moved < 0 ? 0 : static_cast<GstClockTime>(moved);
}

GstClockTime decoding_time_on_edit_list(GstClockTime dts, GstClockTimeDiff offset) {
  if (!GST_CLOCK_TIME_IS_VALID(dts) || static_cast<GstClockTimeDiff>(dts) < offset) return GST_CLOCK_TIME_NONE;
  return shifted_by_edit_list(dts, offset);
}

bool hidden_by_edit_list(GstClockTime pts, GstClockTime segment_start) {
  return GST_CLOCK_TIME_IS_VALID(pts) && GST_CLOCK_TIME_IS_VALID(segment_start) && pts < segment_start;
}

namespace {

// The metas that mark a hidden frame, and the time of a frame after one (reference-timestamp metas,
// which GstVideoDecoder copies from a frame to its picture, as it does a camera's timestamp/x-ntp).
GstCaps* hidden_caps() {
  static GstCaps* caps = gst_caps_new_empty_simple("timestamp/x-vapipe-edit-list-hidden");
  return caps;
}
GstCaps* time_caps() {
  static GstCaps* caps = gst_caps_new_empty_simple("timestamp/x-vapipe-edit-list-time");
  return caps;
}

struct PadShift {
  ~PadShift() {
    if (held) gst_event_unref(held);
  }
  std::shared_ptr<EditListOffset> reported;  // null: not the video pad, or nobody asked
  GstClockTimeDiff offset = 0;               // of the pad's latest time segment
  GstClockTime start = GST_CLOCK_TIME_NONE;  // its start (media time), when moved
  GstClockTime shown_stop = GST_CLOCK_TIME_NONE;  // the end of the part shown (stream time), when moved
  bool hidden_seen = false;                  // a frame of it was before its start
  // A later edit's segment, held until a frame of it comes: an edit list's last edit may be empty (a
  // held tail: no frames), and the decoder, its last pictures still to come out (a frame or two, three
  // with B-frames), clipped them before it: they were lost, said as undecodable. At the end it goes.
  GstEvent* held = nullptr;
  bool framed = false;     // a frame came since the last segment sent (or the flush)
  bool releasing = false;  // the held segment is being sent on (its probe call lets it pass)
};

void shift(GstBuffer* buffer, PadShift& pad) {
  const GstClockTime media_pts = GST_BUFFER_PTS(buffer);
  GST_BUFFER_PTS(buffer) = shifted_by_edit_list(media_pts, pad.offset);
  GST_BUFFER_DTS(buffer) = decoding_time_on_edit_list(GST_BUFFER_DTS(buffer), pad.offset);
  if (hidden_by_edit_list(media_pts, pad.start) ||
      (GST_CLOCK_TIME_IS_VALID(pad.shown_stop) && GST_BUFFER_PTS_IS_VALID(buffer) && GST_BUFFER_PTS(buffer) >= pad.shown_stop)) {
    pad.hidden_seen = true;
    if (pad.reported) pad.reported->hidden_frames.fetch_add(1);
    GST_BUFFER_FLAG_SET(buffer, GST_BUFFER_FLAG_DECODE_ONLY);
    gst_buffer_add_reference_timestamp_meta(buffer, hidden_caps(), media_pts, GST_CLOCK_TIME_NONE);
  } else if (pad.hidden_seen && GST_BUFFER_PTS_IS_VALID(buffer)) {
    gst_buffer_add_reference_timestamp_meta(buffer, time_caps(), GST_BUFFER_PTS(buffer), GST_CLOCK_TIME_NONE);
  }
}

GstPadProbeReturn on_demuxer_output(GstPad* demuxer_pad, GstPadProbeInfo* info, gpointer user) {
  auto& pad = *static_cast<PadShift*>(user);
  if (info->type & GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM) {
    GstEvent* event = GST_PAD_PROBE_INFO_EVENT(info);
    if (!event) return GST_PAD_PROBE_OK;
    if (GST_EVENT_TYPE(event) == GST_EVENT_FLUSH_STOP || GST_EVENT_TYPE(event) == GST_EVENT_EOS) {
      // A seek sends its own segment; at the end, a held segment had no frame: it goes.
      if (pad.held) gst_event_unref(std::exchange(pad.held, nullptr));
      pad.framed = false;
      return GST_PAD_PROBE_OK;
    }
    if (GST_EVENT_TYPE(event) != GST_EVENT_SEGMENT || pad.releasing) return GST_PAD_PROBE_OK;
    const GstSegment* segment = nullptr;
    gst_event_parse_segment(event, &segment);
    if (!segment) return GST_PAD_PROBE_OK;
    const std::optional<EditListShift> moved = edit_list_shift(*segment);
    pad.offset = moved ? moved->offset : 0;
    pad.start = moved && moved->offset > 0 ? segment->start : GST_CLOCK_TIME_NONE;
    pad.shown_stop = moved && moved->offset > 0 ? moved->shown_stop : GST_CLOCK_TIME_NONE;
    pad.hidden_seen = false;
    if (pad.reported) pad.reported->video_ns = pad.offset;
    GstEvent* sent = event;
    if (moved) {
      sent = gst_event_new_segment(&moved->segment);
      gst_event_set_seqnum(sent, gst_event_get_seqnum(event));
      gst_event_unref(event);
    }
    if (pad.framed) {
      // After frames of an earlier segment: held until a frame of its own comes.
      if (pad.held) gst_event_unref(pad.held);
      pad.held = gst_event_ref(sent);
      GST_PAD_PROBE_INFO_DATA(info) = sent;  // (dropped: the pad unrefs its own reference)
      return GST_PAD_PROBE_DROP;
    }
    GST_PAD_PROBE_INFO_DATA(info) = sent;
    return GST_PAD_PROBE_OK;
  }
  if (pad.held) {
    pad.releasing = true;
    gst_pad_push_event(demuxer_pad, std::exchange(pad.held, nullptr));
    pad.releasing = false;
    pad.framed = false;
  }
  pad.framed = true;
  if (pad.offset == 0) return GST_PAD_PROBE_OK;
  if (info->type & GST_PAD_PROBE_TYPE_BUFFER) {
    GstBuffer* buffer = GST_PAD_PROBE_INFO_BUFFER(info);
    if (!buffer) return GST_PAD_PROBE_OK;
    buffer = gst_buffer_make_writable(buffer);
    shift(buffer, pad);
    GST_PAD_PROBE_INFO_DATA(info) = buffer;
  } else if (info->type & GST_PAD_PROBE_TYPE_BUFFER_LIST) {
    GstBufferList* list = GST_PAD_PROBE_INFO_BUFFER_LIST(info);
    if (!list) return GST_PAD_PROBE_OK;
    list = gst_buffer_list_make_writable(list);
    for (guint i = 0; i < gst_buffer_list_length(list); ++i) shift(gst_buffer_list_get_writable(list, i), pad);
    GST_PAD_PROBE_INFO_DATA(info) = list;
  }
  return GST_PAD_PROBE_OK;
}

GstPadProbeReturn on_decoder_output(GstPad*, GstPadProbeInfo* info, gpointer) {
  GstBuffer* buffer = GST_PAD_PROBE_INFO_BUFFER(info);
  if (!buffer) return GST_PAD_PROBE_OK;
  if (gst_buffer_get_reference_timestamp_meta(buffer, hidden_caps())) return GST_PAD_PROBE_DROP;
  GstReferenceTimestampMeta* meta = gst_buffer_get_reference_timestamp_meta(buffer, time_caps());
  if (!meta) return GST_PAD_PROBE_OK;
  const GstClockTime pts = meta->timestamp;
  buffer = gst_buffer_make_writable(buffer);  // (its metadata: the picture's memory is shared, not copied)
  gst_buffer_remove_meta(buffer, reinterpret_cast<GstMeta*>(gst_buffer_get_reference_timestamp_meta(buffer, time_caps())));
  GST_BUFFER_PTS(buffer) = pts;
  GST_BUFFER_DTS(buffer) = pts;
  GST_PAD_PROBE_INFO_DATA(info) = buffer;
  return GST_PAD_PROBE_OK;
}

void on_pad_added(GstElement*, GstPad* pad, gpointer user) {
  if (GST_PAD_DIRECTION(pad) != GST_PAD_SRC) return;
  auto* state = new PadShift();
  // qtdemux names its pads by kind: video_0, audio_0, subtitle_0. The first video one is classified.
  if (g_str_has_prefix(GST_PAD_NAME(pad), "video")) {
    auto& offset = *static_cast<std::shared_ptr<EditListOffset>*>(user);
    state->reported = std::exchange(offset, nullptr);
  }
  gst_pad_add_probe(pad,
                    static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_BUFFER_LIST |
                                                 GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM),
                    &on_demuxer_output, state, [](gpointer data) { delete static_cast<PadShift*>(data); });
}

void on_element_added(GstBin*, GstBin*, GstElement* element, gpointer user) {
  GstElementFactory* factory = gst_element_get_factory(element);
  if (!factory || !g_str_equal(GST_OBJECT_NAME(factory), "qtdemux")) return;
  put_on_edit_list_timeline(element, *static_cast<std::shared_ptr<EditListOffset>*>(user));
}

}  // namespace

void put_on_edit_list_timeline(GstElement* qtdemux, std::shared_ptr<EditListOffset> offset) {
  read_trimmed_mp4s_whole(qtdemux);
  // (pad-added comes on the demuxer's streaming thread, one pad at a time)
  g_signal_connect_data(qtdemux, "pad-added", G_CALLBACK(&on_pad_added),
                        new std::shared_ptr<EditListOffset>(std::move(offset)),
                        [](gpointer data, GClosure*) { delete static_cast<std::shared_ptr<EditListOffset>*>(data); },
                        static_cast<GConnectFlags>(0));
}

void put_on_edit_list_timeline_in(GstElement* bin, std::shared_ptr<EditListOffset> offset) {
  g_signal_connect_data(bin, "deep-element-added", G_CALLBACK(&on_element_added),
                        new std::shared_ptr<EditListOffset>(std::move(offset)),
                        [](gpointer data, GClosure*) { delete static_cast<std::shared_ptr<EditListOffset>*>(data); },
                        static_cast<GConnectFlags>(0));
}

void leave_out_hidden_pictures(GstPad* decoder_src) {
  gst_pad_add_probe(decoder_src, GST_PAD_PROBE_TYPE_BUFFER, &on_decoder_output, nullptr, nullptr);
}

}  // namespace vapipe
