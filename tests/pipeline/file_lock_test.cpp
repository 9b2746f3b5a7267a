#include "pipeline/file_lock.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace vapipe {
namespace {

namespace fs = std::filesystem;

class FileLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("vapipe-lock-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    path_ = (dir_ / "results.jsonl").string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  std::string path_;
};

// `vapipe run`'s lock, shared with its stages: a stage that outlives it (the supervisor killed, publish
// still draining into the file) keeps the file locked; the lock goes with the last of them.
TEST_F(FileLockTest, ALockSharedWithChildrenIsHeldWhileAChildLives) {
  pid_t child = -1;
  {
    auto lock = FileLock::acquire(path_, "publish.jsonl_path");
    ASSERT_TRUE(lock.ok() && lock->held());
    lock->share_with_children();
    child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      execlp("sleep", "sleep", "30", static_cast<char*>(nullptr));  // (a stage: exec'd, as vapipe run starts them)
      _exit(127);
    }
  }  // this process's descriptor closed
  auto meanwhile = FileLock::acquire(path_, "publish.jsonl_path");
  EXPECT_FALSE(meanwhile.ok()) << "the child's inherited descriptor keeps the lock";
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  auto after = FileLock::acquire(path_, "publish.jsonl_path");
  ASSERT_TRUE(after.ok()) << after.status().message();
  EXPECT_TRUE(after->held());
}

// Not shared (the default), an exec'd child does not hold it.
TEST_F(FileLockTest, ALockNotSharedIsNotHeldByAChild) {
  pid_t child = -1;
  {
    auto lock = FileLock::acquire(path_, "publish.jsonl_path");
    ASSERT_TRUE(lock.ok() && lock->held());
    int exec_seen[2];  // closed on exec: read to its end once the child has exec'd (its fork's copy gone)
    ASSERT_EQ(pipe2(exec_seen, O_CLOEXEC), 0);
    child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      execlp("sleep", "sleep", "30", static_cast<char*>(nullptr));
      _exit(127);
    }
    close(exec_seen[1]);
    char byte;
    while (read(exec_seen[0], &byte, 1) > 0) {
    }
    close(exec_seen[0]);
  }
  auto meanwhile = FileLock::acquire(path_, "publish.jsonl_path");
  EXPECT_TRUE(meanwhile.ok()) << meanwhile.status().message();
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

TEST_F(FileLockTest, ASecondWriterIsRefusedNamingTheKeyAndTheFileAndTheContentIsKept) {
  std::ofstream(path_) << "{\"topic\":\"results/a\"}\n";
  auto first = FileLock::acquire(path_, "publish.jsonl_path");
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_TRUE(first->held());
  auto second = FileLock::acquire(path_, "publish.jsonl_path");  // another descriptor, as another job has
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("publish.jsonl_path " + path_ + " is being written by another vapipe job"),
            std::string::npos) << second.status().message();
  std::ifstream in(path_);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "{\"topic\":\"results/a\"}\n");  // locking neither truncates nor writes
  FileLock moved = std::move(first).value();
  EXPECT_TRUE(moved.held());
  moved = FileLock();  // released
  EXPECT_TRUE(FileLock::acquire(path_, "publish.jsonl_path").ok());
}

// A timed results path's lock, a file of its own beside its files, deleted with its folder (`rm -rf
// out/`): made again and locked, so that a second job on the path is still refused (it started, and
// both wrote into one file). The results file itself is not made by the lock (its writer makes it whole).
TEST_F(FileLockTest, AnOwnLockFileDeletedWithItsFolderIsMadeAgainAndHeld) {
  const std::string lock_path = (dir_ / "out" / "._Y-_m-_d.jsonl.lock").string();
  const std::string shown = (dir_ / "out" / "%Y-%m-%d.jsonl").string();
  fs::create_directories(dir_ / "out");
  auto lock = FileLock::acquire(lock_path, "publish.jsonl_path", shown);
  ASSERT_TRUE(lock.ok()) << lock.status().message();
  fs::remove_all(dir_ / "out");
  ASSERT_TRUE(lock->follow().ok());
  EXPECT_TRUE(fs::exists(lock_path));
  auto second = FileLock::acquire(lock_path, "publish.jsonl_path", shown);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  // The results file locked itself: not made again by the lock.
  auto plain = FileLock::acquire(path_, "publish.jsonl_path", path_);
  ASSERT_TRUE(plain.ok());
  fs::remove(path_);
  ASSERT_TRUE(plain->follow().ok());
  EXPECT_FALSE(fs::exists(path_));
}

TEST_F(FileLockTest, ALockDiesWithItsProcessHoweverItDies) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Another job's lock, taken with system calls only (no allocation after fork in a threaded test).
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT, 0644);
    const char ok = fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) == 0 ? 1 : 0;
    (void)!::write(ready[1], &ok, 1);
    ::pause();  // until SIGKILL: no destructor runs
    ::_exit(0);
  }
  char ok = 0;
  ASSERT_EQ(::read(ready[0], &ok, 1), 1);
  ASSERT_EQ(ok, 1);
  EXPECT_FALSE(FileLock::acquire(path_, "publish.jsonl_path").ok());  // held by the other process
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_TRUE(FileLock::acquire(path_, "publish.jsonl_path").ok());  // no stale lock
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST_F(FileLockTest, AFileThatCannotBeOpenedIsAnErrorNamingIt) {
  auto missing_folder = FileLock::acquire((dir_ / "no-such-folder" / "r.jsonl").string(), "publish.jsonl_path");
  ASSERT_FALSE(missing_folder.ok());
  EXPECT_NE(missing_folder.status().message().find("publish.jsonl_path " + (dir_ / "no-such-folder" / "r.jsonl").string() +
                                                   ": cannot open it"),
            std::string::npos) << missing_folder.status().message();
}

}  // namespace
}  // namespace vapipe
