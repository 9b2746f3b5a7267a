// `vapipe status HOST:PORT`: a running job's streams at a glance, from publish's /healthz (the same
// document a monitoring system reads), for an operator without a dashboard.
#include <httplib.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "pipeline/config.h"
#include "pipeline/supervisor.h"
#include "stages/publish/metrics.h"

namespace vapipe::cli {
namespace {

std::string cell(const nlohmann::json& j, const char* key, const char* format) {
  if (!j.contains(key) || j[key].is_null()) return "-";
  char buf[64];
  if (j[key].is_number_integer()) {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(j[key].get<int64_t>()));
  } else if (j[key].is_number()) {
    std::snprintf(buf, sizeof buf, format, j[key].get<double>());
  } else {
    return j[key].dump();
  }
  return buf;
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
  if (!res) {
    std::fprintf(stderr, "vapipe status: no answer from %s (%s): is the job running, with publish.metrics_address "
                 "%s%s?\n", url.c_str(), httplib::to_string(res.error()).c_str(), address.c_str(),
                 tls ? " and TLS (and does --ca-file hold its certificate? does it want a client certificate, "
                       "--cert and --key?)"
                     : " (https:// if it has TLS)");
    return kExitStageFailed;
  }
  if (res->status != 200) {
    std::fprintf(stderr, "vapipe status: %s answered %d\n", url.c_str(), res->status);
    return kExitStageFailed;
  }
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(res->body);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vapipe status: %s: not JSON (%s)\n", url.c_str(), e.what());
    return kExitStageFailed;
  }
  if (json) {
    std::printf("%s\n", h.dump(2).c_str());
    return 0;
  }
  if (!h.contains("streams")) {
    // publish.metrics_token_file set and no token given: only the status is public.
    std::printf("job is %s (its streams need the metrics token: --token-file FILE)\n",
                h.value("status", std::string("?")).c_str());
    return 0;
  }
  std::string states;
  size_t total = 0;  // every stream; a job that watches folders lists those that ended long ago no more
  for (const std::string& state : stream_states()) {  // in their documented order
    const int n = h["stream_states"].value(state, 0);
    total += static_cast<size_t>(std::max(0, n));
    if (n > 0) states += (states.empty() ? "" : ", ") + std::to_string(n) + " " + state;
  }
  const size_t listed = h["streams"].size();
  if (listed < total) states += "; " + std::to_string(total - listed) + " that ended over 10 min ago not listed";
  const std::string detail = states.empty() ? std::string() : " (" + states + ")";
  std::printf("job '%s' (%s), up %s: %zu streams%s\n", h.value("job", std::string()).c_str(),
              h.value("mode", std::string()).c_str(), human_duration(h.value("uptime_s", 0.0)).c_str(),
              std::max(total, listed), detail.c_str());
  // publish.segments_min_frames: each stream's open segments, and for how long (a last column).
  const bool segments = std::any_of(h["streams"].begin(), h["streams"].end(),
                                    [](const nlohmann::json& s) { return s.contains("segments"); });
  std::printf("  %-24s %-13s %10s %12s %9s %9s %11s %9s%s\n", "stream", "state", "results", "last result", "dropped",
              "restarts", "reconnects", "progress", segments ? "  segments" : "");
  for (const auto& [id, s] : h["streams"].items()) {
    const std::string age = s.contains("last_result_age_s") && !s["last_result_age_s"].is_null()
                                ? human_duration(s["last_result_age_s"].get<double>()) + " ago"
                                : "-";
    std::string progress = "-";
    if (s.contains("progress") && !s["progress"].is_null()) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * s["progress"].get<double>());
      progress = buf;
    }
    std::string open;  // "truck for 4 min 10 s, person for 12.0 s", or "-"
    if (segments) {
      for (const nlohmann::json& g : s.value("segments", nlohmann::json::array())) {
        if (!g.is_object()) continue;
        open += (open.empty() ? "  " : ", ") + g.value("label", std::string("?")) + " for " +
                human_duration(g.value("for_s", 0.0));
      }
      if (open.empty()) open = "  -";
    }
    std::printf("  %-24s %-13s %10s %12s %9s %9s %11s %9s%s\n", id.c_str(), s.value("state", std::string()).c_str(),
                cell(s, "results", "%.0f").c_str(), age.c_str(), cell(s, "dropped", "%.0f").c_str(),
                cell(s, "restarts", "%.0f").c_str(), cell(s, "reconnects", "%.0f").c_str(), progress.c_str(),
                open.c_str());
  }
  if (h.contains("progress") && !h["progress"].is_null()) {
    const nlohmann::json& p = h["progress"];
    std::printf("progress: %.1f%% of %s of media", 100.0 * p.value("ratio", 0.0),
                human_duration(p.value("media_s", 0.0)).c_str());
    if (p.contains("eta_s") && !p["eta_s"].is_null()) {
      std::printf(", about %s left", human_duration(p["eta_s"].get<double>()).c_str());
    }
    std::printf("\n");
  }
  // A live job goes on while its results file refuses lines (a full disk): say so, it is not on the bus.
  if (h.contains("results_file") && h["results_file"].is_object()) {
    const nlohmann::json& f = h["results_file"];
    const uint64_t lost = f.value("lines_lost", uint64_t{0});
    const std::string lost_text = lost ? ", " + std::to_string(lost) + " lines lost" : std::string();
    if (!f.value("writable", true)) {
      std::printf("results file REFUSES lines for %s: %s; %llu waiting%s\n",
                  human_duration(f.value("refused_for_s", 0.0)).c_str(), f.value("error", std::string()).c_str(),
                  static_cast<unsigned long long>(f.value("lines_waiting", uint64_t{0})), lost_text.c_str());
    } else if (lost) {
      std::printf("results file %s: %llu lines lost while it refused them\n", f.value("path", std::string()).c_str(),
                  static_cast<unsigned long long>(lost));
    }
  }
  // A live job's re-read of its config that has run this long: its share does not answer (the job goes
  // on with its streams meanwhile).
  if (h.contains("reload_running_s") && h["reload_running_s"].is_number() && h["reload_running_s"].get<double>() >= 5) {
    std::printf("a reload (SIGHUP) RUNNING FOR %s: its config is still being read (the share does not answer?); "
                "the streams change when the read ends\n", human_duration(h["reload_running_s"].get<double>()).c_str());
  }
  // A job that watches folders: what each look found, and when a file last came (a recorder stopped?).
  if (h.contains("watched_folders") && h["watched_folders"].is_array()) {
    for (const nlohmann::json& f : h["watched_folders"]) {
      auto ago = [&](const char* key) {
        return f[key].is_number() ? human_duration(f[key].get<double>()) + " ago" : std::string("not yet");
      };
      const uint64_t added = f.value("files_added", uint64_t{0});
      const uint64_t settling = f.value("files_settling", uint64_t{0});
      const std::string settling_text =
          settling ? ", " + std::to_string(settling) + (settling == 1 ? " file" : " files") + " settling" : "";
      // A look that has run this long is said: a share that does not answer (the job goes on meanwhile).
      const double running_s = f["look_running_s"].is_number() ? f["look_running_s"].get<double>() : 0;
      const std::string running_text =
          running_s >= 5 ? "; a look RUNNING FOR " + human_duration(running_s) + " (the share does not answer?)" : "";
      std::printf("watching %s every %s: %llu file%s added%s, the last file %s; looked %s (%.2f s)%s%s%s\n",
                  f.value("folder", std::string()).c_str(), human_duration(f.value("every_s", 0.0)).c_str(),
                  static_cast<unsigned long long>(added), added == 1 ? "" : "s", settling_text.c_str(),
                  f["last_file_age_s"].is_number() ? ("joined " + ago("last_file_age_s")).c_str() : "none",
                  ago("last_look_age_s").c_str(), f.value("last_look_s", 0.0), running_text.c_str(),
                  f["error"].is_string() ? ": CANNOT LIST IT: " : "",
                  f["error"].is_string() ? f["error"].get<std::string>().c_str() : "");
    }
  }
  return 0;
}

}  // namespace vapipe::cli
