#pragma once

#include <string>
#include <vector>

#include "pipeline/config.h"
#include "pipeline/status.h"

namespace vapipe {

// A labels file: one label per line, line i naming class i. Blank lines are errors (they would
// shift every label after them); trailing whitespace is trimmed, and a leading byte order mark. The
// text must be UTF-8 (an error names the line and column of the first byte that is not).
Result<std::vector<std::string>> load_labels(const std::string& path);

// The labels the config names by themselves (publish.segments_min_score_by_label, publish.webhooks[].labels)
// must be labels of the labels file: a typo would otherwise just never match. The error names the config
// file and line.
Status check_labels_the_config_names(const Config& config, const std::vector<std::string>& labels);

}  // namespace vapipe
