// `vapipe status HOST:PORT`: a running job's streams at a glance, from publish's /healthz (the same
// document a monitoring system reads), for an operator without a dashboard.
#include <httplib.h>

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/status_report.h"
#include "pipeline/config.h"
#include "pipeline/supervisor.h"

namespace vapipe::cli {

namespace {

// Whether what answers at host:port speaks ZeroMQ (its greeting's first byte is 0xFF, sent as soon as
// the connection opens): the job's result bus (publish.endpoint) given for its metrics address.
bool speaks_zeromq(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found) return false;
  bool zeromq = false;
  const int fd = socket(found->ai_family, found->ai_socktype, found->ai_protocol);
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
    pollfd p{fd, POLLIN, 0};
    unsigned char first = 0;
    zeromq = poll(&p, 1, 1000) == 1 && recv(fd, &first, 1, 0) == 1 && first == 0xFF;
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  return zeromq;
}

}  // namespace

int status_command(const std::vector<std::string>& args) {
  std::string address, token_file, ca_file, cert_file, key_file;
  bool json = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--token-file" && i + 1 < args.size()) {
      token_file = args[++i];
    } else if (args[i] == "--ca-file" && i + 1 < args.size()) {
      ca_file = args[++i];
    } else if (args[i] == "--cert" && i + 1 < args.size()) {
      cert_file = args[++i];
    } else if (args[i] == "--key" && i + 1 < args.size()) {
      key_file = args[++i];
    } else if (args[i] == "--json") {
      json = true;
    } else if (address.empty() && args[i].rfind("--", 0) != 0) {
      address = args[i];
    } else {
      std::fprintf(stderr, "vapipe status: unexpected argument '%s'\n", args[i].c_str());
      return kExitUsage;
    }
  }
  if (address.empty()) {
    std::fprintf(stderr, "vapipe status: give the job's publish.metrics_address ([https://]HOST:PORT)\n");
    return kExitUsage;
  }
  if (cert_file.empty() != key_file.empty()) {
    std::fprintf(stderr, "vapipe status: --cert and --key go together (a client certificate and its key)\n");
    return kExitUsage;
  }
  // https:// (publish.metrics_tls_cert_file), or --ca-file (the job's certificate, when self-signed), or
  // a client certificate (publish.metrics_tls_client_ca_file).
  bool tls = !ca_file.empty() || !cert_file.empty();
  for (const char* scheme : {"http://", "https://"}) {
    if (address.rfind(scheme, 0) == 0) {
      tls = tls || scheme[4] == 's';
      address = address.substr(std::char_traits<char>::length(scheme));
    }
  }
  std::string host;
  int port = 0;
  if (Status s = split_host_port(address, &host, &port); !s.ok() || port == 0) {
    std::fprintf(stderr, "vapipe status: %s\n", s.ok() ? "give a port other than 0" : s.message().c_str());
    return kExitUsage;
  }
  httplib::Headers headers;
  if (!token_file.empty()) {
    auto token = read_metrics_token_file(token_file);
    if (!token.ok()) {
      std::fprintf(stderr, "vapipe status: %s\n", token.status().message().c_str());
      return kExitUsage;
    }
    headers.emplace("Authorization", "Bearer " + *token);
  }
  const std::string url = std::string(tls ? "https://" : "http://") + address + "/healthz";
  // The universal client: HTTPS through OpenSSL (Debian's cpp-httplib is built with it), checking the
  // server's certificate against --ca-file or the system's CAs.
  // A TLS endpoint that refuses our client certificate closes the connection as the request is written
  // (TLS 1.3): that write must be an error to report, not SIGPIPE's silent death.
  std::signal(SIGPIPE, SIG_IGN);
  httplib::Client client(std::string(tls ? "https://" : "http://") + address, cert_file, key_file);
  if (!ca_file.empty()) client.set_ca_cert_path(ca_file.c_str());
  client.set_connection_timeout(5);
  client.set_read_timeout(5);
  auto res = client.Get("/healthz", headers);
  if (!res && !tls && res.error() == httplib::Error::Read && speaks_zeromq(host, port)) {
    std::fprintf(stderr, "vapipe status: %s is a ZeroMQ socket (the job's result bus, publish.endpoint?), not a "
                 "vapipe job's /healthz: give the address of publish.metrics_address\n", address.c_str());
    return kExitStageFailed;
  }
  if (!res) {
    std::fprintf(stderr, "vapipe status: no answer from %s (%s): is the job running, with publish.metrics_address "
                 "%s%s?\n", url.c_str(), httplib::to_string(res.error()).c_str(), address.c_str(),
                 tls ? " and TLS (and does --ca-file hold its certificate? does it want a client certificate, "
                       "--cert and --key?)"
                     : " (https:// if it has TLS)");
    return kExitStageFailed;
  }
  // 503: a stalled job (its body says which stage and why), reported like any other.
  if (res->status != 200 && res->status != 503) {
    // (a wrong port: another web server, which has no /healthz, or a proxy's login page)
    std::fprintf(stderr, "vapipe status: %s answered %d: not a vapipe job's /healthz: give the address of the job's "
                 "publish.metrics_address (its log says \"metrics on ...\")\n", url.c_str(), res->status);
    return kExitStageFailed;
  }
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(res->body);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vapipe status: %s: %s (%s)\n", url.c_str(),
                 res->status == 503 ? "answered 503, not JSON" : "not JSON", e.what());
    return kExitStageFailed;
  }
  if (res->status == 503 && !(h.is_object() && h.value("status", "") == "stalled")) {
    std::fprintf(stderr, "vapipe status: %s answered 503\n", url.c_str());
    return kExitStageFailed;
  }
  // Exit status 1 for a stalled job, for scripts and cron checks.
  const int exit_status = res->status == 503 ? 1 : 0;
  if (json) {
    std::printf("%s\n", h.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return exit_status;
  }
  const auto report = status_report(h, url);
  if (!report.ok()) {
    std::fprintf(stderr, "vapipe status: %s\n", report.status().message().c_str());
    return kExitStageFailed;
  }
  std::fputs(report->c_str(), stdout);
  return exit_status;
}

}  // namespace vapipe::cli
