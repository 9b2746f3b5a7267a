// publish.jsonl_path named by the time: which paths are, which conversions they may use, the file of
// a moment in the local time zone, and the one file the job's lock is taken on.
#include "pipeline/results_path.h"

#include <gtest/gtest.h>

#include "tests/fakes/local_zone.h"

namespace vapipe {
namespace {

TEST(ResultsPath, APathWithDateConversionsIsTimed) {
  EXPECT_TRUE(results_path_is_timed("/var/lib/vapipe/results-%Y-%m-%d.jsonl"));
  EXPECT_FALSE(results_path_is_timed("/var/lib/vapipe/results.jsonl"));
  EXPECT_FALSE(results_path_is_timed("/data/100%%-kept.jsonl"));  // a literal '%'
  EXPECT_FALSE(results_path_is_timed("/data/50%"));
  EXPECT_TRUE(check_timed_results_path("/r/%Y/%m/%d/cams-%H.jsonl").ok());
  EXPECT_TRUE(check_timed_results_path("/r/%F.jsonl").ok());
  for (const auto& [path, words] : std::vector<std::pair<std::string, std::string>>{
           {"/r/%Y-%m-%d_%H%M%S.jsonl", "%S is not a conversion that names a date or an hour"},
           {"/r/%Z-%Y.jsonl", "%Z is not a conversion"},
           {"/r/results-%Y%", "ends with a lone '%'"},
           {"/r/100%%.jsonl", "holds no date or time conversion"}}) {
    const Status s = check_timed_results_path(path);
    EXPECT_FALSE(s.ok()) << path;
    EXPECT_NE(s.message().find(words), std::string::npos) << s.message();
  }
}

TEST(ResultsPath, TheFileOfAMomentIsNamedByTheLocalClock) {
  testing::LocalZone zone("CET-1CEST,M3.5.0,M10.5.0/3");
  constexpr int64_t k20261130T233000Z = 1796081400;  // 00:30 on 1 December in Central Europe
  EXPECT_EQ(results_file_at("/r/results-%Y-%m-%d.jsonl", k20261130T233000Z), "/r/results-2026-12-01.jsonl");
  EXPECT_EQ(results_file_at("/r/%Y/%m/%d/cams-%H.jsonl", k20261130T233000Z), "/r/2026/12/01/cams-00.jsonl");
  EXPECT_EQ(results_file_at("/r/100%%-%F.jsonl", k20261130T233000Z), "/r/100%-2026-12-01.jsonl");
}

TEST(ResultsPath, TheLockIsOneFileBesideThePattern) {
  EXPECT_EQ(results_lock_path("/var/lib/vapipe/results-%Y-%m-%d.jsonl"), "/var/lib/vapipe/.results-_Y-_m-_d.jsonl.lock");
  EXPECT_EQ(results_lock_path("/r/%Y/%m/cams.jsonl"), "/r/._Y__m_cams.jsonl.lock");
  EXPECT_EQ(results_lock_path("relative-%F.jsonl"), ".relative-_F.jsonl.lock");
  EXPECT_EQ(results_lock_path("/r/results.jsonl"), "/r/results.jsonl");  // not timed: the file itself
}

}  // namespace
}  // namespace vapipe
