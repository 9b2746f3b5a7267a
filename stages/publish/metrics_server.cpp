#include "stages/publish/metrics_server.h"

#include <cstdint>
#include <httplib.h>

#include "pipeline/config.h"
#include "pipeline/picture_requests.h"
#include "stages/publish/metrics.h"

#include <sys/stat.h>

#include <algorithm>
#include <ctime>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace vapipe {

namespace {

// The same time whatever the first differing byte: the comparison does not leak the token.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % std::max<size_t>(b.size(), 1)]);
  return diff == 0;
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
  // Scrapes are rare and small: two threads, two more for reloads waited for (kMostReloadsWaitedFor),
  // and no connection kept waiting at shutdown.
  server.new_task_queue = [] { return new httplib::ThreadPool(2 + kMostReloadsWaitedFor); };
  server.set_keep_alive_timeout(1);
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
  if (reload) {
    server.Post("/-/reload", [self, reload, authorized, refuse](const httplib::Request& req, httplib::Response& res) {
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
    });
  }
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
