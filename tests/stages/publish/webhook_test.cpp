// publish.webhooks against a real HTTP(S) server on loopback (cpp-httplib's), as a receiver such as
// Home Assistant or n8n answers: in order, again after failures, without a message twice once taken.
#include "stages/publish/webhook.h"

#include <cstdint>
#include <gtest/gtest.h>
#include <httplib.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <mutex>
#include <thread>
#include <vector>

#include "stages/publish/message_filter.h"
#include "tests/fakes/free_port.h"
#include "tests/fakes/http_receiver.h"
#include "tests/fakes/local_zone.h"
#include "tests/fakes/process_temp_dir.h"

namespace vapipe {
namespace {

using namespace std::chrono_literals;

const std::string kTlsDir = std::string(VAPIPE_SOURCE_DIR) + "/tests/media/tls/";
using testing::Receiver;

WebhookConfig hook_at(int port, const std::string& scheme = "http") {
  WebhookConfig c;
  c.url = scheme + "://127.0.0.1:" + std::to_string(port) + "/hook";
  c.topics = {"segments/", "events/"};
  c.timeout_s = 5;
  return c;
}

std::string message(int n) { return webhook_body("segments/gate", "{\"n\":" + std::to_string(n) + "}"); }

// Waits (up to 10 s) until `done` holds of the sender's figures.
bool eventually(const WebhookSender& s, const std::function<bool(const WebhookStats&)>& done) {
  for (int i = 0; i < 1000; ++i) {
    if (done(s.stats())) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

// A sink's topics: a stream's taken whole (a webhook meant for camera 1 got camera 10's; found
// 2026-12-07), a '*' for every stream whose id starts so, a kind's as a prefix.
TEST(MessageFilter, AStreamsTopicIsTakenWholeAndAStarTakesEveryStreamSoNamed) {
  EXPECT_TRUE(topic_taken("events/cam1", "events/cam1"));
  EXPECT_FALSE(topic_taken("events/cam1", "events/cam10"));
  EXPECT_TRUE(topic_taken("events/cam*", "events/cam10"));
  EXPECT_FALSE(topic_taken("events/cam*", "results/cam10"));
  EXPECT_TRUE(topic_taken("events/", "events/cam10"));
  EXPECT_TRUE(topic_taken("seg", "segments/gate"));
  EXPECT_TRUE(topic_taken("job/summary", "job/summary"));
  EXPECT_FALSE(topic_taken("results/", "events/cam1"));
}

TEST(Webhook, PostsEachMessageInOrderWithTheTopicTheTokenAndItsHeaders) {
  Receiver receiver;
  WebhookConfig c = hook_at(receiver.port());
  c.url += "?src=vapipe";
  c.token = "s3cr3t";
  c.headers = {{"X-Api-Key", "k-123"}};
  WebhookSender sender(c, 0);
  EXPECT_TRUE(sender.wants("segments/gate"));
  EXPECT_TRUE(sender.wants("events/door"));
  EXPECT_FALSE(sender.wants("results/gate"));
  EXPECT_FALSE(sender.wants("job/summary"));
  // With labels: the segments and results of those labels only; events whatever they say.
  WebhookConfig picky = c;
  picky.topics = {"segments/", "results/", "events/"};
  picky.labels = {"truck", "person"};
  WebhookSender chooser(picky, 1);
  const nlohmann::json truck{{"schema", "vapipe.segment"}, {"label", "truck"}},
      street{{"schema", "vapipe.segment"}, {"label", "street"}},
      errored{{"schema", "vapipe.result"}, {"label", nullptr}},
      event{{"schema", "vapipe.event"}, {"event", "reconnecting"}};
  EXPECT_TRUE(chooser.wants("segments/gate", truck));
  EXPECT_FALSE(chooser.wants("segments/gate", street));
  EXPECT_FALSE(chooser.wants("results/gate", errored));
  EXPECT_TRUE(chooser.wants("events/gate", event));
  EXPECT_TRUE(sender.wants("segments/gate", street));  // no labels: every one
  for (int n = 0; n < 20; ++n) sender.post("segments/gate", message(n));
  const auto got = receiver.wait_for(20);
  ASSERT_EQ(got.size(), 20u);
  for (int n = 0; n < 20; ++n) {
    EXPECT_EQ(got[n].body, "{\"topic\":\"segments/gate\",\"payload\":{\"n\":" + std::to_string(n) + "}}");
  }
  EXPECT_EQ(got[0].path, "/hook?q");
  EXPECT_EQ(got[0].topic, "segments/gate");
  EXPECT_EQ(got[0].authorization, "Bearer s3cr3t");
  EXPECT_EQ(got[0].api_key, "k-123");
  EXPECT_EQ(got[0].content_type, "application/json");
  sender.finish(1s);
  const WebhookStats s = sender.stats();
  EXPECT_EQ(s.delivered, 20u);
  EXPECT_EQ(s.refused + s.dropped + s.undelivered + s.retries, 0u);
  EXPECT_GT(s.last_delivered_unix_s, 0);
  EXPECT_EQ(s.name, "publish.webhooks[0] (http://127.0.0.1:" + std::to_string(receiver.port()) + ")");
}

// 503s and 429s are tried again (Retry-After honoured), and the messages behind wait: none is lost,
// none comes twice, the order holds.
TEST(Webhook, AFailingReceiverGetsTheMessageAgainAndTheOrderHolds) {
  Receiver receiver;
  std::atomic<int> calls{0};
  receiver.answer([&](const httplib::Request&, httplib::Response& res) {
    const int call = calls++;
    if (call == 0) res.status = 503;
    if (call == 1) {
      res.status = 429;
      res.set_header("Retry-After", "0");
    }
  });
  WebhookSender sender(hook_at(receiver.port()), 0);
  sender.set_retry_delays(20ms, 100ms);
  for (int n = 0; n < 5; ++n) sender.post("segments/gate", message(n));
  const auto got = receiver.wait_for(5);
  ASSERT_EQ(got.size(), 5u);
  for (int n = 0; n < 5; ++n) EXPECT_NE(got[n].body.find("\"n\":" + std::to_string(n)), std::string::npos);
  ASSERT_TRUE(eventually(sender, [](const WebhookStats& s) { return s.delivered == 5; }));
  const WebhookStats s = sender.stats();
  EXPECT_EQ(s.retries, 2u);
  EXPECT_FALSE(s.failing);
  EXPECT_EQ(s.last_error, "answered 429");
}

// A 429 without Retry-After whose JSON answer says how long to wait, as Telegram's Bot API and Discord
// answer: that wait, not the back-off's first (20 ms here).
TEST(Webhook, ATooManyRequestsAnswerWithItsWaitInItsBodyIsHonoured) {
  Receiver receiver;
  std::mutex mutex;
  std::vector<std::chrono::steady_clock::time_point> calls;
  receiver.answer([&](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mutex);
    calls.push_back(std::chrono::steady_clock::now());
    if (calls.size() == 1) {
      res.status = 429;
      res.set_content(R"({"ok":false,"error_code":429,"description":"Too Many Requests: retry after 1",)"
                      R"("parameters":{"retry_after":1}})", "application/json");
    } else if (calls.size() == 2) {
      res.status = 429;
      res.set_content(R"({"message":"You are being rate limited.","retry_after":0.25,"global":false})",
                      "application/json");
    }
  });
  WebhookSender sender(hook_at(receiver.port()), 0);
  sender.set_retry_delays(20ms, 100ms);
  sender.post("segments/gate", message(1));
  ASSERT_EQ(receiver.wait_for(1).size(), 1u);
  std::lock_guard<std::mutex> lock(mutex);
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_GE(calls[1] - calls[0], 950ms);  // Telegram's 1 s
  EXPECT_GE(calls[2] - calls[1], 950ms);  // Discord's 0.25 s, rounded up to Retry-After's whole seconds
}

// A 4xx (other than 408 and 429) is the receiver's "no" to that message: dropped, counted, the next goes.
TEST(Webhook, AMessageTheReceiverRefusesIsDroppedAndTheNextGoes) {
  Receiver receiver;
  receiver.answer([](const httplib::Request& req, httplib::Response& res) {
    if (req.body.find("\"n\":1}") != std::string::npos) {
      res.status = 400;
      res.set_content("invalid payload\n(expected a message field)", "text/plain");
    }
  });
  WebhookSender sender(hook_at(receiver.port()), 0);
  for (int n = 0; n < 3; ++n) sender.post("segments/gate", message(n));
  ASSERT_TRUE(eventually(sender, [](const WebhookStats& s) { return s.delivered + s.refused == 3; }));
  const WebhookStats s = sender.stats();
  EXPECT_EQ(s.delivered, 2u);
  EXPECT_EQ(s.refused, 1u);
  EXPECT_EQ(s.retries, 0u);
  EXPECT_EQ(s.last_error, "answered 400: invalid payload (expected a message field)");
  EXPECT_EQ(receiver.received().size(), 2u);
}

// A receiver down when the job starts (Home Assistant restarting) gets what waited once it is up, in order.
TEST(Webhook, AReceiverThatComesLaterGetsWhatWaitedInOrder) {
  const int port = testing::free_loopback_tcp_port();
  WebhookSender sender(hook_at(port), 0);
  sender.set_retry_delays(20ms, 50ms);
  for (int n = 0; n < 4; ++n) sender.post("segments/gate", message(n));
  ASSERT_TRUE(eventually(sender, [](const WebhookStats& s) { return s.failing && s.retries >= 2; }));
  EXPECT_EQ(sender.stats().queued, 4u);
  // Which cause, not a list of the possible ones.
  EXPECT_NE(sender.stats().last_error.find("cannot connect to 127.0.0.1:" + std::to_string(port) + ": connection refused"),
            std::string::npos)
      << sender.stats().last_error;
  Receiver receiver(port);
  ASSERT_EQ(receiver.port(), port);
  const auto got = receiver.wait_for(4);
  ASSERT_EQ(got.size(), 4u);
  for (int n = 0; n < 4; ++n) EXPECT_NE(got[n].body.find("\"n\":" + std::to_string(n)), std::string::npos);
  ASSERT_TRUE(eventually(sender, [](const WebhookStats& s) { return s.delivered == 4 && !s.failing; }));
  EXPECT_EQ(sender.stats().queued, 0u);
}

// An archive job's delivery mark: the results file's lines the sink is done with, a message still
// waiting holding it back (delivered, refused, dropped by the policy, or not wanted: done), and the
// Idempotency-Key of a message of a line is the line's, as a restart sends it again.
TEST(Webhook, ItsDeliveryMarkPassesTheLinesItHasDealtWithAndNoOther) {
  const int port = testing::free_loopback_tcp_port();
  WebhookConfig c = hook_at(port);
  c.max_queued = 2;
  WebhookSender sender(c, 0);
  sender.set_retry_delays(20ms, 50ms);
  sender.key_by_file_line("run-0-");
  EXPECT_EQ(sender.settled_through(), 0u);
  sender.offer_line(1);
  sender.post("segments/gate", message(1));
  sender.offer_line(2);  // a line it does not want: no post
  sender.offer_line(3);
  sender.post("segments/gate", message(3));
  ASSERT_TRUE(eventually(sender, [](const WebhookStats& s) { return s.failing; }));
  EXPECT_EQ(sender.settled_through(), 0u);  // line 1 is being tried
  sender.offer_line(4);
  sender.post("segments/gate", message(4));
  sender.offer_line(5);
  sender.post("segments/gate", message(5));  // the queue (3, 4) is full: 3 dropped (drop_oldest)
  EXPECT_EQ(sender.stats().dropped, 1u);
  EXPECT_EQ(sender.settled_through(), 0u);
  Receiver receiver(port);
  receiver.answer([](const httplib::Request& req, httplib::Response& res) {
    if (req.body.find("\"n\":4}") != std::string::npos) res.status = 400;  // refused: done with too
  });
  const auto got = receiver.wait_for(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].idempotency_key, "\"run-0-1\"");
  EXPECT_EQ(got[1].idempotency_key, "\"run-0-5\"");
  ASSERT_TRUE(eventually(sender, [](const WebhookStats& s) { return s.queued == 0; }));
  EXPECT_EQ(sender.settled_through(), 5u);
  sender.offer_line(6);  // not wanted
  EXPECT_EQ(sender.settled_through(), 6u);
}

// Left undelivered at a stop, a message holds the mark back for good: a restart sends it again.
TEST(Webhook, WhatAStopLeftUndeliveredHoldsItsDeliveryMarkBack) {
  const int port = testing::free_loopback_tcp_port();
  WebhookSender sender(hook_at(port), 0);
  sender.set_retry_delays(20ms, 50ms);
  for (uint64_t line = 1; line <= 3; ++line) {
    sender.offer_line(line);
    sender.post("segments/gate", message(static_cast<int>(line)));
  }
  ASSERT_TRUE(eventually(sender, [](const WebhookStats& s) { return s.failing; }));
  sender.finish(50ms);
  EXPECT_EQ(sender.stats().undelivered, 3u);
  EXPECT_EQ(sender.settled_through(), 0u);
  sender.offer_line(4);
  sender.post("segments/gate", message(4));  // after the stop: undelivered too
  EXPECT_EQ(sender.settled_through(), 0u);
}

// drop_oldest: a receiver down for long keeps the newest max_queued (and the one being tried).
TEST(Webhook, AFullQueueDropsTheOldestAndCountsThem) {
  const int port = testing::free_loopback_tcp_port();
  WebhookConfig c = hook_at(port);
  c.max_queued = 3;
  WebhookSender sender(c, 0);
  sender.set_retry_delays(20ms, 50ms);
  sender.post("segments/gate", message(0));
  ASSERT_TRUE(eventually(sender, [](const WebhookStats& s) { return s.failing; }));  // message 0 is being tried
  for (int n = 1; n < 7; ++n) sender.post("segments/gate", message(n));
  EXPECT_EQ(sender.stats().dropped, 3u);  // 1, 2 and 3
  EXPECT_EQ(sender.stats().queued, 4u);
  Receiver receiver(port);
  const auto got = receiver.wait_for(4);
  ASSERT_EQ(got.size(), 4u);
  for (auto [i, n] : {std::pair{0, 0}, std::pair{1, 4}, std::pair{2, 5}, std::pair{3, 6}}) {
    EXPECT_NE(got[i].body.find("\"n\":" + std::to_string(n)), std::string::npos) << got[i].body;
  }
}

// block: publish waits for room (an archive job goes at the receiver's pace) until the job is stopped.
TEST(Webhook, ABlockingQueueHoldsThePosterUntilThereIsRoomOrAStop) {
  const int port = testing::free_loopback_tcp_port();
  WebhookConfig c = hook_at(port);
  c.max_queued = 1;
  c.queue_policy = QueuePolicy::kBlock;
  WebhookSender sender(c, 0);
  sender.set_retry_delays(20ms, 50ms);
  sender.post("segments/gate", message(0));
  ASSERT_TRUE(eventually(sender, [](const WebhookStats& s) { return s.failing; }));
  sender.post("segments/gate", message(1));  // the queue's one place
  std::atomic<bool> stop{false}, returned{false};
  std::thread poster([&] {
    sender.post("segments/gate", message(2), &stop);
    returned = true;
  });
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(returned.load());  // held: no room
  {
    Receiver receiver(port);  // the receiver comes: room again, the held message goes in
    receiver.wait_for(3);
    poster.join();
    EXPECT_EQ(receiver.received().size(), 3u);
  }
  EXPECT_EQ(sender.stats().dropped, 0u);
  // Down again and full: a stop lets the poster go, and its message is counted undelivered ("block"
  // drops nothing; it was counted dropped, "97 dropped (queue full)" at a stop, until 2026-12-07).
  sender.post("segments/gate", message(3));
  ASSERT_TRUE(eventually(sender, [](const WebhookStats& s) { return s.failing; }));
  sender.post("segments/gate", message(4));
  std::thread held([&] { sender.post("segments/gate", message(5), &stop); });
  std::this_thread::sleep_for(100ms);
  stop = true;
  held.join();
  EXPECT_EQ(sender.stats().dropped, 0u);
  EXPECT_EQ(sender.stats().undelivered, 1u);
}

// finish() gives what waits a bounded time: a receiver that never comes does not hold publish's exit.
TEST(Webhook, FinishGivesUpAfterItsGraceAndCountsWhatWasNotDelivered) {
  WebhookSender sender(hook_at(testing::free_loopback_tcp_port()), 0);
  sender.set_retry_delays(20ms, 50ms);
  for (int n = 0; n < 3; ++n) sender.post("segments/gate", message(n));
  const auto start = std::chrono::steady_clock::now();
  sender.finish(300ms);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  const WebhookStats s = sender.stats();
  EXPECT_EQ(s.undelivered, 3u);
  EXPECT_EQ(s.queued, 0u);
  EXPECT_EQ(s.delivered, 0u);
}

// A receiver that takes the connection and never answers, with a timeout_s of 10 minutes: the request
// under way at the stop's deadline is cut there (it was waited for, and publish, stuck closing, was
// aborted by its watchdog after job.stage_timeout_s: exit 2 after 124 s, found 2026-12-07).
TEST(Webhook, ARequestNeverAnsweredIsCutAtTheStopsDeadline) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 8), 0);  // the kernel takes connections; nothing ever answers
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  WebhookConfig c = hook_at(ntohs(addr.sin_port));
  c.timeout_s = 600;
  {
    WebhookSender sender(c, 0);
    for (int n = 0; n < 2; ++n) sender.post("segments/gate", message(n));
    ASSERT_TRUE(eventually(sender, [](const WebhookStats& s) { return s.queued == 2; }));
    std::this_thread::sleep_for(200ms);  // the first request sent, waiting for its answer
    const auto start = std::chrono::steady_clock::now();
    sender.finish(300ms);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 60s) << "waited for the request's timeout_s";
    const WebhookStats s = sender.stats();
    EXPECT_EQ(s.undelivered, 2u);
    EXPECT_EQ(s.delivered, 0u);
  }
  {
    // Destroyed without a finish (publish's own end): the same, at once.
    WebhookSender sender(c, 0);
    sender.post("segments/gate", message(0));
    std::this_thread::sleep_for(200ms);
  }
  ::close(listener);
}

TEST(Webhook, FinishDeliversWhatWaitsWhenTheReceiverIsUp) {
  Receiver receiver;
  WebhookSender sender(hook_at(receiver.port()), 0);
  for (int n = 0; n < 50; ++n) sender.post("events/door", message(n));
  sender.finish(10s);
  EXPECT_EQ(sender.stats().delivered, 50u);
  EXPECT_EQ(receiver.received().size(), 50u);
}

// https: the receiver's certificate checked against ca_file; another authority's is refused, saying so.
TEST(Webhook, HttpsChecksTheReceiversCertificateAgainstCaFile) {
  Receiver receiver(0, /*tls=*/true);
  WebhookConfig c = hook_at(receiver.port(), "https");
  c.ca_file = kTlsDir + "metrics-test.crt";
  WebhookSender sender(c, 0);
  sender.post("segments/gate", message(0));
  ASSERT_EQ(receiver.wait_for(1).size(), 1u);

  c.ca_file = kTlsDir + "chain-root.crt";  // another authority
  WebhookSender distrusting(c, 1);
  distrusting.set_retry_delays(50ms, 50ms);
  distrusting.post("segments/gate", message(1));
  ASSERT_TRUE(eventually(distrusting, [](const WebhookStats& s) { return s.failing; }));
  EXPECT_NE(distrusting.stats().last_error.find("its TLS certificate is refused"), std::string::npos)
      << distrusting.stats().last_error;
  EXPECT_EQ(receiver.received().size(), 1u);

  c.ca_file.clear();
  c.tls_verify = false;
  WebhookSender trusting(c, 2);
  trusting.post("segments/gate", message(2));
  ASSERT_EQ(receiver.wait_for(2).size(), 2u);
}

// A receiver that does not answer within timeout_s is a failure tried again, not a stuck thread.
TEST(Webhook, AReceiverThatDoesNotAnswerInTimeIsTriedAgain) {
  Receiver receiver;
  std::atomic<int> calls{0};
  receiver.answer([&](const httplib::Request&, httplib::Response&) {
    if (calls++ == 0) std::this_thread::sleep_for(1500ms);
  });
  WebhookConfig c = hook_at(receiver.port());
  c.timeout_s = 0.3;
  WebhookSender sender(c, 0);
  sender.set_retry_delays(20ms, 50ms);
  sender.post("segments/gate", message(0));
  ASSERT_TRUE(eventually(sender, [](const WebhookStats& s) { return s.delivered == 1; }));
  EXPECT_GE(sender.stats().retries, 1u);
  EXPECT_NE(sender.stats().last_error.find("no answer within timeout_s (0.3 s)"), std::string::npos)
      << sender.stats().last_error;
  // The receiver took the late try too: both carry one Idempotency-Key, which it can drop the second by.
  sender.post("segments/gate", message(1));
  const auto got = receiver.wait_for(3);  // (the late try is recorded when its answer goes, last)
  ASSERT_EQ(got.size(), 3u);
  std::map<std::string, std::set<std::string>> keys_of;  // body -> the keys it came with
  for (const auto& r : got) keys_of[r.body].insert(r.idempotency_key);
  ASSERT_EQ(keys_of.size(), 2u);
  ASSERT_EQ(keys_of[message(0)].size(), 1u) << "both tries of a message carry one key";
  const std::string key = *keys_of[message(0)].begin();
  ASSERT_GT(key.size(), 4u);
  EXPECT_EQ(key.front(), '"');  // a structured-field string
  ASSERT_EQ(keys_of[message(1)].size(), 1u);
  EXPECT_NE(*keys_of[message(1)].begin(), key);  // another message, another key
  // Another sender (another run, another webhook) never repeats a key.
  WebhookSender other(c, 1);
  other.post("segments/gate", message(0));
  const auto also = receiver.wait_for(4);
  ASSERT_EQ(also.size(), 4u);
  EXPECT_NE(also[3].idempotency_key, key);
}

// A sender that a reload made for the receiver of one it removed (QueuedSink::wait_for_predecessors)
// queues its messages and sends none until that one has stopped: the receiver gets them in order.
TEST(Webhook, ASenderThatFollowsAnotherSendsNothingUntilThatOneHasStopped) {
  Receiver receiver;
  auto stopped = std::make_shared<std::atomic<bool>>(false);
  WebhookSender sender(hook_at(receiver.port()), 0, SinkPredecessors{stopped});
  sender.post("segments/gate", message(0));
  sender.post("segments/gate", message(1));
  std::this_thread::sleep_for(300ms);
  EXPECT_TRUE(receiver.received().empty());
  EXPECT_EQ(sender.stats().queued, 2u);
  stopped->store(true);
  const auto got = receiver.wait_for(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].body, message(0));
  EXPECT_EQ(got[1].body, message(1));
  // Its place in the list moved (an earlier webhook removed): named by the new one.
  sender.renumber(3);
  EXPECT_EQ(sender.name(), "publish.webhooks[3] (http://127.0.0.1:" + std::to_string(receiver.port()) + ")");
  EXPECT_EQ(sender.stats().index, 3u);
  EXPECT_EQ(sender.stats().name, sender.name());
  // A follower whose predecessor never stops still stops when publish does, its messages undelivered.
  auto never = std::make_shared<std::atomic<bool>>(false);
  WebhookSender waiting(hook_at(receiver.port()), 1, SinkPredecessors{never});
  waiting.post("segments/gate", message(2));
  waiting.finish(200ms);
  EXPECT_EQ(waiting.stats().undelivered + waiting.stats().queued, 1u);
  EXPECT_EQ(receiver.received().size(), 2u);
}

// cooldown_s: a stream's label that begins again within it of the last segment sent is held back, with
// its picture and end; by the stream's own time (start_ms), per stream and label, and across a camera's
// reconnection (its time starts over) by this machine's clock (start_capture_unix_ms).
TEST(Webhook, ASegmentWithinTheCooldownOfTheLastSentIsHeldBackWithItsPictureAndEnd) {
  WebhookConfig c = hook_at(testing::free_loopback_tcp_port());
  c.cooldown_s = 60;
  WebhookSender sender(c, 0);
  // Received by this machine's clock as a camera's frames are: 1,000,000 s after the epoch plus start_ms,
  // unless given (a reconnection: the camera's timestamps start over, its frames' arrival does not).
  auto segment = [](const char* stream, const char* label, const char* event, uint64_t start_seq, double start_ms,
                    double start_capture_ms = -1) {
    return nlohmann::json{{"schema", "vapipe.segment"}, {"stream_id", stream}, {"label", label}, {"event", event},
                          {"start_seq", start_seq}, {"start_ms", start_ms},
                          {"start_capture_unix_ms", start_capture_ms >= 0 ? start_capture_ms : 1e9 + start_ms}};
  };
  std::vector<std::string> sent;
  auto offer = [&](const nlohmann::json& m) {
    if (!sender.cooled_down(m)) {
      sent.push_back(m["stream_id"].get<std::string>() + " " + m["label"].get<std::string>() + " " +
                     m["event"].get<std::string>() + " " + std::to_string(m["start_seq"].get<uint64_t>()));
    }
  };
  offer(segment("gate", "person", "began", 0, 0));
  offer(segment("gate", "person", "picture", 0, 0));
  offer(segment("gate", "person", "ended", 0, 0));
  offer(segment("gate", "person", "began", 100, 30000));   // 30 s after the last sent: held back
  offer(segment("gate", "truck", "began", 120, 31000));    // another label
  offer(segment("door", "person", "began", 5, 31000));     // another stream
  offer(segment("gate", "person", "picture", 100, 30000)); // the held-back segment's picture and end
  offer(segment("gate", "person", "ended", 100, 30000));
  offer(segment("gate", "person", "began", 300, 61000));   // 61 s after the last one sent
  // The camera reconnected: its time started over. 20 s after the last one sent by this machine's clock
  // (a blip of its network, the same person): held back; 61 s after: sent; without a clock: sent.
  offer(segment("gate", "person", "began", 400, 1000, 1e9 + 81000));
  offer(segment("gate", "person", "ended", 400, 1000, 1e9 + 81000));
  offer(segment("gate", "person", "began", 450, 3000, 1e9 + 122000));
  offer(segment("gate", "person", "began", 500, 500, 0));
  offer(nlohmann::json{{"schema", "vapipe.event"}, {"stream_id", "gate"}, {"label", "-"}, {"event", "eos"},
                       {"start_seq", 0}});
  EXPECT_EQ(sent, (std::vector<std::string>{"gate person began 0", "gate person picture 0", "gate person ended 0",
                                            "gate truck began 120", "door person began 5", "gate person began 300",
                                            "gate person began 450", "gate person began 500", "gate - eos 0"}));
  EXPECT_EQ(sender.stats().cooled_down, 5u);
  // Without cooldown_s nothing is held back.
  WebhookSender plain(hook_at(testing::free_loopback_tcp_port()), 1);
  EXPECT_FALSE(plain.cooled_down(segment("gate", "person", "began", 0, 0)));
  EXPECT_FALSE(plain.cooled_down(segment("gate", "person", "began", 1, 10)));
}

// format: text and slack: each kind of message as one line a person reads, in local time.
TEST(WebhookText, EachKindOfMessageIsOneLineAPersonReads) {
  testing::LocalZone utc("UTC0");
  using nlohmann::json;
  const double t = 1764772325000;  // 2025-12-03 14:32:05 UTC
  json began{{"schema", "vapipe.segment"}, {"stream_id", "gate"}, {"event", "began"}, {"label", "truck"},
             {"start_capture_unix_ms", t}, {"start_camera_unix_ms", nullptr}, {"best_score", 0.934}};
  EXPECT_EQ(webhook_text("segments/gate", began), "gate: truck began at 2025-12-03 14:32:05 (score 0.93)");
  json ended = began;
  ended["event"] = "ended";
  ended["end_capture_unix_ms"] = t + 13000;
  ended["frames"] = 381;
  ended["score_mean"] = 0.91;
  EXPECT_EQ(webhook_text("segments/gate", ended),
            "gate: truck ended at 2025-12-03 14:32:18 after 13.0 s (381 frames, mean score 0.91)");
  // A file's segment: how long it lasts in the video (its frames' pts_ms), not how long classifying it
  // took (an archive job's capture times: 30 frames were "after 0.1 s" until 2026-12-07).
  json in_file = ended;
  in_file["end_capture_unix_ms"] = t + 100;
  in_file["start_ms"] = 66.667;
  in_file["end_ms"] = 1033.333;
  EXPECT_EQ(webhook_text("segments/gate", in_file),
            "gate: truck ended at 2025-12-03 14:32:05 after 1.0 s (381 frames, mean score 0.91)");
  // The camera's clock when the message has it (a DVR's file with recorded_at: the time it shows).
  ended["start_camera_unix_ms"] = t - 3600000;
  ended["end_camera_unix_ms"] = t - 3600000 + 60000;
  EXPECT_EQ(webhook_text("segments/gate", ended),
            "gate: truck ended at 2025-12-03 13:33:05 after 1 min 00 s (381 frames, mean score 0.91)");
  // Frames decoded after packets lost on the camera's network: said, as their scores are of smears.
  ended["damaged_frames"] = 0;
  EXPECT_EQ(webhook_text("segments/gate", ended),
            "gate: truck ended at 2025-12-03 13:33:05 after 1 min 00 s (381 frames, mean score 0.91)");
  ended["damaged_frames"] = 120;
  EXPECT_EQ(webhook_text("segments/gate", ended),
            "gate: truck ended at 2025-12-03 13:33:05 after 1 min 00 s (381 frames, mean score 0.91, 120 damaged)");
  // Held open across a camera's outage (segments_reconnect_grace_s): said, as the outage was not seen.
  ended["reconnections"] = 2;
  EXPECT_EQ(webhook_text("segments/gate", ended),
            "gate: truck ended at 2025-12-03 13:33:05 after 1 min 00 s (381 frames, mean score 0.91, 120 damaged, "
            "across 2 reconnections)");
  json picture{{"schema", "vapipe.segment"}, {"stream_id", "gate"}, {"event", "picture"}, {"label", "truck"},
               {"capture_unix_ms", t}, {"camera_unix_ms", nullptr}, {"picture", "/pics/gate/x.jpg"},
               {"picture_url_path", "/pictures/gate/x.jpg"}, {"error", nullptr}};
  EXPECT_EQ(webhook_text("segments/gate", picture),
            "gate: picture of truck at 2025-12-03 14:32:05: /pics/gate/x.jpg (served at /pictures/gate/x.jpg)");
  picture["picture"] = nullptr;
  picture["error"] = "cannot write /pics: No space left on device";
  EXPECT_EQ(webhook_text("segments/gate", picture), "gate: no picture of truck: cannot write /pics: No space left on device");
  json clip{{"schema", "vapipe.segment"}, {"stream_id", "gate"}, {"event", "clip"}, {"label", "truck"},
            {"clip", "/pics/gate/x.mp4"}, {"clip_url_path", "/pictures/gate/x.mp4"}, {"duration_s", 23.4},
            {"error", nullptr}};
  EXPECT_EQ(webhook_text("segments/gate", clip),
            "gate: clip of truck (23.4 s): /pics/gate/x.mp4 (served at /pictures/gate/x.mp4)");
  clip["clip"] = nullptr;
  clip["error"] = "none of its compressed frames is kept";
  EXPECT_EQ(webhook_text("segments/gate", clip), "gate: no clip of truck: none of its compressed frames is kept");

  json event{{"schema", "vapipe.event"}, {"stream_id", "yard"}, {"event", "reconnecting"}, {"attempt", 2},
             {"message", "stalled: no frame for 10 s\nsecond line"}};
  EXPECT_EQ(webhook_text("events/yard", event), "yard: reconnecting (attempt 2): stalled: no frame for 10 s second line");
  event = {{"schema", "vapipe.event"}, {"stream_id", "yard"}, {"event", "error"}, {"message", "gave up"}};
  EXPECT_EQ(webhook_text("events/yard", event), "yard: FAILED: gave up");
  event = {{"schema", "vapipe.event"}, {"stream_id", "a"}, {"event", "eos"}, {"message", "end of stream"},
           {"warning", "the file is cut short"}};
  EXPECT_EQ(webhook_text("events/a", event), "a: ended: end of stream; the file is cut short");
  event = {{"schema", "vapipe.event"}, {"stream_id", "a"}, {"event", "started"}, {"uri", "rtsp://***@cam/s"}};
  EXPECT_EQ(webhook_text("events/a", event), "a: started (rtsp://***@cam/s)");
  const json changed{{"schema", "vapipe.event"}, {"stream_id", "a"}, {"event", "changed"}, {"uri", "rtsp://***@cam2/s"},
                     {"message", "a reload changed its uri"}, {"roi", {0, 0, 1, 1}}, {"turn", nullptr}};
  EXPECT_EQ(webhook_text("events/a", changed), "a: a reload changed its uri (rtsp://***@cam2/s)");

  json result{{"schema", "vapipe.result"}, {"stream_id", "gate"}, {"seq", 812}, {"label", "truck"}, {"score", 0.5},
              {"error", nullptr}};
  EXPECT_EQ(webhook_text("results/gate", result), "gate #812: truck 0.50");
  json summary{{"schema", "vapipe.job_summary"}, {"job", "nightly"}, {"streams", json::array({json::object(), json::object()})},
               {"frames", 5400}, {"failed_streams", 1}, {"unfinished_streams", 0}, {"wall_s", 250.0}};
  EXPECT_EQ(webhook_text("job/summary", summary), "job 'nightly' ended: 2 stream(s), 5400 frames, 1 FAILED, in 4 min 10 s");

  // The request bodies of the formats.
  const auto text = webhook_request_body("text", "events/a", event, event.dump());
  EXPECT_EQ(text.body, "a: started (rtsp://***@cam/s)");
  EXPECT_EQ(text.content_type, "text/plain; charset=utf-8");
  const auto slack = webhook_request_body("slack", "events/a", event, event.dump());
  EXPECT_EQ(json::parse(slack.body), (json{{"text", "a: started (rtsp://***@cam/s)"}}));
  EXPECT_EQ(slack.content_type, "application/json");
  const auto as_json = webhook_request_body("json", "events/a", event, event.dump());
  EXPECT_EQ(json::parse(as_json.body), (json{{"topic", "events/a"}, {"payload", event}}));
}

// A text webhook's request carries the line and its content type to the receiver.
TEST(Webhook, ATextWebhookPostsTheLineAsPlainText) {
  testing::Receiver receiver;
  WebhookConfig c = hook_at(receiver.port());
  c.format = "text";
  WebhookSender sender(c, 0);
  const nlohmann::json event{{"schema", "vapipe.event"}, {"stream_id", "yard"}, {"event", "error"}, {"message", "gave up"}};
  sender.post("events/yard", webhook_request_body(sender.format(), "events/yard", event, event.dump()));
  const auto got = receiver.wait_for(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].body, "yard: FAILED: gave up");
  EXPECT_EQ(got[0].content_type, "text/plain; charset=utf-8");
}

// A picture as ingest leaves it: `bytes` in a fresh folder of the test's, as `name`; its path.
std::string picture_file(const std::string& folder, const std::string& name, const std::string& bytes) {
  const std::filesystem::path dir = vapipe::testing::empty_temp_dir(folder);
  std::ofstream(dir / name, std::ios::binary) << bytes;
  return (dir / name).string();
}

// A message posted as publish posts it: its body in the webhook's format, its picture attached.
void post_as_publish_does(WebhookSender& sender, const std::string& topic, const nlohmann::json& payload) {
  sender.post(topic, webhook_attachment_body(sender.format(), sender.attaches_pictures(), sender.attaches_clips(), payload,
                                             webhook_request_body(sender.format(), topic, payload, payload.dump())));
}

// attach_pictures: a segment's `picture` message carries its JPEG, read when sent: as multipart/form-data
// (format json: the usual body as `payload_json`, the JPEG as `file`) or as ntfy takes an attachment
// (format text: the JPEG as the body, the line in X-Message); other messages go as they are, and so
// does a picture message whose file is gone by then.
TEST(Webhook, AttachPicturesSendsTheJpegWithItsPictureMessage) {
  const std::string jpeg("\xff\xd8\xff\xe0\r\n--not-a-boundary\r\n\0\x01\xff\xd9", 28);
  const std::string path = picture_file("webhook-pictures", "09-33-41.421_truck.jpg", jpeg);
  struct Seen {
    std::string content_type, body, message, filename;
    std::string payload_json, file, file_name, file_type;
  };
  std::mutex mutex;
  std::vector<Seen> seen;
  testing::Receiver receiver;
  receiver.answer([&](const httplib::Request& req, httplib::Response&) {
    Seen s;
    s.content_type = req.get_header_value("Content-Type");
    s.body = req.body;
    s.message = req.get_header_value("X-Message");
    s.filename = req.get_header_value("X-Filename");
    if (req.has_file("payload_json")) s.payload_json = req.get_file_value("payload_json").content;
    if (req.has_file("file")) {
      const auto file = req.get_file_value("file");
      s.file = file.content;
      s.file_name = file.filename;
      s.file_type = file.content_type;
    }
    std::lock_guard<std::mutex> lock(mutex);
    seen.push_back(s);
  });
  testing::LocalZone utc("UTC0");
  const nlohmann::json began{{"schema", "vapipe.segment"}, {"stream_id", "gate"}, {"event", "began"}, {"label", "truck"}};
  nlohmann::json picture{{"schema", "vapipe.segment"}, {"stream_id", "gate"}, {"event", "picture"}, {"label", "truck"},
                         {"picture", path}, {"camera_unix_ms", 1764495125000.0}, {"error", nullptr}};
  auto send = [](WebhookSender& sender, const nlohmann::json& payload) {
    post_as_publish_does(sender, "segments/gate", payload);
  };
  WebhookConfig c = hook_at(receiver.port());
  c.attach_pictures = true;
  {
    WebhookSender sender(c, 0);
    send(sender, began);
    send(sender, picture);
    ASSERT_EQ(receiver.wait_for(2).size(), 2u);
  }
  c.format = "text";
  {
    WebhookSender sender(c, 1);
    send(sender, picture);
    nlohmann::json accented = picture;
    accented["label"] = "café";
    send(sender, accented);
    ASSERT_EQ(receiver.wait_for(4).size(), 4u);
  }
  std::unique_lock<std::mutex> lock(mutex);
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0].content_type, "application/json");  // not a picture message: as it is
  EXPECT_EQ(seen[0].body, webhook_body("segments/gate", began.dump()));
  EXPECT_EQ(seen[1].content_type.rfind("multipart/form-data; boundary=", 0), 0u) << seen[1].content_type;
  EXPECT_EQ(seen[1].payload_json, webhook_body("segments/gate", picture.dump()));
  EXPECT_EQ(seen[1].file, jpeg);
  EXPECT_EQ(seen[1].file_name, "gate_09-33-41.421_truck.jpg");
  EXPECT_EQ(seen[1].file_type, "image/jpeg");
  EXPECT_EQ(seen[2].content_type, "image/jpeg");
  EXPECT_EQ(seen[2].body, jpeg);
  EXPECT_EQ(seen[2].message, "gate: truck at 2025-11-30 09:32:05");  // no path: the picture is there
  EXPECT_EQ(seen[2].filename, "gate_09-33-41.421_truck.jpg");
  EXPECT_EQ(seen[3].message, "=?UTF-8?B?Z2F0ZTogY2Fmw6kgYXQgMjAyNS0xMS0zMCAwOTozMjowNQ==?=");  // RFC 2047

  // Gone by the time it is sent (the retention of pictures): the message goes without it.
  std::filesystem::remove(path);
  seen.clear();
  lock.unlock();
  {
    WebhookSender sender(c, 2);
    send(sender, picture);
    ASSERT_EQ(receiver.wait_for(5).size(), 5u);
  }
  lock.lock();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].content_type, "text/plain; charset=utf-8");
  EXPECT_EQ(seen[0].body, "gate: truck at 2025-11-30 09:32:05");
}

// format telegram: the Bot API, the method added to the bot's URL: a line as sendMessage's JSON to the
// webhook's chat, a picture (attach_pictures) as sendPhoto with the line as its caption.
TEST(Webhook, TelegramSendsLinesWithSendMessageAndPicturesWithSendPhoto) {
  const std::string path = picture_file("webhook-telegram", "14-32-05.000_truck.jpg", "\xff\xd8 a truck \xff\xd9");
  std::mutex mutex;
  std::vector<std::map<std::string, std::string>> photos;  // sendPhoto's fields, by name
  testing::Receiver receiver;
  receiver.answer([&](const httplib::Request& req, httplib::Response&) {
    if (req.path != "/hook/sendPhoto") return;
    std::map<std::string, std::string> fields;
    for (const auto& [name, part] : req.files) fields[name] = part.content;
    fields["photo filename"] = req.get_file_value("photo").filename;
    fields["photo type"] = req.get_file_value("photo").content_type;
    std::lock_guard<std::mutex> lock(mutex);
    photos.push_back(fields);
  });
  testing::LocalZone utc("UTC0");
  WebhookConfig c = hook_at(receiver.port());
  c.format = "telegram";
  c.telegram_chat_id = "-1001234567890";
  c.attach_pictures = true;
  WebhookSender sender(c, 0);
  const nlohmann::json began{{"schema", "vapipe.segment"}, {"stream_id", "gate"}, {"event", "began"},
                             {"label", "truck"}, {"start_camera_unix_ms", 1764513125000.0}, {"best_score", 0.93}};
  const nlohmann::json picture{{"schema", "vapipe.segment"}, {"stream_id", "gate"}, {"event", "picture"},
                               {"label", "truck"}, {"picture", path}, {"camera_unix_ms", 1764513125000.0}};
  for (const nlohmann::json& payload : {began, picture}) post_as_publish_does(sender, "segments/gate", payload);
  const auto got = receiver.wait_for(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].path, "/hook/sendMessage");
  EXPECT_EQ(got[0].content_type, "application/json");
  const auto message = nlohmann::json::parse(got[0].body);
  EXPECT_EQ(message["chat_id"], "-1001234567890");
  EXPECT_EQ(message["text"].get<std::string>().rfind("gate: truck began at 2025-11-30 14:32:05", 0), 0u) << message;
  EXPECT_EQ(got[1].path, "/hook/sendPhoto");
  EXPECT_EQ(got[1].content_type.rfind("multipart/form-data; boundary=", 0), 0u);
  std::lock_guard<std::mutex> lock(mutex);
  ASSERT_EQ(photos.size(), 1u);
  EXPECT_EQ(photos[0]["chat_id"], "-1001234567890");
  EXPECT_EQ(photos[0]["caption"], "gate: truck at 2025-11-30 14:32:05");
  EXPECT_EQ(photos[0]["photo"], "\xff\xd8 a truck \xff\xd9");
  EXPECT_EQ(photos[0]["photo filename"], "gate_14-32-05.000_truck.jpg");
  EXPECT_EQ(photos[0]["photo type"], "image/jpeg");
}

// attach_clips: a segment's `clip` message carries its MP4: to ntfy as the body (video/mp4), to
// Telegram with sendVideo (its caption the stream, label and length); with attach_clips alone a picture
// goes as its line; a clip over the format's limit (ntfy.sh's 15 MB for format text) goes as its line,
// without the file.
TEST(Webhook, AttachClipsSendsTheMp4WithItsClipMessage) {
  const std::string mp4("\0\0\0\x20" "ftypisom a clip \r\n--x\r\n", 27);
  const std::string path = picture_file("webhook-clips", "14-32-05.000_truck.mp4", mp4);
  std::mutex mutex;
  std::map<std::string, std::string> video;  // sendVideo's fields
  std::vector<std::pair<std::string, std::string>> named;  // each request's X-Message and X-Filename
  testing::Receiver receiver;
  receiver.answer([&](const httplib::Request& req, httplib::Response&) {
    std::lock_guard<std::mutex> lock(mutex);
    named.emplace_back(req.get_header_value("X-Message"), req.get_header_value("X-Filename"));
    if (req.path != "/hook/sendVideo") return;
    for (const auto& [name, part] : req.files) video[name] = part.content;
    video["video filename"] = req.get_file_value("video").filename;
    video["video type"] = req.get_file_value("video").content_type;
  });
  const nlohmann::json clip{{"schema", "vapipe.segment"}, {"stream_id", "gate"}, {"event", "clip"}, {"label", "truck"},
                            {"clip", path}, {"duration_s", 23.4}, {"error", nullptr}};
  const nlohmann::json picture{{"schema", "vapipe.segment"}, {"stream_id", "gate"}, {"event", "picture"},
                               {"label", "truck"}, {"picture", path + ".jpg"}, {"error", nullptr}};
  WebhookConfig c = hook_at(receiver.port());
  c.format = "text";
  c.attach_clips = true;
  {
    WebhookSender sender(c, 0);
    for (const nlohmann::json& payload : {clip, picture}) post_as_publish_does(sender, "segments/gate", payload);
    ASSERT_EQ(receiver.wait_for(2).size(), 2u);
  }
  c.format = "telegram";
  c.telegram_chat_id = "42";
  {
    WebhookSender sender(c, 1);
    post_as_publish_does(sender, "segments/gate", clip);
    ASSERT_EQ(receiver.wait_for(3).size(), 3u);
  }
  std::filesystem::resize_file(path, attachment_limit_bytes(c, /*clip=*/true) + 1);  // sparse: nothing written
  c.format = "text";
  {
    WebhookSender sender(c, 2);
    post_as_publish_does(sender, "segments/gate", clip);
    ASSERT_EQ(receiver.wait_for(4).size(), 4u);
  }
  const auto got = receiver.wait_for(4);
  EXPECT_EQ(got[0].content_type, "video/mp4");
  EXPECT_EQ(got[0].body, mp4);
  EXPECT_EQ(got[1].content_type, "text/plain; charset=utf-8") << "attach_pictures is off: the picture's line";
  EXPECT_EQ(got[1].body.rfind("gate: picture of truck", 0), 0u) << got[1].body;
  EXPECT_EQ(got[2].path, "/hook/sendVideo");
  EXPECT_EQ(got[3].content_type, "text/plain; charset=utf-8");
  EXPECT_EQ(got[3].body, "gate: truck, 23.4 s");
  std::lock_guard<std::mutex> lock(mutex);
  ASSERT_EQ(named.size(), 4u);
  EXPECT_EQ(named[0], std::make_pair(std::string("gate: truck, 23.4 s"), std::string("gate_14-32-05.000_truck.mp4")));
  EXPECT_EQ(named[3].second, "") << "too large: not attached";
  EXPECT_EQ(video["chat_id"], "42");
  EXPECT_EQ(video["caption"], "gate: truck, 23.4 s");
  EXPECT_EQ(video["supports_streaming"], "true");
  EXPECT_EQ(video["video"], mp4);
  EXPECT_EQ(video["video filename"], "gate_14-32-05.000_truck.mp4");
  EXPECT_EQ(video["video type"], "video/mp4");
}

// A Motion JPEG camera's clip is a QuickTime file: attached as a clip, with its own media type.
TEST(Webhook, AMotionJpegCamerasQuickTimeClipIsAttachedAsAClip) {
  EXPECT_TRUE(is_clip_file("/p/gate/2026-12-05/14-32-05.000_truck.mov"));
  EXPECT_EQ(std::string(attachment_content_type("/p/gate/a_truck.mov")), "video/quicktime");
  EXPECT_EQ(std::string(attachment_content_type("/p/gate/a_truck.mp4")), "video/mp4");
  EXPECT_EQ(std::string(attachment_content_type("/p/gate/a_truck.jpg")), "image/jpeg");
  const std::string mov("\0\0\0\x14" "ftypqt   a clip", 18);
  const std::string path = picture_file("webhook-mov", "14-32-05.000_truck.mov", mov);
  testing::Receiver receiver;
  WebhookConfig c = hook_at(receiver.port());
  c.format = "text";
  c.attach_clips = true;
  {
    WebhookSender sender(c, 0);
    post_as_publish_does(sender, "segments/gate",
                         nlohmann::json{{"schema", "vapipe.segment"}, {"stream_id", "gate"}, {"event", "clip"},
                                        {"label", "truck"}, {"clip", path}, {"duration_s", 3.0}, {"error", nullptr}});
    ASSERT_EQ(receiver.wait_for(1).size(), 1u);
  }
  const auto got = receiver.wait_for(1);
  EXPECT_EQ(got[0].content_type, "video/quicktime");
  EXPECT_EQ(got[0].body, mov);
}

// What a webhook attaches at most: attach_max_mb, or its format's receiver's.
TEST(Webhook, TheLargestFileAttachedIsTheFormatsOrAttachMaxMb) {
  WebhookConfig c;
  c.format = "telegram";
  EXPECT_EQ(attachment_limit_bytes(c, /*clip=*/false), 10'000'000u) << "sendPhoto";
  EXPECT_EQ(attachment_limit_bytes(c, true), 50'000'000u) << "sendVideo";
  c.format = "discord";
  EXPECT_EQ(attachment_limit_bytes(c, true), 10'000'000u);
  c.format = "text";
  EXPECT_EQ(attachment_limit_bytes(c, true), 15'000'000u) << "ntfy.sh";
  c.format = "json";
  EXPECT_EQ(attachment_limit_bytes(c, false), 50'000'000u);
  c.attach_max_mb = 2.5;
  EXPECT_EQ(attachment_limit_bytes(c, true), 2'500'000u);
}

// A clip over attach_max_mb goes as its line at once; one the receiver answers 413 to (a self-hosted
// ntfy's smaller limit) goes again at once as its line alone, not dropped, and the next goes after it.
TEST(Webhook, AFileTooLargeForTheReceiverGoesAsItsLineAlone) {
  const std::string mp4(40'000, 'v');
  const std::string path = picture_file("webhook-large", "14-32-05.000_truck.mp4", mp4);
  std::mutex mutex;
  std::vector<std::string> tried;  // each request's Content-Type, refused or not
  testing::Receiver receiver;
  receiver.answer([&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mutex);
    tried.push_back(req.get_header_value("Content-Type"));
    if (req.body.size() > 30'000) {
      res.status = 413;
      res.set_content("{\"error\":\"attachment too large\"}", "application/json");
    }
  });
  const nlohmann::json clip{{"schema", "vapipe.segment"}, {"stream_id", "gate"}, {"event", "clip"}, {"label", "truck"},
                            {"clip", path}, {"duration_s", 23.4}, {"error", nullptr}};
  WebhookConfig c = hook_at(receiver.port());
  c.format = "text";
  c.attach_clips = true;
  {
    WebhookSender sender(c, 0);
    post_as_publish_does(sender, "segments/gate", clip);
    post_as_publish_does(sender, "segments/gate", clip);
    ASSERT_EQ(receiver.wait_for(2).size(), 2u);
    EXPECT_TRUE(eventually(sender, [](const WebhookStats& s) { return s.delivered == 2; }));
    EXPECT_EQ(sender.stats().refused, 0u);
  }
  c.attach_max_mb = 0.03;  // 30 KB: not attached at all
  {
    WebhookSender sender(c, 1);
    post_as_publish_does(sender, "segments/gate", clip);
    ASSERT_EQ(receiver.wait_for(3).size(), 3u);
  }
  for (const auto& got : receiver.wait_for(3)) {
    EXPECT_EQ(got.content_type, "text/plain; charset=utf-8");
    EXPECT_EQ(got.body, "gate: truck, 23.4 s");
  }
  std::lock_guard<std::mutex> lock(mutex);
  EXPECT_EQ(tried, (std::vector<std::string>{"video/mp4", "text/plain; charset=utf-8", "video/mp4",
                                             "text/plain; charset=utf-8", "text/plain; charset=utf-8"}));
}

// format discord: a line as {"content": ...}; a picture (attach_pictures) as Discord's webhooks take a
// file: the JSON as payload_json, the JPEG as files[0].
TEST(Webhook, DiscordSendsLinesAsContentAndPicturesAsFiles) {
  const std::string path = picture_file("webhook-discord", "14-32-05.000_person.jpg", "\xff\xd8 a person \xff\xd9");
  std::mutex mutex;
  std::map<std::string, std::string> form;
  testing::Receiver receiver;
  receiver.answer([&](const httplib::Request& req, httplib::Response&) {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& [name, part] : req.files) form[name] = part.content;
    if (req.has_file("files[0]")) form["files[0] filename"] = req.get_file_value("files[0]").filename;
  });
  testing::LocalZone utc("UTC0");
  WebhookConfig c = hook_at(receiver.port());
  c.format = "discord";
  c.attach_pictures = true;
  WebhookSender sender(c, 0);
  const nlohmann::json ended{{"schema", "vapipe.segment"}, {"stream_id", "door"}, {"event", "ended"},
                             {"label", "person"}, {"end_camera_unix_ms", 1764513125000.0}};
  const nlohmann::json picture{{"schema", "vapipe.segment"}, {"stream_id", "door"}, {"event", "picture"},
                               {"label", "person"}, {"picture", path}, {"camera_unix_ms", 1764513125000.0}};
  for (const nlohmann::json& payload : {ended, picture}) post_as_publish_does(sender, "segments/door", payload);
  const auto got = receiver.wait_for(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].content_type, "application/json");
  EXPECT_EQ(nlohmann::json::parse(got[0].body)["content"].get<std::string>().rfind("door: person ended at ", 0), 0u)
      << got[0].body;
  EXPECT_EQ(got[1].content_type.rfind("multipart/form-data; boundary=", 0), 0u);
  std::lock_guard<std::mutex> lock(mutex);
  EXPECT_EQ(nlohmann::json::parse(form["payload_json"]), (nlohmann::json{{"content", "door: person at 2025-11-30 14:32:05"}}));
  EXPECT_EQ(form["files[0]"], "\xff\xd8 a person \xff\xd9");
  EXPECT_EQ(form["files[0] filename"], "door_14-32-05.000_person.jpg");
}

// format: teams: a Teams channel's workflow ("When a Teams webhook request is received") takes a
// message with an Adaptive Card; the line is a TextRun, shown as it is (a redacted uri's "***" and an
// id's "_" are not read as Markdown), and a picture message goes as its line (Teams takes no files).
TEST(Webhook, TeamsPostsEachLineAsAnAdaptiveCard) {
  testing::Receiver receiver;
  testing::LocalZone utc("UTC0");
  WebhookConfig c = hook_at(receiver.port());
  c.format = "teams";
  WebhookSender sender(c, 0);
  const nlohmann::json started{{"schema", "vapipe.event"}, {"stream_id", "back_door"}, {"event", "started"},
                               {"uri", "rtsp://***@cam/s"}};
  const nlohmann::json picture{{"schema", "vapipe.segment"}, {"stream_id", "door"}, {"event", "picture"},
                               {"label", "person"}, {"picture", "/pics/door/x.jpg"}, {"camera_unix_ms", 1764513125000.0},
                               {"error", nullptr}};
  post_as_publish_does(sender, "events/back_door", started);
  post_as_publish_does(sender, "segments/door", picture);
  const auto got = receiver.wait_for(2);
  ASSERT_EQ(got.size(), 2u);
  auto card_of = [](const std::string& body) {
    const nlohmann::json message = nlohmann::json::parse(body);
    EXPECT_EQ(message["type"], "message");
    EXPECT_EQ(message["attachments"].size(), 1u);
    const nlohmann::json& attachment = message["attachments"][0];
    EXPECT_EQ(attachment["contentType"], "application/vnd.microsoft.card.adaptive");
    EXPECT_TRUE(attachment["contentUrl"].is_null());
    return attachment["content"];
  };
  const nlohmann::json first = card_of(got[0].body);
  EXPECT_EQ(got[0].content_type, "application/json");
  EXPECT_EQ(first["type"], "AdaptiveCard");
  EXPECT_EQ(first["version"], "1.4");
  EXPECT_EQ(first["body"], (nlohmann::json::array({{{"type", "RichTextBlock"},
                                                   {"inlines", nlohmann::json::array({{{"type", "TextRun"},
                                                                                      {"text", "back_door: started (rtsp://***@cam/s)"}}})}}})));
  EXPECT_EQ(card_of(got[1].body)["body"][0]["inlines"][0]["text"],
            "door: picture of person at 2025-11-30 14:32:05: /pics/door/x.jpg");
}

}  // namespace
}  // namespace vapipe
