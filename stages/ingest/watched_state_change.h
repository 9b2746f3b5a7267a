// A GStreamer state change as ingest's own work, watched (pipeline/stage_watchdog.h). Taking a
// pipeline to NULL waits for its streaming threads to stop; a decoder whose thread never returns
// (seen with nvcodec's GL interop on a headless GPU machine: pipelines hung until killed) would block
// its stream's thread for ever, the stream silent and never reconnected. Watched, the call becomes a
// crash after job.stage_timeout_s: the backtrace says where, and the lane restarts.
#pragma once

#include <gst/gst.h>

#include <chrono>

#include "pipeline/stage_watchdog.h"

namespace vapipe {

// `watchdog` may be null (not watched).
GstStateChangeReturn set_state_watched(GstElement* element, GstState state, StageWatchdog* watchdog);

// Takes `pipeline` to NULL on a thread of its own, waiting up to `limit` for it; the caller's reference
// is taken over (unreffed once stopped). False when it has not stopped by then: its thread is left to
// finish when it can. For a stream that ends (a stop) while a streaming thread is blocked in the
// kernel, as a file's read of a share that does not answer is: no state change returns until the read
// does, and the stream's end (and the stop of the job) would wait for it.
bool stop_pipeline_within(GstElement* pipeline, std::chrono::milliseconds limit);

}  // namespace vapipe
