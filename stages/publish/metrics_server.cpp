#include "stages/publish/metrics_server.h"

#include <cstdint>
#include <httplib.h>

#include "pipeline/config.h"
#include "pipeline/picture_requests.h"
#include "stages/publish/metrics.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <ctime>
#include <chrono>
#include <deque>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

namespace vapipe {

namespace {

// The same time whatever the first differing byte: the comparison does not leak the token.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % std::max<size_t>(b.size(), 1)]);
  return diff == 0;
}

// Connection threads made as connections need them, up to `most`: a dozen clients that hold theirs (slow
// headers, reloads waited for) leave others for a liveness probe, and an idle server keeps a few threads.
// (httplib's ThreadPool starts all of its threads at once.)
class ConnectionThreads final : public httplib::TaskQueue {
 public:
  explicit ConnectionThreads(size_t most) : most_(most) {}
  void enqueue(std::function<void()> fn) override {
    std::lock_guard<std::mutex> lock(mutex_);
    connections_.push_back(std::move(fn));
    if (idle_ < connections_.size() && threads_.size() < most_) {
      threads_.emplace_back([this] { work(); });
    } else {
      ready_.notify_one();
    }
  }
  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      shutdown_ = true;
    }
    ready_.notify_all();
    for (std::thread& t : threads_) t.join();  // no enqueue after shutdown: httplib's listen loop has ended
  }

 private:
  void work() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      ++idle_;
      ready_.wait(lock, [this] { return shutdown_ || !connections_.empty(); });
      --idle_;
      if (connections_.empty()) return;  // shutting down, and every connection accepted was served
      std::function<void()> fn = std::move(connections_.front());
      connections_.pop_front();
      lock.unlock();
      fn();
      lock.lock();
    }
  }
  const size_t most_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> connections_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool shutdown_ = false;
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const std::string& address, ReloadRequest reload,
                                                            std::string bearer_token, const MetricsTls& tls,
                                                            const std::string& pictures_dir) {
  std::string host;
  int port = 0;
  VAPIPE_RETURN_IF_ERROR(split_host_port(address, &host, &port));
  std::unique_ptr<MetricsServer> m(new MetricsServer());
  if (tls.enabled()) {
    VAPIPE_ASSIGN_OR_RETURN(m->tls_files_, TlsCertificateFiles::load(tls.cert_file, tls.key_file, tls.client_ca_file));
    // Debian's cpp-httplib is built with OpenSSL (its pkg-config flags define CPPHTTPLIB_OPENSSL_SUPPORT).
    auto ssl = std::make_unique<httplib::SSLServer>(tls.cert_file.c_str(), tls.key_file.c_str());
    if (!ssl->is_valid()) {
      return InvalidArgument("publish.metrics_tls_cert_file " + tls.cert_file + " and metrics_tls_key_file " +
                             tls.key_file + ": OpenSSL cannot load them as a PEM certificate and its private key");
    }
    SSL_CTX_set_min_proto_version(ssl->ssl_context(), TLS1_2_VERSION);  // httplib allows TLS 1.1
    m->tls_files_->serve_from(ssl->ssl_context());  // each connection gets the files' latest pair
    m->server_ = std::move(ssl);
  } else {
    m->server_ = std::make_unique<httplib::Server>();
  }
  httplib::Server& server = *m->server_;
  // Scrapes are rare and small, but a client that sends its request slowly holds a thread meanwhile:
  // threads as needed up to kMostConnectionThreads (a dozen slow clients do not starve /healthz).
  server.new_task_queue = [] { return new ConnectionThreads(kMostConnectionThreads); };
  // A connection that sends nothing for 5 s is closed (httplib's timeout is per read, not per request).
  server.set_read_timeout(5, 0);
  server.set_write_timeout(5, 0);
  // One request a connection: a request refused before its body was read (below) leaves that body
  // unread, which the next request's parse would take for its request line.
  server.set_keep_alive_max_count(1);
  server.set_keep_alive_timeout(1);
  // No endpoint takes a body: a larger one is refused (413) rather than read whole into memory.
  server.set_payload_max_length(kMostBodyBytes);
  // httplib's default adds SO_REUSEPORT, with which a second job would bind the same port and the two
  // would answer scrapes in turn: an address in use must be an error. SO_REUSEADDR alone allows a
  // restart while old connections linger.
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  MetricsServer* self = m.get();
  // publish.metrics_token_file: Prometheus sends it with `authorization: {credentials_file: ...}`.
  m->bearer_token_ = std::move(bearer_token);
  auto authorized = [self](const httplib::Request& req) {
    std::string token;
    {
      std::lock_guard<std::mutex> lock(self->mutex_);
      token = self->bearer_token_;
    }
    return token.empty() || same_secret(req.get_header_value("Authorization"), "Bearer " + token);
  };
  auto refuse = [](httplib::Response& res) {
    res.status = 401;
    res.set_header("WWW-Authenticate", "Bearer realm=\"vapipe\"");
    res.set_content("a bearer token is needed (publish.metrics_token_file)\n", "text/plain; charset=utf-8");
  };
  // POST /-/reload (with `reload`); the pre-routing handler below answers one without a length itself.
  const httplib::Server::Handler answer_reload = [self, reload, authorized, refuse](const httplib::Request& req,
                                                                                     httplib::Response& res) {
    if (!authorized(req)) return refuse(res);
    auto plain = [&res](int status, const std::string& text) {
      res.status = status;
      res.set_content(text, "text/plain; charset=utf-8");
    };
    // ?wait=0: answered once asked (202); otherwise once done, within ?timeout=S (60 s).
    const std::string wait_word = req.get_param_value("wait");
    const bool wait = !(wait_word == "0" || wait_word == "false" || wait_word == "no");
    double timeout_s = 60;
    if (req.has_param("timeout")) {
      const std::string text = req.get_param_value("timeout");
      char* end = nullptr;
      timeout_s = std::strtod(text.c_str(), &end);
      if (text.empty() || !end || *end || !(timeout_s > 0 && timeout_s <= 3600)) {
        return plain(400, "timeout wants seconds from 0 to 3600, got '" + text + "'\n");
      }
    }
    if (!wait) {
      const ReloadReply reply = reload(std::nullopt, self->stopping_);
      return plain(reply.status, reply.body);
    }
    if (self->reloads_waited_for_.fetch_add(1) >= kMostReloadsWaitedFor) {
      self->reloads_waited_for_.fetch_sub(1);
      res.set_header("Retry-After", "5");
      return plain(503, "reloads are being waited for already (" + std::to_string(kMostReloadsWaitedFor) +
                            "): ask again when they are answered, or with ?wait=0\n");
    }
    const ReloadReply reply =
        reload(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)), self->stopping_);
    self->reloads_waited_for_.fetch_sub(1);
    plain(reply.status, reply.body);
  };
  // Runs once a request's headers are read and before its body is: what is refused here is refused
  // before any of a body is read (httplib reads the body whole, into memory, before the route's handler).
  server.set_pre_routing_handler([self, reload, answer_reload, authorized, refuse](const httplib::Request& req,
                                                                                    httplib::Response& res) {
    auto plain = [&res](int status, const std::string& text) {
      res.status = status;
      res.set_content(text, "text/plain; charset=utf-8");
      return httplib::Server::HandlerResponse::Handled;
    };
    if (req.has_header("Transfer-Encoding")) {
      return plain(411, "no endpoint here takes a body of unstated length (Transfer-Encoding: " +
                            req.get_header_value("Transfer-Encoding") + "): send Content-Length\n");
    }
    const std::string length = req.get_header_value("Content-Length");
    const bool has_body = !length.empty() && length != "0";
    if (has_body && !authorized(req)) {
      refuse(res);
      return httplib::Server::HandlerResponse::Handled;
    }
    if (has_body && (length.size() > 18 || std::strtoull(length.c_str(), nullptr, 10) > kMostBodyBytes)) {
      return plain(413, "a body of " + length + " bytes: no endpoint here takes one over " +
                            std::to_string(kMostBodyBytes) + " bytes\n");
    }
    if (req.method == "POST" && req.path == "/-/reload") {
      // A web page the operator opens may POST here (a "simple" cross-origin request needs no preflight):
      // a browser says whose page sent it. Tools (curl, vapipe reload, config-reloading sidecars) send no
      // Origin. Without a token, this is all that keeps another site from reloading the job.
      const std::string origin = req.get_header_value("Origin");
      const std::string own = std::string(self->scheme()) + "://" + req.get_header_value("Host");
      if (!origin.empty() && lower(origin) != lower(own)) {
        return plain(403, "POST /-/reload from a web page of another origin (Origin: " + origin + ", this server is " +
                              own + ") is refused: a cross-site request may not reload the job\n");
      }
      const std::string fetch_site = lower(req.get_header_value("Sec-Fetch-Site"));
      if (fetch_site == "cross-site" || fetch_site == "same-site") {
        return plain(403, "POST /-/reload from a web page of another origin (Sec-Fetch-Site: " + fetch_site +
                              ") is refused: a cross-site request may not reload the job\n");
      }
    }
    // A request with neither Content-Length nor Transfer-Encoding has no body (RFC 9112 6.3), but httplib
    // reads a POST's until the connection ends (`curl -X POST` waited 5 s for a 400; a client that kept
    // sending was read whole): such a POST /-/reload is answered here, and any other refused.
    if ((req.method == "POST" || req.method == "PUT" || req.method == "PATCH") && !req.has_header("Content-Length")) {
      if (!reload || req.method != "POST" || req.path != "/-/reload") {
        return plain(411, req.method + " " + req.path +
                              " without Content-Length: send one (no endpoint here takes a body)\n");
      }
      answer_reload(req, res);
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  server.Get("/metrics", [self, authorized, refuse](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req)) return refuse(res);
    std::string text;
    {
      std::lock_guard<std::mutex> lock(self->mutex_);
      text = self->metrics_;
    }
    if (self->tls_files_) text += self->tls_files_->prometheus_text();
    res.set_content(text, "text/plain; version=0.0.4; charset=utf-8");
  });
  server.Get("/healthz", [self, authorized](const httplib::Request& req, httplib::Response& res) {
    const bool allowed = authorized(req);
    std::lock_guard<std::mutex> lock(self->mutex_);
    // Publish updates these figures every second from its loop: figures that old mean its work has
    // stopped (results are not going out), though this thread still answers.
    const double silent_s =
        self->updated_ ? std::chrono::duration<double>(std::chrono::steady_clock::now() - self->updated_at_).count() : 0;
    const bool publish_stalled = silent_s >= kStageSilentS;
    if (self->stalled_ || publish_stalled) res.status = 503;  // a probe restarts what is stuck
    if (!allowed) {
      // ("service" tells `vapipe status` a vapipe job's from another program's {"status":"ok"})
      res.set_content(!self->updated_                           ? "{\"service\":\"vapipe\",\"status\":\"starting\"}"
                      : self->stalled_ || publish_stalled ? "{\"service\":\"vapipe\",\"status\":\"stalled\"}"
                                                          : "{\"service\":\"vapipe\",\"status\":\"ok\"}",
                      "application/json");
      return;
    }
    if (!publish_stalled) {
      res.set_content(self->health_, "application/json");
      return;
    }
    nlohmann::json health = nlohmann::json::parse(self->health_, nullptr, /*allow_exceptions=*/false);
    if (!health.is_object()) health = nlohmann::json::object();
    health["status"] = "stalled";
    if (!health.contains("stalled") || !health["stalled"].is_array()) health["stalled"] = nlohmann::json::array();
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.0f s", silent_s);
    health["stalled"].push_back({{"stage", "publish"},
                                 {"lane", 0},
                                 {"for_s", silent_s},
                                 {"why", std::string("no figures for ") + seconds +
                                             " (publish updates them every second: its work is stopped or stuck, and "
                                             "results are not going out; the rest of this answer is that old)"}});
    res.set_content(health.dump(), "application/json");
  });
  if (reload) server.Post("/-/reload", answer_reload);
  if (!pictures_dir.empty()) {
    std::error_code ec;
    const std::filesystem::path root = std::filesystem::weakly_canonical(pictures_dir, ec);
    server.Get(R"(/pictures/(.+))", [root, authorized, refuse](const httplib::Request& req, httplib::Response& res) {
      if (!authorized(req)) return refuse(res);
      auto not_found = [&res] {
        res.status = 404;
        res.set_content("no such picture\n", "text/plain; charset=utf-8");
      };
      const std::string wanted = req.matches[1];  // percent-decoded by httplib
      // Pictures, and clips (publish.segments_clips), which a browser plays as they come, by ranges.
      auto ends_with = [&wanted](const char* end) {
        const size_t n = std::strlen(end);
        return wanted.size() > n && wanted.compare(wanted.size() - n, n, end) == 0;
      };
      const bool clip = is_clip_file(wanted);
      if (!clip && !ends_with(".jpg")) return not_found();
      // A NUL ("%00") ends the path the file system sees short of the one checked below.
      if (wanted.find('\0') != std::string::npos) return not_found();
      // Resolved, links and ".." included: it must still lie under the pictures folder.
      std::error_code resolved;
      const std::filesystem::path file = std::filesystem::weakly_canonical(root / wanted, resolved);
      const auto [end, _] = std::mismatch(root.begin(), root.end(), file.begin(), file.end());
      if (resolved || end != root.end()) return not_found();
      struct stat st {};
      if (::stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return not_found();
      // A picture is written once: a dashboard that shows the open segment's picture on every refresh
      // gets "not modified" instead of the JPEG again (private: it is behind the token).
      const std::string etag = "\"" + std::to_string(st.st_size) + "-" + std::to_string(st.st_mtim.tv_sec) + "." +
                               std::to_string(st.st_mtim.tv_nsec) + "\"";
      char modified[64];
      std::tm gmt{};
      gmtime_r(&st.st_mtim.tv_sec, &gmt);
      std::strftime(modified, sizeof modified, "%a, %d %b %Y %H:%M:%S GMT", &gmt);
      res.set_header("ETag", etag);
      res.set_header("Last-Modified", modified);
      res.set_header("Cache-Control", "private, max-age=86400");
      if (req.get_header_value("If-None-Match") == etag) {
        res.status = 304;
        return;
      }
      auto in = std::make_shared<std::ifstream>(file, std::ios::binary);
      if (!*in) return not_found();
      if (clip) {
        // A clip (tens of MB) is read as it is sent, the ranges asked for (a player's seek) too.
        res.set_content_provider(static_cast<size_t>(st.st_size), attachment_content_type(wanted),
                                 [in](size_t offset, size_t length, httplib::DataSink& sink) {
                                   std::vector<char> chunk(std::min<size_t>(length, 256 * 1024));
                                   in->clear();  // a range after one that read to the end
                                   in->seekg(static_cast<std::streamoff>(offset));
                                   in->read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
                                   const std::streamsize got = in->gcount();
                                   return got > 0 && sink.write(chunk.data(), static_cast<size_t>(got));
                                 });
        return;
      }
      std::string bytes((std::istreambuf_iterator<char>(*in)), std::istreambuf_iterator<char>());
      res.set_content(std::move(bytes), "image/jpeg");
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
  stopping_ = true;  // a reload waited for answers now: the pool's threads are joined below
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

void MetricsServer::set_bearer_token(std::string token) {
  std::lock_guard<std::mutex> lock(mutex_);
  bearer_token_ = std::move(token);
}

void MetricsServer::update(std::string metrics_text, std::string health_json, bool stalled) {
  std::lock_guard<std::mutex> lock(mutex_);
  metrics_ = std::move(metrics_text);
  health_ = std::move(health_json);
  updated_ = true;
  stalled_ = stalled;
  updated_at_ = std::chrono::steady_clock::now();
}

}  // namespace vapipe
