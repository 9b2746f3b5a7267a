#include "pipeline/orphan_guard.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "tests/fakes/child_process.h"

namespace vapipe {
namespace {

using namespace std::chrono_literals;

// In a child whose "vapipe run" is `supervisor` (VAPIPE_SUPERVISOR_PID), stopped or not: what became of
// it within `wait` (said "lived", or exited by the guard with status 2) and whether the pool is named.
testing::ChildOutcome guarded_child(const std::string& supervisor, bool stopped, const JobLayout& layout,
                                    std::chrono::milliseconds wait) {
  return testing::said_by_child([&] {
    ::setenv("VAPIPE_SUPERVISOR_PID", supervisor.c_str(), 1);
    ShutdownFlags flags;
    flags.stop = stopped;
    const OrphanGuard guard(flags, layout, 100ms, "test stage", 0ms);
    std::this_thread::sleep_for(wait);
    return std::string("lived");
  });
}

JobLayout layout_with_pool(const std::string& name) {
  JobLayout layout;
  layout.by_reference = true;
  layout.frame_pool = "/vapipe-orphan-test-" + std::to_string(getpid()) + "-" + name;
  layout.tensor_pool = layout.frame_pool + "-tensors";
  const int fd = ::shm_open(layout.frame_pool.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd >= 0) ::close(fd);
  return layout;
}

bool pool_named(const JobLayout& layout) {
  const int fd = ::shm_open(layout.frame_pool.c_str(), O_RDONLY, 0);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

// Its vapipe run gone (its parent is not the one named) and told to stop: it exits once the drain had its
// time, the job's pools unnamed.
TEST(OrphanGuard, AStoppedStageWhoseVapipeRunIsGoneExitsAfterTheDrain) {
  const JobLayout layout = layout_with_pool("gone");
  ASSERT_TRUE(pool_named(layout));
  const auto outcome = guarded_child("2", /*stopped=*/true, layout, 3000ms);
  EXPECT_TRUE(WIFEXITED(outcome.status) && WEXITSTATUS(outcome.status) == 2) << outcome.status;
  EXPECT_EQ(outcome.said, "");
  EXPECT_FALSE(pool_named(layout));
}

// Not stopped, or its vapipe run still its parent: nothing happens.
TEST(OrphanGuard, AStageThatIsNotStoppedOrStillHasItsVapipeRunGoesOn) {
  const JobLayout layout = layout_with_pool("kept");
  EXPECT_EQ(guarded_child("2", /*stopped=*/false, layout, 600ms).said, "lived");
  EXPECT_EQ(guarded_child(std::to_string(getpid()), /*stopped=*/true, layout, 600ms).said, "lived");
  EXPECT_TRUE(pool_named(layout));
  ::shm_unlink(layout.frame_pool.c_str());
}

}  // namespace
}  // namespace vapipe
