// GET /metrics (Prometheus) and GET /healthz (JSON) over HTTP, served from the latest snapshot that the
// publish stage handed over: the server's threads never touch the stage's state. POST /-/reload asks
// for a reload of the job and answers once it is done (as Prometheus's own /-/reload, which
// config-reloading sidecars call when a Kubernetes ConfigMap changed, and which expect 200).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "pipeline/status.h"
#include "stages/publish/tls_certificate.h"

namespace httplib {
class Server;
}

namespace vapipe {

// publish.metrics_tls_cert_file and metrics_tls_key_file: PEM files; empty: plain HTTP.
struct MetricsTls {
  MetricsTls() = default;
  MetricsTls(std::string cert, std::string key, std::string client_ca = "")
      : cert_file(std::move(cert)), key_file(std::move(key)), client_ca_file(std::move(client_ca)) {}
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;  // publish.metrics_tls_client_ca_file: clients need a certificate it signed
  bool enabled() const { return !cert_file.empty(); }
};

class MetricsServer {
 public:
  // What POST /-/reload answers: its HTTP status and text.
  struct ReloadReply {
    int status = 202;
    std::string body;
  };
  // What POST /-/reload does, on a server thread: asks for the reload and, with `wait` (POST /-/reload,
  // `?timeout=S`: up to that long, 60 s by default), waits for what became of it; nullopt
  // (`?wait=0`): answers once it is asked. `stopping` is set when the server stops: a wait ends then.
  using ReloadRequest =
      std::function<ReloadReply(std::optional<std::chrono::milliseconds> wait, const std::atomic<bool>& stopping)>;
  // Reloads waited for at once, at most; one more is answered 503 (each holds a server thread).
  static constexpr int kMostReloadsWaitedFor = 2;
  // Connection threads at most, made as needed: slow clients (a request's headers a line a second) hold
  // one each, and a liveness probe gets one of the rest. Connections beyond wait for one.
  static constexpr size_t kMostConnectionThreads = 32;
  // No endpoint takes a body: a larger one is refused (413) before it is read, as is a chunked one (411).
  static constexpr size_t kMostBodyBytes = 64 * 1024;
  // Binds `address` and starts serving; an error names the address. Without `reload`, POST /-/reload
  // answers 404. With a `bearer_token`, GET /metrics and POST /-/reload answer 401 unless the request
  // says `Authorization: Bearer TOKEN`, and GET /healthz without it says only whether the job is up
  // (for a liveness probe): its stream ids and states need the token too. With `tls`, HTTPS only (TLS
  // 1.2 or newer); a certificate or key that does not load is an error naming the file. The files are
  // re-read when they change (tls_certificate.h), and /metrics says when the certificate expires.
  // POST /-/reload from a browser page of another origin (an Origin header that is not this server's,
  // or Sec-Fetch-Site cross-site or same-site) answers 403, token or not. A request with a body is
  // checked for the token before the body is read, and one over kMostBodyBytes answers 413.
  // With `pictures_dir` (publish.segments_pictures_dir), GET /pictures/<stream>/<day>/<file>.jpg serves
  // the segment pictures under it, with the same token (a subscriber on another host cannot open the
  // job host's path); nothing outside that folder, and nothing but .jpg files.
  static Result<std::unique_ptr<MetricsServer>> start(const std::string& address, ReloadRequest reload = nullptr,
                                                      std::string bearer_token = "", const MetricsTls& tls = {},
                                                      const std::string& pictures_dir = "");
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // `stalled`: health_json's status is "stalled" (/healthz then answers 503). Publish's own stall is
  // found here: no update for kStageSilentS makes /healthz say so (503), naming publish.
  void update(std::string metrics_text, std::string health_json, bool stalled = false);
  // A new bearer token (publish.metrics_token_file rewritten while the job runs): requests from now on
  // need it; the old one stops working. Empty: no token needed (only when started without one).
  void set_bearer_token(std::string token);
  const std::string& host() const { return host_; }
  const char* scheme() const { return tls_files_ ? "https" : "http"; }
  // The certificate served over HTTPS (null over HTTP).
  TlsCertificateFiles* tls_certificate() const { return tls_files_.get(); }
  int port() const { return port_; }

 private:
  MetricsServer() = default;
  std::unique_ptr<TlsCertificateFiles> tls_files_;  // before server_: its connections use it
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::string host_;
  int port_ = 0;
  std::atomic<bool> listen_returned_{false};
  std::atomic<bool> stopping_{false};        // set first by the destructor: a reload's wait ends
  std::atomic<int> reloads_waited_for_{0};
  std::mutex mutex_;
  std::string metrics_ = "";
  std::string health_ = "{\"status\":\"starting\"}";
  std::string bearer_token_;  // under mutex_
  bool updated_ = false;
  bool stalled_ = false;
  std::chrono::steady_clock::time_point updated_at_{};
};

}  // namespace vapipe
