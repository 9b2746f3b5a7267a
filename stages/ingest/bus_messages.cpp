#include "stages/ingest/bus_messages.h"

#include <cstdint>

namespace vapipe {

bool is_video_continuity_error(GstMessage* warning) {
  if (GST_MESSAGE_TYPE(warning) != GST_MESSAGE_WARNING) return false;
  const GstStructure* details = nullptr;
  gst_message_parse_warning_details(warning, &details);
  if (!details || g_strcmp0(gst_structure_get_string(details, "warning-type"), "continuity-mismatch") != 0) return false;
  const char* pad = gst_structure_get_string(details, "pad-name");
  return !pad || g_str_has_prefix(pad, "video");
}

void drain_bus_up_to_error(GstBus* bus, std::atomic<uint64_t>* continuity_errors) {
  while (GstMessage* head = gst_bus_peek(bus)) {
    const bool error = GST_MESSAGE_TYPE(head) == GST_MESSAGE_ERROR;
    gst_message_unref(head);
    if (error) return;
    GstMessage* m = gst_bus_pop(bus);  // the same one: only this thread takes messages off this bus
    if (!m) return;
    if (is_video_continuity_error(m)) continuity_errors->fetch_add(1);
    gst_message_unref(m);
  }
}

}  // namespace vapipe
