#include "stages/publish/metrics_server.h"

#include <arpa/inet.h>
#include <cstdint>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace vapipe {
namespace {

using namespace std::chrono_literals;

// A connection to the server on loopback whose reads give up after `wait`: -1 if it cannot connect.
int connect_to(int port, std::chrono::milliseconds wait) {
  const int sock = ::socket(AF_INET, SOCK_STREAM, 0);
  if (sock < 0) return -1;
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(wait.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((wait.count() % 1000) * 1000);
  setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(sock);
    return -1;
  }
  return sock;
}

// Sends `head` (a request's line and headers, none of its body) and returns what the server answers
// within `wait`: its answer before the body is sent, or "" if it waits for the body.
std::string answer_to_head(int port, const std::string& head, std::chrono::milliseconds wait = 3000ms) {
  const int sock = connect_to(port, wait);
  if (sock < 0) return "cannot connect";
  if (::send(sock, head.data(), head.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(head.size())) {
    ::close(sock);
    return "cannot send";
  }
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = ::recv(sock, buf, sizeof buf, 0)) > 0;) got.append(buf, static_cast<size_t>(n));
  ::close(sock);
  return got;
}

const std::string kToken = "s3cret-token-0123456789";

// A body is not read before its request is known to be allowed: without the token (or over the
// limit, or of unstated length) the answer comes at once, while the client has sent only the headers.
// (A 300 MB POST /-/reload without the token was read whole into memory before its 401.)
TEST(MetricsServer, ABodyIsRefusedBeforeItIsReadWithoutTheTokenOrOverTheLimit) {
  std::atomic<int> calls{0};
  auto server = MetricsServer::start(
      "127.0.0.1:0",
      [&](std::optional<std::chrono::milliseconds>, const std::atomic<bool>&) {
        ++calls;
        return MetricsServer::ReloadReply{200, "the job reloaded: added none; removed none\n"};
      },
      kToken);
  ASSERT_TRUE(server.ok()) << server.status().message();
  const int port = (*server)->port();
  const std::string post = "POST /-/reload HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  const std::string authorization = "Authorization: Bearer " + kToken + "\r\n";

  std::string answer = answer_to_head(port, post + "Content-Length: 314572800\r\n\r\n");
  EXPECT_EQ(answer.rfind("HTTP/1.1 401", 0), 0u) << "[" << answer << "]";
  EXPECT_NE(answer.find("a bearer token is needed"), std::string::npos) << answer;
  answer = answer_to_head(port, post + "Transfer-Encoding: chunked\r\n\r\n");
  EXPECT_EQ(answer.rfind("HTTP/1.1 411", 0), 0u) << "[" << answer << "]";
  // With the token: a body over the limit is refused unread, and says the limit.
  answer = answer_to_head(port, post + authorization + "Content-Length: 314572800\r\n\r\n");
  EXPECT_EQ(answer.rfind("HTTP/1.1 413", 0), 0u) << "[" << answer << "]";
  EXPECT_NE(answer.find("a body of 314572800 bytes: no endpoint here takes one over 65536 bytes"), std::string::npos)
      << answer;
  answer = answer_to_head(port, post + authorization + "Content-Length: 65537\r\n\r\n");
  EXPECT_EQ(answer.rfind("HTTP/1.1 413", 0), 0u) << "[" << answer << "]";
  EXPECT_EQ(calls.load(), 0);
  // A POST without Content-Length has no body (`curl -X POST`): answered at once, not read to its end.
  answer = answer_to_head(port, post + "\r\n");
  EXPECT_EQ(answer.rfind("HTTP/1.1 401", 0), 0u) << "[" << answer << "]";
  answer = answer_to_head(port, post + authorization + "\r\n");
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << "[" << answer << "]";
  EXPECT_EQ(calls.load(), 1);
  answer = answer_to_head(port, "POST /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n" + authorization + "\r\n");
  EXPECT_EQ(answer.rfind("HTTP/1.1 411", 0), 0u) << "[" << answer << "]";

  // A small body with the token (what a tool may send) still reloads.
  httplib::Client client("127.0.0.1", port);
  auto reloaded = client.Post("/-/reload", httplib::Headers{{"Authorization", "Bearer " + kToken}},
                              std::string(100, 'x'), "text/plain");
  ASSERT_TRUE(reloaded);
  EXPECT_EQ(reloaded->status, 200);
  EXPECT_EQ(calls.load(), 2);
  auto scrape = client.Get("/metrics", {{"Authorization", "Bearer " + kToken}});
  ASSERT_TRUE(scrape);
  EXPECT_EQ(scrape->status, 200);
}

// Connections that send their request a header line a second (slowloris) each hold a server thread:
// a dozen of them leave threads for a liveness probe and a scrape (there were 4 threads, all taken).
TEST(MetricsServer, ADozenSlowClientsDoNotStarveTheHealthProbe) {
  auto server = MetricsServer::start("127.0.0.1:0", nullptr, kToken);
  ASSERT_TRUE(server.ok()) << server.status().message();
  (*server)->update("vapipe_job_info 1\n", R"({"status":"ok"})");
  const int port = (*server)->port();
  std::vector<int> slow;
  for (int i = 0; i < 12; ++i) {
    const int sock = connect_to(port, 1000ms);
    ASSERT_GE(sock, 0);
    const std::string head = "GET /healthz HTTP/1.1\r\nHost: x\r\n";
    ASSERT_EQ(::send(sock, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
    slow.push_back(sock);
  }
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    while (!stop) {
      for (int sock : slow) ::send(sock, "X-a: b\r\n", 8, MSG_NOSIGNAL);
      std::this_thread::sleep_for(500ms);
    }
  });
  std::this_thread::sleep_for(300ms);  // each slow connection taken by a thread
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(3, 0);
  client.set_read_timeout(3, 0);
  for (int probe = 0; probe < 3; ++probe) {
    auto health = client.Get("/healthz");
    EXPECT_TRUE(health) << "probe " << probe << ": " << httplib::to_string(health.error());
    if (health) {
      EXPECT_EQ(health->status, 200);
    }
  }
  auto scrape = client.Get("/metrics", {{"Authorization", "Bearer " + kToken}});
  EXPECT_TRUE(scrape) << httplib::to_string(scrape.error());
  if (scrape) {
    EXPECT_EQ(scrape->body, "vapipe_job_info 1\n");
  }
  stop = true;
  trickle.join();
  for (int sock : slow) ::close(sock);  // (the server's stop waits for requests being read)
}

// Without a token (the default), a web page the operator opens could POST /-/reload (a "simple"
// cross-origin request, no preflight): one whose Origin is another site's, or whose Sec-Fetch-Site
// says cross-site, is refused and says why. Tools send no Origin; the server's own page is its origin.
TEST(MetricsServer, AReloadPostedFromAnotherSitesPageIsRefused) {
  std::atomic<int> calls{0};
  auto server = MetricsServer::start(
      "127.0.0.1:0", [&](std::optional<std::chrono::milliseconds>, const std::atomic<bool>&) {
        ++calls;
        return MetricsServer::ReloadReply{202, "reload requested\n"};
      });
  ASSERT_TRUE(server.ok()) << server.status().message();
  const int port = (*server)->port();
  httplib::Client client("127.0.0.1", port);
  auto post = [&](httplib::Headers headers) { return client.Post("/-/reload?wait=0", headers, "x", "text/plain"); };

  auto evil = post({{"Origin", "http://evil.example"}});
  ASSERT_TRUE(evil);
  EXPECT_EQ(evil->status, 403);
  EXPECT_NE(evil->body.find("POST /-/reload from a web page of another origin (Origin: http://evil.example, this "
                            "server is http://127.0.0.1:" + std::to_string(port) + ")"),
            std::string::npos)
      << evil->body;
  EXPECT_EQ(post({{"Origin", "null"}})->status, 403);  // a sandboxed frame, a file:// page
  EXPECT_EQ(post({{"Origin", "http://127.0.0.1:" + std::to_string(port + 1)}})->status, 403);
  auto fetch_site = post({{"Sec-Fetch-Site", "cross-site"}});
  ASSERT_TRUE(fetch_site);
  EXPECT_EQ(fetch_site->status, 403);
  EXPECT_NE(fetch_site->body.find("Sec-Fetch-Site: cross-site"), std::string::npos) << fetch_site->body;
  EXPECT_EQ(calls.load(), 0);

  EXPECT_EQ(post({})->status, 202);  // curl, vapipe reload, a sidecar
  EXPECT_EQ(post({{"Origin", "http://127.0.0.1:" + std::to_string(port)}, {"Sec-Fetch-Site", "same-origin"}})->status,
            202);
  EXPECT_EQ(calls.load(), 2);
}

}  // namespace
}  // namespace vapipe
