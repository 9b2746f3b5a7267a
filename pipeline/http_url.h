// URLs of the services vapipe itself connects to: http:// and https:// (publish.webhooks), mqtt:// and
// mqtts:// (publish.mqtt), redis:// (publish.redis), kafka:// and kafkas:// (publish.kafka). Parsed when the config loads, so that a typo is an error naming the key
// rather than a failure at the first alert.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/status.h"

namespace vapipe {

struct HttpUrl {
  std::string scheme = "http";  // lower case: http, https, mqtt, mqtts
  bool tls = false;      // https://, mqtts://
  std::string host;      // without brackets for IPv6 ("::1")
  int port = 0;          // the scheme's own (80, 443, 1883, 8883) when the URL gives none
  std::string target;    // path and query as sent in the request line ("/api/webhook/x?a=1"); "/" at least
  std::string user, password;  // from user:password@, percent-decoded; empty: none
  // "https://host:port" ("mqtt://host:port"), for log lines and errors: the path and the query, where a webhook's secret
  // often is (Home Assistant's webhook id, a chat's token), and the credentials are left out.
  std::string origin() const;
  // "host:port" as cpp-httplib's Client takes it ("[::1]:8080").
  std::string host_port() const;
};

// An error says what is wrong and how to write it; it never repeats the URL's path, query or password.
Result<HttpUrl> parse_http_url(std::string_view url);

// An MQTT broker's: mqtt://[user[:password]@]host[:port] (1883) or mqtts://... (8883, TLS); a path
// other than "/" is an error (MQTT has none: topics are set apart). Errors never repeat the password.
Result<HttpUrl> parse_mqtt_url(std::string_view url);

// A Redis server's URL. Its master may be found through Redis Sentinel instead (a replica promoted
// when the master fails): then `sentinels` lists where to ask, and `master_name` whom for.
struct RedisUrl : HttpUrl {
  struct Address {
    std::string host;  // without brackets for IPv6
    int port = 26379;
  };
  uint32_t db = 0;                 // the path's /<db> (SELECT)
  std::vector<Address> sentinels;  // redis+sentinel://: in the URL's order (host and port unused then)
  std::string master_name;
  bool sentinel() const { return !sentinels.empty(); }
  // "redis://host:6379", or "redis+sentinel://s1:26379,s2:26379/mymaster": without credentials or db.
  std::string origin() const;
};

// redis://[user[:password]@]host[:port][/db] or rediss://... (TLS), 6379 for both (Redis's port
// whatever it speaks; Azure's TLS port is 6380); target "/" or "/<db>". Or, for a master that Redis
// Sentinel watches, redis+sentinel://[user[:password]@]host[:26379][,host[:26379]...]/<master name>[/db]
// (rediss+sentinel://: TLS to the sentinels and the master); the user and password are the master's.
// Errors never repeat the password.
Result<RedisUrl> parse_redis_url(std::string_view url);

// A Kafka cluster's: the brokers to bootstrap from (any of them gives the others' addresses).
struct KafkaUrl : HttpUrl {
  struct Address {
    std::string host;  // without brackets for IPv6
    int port = 9092;
  };
  std::vector<Address> brokers;  // in the URL's order; host and port are the first's
  // "host1:9092,host2:9092", as librdkafka's bootstrap.servers takes it.
  std::string bootstrap_servers() const;
  // "kafka://host1:9092,host2:9092": without credentials.
  std::string origin() const;
};

// kafka://[user[:password]@]host[:9092][,host[:9092]...] or kafkas://... (TLS, also 9092: a Kafka
// listener's port is the cluster's choice); no path. The user and password are SASL's. Errors never
// repeat the password.
Result<KafkaUrl> parse_kafka_url(std::string_view url);

}  // namespace vapipe
