// Logging for translation units that must not include spdlog: those with LibTorch's headers. PyTorch
// 2.x wheels carry their own fmt (v12) in torch/include/fmt, which shadows the fmt spdlog was built
// with and breaks spdlog's templates; these take a finished line instead of a format string.
#pragma once

#include <string>

namespace vapipe {

void log_info_text(const std::string& line);
void log_warn_text(const std::string& line);

}  // namespace vapipe
