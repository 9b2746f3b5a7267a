#include "pipeline/logging.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace vapipe {
namespace {

// A stage of a live job follows the log.level of the job's copy of its config, which a reload rewrites
// (a new file, renamed over the old, as vapipe run writes it); VAPIPE_LOG_LEVEL wins over it.
TEST(LogLevelFollower, TakesTheLevelOfTheRewrittenCopyUnlessTheEnvironmentSetsOne) {
  const auto before = spdlog::default_logger()->level();
  const char* env = std::getenv("VAPIPE_LOG_LEVEL");
  const std::string env_before = env ? env : "";
  ::unsetenv("VAPIPE_LOG_LEVEL");
  const std::filesystem::path copy =
      std::filesystem::temp_directory_path() / ("vapipe-log-level-" + std::to_string(getpid()) + ".yaml");
  auto rewrite = [&](const std::string& text) {
    std::ofstream(copy.string() + ".new") << text;
    std::filesystem::rename(copy.string() + ".new", copy);
  };
  rewrite("job: {mode: live}\n");
  spdlog::default_logger()->set_level(spdlog::level::info);
  LogLevelFollower follower(copy.string());
  auto now = std::chrono::steady_clock::now();
  follower.check(now);  // the copy as it was: the level in force stays
  EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::info);
  rewrite("job: {mode: live}\nlog: {level: debug}\n");
  follower.check(now + std::chrono::milliseconds(500));  // looked at once a second
  EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::info);
  follower.check(now += std::chrono::seconds(2));
  EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::debug);
  rewrite("x-quiet: &quiet {level: warn}\njob: {mode: live}\nlog: {<<: *quiet}\n");  // merged, as the reader takes it
  follower.check(now += std::chrono::seconds(2));
  EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::warn);
  rewrite("job: {mode: live}\n");  // the section removed: the default's
  follower.check(now += std::chrono::seconds(2));
  EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::info);
  ::setenv("VAPIPE_LOG_LEVEL", "warn", 1);
  rewrite("job: {mode: live}\nlog: {level: trace}\n");
  follower.check(now += std::chrono::seconds(2));
  EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::info);
  EXPECT_FALSE(set_log_level("error"));
  ::unsetenv("VAPIPE_LOG_LEVEL");
  LogLevelFollower nothing("");
  nothing.check(now += std::chrono::seconds(2));
  std::filesystem::remove(copy);
  spdlog::default_logger()->set_level(before);
  if (!env_before.empty()) ::setenv("VAPIPE_LOG_LEVEL", env_before.c_str(), 1);
}

// VAPIPE_LOG_LEVEL in any case, with spdlog's other spellings; one that names no level is refused
// (spdlog would take "Info" as "off", and the job's errors would go unsaid).
TEST(LogLevelFromEnvironment, TakesAnyCaseAndTellsANameThatIsNoLevel) {
  const char* env = std::getenv("VAPIPE_LOG_LEVEL");
  const std::string env_before = env ? env : "";
  ::unsetenv("VAPIPE_LOG_LEVEL");
  EXPECT_EQ(log_level_from_environment(), std::optional<std::string>(""));
  for (const auto& [given, level] : std::vector<std::pair<std::string, std::string>>{
           {"Info", "info"}, {"DEBUG", "debug"}, {"warning", "warn"}, {"ERR", "error"}, {"off", "off"}, {"trace", "trace"}}) {
    ::setenv("VAPIPE_LOG_LEVEL", given.c_str(), 1);
    EXPECT_EQ(log_level_from_environment(), std::optional<std::string>(level)) << given;
  }
  for (const char* wrong : {"bogus", "debgu", "inf", "1"}) {
    ::setenv("VAPIPE_LOG_LEVEL", wrong, 1);
    EXPECT_EQ(log_level_from_environment(), std::nullopt) << wrong;
  }
  ::unsetenv("VAPIPE_LOG_LEVEL");
  if (!env_before.empty()) ::setenv("VAPIPE_LOG_LEVEL", env_before.c_str(), 1);
}

}  // namespace
}  // namespace vapipe
