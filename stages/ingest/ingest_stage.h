#pragma once

#include "pipeline/job_layout.h"
#include "pipeline/signals.h"

namespace vapipe {

// The ingest process: one StreamReader (and one thread, and one output socket) per stream, all
// writing frames into the frame pool this process owns. Returns when every stream has ended.
Status run_ingest(const Config& config, const JobLayout& layout, ShutdownFlags& flags);

}  // namespace vapipe
