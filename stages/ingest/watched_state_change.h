// A GStreamer state change as ingest's own work, watched (pipeline/stage_watchdog.h). Taking a
// pipeline to NULL waits for its streaming threads to stop; a decoder whose thread never returns
// (seen with nvcodec's GL interop on a headless GPU machine: pipelines hung until killed) would block
// its stream's thread for ever, the stream silent and never reconnected. Watched, the call becomes a
// crash after job.stage_timeout_s: the backtrace says where, and the lane restarts.
#pragma once

#include <gst/gst.h>

#include "pipeline/stage_watchdog.h"

namespace vapipe {

// `watchdog` may be null (not watched).
GstStateChangeReturn set_state_watched(GstElement* element, GstState state, StageWatchdog* watchdog);

}  // namespace vapipe
