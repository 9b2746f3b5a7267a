#include "pipeline/http_url.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace vapipe
