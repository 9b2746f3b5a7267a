// A TCP proxy for tests, on a loopback port of its own, to a server on another: it forwards both ways;
// swallow_replies() makes the connections open now forward what the client sends and drop what the
// server answers (a network that fails after the requests went out: the server acts on them, the
// client never hears), and cut() closes them. New connections forward both ways again.
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace vapipe::testing {

class TcpProxy {
 public:
  explicit TcpProxy(int server_port) : server_port_(server_port) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const int on = 1;
    setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    ::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t size = sizeof addr;
    getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &size);
    port_ = ntohs(addr.sin_port);
    ::listen(listener_, 16);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~TcpProxy() {
    stop_ = true;
    acceptor_.join();
    ::close(listener_);
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& c : connections_) c->thread.join();
  }
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  int port() const { return port_; }
  void swallow_replies() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& c : connections_) c->swallow = true;
  }
  void cut() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& c : connections_) c->cut = true;
  }

 private:
  struct Connection {
    std::atomic<bool> swallow{false}, cut{false};
    std::thread thread;
  };

  void accept_loop() {
    while (!stop_) {
      pollfd p{listener_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int client = ::accept(listener_, nullptr, nullptr);
      if (client < 0) continue;
      const int server = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(static_cast<uint16_t>(server_port_));
      if (::connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(server);
        ::close(client);
        continue;
      }
      auto c = std::make_unique<Connection>();
      Connection* raw = c.get();
      c->thread = std::thread([this, raw, client, server] { forward(*raw, client, server); });
      std::lock_guard<std::mutex> lock(mutex_);
      connections_.push_back(std::move(c));
    }
  }

  void forward(Connection& c, int client, int server) {
    char buffer[64 * 1024];
    while (!stop_ && !c.cut) {
      pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      if (::poll(p, 2, 20) <= 0) continue;
      if (p[0].revents) {
        const ssize_t n = ::recv(client, buffer, sizeof buffer, 0);
        if (n <= 0 || ::send(server, buffer, static_cast<size_t>(n), MSG_NOSIGNAL) != n) break;
      }
      if (p[1].revents) {
        const ssize_t n = ::recv(server, buffer, sizeof buffer, 0);
        if (n <= 0) break;
        if (!c.swallow && ::send(client, buffer, static_cast<size_t>(n), MSG_NOSIGNAL) != n) break;
      }
    }
    ::close(client);
    ::close(server);
  }

  int server_port_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::vector<std::unique_ptr<Connection>> connections_;
  std::thread acceptor_;
};

}  // namespace vapipe::testing
