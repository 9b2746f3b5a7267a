// Logging behind the project's own macros (Holoscan's habit over spdlog). The level comes from the
// config (log.level) or the VAPIPE_LOG_LEVEL environment variable, which wins. Lines go to stderr,
// tagged with the process's role ("ingest", "run", ...). Never log a URI without redact_uri().
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace vapipe {

// Sets the process-wide logger: role tag and level ("info", "debug", ...).
void init_logging(const std::string& role, const std::string& level);

}  // namespace vapipe

#define VAPIPE_LOG_TRACE(...) SPDLOG_TRACE(__VA_ARGS__)
#define VAPIPE_LOG_DEBUG(...) ::spdlog::debug(__VA_ARGS__)
#define VAPIPE_LOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define VAPIPE_LOG_WARN(...) ::spdlog::warn(__VA_ARGS__)
#define VAPIPE_LOG_ERROR(...) ::spdlog::error(__VA_ARGS__)
