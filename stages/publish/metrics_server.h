// GET /metrics (Prometheus) and GET /healthz (JSON) over HTTP, served from the latest snapshot that the
// publish stage handed over: the server's threads never touch the stage's state.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "pipeline/status.h"

namespace httplib {
class Server;
}

namespace vapipe {

class MetricsServer {
 public:
  // Binds `address` and starts serving; an error names the address.
  static Result<std::unique_ptr<MetricsServer>> start(const std::string& address);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  void update(std::string metrics_text, std::string health_json);
  const std::string& host() const { return host_; }
  int port() const { return port_; }

 private:
  MetricsServer() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::string host_;
  int port_ = 0;
  std::atomic<bool> listen_returned_{false};
  std::mutex mutex_;
  std::string metrics_ = "";
  std::string health_ = "{\"status\":\"starting\"}";
};

}  // namespace vapipe
