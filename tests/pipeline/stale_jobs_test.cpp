// Leftovers of jobs that died without cleaning up: swept when no process of the job holds its lock,
// and only then. A temporary folder stands in for /tmp and another for /dev/shm.
#include "pipeline/stale_jobs.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace vapipe {
namespace {

namespace fs = std::filesystem;

class StaleJobs : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("stale-jobs-test-" + std::to_string(::getpid()));
    tmp_ = (root_ / "tmp").string();
    shm_ = (root_ / "shm").string();
    fs::create_directories(tmp_);
    fs::create_directories(shm_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // What a job leaves: its pools (`bytes` each) and its run folder with a socket file in it.
  void leave(const std::string& job_id, size_t bytes = 1000) {
    for (const char* pool : {"-frames-0", "-tensors-0", "-frames-1"}) {
      std::ofstream(shm_ + "/vapipe-" + job_id + pool) << std::string(bytes, 'x');
    }
    fs::create_directories(tmp_ + "/vapipe-" + job_id);
    std::ofstream(tmp_ + "/vapipe-" + job_id + "/ingest-0.sock") << "";
  }
  bool left(const std::string& job_id) const {
    return fs::exists(shm_ + "/vapipe-" + job_id + "-frames-0") || fs::exists(tmp_ + "/vapipe-" + job_id);
  }
  // A job that died: its lock file is there, and nobody holds it.
  void died(const std::string& job_id) { std::ofstream(tmp_ + "/vapipe-" + job_id + ".lock") << ""; }

  fs::path root_;
  std::string tmp_, shm_;
};

TEST_F(StaleJobs, ADeadJobsPoolsAndRunFolderAreRemovedAndALiveOnesKept) {
  leave("111-222", 1000);
  died("111-222");
  leave("333-444");
  auto live = JobLock::acquire("333-444", tmp_);
  ASSERT_TRUE(live.ok()) << live.status().message();
  ASSERT_TRUE(live->held());
  leave("555-666");  // no lock file: stages started by hand, or a job from before locks: never touched

  const SweptJobs swept = sweep_dead_jobs(tmp_, shm_);
  EXPECT_EQ(swept.job_ids, (std::vector<std::string>{"111-222"}));
  EXPECT_EQ(swept.shm_bytes, 3000u);
  EXPECT_FALSE(left("111-222"));
  EXPECT_FALSE(fs::exists(tmp_ + "/vapipe-111-222.lock"));
  EXPECT_TRUE(left("333-444"));
  EXPECT_TRUE(left("555-666"));
  EXPECT_TRUE(sweep_dead_jobs(tmp_, shm_).job_ids.empty());  // nothing more
}

// Job "a" died; job "a-2" (an id that starts with the other's) lives: its pools are its own.
TEST_F(StaleJobs, OnlyTheDeadJobsOwnPoolsGo) {
  leave("a");
  died("a");
  leave("a-2");
  std::ofstream(shm_ + "/vapipe-a-framesX") << "not a pool of ours";
  auto live = JobLock::acquire("a-2", tmp_);
  ASSERT_TRUE(live.ok());
  EXPECT_EQ(sweep_dead_jobs(tmp_, shm_).job_ids, (std::vector<std::string>{"a"}));
  EXPECT_FALSE(left("a"));
  EXPECT_TRUE(fs::exists(shm_ + "/vapipe-a-2-frames-0"));
  EXPECT_TRUE(fs::exists(shm_ + "/vapipe-a-2-tensors-0"));
  EXPECT_TRUE(fs::exists(shm_ + "/vapipe-a-framesX"));
}

// In /tmp anyone may put a file, or a link, named as a job's lock: a link is never followed (root made
// the file it named), and another user's lock file neither names a job to sweep nor is taken as ours.
TEST_F(StaleJobs, ALockThatIsALinkOrAnotherUsersIsNeitherFollowedNorSwept) {
  const fs::path target = root_ / "not-a-lock";
  fs::create_symlink(target, tmp_ + "/vapipe-linked.lock");
  auto linked = JobLock::acquire("linked", tmp_);
  ASSERT_FALSE(linked.ok());
  EXPECT_NE(linked.status().message().find("it is a symbolic link"), std::string::npos) << linked.status().message();
  EXPECT_FALSE(fs::exists(target));
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to give a file to another user";
  leave("theirs");
  std::ofstream(tmp_ + "/vapipe-theirs.lock") << "";
  ASSERT_EQ(::chown((tmp_ + "/vapipe-theirs.lock").c_str(), 65534, 65534), 0);
  EXPECT_TRUE(sweep_dead_jobs(tmp_, shm_).job_ids.empty());
  EXPECT_TRUE(left("theirs"));
  auto theirs = JobLock::acquire("theirs", tmp_);
  ASSERT_FALSE(theirs.ok());
  EXPECT_NE(theirs.status().message().find("is not this user's file (owned by uid 65534)"), std::string::npos)
      << theirs.status().message();
}

TEST_F(StaleJobs, AJobIdInUseIsRefusedAndFreedWhenItsJobEnds) {
  {
    auto first = JobLock::acquire("job", tmp_);
    ASSERT_TRUE(first.ok());
    auto second = JobLock::acquire("job", tmp_);
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(second.status().message().find("job id 'job' is in use by another `vapipe run`"), std::string::npos)
        << second.status().message();
  }
  EXPECT_FALSE(fs::exists(tmp_ + "/vapipe-job.lock"));  // a job that ends takes its lock file along
  EXPECT_TRUE(JobLock::acquire("job", tmp_).ok());
}

// The supervisor is killed (no destructor runs) while a stage it started still lives: the stage holds
// the inherited lock, so the job's pools, which it may still use, stay until it is gone too.
TEST_F(StaleJobs, AStageThatOutlivesItsSupervisorKeepsTheJobsLeftoversUntilItEnds) {
  leave("job");
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t supervisor = ::fork();
  ASSERT_GE(supervisor, 0);
  if (supervisor == 0) {
    auto lock = JobLock::acquire("job", tmp_);
    if (!lock.ok()) ::_exit(1);
    const pid_t stage = ::fork();
    if (stage == 0) {
      ::execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    (void)!::write(pipe_fds[1], &stage, sizeof stage);
    ::_exit(0);  // as if killed: the lock file stays, and the lock with the stage
  }
  pid_t stage = 0;
  ASSERT_EQ(::read(pipe_fds[0], &stage, sizeof stage), static_cast<ssize_t>(sizeof stage));
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  int status = 0;
  ASSERT_EQ(::waitpid(supervisor, &status, 0), supervisor);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_TRUE(fs::exists(tmp_ + "/vapipe-job.lock"));

  EXPECT_TRUE(sweep_dead_jobs(tmp_, shm_).job_ids.empty());
  EXPECT_TRUE(left("job"));
  ::kill(stage, SIGKILL);  // reparented: reaped by init, not by us
  for (int i = 0; i < 200 && ::kill(stage, 0) == 0; ++i) ::usleep(10000);
  SweptJobs swept;
  for (int i = 0; i < 100 && swept.job_ids.empty(); ++i) {  // the lock goes with the last holder
    swept = sweep_dead_jobs(tmp_, shm_);
    if (swept.job_ids.empty()) ::usleep(10000);
  }
  EXPECT_EQ(swept.job_ids, (std::vector<std::string>{"job"}));
  EXPECT_FALSE(left("job"));
}

}  // namespace
}  // namespace vapipe
