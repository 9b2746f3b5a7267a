#include "cli/status_report.h"

#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <optional>

#include "pipeline/json_fields.h"
#include "stages/publish/metrics.h"

namespace vapipe::cli {
namespace {

using nlohmann::json;

void appendf(std::string* out, const char* format, ...) __attribute__((format(printf, 2, 3)));
void appendf(std::string* out, const char* format, ...) {
  char buf[512];
  va_list args;
  va_start(args, format);
  const int n = std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  if (n < 0) return;
  if (static_cast<size_t>(n) < sizeof buf) {
    out->append(buf, static_cast<size_t>(n));
    return;
  }
  std::string big(static_cast<size_t>(n) + 1, '\0');
  va_start(args, format);
  std::vsnprintf(big.data(), big.size(), format, args);
  va_end(args);
  big.pop_back();
  *out += big;
}

// Text from the document as the terminal shows it: control characters (an escape sequence from a
// foreign server) as '?'.
std::string printable(std::string text) {
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return text;
}

const json& member(const json& object, const char* key) {
  static const json kNull;
  if (!object.is_object()) return kNull;
  const auto it = object.find(key);
  return it == object.end() ? kNull : *it;
}

std::string text(const json& object, const char* key, const char* missing = "") {
  const json& v = member(object, key);
  return v.is_string() ? printable(v.get<std::string>()) : std::string(missing);
}


uint64_t count(const json& object, const char* key) { return count_field(object, key).value_or(0); }

// A table cell: an integer as it is, another number with `format`, text as it is, else "-".
std::string cell(const json& object, const char* key, const char* format) {
  const json& v = member(object, key);
  char buf[64];
  if (v.is_number_unsigned()) {
    std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(v.get<uint64_t>()));
  } else if (v.is_number_integer()) {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v.get<int64_t>()));
  } else if (v.is_number()) {
    std::snprintf(buf, sizeof buf, format, v.get<double>());
  } else if (v.is_string()) {
    return printable(v.get<std::string>());
  } else if (v.is_null()) {
    return "-";
  } else {
    return printable(v.dump(-1, ' ', false, json::error_handler_t::replace));
  }
  return buf;
}

std::string ago(const json& object, const char* key, const char* missing) {
  const auto s = number_field(object, key);
  return s ? human_duration(*s) + " ago" : std::string(missing);
}

void stream_table(const json& h, std::string* out) {
  const json& streams = h["streams"];
  size_t total = 0;  // every stream; a job that watches folders lists those that ended long ago no more
  std::string states;
  for (const std::string& state : stream_states()) {  // in their documented order
    const auto n = count_field(member(h, "stream_states"), state.c_str());
    if (!n || *n == 0) continue;
    total += *n;
    states += (states.empty() ? "" : ", ") + std::to_string(*n) + " " + state;
  }
  const size_t listed = streams.size();
  if (listed < total) states += "; " + std::to_string(total - listed) + " that ended over 10 min ago not listed";
  const std::string detail = states.empty() ? std::string() : " (" + states + ")";
  appendf(out, "job '%s' (%s), up %s: %zu streams%s\n", text(h, "job").c_str(), text(h, "mode").c_str(),
          human_duration(number_field(h, "uptime_s").value_or(0)).c_str(), std::max(total, listed), detail.c_str());
  // publish.segments_min_frames: each stream's open segments, and for how long (a last column).
  const bool segments = std::any_of(streams.begin(), streams.end(),
                                    [](const json& s) { return s.is_object() && s.contains("segments"); });
  // undecodable: frames its decoder took and gave no picture for (a camera's lost packets); damaged:
  // results of pictures decoded after lost packets (smeared up to the next key frame).
  appendf(out, "  %-24s %-13s %10s %12s %9s %12s %9s %9s %11s %9s%s\n", "stream", "state", "results", "last result",
          "dropped", "undecodable", "damaged", "restarts", "reconnects", "progress", segments ? "  segments" : "");
  for (const auto& [id, s] : streams.items()) {
    std::string progress = "-";
    if (const auto p = number_field(s, "progress")) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * *p);
      progress = buf;
    }
    std::string open;  // "truck for 4 min 10 s, person for 12.0 s", or "-"
    if (segments) {
      const json& list = member(s, "segments");
      if (list.is_array()) {
        for (const json& g : list) {
          if (!g.is_object()) continue;
          open += (open.empty() ? "  " : ", ") + text(g, "label", "?") + " for " +
                  human_duration(number_field(g, "for_s").value_or(0));
        }
      }
      if (open.empty()) open = "  -";
    }
    appendf(out, "  %-24s %-13s %10s %12s %9s %12s %9s %9s %11s %9s%s\n", printable(id).c_str(), text(s, "state").c_str(),
            cell(s, "results", "%.0f").c_str(), ago(s, "last_result_age_s", "-").c_str(),
            cell(s, "dropped", "%.0f").c_str(), cell(s, "undecodable_frames", "%.0f").c_str(),
            cell(s, "damaged_frames", "%.0f").c_str(), cell(s, "restarts", "%.0f").c_str(),
            cell(s, "reconnects", "%.0f").c_str(), progress.c_str(), open.c_str());
  }
}

// A stage whose work does not move (stopped, or stuck in one call): said first, before the streams,
// whose states then stand still. Returns how many.
size_t stalled_lines(const json& h, std::string* out) {
  const json& stalled = member(h, "stalled");
  size_t stalled_stages = 0;
  if (!stalled.is_array()) return 0;
  for (const json& s : stalled) {
    if (!s.is_object()) continue;
    ++stalled_stages;
    if (out) {
      appendf(out, "STALLED: %s lane %llu: %s\n", text(s, "stage", "?").c_str(),
              static_cast<unsigned long long>(count(s, "lane")), text(s, "why").c_str());
    }
  }
  return stalled_stages;
}

void job_lines(const json& h, std::string* out) {
  const size_t stalled_stages = stalled_lines(h, nullptr);
  // An archive job restarts whole after a crash: its streams' own restart counts stay 0.
  if (const uint64_t restarts = count(h, "job_restarts"); restarts > 0) {
    appendf(out, "the job restarted %llu time%s after a stage crashed (see its log)\n",
            static_cast<unsigned long long>(restarts), restarts == 1 ? "" : "s");
  }
  if (const json& p = member(h, "progress"); p.is_object()) {
    appendf(out, "progress: %.1f%% of %s of media", 100.0 * number_field(p, "ratio").value_or(0),
            human_duration(number_field(p, "media_s").value_or(0)).c_str());
    // (The time left of a stalled job grows without meaning: the rate it is worked out from has stopped.)
    if (stalled_stages > 0) {
      appendf(out, ", time left unknown while stalled");
    } else if (const auto eta = number_field(p, "eta_s")) {
      appendf(out, ", about %s left", human_duration(*eta).c_str());
    }
    appendf(out, "\n");
  }
  // A live job goes on while its results file refuses lines (a full disk): say so, it is not on the bus.
  if (const json& f = member(h, "results_file"); f.is_object()) {
    const uint64_t lost = count(f, "lines_lost");
    const std::string lost_text = lost ? ", " + std::to_string(lost) + " lines lost" : std::string();
    const json& writable = member(f, "writable");
    if (writable.is_boolean() && !writable.get<bool>()) {
      appendf(out, "results file REFUSES lines for %s: %s; %llu waiting%s\n",
              human_duration(number_field(f, "refused_for_s").value_or(0)).c_str(), text(f, "error").c_str(),
              static_cast<unsigned long long>(count(f, "lines_waiting")), lost_text.c_str());
    } else if (lost) {
      appendf(out, "results file %s: %llu lines lost while it refused them\n", text(f, "path").c_str(),
              static_cast<unsigned long long>(lost));
    }
  }
  // A live job's re-read of its config that has run this long: its share does not answer (the job goes
  // on with its streams meanwhile).
  if (const auto reload = number_field(h, "reload_running_s"); reload && *reload >= 5) {
    appendf(out, "a reload (SIGHUP) RUNNING FOR %s: its config is still being read (the share does not answer?); "
            "the streams change when the read ends\n", human_duration(*reload).c_str());
  }
  // The last reload: one refused says why (nothing changed: the file as edited is not what runs).
  if (const json& r = member(h, "last_reload"); r.is_object()) {
    const json& taken = member(r, "taken");
    const std::string age = human_duration(number_field(r, "age_s").value_or(0));
    if (taken.is_boolean() && !taken.get<bool>()) {
      appendf(out, "last reload REFUSED %s ago, nothing changed: %s\n", age.c_str(), text(r, "message").c_str());
    } else {
      appendf(out, "last reload %s ago: %s\n", age.c_str(), text(r, "message").c_str());
    }
  }
  // Each lane's model: a reload's new model is loaded beside it, and one that could not be used says why.
  if (const json& models = member(h, "models"); models.is_array()) {
    for (const json& m : models) {
      if (!m.is_object()) continue;
      const uint64_t reloads = count(m, "model_reloads"), failed = count(m, "model_reload_failures");
      const std::string written = text(m, "model_file_modified");
      appendf(out, "model (lane %s): '%s' (%s%s)", cell(m, "lane", "%.0f").c_str(), text(m, "model").c_str(),
              text(m, "model_file").c_str(), written.empty() ? "" : (", written " + written).c_str());
      if (reloads || failed) {
        appendf(out, "; reloads: %llu taken, %llu could not be used", static_cast<unsigned long long>(reloads),
                static_cast<unsigned long long>(failed));
      }
      if (!text(m, "loading").empty()) appendf(out, "; LOADING %s", text(m, "loading").c_str());
      appendf(out, "\n");
      if (!text(m, "last_reload_error").empty()) {
        appendf(out, "  the last reload's model COULD NOT BE USED (this one goes on): %s\n",
                text(m, "last_reload_error").c_str());
      }
    }
  }
  // publish.webhooks: each receiver's figures; one that cannot be reached says so, with why.
  if (const json& hooks = member(h, "webhooks"); hooks.is_array()) {
    for (const json& w : hooks) {
      if (!w.is_object()) continue;
      const uint64_t lost = count(w, "refused") + count(w, "dropped");
      std::string state = "ok";
      if (const auto failing_s = number_field(w, "failing_for_s")) {
        state = "CANNOT DELIVER for " + human_duration(*failing_s) + ": " + text(w, "last_error");
      } else if (lost > 0 && member(w, "last_error").is_string()) {
        state = "last refusal: " + text(w, "last_error");
      }
      appendf(out, "webhook %llu %s: %llu delivered, %llu waiting, %llu refused, %llu dropped; last delivered %s; %s\n",
              static_cast<unsigned long long>(count(w, "index")), text(w, "origin", "?").c_str(),
              static_cast<unsigned long long>(count(w, "delivered")), static_cast<unsigned long long>(count(w, "queued")),
              static_cast<unsigned long long>(count(w, "refused")), static_cast<unsigned long long>(count(w, "dropped")),
              ago(w, "last_delivered_age_s", "never").c_str(), state.c_str());
    }
  }
  // publish.mqtt: each broker's figures; one that cannot be reached says so, with why.
  if (const json& brokers = member(h, "mqtt"); brokers.is_array()) {
    for (const json& b : brokers) {
      if (!b.is_object()) continue;
      std::string state = "connected";
      if (member(b, "connected") != json(true)) {
        const auto for_s = number_field(b, "disconnected_for_s");
        state = "NOT CONNECTED" + (for_s ? " for " + human_duration(*for_s) : std::string()) +
                (member(b, "last_error").is_string() ? ": " + text(b, "last_error") : std::string());
      }
      const uint64_t lost = count(b, "dropped") + count(b, "lost") + count(b, "refused");
      appendf(out, "mqtt %llu %s: %llu delivered, %llu waiting%s; last delivered %s; %s\n",
              static_cast<unsigned long long>(count(b, "index")), text(b, "broker", "?").c_str(),
              static_cast<unsigned long long>(count(b, "delivered")), static_cast<unsigned long long>(count(b, "queued")),
              lost ? (", " + std::to_string(lost) + " lost (dropped, refused or qos 0)").c_str() : "",
              ago(b, "last_delivered_age_s", "never").c_str(), state.c_str());
    }
  }
  // publish.redis: each server's figures, likewise.
  if (const json& servers = member(h, "redis"); servers.is_array()) {
    for (const json& r : servers) {
      if (!r.is_object()) continue;
      std::string state = "connected";
      // The node connected to where the url does not name it: Sentinel's master, a Cluster's node.
      const std::string server = text(r, "server", "?"), node = text(r, "node");
      if (!node.empty() && (server.size() < node.size() || server.compare(server.size() - node.size(), node.size(), node) != 0)) {
        state += " to " + node;
      }
      if (member(r, "connected") != json(true)) {
        const auto for_s = number_field(r, "disconnected_for_s");
        state = "NOT CONNECTED" + (for_s ? " for " + human_duration(*for_s) : std::string()) +
                (member(r, "last_error").is_string() ? ": " + text(r, "last_error") : std::string());
      }
      // redis+sentinel: a failover is followed as it happens only while a sentinel is watched.
      if (member(r, "sentinel_watch_error").is_string()) {
        state += "; FAILOVERS NOT WATCHED: " + text(r, "sentinel_watch_error");
      }
      appendf(out, "redis %llu %s: %llu delivered, %llu waiting, %llu refused, %llu dropped; last delivered %s; %s\n",
              static_cast<unsigned long long>(count(r, "index")), text(r, "server", "?").c_str(),
              static_cast<unsigned long long>(count(r, "delivered")), static_cast<unsigned long long>(count(r, "queued")),
              static_cast<unsigned long long>(count(r, "refused")), static_cast<unsigned long long>(count(r, "dropped")),
              ago(r, "last_delivered_age_s", "never").c_str(), state.c_str());
    }
  }
  // publish.kafka: each cluster's figures, likewise.
  if (const json& clusters = member(h, "kafka"); clusters.is_array()) {
    for (const json& k : clusters) {
      if (!k.is_object()) continue;
      std::string state = "connected";
      if (member(k, "connected") != json(true)) {
        const auto for_s = number_field(k, "disconnected_for_s");
        state = "NOT CONNECTED" + (for_s ? " for " + human_duration(*for_s) : std::string()) +
                (member(k, "last_error").is_string() ? ": " + text(k, "last_error") : std::string());
      }
      appendf(out, "kafka %llu %s: %llu delivered, %llu waiting, %llu refused, %llu dropped; last delivered %s; %s\n",
              static_cast<unsigned long long>(count(k, "index")), text(k, "cluster", "?").c_str(),
              static_cast<unsigned long long>(count(k, "delivered")), static_cast<unsigned long long>(count(k, "queued")),
              static_cast<unsigned long long>(count(k, "refused")), static_cast<unsigned long long>(count(k, "dropped")),
              ago(k, "last_delivered_age_s", "never").c_str(), state.c_str());
    }
  }
  // A job that watches folders: what each look found, and when a file last came (a recorder stopped?).
  if (const json& folders = member(h, "watched_folders"); folders.is_array()) {
    for (const json& f : folders) {
      if (!f.is_object()) continue;
      const uint64_t added = count(f, "files_added");
      const uint64_t settling = count(f, "files_settling");
      const std::string settling_text =
          settling ? ", " + std::to_string(settling) + (settling == 1 ? " file" : " files") + " settling" : "";
      // A look that has run this long is said: a share that does not answer (the job goes on meanwhile).
      const double running_s = number_field(f, "look_running_s").value_or(0);
      const std::string running_text =
          running_s >= 5 ? "; a look RUNNING FOR " + human_duration(running_s) + " (the share does not answer?)" : "";
      const std::string last_file =
          number_field(f, "last_file_age_s") ? "joined " + ago(f, "last_file_age_s", "") : std::string("none");
      const std::string error = text(f, "error");
      appendf(out, "watching %s every %s: %llu file%s added%s, the last file %s; looked %s (%.2f s)%s%s%s\n",
              text(f, "folder").c_str(), human_duration(number_field(f, "every_s").value_or(0)).c_str(),
              static_cast<unsigned long long>(added), added == 1 ? "" : "s", settling_text.c_str(), last_file.c_str(),
              ago(f, "last_look_age_s", "not yet").c_str(), number_field(f, "last_look_s").value_or(0),
              running_text.c_str(), member(f, "error").is_string() ? ": CANNOT LIST IT: " : "", error.c_str());
    }
  }
}

}  // namespace

Result<std::string> status_report(const json& h, const std::string& source) {
  if (!h.is_object()) {
    return InvalidArgument(source + ": not a vapipe job's /healthz (a JSON " + h.type_name() +
                                   ", not an object)");
  }
  std::string out;
  if (!h.contains("streams")) {
    // publish.metrics_token_file set and no token given: only the status is public.
    if (!member(h, "status").is_string()) {
      return InvalidArgument(source + ": not a vapipe job's /healthz (neither \"status\" nor \"streams\")");
    }
    // Another program's health check says {"status":"ok"} too: vapipe's says whose it is.
    if (text(h, "service") != "vapipe") {
      return InvalidArgument(source + ": not a vapipe job's /healthz (it says its status, \"" + text(h, "status") +
                             "\", but not \"service\": \"vapipe\": another program's health check, or a vapipe "
                             "from before 2026-12-07 that wants the metrics token: --token-file FILE)");
    }
    appendf(&out, "job is %s (its streams need the metrics token: --token-file FILE)\n", text(h, "status").c_str());
    return out;
  }
  if (!h["streams"].is_object()) {
    return InvalidArgument(source + ": not a vapipe job's /healthz (\"streams\" is a " +
                                   h["streams"].type_name() + ", not an object of streams)");
  }
  stalled_lines(h, &out);
  stream_table(h, &out);
  job_lines(h, &out);
  return out;
}

}  // namespace vapipe::cli
