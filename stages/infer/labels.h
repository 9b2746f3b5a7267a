#pragma once

#include <string>
#include <vector>

#include "pipeline/status.h"

namespace vapipe {

// A labels file: one label per line, line i naming class i. Blank lines are errors (they would
// shift every label after them); trailing whitespace is trimmed, and a leading byte order mark. The
// text must be UTF-8 (an error names the line and column of the first byte that is not).
Result<std::vector<std::string>> load_labels(const std::string& path);

}  // namespace vapipe
