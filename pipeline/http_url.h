// URLs of the services vapipe itself connects to: http:// and https:// (publish.webhooks), mqtt:// and
// mqtts:// (publish.mqtt), redis:// (publish.redis). Parsed when the config loads, so that a typo is an error naming the key
// rather than a failure at the first alert.
#pragma once

#include <string>
#include <string_view>

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

// A Redis server's: redis://[user[:password]@]host[:port][/db] or rediss://... (TLS), 6379 for both
// (Redis's port whatever it speaks; Azure's TLS port is 6380); target "/" or "/<db>". Errors never
// repeat the password.
Result<HttpUrl> parse_redis_url(std::string_view url);

}  // namespace vapipe
