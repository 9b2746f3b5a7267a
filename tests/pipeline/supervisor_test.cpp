// When `vapipe run` restarts a job whose stage failed. (The restarts themselves, with real processes,
// are in tests/e2e/shutdown_test.py and resume_test.py.)
#include "pipeline/supervisor.h"

#include <cstdint>
#include <gtest/gtest.h>

namespace vapipe {
namespace {

Config job(JobMode mode, const std::string& jsonl) {
  Config c;
  c.job.mode = mode;
  c.publish.jsonl_path = jsonl;
  return c;
}

TEST(RestartRefusal, ACrashRestartsALiveJobUpToMaxRestartsInARow) {
  const Config live = job(JobMode::kLive, "");
  EXPECT_EQ(live.job.max_restarts, 3u);
  for (uint32_t done = 0; done < 3; ++done) EXPECT_EQ(restart_refusal(live, true, done, false), "") << done;
  EXPECT_EQ(restart_refusal(live, true, 3, false), " (not restarted: 3 restarts in a row, job.max_restarts)");
}

TEST(RestartRefusal, AnArchiveJobRestartsOnlyIfItCanResume) {
  EXPECT_EQ(restart_refusal(job(JobMode::kArchive, "/out/results.jsonl"), true, 0, false), "");
  EXPECT_NE(restart_refusal(job(JobMode::kArchive, ""), true, 0, false).find("publish.jsonl_path, which is not set"),
            std::string::npos);
}

TEST(RestartRefusal, StartUpErrorsStopsAndZeroRestartsAreNotRestarted) {
  Config live = job(JobMode::kLive, "");
  EXPECT_EQ(restart_refusal(live, false, 0, false), " (during start-up: a restart would fail the same way)");
  EXPECT_EQ(restart_refusal(live, true, 0, true), " (the job was being stopped)");
  live.job.max_restarts = 0;
  EXPECT_EQ(restart_refusal(live, true, 0, false), " (job.max_restarts is 0)");
}

}  // namespace
}  // namespace vapipe
