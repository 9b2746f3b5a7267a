#include "pipeline/shm_pool.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

namespace vapipe {
namespace {

using namespace std::chrono_literals;

std::string unique_name(const char* tag) { return "/vapipe-test-" + std::to_string(getpid()) + "-" + tag; }

TEST(ShmPool, FullPoolTimesOutAndReleasedSlotIsReused) {
  auto pool = ShmPool::create(unique_name("full"), 2, 1024);
  ASSERT_TRUE(pool.ok()) << pool.status().message();
  auto a = (*pool)->acquire(100, 10ms);
  auto b = (*pool)->acquire(100, 10ms);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*pool)->free_slots(), 0u);
  auto c = (*pool)->acquire(100, 20ms);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kTimeout);
  a.value().reset();  // releases the slot
  EXPECT_EQ((*pool)->free_slots(), 1u);
  EXPECT_TRUE((*pool)->acquire(100, 10ms).ok());
}

TEST(ShmPool, OversizedPayloadIsAnErrorNamingThePool) {
  auto pool = ShmPool::create(unique_name("big"), 1, 1024);
  ASSERT_TRUE(pool.ok());
  auto p = (*pool)->acquire(4096, 10ms);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("does not fit"), std::string::npos);
}

TEST(ShmPool, CancelStopsAWaitingAcquire) {
  auto pool = ShmPool::create(unique_name("cancel"), 1, 64);
  ASSERT_TRUE(pool.ok());
  auto held = (*pool)->acquire(8, 10ms);
  std::atomic<bool> cancel{true};
  auto p = (*pool)->acquire(8, 5s, &cancel);
  EXPECT_EQ(p.status().code(), StatusCode::kCancelled);
}

// The real use: another process maps the pool by name, adopts a handed-off slot, reads it and
// releases it; the owner sees the slot come back.
TEST(ShmPool, AnotherProcessAdoptsReadsAndReleasesASlot) {
  const std::string name = unique_name("xproc");
  auto pool = ShmPool::create(name, 4, 4096);
  ASSERT_TRUE(pool.ok());
  auto payload = (*pool)->acquire(11, 10ms);
  ASSERT_TRUE(payload.ok());
  std::memcpy(payload->data(), "hello slots", 11);
  ShmSlotRef ref = *payload->storage()->shm_ref();
  payload->storage()->hand_off();
  payload.value().reset();
  EXPECT_EQ((*pool)->free_slots(), 3u);  // handed off: still held

  pid_t child = fork();
  if (child == 0) {
    auto other = ShmPool::open(name);
    if (!other.ok()) _exit(10);
    auto adopted = (*other)->adopt(ref, 11);
    if (!adopted.ok()) _exit(11);
    if (std::memcmp(adopted->data(), "hello slots", 11) != 0) _exit(12);
    // A second adoption of the same descriptor after release must fail (stale).
    adopted.value().reset();
    auto again = (*other)->adopt(ref, 11);
    _exit(again.ok() ? 13 : 0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ((*pool)->free_slots(), 4u);
}

TEST(ShmPool, OpenOfAMissingPoolIsNotFound) {
  auto p = ShmPool::open("/vapipe-test-does-not-exist");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kNotFound);
}

TEST(ShmPool, ADevicePoolWithoutAGpuIsAClearErrorAndLeavesNothingBehind) {
  const std::string name = unique_name("device");
  auto pool = ShmPool::create(name, 2, 4096, /*device=*/0);
  if (pool.ok()) GTEST_SKIP() << "this machine has a GPU (tests/pipeline/cuda covers device pools there)";
  EXPECT_NE(pool.status().message().find("device pool " + name), std::string::npos) << pool.status().message();
  auto opened = ShmPool::open(name);
  EXPECT_FALSE(opened.ok()) << "the shared name must be unlinked when the GPU memory cannot be had";
}

}  // namespace
}  // namespace vapipe
