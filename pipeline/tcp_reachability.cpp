#include "pipeline/tcp_reachability.h"

#include <cstdint>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "pipeline/stream_uri.h"

namespace vapipe {
namespace {

std::optional<uint16_t> default_port(std::string_view scheme) {
  if (scheme == "http") return 80;
  if (scheme == "https") return 443;
  if (scheme == "rtsp" || scheme == "rtspt" || scheme == "rtspu" || scheme == "rtsph") return 554;
  if (scheme == "rtsps" || scheme == "rtspst" || scheme == "rtspsh") return 322;
  if (scheme == "mqtt") return 1883;
  if (scheme == "mqtts") return 8883;
  return std::nullopt;
}

// The socket's own closer: every path out of tcp_connect_failure closes it.
struct Socket {
  int fd = -1;
  ~Socket() {
    if (fd >= 0) close(fd);
  }
};

// One address: "" when connected, otherwise why not.
std::string connect_one(const addrinfo& a, std::chrono::milliseconds timeout) {
  Socket s{socket(a.ai_family, a.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a.ai_protocol)};
  if (s.fd < 0) return std::strerror(errno);
  if (connect(s.fd, a.ai_addr, a.ai_addrlen) == 0) return "";
  if (errno != EINPROGRESS) return std::strerror(errno);
  pollfd p{s.fd, POLLOUT, 0};
  const int ready = poll(&p, 1, static_cast<int>(timeout.count()));
  if (ready == 0) return "timeout";
  if (ready < 0) return std::strerror(errno);
  int error = 0;
  socklen_t len = sizeof error;
  if (getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0) return std::strerror(errno);
  return error == 0 ? "" : std::strerror(error);
}

}  // namespace

std::optional<UriAuthority> uri_authority(std::string_view uri) {
  const std::string scheme = uri_scheme(uri);
  if (scheme.empty()) return std::nullopt;
  std::string_view rest = uri.substr(scheme.size() + 3);
  rest = rest.substr(0, rest.find_first_of("/?#"));
  if (const size_t at = rest.rfind('@'); at != std::string_view::npos) rest = rest.substr(at + 1);
  UriAuthority a;
  std::string_view port;
  if (!rest.empty() && rest.front() == '[') {  // [IPv6]:port
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    a.host = std::string(rest.substr(1, close - 1));
    rest = rest.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return std::nullopt;
    if (!rest.empty()) port = rest.substr(1);
  } else {
    const size_t sep = rest.rfind(':');
    a.host = std::string(rest.substr(0, sep));
    if (sep != std::string_view::npos) port = rest.substr(sep + 1);
  }
  if (a.host.empty()) return std::nullopt;
  if (port.empty()) {
    const auto p = default_port(scheme);
    if (!p) return std::nullopt;
    a.port = *p;
    return a;
  }
  uint32_t value = 0;
  for (char c : port) {
    if (c < '0' || c > '9' || value > 65535) return std::nullopt;
    value = value * 10 + static_cast<uint32_t>(c - '0');
  }
  if (value == 0 || value > 65535) return std::nullopt;
  a.port = static_cast<uint16_t>(value);
  return a;
}

std::string tcp_connect_failure(std::string_view uri, std::chrono::milliseconds timeout) {
  const auto authority = uri_authority(uri);
  if (!authority) return "";
  const bool ipv6 = authority->host.find(':') != std::string::npos;
  const std::string where = (ipv6 ? "[" + authority->host + "]" : authority->host) + ":" + std::to_string(authority->port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(authority->port);
  if (const int rc = getaddrinfo(authority->host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return "cannot connect to " + where + ": the host name '" + authority->host + "' does not resolve (" +
           gai_strerror(rc) + "): check the name in the uri, or this machine's DNS";
  }
  std::string why;
  for (const addrinfo* a = found; a; a = a->ai_next) {
    why = connect_one(*a, timeout);
    if (why.empty()) break;
  }
  freeaddrinfo(found);
  if (why.empty()) return "";
  if (why == "timeout") {
    const std::string within = timeout.count() % 1000 == 0 ? std::to_string(timeout.count() / 1000) + " s"
                                                           : std::to_string(timeout.count()) + " ms";
    return "cannot connect to " + where + ": no answer within " + within +
           " (the camera or server is off or unreachable, or a firewall drops the connection)";
  }
  if (why == std::strerror(ECONNREFUSED)) {
    return "cannot connect to " + where +
           ": connection refused (the host is up but nothing listens at that port: a wrong port, or its server is off)";
  }
  return "cannot connect to " + where + ": " + why;
}

}  // namespace vapipe
