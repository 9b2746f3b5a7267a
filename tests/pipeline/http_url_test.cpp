#include "pipeline/http_url.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace vapipe {
namespace {

TEST(HttpUrl, ReadsSchemeHostPortTargetAndCredentials) {
  auto u = parse_http_url("https://ha.local:8123/api/webhook/gate?x=1#frag");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_TRUE(u->tls);
  EXPECT_EQ(u->host, "ha.local");
  EXPECT_EQ(u->port, 8123);
  EXPECT_EQ(u->target, "/api/webhook/gate?x=1");  // the fragment is not sent
  EXPECT_EQ(u->origin(), "https://ha.local:8123");

  u = parse_http_url("HTTP://bot:p%40ss%3Aw@10.0.0.5");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_FALSE(u->tls);
  EXPECT_EQ(u->port, 80);
  EXPECT_EQ(u->target, "/");
  EXPECT_EQ(u->user, "bot");
  EXPECT_EQ(u->password, "p@ss:w");
  EXPECT_EQ(u->origin(), "http://10.0.0.5:80");  // no credentials

  u = parse_http_url("https://[::1]:9443?token=abc");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, 9443);
  EXPECT_EQ(u->target, "/?token=abc");
  EXPECT_EQ(u->host_port(), "[::1]:9443");
  EXPECT_EQ(parse_http_url("https://ntfy.sh/alerts")->port, 443);
}

TEST(HttpUrl, ErrorsSayWhatIsWrongWithoutRepeatingPathOrPassword) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"ntfy.sh/alerts", "expected an http:// or https:// URL"},
      {"mqtt://broker/secret-a", "got a mqtt:// one"},
      {"http:///secret-b", "it names no host"},
      {"http://host:/secret-c", "not followed by a port"},
      {"http://host:0/secret-d", "its port '0' is not a number from 1 to 65535"},
      {"http://host:80x/secret-e", "its port '80x'"},
      {"http://[::1/secret-f", "no closing ']'"},
      {"http://[::1]x/secret-g", "expected ':PORT'"},
      {"http://u:50%zz@host/secret-h", "a '%' that starts no escape"},
      {"http://host/secret i", "holds a space"},
      {"http://host/secret-j\n", "holds a control character"},
      {"http://ho st/secret-k", "holds a character a host name cannot have"},
  };
  for (const auto& [url, expected] : cases) {
    auto u = parse_http_url(url);
    ASSERT_FALSE(u.ok()) << url;
    EXPECT_NE(u.status().message().find(expected), std::string::npos) << url << ": " << u.status().message();
    EXPECT_EQ(u.status().message().find("secret"), std::string::npos) << u.status().message();
  }
}

// publish.mqtt's brokers: mqtt:// (1883) and mqtts:// (8883, TLS), a user and password, no path.
TEST(HttpUrl, ReadsAnMqttBrokersUrl) {
  auto plain = parse_mqtt_url("mqtt://broker.local");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(plain->port, 1883);
  EXPECT_FALSE(plain->tls);
  EXPECT_EQ(plain->origin(), "mqtt://broker.local:1883");
  auto tls = parse_mqtt_url("MQTTS://vapipe:p%40ss@[::1]/");
  ASSERT_TRUE(tls.ok()) << tls.status().message();
  EXPECT_EQ(tls->port, 8883);
  EXPECT_TRUE(tls->tls);
  EXPECT_EQ(tls->user, "vapipe");
  EXPECT_EQ(tls->password, "p@ss");
  EXPECT_EQ(tls->origin(), "mqtts://[::1]:8883");
  EXPECT_EQ(parse_mqtt_url("mqtt://h:1884")->port, 1884);
  for (const auto& [url, expected] : std::vector<std::pair<std::string, std::string>>{
           {"http://broker:1883", "expected an mqtt:// or mqtts:// URL, got a http:// one"},
           {"broker:1883", "expected an mqtt:// or mqtts:// URL (e.g. mqtt://broker.local:1883)"},
           {"mqtt://u:secret@broker/vapipe/alerts", "a broker's URL has no path or query"},
           {"mqtt://u:secret@broker:0", "its port '0'"},
       }) {
    auto u = parse_mqtt_url(url);
    ASSERT_FALSE(u.ok()) << url;
    EXPECT_NE(u.status().message().find(expected), std::string::npos) << url << ": " << u.status().message();
    EXPECT_EQ(u.status().message().find("secret"), std::string::npos) << u.status().message();
  }
  // A webhook's URL is not a broker's, nor the other way round.
  EXPECT_FALSE(parse_http_url("mqtt://broker").ok());
}

// publish.kafka's clusters: kafka:// and kafkas:// (TLS), 9092 for both, a list of brokers to bootstrap
// from, SASL's user and password, no path.
TEST(HttpUrl, ReadsAKafkaClustersBrokers) {
  auto one = parse_kafka_url("kafka://kafka.local");
  ASSERT_TRUE(one.ok()) << one.status().message();
  EXPECT_FALSE(one->tls);
  ASSERT_EQ(one->brokers.size(), 1u);
  EXPECT_EQ(one->bootstrap_servers(), "kafka.local:9092");
  EXPECT_EQ(one->origin(), "kafka://kafka.local:9092");
  auto three = parse_kafka_url("KAFKAS://vapipe:p%40ss@k1:9093,[::1],k3.example:19092/");
  ASSERT_TRUE(three.ok()) << three.status().message();
  EXPECT_TRUE(three->tls);
  EXPECT_EQ(three->user, "vapipe");
  EXPECT_EQ(three->password, "p@ss");
  EXPECT_EQ(three->bootstrap_servers(), "k1:9093,[::1]:9092,k3.example:19092");
  EXPECT_EQ(three->origin(), "kafkas://k1:9093,[::1]:9092,k3.example:19092");
  EXPECT_EQ(three->host, "k1");
  EXPECT_EQ(three->port, 9093);
  for (const auto& [url, expected] : std::vector<std::pair<std::string, std::string>>{
           {"PLAINTEXT://k1:9092", "expected a kafka:// or kafkas:// URL, got a plaintext:// one"},
           {"k1:9092,k2:9092", "expected a kafka:// or kafkas:// URL (e.g. kafka://kafka-1:9092,kafka-2:9092)"},
           {"kafka://u:secret@k1:9092/vapipe.results", "a Kafka cluster's URL has no path or query"},
           {"kafka://u:secret@k1:9092,,k2", "its list of brokers has an empty entry"},
           {"kafka://u:secret@k1:9092,k2:x", "broker 2: its port 'x' is not a number"},
           {"kafka://u:secret@k1:0", "its port '0'"},
       }) {
    auto u = parse_kafka_url(url);
    ASSERT_FALSE(u.ok()) << url;
    EXPECT_NE(u.status().message().find(expected), std::string::npos) << url << ": " << u.status().message();
    EXPECT_EQ(u.status().message().find("secret"), std::string::npos) << u.status().message();
  }
}

}  // namespace
}  // namespace vapipe
