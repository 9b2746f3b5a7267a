#include "stages/ingest/watched_state_change.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

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

bool stop_pipeline_within(GstElement* pipeline, std::chrono::milliseconds limit) {
  struct Done {
    std::mutex mutex;
    std::condition_variable changed;
    bool stopped = false;
  };
  auto done = std::make_shared<Done>();
  try {
    std::thread([pipeline, done] {
      gst_element_set_state(pipeline, GST_STATE_NULL);
      gst_object_unref(pipeline);
      std::lock_guard<std::mutex> lock(done->mutex);
      done->stopped = true;
      done->changed.notify_all();
    }).detach();
  } catch (const std::system_error&) {
    // No thread to be had (an address-space or thread limit reached): stopped here, however long it
    // takes, rather than the process aborted on the exception.
    gst_element_set_state(pipeline, GST_STATE_NULL);
    gst_object_unref(pipeline);
    return true;
  }
  std::unique_lock<std::mutex> lock(done->mutex);
  return done->changed.wait_for(lock, limit, [&] { return done->stopped; });
}

}  // namespace vapipe
