#include "stages/publish/metrics_server.h"

#include <httplib.h>

#include "pipeline/config.h"

#include <chrono>
#include <cstdlib>

namespace vapipe {

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const std::string& address, ReloadRequest reload) {
  std::string host;
  int port = 0;
  VAPIPE_RETURN_IF_ERROR(split_host_port(address, &host, &port));
  std::unique_ptr<MetricsServer> m(new MetricsServer());
  m->server_ = std::make_unique<httplib::Server>();
  httplib::Server& server = *m->server_;
  // Scrapes are rare and small: two threads, and no connection kept waiting at shutdown.
  server.new_task_queue = [] { return new httplib::ThreadPool(2); };
  server.set_keep_alive_timeout(1);
  // httplib's default adds SO_REUSEPORT, with which a second job would bind the same port and the two
  // would answer scrapes in turn: an address in use must be an error. SO_REUSEADDR alone allows a
  // restart while old connections linger.
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  MetricsServer* self = m.get();
  server.Get("/metrics", [self](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(self->mutex_);
    res.set_content(self->metrics_, "text/plain; version=0.0.4; charset=utf-8");
  });
  server.Get("/healthz", [self](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(self->mutex_);
    res.set_content(self->health_, "application/json");
  });
  if (reload) {
    server.Post("/-/reload", [reload](const httplib::Request&, httplib::Response& res) {
      const Status s = reload();
      res.status = s.ok() ? 202 : 409;
      res.set_content(s.ok() ? "reload requested: the job's log says what changed\n" : s.message() + "\n",
                      "text/plain; charset=utf-8");
    });
  }
  const int bound = port == 0 ? server.bind_to_any_port(host) : (server.bind_to_port(host, port) ? port : -1);
  if (bound <= 0) {
    return Unavailable("publish.metrics_address " + address + ": cannot listen there (in use, or not an address of "
                       "this host)");
  }
  m->host_ = host;
  m->port_ = bound;
  m->thread_ = std::thread([self] {
    self->server_->listen_after_bind();
    self->listen_returned_ = true;
  });
  // stop() does nothing to a server that has not begun listening: begin before anyone can stop it.
  while (!server.is_running() && !m->listen_returned_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!server.is_running()) return Unavailable("publish.metrics_address " + address + ": the HTTP server did not start");
  return m;
}

MetricsServer::~MetricsServer() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

void MetricsServer::update(std::string metrics_text, std::string health_json) {
  std::lock_guard<std::mutex> lock(mutex_);
  metrics_ = std::move(metrics_text);
  health_ = std::move(health_json);
}

}  // namespace vapipe
