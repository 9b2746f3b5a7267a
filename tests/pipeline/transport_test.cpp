#include "pipeline/transport.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <thread>

namespace vapipe {
namespace {

using namespace std::chrono_literals;

std::string ipc_endpoint(const char* tag) {
  return "ipc:///tmp/vapipe-transport-test-" + std::to_string(getpid()) + "-" + tag + ".sock";
}

// ZeroMQ removes an ipc socket file when the socket closes, but the process may exit first.
class TransportTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const char* tag : {"shm", "bad"}) std::filesystem::remove(ipc_endpoint(tag).substr(6));
  }
};

Message frame_message(Payload payload, uint64_t seq) {
  Message m;
  m.kind = MessageKind::kFrame;
  m.env.stream_id = "s";
  m.env.seq = seq;
  m.frame.format = PixelFormat::kRGB;
  m.frame.width = 2;
  m.frame.height = 2;
  m.frame.stride = {6, 0, 0};
  m.payload = std::move(payload);
  return m;
}

TEST_F(TransportTest, ShmFramesCrossASocketByReferenceInOrder) {
  const std::string ep = ipc_endpoint("shm");
  auto receiver = MessageReceiver::bind(ep, 16);
  ASSERT_TRUE(receiver.ok()) << receiver.status().message();
  auto sender = MessageSender::connect(ep, /*by_reference=*/true, 16);
  ASSERT_TRUE(sender.ok());
  auto pool = ShmPool::create("/vapipe-test-transport-" + std::to_string(getpid()), 8, 64);
  ASSERT_TRUE(pool.ok());
  ShmAllocator alloc(*pool, nullptr);
  for (uint64_t i = 0; i < 5; ++i) {
    auto p = alloc.allocate(12);
    ASSERT_TRUE(p.ok());
    std::memset(p->data(), static_cast<int>(i), 12);
    ASSERT_TRUE((*sender)->send(frame_message(*p, i), nullptr).ok());
  }
  EXPECT_EQ((*pool)->free_slots(), 3u);  // five slots travel to the receiver
  for (uint64_t i = 0; i < 5; ++i) {
    auto m = (*receiver)->receive(2000ms);
    ASSERT_TRUE(m.ok()) << m.status().message();
    ASSERT_TRUE(m->has_value());
    EXPECT_EQ((*m)->env.seq, i);
    EXPECT_EQ(static_cast<int>((*m)->payload.data()[11]), static_cast<int>(i));
  }
  EXPECT_EQ((*pool)->free_slots(), 8u);  // released by the receiver
}

TEST_F(TransportTest, InlineModeCopiesPayloadIntoTheMessage) {
  const std::string ep = "tcp://127.0.0.1:25931";
  auto receiver = MessageReceiver::bind(ep, 16);
  ASSERT_TRUE(receiver.ok()) << receiver.status().message();
  auto sender = MessageSender::connect(ep, /*by_reference=*/false, 16);
  ASSERT_TRUE(sender.ok());
  Payload p = Payload::heap(12);
  std::memset(p.data(), 7, 12);
  ASSERT_TRUE((*sender)->send(frame_message(p, 9), nullptr).ok());
  auto m = (*receiver)->receive(2000ms);
  ASSERT_TRUE(m.ok() && m->has_value());
  EXPECT_EQ((*m)->env.seq, 9u);
  EXPECT_EQ(static_cast<int>((*m)->payload.data()[5]), 7);
}

TEST_F(TransportTest, MalformedMessageIsReportedAndTheNextOneStillArrives) {
  const std::string ep = ipc_endpoint("bad");
  auto receiver = MessageReceiver::bind(ep, 16);
  ASSERT_TRUE(receiver.ok());
  zmq::socket_t raw(zmq_context(), zmq::socket_type::push);
  raw.connect(ep);
  raw.send(zmq::str_buffer("garbage"), zmq::send_flags::none);
  auto sender = MessageSender::connect(ep, true, 16);
  ASSERT_TRUE(sender.ok());
  std::this_thread::sleep_for(50ms);
  ASSERT_TRUE((*sender)->send(frame_message(Payload::heap(12), 1), nullptr).ok());
  bool saw_error = false, saw_frame = false;
  for (int i = 0; i < 20 && !(saw_error && saw_frame); ++i) {
    auto m = (*receiver)->receive(200ms);
    if (!m.ok()) {
      saw_error = true;
      EXPECT_EQ(m.status().code(), StatusCode::kDataLoss);
      EXPECT_NE(m.status().message().find(ep), std::string::npos);
    } else if (m->has_value()) {
      saw_frame = true;
    }
  }
  EXPECT_TRUE(saw_error);
  EXPECT_TRUE(saw_frame);
  raw.close();
}

TEST_F(TransportTest, BindConflictIsAClearError) {
  const std::string ep = "tcp://127.0.0.1:25932";
  auto first = MessageReceiver::bind(ep, 16);
  ASSERT_TRUE(first.ok());
  auto second = MessageReceiver::bind(ep, 16);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find(ep), std::string::npos);
}

}  // namespace
}  // namespace vapipe
