// publish.jsonl_path named by the time: which paths are, which conversions they may use, the file of
// a moment in the local time zone, and the one file the job's lock is taken on.
#include "pipeline/results_path.h"

#include <cstdint>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

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

// What publish.jsonl_keep may delete: the files the pattern named, oldest first; nothing it did not
// name (another file, a name it would have written otherwise), even in its folders.
TEST(ResultsPath, TheFilesAPatternNamedAreFoundOldestFirstAndNothingElse) {
  testing::LocalZone zone("UTC0");
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("vapipe-results-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  const std::string pattern = (dir / "%Y" / "%m" / "cams-%d.jsonl").string();
  constexpr int64_t kDay = 86400, k20261130 = 1796083200 - kDay;  // 2026-11-30 00:00 UTC
  for (int64_t day : {2, 0, 1}) {  // 30 Nov, 1 and 2 Dec, made out of order
    const std::filesystem::path file = results_file_at(pattern, k20261130 + day * kDay);
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << "x\n";
  }
  for (const char* other : {"2026/12/cams-2.jsonl", "2026/12/cams-02.jsonl.gz", "2026/12/notes.txt", "2026/13/cams-01.jsonl"}) {
    std::filesystem::create_directories((dir / other).parent_path());
    std::ofstream(dir / other) << "x\n";
  }
  const std::vector<TimedResultsFile> files = timed_results_files(pattern);
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0].path, (dir / "2026/11/cams-30.jsonl").string());
  EXPECT_EQ(files[0].unix_s, k20261130);
  EXPECT_EQ(files[1].path, (dir / "2026/12/cams-01.jsonl").string());
  EXPECT_EQ(files[2].path, (dir / "2026/12/cams-02.jsonl").string());
  EXPECT_TRUE(timed_results_files((dir / "results.jsonl").string()).empty());  // not timed
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace vapipe
