#include "pipeline/logging.h"
#include "pipeline/log_text.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cstdlib>

#include "pipeline/atomic_file.h"
#include "pipeline/config_sections.h"
#include "pipeline/file_identity.h"

namespace vapipe {

std::optional<std::string> log_level_from_environment() {
  const char* env = std::getenv("VAPIPE_LOG_LEVEL");
  if (!env || !*env) return std::string();
  std::string level = env;
  for (char& c : level) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (level == "warning") level = "warn";
  if (level == "err") level = "error";
  for (const char* known : {"trace", "debug", "info", "warn", "error", "off"}) {
    if (level == known) return level;
  }
  return std::nullopt;
}

void init_logging(const std::string& role, const std::string& level) {
  auto logger = spdlog::stderr_color_mt("vapipe-" + role);
  logger->set_pattern("%Y-%m-%d %H:%M:%S.%e [%^%l%$] [" + role + " %P] %v");
  std::string effective = level;
  // (One that names no level is refused by `vapipe` before any process starts; should it get here,
  // the config's level stands rather than spdlog's "off".)
  if (const std::optional<std::string> env = log_level_from_environment(); env && !env->empty()) effective = *env;
  logger->set_level(spdlog::level::from_str(effective));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

bool set_log_level(const std::string& level) {
  if (const char* env = std::getenv("VAPIPE_LOG_LEVEL"); env && *env) return false;
  const auto wanted = spdlog::level::from_str(level);
  if (spdlog::default_logger()->level() == wanted) return false;
  spdlog::default_logger()->set_level(wanted);
  return true;
}

LogLevelFollower::LogLevelFollower(std::string copy) : copy_(std::move(copy)) {
  if (!copy_.empty()) identity_ = file_identity(copy_);
}

void LogLevelFollower::check(std::chrono::steady_clock::time_point now) {
  if (copy_.empty() || now < next_) return;
  next_ = now + std::chrono::seconds(1);
  const std::string identity = file_identity(copy_);
  if (identity == identity_) return;
  identity_ = identity;
  auto text = read_file_bytes(copy_);
  if (!text.ok()) return;  // (publish and the supervisor say what is wrong with it)
  std::string level = "info";
  try {
    // As the config reader takes it: `log: {<<: *defaults}` too.
    const YAML::Node doc = YAML::Load(*text);
    const auto log = mapping_keys(doc.IsMap() ? doc["log"] : YAML::Node());
    if (auto it = log.find("level"); it != log.end() && it->second.IsScalar()) level = it->second.Scalar();
  } catch (const YAML::Exception&) {
    return;
  }
  if (set_log_level(level)) VAPIPE_LOG_WARN("log level {} from now on (a reload changed log.level)", level);
}

void log_info_text(const std::string& line) { VAPIPE_LOG_INFO("{}", line); }
void log_warn_text(const std::string& line) { VAPIPE_LOG_WARN("{}", line); }

}  // namespace vapipe
