#include "stages/ingest/picture_slots.h"

#include "stages/ingest/untimed_frames.h"

#include <cstdint>
#include <memory>
#include <mutex>

namespace vapipe {

void PictureSlots::packet(GstClockTime dts, GstClockTime pts, GstClockTime duration) {
  const GstClockTime slot = GST_CLOCK_TIME_IS_VALID(dts) ? dts : pts;
  if (GST_CLOCK_TIME_IS_VALID(slot)) waiting_.emplace(slot, duration);
}

std::optional<std::pair<GstClockTime, GstClockTime>> PictureSlots::picture() {
  if (waiting_.empty()) return std::nullopt;
  const Slot slot = waiting_.top();
  waiting_.pop();
  return slot;
}

namespace {

struct SharedSlots {
  std::mutex mutex;  // packets go in on the decoder's input thread, pictures out on its output thread
  PictureSlots slots;
};
using Slots = std::shared_ptr<SharedSlots>;

GstPadProbeReturn on_packet(GstPad*, GstPadProbeInfo* info, gpointer user) {
  SharedSlots& s = **static_cast<Slots*>(user);
  if (info->type & GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM) {
    GstEvent* event = GST_PAD_PROBE_INFO_EVENT(info);
    if (event && GST_EVENT_TYPE(event) == GST_EVENT_FLUSH_STOP) {  // a seek
      std::lock_guard<std::mutex> lock(s.mutex);
      s.slots.clear();
    }
    return GST_PAD_PROBE_OK;
  }
  GstBuffer* buffer = GST_PAD_PROBE_INFO_BUFFER(info);
  if (!buffer) return GST_PAD_PROBE_OK;
  std::lock_guard<std::mutex> lock(s.mutex);
  s.slots.packet(GST_BUFFER_DTS(buffer), GST_BUFFER_PTS(buffer), GST_BUFFER_DURATION(buffer));
  return GST_PAD_PROBE_OK;
}

GstPadProbeReturn on_picture(GstPad*, GstPadProbeInfo* info, gpointer user) {
  SharedSlots& s = **static_cast<Slots*>(user);
  GstBuffer* buffer = GST_PAD_PROBE_INFO_BUFFER(info);
  if (!buffer) return GST_PAD_PROBE_OK;
  std::optional<std::pair<GstClockTime, GstClockTime>> slot;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    slot = s.slots.picture();
  }
  if (!slot) return GST_PAD_PROBE_OK;
  buffer = gst_buffer_make_writable(buffer);
  GST_BUFFER_PTS(buffer) = slot->first;
  GST_BUFFER_DTS(buffer) = GST_CLOCK_TIME_NONE;
  if (GST_CLOCK_TIME_IS_VALID(slot->second)) GST_BUFFER_DURATION(buffer) = slot->second;
  GST_PAD_PROBE_INFO_DATA(info) = buffer;
  return GST_PAD_PROBE_OK;
}

}  // namespace

void time_pictures_by_their_slots(GstElement* decoder) {
  GstPad* sink = gst_element_get_static_pad(decoder, "sink");
  GstPad* src = gst_element_get_static_pad(decoder, "src");
  if (sink && src) {
    const auto slots = std::make_shared<SharedSlots>();
    auto forget = [](gpointer data) { delete static_cast<Slots*>(data); };
    gst_pad_add_probe(sink, static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM),
                      &on_packet, new Slots(slots), forget);
    gst_pad_add_probe(src, GST_PAD_PROBE_TYPE_BUFFER, &on_picture, new Slots(slots), forget);
  }
  if (sink) gst_object_unref(sink);
  if (src) gst_object_unref(src);
}

GstClockTime rising_picture_time(GstClockTime pts, GstClockTime previous, GstClockTime frame_ns) {
  // Less than half a frame after it is as good as on it: the times put one frame on drift by a few ns
  // from the demuxer's (a 29.97 frames/s frame is 33,366,666.67 ns).
  if (!GST_CLOCK_TIME_IS_VALID(pts) || !GST_CLOCK_TIME_IS_VALID(previous) || frame_ns == 0 ||
      pts >= previous + frame_ns / 2) {
    return pts;
  }
  return previous + frame_ns;
}

namespace {

struct RisingTimes {
  GstClockTime previous = GST_CLOCK_TIME_NONE;
  GstClockTime frame_ns = 0;
};

GstPadProbeReturn on_rising_picture(GstPad*, GstPadProbeInfo* info, gpointer user) {
  auto& r = *static_cast<RisingTimes*>(user);
  if (info->type & GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM) {
    GstEvent* event = GST_PAD_PROBE_INFO_EVENT(info);
    if (!event) return GST_PAD_PROBE_OK;
    if (GST_EVENT_TYPE(event) == GST_EVENT_CAPS) {
      if (const GstClockTime frame_ns = frame_ns_of_caps_event(event); frame_ns > 0) r.frame_ns = frame_ns;
    } else if (GST_EVENT_TYPE(event) == GST_EVENT_FLUSH_STOP || GST_EVENT_TYPE(event) == GST_EVENT_SEGMENT) {
      r.previous = GST_CLOCK_TIME_NONE;  // a seek: times start again
    }
    return GST_PAD_PROBE_OK;
  }
  GstBuffer* buffer = GST_PAD_PROBE_INFO_BUFFER(info);
  if (!buffer) return GST_PAD_PROBE_OK;
  const GstClockTime pts = rising_picture_time(GST_BUFFER_PTS(buffer), r.previous, r.frame_ns);
  if (pts != GST_BUFFER_PTS(buffer)) {
    buffer = gst_buffer_make_writable(buffer);
    GST_BUFFER_PTS(buffer) = pts;
    GST_PAD_PROBE_INFO_DATA(info) = buffer;
  }
  if (GST_CLOCK_TIME_IS_VALID(pts)) r.previous = pts;
  return GST_PAD_PROBE_OK;
}

}  // namespace

void keep_picture_times_rising(GstElement* decoder) {
  GstPad* src = gst_element_get_static_pad(decoder, "src");
  if (!src) return;
  gst_pad_add_probe(src, static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM),
                    &on_rising_picture, new RisingTimes(), [](gpointer data) { delete static_cast<RisingTimes*>(data); });
  gst_object_unref(src);
}

}  // namespace vapipe
