#include "pipeline/transport.h"

#include <cstdint>
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <spawn.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "pipeline/stage_runner.h"

extern char** environ;

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
    for (const char* tag : {"shm", "bad", "handshake", "pool", "signal"}) {
      std::filesystem::remove(ipc_endpoint(tag).substr(6));
      std::filesystem::remove(input_closed_marker(ipc_endpoint(tag)));
    }
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

bool any_pool(const std::string&) { return true; }

TEST_F(TransportTest, ShmFramesCrossASocketByReferenceInOrder) {
  const std::string ep = ipc_endpoint("shm");
  auto receiver = MessageReceiver::bind(ep, 16, {}, any_pool);
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

// A descriptor names memory of the receiver's host. An inline edge (mode tcp: stages on several hosts)
// must not map it, nor may a stage map a pool that is not its job's: the frame gets an error result
// naming why, the message itself (its stream's numbering) still arrives, and the next frame is whole.
TEST_F(TransportTest, DescriptorsAreRefusedOnInlineEdgesAndForPoolsNotAccepted) {
  const std::string pool_name = "/vapipe-test-transport-refused-" + std::to_string(getpid());
  auto pool = ShmPool::create(pool_name, 4, 64);
  ASSERT_TRUE(pool.ok()) << pool.status().message();
  ShmAllocator alloc(*pool, nullptr);
  struct Case {
    const char* tag;
    PoolFilter accepted;
    const char* error;
  } cases[] = {
      {"shm", {}, "shared memory descriptor on a transport without shared memory"},
      {"bad", [](const std::string& name) { return name == "/vapipe-somejob-frames-0"; },
       "names shared memory pool '/vapipe-test-transport-refused-"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.tag);
    const std::string ep = ipc_endpoint(c.tag);
    auto receiver = MessageReceiver::bind(ep, 16, {}, c.accepted);
    ASSERT_TRUE(receiver.ok()) << receiver.status().message();
    auto by_reference = MessageSender::connect(ep, /*by_reference=*/true, 16);
    ASSERT_TRUE(by_reference.ok());
    auto p = alloc.allocate(12);
    ASSERT_TRUE(p.ok()) << p.status().message();
    std::memset(p->data(), 0x5a, 12);
    ASSERT_TRUE((*by_reference)->send(frame_message(*p, 0), nullptr).ok());
    Payload inline_bytes = Payload::heap(12);
    std::memset(inline_bytes.data(), 7, 12);
    ASSERT_TRUE((*by_reference)->send(frame_message(inline_bytes, 1), nullptr).ok());  // not a slot: inline

    auto refused = (*receiver)->receive(2000ms);
    ASSERT_TRUE(refused.ok() && refused->has_value()) << refused.status().message();
    EXPECT_EQ((*refused)->env.seq, 0u);
    EXPECT_TRUE((*refused)->payload.empty());
    EXPECT_NE((*refused)->error.find(c.error), std::string::npos) << (*refused)->error;
    auto next = (*receiver)->receive(2000ms);
    ASSERT_TRUE(next.ok() && next->has_value());
    EXPECT_EQ((*next)->env.seq, 1u);
    ASSERT_EQ((*next)->payload.size(), 12u);
    EXPECT_EQ(static_cast<int>((*next)->payload.data()[11]), 7);
  }
}

TEST(Transport, EndpointsOpenToOtherHostsAreTold) {
  for (const char* open : {"tcp://0.0.0.0:5560", "tcp://*:5560", "tcp://10.0.0.5:5552", "tcp://eth0:5560",
                           "tcp://[::]:5560", "tcp://[fe80::1]:5560"}) {
    EXPECT_TRUE(open_to_other_hosts(open)) << open;
  }
  for (const char* local : {"tcp://127.0.0.1:5560", "tcp://127.0.1.1:5560", "tcp://localhost:5560", "tcp://lo:5560",
                            "tcp://[::1]:5560", "ipc:///tmp/vapipe-x/publish.sock", "inproc://bus"}) {
    EXPECT_FALSE(open_to_other_hosts(local)) << local;
  }
}

// A signal that comes while a send waits for room (the stop's SIGTERM to a stage held up by the next) is
// no failure: the message goes once there is room, in its place. (It was dropped: frames missing from
// the middle of the results file, which --resume refused; found 2026-12-07.)
TEST_F(TransportTest, ASignalWhileASendWaitsForRoomLosesNoMessage) {
  struct sigaction quiet {}, before {};
  quiet.sa_handler = [](int) {};
  sigemptyset(&quiet.sa_mask);
  quiet.sa_flags = 0;  // (no SA_RESTART: a waiting call is interrupted, as by the stages' own handlers)
  ASSERT_EQ(sigaction(SIGUSR1, &quiet, &before), 0);
  const std::string ep = ipc_endpoint("signal");
  auto receiver = MessageReceiver::bind(ep, 1);
  ASSERT_TRUE(receiver.ok()) << receiver.status().message();
  auto sender = MessageSender::connect(ep, /*by_reference=*/false, 1);
  ASSERT_TRUE(sender.ok());
  constexpr int kMessages = 40;
  Status failed = Status::Ok();
  std::thread sending([&] {
    for (int i = 0; i < kMessages && failed.ok(); ++i) {
      Message m = frame_message(Payload::heap(256 * 256 * 3), i);  // (large: the socket's buffers fill)
      m.frame.width = 256;
      m.frame.height = 256;
      m.frame.stride = {256 * 3, 0, 0};
      failed = (*sender)->send(m, nullptr);
    }
  });
  std::this_thread::sleep_for(300ms);  // the receiver reads nothing yet: the sender waits for room
  for (int k = 0; k < 10; ++k) {
    pthread_kill(sending.native_handle(), SIGUSR1);
    std::this_thread::sleep_for(30ms);
  }
  std::vector<uint64_t> seqs;
  while (seqs.size() < static_cast<size_t>(kMessages)) {
    auto m = (*receiver)->receive(3000ms);
    if (!m.ok()) continue;
    if (!m->has_value()) break;
    seqs.push_back((*m)->env.seq);
  }
  sending.join();
  sigaction(SIGUSR1, &before, nullptr);
  EXPECT_TRUE(failed.ok()) << failed.message();
  std::vector<uint64_t> expected(kMessages);
  for (int i = 0; i < kMessages; ++i) expected[i] = static_cast<uint64_t>(i);
  EXPECT_EQ(seqs, expected);
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

constexpr uint64_t kHandshakeMessages = 2000;

// The sending process of the test below (this binary, run again with a filter): sends numbered frames
// with 1 KiB inline, then waits as a stage does before it exits.
TEST(TransportPeer, SendsNumberedFramesThenWaitsForTheReceiverToCloseItsInput) {
  const char* endpoint = std::getenv("VAPIPE_TRANSPORT_PEER_ENDPOINT");
  if (!endpoint) GTEST_SKIP() << "the sending process of ASenderThatExitsWhileTheReceiverIsNotReadingLosesNothing";
  auto sender = MessageSender::connect(endpoint, /*by_reference=*/false, 4);
  ASSERT_TRUE(sender.ok()) << sender.status().message();
  for (uint64_t i = 0; i < kHandshakeMessages; ++i) {
    Payload p = Payload::heap(1024);
    std::memset(p.data(), static_cast<int>(i & 0xff), 1024);
    ASSERT_TRUE((*sender)->send(frame_message(p, i), nullptr).ok());
  }
  ShutdownFlags flags;
  EXPECT_TRUE(wait_for_downstream_closed(endpoint, flags, std::chrono::seconds(10)));
}

// Runs the sender above in a process of its own, sleeps 1.5 s before reading (as publish does while it
// waits for subscribers), then reads: how many of its messages arrived, in order.
uint64_t received_from_a_sender_that_finished_first(MessageReceiver& receiver, const std::string& ep) {
  const std::string filter = "--gtest_filter=TransportPeer.SendsNumberedFramesThenWaitsForTheReceiverToCloseItsInput";
  const std::string env = "VAPIPE_TRANSPORT_PEER_ENDPOINT=" + ep;
  std::vector<char*> envp;
  for (char** e = environ; *e; ++e) envp.push_back(*e);
  envp.push_back(const_cast<char*>(env.c_str()));
  envp.push_back(nullptr);
  char self[] = "/proc/self/exe";
  char* argv[] = {self, const_cast<char*>(filter.c_str()), nullptr};
  pid_t child = 0;
  EXPECT_EQ(posix_spawn(&child, self, nullptr, nullptr, argv, envp.data()), 0);
  if (child <= 0) return 0;

  std::this_thread::sleep_for(1500ms);  // not reading: the sender fills the queues and finishes
  uint64_t received = 0;
  while (received < kHandshakeMessages) {
    auto m = receiver.receive(3000ms);
    if (!m.ok() || !m->has_value()) break;
    if ((*m)->env.seq != received || static_cast<int>((*m)->payload.data()[1023]) != static_cast<int>(received & 0xff)) {
      ADD_FAILURE() << "message " << received << " arrived out of order or changed";
      break;
    }
    ++received;
  }
  mark_input_closed(ep);
  int status = 0;
  EXPECT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "sender status " << status;
  return received;
}

// ZeroMQ dropped the queued tail of an ipc:// edge when the sending process exited while the receiver
// was not reading (libzmq issue 4660, linger notwithstanding): a stage now waits for its downstream's
// "input closed" mark before it exits. Without that wait this received 1,921 to 1,995 of 2,000.
TEST_F(TransportTest, ASenderThatExitsWhileTheReceiverIsNotReadingLosesNothing) {
  const std::string ep = ipc_endpoint("handshake");
  auto receiver = MessageReceiver::bind(ep, 4);
  ASSERT_TRUE(receiver.ok()) << receiver.status().message();
  EXPECT_EQ(received_from_a_sender_that_finished_first(**receiver, ep), kHandshakeMessages);
}

// A stream that ends gives its sender back (ingest): the next stream gets the same socket, and what
// the first one still held when it was given back (the receiver at its high-water mark, reading
// slowly) all arrives, in order. Closing it instead can lose that (libzmq #4660).
TEST_F(TransportTest, ASenderGivenBackToItsPoolIsReusedAndWhatItHeldAllArrives) {
  const std::string ep = ipc_endpoint("pool");
  auto receiver = MessageReceiver::bind(ep, 2);
  ASSERT_TRUE(receiver.ok()) << receiver.status().message();
  SenderPool pool(ep, /*by_reference=*/false, 2, {});
  MessageSender* first = nullptr;
  std::thread stream([&] {
    auto sender = pool.acquire();
    ASSERT_TRUE(sender.ok()) << sender.status().message();
    first = sender->get();
    for (uint64_t seq = 0; seq < 40; ++seq) {
      ASSERT_TRUE((*sender)->send(frame_message(Payload::heap(12), seq), nullptr).ok());
    }
    pool.release(std::move(*sender));  // while messages still wait in it
  });
  std::vector<uint64_t> seqs;
  while (seqs.size() < 40) {
    auto m = (*receiver)->receive(2000ms);
    ASSERT_TRUE(m.ok() && m->has_value()) << "after " << seqs.size() << " messages";
    seqs.push_back((*m)->env.seq);
    std::this_thread::sleep_for(2ms);
  }
  stream.join();
  for (uint64_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(seqs[i], i);
  auto again = pool.acquire();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->get(), first);  // the same socket, not a new one
  auto second = pool.acquire();    // while the first is in use: a new one
  ASSERT_TRUE(second.ok());
  EXPECT_NE(second->get(), first);
  EXPECT_EQ(pool.made(), 2u);
  pool.release(std::move(*again));
  pool.release(std::move(*second));
}

// Over TCP (stages on several hosts) there is no mark to wait for, and none is needed: linger holds
// the sender until the kernel has the bytes. This guards that assumption.
TEST_F(TransportTest, OverTcpASenderThatExitsFirstLosesNothingWithoutTheMark) {
  const std::string ep = "tcp://127.0.0.1:25977";
  auto receiver = MessageReceiver::bind(ep, 4);
  ASSERT_TRUE(receiver.ok()) << receiver.status().message();
  EXPECT_TRUE(input_closed(ep));  // the sender does not wait
  EXPECT_EQ(received_from_a_sender_that_finished_first(**receiver, ep), kHandshakeMessages);
}

}  // namespace
}  // namespace vapipe
