// A webhook receiver for tests: a real HTTP(S) server on 127.0.0.1 (cpp-httplib's) that records each
// POST to /hook (or /hook/<method>) and answers as a test says (200 by default), as Home Assistant or n8n would.
#pragma once

#include <httplib.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace vapipe::testing {

struct Received {
  std::string path, body, topic, authorization, api_key, content_type, idempotency_key;
};

// `port` 0: any free one; `tls`: HTTPS with tests/media/tls/metrics-test.crt (for 127.0.0.1).
class Receiver {
 public:
  using Answer = std::function<void(const httplib::Request&, httplib::Response&)>;
  explicit Receiver(int port = 0, bool tls = false) {
    if (tls) {
      const std::string dir = std::string(VAPIPE_SOURCE_DIR) + "/tests/media/tls/";
      server_ = std::make_unique<httplib::SSLServer>((dir + "metrics-test.crt").c_str(), (dir + "metrics-test.key").c_str());
    } else {
      server_ = std::make_unique<httplib::Server>();
    }
    server_->set_keep_alive_timeout(1);  // stop() waits for an idle kept-alive connection this long
    // (/hook/sendMessage: a Telegram bot's URL with its method added)
    server_->Post(R"(/hook(/[A-Za-z]+)?)", [this](const httplib::Request& req, httplib::Response& res) {
      Answer answer;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        answer = answer_;
      }
      if (answer) answer(req, res);
      if (res.status <= 0) res.status = 200;  // (httplib's "not set")
      if (res.status >= 200 && res.status < 300) {
        std::lock_guard<std::mutex> lock(mutex_);
        received_.push_back(Received{req.path + (req.params.empty() ? "" : "?q"), req.body,
                                     req.get_header_value("X-Vapipe-Topic"), req.get_header_value("Authorization"),
                                     req.get_header_value("X-Api-Key"), req.get_header_value("Content-Type"),
                                     req.get_header_value("Idempotency-Key")});
      }
    });
    port_ = port == 0 ? server_->bind_to_any_port("127.0.0.1") : (server_->bind_to_port("127.0.0.1", port) ? port : -1);
    thread_ = std::thread([this] { server_->listen_after_bind(); });
  }
  ~Receiver() {
    server_->stop();
    thread_.join();
  }
  int port() const { return port_; }
  void answer(Answer a) {
    std::lock_guard<std::mutex> lock(mutex_);
    answer_ = std::move(a);
  }
  std::vector<Received> received() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return received_;
  }
  // Waits (up to 10 s) until it has taken `n` messages.
  std::vector<Received> wait_for(size_t n) const {
    for (int i = 0; i < 1000 && received().size() < n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return received();
  }

 private:
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  mutable std::mutex mutex_;
  Answer answer_;
  std::vector<Received> received_;
};

}  // namespace vapipe::testing
