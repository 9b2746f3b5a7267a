// A TCP port on loopback that nothing listens on: the kernel picks it for a plain socket that is then
// closed at once. (A ZeroMQ socket closes its listener later, on its I/O thread: binding it again
// right away can fail with "Address already in use".)
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace vapipe::testing {

// A loopback port of `type` (SOCK_STREAM: TCP, SOCK_DGRAM: UDP) the kernel picks; 0 if none.
inline int free_loopback_port(int type) {
  const int fd = ::socket(AF_INET, type, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  if (fd >= 0) ::close(fd);
  return port;
}

inline int free_loopback_tcp_port() { return free_loopback_port(SOCK_STREAM); }
// One for a UDP receiver (udp:// streams).
inline int free_loopback_udp_port() { return free_loopback_port(SOCK_DGRAM); }

inline std::string free_loopback_tcp_endpoint() { return "tcp://127.0.0.1:" + std::to_string(free_loopback_tcp_port()); }

// A loopback TCP socket bound to a port the kernel picks, listening or not (a bound socket that never
// listens refuses connections); closed when it goes. `ok`: bound (and listening, if asked).
struct LoopbackSocket {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int port = 0;
  bool ok = false;
  explicit LoopbackSocket(bool listening, int backlog = 16) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
         ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0 && (!listening || ::listen(fd, backlog) == 0);
    port = ntohs(addr.sin_port);
  }
  LoopbackSocket(const LoopbackSocket&) = delete;
  LoopbackSocket& operator=(const LoopbackSocket&) = delete;
  ~LoopbackSocket() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace vapipe::testing
