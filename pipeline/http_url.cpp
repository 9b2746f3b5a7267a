#include "pipeline/http_url.h"

#include <cctype>
#include <cstdint>

namespace vapipe {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX escapes decoded; false on a '%' that starts none.
bool percent_decode(std::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int hi = hex_value(in[i + 1]), lo = hex_value(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return true;
}

bool is_blank_or_control(unsigned char c) { return c <= 0x20 || c == 0x7f; }

}  // namespace

std::string HttpUrl::origin() const { return scheme + "://" + host_port(); }

std::string HttpUrl::host_port() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

namespace {

// The URL schemes one kind of service takes: the plain one and its TLS one, with their ports.
struct SchemePair {
  const char* plain;
  int plain_port;
  const char* tls;
  int tls_port;
  const char* example;
};

Result<HttpUrl> parse_url(std::string_view url, const SchemePair& kind) {
  const std::string example = std::string(" (e.g. ") + kind.example + ")";
  // "an http://", "an mqtt://" (as they are read out), "a redis://", "a kafka://".
  const std::string article = kind.plain[0] == 'r' || kind.plain[0] == 'k' ? "a " : "an ";
  const std::string expected = "expected " + article + kind.plain + ":// or " + kind.tls + ":// URL";
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return InvalidArgument(expected + example);
  HttpUrl u;
  const std::string scheme = lower(url.substr(0, scheme_end));
  if (scheme == kind.tls) {
    u.tls = true;
  } else if (scheme != kind.plain) {
    return InvalidArgument(expected + ", got a " + scheme + ":// one" + example);
  }
  u.scheme = scheme;
  std::string_view rest = url.substr(scheme_end + 3);
  const auto authority_end = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, authority_end);
  std::string_view target = authority_end == std::string_view::npos ? std::string_view() : rest.substr(authority_end);
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    const auto colon = userinfo.find(':');
    if (!percent_decode(userinfo.substr(0, colon), &u.user) ||
        (colon != std::string_view::npos && !percent_decode(userinfo.substr(colon + 1), &u.password))) {
      return InvalidArgument("its user:password@ has a '%' that starts no escape (write a '%' as %25)");
    }
  }
  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) return InvalidArgument("its IPv6 host has no closing ']'");
    u.host = std::string(authority.substr(1, close - 1));
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return InvalidArgument("expected ':PORT' after its IPv6 host's ']'");
      port_text = after.substr(1);
      if (port_text.empty()) return InvalidArgument("its ':' after the host is not followed by a port");
    }
  } else {
    const auto colon = authority.rfind(':');
    u.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) return InvalidArgument("its ':' after the host is not followed by a port");
    }
  }
  if (u.host.empty()) return InvalidArgument("it names no host" + example);
  for (unsigned char c : u.host) {
    if (is_blank_or_control(c) || c == '@' || c == '[' || c == ']' || c == '%') {
      return InvalidArgument("its host '" + u.host + "' holds a character a host name cannot have");
    }
  }
  u.port = u.tls ? kind.tls_port : kind.plain_port;
  if (!port_text.empty()) {
    int port = 0;
    for (char c : port_text) {
      if (c < '0' || c > '9' || port > 65535) return InvalidArgument("its port '" + std::string(port_text) +
                                                                     "' is not a number from 1 to 65535");
      port = port * 10 + (c - '0');
    }
    if (port < 1 || port > 65535) {
      return InvalidArgument("its port '" + std::string(port_text) + "' is not a number from 1 to 65535");
    }
    u.port = port;
  }
  // The fragment is the browser's, never sent.
  if (const auto hash = target.find('#'); hash != std::string_view::npos) target = target.substr(0, hash);
  for (unsigned char c : target) {
    if (is_blank_or_control(c)) {
      return InvalidArgument(std::string("its path or query holds ") + (c == ' ' ? "a space" : "a control character") +
                             ", which an HTTP request line cannot carry: percent-escape it (a space as %20)");
    }
  }
  u.target = target.empty() ? "/" : std::string(target);
  if (u.target.front() == '?') u.target = "/" + u.target;
  return u;
}

}  // namespace

Result<HttpUrl> parse_http_url(std::string_view url) {
  return parse_url(url, {"http", 80, "https", 443, "https://ha.local:8123/api/webhook/vapipe-gate"});
}

Result<HttpUrl> parse_mqtt_url(std::string_view url) {
  auto u = parse_url(url, {"mqtt", 1883, "mqtts", 8883, "mqtt://broker.local:1883"});
  if (u.ok() && u->target != "/") {
    // MQTT has no path; a topic written into the URL is a mistake the broker would never report.
    return InvalidArgument("a broker's URL has no path or query (the topics are publish.mqtt[].topic_prefix's); "
                           "write mqtt://host:port");
  }
  return u;
}

namespace {

// "/<db>" or "/" (or "" for none): its number; false when it is not one.
bool parse_db(std::string_view path, uint32_t* db) {
  if (path.empty() || path == "/") return true;
  if (path.size() > 7 || path.find_first_not_of("0123456789", 1) != std::string_view::npos) return false;
  *db = static_cast<uint32_t>(std::stoul(std::string(path.substr(1))));
  return true;
}

Result<RedisUrl> parse_redis_sentinel_url(std::string_view url, bool tls) {
  const std::string example = " (e.g. redis+sentinel://sentinel-1:26379,sentinel-2:26379/mymaster)";
  const std::string plain = tls ? "rediss" : "redis";
  std::string_view rest = url.substr(url.find("://") + 3);
  const auto authority_end = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, authority_end);
  std::string_view path = authority_end == std::string_view::npos ? std::string_view() : rest.substr(authority_end);
  RedisUrl u;
  std::string userinfo;
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
    userinfo = std::string(authority.substr(0, at + 1));
    authority = authority.substr(at + 1);
  }
  // Each sentinel's host[:port], parsed as a URL of its own; the first carries the user:password@.
  for (size_t start = 0; start <= authority.size();) {
    size_t comma = authority.find(',', start);
    if (comma == std::string_view::npos) comma = authority.size();
    const std::string_view one = authority.substr(start, comma - start);
    if (one.empty()) return InvalidArgument("its list of sentinels has an empty entry" + example);
    auto parsed = parse_url(plain + "://" + (u.sentinels.empty() ? userinfo : std::string()) + std::string(one),
                            {"redis", 26379, "rediss", 26379, "redis+sentinel://sentinel-1:26379/mymaster"});
    if (!parsed.ok()) return InvalidArgument("sentinel " + std::to_string(u.sentinels.size() + 1) + ": " +
                                             parsed.status().message());
    if (u.sentinels.empty()) {
      static_cast<HttpUrl&>(u) = *parsed;
      u.scheme = plain + "+sentinel";
    }
    u.sentinels.push_back({parsed->host, parsed->port});
    start = comma + 1;
  }
  // The path: /<master name>[/<db>]
  if (const auto hash = path.find('#'); hash != std::string_view::npos) path = path.substr(0, hash);
  if (path.size() < 2 || path[0] != '/' || path.find('?') != std::string_view::npos) {
    return InvalidArgument("its path names the master that the sentinels watch, and nothing else" + example);
  }
  path.remove_prefix(1);
  const auto slash = path.find('/');
  u.master_name = std::string(path.substr(0, slash));
  if (u.master_name.empty()) return InvalidArgument("its path names no master" + example);
  for (unsigned char c : u.master_name) {
    if (is_blank_or_control(c) || c == '%') {
      return InvalidArgument("its master's name holds a space, a control character or a '%'");
    }
  }
  if (slash != std::string_view::npos && !parse_db(path.substr(slash), &u.db)) {
    return InvalidArgument("after the master's name, its path has at most a database number "
                           "(redis+sentinel://sentinel-1:26379/mymaster/0)");
  }
  u.target = "/";
  return u;
}

}  // namespace

std::string RedisUrl::origin() const {
  if (!sentinel()) return HttpUrl::origin();
  std::string out = scheme + "://";
  for (size_t i = 0; i < sentinels.size(); ++i) {
    HttpUrl one;
    one.host = sentinels[i].host;
    one.port = sentinels[i].port;
    out += (i ? "," : "") + one.host_port();
  }
  return out + "/" + master_name;
}

Result<RedisUrl> parse_redis_url(std::string_view url) {
  const auto scheme_end = url.find("://");
  const std::string scheme = lower(url.substr(0, scheme_end == std::string_view::npos ? 0 : scheme_end));
  if (scheme == "redis+sentinel" || scheme == "rediss+sentinel") return parse_redis_sentinel_url(url, scheme[5] == 's');
  auto parsed = parse_url(url, {"redis", 6379, "rediss", 6379, "redis://redis.local:6379"});
  if (!parsed.ok()) {
    if (scheme_end != std::string_view::npos && scheme.find("sentinel") != std::string::npos) {
      return InvalidArgument("expected a redis+sentinel:// or rediss+sentinel:// URL for a master found through Redis "
                             "Sentinel, got a " + scheme + ":// one");
    }
    return parsed.status();
  }
  RedisUrl u;
  static_cast<HttpUrl&>(u) = *parsed;
  if (!parse_db(u.target, &u.db)) {
    return InvalidArgument("a Redis server's URL has at most a database number for its path (redis://host:6379/0); "
                           "the streams' names are publish.redis[].key_prefix's");
  }
  return u;
}

std::string KafkaUrl::origin() const { return scheme + "://" + bootstrap_servers(); }

std::string KafkaUrl::bootstrap_servers() const {
  std::string out;
  for (size_t i = 0; i < brokers.size(); ++i) {
    HttpUrl one;
    one.host = brokers[i].host;
    one.port = brokers[i].port;
    out += (i ? "," : "") + one.host_port();
  }
  return out;
}

Result<KafkaUrl> parse_kafka_url(std::string_view url) {
  const SchemePair kind{"kafka", 9092, "kafkas", 9092, "kafka://kafka-1:9092,kafka-2:9092"};
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return parse_url(url, kind).status();  // (says what is expected)
  std::string_view rest = url.substr(scheme_end + 3);
  const auto authority_end = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, authority_end);
  std::string userinfo;
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
    userinfo = std::string(authority.substr(0, at + 1));
    authority = authority.substr(at + 1);
  }
  // Each broker's host[:port], parsed as a URL of its own; the first carries the user:password@.
  KafkaUrl u;
  for (size_t start = 0; start <= authority.size();) {
    size_t comma = authority.find(',', start);
    if (comma == std::string_view::npos) comma = authority.size();
    const std::string_view one = authority.substr(start, comma - start);
    if (one.empty()) return InvalidArgument("its list of brokers has an empty entry (e.g. " + std::string(kind.example) + ")");
    const bool first = u.brokers.empty();
    auto parsed = parse_url(std::string(url.substr(0, scheme_end + 3)) + (first ? userinfo : "") + std::string(one), kind);
    if (!parsed.ok()) {
      return InvalidArgument((first && comma == authority.size() ? "" : "broker " + std::to_string(u.brokers.size() + 1) + ": ") +
                             parsed.status().message());
    }
    if (first) static_cast<HttpUrl&>(u) = *parsed;
    u.brokers.push_back({parsed->host, parsed->port});
    start = comma + 1;
  }
  if (authority_end != std::string_view::npos && rest.substr(authority_end) != "/") {
    // Kafka has no path; a topic written into the URL is a mistake the cluster would never report.
    return InvalidArgument("a Kafka cluster's URL has no path or query (the topics are publish.kafka[].topic_prefix's); "
                           "write kafka://host:9092[,host:9092...]");
  }
  u.target = "/";
  return u;
}

}  // namespace vapipe
