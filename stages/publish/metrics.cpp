#include "stages/publish/metrics.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <tuple>

namespace vapipe {

namespace {

// A label value: backslash, double quote and line feed escaped, as the format asks.
std::string label_value(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

class Writer {
 public:
  void family(const char* name, const char* type, const char* help) {
    text_ += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void sample(const std::string& name, const std::string& labels, const std::string& value) {
    text_ += name;
    if (!labels.empty()) text_ += "{" + labels + "}";
    text_ += " " + value + "\n";
  }
  // One sample per stream.
  void per_stream(const JobMetrics& m, const char* name, const char* type, const char* help,
                  const std::function<std::string(const StreamMetrics&)>& value) {
    family(name, type, help);
    for (const StreamMetrics& s : m.streams) {
      if (m.listed(s)) sample(name, "stream=\"" + label_value(s.id) + "\"", value(s));
    }
  }
  std::string text() && { return std::move(text_); }

 private:
  std::string text_;
};

// "21 s", "1.5 s": a stall's length, in a line for people.
std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, s >= 10 ? "%.0f s" : "%.1f s", s);
  return buf;
}

}  // namespace

JobProgress job_progress(const JobMetrics& m) {
  JobProgress p;
  double done_this_run = 0;
  for (const StreamMetrics& s : m.streams) {
    p.streams_ended += s.ended;
    if (s.media_s <= 0) continue;
    ++p.streams_timed;
    p.media_s += s.media_s;
    const double done = s.ended ? s.media_s : std::clamp(s.position_s, 0.0, s.media_s);
    p.done_s += done;
    done_this_run += std::max(0.0, done - std::min(s.earlier_position_s, s.media_s));
  }
  for (const StreamMetrics& s : m.streams) {
    const double quiet_s = m.now_unix_s - s.last_result_unix_s;
    if (s.state == "running" && s.last_result_unix_s > 0 && quiet_s >= JobProgress::kQuietStreamS) {
      p.quiet.emplace_back(s.id, quiet_s);
    }
  }
  std::stable_sort(p.quiet.begin(), p.quiet.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (p.media_s <= 0) return p;
  if (m.mode == "archive") {
    for (const StreamMetrics& s : m.streams) p.streams_estimated += s.state == "pending" && s.media_s <= 0;
    p.media_s += static_cast<double>(p.streams_estimated) * p.media_s / static_cast<double>(p.streams_timed);
  }
  p.ratio = p.done_s / p.media_s;
  const double elapsed = m.now_monotonic_s > 0 && m.start_monotonic_s > 0 ? m.now_monotonic_s - m.start_monotonic_s
                                                                         : m.now_unix_s - m.start_unix_s;
  if (elapsed > 0 && done_this_run > 0) {
    p.media_per_s = done_this_run / elapsed;
    p.eta_s = (p.media_s - p.done_s) / p.media_per_s;
  }
  return p;
}

double busy_seconds(std::vector<std::pair<int64_t, int64_t>> spans) {
  std::sort(spans.begin(), spans.end());
  int64_t busy_ns = 0, start = 0, end = 0;
  bool open = false;
  for (const auto& [from, to] : spans) {
    if (to <= from) continue;
    if (open && from <= end) {
      end = std::max(end, to);
      continue;
    }
    if (open) busy_ns += end - start;
    start = from;
    end = to;
    open = true;
  }
  if (open) busy_ns += end - start;
  return static_cast<double>(busy_ns) / 1e9;
}

std::string human_duration(double seconds) {
  char buf[64];
  if (seconds < 60) {
    std::snprintf(buf, sizeof buf, "%.1f s", seconds);
  } else if (seconds < 3600) {
    std::snprintf(buf, sizeof buf, "%d min %02d s", static_cast<int>(seconds) / 60, static_cast<int>(seconds) % 60);
  } else if (seconds < 3.6e12) {  // a billion hours; beyond (an ETA at a pace near 0), int64 could not hold it
    const auto minutes = static_cast<long long>(seconds / 60);
    std::snprintf(buf, sizeof buf, "%lld h %02lld min", minutes / 60, minutes % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%.3g h", seconds / 3600);
  }
  return buf;
}

const std::vector<std::string>& stream_states() {
  static const std::vector<std::string> states{"pending", "running", "reconnecting", "done", "failed", "stopped",
                                               "removed"};
  return states;
}

// How long since a stage's snapshot was written: on the monotonic clock where both are known.
static double silent_for_s(const JobMetrics& m, const StageStatsSnapshot& s) {
  if (m.now_monotonic_s > 0 && s.written_monotonic_s > 0) return m.now_monotonic_s - s.written_monotonic_s;
  return m.now_unix_s - s.written_unix_s;
}

std::vector<StalledStage> stalled_stages(const JobMetrics& m) {
  std::vector<StalledStage> out;
  for (const StageStatsSnapshot& s : m.stages) {
    if (s.stage == "publish" || s.ended || s.written_unix_s <= 0) continue;  // (publish: its server says)
    const double silent_s = silent_for_s(m, s);
    const double working_limit_s = s.stuck_after_s > 0 ? s.stuck_after_s / 2 : 60.0;
    if (silent_s >= kStageSilentS) {
      out.push_back({s.stage, s.lane, silent_s,
                     "no figures for " + seconds_text(silent_s) +
                         " (it writes them every second: the process is stopped, SIGSTOP or a debugger, or frozen)"});
    } else if (s.working_s >= working_limit_s) {
      out.push_back({s.stage, s.lane, s.working_s,
                     "in one stretch of its own work (" + (s.working_on.empty() ? std::string("?") : s.working_on) +
                         ") for " + seconds_text(s.working_s) +
                         (s.stuck_after_s > 0 ? "; its watchdog aborts it at " + seconds_text(s.stuck_after_s) +
                                                    " (job.stage_timeout_s)"
                                              : "")});
    }
  }
  return out;
}

std::string prometheus_text(const JobMetrics& m) {
  Writer w;
  w.family("vapipe_job_info", "gauge", "The job this pipeline runs (always 1).");
  w.sample("vapipe_job_info", "job=\"" + label_value(m.job) + "\",mode=\"" + label_value(m.mode) + "\"", "1");
  w.family("vapipe_job_start_time_seconds", "gauge", "When the job started, seconds since the Unix epoch.");
  w.sample("vapipe_job_start_time_seconds", "", number(m.start_unix_s));
  w.family("vapipe_job_restarts_total", "counter",
           "An archive job's restarts whole after a stage crashed (a live job's are its lanes', per stream).");
  w.sample("vapipe_job_restarts_total", "", std::to_string(m.job_restarts));
  // The job's streams by state, and its results: every stream, listed one by one below or not.
  w.family("vapipe_job_streams", "gauge", "The job's streams in each state (every stream, ended ones included).");
  {
    std::map<std::string, size_t> in_state;
    for (const StreamMetrics& s : m.streams) ++in_state[s.state];
    for (const std::string& state : stream_states()) {
      w.sample("vapipe_job_streams", "state=\"" + state + "\"", std::to_string(in_state[state]));
    }
  }
  uint64_t results = 0, frame_errors = 0;
  for (const StreamMetrics& s : m.streams) results += s.results, frame_errors += s.frame_errors;
  w.family("vapipe_job_results_total", "counter", "Results published for every stream of the job, error results included.");
  w.sample("vapipe_job_results_total", "", std::to_string(results));
  w.family("vapipe_job_frame_errors_total", "counter", "Results of every stream of the job that carry an error.");
  w.sample("vapipe_job_frame_errors_total", "", std::to_string(frame_errors));
  w.per_stream(m, "vapipe_results_total", "counter", "Results published for the stream, error results included.",
               [](const StreamMetrics& s) { return std::to_string(s.results); });
  w.per_stream(m, "vapipe_frame_errors_total", "counter", "Results of the stream that carry an error instead of a label.",
               [](const StreamMetrics& s) { return std::to_string(s.frame_errors); });
  w.per_stream(m, "vapipe_damaged_frames_total", "counter",
               "Results of the stream whose pictures were decoded from damaged data (\"damaged\": true): after a packet "
               "lost on a camera's network, until the next key frame; smeared where the data was missing.",
               [](const StreamMetrics& s) { return std::to_string(s.damaged); });
  w.per_stream(m, "vapipe_gaps_total", "counter",
               "Sequence numbers of the stream that never arrived (live-mode drops, as they happen).",
               [](const StreamMetrics& s) { return std::to_string(s.gaps); });
  w.per_stream(m, "vapipe_dropped_frames_total", "counter",
               "Frames dropped by the stream's ingest queue (live mode), counted as they happen.",
               [](const StreamMetrics& s) { return std::to_string(s.dropped); });
  w.per_stream(m, "vapipe_ts_continuity_errors_total", "counter",
               "Gaps in the stream's MPEG-TS video packets (tsdemux's continuity errors): packets lost or damaged "
               "before the decoder, and frames with them (0 for other streams).",
               [](const StreamMetrics& s) { return std::to_string(s.continuity_errors); });
  w.per_stream(m, "vapipe_undecodable_frames_total", "counter",
               "Frames the stream's decoder took and gave no picture for (damaged or incomplete: packets lost on a "
               "camera's network, a file's damage); they have no results.",
               [](const StreamMetrics& s) { return std::to_string(s.undecoded); });
  w.per_stream(m, "vapipe_rtp_packets_lost_total", "counter",
               "An RTSP camera's RTP packets lost on the network (its jitter buffers' count; 0 for other streams): "
               "its pictures are smeared where they were.",
               [](const StreamMetrics& s) { return std::to_string(s.rtp_lost); });
  w.per_stream(m, "vapipe_rtp_packets_received_total", "counter",
               "An RTSP camera's RTP packets received (0 for other streams).",
               [](const StreamMetrics& s) { return std::to_string(s.rtp_received); });
  w.per_stream(m, "vapipe_reconnects_total", "counter", "Times the stream resumed after a reconnection.",
               [](const StreamMetrics& s) { return std::to_string(s.reconnects); });
  w.per_stream(m, "vapipe_stream_restarts_total", "counter",
               "Times the stream's lane restarted after one of its stages crashed.",
               [](const StreamMetrics& s) { return std::to_string(s.restarts); });
  w.per_stream(m, "vapipe_stream_comebacks_total", "counter",
               "Times the stream began again after it had ended (a reload listed it again, or tried again a camera that gave up).",
               [](const StreamMetrics& s) { return std::to_string(s.comebacks); });
  w.family("vapipe_stream_state", "gauge", "1 for the state the stream is in, 0 for the others.");
  for (const StreamMetrics& s : m.streams) {
    if (!m.listed(s)) continue;
    for (const std::string& state : stream_states()) {
      w.sample("vapipe_stream_state", "stream=\"" + label_value(s.id) + "\",state=\"" + state + "\"",
               s.state == state ? "1" : "0");
    }
  }
  if (m.segments) {
    // Alerting without a bus subscriber: time() - this > 300 is "a truck has been at the gate for 5 min".
    w.family("vapipe_segment_open_since_seconds", "gauge",
             "When the stream's open segment of this label began (its first frame's capture time, seconds since the "
             "Unix epoch); no sample once it ended.");
    for (const StreamMetrics& s : m.streams) {
      if (!m.listed(s)) continue;
      for (const StreamMetrics::OpenSegment& g : s.open_segments) {
        w.sample("vapipe_segment_open_since_seconds",
                 "stream=\"" + label_value(s.id) + "\",label=\"" + label_value(g.label) + "\"", number(g.since_unix_s));
      }
    }
  }
  // Pictures and clips of segments, each counted by outcome.
  struct Outcomes {
    bool on;
    const char* name;
    const char* help;
    uint64_t StreamMetrics::*written;
    uint64_t StreamMetrics::*failed;
  };
  for (const Outcomes& o :
       {Outcomes{m.segment_pictures, "vapipe_segment_pictures_total",
                 "Pictures of the stream's segments (publish.segments_pictures_dir): written, or failed (ingest's log "
                 "says why).",
                 &StreamMetrics::pictures, &StreamMetrics::pictures_failed},
        Outcomes{m.segment_clips, "vapipe_segment_clips_total",
                 "Clips of the stream's segments (publish.segments_clips): written, or failed (the clip message and "
                 "ingest's log say why).",
                 &StreamMetrics::clips, &StreamMetrics::clips_failed}}) {
    if (!o.on) continue;
    w.family(o.name, "counter", o.help);
    for (const StreamMetrics& s : m.streams) {
      if (!m.listed(s)) continue;
      const std::string stream = "stream=\"" + label_value(s.id) + "\"";
      w.sample(o.name, stream + ",outcome=\"written\"", std::to_string(s.*o.written));
      w.sample(o.name, stream + ",outcome=\"failed\"", std::to_string(s.*o.failed));
    }
  }
  w.family("vapipe_latency_seconds", "summary", "From capture to publishing, per result of the stream.");
  for (const StreamMetrics& s : m.streams) {
    if (!m.listed(s)) continue;
    const std::string labels = "stream=\"" + label_value(s.id) + "\"";
    w.sample("vapipe_latency_seconds_sum", labels, number(s.latency_sum_s));
    w.sample("vapipe_latency_seconds_count", labels, std::to_string(s.latency_count));
  }
  w.per_stream(m, "vapipe_latency_max_seconds", "gauge", "The largest latency of a result of the stream so far.",
               [](const StreamMetrics& s) { return number(s.latency_max_s); });
  // Per stage process (stage, lane): where its time went. rate(busy) near 1 marks the stage that
  // limits the job; rate(input_wait) near 1, one that waits for it.
  auto per_stage = [&](const char* name, const char* type, const char* help,
                       const std::function<std::string(const StageStatsSnapshot&)>& value, bool input_side = false) {
    if (m.stages.empty()) return;
    w.family(name, type, help);
    for (const StageStatsSnapshot& s : m.stages) {
      if (input_side && !s.has_input) continue;  // ingest: no input, decoding on GStreamer's threads
      w.sample(name, "stage=\"" + label_value(s.stage) + "\",lane=\"" + std::to_string(s.lane) + "\"", value(s));
    }
  };
  per_stage("vapipe_stage_up_seconds", "gauge", "Seconds since the stage process was ready.",
            [](const StageStatsSnapshot& s) { return number(s.up_s); });
  per_stage("vapipe_stage_silent_seconds", "gauge",
            "Seconds since the stage process last wrote its figures (every second while it runs; over 15: stopped or "
            "frozen).",
            [&m](const StageStatsSnapshot& s) {
              return number(s.ended || s.written_unix_s <= 0 ? 0.0 : std::max(0.0, silent_for_s(m, s)));
            });
  per_stage("vapipe_stage_working_seconds", "gauge",
            "Seconds the stage's stretch of its own work under way has lasted (0 while it waits).",
            [](const StageStatsSnapshot& s) { return number(s.working_s); });
  per_stage("vapipe_stage_messages_total", "counter", "Messages the stage received.",
            [](const StageStatsSnapshot& s) { return std::to_string(s.messages_in); }, true);
  per_stage("vapipe_stage_errors_total", "counter", "Malformed messages and processing errors of the stage.",
            [](const StageStatsSnapshot& s) { return std::to_string(s.errors); }, true);
  per_stage("vapipe_stage_busy_seconds_total", "counter",
            "Seconds in the stage's own work, including the blocked sending and slot waits below.",
            [](const StageStatsSnapshot& s) { return number(s.busy_s); }, true);
  per_stage("vapipe_stage_send_blocked_seconds_total", "counter",
            "Seconds the stage waited for room downstream (the next stage is slower).",
            [](const StageStatsSnapshot& s) { return number(s.send_blocked_s); });
  per_stage("vapipe_stage_slot_wait_seconds_total", "counter",
            "Seconds the stage waited for a free slot of its output pool (downstream holds them).",
            [](const StageStatsSnapshot& s) { return number(s.slot_wait_s); });
  per_stage("vapipe_stage_input_wait_seconds_total", "counter", "Seconds the stage waited for input.",
            [](const StageStatsSnapshot& s) { return number(s.input_wait_s); }, true);
  // Each stage's own totals: vapipe_<stage>_<name>_total, one family per name.
  std::vector<std::string> families;
  for (const StageStatsSnapshot& s : m.stages) {
    for (const auto& [name, value] : s.counters) {
      const std::string family = "vapipe_" + s.stage + "_" + name + "_total";
      if (std::find(families.begin(), families.end(), family) == families.end()) families.push_back(family);
    }
  }
  for (const std::string& family : families) {
    w.family(family.c_str(), "counter", "A running total of the stage (see docs/architecture.md, metrics).");
    for (const StageStatsSnapshot& s : m.stages) {
      for (const auto& [name, value] : s.counters) {
        if ("vapipe_" + s.stage + "_" + name + "_total" == family) {
          w.sample(family, "lane=\"" + std::to_string(s.lane) + "\"", number(value));
        }
      }
    }
  }
  // The model each lane's infer classifies with (a reload may change it, lane by lane): Prometheus's
  // info pattern, 1 with the model as labels.
  auto fact = [](const StageStatsSnapshot& s, const char* name) -> std::string {
    for (const auto& [k, v] : s.facts) {
      if (k == name) return v;
    }
    return "";
  };
  bool said_models = false;
  for (const StageStatsSnapshot& s : m.stages) {
    if (s.stage != "infer" || fact(s, "model").empty()) continue;
    if (!said_models) {
      w.family("vapipe_infer_model_info", "gauge",
               "The model the lane's infer classifies with (1), as results name it and its file.");
      said_models = true;
    }
    w.sample("vapipe_infer_model_info", "lane=\"" + std::to_string(s.lane) + "\",model=\"" +
                 label_value(fact(s, "model")) + "\",file=\"" + label_value(fact(s, "model_file")) + "\"",
             "1");
  }
  // Archive progress: streams whose duration is known (files), and the job as a whole.
  w.family("vapipe_stream_progress_ratio", "gauge",
           "Share of the stream's media that has results (streams whose duration is known).");
  for (const StreamMetrics& s : m.streams) {
    if (s.media_s <= 0 || !m.listed(s)) continue;
    const double done = s.ended ? 1.0 : std::clamp(s.position_s / s.media_s, 0.0, 1.0);
    w.sample("vapipe_stream_progress_ratio", "stream=\"" + label_value(s.id) + "\"", number(done));
  }
  const JobProgress progress = job_progress(m);
  if (progress.ratio >= 0) {
    w.family("vapipe_job_progress_ratio", "gauge", "Share of the media of every timed stream that has results (files not opened yet counted at the average length).");
    w.sample("vapipe_job_progress_ratio", "", number(progress.ratio));
    w.family("vapipe_job_media_seconds", "gauge", "Duration of the media of the streams whose duration is known.");
    w.sample("vapipe_job_media_seconds", "", number(progress.media_s));
  }
  if (progress.eta_s >= 0) {
    w.family("vapipe_job_eta_seconds", "gauge", "Seconds until the timed streams are done, at this run's pace.");
    w.sample("vapipe_job_eta_seconds", "", number(progress.eta_s));
  }
  if (m.results_file) {
    const ResultsFileHealth& f = *m.results_file;
    w.family("vapipe_results_file_writable", "gauge",
             "1 while publish.jsonl_path takes lines; 0 while it refuses them (a full disk: a live job goes on).");
    w.sample("vapipe_results_file_writable", "", f.writable ? "1" : "0");
    w.family("vapipe_results_file_lines_waiting", "gauge",
             "Lines kept for publish.jsonl_path while it refuses them, to be written once it takes them.");
    w.sample("vapipe_results_file_lines_waiting", "", std::to_string(f.lines_waiting));
    w.family("vapipe_results_file_lines_lost_total", "counter",
             "Lines never recorded in publish.jsonl_path: dropped from those kept for it while it refused them.");
    w.sample("vapipe_results_file_lines_lost_total", "", std::to_string(f.lines_lost));
  }
  if (!m.webhooks.empty()) {
    // A receiver that is down shows as vapipe_webhook_failing 1 and its queue growing; an alert on
    // increase(vapipe_webhook_messages_total{outcome=~"refused|dropped"}[1h]) > 0 catches lost alerts.
    auto hook = [](const WebhookStats& h) {
      return "webhook=\"" + std::to_string(h.index) + "\",origin=\"" + label_value(h.origin) + "\"";
    };
    w.family("vapipe_webhook_messages_total", "counter",
             "Messages for each of publish.webhooks, by what became of them: delivered (2xx), refused (another 4xx "
             "or a redirect: dropped), dropped (its queue was full), undelivered (waiting when publish stopped), "
             "cooled_down (a segment held back by its cooldown_s).");
    for (const WebhookStats& h : m.webhooks) {
      for (const auto& [outcome, n] : {std::pair{"delivered", h.delivered}, std::pair{"refused", h.refused},
                                       std::pair{"dropped", h.dropped}, std::pair{"undelivered", h.undelivered},
                                       std::pair{"cooled_down", h.cooled_down}}) {
        w.sample("vapipe_webhook_messages_total", hook(h) + ",outcome=\"" + outcome + "\"", std::to_string(n));
      }
    }
    w.family("vapipe_webhook_retries_total", "counter",
             "Tries to deliver to the webhook that failed (no connection, a timeout, 5xx, 408, 429) and are made again.");
    for (const WebhookStats& h : m.webhooks) w.sample("vapipe_webhook_retries_total", hook(h), std::to_string(h.retries));
    w.family("vapipe_webhook_queued", "gauge", "Messages waiting to be delivered to the webhook.");
    for (const WebhookStats& h : m.webhooks) w.sample("vapipe_webhook_queued", hook(h), std::to_string(h.queued));
    w.family("vapipe_webhook_failing", "gauge",
             "1 while the webhook's latest try failed and is to be made again (the receiver down or failing).");
    for (const WebhookStats& h : m.webhooks) w.sample("vapipe_webhook_failing", hook(h), h.failing ? "1" : "0");
    w.family("vapipe_webhook_last_delivered_time_seconds", "gauge",
             "When the webhook last took a message, seconds since the Unix epoch (0: none yet).");
    for (const WebhookStats& h : m.webhooks) {
      w.sample("vapipe_webhook_last_delivered_time_seconds", hook(h), number(h.last_delivered_unix_s));
    }
  }
  if (!m.mqtt.empty()) {
    // A broker that is down shows as vapipe_mqtt_connected 0 and its queue growing; an alert on
    // increase(vapipe_mqtt_messages_total{outcome=~"refused|dropped|lost"}[1h]) > 0 catches lost alerts.
    auto broker = [](const MqttStats& b) {
      return "mqtt=\"" + std::to_string(b.index) + "\",broker=\"" + label_value(b.broker) + "\"";
    };
    w.family("vapipe_mqtt_messages_total", "counter",
             "Messages for each of publish.mqtt, by what became of them: delivered (acknowledged by the broker; qos 0: "
             "written), refused (too large: dropped), dropped (its queue was full), lost (qos 0, on a connection that "
             "broke), undelivered (waiting when publish stopped), cooled_down (a segment held back by its cooldown_s).");
    for (const MqttStats& b : m.mqtt) {
      for (const auto& [outcome, n] : {std::pair{"delivered", b.delivered}, std::pair{"refused", b.refused},
                                       std::pair{"dropped", b.dropped}, std::pair{"lost", b.lost},
                                       std::pair{"undelivered", b.undelivered}, std::pair{"cooled_down", b.cooled_down}}) {
        w.sample("vapipe_mqtt_messages_total", broker(b) + ",outcome=\"" + outcome + "\"", std::to_string(n));
      }
    }
    w.family("vapipe_mqtt_connected", "gauge", "1 while the broker has accepted the connection, 0 while it cannot be reached.");
    for (const MqttStats& b : m.mqtt) w.sample("vapipe_mqtt_connected", broker(b), b.connected ? "1" : "0");
    w.family("vapipe_mqtt_connections_total", "counter",
             "Connections the broker accepted: more than one is a connection that was lost and made again.");
    for (const MqttStats& b : m.mqtt) w.sample("vapipe_mqtt_connections_total", broker(b), std::to_string(b.connections));
    w.family("vapipe_mqtt_queued", "gauge", "Messages waiting for the broker, those sent and not yet acknowledged included.");
    for (const MqttStats& b : m.mqtt) w.sample("vapipe_mqtt_queued", broker(b), std::to_string(b.queued));
    w.family("vapipe_mqtt_last_delivered_time_seconds", "gauge",
             "When the broker last acknowledged a message, seconds since the Unix epoch (0: none yet).");
    for (const MqttStats& b : m.mqtt) {
      w.sample("vapipe_mqtt_last_delivered_time_seconds", broker(b), number(b.last_delivered_unix_s));
    }
  }
  if (!m.redis.empty()) {
    // A server that is down shows as vapipe_redis_connected 0 and its queue growing.
    auto server = [](const RedisStats& r) {
      return "redis=\"" + std::to_string(r.index) + "\",server=\"" + label_value(r.server) + "\"";
    };
    w.family("vapipe_redis_messages_total", "counter",
             "Messages for each of publish.redis, by what became of them: delivered (added to its stream), refused (the "
             "server answered an error that would not pass: dropped), dropped (its queue was full), undelivered "
             "(waiting when publish stopped), cooled_down (a segment held back by its cooldown_s).");
    for (const RedisStats& r : m.redis) {
      for (const auto& [outcome, n] : {std::pair{"delivered", r.delivered}, std::pair{"refused", r.refused},
                                       std::pair{"dropped", r.dropped}, std::pair{"undelivered", r.undelivered},
                                       std::pair{"cooled_down", r.cooled_down}}) {
        w.sample("vapipe_redis_messages_total", server(r) + ",outcome=\"" + outcome + "\"", std::to_string(n));
      }
    }
    w.family("vapipe_redis_connected", "gauge", "1 while connected to the server, 0 while it cannot be reached.");
    for (const RedisStats& r : m.redis) w.sample("vapipe_redis_connected", server(r), r.connected ? "1" : "0");
    w.family("vapipe_redis_connections_total", "counter",
             "Connections made: more than one is a connection that was lost and made again.");
    for (const RedisStats& r : m.redis) w.sample("vapipe_redis_connections_total", server(r), std::to_string(r.connections));
    w.family("vapipe_redis_queued", "gauge", "Messages waiting for the server, those sent and not yet answered included.");
    for (const RedisStats& r : m.redis) w.sample("vapipe_redis_queued", server(r), std::to_string(r.queued));
    w.family("vapipe_redis_last_delivered_time_seconds", "gauge",
             "When the server last added a message to its stream, seconds since the Unix epoch (0: none yet).");
    for (const RedisStats& r : m.redis) {
      w.sample("vapipe_redis_last_delivered_time_seconds", server(r), number(r.last_delivered_unix_s));
    }
    // redis+sentinel only: a failover is followed as it happens only while a sentinel is watched.
    bool said_watch = false;
    for (const RedisStats& r : m.redis) {
      if (r.server.find("+sentinel://") == std::string::npos) continue;
      if (!said_watch) {
        w.family("vapipe_redis_sentinel_watched", "gauge",
                 "redis+sentinel: 1 while a sentinel's failover events are followed, 0 while none can be subscribed "
                 "to (a failover is then found only once the old master stops taking messages).");
        said_watch = true;
      }
      w.sample("vapipe_redis_sentinel_watched", server(r), r.sentinel_watched.empty() ? "0" : "1");
    }
  }
  if (!m.kafka.empty()) {
    // A cluster that is down shows as vapipe_kafka_connected 0 and its queue growing.
    auto cluster = [](const KafkaStats& k) {
      return "kafka=\"" + std::to_string(k.index) + "\",cluster=\"" + label_value(k.cluster) + "\"";
    };
    w.family("vapipe_kafka_messages_total", "counter",
             "Messages for each of publish.kafka, by what became of them: delivered (acknowledged by the cluster), "
             "refused (refused for good: dropped), dropped (its queue was full), undelivered (waiting when publish "
             "stopped), cooled_down (a segment held back by its cooldown_s).");
    for (const KafkaStats& k : m.kafka) {
      for (const auto& [outcome, n] : {std::pair{"delivered", k.delivered}, std::pair{"refused", k.refused},
                                       std::pair{"dropped", k.dropped}, std::pair{"undelivered", k.undelivered},
                                       std::pair{"cooled_down", k.cooled_down}}) {
        w.sample("vapipe_kafka_messages_total", cluster(k) + ",outcome=\"" + outcome + "\"", std::to_string(n));
      }
    }
    w.family("vapipe_kafka_connected", "gauge", "1 while the cluster answers, 0 while none of its brokers can be reached.");
    for (const KafkaStats& k : m.kafka) w.sample("vapipe_kafka_connected", cluster(k), k.connected ? "1" : "0");
    w.family("vapipe_kafka_queued", "gauge",
             "Messages waiting for the cluster, those handed to the producer and not yet acknowledged included.");
    for (const KafkaStats& k : m.kafka) w.sample("vapipe_kafka_queued", cluster(k), std::to_string(k.queued));
    w.family("vapipe_kafka_last_delivered_time_seconds", "gauge",
             "When the cluster last acknowledged a message, seconds since the Unix epoch (0: none yet).");
    for (const KafkaStats& k : m.kafka) {
      w.sample("vapipe_kafka_last_delivered_time_seconds", cluster(k), number(k.last_delivered_unix_s));
    }
  }
  if (!m.watched_folders.empty()) {
    // A recorder that stopped writing shows as its folder's last file growing old:
    // time() - vapipe_watched_folder_last_file_time_seconds > 3600.
    const std::vector<std::tuple<const char*, const char*, const char*, std::function<std::string(const FolderWatchStatus&)>>>
        families = {
            {"vapipe_watched_folder_looks_total", "counter", "Looks at the watched folder (streams[].watch_s).",
             [](const FolderWatchStatus& f) { return std::to_string(f.looks); }},
            {"vapipe_watched_folder_files_total", "counter", "Files the looks at the folder added to the job.",
             [](const FolderWatchStatus& f) { return std::to_string(f.files_added); }},
            {"vapipe_watched_folder_files_settling", "gauge",
             "Files of the folder modified within its settle_s at the last look: being written, taken once settled.",
             [](const FolderWatchStatus& f) { return std::to_string(f.files_settling); }},
            {"vapipe_watched_folder_last_file_time_seconds", "gauge",
             "When a file last joined the job from the folder, seconds since the Unix epoch (the job's start counts).",
             [](const FolderWatchStatus& f) { return number(f.last_file_unix_s); }},
            {"vapipe_watched_folder_last_look_time_seconds", "gauge",
             "When the folder was last looked at, seconds since the Unix epoch (0: not yet).",
             [](const FolderWatchStatus& f) { return number(f.last_look_unix_s); }},
            {"vapipe_watched_folder_last_look_duration_seconds", "gauge", "How long the last look at the folder took.",
             [](const FolderWatchStatus& f) { return number(f.last_look_s); }},
            {"vapipe_watched_folder_look_running_seconds", "gauge",
             "How long the look at the folder running now has run (0: none running); a share that does not answer "
             "shows as this growing.",
             [&m](const FolderWatchStatus& f) {
               return number(f.looking_since_unix_s > 0 ? std::max(0.0, m.now_unix_s - f.looking_since_unix_s) : 0.0);
             }},
            {"vapipe_watched_folder_readable", "gauge",
             "1 when the last look could list the folder, 0 when it could not (unmounted, removed, no permission).",
             [](const FolderWatchStatus& f) { return std::string(f.error.empty() ? "1" : "0"); }},
        };
    for (const auto& [name, type, help, value] : families) {
      w.family(name, type, help);
      for (const FolderWatchStatus& f : m.watched_folders) w.sample(name, "folder=\"" + label_value(f.pattern) + "\"", value(f));
    }
  }
  if (m.mode == "live") {
    w.family("vapipe_reload_running_seconds", "gauge",
             "How long the re-read of the config that SIGHUP (or POST /-/reload) asked for has run (0: none "
             "running); a config on a share that does not answer shows as this growing.");
    w.sample("vapipe_reload_running_seconds", "",
             number(m.reload_running_since_unix_s > 0 ? std::max(0.0, m.now_unix_s - m.reload_running_since_unix_s) : 0.0));
    // As Prometheus's own (prometheus_config_last_reload_successful): an alert on a refused reload.
    const bool last_taken = !m.last_reload || m.last_reload->taken;
    w.family("vapipe_config_last_reload_successful", "gauge",
             "Whether the last reload (SIGHUP, POST /-/reload, vapipe reload) was taken (1; also before the first) "
             "or refused (0: nothing changed; /healthz's last_reload says why).");
    w.sample("vapipe_config_last_reload_successful", "", last_taken ? "1" : "0");
    w.family("vapipe_config_last_reload_success_timestamp_seconds", "gauge",
             "When the last reload that was taken ended, seconds since the Unix epoch (the job's start before any).");
    w.sample("vapipe_config_last_reload_success_timestamp_seconds", "",
             number(m.last_reload && m.last_reload->last_taken_unix_s > 0 ? m.last_reload->last_taken_unix_s
                                                                        : m.start_unix_s));
    w.family("vapipe_config_reloads_total", "counter", "Reloads of the job's config, by outcome: taken or refused.");
    w.sample("vapipe_config_reloads_total", "result=\"taken\"",
             std::to_string(m.last_reload ? m.last_reload->taken_total : 0));
    w.sample("vapipe_config_reloads_total", "result=\"refused\"",
             std::to_string(m.last_reload ? m.last_reload->refused_total : 0));
  }
  w.per_stream(m, "vapipe_last_result_time_seconds", "gauge",
               "When the stream's latest result was published, seconds since the Unix epoch (0: none yet).",
               [](const StreamMetrics& s) { return number(s.last_result_unix_s); });
  return std::move(w).text();
}

namespace {
// Each lane's infer: its model, how its reloads went (a model being loaded, the last one that could not be
// used), from its stats snapshot.
nlohmann::json models_json(const JobMetrics& m) {
  nlohmann::json models = nlohmann::json::array();
  for (const StageStatsSnapshot& s : m.stages) {
    if (s.stage != "infer") continue;
    nlohmann::json one{{"lane", s.lane}};
    for (const auto& [k, v] : s.facts) {
      if (k != "config_copy") one[k] = v;  // (`vapipe reload`'s, read from the stats file)
    }
    if (!one.contains("model")) continue;
    for (const auto& [k, v] : s.counters) {
      if (k == "model_reloads" || k == "model_reload_failures") one[k] = static_cast<uint64_t>(v);
    }
    for (const char* key : {"loading", "last_reload_error"}) {
      if (!one.contains(key)) one[key] = nullptr;
    }
    models.push_back(std::move(one));
  }
  return models;
}
}  // namespace

nlohmann::json health_json(const JobMetrics& m) {
  nlohmann::json streams = nlohmann::json::object();
  for (const StreamMetrics& s : m.streams) {
    if (!m.listed(s)) continue;
    nlohmann::json j{{"state", s.state},     {"results", s.results},       {"gaps", s.gaps},
                     {"dropped", s.dropped}, {"reconnects", s.reconnects}, {"restarts", s.restarts},
                     {"comebacks", s.comebacks}, {"ts_continuity_errors", s.continuity_errors},
                     {"undecodable_frames", s.undecoded}, {"damaged_frames", s.damaged}, {"rtp_packets_lost", s.rtp_lost},
                     {"rtp_packets_received", s.rtp_received}};
    j["last_result_age_s"] = s.last_result_unix_s > 0 ? nlohmann::json(m.now_unix_s - s.last_result_unix_s) : nlohmann::json();
    if (m.segments) {
      nlohmann::json open = nlohmann::json::array();
      for (const StreamMetrics::OpenSegment& g : s.open_segments) {
        nlohmann::json segment{{"label", g.label}, {"for_s", m.now_unix_s - g.since_unix_s}};
        if (m.segment_pictures) {
          segment["picture_url_path"] = g.picture_url_path.empty() ? nlohmann::json() : nlohmann::json(g.picture_url_path);
        }
        open.push_back(std::move(segment));
      }
      j["segments"] = std::move(open);
    }
    j["progress"] = s.media_s > 0 ? nlohmann::json(s.ended ? 1.0 : std::clamp(s.position_s / s.media_s, 0.0, 1.0))
                                  : nlohmann::json();
    streams[s.id] = std::move(j);
  }
  // How many streams are in each state, for a dashboard or an alert that needs no parsing per stream.
  nlohmann::json states = nlohmann::json::object();
  for (const std::string& state : stream_states()) states[state] = 0;
  for (const StreamMetrics& s : m.streams) states[s.state] = states.value(s.state, 0) + 1;
  const JobProgress p = job_progress(m);
  nlohmann::json progress = p.ratio < 0 ? nlohmann::json()
                                        : nlohmann::json{{"ratio", p.ratio},
                                                         {"media_s", p.media_s},
                                                         {"done_s", p.done_s},
                                                         {"streams_timed", p.streams_timed},
                                                         {"streams_estimated", p.streams_estimated},
                                                         {"eta_s", p.eta_s >= 0 ? nlohmann::json(p.eta_s) : nlohmann::json()}};
  nlohmann::json results_file;  // null without publish.jsonl_path
  if (m.results_file) {
    const ResultsFileHealth& f = *m.results_file;
    results_file = {{"path", f.path},
                    {"writable", f.writable},
                    {"error", f.writable ? nlohmann::json() : nlohmann::json(f.error)},
                    {"refused_for_s", f.writable ? nlohmann::json() : nlohmann::json(m.now_unix_s - f.refused_since_unix_s)},
                    {"lines_waiting", f.lines_waiting},
                    {"lines_lost", f.lines_lost}};
  }
  nlohmann::json webhooks = nlohmann::json::array();
  for (const WebhookStats& h : m.webhooks) {
    webhooks.push_back({{"index", h.index},
                        {"origin", h.origin},
                        {"delivered", h.delivered},
                        {"refused", h.refused},
                        {"dropped", h.dropped},
                        {"undelivered", h.undelivered},
                        {"cooled_down", h.cooled_down},
                        {"retries", h.retries},
                        {"queued", h.queued},
                        {"failing_for_s", h.failing ? nlohmann::json(std::max(0.0, m.now_unix_s - h.failing_since_unix_s))
                                                    : nlohmann::json()},
                        {"last_delivered_age_s", h.last_delivered_unix_s > 0
                                                     ? nlohmann::json(std::max(0.0, m.now_unix_s - h.last_delivered_unix_s))
                                                     : nlohmann::json()},
                        {"last_error", h.last_error.empty() ? nlohmann::json() : nlohmann::json(h.last_error)}});
  }
  nlohmann::json mqtt = nlohmann::json::array();
  for (const MqttStats& b : m.mqtt) {
    mqtt.push_back({{"index", b.index},
                    {"broker", b.broker},
                    {"connected", b.connected},
                    {"delivered", b.delivered},
                    {"refused", b.refused},
                    {"dropped", b.dropped},
                    {"lost", b.lost},
                    {"undelivered", b.undelivered},
                    {"cooled_down", b.cooled_down},
                    {"connections", b.connections},
                    {"queued", b.queued},
                    {"disconnected_for_s", !b.connected && b.disconnected_since_unix_s > 0
                                               ? nlohmann::json(std::max(0.0, m.now_unix_s - b.disconnected_since_unix_s))
                                               : nlohmann::json()},
                    {"last_delivered_age_s", b.last_delivered_unix_s > 0
                                                 ? nlohmann::json(std::max(0.0, m.now_unix_s - b.last_delivered_unix_s))
                                                 : nlohmann::json()},
                    {"last_error", b.last_error.empty() ? nlohmann::json() : nlohmann::json(b.last_error)}});
  }
  nlohmann::json redis = nlohmann::json::array();
  for (const RedisStats& r : m.redis) {
    redis.push_back({{"index", r.index},
                     {"server", r.server},
                     {"sentinel_watched", r.sentinel_watched.empty() ? nlohmann::json() : nlohmann::json(r.sentinel_watched)},
                     {"sentinel_watch_error",
                      r.sentinel_watch_error.empty() ? nlohmann::json() : nlohmann::json(r.sentinel_watch_error)},
                     {"node", r.node.empty() ? nlohmann::json() : nlohmann::json(r.node)},
                     {"connected", r.connected},
                     {"delivered", r.delivered},
                     {"refused", r.refused},
                     {"dropped", r.dropped},
                     {"undelivered", r.undelivered},
                     {"cooled_down", r.cooled_down},
                     {"connections", r.connections},
                     {"queued", r.queued},
                     {"disconnected_for_s", !r.connected && r.disconnected_since_unix_s > 0
                                                ? nlohmann::json(std::max(0.0, m.now_unix_s - r.disconnected_since_unix_s))
                                                : nlohmann::json()},
                     {"last_delivered_age_s", r.last_delivered_unix_s > 0
                                                  ? nlohmann::json(std::max(0.0, m.now_unix_s - r.last_delivered_unix_s))
                                                  : nlohmann::json()},
                     {"last_error", r.last_error.empty() ? nlohmann::json() : nlohmann::json(r.last_error)}});
  }
  nlohmann::json kafka = nlohmann::json::array();
  for (const KafkaStats& k : m.kafka) {
    kafka.push_back({{"index", k.index},
                     {"cluster", k.cluster},
                     {"connected", k.connected},
                     {"delivered", k.delivered},
                     {"refused", k.refused},
                     {"dropped", k.dropped},
                     {"undelivered", k.undelivered},
                     {"cooled_down", k.cooled_down},
                     {"producers", k.producers},
                     {"queued", k.queued},
                     {"disconnected_for_s", !k.connected && k.disconnected_since_unix_s > 0
                                                ? nlohmann::json(std::max(0.0, m.now_unix_s - k.disconnected_since_unix_s))
                                                : nlohmann::json()},
                     {"last_delivered_age_s", k.last_delivered_unix_s > 0
                                                  ? nlohmann::json(std::max(0.0, m.now_unix_s - k.last_delivered_unix_s))
                                                  : nlohmann::json()},
                     {"last_error", k.last_error.empty() ? nlohmann::json() : nlohmann::json(k.last_error)}});
  }
  nlohmann::json watched;  // null for a job that watches no folder
  if (m.watches_folders) {
    watched = nlohmann::json::array();
    for (const FolderWatchStatus& f : m.watched_folders) {
      auto age = [&](double unix_s) { return unix_s > 0 ? nlohmann::json(m.now_unix_s - unix_s) : nlohmann::json(); };
      watched.push_back({{"folder", f.pattern},
                         {"every_s", f.watch_s},
                         {"looks", f.looks},
                         {"files_added", f.files_added},
                         {"files_settling", f.files_settling},
                         {"last_file_age_s", age(f.last_file_unix_s)},
                         {"last_look_age_s", age(f.last_look_unix_s)},
                         {"last_look_s", f.last_look_s},
                         {"look_running_s", f.looking_since_unix_s > 0 ? age(f.looking_since_unix_s) : nlohmann::json()},
                         {"error", f.error.empty() ? nlohmann::json() : nlohmann::json(f.error)}});
    }
  }
  nlohmann::json stalled = nlohmann::json::array();
  for (const StalledStage& st : stalled_stages(m)) {
    stalled.push_back({{"stage", st.stage}, {"lane", st.lane}, {"for_s", st.for_s}, {"why", st.why}});
  }
  const char* status = stalled.empty() ? "ok" : "stalled";
  return {{"service", "vapipe"}, {"status", status}, {"stalled", std::move(stalled)}, {"job", m.job}, {"mode", m.mode},
          {"uptime_s", m.now_monotonic_s > 0 && m.start_monotonic_s > 0 ? m.now_monotonic_s - m.start_monotonic_s
                                                                        : m.now_unix_s - m.start_unix_s},
          {"job_restarts", m.job_restarts},
          {"stream_states", std::move(states)}, {"progress", std::move(progress)},
          {"results_file", std::move(results_file)}, {"watched_folders", std::move(watched)},
          {"webhooks", std::move(webhooks)}, {"mqtt", std::move(mqtt)}, {"redis", std::move(redis)},
          {"kafka", std::move(kafka)}, {"models", models_json(m)},
          {"reload_running_s", m.reload_running_since_unix_s > 0
                                   ? nlohmann::json(std::max(0.0, m.now_unix_s - m.reload_running_since_unix_s))
                                   : nlohmann::json()},
          {"last_reload", m.last_reload ? nlohmann::json{{"taken", m.last_reload->taken},
                                                         {"age_s", std::max(0.0, m.now_unix_s - m.last_reload->at_unix_s)},
                                                         {"message", m.last_reload->message},
                                                         {"taken_total", m.last_reload->taken_total},
                                                         {"refused_total", m.last_reload->refused_total}}
                                        : nlohmann::json()},
          {"streams", std::move(streams)}};
}

}  // namespace vapipe
