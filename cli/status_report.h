// What `vapipe status` prints: a job's streams at a glance, from the document publish serves at
// /healthz (stages/publish/metrics.h, health_json). The document comes over the network, perhaps from
// another program on that port or another version of vapipe, so every field is read as possibly
// missing or of another type: the report leaves it out ("-") rather than throwing.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "pipeline/status.h"

namespace vapipe::cli {

// The report's lines, each ending in '\n'; an error when `healthz` is not a JSON object (`source`,
// the URL it came from, names it).
Result<std::string> status_report(const nlohmann::json& healthz, const std::string& source);

}  // namespace vapipe::cli
