// publish.redis against a real Redis server (redis-server, started by the test on a loopback port),
// read back with redis-cli as a consumer would: every message in order on key_prefix + its topic, again
// after the server went away, with passwords, refusals and trimming as servers do them. The RESP2
// encoder and reader on their own first.
#include "stages/publish/redis_streams.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/fakes/free_port.h"
#include "tests/fakes/redis_server.h"
#include "tests/fakes/tcp_proxy.h"

namespace vapipe {
namespace {

using namespace std::chrono_literals;
using testing::RedisOptions;
using testing::RedisServer;

RedisConfig server_at(const std::string& url) {
  RedisConfig c;
  c.url = url;
  c.topics = {"results/", "events/"};
  c.key_prefix = "vapipe:test:";
  c.timeout_s = 5;
  return c;
}

// Each line of redis-cli's output.
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The payloads of a stream's entries, in order (XRANGE prints id, "topic", topic, "payload", payload).
// `follow_moved`: redis-cli -c, which follows a Redis Cluster's MOVED as a consumer of the cluster would.
std::vector<std::string> payloads(const RedisServer& server, const std::string& key, bool follow_moved = false) {
  const std::vector<std::string> lines =
      lines_of(follow_moved ? server.cli({"-c", "XRANGE", key, "-", "+"}) : server.cli({"XRANGE", key, "-", "+"}));
  std::vector<std::string> out;
  for (size_t i = 0; i + 4 < lines.size(); i += 5) out.push_back(lines[i + 4]);
  return out;
}

TEST(RespCommand, IsAnArrayOfBulkStrings) {
  EXPECT_EQ(resp_command({"XADD", "k", "*", "payload", "a\r\nb"}),
            "*5\r\n$4\r\nXADD\r\n$1\r\nk\r\n$1\r\n*\r\n$7\r\npayload\r\n$4\r\na\r\nb\r\n");
  EXPECT_EQ(resp_command({"PING"}), "*1\r\n$4\r\nPING\r\n");
}

TEST(RespReader, TakesRepliesAsTheirBytesComeAndRefusesWhatIsNotRedis) {
  RespReader reader;
  const std::string bytes = "+OK\r\n-WRONGTYPE Operation against a key\r\n:42\r\n$4\r\na\r\nb\r\n$-1\r\n*2\r\n$1\r\nx\r\n:-7\r\n";
  std::vector<RespReply> replies;
  for (char c : bytes) {  // one byte at a time: a reply may span any number of reads
    reader.feed(std::string_view(&c, 1));
    for (;;) {
      auto r = reader.next();
      ASSERT_TRUE(r.ok()) << r.status().message();
      if (!*r) break;
      replies.push_back(**r);
    }
  }
  ASSERT_EQ(replies.size(), 6u);
  EXPECT_EQ(replies[0].type, RespReply::Type::kStatus);
  EXPECT_EQ(replies[0].text, "OK");
  EXPECT_EQ(replies[1].type, RespReply::Type::kError);
  EXPECT_EQ(replies[1].text, "WRONGTYPE Operation against a key");
  EXPECT_EQ(replies[2].integer, 42);
  EXPECT_EQ(replies[3].type, RespReply::Type::kBulk);
  EXPECT_EQ(replies[3].text, "a\r\nb");  // a bulk string holds any bytes
  EXPECT_EQ(replies[4].type, RespReply::Type::kNil);
  ASSERT_EQ(replies[5].elements.size(), 2u);
  EXPECT_EQ(replies[5].elements[0].text, "x");
  EXPECT_EQ(replies[5].elements[1].integer, -7);

  RespReader http;
  http.feed("HTTP/1.1 400 Bad Request\r\n");
  auto r = http.next();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a Redis server?"), std::string::npos) << r.status().message();
  RespReader bad_length;
  bad_length.feed("$99999999999\r\n");
  EXPECT_FALSE(bad_length.next().ok());
}

TEST(RedisStreamsPublisher, EachMessageIsAddedToTheStreamOfItsTopicInOrder) {
  RedisServer server;
  ASSERT_TRUE(server.started()) << "redis-server (Debian: redis-server) did not start";
  RedisStreamsPublisher publisher(server_at(server.url()), 0);
  ASSERT_TRUE(publisher.wait_connected(5s).ok());
  for (int i = 0; i < 600; ++i) {  // more than one window of pipelined XADDs
    publisher.publish(i % 2 ? "results/door" : "results/yard", "{\"seq\":" + std::to_string(i) + "}");
  }
  publisher.publish("events/door", "{\"event\":\"eos\"}");
  publisher.finish(5s);
  const RedisStats s = publisher.stats();
  EXPECT_EQ(s.delivered, 601u);
  EXPECT_EQ(s.undelivered, 0u);
  EXPECT_EQ(s.connections, 1u);
  EXPECT_EQ(server.cli({"XLEN", "vapipe:test:results/door"}), "300\n");
  const std::vector<std::string> yard = payloads(server, "vapipe:test:results/yard");
  ASSERT_EQ(yard.size(), 300u);
  for (int i = 0; i < 300; ++i) EXPECT_EQ(yard[i], "{\"seq\":" + std::to_string(2 * i) + "}");
  const std::vector<std::string> entry = lines_of(server.cli({"XRANGE", "vapipe:test:events/door", "-", "+"}));
  ASSERT_EQ(entry.size(), 5u);
  EXPECT_EQ(entry[1], "topic");
  EXPECT_EQ(entry[2], "events/door");
  EXPECT_EQ(entry[3], "payload");
  EXPECT_EQ(entry[4], "{\"event\":\"eos\"}");
}

TEST(RedisStreamsPublisher, AServerThatWentAwayGetsWhatWaitedWhenItIsBack) {
  RedisServer server;
  ASSERT_TRUE(server.started());
  RedisStreamsPublisher publisher(server_at(server.url()), 0);
  publisher.set_retry_delays(200ms, 200ms);
  ASSERT_TRUE(publisher.wait_connected(5s).ok());
  server.kill(SIGKILL);  // a crash: the connection resets, and the server comes back empty
  for (int i = 0; i < 50; ++i) publisher.publish("results/door", std::to_string(i));
  std::this_thread::sleep_for(500ms);  // tries fail meanwhile
  EXPECT_FALSE(publisher.stats().connected);
  EXPECT_EQ(publisher.stats().queued, 50u);
  EXPECT_FALSE(publisher.stats().last_error.empty());
  ASSERT_TRUE(server.start());
  for (int i = 50; i < 100; ++i) publisher.publish("results/door", std::to_string(i));
  publisher.finish(5s);
  const RedisStats s = publisher.stats();
  EXPECT_EQ(s.delivered, 100u);
  EXPECT_EQ(s.undelivered, 0u);
  EXPECT_EQ(s.connections, 2u);
  const std::vector<std::string> got = payloads(server, "vapipe:test:results/door");
  ASSERT_EQ(got.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(got[i], std::to_string(i));
}

TEST(RedisStreamsPublisher, APasswordIsSentAndAMissingOrWrongOneIsSaidInTheServersWords) {
  RedisServer server(RedisOptions{"right one"});
  ASSERT_TRUE(server.started());
  RedisConfig none = server_at(server.url());
  RedisStreamsPublisher without(none, 0);
  const Status refused = without.wait_connected(5s);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.message(), "the server asks for a password (NOAUTH): set password_file");
  RedisConfig wrong = none;
  wrong.password = "wrong one";
  RedisStreamsPublisher with_wrong(wrong, 1);
  const Status wrong_status = with_wrong.wait_connected(5s);
  ASSERT_FALSE(wrong_status.ok());
  EXPECT_NE(wrong_status.message().find("the server refused the password: WRONGPASS"), std::string::npos)
      << wrong_status.message();
  EXPECT_EQ(wrong_status.message().find("wrong one"), std::string::npos);  // never the password itself
  RedisConfig right = none;
  right.password = "right one";
  right.db = 2;
  RedisStreamsPublisher with_right(right, 2);
  ASSERT_TRUE(with_right.wait_connected(5s).ok());
  with_right.publish("events/door", "x");
  with_right.finish(5s);
  EXPECT_EQ(with_right.stats().delivered, 1u);
  EXPECT_EQ(server.cli({"-n", "2", "XLEN", "vapipe:test:events/door"}), "1\n");  // in its database
  EXPECT_EQ(server.cli({"XLEN", "vapipe:test:events/door"}), "0\n");
}

TEST(RedisStreamsPublisher, OverTlsTheServersCertificateIsCheckedAndAClientCertificateSentWhenAsked) {
  RedisServer server(RedisOptions{"", /*tls=*/true});
  ASSERT_TRUE(server.started()) << "redis-server without TLS?";
  const std::string tls = RedisServer::tls_dir();
  // Its certificate is its own (self-signed): refused against this machine's authorities, saying so.
  RedisStreamsPublisher untrusted(server_at(server.url()), 0);
  const Status refused = untrusted.wait_connected(5s);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("the server's certificate is refused: self-signed certificate (set ca_file"),
            std::string::npos) << refused.message();
  // Trusted with ca_file (or not checked): every message goes, over TLS.
  RedisConfig trusting = server_at(server.url());
  trusting.ca_file = tls + "metrics-test.crt";
  RedisStreamsPublisher publisher(trusting, 1);
  ASSERT_TRUE(publisher.wait_connected(5s).ok());
  for (int i = 0; i < 300; ++i) publisher.publish("results/door", std::to_string(i));
  publisher.finish(5s);
  EXPECT_EQ(publisher.stats().delivered, 300u);
  const std::vector<std::string> got = payloads(server, "vapipe:test:results/door");
  ASSERT_EQ(got.size(), 300u);
  EXPECT_EQ(got.back(), "299");
  RedisConfig unchecked = server_at(server.url());
  unchecked.tls_verify = false;
  RedisStreamsPublisher blind(unchecked, 2);
  EXPECT_TRUE(blind.wait_connected(5s).ok());
  // A plain connection to the TLS port is no Redis conversation.
  RedisStreamsPublisher plain(server_at("redis://127.0.0.1:" + std::to_string(server.port())), 3);
  const Status plain_status = plain.wait_connected(5s);
  ASSERT_FALSE(plain_status.ok());
  EXPECT_NE(plain_status.message().find("(a port that speaks TLS? then the url is rediss://)"), std::string::npos)
      << plain_status.message();

  RedisServer asking(RedisOptions{"", true, /*client_certificates=*/true});
  ASSERT_TRUE(asking.started());
  RedisConfig without = server_at(asking.url());
  without.ca_file = tls + "metrics-test.crt";
  RedisStreamsPublisher anonymous(without, 4);
  const Status anonymous_status = anonymous.wait_connected(5s);
  ASSERT_FALSE(anonymous_status.ok());
  // (the server's alert, "certificate required", or its connection closed before the alert was read)
  EXPECT_NE(anonymous_status.message().find("a client certificate"), std::string::npos) << anonymous_status.message();
  EXPECT_NE(anonymous_status.message().find("set cert_file and key_file"), std::string::npos) << anonymous_status.message();
  RedisConfig with = without;
  with.cert_file = tls + "chain-leaf-fullchain.crt";
  with.key_file = tls + "chain-leaf.key";
  RedisStreamsPublisher known(with, 5);
  ASSERT_TRUE(known.wait_connected(5s).ok()) << known.stats().last_error;
  known.publish("events/door", "x");
  known.finish(5s);
  EXPECT_EQ(known.stats().delivered, 1u);
  EXPECT_EQ(asking.cli({"XLEN", "vapipe:test:events/door"}), "1\n");
}

TEST(RedisStreamsPublisher, AMessageTheServerRefusesIsDroppedAndTheNextGo) {
  RedisServer server;
  ASSERT_TRUE(server.started());
  ASSERT_EQ(server.cli({"SET", "vapipe:test:events/yard", "a string, not a stream"}), "OK\n");
  RedisStreamsPublisher publisher(server_at(server.url()), 0);
  publisher.publish("events/door", "1");
  publisher.publish("events/yard", "2");  // WRONGTYPE
  publisher.publish("events/door", "3");
  publisher.finish(5s);
  const RedisStats s = publisher.stats();
  EXPECT_EQ(s.delivered, 2u);
  EXPECT_EQ(s.refused, 1u);
  EXPECT_NE(s.last_error.find("WRONGTYPE"), std::string::npos) << s.last_error;
  EXPECT_EQ(payloads(server, "vapipe:test:events/door"), (std::vector<std::string>{"1", "3"}));
}

// OOM (past the server's maxmemory) passes once memory is freed: the messages wait and go then, each
// once, in order.
TEST(RedisStreamsPublisher, AnErrorThatPassesHasTheMessageSentAgainLater) {
  RedisServer server;
  ASSERT_TRUE(server.started());
  RedisStreamsPublisher publisher(server_at(server.url()), 0);
  publisher.set_retry_delays(100ms, 100ms);
  ASSERT_TRUE(publisher.wait_connected(5s).ok());
  ASSERT_EQ(server.cli({"CONFIG", "SET", "maxmemory", "1"}), "OK\n");
  for (int i = 0; i < 20; ++i) publisher.publish("results/door", std::to_string(i));
  for (int i = 0; i < 100 && publisher.stats().last_error.empty(); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(publisher.stats().last_error.rfind("the server answered: OOM", 0), 0u) << publisher.stats().last_error;
  EXPECT_EQ(publisher.stats().delivered, 0u);
  ASSERT_EQ(server.cli({"CONFIG", "SET", "maxmemory", "0"}), "OK\n");
  publisher.finish(5s);
  EXPECT_EQ(publisher.stats().delivered, 20u);
  EXPECT_EQ(publisher.stats().refused, 0u);
  std::vector<std::string> expected;
  for (int i = 0; i < 20; ++i) expected.push_back(std::to_string(i));
  EXPECT_EQ(payloads(server, "vapipe:test:results/door"), expected);
}

// A server that closes idle connections (its `timeout`): the next message goes on a new connection
// at once, not after a back-off.
TEST(RedisStreamsPublisher, AConnectionThatServedAWhileIsMadeAgainAtOnceWhenItEnds) {
  RedisServer server;
  ASSERT_TRUE(server.started());
  ASSERT_EQ(server.cli({"CONFIG", "SET", "timeout", "1"}), "OK\n");
  RedisStreamsPublisher publisher(server_at(server.url()), 0);
  publisher.set_retry_delays(30s, 30s, 500ms);
  ASSERT_TRUE(publisher.wait_connected(5s).ok());
  publisher.publish("events/door", "before");
  std::this_thread::sleep_for(2500ms);  // closed by the server meanwhile (it looks about every 100 ms)
  publisher.publish("events/door", "after");
  publisher.finish(3s);  // a back-off of 30 s would leave it undelivered
  EXPECT_EQ(publisher.stats().delivered, 2u);
  EXPECT_EQ(publisher.stats().connections, 2u);
  EXPECT_EQ(payloads(server, "vapipe:test:events/door"), (std::vector<std::string>{"before", "after"}));
}

// With nothing to send, a server that went away is found by the idle PING: /metrics and vapipe status
// say so without waiting for the next alert.
TEST(RedisStreamsPublisher, AnIdleConnectionFindsAServerThatWentAway) {
  RedisServer server;
  ASSERT_TRUE(server.started());
  RedisStreamsPublisher publisher(server_at(server.url()), 0);
  publisher.set_retry_delays(30s, 30s, 30s, 200ms);
  ASSERT_TRUE(publisher.wait_connected(5s).ok());
  std::this_thread::sleep_for(500ms);  // pings answered meanwhile
  EXPECT_TRUE(publisher.stats().connected);
  EXPECT_EQ(publisher.stats().connections, 1u);
  server.kill(SIGKILL);
  for (int i = 0; i < 300 && publisher.stats().connected; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(publisher.stats().connected);
  EXPECT_FALSE(publisher.stats().last_error.empty());
  EXPECT_EQ(publisher.stats().delivered, 0u);
}

// A server that hangs (connections open, nothing answered) holds the stop up no longer than its grace:
// what was not answered is counted undelivered.
TEST(RedisStreamsPublisher, AServerThatHangsHoldsTheStopUpNoLongerThanItsGrace) {
  RedisServer server;
  ASSERT_TRUE(server.started());
  RedisStreamsPublisher publisher(server_at(server.url()), 0);
  ASSERT_TRUE(publisher.wait_connected(5s).ok());
  server.pause();
  for (int i = 0; i < 10; ++i) publisher.publish("events/door", std::to_string(i));
  const auto before = std::chrono::steady_clock::now();
  publisher.finish(500ms);
  const auto took = std::chrono::steady_clock::now() - before;
  server.resume();
  EXPECT_LT(took, 3s);  // (its timeout_s is 5 s)
  EXPECT_EQ(publisher.stats().undelivered, 10u);
  EXPECT_EQ(publisher.stats().delivered, 0u);
  EXPECT_FALSE(publisher.stats().connected);
}

// A Redis Cluster: the node the url names answers MOVED for a key of another node's slot; the messages
// go to that node. With key_prefix a hash tag, one job's streams are all in one slot; without it, they
// are on several nodes, and the messages still go, each once and in order, one node at a time.
TEST(RedisStreamsPublisher, InARedisClusterEachMessageGoesToTheNodeOfItsKeysSlot) {
  RedisServer a(RedisOptions{"", false, false, /*cluster=*/true}), b(RedisOptions{"", false, false, true}),
      c(RedisOptions{"", false, false, true});
  ASSERT_TRUE(a.started() && b.started() && c.started());
  ASSERT_TRUE(testing::make_redis_cluster({&a, &b, &c})) << "redis-cli --cluster create failed";
  for (const std::string prefix : {"{vapipe:test}:", "vapipe:spread:"}) {
    RedisConfig config = server_at(a.url());
    config.key_prefix = prefix;
    RedisStreamsPublisher publisher(config, 0);
    std::vector<std::string> door, yard;
    for (int i = 0; i < 200; ++i) {
      const std::string topic = i % 2 ? "results/door" : "results/yard";
      publisher.publish(topic, std::to_string(i));
      (i % 2 ? door : yard).push_back(std::to_string(i));
    }
    publisher.finish(10s);
    EXPECT_EQ(publisher.stats().delivered, 200u) << prefix << ": " << publisher.stats().last_error;
    EXPECT_EQ(publisher.stats().refused, 0u) << prefix;
    EXPECT_EQ(payloads(a, prefix + "results/door", /*follow_moved=*/true), door) << prefix;
    EXPECT_EQ(payloads(a, prefix + "results/yard", /*follow_moved=*/true), yard) << prefix;
  }
  // The two spread keys are in slots of two different nodes (else the second pass tested nothing).
  auto node_of = [&](const std::string& key) {
    const std::string moved = a.cli({"XLEN", key});  // without -c: MOVED <slot> <node>, or the length here
    return moved.rfind("MOVED", 0) == 0 ? moved.substr(moved.rfind(' ') + 1) : std::string("a");
  };
  EXPECT_NE(node_of("vapipe:spread:results/door"), node_of("vapipe:spread:results/yard"));
}

// A slot being moved from one node to another (as redis-cli --cluster reshard does: IMPORTING on the
// new node, MIGRATING on the old one): a key the old node no longer has is answered ASK, and the message
// goes to the new node with an ASKING, while the move goes on, not only once it has ended.
TEST(RedisStreamsPublisher, InARedisClusterAKeyOfASlotBeingMovedIsAddedAtItsNewNode) {
  RedisServer a(RedisOptions{"", false, false, /*cluster=*/true}), b(RedisOptions{"", false, false, true}),
      c(RedisOptions{"", false, false, true});
  ASSERT_TRUE(a.started() && b.started() && c.started());
  ASSERT_TRUE(testing::make_redis_cluster({&a, &b, &c})) << "redis-cli --cluster create failed";
  const std::string key = "{vapipe:test}:results/door";
  const std::vector<const RedisServer*> nodes = {&a, &b, &c};
  const RedisServer* from = nullptr;  // the node of the key's slot
  for (const RedisServer* n : nodes) {
    if (n->cli({"XLEN", key}) == "0\n") from = n;  // (the others answer MOVED)
  }
  ASSERT_NE(from, nullptr);
  const RedisServer* to = from == &a ? &b : &a;
  const std::string slot = lines_of(a.cli({"CLUSTER", "KEYSLOT", key})).at(0);
  const std::string from_id = lines_of(from->cli({"CLUSTER", "MYID"})).at(0);
  const std::string to_id = lines_of(to->cli({"CLUSTER", "MYID"})).at(0);
  ASSERT_EQ(to->cli({"CLUSTER", "SETSLOT", slot, "IMPORTING", from_id}), "OK\n");
  ASSERT_EQ(from->cli({"CLUSTER", "SETSLOT", slot, "MIGRATING", to_id}), "OK\n");
  ASSERT_EQ(from->cli({"XLEN", key}).rfind("ASK " + slot, 0), 0u) << "the node does not answer ASK for the key";

  RedisConfig config = server_at(from->url());
  config.key_prefix = "{vapipe:test}:";
  RedisStreamsPublisher publisher(config, 0);
  publisher.set_retry_delays(30s, 30s);  // (an ASK taken for an error that passes would wait 30 s)
  std::vector<std::string> sent;
  for (int i = 0; i < 300; ++i) {
    publisher.publish("results/door", std::to_string(i));
    sent.push_back(std::to_string(i));
  }
  for (int i = 0; i < 100 && publisher.stats().delivered < 300; ++i) std::this_thread::sleep_for(50ms);
  EXPECT_EQ(publisher.stats().delivered, 300u) << publisher.stats().last_error;
  EXPECT_EQ(publisher.stats().node, "127.0.0.1:" + std::to_string(from->port()));  // (back to the url's node)
  // The move ends: the slot is the new node's everywhere.
  for (const RedisServer* n : nodes) EXPECT_EQ(n->cli({"CLUSTER", "SETSLOT", slot, "NODE", to_id}), "OK\n");
  EXPECT_EQ(payloads(*to, key), sent);
  publisher.publish("results/door", "after");
  publisher.finish(10s);
  EXPECT_EQ(publisher.stats().delivered, 301u) << publisher.stats().last_error;
  sent.push_back("after");
  EXPECT_EQ(payloads(*to, key), sent);
}

// A master that Redis Sentinel watches: found through the sentinels (the first in the url's list is
// down), and after it crashes, its replica that Sentinel promotes gets the messages; each message once,
// in order (those sent before the crash had reached the replica, so the failover lost none).
TEST(RedisStreamsPublisher, AMasterFoundThroughSentinelIsFollowedToTheReplicaPromotedWhenItFails) {
  RedisServer master;
  RedisServer replica(RedisOptions{"", false, false, false, /*replica_of=*/master.port()});
  ASSERT_TRUE(master.started() && replica.started());
  testing::RedisSentinel sentinel(master.port());
  ASSERT_TRUE(sentinel.started()) << "redis-server --sentinel did not start";
  ASSERT_TRUE(sentinel.wait_for_replicas(1, 15s)) << "the sentinel did not find the replica";
  const int down = testing::free_loopback_tcp_port();
  RedisStreamsPublisher publisher(
      server_at("redis+sentinel://127.0.0.1:" + std::to_string(down) + ",127.0.0.1:" + std::to_string(sentinel.port()) +
                "/mymaster"),
      0);
  publisher.set_retry_delays(200ms, 500ms);
  ASSERT_TRUE(publisher.wait_connected(5s).ok()) << publisher.stats().last_error;
  EXPECT_EQ(publisher.stats().node, "127.0.0.1:" + std::to_string(master.port()));
  std::vector<std::string> sent;
  for (int i = 0; i < 200; ++i) {
    publisher.publish("results/door", std::to_string(i));
    sent.push_back(std::to_string(i));
  }
  for (int i = 0; i < 200 && (publisher.stats().delivered < 200 || replica.cli({"XLEN", "vapipe:test:results/door"}) != "200\n"); ++i) {
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(replica.cli({"XLEN", "vapipe:test:results/door"}), "200\n");
  master.kill(SIGKILL);
  for (int i = 200; i < 400; ++i) {
    publisher.publish("results/door", std::to_string(i));
    sent.push_back(std::to_string(i));
  }
  for (int i = 0; i < 600 && publisher.stats().delivered < 400; ++i) std::this_thread::sleep_for(50ms);
  EXPECT_EQ(sentinel.master_port(), replica.port()) << "the sentinel did not fail over";
  EXPECT_EQ(publisher.stats().delivered, 400u) << publisher.stats().last_error;
  EXPECT_EQ(publisher.stats().node, "127.0.0.1:" + std::to_string(replica.port()));
  EXPECT_EQ(payloads(replica, "vapipe:test:results/door"), sent);
  publisher.finish(5s);
}

// A failover ordered while the master is up (SENTINEL FAILOVER, as for an upgrade), with messages
// published all along: the old master takes writes until Sentinel makes it a replica, which drops them,
// and Sentinel names the new one only once it has seen it promoted (each second). So messages wait from
// the sentinel's word that the failover begins (+failover-state-send-slaveof-noone) to its word that the
// replica was promoted, and go there: none lost, none twice, in order. With passwords, and again over TLS
// (rediss+sentinel: the sentinels and the servers; the subscription read without waiting through OpenSSL).
void check_a_demoted_master_is_left(bool tls) {
  const std::string password = tls ? "" : "secret";
  RedisServer first(RedisOptions{password, tls}),
      second(RedisOptions{password, tls, false, false, /*replica_of=*/first.port()});
  ASSERT_TRUE(first.started() && second.started());
  testing::RedisSentinel sentinel(first.port(), tls ? "" : "watch", password, tls);
  ASSERT_TRUE(sentinel.started());
  ASSERT_TRUE(sentinel.wait_for_replicas(1, 15s));
  // The replica has loaded the master's data and follows it (a first sync waits 5 s, diskless, for more
  // replicas): a replica promoted before that would lack what the master had.
  for (int i = 0; i < 300 && second.cli({"INFO", "replication"}).find("master_link_status:up") == std::string::npos; ++i) {
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_NE(second.cli({"INFO", "replication"}).find("master_link_status:up"), std::string::npos);
  RedisConfig config = server_at((tls ? "rediss" : "redis") + std::string("+sentinel://127.0.0.1:") +
                                 std::to_string(sentinel.port()) + "/mymaster");
  config.password = password;
  config.sentinel_password = tls ? "" : "watch";
  if (tls) config.ca_file = RedisServer::tls_dir() + "metrics-test.crt";
  RedisStreamsPublisher publisher(config, 0);
  publisher.set_retry_delays(200ms, 500ms);
  ASSERT_TRUE(publisher.wait_connected(5s).ok()) << publisher.stats().last_error;
  std::vector<std::string> sent;
  std::atomic<bool> done{false};
  std::thread source([&] {  // a message every 2 ms, before, during and after the failover
    for (int i = 0; !done; ++i) {
      publisher.publish("results/door", std::to_string(i));
      sent.push_back(std::to_string(i));
      std::this_thread::sleep_for(2ms);
    }
  });
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(sentinel.cli({"SENTINEL", "FAILOVER", "mymaster"}), "OK\n");
  for (int i = 0; i < 300 && sentinel.master_port() != second.port(); ++i) std::this_thread::sleep_for(50ms);
  std::this_thread::sleep_for(500ms);
  done = true;
  source.join();
  ASSERT_EQ(sentinel.master_port(), second.port()) << "the sentinel did not fail over";
  publisher.finish(10s);
  EXPECT_EQ(publisher.stats().delivered, sent.size()) << publisher.stats().last_error;
  EXPECT_EQ(publisher.stats().node, "127.0.0.1:" + std::to_string(second.port()));
  const std::vector<std::string> got = payloads(second, "vapipe:test:results/door");
  EXPECT_EQ(got.size(), sent.size());
  EXPECT_EQ(got, sent);
}

TEST(RedisStreamsPublisher, AMasterDemotedByAFailoverIsLeftForTheNewOne) { check_a_demoted_master_is_left(false); }

TEST(RedisStreamsPublisher, AMasterDemotedByAFailoverIsLeftForTheNewOneOverTls) { check_a_demoted_master_is_left(true); }

// A sentinel slow to answer (in another region, over TLS: its handshake alone takes a round trip or
// two): its failover events are followed all the same, and the subscription, made on a thread of its
// own, holds up no message meanwhile. (Until stop 54 its connection and TLS handshake had at most 1 s,
// on the delivering thread, which waited for its answers too: such a sentinel was never watched, a
// failover was found only once the old master stopped taking messages, and those sent to it meanwhile
// could be lost; nothing said so but a debug line.) A sentinel that cannot be subscribed to is said, in
// the stats (/healthz, vapipe status).
TEST(RedisStreamsPublisher, ASentinelSlowToAnswerIsWatchedAndHoldsUpNoMessage) {
  RedisServer master(RedisOptions{"", /*tls=*/true});
  ASSERT_TRUE(master.started());
  testing::RedisSentinel sentinel(master.port(), "", "", /*tls=*/true);
  ASSERT_TRUE(sentinel.started());
  std::optional<testing::TcpProxy> far(std::in_place, sentinel.port());
  far->set_reply_delay(1500ms);  // (the TLS handshake's answer too: 3 s before the connection is made)
  const std::string at = "127.0.0.1:" + std::to_string(far->port());
  RedisConfig config = server_at("rediss+sentinel://" + at + "/mymaster");
  config.ca_file = RedisServer::tls_dir() + "metrics-test.crt";
  RedisStreamsPublisher publisher(config, 0);
  publisher.set_retry_delays(200ms, 500ms);
  ASSERT_TRUE(publisher.wait_connected(15s).ok()) << publisher.stats().last_error;
  // Each round looks at the watch; the subscription under way (3 s at least: the handshake, then SUBSCRIBE) holds none up: the
  // messages are delivered before it is made.
  std::vector<std::string> sent;
  for (int i = 0; i < 20; ++i) {
    publisher.publish("results/door", std::to_string(i));
    sent.push_back(std::to_string(i));
  }
  for (int i = 0; i < 100 && publisher.stats().delivered < 20; ++i) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(publisher.stats().delivered, 20u);
  EXPECT_EQ(publisher.stats().sentinel_watched, "") << "subscribed before its first answer could come back?";
  // More messages, as a camera sends them: the subscription is taken at a round once made.
  int next = 20;
  auto publish_until = [&](const std::function<bool(const RedisStats&)>& done) {
    for (int i = 0; i < 300 && !done(publisher.stats()); ++i) {
      publisher.publish("results/door", std::to_string(next));
      sent.push_back(std::to_string(next++));
      std::this_thread::sleep_for(50ms);
    }
  };
  publish_until([](const RedisStats& s) { return !s.sentinel_watched.empty(); });
  const RedisStats watched = publisher.stats();
  EXPECT_EQ(watched.sentinel_watched, at);
  EXPECT_EQ(watched.sentinel_watch_error, "");
  // The sentinel's own word: a client subscribed to the four failover channels.
  EXPECT_NE(sentinel.cli({"CLIENT", "LIST"}).find("sub=4"), std::string::npos) << sentinel.cli({"CLIENT", "LIST"});

  // The sentinel gone (its port closed): said, in the stats (/healthz, vapipe status) and once as a
  // warning; the messages go on to the master.
  far.reset();
  publish_until([](const RedisStats& s) { return !s.sentinel_watch_error.empty(); });
  const RedisStats gone = publisher.stats();
  EXPECT_EQ(gone.sentinel_watch_error, "cannot watch sentinel " + at + " for failovers: cannot connect to " + at +
                                           ": connection refused");
  EXPECT_EQ(gone.sentinel_watched, "");
  publisher.finish(5s);
  EXPECT_EQ(publisher.stats().delivered, sent.size());
  EXPECT_EQ(payloads(master, "vapipe:test:results/door"), sent);
}

// What goes wrong with Sentinel, said so: a master's name no sentinel watches, a sentinel that asks for
// a password, none that answers.
TEST(RedisStreamsPublisher, SentinelsThatCannotSayWhereTheMasterIsAreSaidWhy) {
  RedisServer master;
  ASSERT_TRUE(master.started());
  testing::RedisSentinel sentinel(master.port(), "watch");
  ASSERT_TRUE(sentinel.started());
  const std::string at = "127.0.0.1:" + std::to_string(sentinel.port());
  auto failure = [](const RedisConfig& config) {
    RedisStreamsPublisher publisher(config, 0);
    const Status st = publisher.wait_connected(5s);
    return st.ok() ? std::string("connected") : st.message();
  };
  RedisConfig unknown = server_at("redis+sentinel://" + at + "/nosuch");
  unknown.sentinel_password = "watch";
  EXPECT_EQ(failure(unknown), "no sentinel watches a master named 'nosuch' (the url's path names it as their "
                              "`sentinel monitor` does)");
  RedisConfig no_password = server_at("redis+sentinel://" + at + "/mymaster");
  EXPECT_EQ(failure(no_password), "no sentinel said where the master 'mymaster' is (" + at +
                                      ": it asks for a password (NOAUTH): set sentinel_password_file)");
  RedisConfig given = no_password;
  given.sentinel_password = "watch";
  EXPECT_EQ(failure(given), "connected");
  const int down = testing::free_loopback_tcp_port();
  EXPECT_EQ(failure(server_at("redis+sentinel://127.0.0.1:" + std::to_string(down) + "/mymaster")),
            "no sentinel said where the master 'mymaster' is (127.0.0.1:" + std::to_string(down) +
                ": cannot connect to 127.0.0.1:" + std::to_string(down) + ": connection refused)");
}

// Answers lost (the network failed after the XADDs went out; the server added them, and the sink gave
// the connection up after timeout_s): on the next connection the streams are looked at, and what they
// hold after the last entry answered is not sent again. A stream with no entry answered yet has its
// messages sent again (at least once).
TEST(RedisStreamsPublisher, MessagesWhoseAnswersWereLostAreNotAddedTwice) {
  RedisServer server;
  ASSERT_TRUE(server.started());
  testing::TcpProxy proxy(server.port());
  RedisConfig config = server_at("redis://127.0.0.1:" + std::to_string(proxy.port()));
  config.timeout_s = 1;
  RedisStreamsPublisher publisher(config, 0);
  publisher.set_retry_delays(100ms, 100ms);
  ASSERT_TRUE(publisher.wait_connected(5s).ok()) << publisher.stats().last_error;
  std::vector<std::string> door, yard;
  auto publish = [&](int i) {
    publisher.publish(i % 2 ? "results/door" : "results/yard", std::to_string(i));
    (i % 2 ? door : yard).push_back(std::to_string(i));
  };
  for (int i = 0; i < 20; ++i) publish(i);
  for (int i = 0; i < 100 && publisher.stats().delivered < 20; ++i) std::this_thread::sleep_for(20ms);
  ASSERT_EQ(publisher.stats().delivered, 20u);
  // The next round's answers are lost (at least its first message, on results/yard; the others wait
  // for it or go in it).
  proxy.swallow_replies();
  for (int i = 20; i < 220; ++i) publish(i);
  (void)publisher.wait_connected(5s);  // connected again or not yet: the loop below waits for delivery
  for (int i = 0; i < 250 && publisher.stats().delivered < 220; ++i) std::this_thread::sleep_for(20ms);
  RedisStats s = publisher.stats();
  EXPECT_EQ(s.delivered, 220u) << s.last_error;
  EXPECT_GE(s.found_added, 1u);
  EXPECT_EQ(s.connections, 2u);
  EXPECT_EQ(payloads(server, "vapipe:test:results/door"), door);  // each once, in order
  EXPECT_EQ(payloads(server, "vapipe:test:results/yard"), yard);
  // A stream none of whose entries was answered yet: its message is sent again, and added twice.
  proxy.swallow_replies();
  publisher.publish("events/door", "first");
  publisher.finish(10s);
  s = publisher.stats();
  EXPECT_EQ(s.delivered, 221u) << s.last_error;
  EXPECT_EQ(payloads(server, "vapipe:test:events/door"), (std::vector<std::string>{"first", "first"}));
}

TEST(RedisStreamsPublisher, EachStreamIsTrimmedToAboutMaxlen) {
  RedisServer server;
  ASSERT_TRUE(server.started());
  RedisConfig config = server_at(server.url());
  config.maxlen = 100;
  RedisStreamsPublisher publisher(config, 0);
  for (int i = 0; i < 1000; ++i) publisher.publish("results/door", std::to_string(i));
  publisher.finish(5s);
  EXPECT_EQ(publisher.stats().delivered, 1000u);
  // MAXLEN ~ trims whole nodes of the stream (100 entries each by default): at least 100 are kept,
  // and far fewer than 1000.
  const int kept = std::stoi(server.cli({"XLEN", "vapipe:test:results/door"}));
  EXPECT_GE(kept, 100);
  EXPECT_LE(kept, 300);
  const std::vector<std::string> got = payloads(server, "vapipe:test:results/door");
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.back(), "999");  // the newest are those kept
}

TEST(RedisStreamsPublisher, APortThatIsNotRedisIsSaidToBeNone) {
  testing::LoopbackSocket listener(/*listening=*/true);
  ASSERT_TRUE(listener.ok);
  std::thread http([&] {  // answers whatever comes as a web server does
    const int client = ::accept(listener.fd, nullptr, nullptr);
    if (client < 0) return;
    char buffer[256];
    (void)::recv(client, buffer, sizeof buffer, 0);
    const std::string answer = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
    (void)::send(client, answer.data(), answer.size(), MSG_NOSIGNAL);
    std::this_thread::sleep_for(300ms);
    ::close(client);
  });
  RedisStreamsPublisher publisher(server_at("redis://127.0.0.1:" + std::to_string(listener.port)), 0);
  const Status st = publisher.wait_connected(5s);
  http.join();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("not a Redis server?"), std::string::npos) << st.message();
}

TEST(RedisStreamsPublisher, AFullQueueDropsTheOldestAndTheStopCountsWhatWaits) {
  RedisConfig config = server_at("redis://127.0.0.1:" + std::to_string(testing::free_loopback_tcp_port()));
  config.max_queued = 10;
  RedisStreamsPublisher publisher(config, 0);
  for (int i = 0; i < 25; ++i) publisher.publish("events/door", std::to_string(i));
  publisher.finish(200ms);
  const RedisStats s = publisher.stats();
  EXPECT_EQ(s.dropped, 15u);
  EXPECT_EQ(s.undelivered, 10u);
  EXPECT_EQ(s.delivered, 0u);
  EXPECT_NE(s.last_error.find("connection refused"), std::string::npos) << s.last_error;
}

}  // namespace
}  // namespace vapipe
