// Logging behind the project's own macros (Holoscan's habit over spdlog). The level comes from the
// config (log.level) or the VAPIPE_LOG_LEVEL environment variable, which wins. Lines go to stderr,
// tagged with the process's role ("ingest", "run", ...). Never log a URI without redact_uri().
#pragma once

#include <spdlog/spdlog.h>

#include <chrono>
#include <optional>
#include <string>

namespace vapipe {

// Sets the process-wide logger: role tag and level ("info", "debug", ...).
void init_logging(const std::string& role, const std::string& level);

// VAPIPE_LOG_LEVEL as a level log.level takes ("trace", "debug", "info", "warn", "error", "off"; any
// case, "warning" and "err" too); "" when it is unset or empty; nullopt when it names no level (spdlog
// would take it as "off", silencing even the errors: `vapipe` refuses to start instead).
std::optional<std::string> log_level_from_environment();

// Sets the level of the process's logger (a reload's log.level); false, and nothing changes, when
// VAPIPE_LOG_LEVEL is set (it wins) or the level is the one in force.
bool set_log_level(const std::string& level);

// A live job's log.level changed by a reload (SIGHUP): `vapipe run` rewrites the job's copy of its
// config (pipeline/publish_reload.h), and each stage process looks at the copy once a second (a
// stat) and takes the level it names: debug logging for a camera's trouble, without a restart.
class LogLevelFollower {
 public:
  // `copy`: the copy's path; empty: follows nothing. The level in force is the copy's as it is now.
  explicit LogLevelFollower(std::string copy);
  void check(std::chrono::steady_clock::time_point now);

 private:
  std::string copy_;
  std::optional<std::string> identity_;
  std::chrono::steady_clock::time_point next_{};
};

}  // namespace vapipe

#define VAPIPE_LOG_TRACE(...) SPDLOG_TRACE(__VA_ARGS__)
#define VAPIPE_LOG_DEBUG(...) ::spdlog::debug(__VA_ARGS__)
#define VAPIPE_LOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define VAPIPE_LOG_WARN(...) ::spdlog::warn(__VA_ARGS__)
#define VAPIPE_LOG_ERROR(...) ::spdlog::error(__VA_ARGS__)
