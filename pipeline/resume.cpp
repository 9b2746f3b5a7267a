#include "pipeline/resume.h"

#include "pipeline/file_identity.h"
#include "pipeline/json_fields.h"
#include "pipeline/message.h"

#include <cstdint>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

namespace vapipe {

bool ResumePlan::complete() const {
  for (const auto* group : {&streams, &departed}) {
    for (const auto& [id, s] : *group) {
      if (s.ended.empty()) return false;
    }
  }
  return true;
}

namespace {

nlohmann::json progress_json(const StreamProgress& s) {
  return {{"results", s.results}, {"frame_errors", s.frame_errors}, {"damaged", s.damaged}, {"started", s.started}, {"ended", s.ended},
          {"message", s.message}, {"last_pts_ms", s.last_pts_ms}, {"labels", s.labels}, {"file_bytes", s.file_bytes}, {"uri", s.uri},
          {"file_head", s.file_head}, {"duration_ms", s.duration_ms}, {"pts_media_times", s.pts_media_times}};
}

StreamProgress progress_from_json(const nlohmann::json& s) {
  StreamProgress p;
  p.results = s.value("results", uint64_t{0});
  p.frame_errors = s.value("frame_errors", uint64_t{0});
  p.damaged = s.value("damaged", uint64_t{0});
  p.started = s.value("started", false);
  p.ended = s.value("ended", "");
  p.message = s.value("message", "");
  p.last_pts_ms = s.value("last_pts_ms", -1.0);
  p.file_bytes = s.value("file_bytes", int64_t{-1});
  p.uri = s.value("uri", std::string());
  p.file_head = s.value("file_head", std::string());
  p.duration_ms = s.value("duration_ms", -1.0);
  p.pts_media_times = s.value("pts_media_times", false);
  if (s.contains("labels") && s["labels"].is_object()) {
    for (const auto& [label, n] : s["labels"].items()) p.labels[label] = n.get<uint64_t>();
  }
  return p;
}

}  // namespace

Result<ResumePlan> read_resume_plan(const Config& config) {
  const std::string& path = config.publish.jsonl_path;
  ResumePlan plan;
  for (const StreamConfig& s : config.streams) plan.streams[s.id] = StreamProgress{};
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (!std::filesystem::exists(path)) return plan;
    return Unavailable("publish.jsonl_path " + path + ": cannot be read");
  }
  std::string line;
  uint64_t offset = 0, number = 0;
  bool config_stream_in_file = false;
  // The segments a stop ended: a stream's end ends its open segments just before its end event, so a
  // stopped stream's `ended` lines come right before its "stopped" eos. They are no segment's end (the
  // resumed run goes on with it, publish having read its label run from the file again), and are cut
  // with the eos: the lines in a row just read that are one stream's `ended`.
  struct EndedInARow {
    std::string id;
    uint64_t from_offset = 0;
    uint64_t lines = 0;
  } ended_in_a_row;
  while (std::getline(in, line)) {
    ++number;
    const bool complete_line = !in.eof();  // getline stopped at a newline, not at the end of the file
    const std::string where = path + ":" + std::to_string(number);
    auto cut = [&](std::string reason) {
      plan.cut_reason = where + ": " + reason;
      // Complete lines after the cut, for the log.
      if (complete_line) ++plan.cut_lines;
      while (std::getline(in, line)) {
        if (!in.eof()) ++plan.cut_lines;
      }
    };
    nlohmann::json j = complete_line ? nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false)
                                     : nlohmann::json(nlohmann::json::value_t::discarded);
    if (j.is_discarded() || !j.is_object() || !j.contains("topic") || !j["topic"].is_string() ||
        !j.contains("payload") || !j["payload"].is_object()) {
      cut(complete_line ? "not a JSON line of this job" : "an incomplete last line");
      break;
    }
    const std::string topic = j["topic"].get<std::string>();
    const nlohmann::json& payload = j["payload"];
    if (topic == "job/summary") {
      if (plan.complete()) {  // the job finished: the file is whole
        plan.keep_bytes = offset + line.size() + 1;
        ++plan.kept_lines;
        plan.summarized = true;
        plan.summary_json = payload.dump(2) + "\n";
        break;
      }
      // Streams the file has never heard of: the config gained them (a glob over a folder that grew)
      // after a run that ended; they run now, and a new summary follows them.
      bool stopped_midway = false, new_streams = false;
      for (const auto& [id, st] : plan.streams) {
        const bool seen = st.started || st.results > 0 || !st.ended.empty();
        stopped_midway = stopped_midway || (seen && st.ended.empty());
        new_streams = new_streams || !seen;
      }
      cut(stopped_midway || !new_streams ? "the summary of a run that was stopped"
                                         : "the summary of a run that ended before the config had the streams "
                                           "that are new in it now (it is written again after them)");
      break;
    }
    const bool result = topic.rfind("results/", 0) == 0;
    const bool event = topic.rfind("events/", 0) == 0;
    if (topic.rfind("segments/", 0) == 0 && text_field(payload, "event") == "ended") {
      const std::string id = topic.substr(topic.find('/') + 1);
      if (ended_in_a_row.lines == 0 || ended_in_a_row.id != id) ended_in_a_row = {id, offset, 0};
      ++ended_in_a_row.lines;
    } else if (!(event && text_field(payload, "event") == "eos" && text_field(payload, "message") == kStoppedReason)) {
      ended_in_a_row = {};
    }
    if (result || event) {
      const std::string id = topic.substr(topic.find('/') + 1);
      auto it = plan.streams.find(id);
      StreamProgress& s = it != plan.streams.end() ? it->second : plan.departed[id];
      if (it != plan.streams.end()) config_stream_in_file = true;
      if (result) {
        const std::optional<uint64_t> frame = count_field(payload, "seq");
        if (!frame) {
          cut("a result without its frame number (seq)");  // not a line vapipe wrote: a damaged file
          break;
        }
        const uint64_t seq = *frame;
        if (seq != s.results) {
          return FailedPrecondition(where + ": stream '" + id + "': result for frame " + std::to_string(seq) +
                                    " where frame " + std::to_string(s.results) +
                                    " was due: this file cannot be resumed exactly once (run the job afresh, "
                                    "without --resume)");
        }
        // A seek past the last result is exact only over timestamps that rose strictly from frame 0.
        const double pts = payload.contains("pts_ms") && payload["pts_ms"].is_number() ? payload["pts_ms"].get<double>() : -1;
        s.pts_rising = s.pts_rising && pts >= 0 && (s.results == 0 || pts > s.last_pts_ms);
        s.last_pts_ms = s.pts_rising ? pts : -1;
        ++s.results;
        if (payload.contains("damaged") && payload["damaged"].is_boolean() && payload["damaged"].get<bool>()) ++s.damaged;
        if (payload.contains("error") && !payload["error"].is_null()) {
          ++s.frame_errors;
        } else if (payload.contains("label") && payload["label"].is_string()) {
          ++s.labels[payload["label"].get<std::string>()];
        }
      } else {
        // Fields of another type than vapipe writes (a damaged line) read as missing, never throw.
        const std::string kind = text_field(payload, "event");
        const std::string message = text_field(payload, "message");
        if (kind == "eos" && message == kStoppedReason) {
          // A file whose timestamps started over (files joined end to end): its pts_ms rose as one
          // timeline that a seek in the file does not know, so its frames are dropped by count.
          if (const std::optional<uint64_t> restarts = count_field(payload, "timeline_restarts"); restarts && *restarts > 0) {
            s.pts_rising = false;
            s.last_pts_ms = -1;
          }
          cut("stream '" + id + "' was stopped there");
          if (ended_in_a_row.lines > 0 && ended_in_a_row.id == id) {  // its segments' ends, of the stop
            plan.keep_bytes = ended_in_a_row.from_offset;
            plan.kept_lines -= ended_in_a_row.lines;
            plan.cut_lines += ended_in_a_row.lines;
          }
          break;
        }
        if (kind == "started") {
          s.started = true;
          s.uri = text_field(payload, "uri");
          s.file_head = text_field(payload, "head_hash");
          if (payload.contains("duration_ms") && payload["duration_ms"].is_number()) {
            s.duration_ms = payload["duration_ms"].get<double>();
          }
          if (payload.contains("bytes") && payload["bytes"].is_number_integer()) {
            s.file_bytes = payload["bytes"].get<int64_t>();
            s.pts_media_times = !payload.contains("edit_list_ms");
          }
        }
        if (kind == "eos") {
          s.ended = message == kRemovedFromConfig ? "removed" : "done";
          if (payload.contains("warning") && payload["warning"].is_string()) {
            s.message = payload["warning"].get<std::string>();  // a file cut short: the summary says so again
          }
        }
        if (kind == "error") {
          s.ended = "failed";
          s.message = message;
        }
      }
    }
    offset += line.size() + 1;
    plan.keep_bytes = offset;
    ++plan.kept_lines;
  }
  if (!plan.departed.empty() && !config_stream_in_file) {
    std::string ids;
    for (const auto& [id, s] : plan.departed) ids += (ids.empty() ? "'" : ", '") + id + "'";
    return FailedPrecondition("publish.jsonl_path " + path + ": none of its streams (" + ids + ") is in the config " +
                              config.source + ": resume with the config that wrote it, or run without --resume to "
                              "write the file afresh");
  }
  return plan;
}

Status write_resume_plan(const ResumePlan& plan, const std::string& path) {
  nlohmann::json streams = nlohmann::json::object(), departed = nlohmann::json::object();
  for (const auto& [id, s] : plan.streams) streams[id] = progress_json(s);
  for (const auto& [id, s] : plan.departed) departed[id] = progress_json(s);
  const nlohmann::json j{{"keep_bytes", plan.keep_bytes}, {"kept_lines", plan.kept_lines},
                         {"cut_lines", plan.cut_lines}, {"cut_reason", plan.cut_reason}, {"streams", streams},
                         {"departed", departed}};
  std::ofstream out(path, std::ios::trunc);
  out << j.dump(1) << "\n";
  out.close();
  if (!out) return Unavailable("resume plan " + path + ": cannot be written");
  return Status::Ok();
}

Result<ResumePlan> load_resume_plan(const std::string& path) {
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!in.is_open() || j.is_discarded() || !j.is_object() || !j.contains("streams")) {
    return DataLoss("resume plan " + path + ": missing or not a plan");
  }
  ResumePlan plan;
  plan.keep_bytes = j.value("keep_bytes", uint64_t{0});
  plan.kept_lines = j.value("kept_lines", uint64_t{0});
  plan.cut_lines = j.value("cut_lines", uint64_t{0});
  plan.cut_reason = j.value("cut_reason", "");
  for (const auto& [id, s] : j["streams"].items()) plan.streams[id] = progress_from_json(s);
  if (j.contains("departed") && j["departed"].is_object()) {
    for (const auto& [id, s] : j["departed"].items()) plan.departed[id] = progress_from_json(s);
  }
  return plan;
}

Status check_resumed_file(const std::string& path, const std::string& shown, const StreamProgress& earlier,
                          std::string* note) {
  note->clear();
  if (earlier.file_bytes < 0) return Status::Ok();  // nothing said to compare with
  std::error_code ec;
  const auto now = std::filesystem::file_size(path, ec);
  if (ec) return Status::Ok();  // missing or unreadable: opening it says so
  const std::string sizes = std::to_string(earlier.file_bytes) + " bytes then, " + std::to_string(now) + " now";
  const std::string kept = "its " + std::to_string(earlier.results) +
                           " results are kept and it is not classified further: give it a new id, or run without "
                           "--resume, to classify it again";
  if (earlier.file_head.empty()) {
    if (static_cast<int64_t>(now) == earlier.file_bytes) return Status::Ok();
    return FailedPrecondition(shown + " has changed since it was classified in part (" + sizes + "): " + kept);
  }
  if (file_head_hash(path, head_bytes_then(earlier.file_bytes)) != earlier.file_head) {
    return FailedPrecondition(shown + " has changed since it was classified in part (" + sizes +
                              ", and its first bytes differ): it is another recording than the one its results are of; " +
                              kept);
  }
  if (static_cast<int64_t>(now) != earlier.file_bytes) {
    *note = shown + " has " + (static_cast<int64_t>(now) > earlier.file_bytes ? "grown" : "been cut") +
            " since it was classified in part (" + sizes + "), its beginning the same: it goes on";
  }
  return Status::Ok();
}

Result<std::optional<ResumePlan>> resume_plan_from_environment() {
  const char* path = std::getenv(kResumePlanEnv);
  if (!path || !*path) return std::optional<ResumePlan>();
  VAPIPE_ASSIGN_OR_RETURN(ResumePlan plan, load_resume_plan(path));
  return std::optional<ResumePlan>(std::move(plan));
}

}  // namespace vapipe
