#include "pipeline/curve.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <zmq.hpp>

#include "pipeline/transport.h"
#include "tests/fakes/free_port.h"

namespace vapipe {
namespace {

using namespace std::chrono_literals;

class CurveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!curve_supported()) GTEST_SKIP() << "libzmq without CURVE";
    dir_ = std::filesystem::temp_directory_path() / ("vapipe-curve-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }

  CurveKeyPair pair() {
    auto p = generate_curve_key_pair();
    EXPECT_TRUE(p.ok()) << p.status().message();
    return p.value();
  }

  std::filesystem::path dir_;
};

// Whether a message pushed by `sender` reaches `receiver` within the timeout.
bool delivered(zmq::socket_t& sender, zmq::socket_t& receiver, const std::string& text,
               std::chrono::milliseconds timeout) {
  sender.send(zmq::buffer(text), zmq::send_flags::dontwait);
  zmq::pollitem_t item{receiver.handle(), 0, ZMQ_POLLIN, 0};
  zmq::poll(&item, 1, timeout);
  if (!(item.revents & ZMQ_POLLIN)) return false;
  zmq::message_t m;
  return receiver.recv(m) && m.to_string() == text;
}

TEST_F(CurveTest, KeygenWritesAPrivateSecretFileAndAPublicFileThatReadBack) {
  const CurveKeyPair p = pair();
  const std::string prefix = (dir_ / "bus").string();
  ASSERT_TRUE(write_curve_key_files(prefix, p).ok());
  struct stat st {};
  ASSERT_EQ(::stat((prefix + ".secret").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto secret = read_curve_secret_key_file(prefix + ".secret");
  ASSERT_TRUE(secret.ok()) << secret.status().message();
  EXPECT_EQ(secret->secret_key, p.secret_key);
  EXPECT_EQ(secret->public_key, p.public_key);  // derived from the secret key
  auto pub = read_curve_public_key_argument(prefix + ".public");
  ASSERT_TRUE(pub.ok()) << pub.status().message();
  EXPECT_EQ(pub.value(), p.public_key);

  const Status again = write_curve_key_files(prefix, pair());
  EXPECT_FALSE(again.ok());
  EXPECT_NE(again.message().find(prefix + ".secret exists already"), std::string::npos) << again.message();
  EXPECT_EQ(read_curve_secret_key_file(prefix + ".secret")->secret_key, p.secret_key);  // untouched
}

TEST_F(CurveTest, KeyFileErrorsNameTheFileAndLine) {
  const std::string a = pair().public_key, b = pair().public_key;
  auto list = read_curve_public_key_file(write("ok", "# subscribers\n\n" + a + "   # alice\n" + b + "\n"));
  ASSERT_TRUE(list.ok()) << list.status().message();
  EXPECT_EQ(list.value(), (std::vector<std::string>{a, b}));
  // Saved by Windows Notepad: a byte order mark first, CRLF.
  auto notepad = read_curve_public_key_file(write("notepad", "\xEF\xBB\xBF" + a + "\r\n" + b + "\r\n"));
  ASSERT_TRUE(notepad.ok()) << notepad.status().message();
  EXPECT_EQ(notepad.value(), (std::vector<std::string>{a, b}));

  const std::string bad = write("bad", "# subscribers\n" + a + "\n" + a.substr(0, 39) + "\n");
  auto r = read_curve_public_key_file(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(bad + ":3: expected a CURVE public key"), std::string::npos)
      << r.status().message();

  const std::string empty = write("empty", "# nothing yet\n");
  r = read_curve_public_key_file(empty);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(empty + ": no CURVE public key"), std::string::npos) << r.status().message();

  auto missing = read_curve_secret_key_file((dir_ / "absent.secret").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("absent.secret"), std::string::npos);

  const std::string two = write("two.secret", pair().secret_key + "\n" + pair().secret_key + "\n");
  auto two_keys = read_curve_secret_key_file(two);
  ASSERT_FALSE(two_keys.ok());
  EXPECT_NE(two_keys.status().message().find("expected one CURVE secret key, found 2"), std::string::npos);
}

TEST_F(CurveTest, APublicKeyArgumentIsTheKeyItselfOrAFile) {
  const std::string key = pair().public_key;
  EXPECT_EQ(read_curve_public_key_argument(key).value(), key);
  EXPECT_EQ(read_curve_public_key_argument(write("k.public", key + "\n")).value(), key);
  EXPECT_FALSE(read_curve_public_key_argument("not-a-key").ok());
}

TEST_F(CurveTest, OnlyListedClientsGetInAndRefusalsAreCounted) {
  const CurveKeyPair server = pair(), alice = pair(), mallory = pair();
  const std::string ep = testing::free_loopback_tcp_endpoint();
  zmq::socket_t pull(zmq_context(), zmq::socket_type::pull);
  pull.set(zmq::sockopt::linger, 0);
  auto guard = make_curve_server(pull, server, {alice.public_key}, "subscribers.txt");
  ASSERT_TRUE(guard.ok()) << guard.status().message();
  pull.bind(ep);

  auto client = [&](const CurveKeyPair* own) {
    zmq::socket_t push(zmq_context(), zmq::socket_type::push);
    push.set(zmq::sockopt::linger, 0);
    if (own) {
      EXPECT_TRUE(make_curve_client(push, *own, server.public_key).ok());
    }
    push.connect(ep);
    return push;
  };
  zmq::socket_t from_mallory = client(&mallory);
  zmq::socket_t plain = client(nullptr);  // no CURVE at all: the handshake itself fails
  zmq::socket_t from_alice = client(&alice);
  EXPECT_TRUE(delivered(from_alice, pull, "from alice", 5000ms));
  EXPECT_FALSE(delivered(from_mallory, pull, "from mallory", 500ms));
  EXPECT_FALSE(delivered(plain, pull, "in plain text", 500ms));
  EXPECT_GE((*guard)->refused(), 1u);
  EXPECT_TRUE(delivered(from_alice, pull, "alice again", 5000ms));
}

TEST_F(CurveTest, WithoutAListAnyClientThatKnowsTheServerKeyGetsIn) {
  const CurveKeyPair server = pair(), someone = pair(), impostor = pair();
  const std::string ep = testing::free_loopback_tcp_endpoint();
  zmq::socket_t pull(zmq_context(), zmq::socket_type::pull);
  pull.set(zmq::sockopt::linger, 0);
  auto guard = make_curve_server(pull, server, {}, "");
  ASSERT_TRUE(guard.ok());
  pull.bind(ep);
  zmq::socket_t good(zmq_context(), zmq::socket_type::push), wrong(zmq_context(), zmq::socket_type::push);
  good.set(zmq::sockopt::linger, 0);
  wrong.set(zmq::sockopt::linger, 0);
  ASSERT_TRUE(make_curve_client(good, someone, server.public_key).ok());
  ASSERT_TRUE(make_curve_client(wrong, someone, impostor.public_key).ok());  // not the server's key
  good.connect(ep);
  wrong.connect(ep);
  EXPECT_TRUE(delivered(good, pull, "hello", 5000ms));
  EXPECT_FALSE(delivered(wrong, pull, "misdirected", 500ms));
  EXPECT_EQ((*guard)->refused(), 0u);  // a wrong server key fails the handshake before any ZAP request
}

TEST_F(CurveTest, StageEdgesWithAJobKeyAdmitOnlySendersHoldingIt) {
  const CurveKeyPair job = pair(), other = pair();
  const std::string ep = testing::free_loopback_tcp_endpoint();
  auto receiver = MessageReceiver::bind(ep, 16, job);
  ASSERT_TRUE(receiver.ok()) << receiver.status().message();
  auto stranger = MessageSender::connect(ep, /*by_reference=*/false, 16, other);
  ASSERT_TRUE(stranger.ok());
  auto sender = MessageSender::connect(ep, /*by_reference=*/false, 16, job);
  ASSERT_TRUE(sender.ok());
  Message m;
  m.kind = MessageKind::kStreamStart;
  m.env.stream_id = "cam";
  std::atomic<bool> give_up{false};
  std::thread stop_stranger([&] {
    std::this_thread::sleep_for(300ms);
    give_up = true;
  });
  m.env.seq = 99;
  (void)(*stranger)->send(m, &give_up);  // never gets through: its handshake was refused
  stop_stranger.join();
  (*stranger)->discard_unsent();
  m.env.seq = 3;
  ASSERT_TRUE((*sender)->send(m, nullptr).ok());
  auto got = (*receiver)->receive(5000ms);
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status().message();
  EXPECT_EQ((*got)->env.seq, 3u);
  auto more = (*receiver)->receive(300ms);
  ASSERT_TRUE(more.ok());
  EXPECT_FALSE(more->has_value());
}

}  // namespace
}  // namespace vapipe
