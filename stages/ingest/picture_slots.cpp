#include "stages/ingest/picture_slots.h"

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

bool holds_mpeg4_b_vop(const uint8_t* data, size_t size) {
  for (size_t i = 0; i + 4 < size; ++i) {
    if (data[i] == 0 && data[i + 1] == 0 && data[i + 2] == 1 && data[i + 3] == 0xB6 && (data[i + 4] >> 6) == 2) {
      return true;
    }
  }
  return false;
}

namespace {

struct SharedSlots {
  std::mutex mutex;  // packets go in on the decoder's input thread, pictures out on its output thread
  PictureSlots slots;
  bool used = true;  // false until a B-VOP has gone in (after_b_frames)
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
  bool b_vop = false;
  if (!s.used) {  // (once used, no packet is looked into)
    GstMapInfo map;
    if (gst_buffer_map(buffer, &map, GST_MAP_READ)) {
      b_vop = holds_mpeg4_b_vop(map.data, map.size);
      gst_buffer_unmap(buffer, &map);
    }
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  s.slots.packet(GST_BUFFER_DTS(buffer), GST_BUFFER_PTS(buffer), GST_BUFFER_DURATION(buffer));
  if (b_vop) s.used = true;
  return GST_PAD_PROBE_OK;
}

GstPadProbeReturn on_picture(GstPad*, GstPadProbeInfo* info, gpointer user) {
  SharedSlots& s = **static_cast<Slots*>(user);
  GstBuffer* buffer = GST_PAD_PROBE_INFO_BUFFER(info);
  if (!buffer) return GST_PAD_PROBE_OK;
  std::optional<std::pair<GstClockTime, GstClockTime>> slot;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    slot = s.slots.picture();  // (taken whether used or not: the slots keep step with the pictures)
    if (!s.used) return GST_PAD_PROBE_OK;
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

void time_pictures_by_their_slots(GstElement* decoder, bool after_b_frames) {
  GstPad* sink = gst_element_get_static_pad(decoder, "sink");
  GstPad* src = gst_element_get_static_pad(decoder, "src");
  if (sink && src) {
    const auto slots = std::make_shared<SharedSlots>();
    slots->used = !after_b_frames;
    auto forget = [](gpointer data) { delete static_cast<Slots*>(data); };
    gst_pad_add_probe(sink, static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM),
                      &on_packet, new Slots(slots), forget);
    gst_pad_add_probe(src, GST_PAD_PROBE_TYPE_BUFFER, &on_picture, new Slots(slots), forget);
  }
  if (sink) gst_object_unref(sink);
  if (src) gst_object_unref(src);
}

}  // namespace vapipe
