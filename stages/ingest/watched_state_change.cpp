#include "stages/ingest/watched_state_change.h"

namespace vapipe {

GstStateChangeReturn set_state_watched(GstElement* element, GstState state, StageWatchdog* watchdog) {
  if (watchdog) {
    // String literals: the watchdog keeps the pointer.
    watchdog->working(state == GST_STATE_NULL ? "stopping a stream's GStreamer pipeline (state NULL)"
                                              : "changing a stream's GStreamer pipeline state");
  }
  const GstStateChangeReturn r = gst_element_set_state(element, state);
  if (watchdog) watchdog->waiting();
  return r;
}

}  // namespace vapipe
