// Device pools: GPU memory shared between real processes through CUDA IPC (ctest label gpu). The
// producer writes a slot on its stream and records the slot's event; a separate process adopts the
// descriptor, waits on the event and reads the slot. Skips cleanly without a GPU.
#include <cstdint>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "pipeline/cuda/device_memory.h"
#include "pipeline/cuda/gpu_info.h"
#include "pipeline/shm_pool.h"

namespace vapipe {
namespace {

using namespace std::chrono_literals;

std::string unique_name(const char* tag) { return "/vapipe-gputest-" + std::to_string(getpid()) + "-" + tag; }

bool have_gpu() { return !probe_gpus(false).devices.empty(); }

std::vector<uint8_t> pattern(size_t bytes, unsigned seed) {
  std::vector<uint8_t> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<uint8_t>((i * 7 + seed) & 0xff);
  return v;
}

int run_peer(const ShmSlotRef& ref, size_t bytes, unsigned seed) {
  pid_t pid = fork();
  if (pid == 0) {
    std::string slot = std::to_string(ref.slot), gen = std::to_string(ref.generation), n = std::to_string(bytes),
                s = std::to_string(seed);
    execl(VAPIPE_CUDA_IPC_PEER, VAPIPE_CUDA_IPC_PEER, ref.pool.c_str(), slot.c_str(), gen.c_str(), n.c_str(),
          s.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(CudaIpcPool, AnotherProcessReadsWhatTheProducerWroteOnItsStream) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  constexpr size_t kBytes = 1920 * 1080 * 3 / 2;  // a 1080p NV12 frame
  auto pool = ShmPool::create(unique_name("ipc"), 4, kBytes, /*device=*/0);
  ASSERT_TRUE(pool.ok()) << pool.status().message();
  EXPECT_EQ((*pool)->device(), 0);
  auto stream = CudaStream::create(0);
  ASSERT_TRUE(stream.ok()) << stream.status().message();

  for (unsigned round = 0; round < 6; ++round) {  // more rounds than slots: slots come back and are reused
    auto payload = (*pool)->acquire(kBytes, 1000ms);
    ASSERT_TRUE(payload.ok()) << payload.status().message();
    ASSERT_EQ(payload->device(), 0);
    ASSERT_TRUE(is_device_pointer(payload->data()));
    const std::vector<uint8_t> bytes = pattern(kBytes, round);
    ASSERT_TRUE(cuda_copy(payload->data(), bytes.data(), kBytes, (*stream)->get()).ok());
    ASSERT_TRUE(payload->record_ready((*stream)->get()).ok());  // no host sync: the event orders the peer
    const ShmSlotRef ref = *payload->storage()->shm_ref();
    payload->storage()->hand_off();
    payload->reset();
    EXPECT_EQ(run_peer(ref, kBytes, round), 0) << "round " << round;
  }
  // Every slot came back from the peer.
  EXPECT_EQ((*pool)->free_slots(), 4u);
}

TEST(CudaIpcPool, AStaleDescriptorIsRefusedByThePeer) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  auto pool = ShmPool::create(unique_name("stale"), 1, 4096, 0);
  ASSERT_TRUE(pool.ok()) << pool.status().message();
  auto payload = (*pool)->acquire(4096, 100ms);
  ASSERT_TRUE(payload.ok());
  ShmSlotRef ref = *payload->storage()->shm_ref();
  ref.generation += 1;  // names a reuse of the slot that has not happened
  EXPECT_EQ(run_peer(ref, 4096, 0), 2);
}

TEST(CudaIpcPool, InTheOwnerProcessTheRegistryReturnsTheOwner) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  auto pool = ShmPool::create(unique_name("self"), 2, 4096, 0);
  ASSERT_TRUE(pool.ok()) << pool.status().message();
  ShmPoolRegistry registry;
  auto opened = registry.get((*pool)->name());
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  EXPECT_EQ(opened->get(), pool->get());  // CUDA IPC handles cannot be opened by their exporter
}

}  // namespace
}  // namespace vapipe
