// What stops a TCP connection to a network source, told in words, against real loopback sockets.
#include "stages/ingest/network_reachability.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace vapipe {
namespace {

TEST(UriAuthority, TakesTheHostAndPortOrTheSchemesPort) {
  auto a = uri_authority("http://cam.local/video.mjpg");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "cam.local");
  EXPECT_EQ(a->port, 80);
  a = uri_authority("HTTPS://admin:p@ss@10.0.0.5:8443/a?b=c");  // an '@' in a password, as some type them
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "10.0.0.5");
  EXPECT_EQ(a->port, 8443);
  a = uri_authority("rtsp://[fe80::1]:8554/stream1");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "fe80::1");
  EXPECT_EQ(a->port, 8554);
  a = uri_authority("rtspt://nvr?channel=1");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "nvr");
  EXPECT_EQ(a->port, 554);
  EXPECT_FALSE(uri_authority("http://cam:http/"));
  EXPECT_FALSE(uri_authority("http://cam:70000/"));
  EXPECT_FALSE(uri_authority("http://:80/"));
  EXPECT_FALSE(uri_authority("file:///data/a.mp4"));
  EXPECT_FALSE(uri_authority("udp://239.0.0.1"));  // no port of its own to assume
  EXPECT_FALSE(uri_authority("cam.local/video"));
}

// A loopback TCP socket bound to a free port, listening or not.
struct LoopbackSocket {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int port = 0;
  explicit LoopbackSocket(bool listening, int backlog = 16) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port = ntohs(addr.sin_port);
    if (listening) {
      EXPECT_EQ(listen(fd, backlog), 0);
    }
  }
  ~LoopbackSocket() { close(fd); }
  std::string uri() const { return "http://127.0.0.1:" + std::to_string(port) + "/video.mjpg"; }
};

TEST(TcpConnectFailure, SaysNothingWhenAServerListens) {
  LoopbackSocket server(true);
  EXPECT_EQ(tcp_connect_failure(server.uri(), std::chrono::seconds(2)), "");
}

TEST(TcpConnectFailure, SaysAPortWhereNothingListensRefusesConnections) {
  std::string uri;
  {
    LoopbackSocket bound(false);  // bound, never listening: its port refuses
    uri = bound.uri();
    EXPECT_EQ(tcp_connect_failure(uri, std::chrono::seconds(2)),
              "cannot connect to 127.0.0.1:" + std::to_string(bound.port) +
                  ": connection refused (the host is up but nothing listens at that port: a wrong port, or its server "
                  "is off)");
  }
}

// A server whose queue of connections to accept is full drops new ones unanswered, as a host that is
// off or a firewall that drops does: the connection is given up after the timeout.
TEST(TcpConnectFailure, SaysAServerThatDoesNotAnswerDidNotWithinTheTimeout) {
  LoopbackSocket server(true, 0);
  std::vector<int> clients;
  std::string why;
  for (int i = 0; i < 8 && why.empty(); ++i) {  // fill the accept queue, never accepting
    why = tcp_connect_failure(server.uri(), std::chrono::milliseconds(300));
    if (!why.empty()) break;
    const int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);  // a blocking one waits 2 min
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(server.port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    (void)connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    clients.push_back(c);
  }
  for (int c : clients) close(c);
  EXPECT_EQ(why, "cannot connect to 127.0.0.1:" + std::to_string(server.port) +
                     ": no answer within 300 ms (the camera or server is off or unreachable, or a firewall drops the "
                     "connection)");
}

TEST(TcpConnectFailure, SaysAHostNameThatDoesNotResolve) {
  const std::string why = tcp_connect_failure("http://camera.vapipe-test.invalid/video.mjpg", std::chrono::seconds(2));
  EXPECT_EQ(why.rfind("cannot connect to camera.vapipe-test.invalid:80: the host name 'camera.vapipe-test.invalid' "
                      "does not resolve (",
                      0),
            0u)
      << why;
}

TEST(TcpConnectFailure, SaysNothingOfAUriWithoutAHostAndPort) {
  EXPECT_EQ(tcp_connect_failure("file:///data/a.mp4", std::chrono::seconds(2)), "");
}

}  // namespace
}  // namespace vapipe
