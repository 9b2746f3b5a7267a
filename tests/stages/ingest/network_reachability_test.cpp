// What stops a TCP connection to a network source, told in words, against real loopback sockets.
#include "stages/ingest/network_reachability.h"

#include <arpa/inet.h>
#include <cstdint>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "tests/fakes/free_port.h"

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

using testing::LoopbackSocket;

// An MJPEG camera's URI at the socket's port.
std::string uri_of(const LoopbackSocket& socket) {
  EXPECT_TRUE(socket.ok);
  return "http://127.0.0.1:" + std::to_string(socket.port) + "/video.mjpg";
}

TEST(TcpConnectFailure, SaysNothingWhenAServerListens) {
  LoopbackSocket server(true);
  EXPECT_EQ(tcp_connect_failure(uri_of(server), std::chrono::seconds(2)), "");
}

TEST(TcpConnectFailure, SaysAPortWhereNothingListensRefusesConnections) {
  std::string uri;
  {
    LoopbackSocket bound(false);  // bound, never listening: its port refuses
    uri = uri_of(bound);
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
    why = tcp_connect_failure(uri_of(server), std::chrono::milliseconds(300));
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

// A camera's web server over TLS on loopback (its certificate the test one, self-signed, for 127.0.0.1
// and localhost), at `address`.
class TlsServer {
 public:
  explicit TlsServer(const std::string& address) : https_((kTlsDir + "metrics-test.crt").c_str(), (kTlsDir + "metrics-test.key").c_str()) {
    https_.set_keep_alive_timeout(0);
    https_.Get("/", [](const httplib::Request&, httplib::Response& res) { res.set_content("camera", "text/plain"); });
    port_ = https_.bind_to_any_port(address);
    thread_ = std::thread([this] { https_.listen_after_bind(); });
  }
  ~TlsServer() {
    https_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  static inline const std::string kTlsDir = std::string(VAPIPE_SOURCE_DIR) + "/tests/media/tls/";

 private:
  httplib::SSLServer https_;
  int port_ = 0;
  std::thread thread_;
};

// tests/media/tls/metrics-test.crt's, as `openssl x509 -noout -fingerprint -sha256` prints it.
const std::string kTestCertificateSha256 =
    "ED:BF:28:4D:EB:B2:37:75:03:FF:EE:7F:BB:77:44:75:8C:BF:67:0F:44:81:9F:59:59:A7:BF:FE:8F:6E:DE:37";

TEST(TlsCertificateFailure, SaysACertificateNoAuthorityHereSignedIsRefusedAndWhatToSet) {
  TlsServer server("127.0.0.1");
  const std::string uri = "https://127.0.0.1:" + std::to_string(server.port()) + "/video.mjpg";
  EXPECT_EQ(tls_certificate_failure(uri, std::chrono::seconds(2), SourceTls{}),
            "its TLS certificate (issued to 'CN=vapipe test metrics', SHA-256 " + kTestCertificateSha256 + ") is "
            "refused: it is not signed by an authority this machine trusts (a camera's own self-signed certificate is "
            "not): trust it with the stream's tls_ca_file (the camera's certificate, or the authority that signed it), "
            "pin it with tls_fingerprint: " + kTestCertificateSha256 + ", or stop checking it with tls_verify: false");
  // Trusted as the camera's own certificate: nothing to say.
  EXPECT_EQ(tls_certificate_failure(uri, std::chrono::seconds(2), SourceTls{TlsServer::kTlsDir + "metrics-test.crt"}), "");
  // Another authority's certificate does not vouch for it.
  const std::string other = TlsServer::kTlsDir + "chain-root.crt";
  EXPECT_EQ(tls_certificate_failure(uri, std::chrono::seconds(2), SourceTls{other}),
            "its TLS certificate (issued to 'CN=vapipe test metrics', SHA-256 " + kTestCertificateSha256 + ") is "
            "refused: neither it nor an authority that signed it is in tls_ca_file " + other);
}

TEST(TlsCertificateFailure, SaysACertificateForAnotherNameIsRefused) {
  TlsServer server("127.0.0.2");  // the certificate names 127.0.0.1 and localhost
  const std::string uri = "rtsps://127.0.0.2:" + std::to_string(server.port()) + "/stream1";
  EXPECT_EQ(tls_certificate_failure(uri, std::chrono::seconds(2), SourceTls{TlsServer::kTlsDir + "metrics-test.crt"}),
            "its TLS certificate (issued to 'CN=vapipe test metrics', SHA-256 " + kTestCertificateSha256 + ") is "
            "refused: it is issued for another name than '127.0.0.2' (a camera's certificate made for another name: pin "
            "it with tls_fingerprint: " + kTestCertificateSha256 + ")");
}

// streams[].tls_fingerprint: the pinned certificate is taken whatever name it was made for and whoever
// signed it (here neither fits); another one is refused, saying which is pinned.
TEST(TlsCertificateFailure, APinnedCertificateIsTakenWhateverItsNameAndAnotherIsRefused) {
  TlsServer server("127.0.0.2");
  const std::string uri = "rtsps://127.0.0.2:" + std::to_string(server.port()) + "/stream1";
  EXPECT_EQ(tls_certificate_failure(uri, std::chrono::seconds(2), SourceTls{"", true, kTestCertificateSha256}), "");
  std::string wrong = kTestCertificateSha256;
  wrong.replace(0, 2, "00");
  EXPECT_EQ(tls_certificate_failure(uri, std::chrono::seconds(2), SourceTls{"", true, wrong}),
            "its TLS certificate (issued to 'CN=vapipe test metrics', SHA-256 " + kTestCertificateSha256 + ") is "
            "refused: it is not the certificate tls_fingerprint pins (" + wrong + "): the camera has a new certificate "
            "(after a reset or an update; pin the new one if so), or this is not the camera");
}

TEST(TlsCertificateFailure, SaysAServerThatSpeaksNoTlsHasNoHandshake) {
  httplib::Server http;  // plain HTTP where https:// was written
  http.set_keep_alive_timeout(0);
  const int port = http.bind_to_any_port("127.0.0.1");
  std::thread serve([&] { http.listen_after_bind(); });
  const std::string why =
      tls_certificate_failure("https://127.0.0.1:" + std::to_string(port) + "/", std::chrono::seconds(2), SourceTls{});
  http.stop();
  serve.join();
  EXPECT_EQ(why.rfind("no TLS handshake with 127.0.0.1:" + std::to_string(port) + ": ", 0), 0u) << why;
  EXPECT_NE(why.find("(does it serve TLS at that port? rtsps:// and https:// need it; rtsp:// and http:// do not)"),
            std::string::npos) << why;
}

TEST(TlsCertificateFailure, SaysNothingWhenNoConnectionOpens) {
  LoopbackSocket bound(false);
  EXPECT_EQ(tls_certificate_failure("https://127.0.0.1:" + std::to_string(bound.port) + "/", std::chrono::seconds(2), SourceTls{}), "");
}

// rtspsrc's detail of an answer it has no word for: the server's reason and code on its last line.
TEST(RtspAnswerMeaning, SaysTheServersAnswerAndWhatItMeansForACamera) {
  const std::string prefix = "../gst/rtsp/gstrtspsrc.c(6954): gst_rtspsrc_send (): /GstPipeline:pipeline0/GstRTSPSrc:src:\n";
  EXPECT_EQ(rtsp_answer_meaning(prefix + "Service Unavailable (503)").rfind(
                "the camera answered 503 Service Unavailable: it serves no more streams now", 0), 0u);
  EXPECT_EQ(rtsp_answer_meaning(prefix + "Not Enough Bandwidth (453)").rfind(
                "the camera answered 453 Not Enough Bandwidth: it serves no more streams now", 0), 0u);
  EXPECT_EQ(rtsp_answer_meaning(prefix + "Forbidden (403)").rfind(
                "the camera answered 403 Forbidden: the user in the uri may not view this stream", 0), 0u);
  EXPECT_EQ(rtsp_answer_meaning(prefix + "Internal Server Error (500)\n"), "the camera answered 500 Internal Server Error");
  EXPECT_EQ(rtsp_answer_meaning("Service Unavailable (503)").rfind("the camera answered 503", 0), 0u) << "no prefix";
  // Not an answer: nothing said.
  EXPECT_EQ(rtsp_answer_meaning(prefix + "Could not connect to server. (Generic error)"), "");
  EXPECT_EQ(rtsp_answer_meaning(prefix + "OK (200)"), "");
  EXPECT_EQ(rtsp_answer_meaning("(503)"), "");
  EXPECT_EQ(rtsp_answer_meaning(""), "");
  EXPECT_EQ(rtsp_answer_meaning(prefix + "Odd (5x3)"), "");
}

}  // namespace
}  // namespace vapipe
