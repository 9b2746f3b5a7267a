// A TCP proxy for tests, on a loopback port of its own, to a server on another: it forwards both ways;
// swallow_replies() makes the connections open now forward what the client sends and drop what the
// server answers (a network that fails after the requests went out: the server acts on them, the
// client never hears), and cut() closes them. New connections forward both ways again.
// set_reply_delay() holds what the server sends for that long before the client gets it (a server far
// away, or slow to answer), on connections made from then on.
#pragma once

#include <cstdint>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <string>
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
  void set_reply_delay(std::chrono::milliseconds delay) { reply_delay_ms_ = delay.count(); }
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
    using Clock = std::chrono::steady_clock;
    const std::chrono::milliseconds delay(reply_delay_ms_.load());
    std::deque<std::pair<Clock::time_point, std::string>> held;  // the server's bytes, due to the client
    char buffer[64 * 1024];
    bool server_open = true;
    while (!stop_ && !c.cut) {
      while (!held.empty() && Clock::now() >= held.front().first) {
        const std::string& bytes = held.front().second;
        if (::send(client, bytes.data(), bytes.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(bytes.size())) {
          server_open = false;
          held.clear();
          break;
        }
        held.pop_front();
      }
      if (!server_open && held.empty()) break;
      pollfd p[2] = {{client, POLLIN, 0}, {server_open ? server : -1, POLLIN, 0}};
      if (::poll(p, 2, held.empty() ? 20 : 5) <= 0) continue;
      if (p[0].revents) {
        const ssize_t n = ::recv(client, buffer, sizeof buffer, 0);
        if (n <= 0 || ::send(server, buffer, static_cast<size_t>(n), MSG_NOSIGNAL) != n) break;
      }
      if (p[1].revents) {
        const ssize_t n = ::recv(server, buffer, sizeof buffer, 0);
        if (n <= 0) {
          server_open = false;  // (what it sent before still reaches the client, late)
          continue;
        }
        if (c.swallow) continue;
        held.emplace_back(Clock::now() + delay, std::string(buffer, static_cast<size_t>(n)));
      }
    }
    ::close(client);
    ::close(server);
  }

  int server_port_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<long long> reply_delay_ms_{0};
  std::mutex mutex_;
  std::vector<std::unique_ptr<Connection>> connections_;
  std::thread acceptor_;
};

}  // namespace vapipe::testing
