#pragma once

#include "pipeline/job_layout.h"
#include "pipeline/placement.h"
#include "pipeline/signals.h"

namespace vapipe {

// The ingest process: one StreamReader (and one thread, and one output socket) per stream, all
// writing frames into the frame pool this process owns, for the streams of its lane. Returns when
// every one of them has ended. `lanes`: how many the job has (they share the machine's CPUs).
Status run_ingest(const Config& config, const JobLayout& layout, const Lane& lane, size_t lanes, ShutdownFlags& flags);

}  // namespace vapipe
