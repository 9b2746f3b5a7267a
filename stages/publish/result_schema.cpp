#include "stages/publish/result_schema.h"

#include <cstdint>

#include "pipeline/utf8.h"

namespace vapipe {

std::string result_topic(const std::string& stream_id) { return "results/" + stream_id; }
std::string event_topic(const std::string& stream_id) { return "events/" + stream_id; }
std::string segment_topic(const std::string& stream_id) { return "segments/" + stream_id; }

namespace {
double ms_between(int64_t from_ns, int64_t to_ns) {
  if (from_ns <= 0 || to_ns <= 0) return 0.0;
  return static_cast<double>(to_ns - from_ns) / 1e6;
}
}  // namespace

nlohmann::json result_json(const Message& m, int64_t publish_ns) {
  const Envelope& e = m.env;
  nlohmann::json j;
  j["schema"] = "vapipe.result";
  j["schema_version"] = kSchemaVersion;
  j["stream_id"] = e.stream_id;
  j["seq"] = e.seq;
  j["pts_ms"] = e.pts_ns >= 0 ? nlohmann::json(static_cast<double>(e.pts_ns) / 1e6) : nlohmann::json(nullptr);
  j["capture_unix_ms"] = static_cast<double>(e.capture_ns) / 1e6;
  j["camera_unix_ms"] = e.camera_ns >= 0 ? nlohmann::json(static_cast<double>(e.camera_ns) / 1e6) : nlohmann::json();
  j["damaged"] = e.damaged;
  j["model"] = escape_invalid_utf8(m.prediction.model);
  const bool ok = m.prediction.error.empty() && m.error.empty() && !m.prediction.top_k.empty();
  if (ok) {
    const ClassScore& best = m.prediction.top_k.front();
    j["label"] = best.label;
    j["class_id"] = best.class_id;
    j["score"] = best.score;
    nlohmann::json top = nlohmann::json::array();
    for (const ClassScore& c : m.prediction.top_k) {
      top.push_back({{"label", c.label}, {"class_id", c.class_id}, {"score", c.score}});
    }
    j["top_k"] = std::move(top);
    j["error"] = nullptr;
  } else {
    j["label"] = nullptr;
    j["class_id"] = nullptr;
    j["score"] = nullptr;
    j["top_k"] = nlohmann::json::array();
    j["error"] = escape_invalid_utf8(!m.prediction.error.empty() ? m.prediction.error : m.error);
  }
  auto at = [&](StageKind k) { return e.entry(k); };
  j["latency_ms"] = {
      {"total", ms_between(e.capture_ns, publish_ns)},
      {"ingest", ms_between(e.capture_ns, at(StageKind::kPreprocess))},
      {"preprocess", ms_between(at(StageKind::kPreprocess), at(StageKind::kBatch))},
      {"batch", ms_between(at(StageKind::kBatch), at(StageKind::kInfer))},
      {"infer", ms_between(at(StageKind::kInfer), at(StageKind::kPublish))},
      {"publish", ms_between(at(StageKind::kPublish), publish_ns)},
  };
  return j;
}

nlohmann::json event_json(const Message& m, int64_t publish_ns) {
  nlohmann::json j;
  j["schema"] = "vapipe.event";
  j["schema_version"] = kSchemaVersion;
  j["stream_id"] = m.env.stream_id;
  switch (m.kind) {
    case MessageKind::kStreamStart: j["event"] = "started"; break;
    case MessageKind::kStreamEnd: j["event"] = "eos"; break;
    case MessageKind::kStreamReconnecting: j["event"] = "reconnecting"; break;
    case MessageKind::kStreamResumed: j["event"] = "resumed"; break;
    case MessageKind::kStreamChanged: j["event"] = "changed"; break;
    default: j["event"] = "error"; break;
  }
  // A file's name is whatever bytes its file system holds (Latin-1 from an old archive): it reaches
  // error messages as it is.
  j["uri"] = escape_invalid_utf8(m.event.uri);
  j["message"] = escape_invalid_utf8(m.event.message);
  j["frames"] = m.event.frames;
  j["dropped"] = m.event.dropped;
  if (m.kind == MessageKind::kStreamReconnecting || m.kind == MessageKind::kStreamResumed) {
    j["attempt"] = m.event.attempt;
  }
  if (m.kind == MessageKind::kStreamStart) {
    j["duration_ms"] = m.event.duration_ns > 0 ? nlohmann::json(static_cast<double>(m.event.duration_ns) / 1e6)
                                               : nlohmann::json();
    if (m.event.file_bytes >= 0) j["bytes"] = m.event.file_bytes;
    if (!m.event.file_head.empty()) j["head_hash"] = m.event.file_head;
    if (m.event.edit_list_ns != StreamEvent::kNotSaid) j["edit_list_ms"] = static_cast<double>(m.event.edit_list_ns) / 1e6;
  }
  if (m.kind == MessageKind::kStreamChanged) {
    // Both, whatever changed: what its frames are from now on (`vapipe segments --frames` shows it).
    j["roi"] = m.event.roi;
    j["turn"] = m.event.turn.empty() ? nlohmann::json() : nlohmann::json(m.event.turn);
  }
  if (m.kind == MessageKind::kStreamEnd) {
    j["warning"] = m.event.warning.empty() ? nlohmann::json() : nlohmann::json(escape_invalid_utf8(m.event.warning));
    // A file's parts joined end to end: its pts_ms go on as one timeline, which seeking does not know.
    j["timeline_restarts"] = m.event.timeline_restarts;
    j["timeline_restart_ms"] = m.event.timeline_restart_ns >= 0
                                   ? nlohmann::json(static_cast<double>(m.event.timeline_restart_ns) / 1e6)
                                   : nlohmann::json();
  }
  j["time_unix_ms"] = static_cast<double>(publish_ns) / 1e6;
  return j;
}

std::string json_text(const nlohmann::json& payload, int indent) {
  return payload.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace vapipe
