// streams[].source on a GPU lane (ctest label gpu): a decoded frame in a device pool slot reaches each
// stream of its group as a device-to-device copy in a slot of its own, with the same bytes, and the
// slots go back to the pool. Skips cleanly without a GPU.
#include <cstdint>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "pipeline/cuda/device_memory.h"
#include "pipeline/cuda/gpu_info.h"
#include "pipeline/shm_pool.h"
#include "stages/ingest/stream_fan_out.h"

namespace vapipe {
namespace {

using namespace std::chrono_literals;

class DevicePoolEmitter final : public Emitter {
 public:
  explicit DevicePoolEmitter(std::shared_ptr<ShmPool> pool) : pool_(std::move(pool)) {}
  Status emit(Message&& m) override {
    messages.push_back(std::move(m));
    return Status::Ok();
  }
  Result<Payload> allocate(size_t bytes) override { return pool_->acquire(bytes, 5000ms); }
  std::vector<Message> messages;

 private:
  std::shared_ptr<ShmPool> pool_;
};

TEST(StreamFanOutOnGpu, EachStreamGetsADeviceCopyOfItsOwnWithTheSameBytes) {
  if (probe_gpus(false).devices.empty()) GTEST_SKIP() << "no GPU";
  constexpr uint32_t kWidth = 640, kHeight = 360;
  const size_t bytes = size_t{kWidth} * kHeight * 3 / 2;  // NV12
  auto pool = ShmPool::create("/vapipe-gputest-" + std::to_string(getpid()) + "-fanout", 4, bytes, 0);
  ASSERT_TRUE(pool.ok()) << pool.status().message();
  DevicePoolEmitter out(*pool);
  auto target = [](uint32_t index, std::string id, std::array<double, 4> roi) {
    FanOutTarget t;
    t.index = index;
    t.id = std::move(id);
    t.roi = roi;
    return t;
  };
  const FanOutTarget door = target(0, "door", {0, 0, 0.5, 1}), gate = target(1, "gate", {0.5, 0, 0.5, 1}),
                     wide = target(2, "wide", {0, 0, 1, 1});
  StreamFanOut fan(0, "file:///clip.mp4", {door, gate, wide}, nullptr);
  fan.attach(&out);
  // The source's start first, as its reader sends it: each stream of the group says its own.
  Envelope source;
  source.stream_id = "door";
  ASSERT_TRUE(fan.emit(Message::stream_event(MessageKind::kStreamStart, source,
                                             StreamEvent{"file:///clip.mp4", "", 0, 0})).ok());
  ASSERT_EQ(out.messages.size(), 3u);
  for (const Message& got : out.messages) EXPECT_EQ(got.kind, MessageKind::kStreamStart) << got.env.stream_id;
  out.messages.clear();

  for (unsigned frame = 0; frame < 3; ++frame) {  // 3 frames x 3 streams through 4 slots: they come back
    std::vector<uint8_t> host(bytes);
    for (size_t i = 0; i < bytes; ++i) host[i] = static_cast<uint8_t>((i * 13 + frame * 7) & 0xff);
    Message m;
    m.kind = MessageKind::kFrame;
    m.env.stream_id = "door";
    m.env.seq = frame;
    m.frame.format = PixelFormat::kNV12;
    m.frame.width = kWidth;
    m.frame.height = kHeight;
    m.frame.stride = {kWidth, kWidth, 0};
    m.frame.offset = {0, kWidth * kHeight, 0};
    auto payload = out.allocate(bytes);
    ASSERT_TRUE(payload.ok()) << payload.status().message();
    m.payload = std::move(*payload);
    ASSERT_TRUE(m.payload.on_device());
    ASSERT_TRUE(cuda_copy(m.payload.data(), host.data(), bytes, nullptr).ok());
    const std::byte* original = m.payload.data();
    ASSERT_TRUE(fan.emit(std::move(m)).ok());

    ASSERT_EQ(out.messages.size(), 3u);
    std::set<const std::byte*> pointers;
    for (const Message& got : out.messages) {
      ASSERT_EQ(got.kind, MessageKind::kFrame) << got.env.stream_id;
      ASSERT_TRUE(got.payload.on_device()) << got.env.stream_id;
      EXPECT_EQ(got.env.seq, frame);
      pointers.insert(got.payload.data());
      std::vector<uint8_t> back(bytes);
      ASSERT_TRUE(cuda_copy(back.data(), got.payload.data(), bytes, nullptr).ok());
      EXPECT_EQ(back, host) << got.env.stream_id << " frame " << frame;
    }
    EXPECT_EQ(pointers.size(), 3u) << "a slot of its own each";
    EXPECT_EQ(out.messages.back().payload.data(), original) << "the last stream takes the decoded original";
    EXPECT_EQ(out.messages[0].frame.crop, (std::array<uint32_t, 4>{0, 0, 320, 360}));
    EXPECT_EQ(out.messages[1].frame.crop, (std::array<uint32_t, 4>{320, 0, 320, 360}));
    EXPECT_EQ(out.messages[2].frame.crop, (std::array<uint32_t, 4>{0, 0, 0, 0}));
    out.messages.clear();  // downstream done with them: the slots go back
    EXPECT_EQ((*pool)->free_slots(), 4u);
  }
}

}  // namespace
}  // namespace vapipe
