// The real result bus (a ZeroMQ XPUB socket) with CURVE, and real SUB sockets on loopback.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include <zmq.hpp>

#include "pipeline/curve.h"
#include "pipeline/transport.h"
#include "tests/fakes/free_port.h"
#include "stages/publish/bus_publisher.h"

namespace vapipe {
namespace {

using namespace std::chrono_literals;

// A subscriber to every topic; `own` null: no CURVE.
zmq::socket_t subscriber(const std::string& ep, const CurveKeyPair* own, const std::string& server_key) {
  zmq::socket_t sub(zmq_context(), zmq::socket_type::sub);
  sub.set(zmq::sockopt::linger, 0);
  if (own) {
    EXPECT_TRUE(make_curve_client(sub, *own, server_key).ok());
  }
  sub.set(zmq::sockopt::subscribe, "");
  sub.connect(ep);
  return sub;
}

// Payloads received within the timeout (topic, payload pairs flattened to payloads).
std::vector<std::string> drain(zmq::socket_t& sub, std::chrono::milliseconds timeout) {
  std::vector<std::string> got;
  while (true) {
    zmq::pollitem_t item{sub.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, timeout);
    if (!(item.revents & ZMQ_POLLIN)) return got;
    zmq::message_t topic, payload;
    if (sub.recv(topic) && topic.more() && sub.recv(payload)) got.push_back(payload.to_string());
  }
}

// A lossless bus on a free port that waits for `subscribers` before its first message (10 s at most).
ZmqBusOptions waiting_for(uint32_t subscribers) {
  ZmqBusOptions o;
  o.endpoint = testing::free_loopback_tcp_endpoint();
  o.lossless = true;
  o.wait_for_subscribers = subscribers;
  o.wait_timeout_s = 10;
  return o;
}

// One subscriber of two topic prefixes, as `vapipe sub --exit-on-summary` is.
zmq::socket_t results_and_summary_subscriber(const std::string& endpoint) {
  zmq::socket_t s(zmq_context(), zmq::socket_type::sub);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::subscribe, "results/");
  s.set(zmq::sockopt::subscribe, "job/summary");
  s.connect(endpoint);
  return s;
}

// publish.wait_for_subscribers counts subscribers, not subscriptions: the first subscriber subscribes to
// two topics (as `vapipe sub --exit-on-summary` does), the second connects 0.5 s later and must still
// get the first result. (Counting subscriptions made two subscribers of the first one: the archive
// e2e test's second subscriber then missed a stream's first result, now and then.)
TEST(ZmqBusPublisher, WaitingForTwoSubscribersWaitsForTwoNotForTwoSubscriptions) {
  const ZmqBusOptions o = waiting_for(2);
  auto publisher = make_zmq_bus_publisher(o, nullptr);
  ASSERT_TRUE(publisher.ok()) << publisher.status().message();
  zmq::socket_t first = results_and_summary_subscriber(o.endpoint);
  std::thread publishing([&] {
    for (int i = 0; i < 3; ++i) EXPECT_TRUE((*publisher)->send("results/cam1", "{\"seq\":" + std::to_string(i) + "}").ok());
  });
  std::this_thread::sleep_for(500ms);
  zmq::socket_t second = subscriber(o.endpoint, nullptr, "");
  publishing.join();
  const std::vector<std::string> expected = {"{\"seq\":0}", "{\"seq\":1}", "{\"seq\":2}"};
  EXPECT_EQ(drain(second, 2000ms), expected);
  EXPECT_EQ(drain(first, 500ms), expected);
}

// A subscriber that connected and went away before the first message (a consumer that crashed and is
// restarting) is not one of those waited for: the job waited for none more, and the one that came next
// got nothing, not even the summary (found 2026-12-07).
TEST(ZmqBusPublisher, ASubscriberThatLeftBeforeTheFirstMessageIsNotCountedAsWaiting) {
  const ZmqBusOptions o = waiting_for(1);
  auto publisher = make_zmq_bus_publisher(o, nullptr);
  ASSERT_TRUE(publisher.ok()) << publisher.status().message();
  {
    zmq::socket_t gone = subscriber(o.endpoint, nullptr, "");
    std::this_thread::sleep_for(300ms);  // connected and subscribed
  }
  std::atomic<bool> sent{false};
  std::thread publishing([&] {
    EXPECT_TRUE((*publisher)->send("results/cam1", "{\"seq\":0}").ok());
    sent = true;
  });
  std::this_thread::sleep_for(700ms);
  EXPECT_FALSE(sent.load());  // still waiting: nobody is there
  zmq::socket_t next = subscriber(o.endpoint, nullptr, "");
  publishing.join();
  EXPECT_EQ(drain(next, 2000ms), std::vector<std::string>{"{\"seq\":0}"});
}

// Two waited for: one that stays (two topic prefixes, as `vapipe sub --exit-on-summary`), one that came
// and left; the job waits for a second one in force (it went on at once, the one that came got nothing).
TEST(ZmqBusPublisher, WaitingForTwoCountsTheSubscribersStillConnected) {
  const ZmqBusOptions o = waiting_for(2);
  auto publisher = make_zmq_bus_publisher(o, nullptr);
  ASSERT_TRUE(publisher.ok()) << publisher.status().message();
  zmq::socket_t stays = results_and_summary_subscriber(o.endpoint);
  {
    zmq::socket_t gone = subscriber(o.endpoint, nullptr, "");
    std::this_thread::sleep_for(300ms);
  }
  std::atomic<bool> sent{false};
  std::thread publishing([&] {
    EXPECT_TRUE((*publisher)->send("results/cam1", "{\"seq\":0}").ok());
    sent = true;
  });
  std::this_thread::sleep_for(700ms);
  EXPECT_FALSE(sent.load());
  zmq::socket_t next = subscriber(o.endpoint, nullptr, "");
  publishing.join();
  EXPECT_EQ(drain(stays, 2000ms), std::vector<std::string>{"{\"seq\":0}"});
  EXPECT_EQ(drain(next, 2000ms), std::vector<std::string>{"{\"seq\":0}"});
}

TEST(ZmqBusPublisher, WithCurveOnlyAuthorizedSubscribersReceiveResults) {
  if (!curve_supported()) GTEST_SKIP() << "libzmq without CURVE";
  const CurveKeyPair bus = generate_curve_key_pair().value(), alice = generate_curve_key_pair().value(),
                     mallory = generate_curve_key_pair().value();
  ZmqBusOptions o;
  o.endpoint = testing::free_loopback_tcp_endpoint();
  o.lossless = true;
  o.wait_for_subscribers = 1;  // the first send waits for alice's subscription
  o.wait_timeout_s = 10;
  o.curve = bus;
  o.curve_clients = {alice.public_key};
  o.curve_clients_source = "subscribers.txt";
  auto publisher = make_zmq_bus_publisher(o, nullptr);
  ASSERT_TRUE(publisher.ok()) << publisher.status().message();

  zmq::socket_t eavesdropper = subscriber(o.endpoint, nullptr, "");
  zmq::socket_t intruder = subscriber(o.endpoint, &mallory, bus.public_key);
  zmq::socket_t trusted = subscriber(o.endpoint, &alice, bus.public_key);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE((*publisher)->send("results/cam1", "{\"seq\":" + std::to_string(i) + "}").ok());
  }
  const std::vector<std::string> expected = {"{\"seq\":0}", "{\"seq\":1}", "{\"seq\":2}", "{\"seq\":3}",
                                             "{\"seq\":4}"};
  EXPECT_EQ(drain(trusted, 2000ms), expected);
  EXPECT_TRUE(drain(intruder, 300ms).empty());
  EXPECT_TRUE(drain(eavesdropper, 300ms).empty());

  // The list changes while the bus runs: mallory is let in from her next connection on.
  ASSERT_TRUE((*publisher)->set_authorized_subscribers({alice.public_key, mallory.public_key}).ok());
  zmq::socket_t admitted = subscriber(o.endpoint, &mallory, bus.public_key);
  // A PUB sends only to subscriptions it has: send until hers has arrived (bounded), as a live bus does.
  std::vector<std::string> got;
  for (int i = 0; i < 100 && got.empty(); ++i) {
    ASSERT_TRUE((*publisher)->send("results/cam1", "{\"seq\":5}").ok());
    got = drain(admitted, 100ms);
  }
  ASSERT_FALSE(got.empty()) << "mallory's key was let in, yet nothing arrived in 10 s";
  EXPECT_EQ(got.front(), "{\"seq\":5}");
  EXPECT_FALSE(drain(trusted, 2000ms).empty());  // alice is still in
}

// A key removed from the list while a live bus runs: the bus is bound again, every subscriber
// reconnects by itself, and the removed key is refused from then on. An archive (lossless) bus keeps
// its connections: binding again would drop results its subscribers are owed.
TEST(ZmqBusPublisher, ARemovedKeyIsCutOffAtOnceOnALiveBusAndAtItsNextConnectionOnAnArchiveOne) {
  if (!curve_supported()) GTEST_SKIP() << "libzmq without CURVE";
  const CurveKeyPair bus = generate_curve_key_pair().value(), alice = generate_curve_key_pair().value(),
                     bob = generate_curve_key_pair().value();
  for (const bool lossless : {false, true}) {
    SCOPED_TRACE(lossless ? "archive bus" : "live bus");
    ZmqBusOptions o;
    o.endpoint = testing::free_loopback_tcp_endpoint();
    o.lossless = lossless;
    o.curve = bus;
    o.curve_clients = {alice.public_key, bob.public_key};
    o.curve_clients_source = "subscribers.txt";
    auto publisher = make_zmq_bus_publisher(o, nullptr);
    ASSERT_TRUE(publisher.ok()) << publisher.status().message() << " (" << o.endpoint << ")";
    zmq::socket_t a = subscriber(o.endpoint, &alice, bus.public_key);
    zmq::socket_t b = subscriber(o.endpoint, &bob, bus.public_key);
    // Both in: send until each has something (subscriptions take a moment to arrive).
    auto until_received = [&](zmq::socket_t& sub, const std::string& what) {
      for (int i = 0; i < 100; ++i) {
        EXPECT_TRUE((*publisher)->send("results/cam1", what).ok());
        if (!drain(sub, 50ms).empty()) return true;
      }
      return false;
    };
    ASSERT_TRUE(until_received(a, "before"));
    ASSERT_TRUE(until_received(b, "before"));

    ASSERT_TRUE((*publisher)->set_authorized_subscribers({alice.public_key}).ok());  // bob's key removed
    ASSERT_TRUE(until_received(a, "after")) << "alice did not get back in";
    drain(b, 300ms);  // what bob had before the change
    size_t bob_got = 0;
    for (int i = 0; i < 10; ++i) {
      ASSERT_TRUE((*publisher)->send("results/cam1", "after").ok());
      bob_got += drain(b, 50ms).size();
    }
    if (lossless) {
      EXPECT_GT(bob_got, 0u) << "an archive bus keeps its connections";
    } else {
      EXPECT_EQ(bob_got, 0u) << "bob's key was removed, yet he still receives";
    }
  }
}

TEST(ZmqBusPublisher, AnUnreadableKeySetupIsAnErrorNamingTheEndpoint) {
  if (!curve_supported()) GTEST_SKIP() << "libzmq without CURVE";
  ZmqBusOptions o;
  o.endpoint = testing::free_loopback_tcp_endpoint();
  o.curve = CurveKeyPair{"short", "short"};  // not a Z85 key: libzmq refuses it
  auto publisher = make_zmq_bus_publisher(o, nullptr);
  ASSERT_FALSE(publisher.ok());
  EXPECT_NE(publisher.status().message().find("publish.endpoint " + o.endpoint), std::string::npos)
      << publisher.status().message();
}

}  // namespace
}  // namespace vapipe
