#include "pipeline/logging.h"
#include "pipeline/log_text.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>

namespace vapipe {

void init_logging(const std::string& role, const std::string& level) {
  auto logger = spdlog::stderr_color_mt("vapipe-" + role);
  logger->set_pattern("%Y-%m-%d %H:%M:%S.%e [%^%l%$] [" + role + " %P] %v");
  std::string effective = level;
  if (const char* env = std::getenv("VAPIPE_LOG_LEVEL"); env && *env) effective = env;
  logger->set_level(spdlog::level::from_str(effective));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

void log_info_text(const std::string& line) { VAPIPE_LOG_INFO("{}", line); }
void log_warn_text(const std::string& line) { VAPIPE_LOG_WARN("{}", line); }

}  // namespace vapipe
