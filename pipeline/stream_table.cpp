#include "pipeline/stream_table.h"

#include <cstdint>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "pipeline/atomic_file.h"
#include "pipeline/config_sections.h"
#include "pipeline/stream_uri.h"

namespace vapipe {

size_t StreamTable::live_streams() const {
  size_t n = 0;
  for (const StreamTableEntry& e : entries) n += !e.removed;
  return n;
}

std::string stream_table_path(const JobLayout& layout) { return layout.run_dir + "/streams.json"; }

StreamTableEntry table_entry_of(const StreamConfig& s, uint32_t index, uint32_t lane) {
  return StreamTableEntry{index,  s.id,     s.uri,  lane,  false,      s.max_fps, s.roi, s.keyframes_only,
                          s.rtsp_latency_ms, s.source, s.turn, s.tls, s.recorded, s.from_ns, s.to_ns, s.loop};
}

StreamTable initial_stream_table(const Config& config, const Placement& placement) {
  StreamTable t;
  t.writer_pid = ::getpid();
  for (uint32_t i = 0; i < config.streams.size(); ++i) {
    t.entries.push_back(table_entry_of(config.streams[i], i, placement.lane_of(i)));
  }
  return t;
}

Status write_stream_table(const StreamTable& table, const std::string& path) {
  nlohmann::json j;
  j["version"] = table.version;
  j["writer_pid"] = table.writer_pid;
  j["streams"] = nlohmann::json::array();
  for (const StreamTableEntry& e : table.entries) {
    j["streams"].push_back({{"index", e.index}, {"id", e.id}, {"uri", e.uri}, {"lane", e.lane}, {"removed", e.removed},
                            {"max_fps", e.max_fps}, {"roi", e.roi},
                            {"keyframes_only", e.keyframes_only ? nlohmann::json(*e.keyframes_only) : nlohmann::json()},
                            {"rtsp_latency_ms", e.rtsp_latency_ms ? nlohmann::json(*e.rtsp_latency_ms) : nlohmann::json()},
                            {"source", e.source},
                            {"turn", e.turn ? nlohmann::json(orientation_name(*e.turn)) : nlohmann::json()},
                            {"tls_ca_file", e.tls.ca_file}, {"tls_verify", e.tls.verify},
                            {"tls_fingerprint", e.tls.fingerprint},
                            {"recorded_at", e.recorded.spec}, {"recorded_unix_ns", e.recorded.unix_ns},
                            {"from_ns", e.from_ns}, {"to_ns", e.to_ns}, {"loop", e.loop}});
  }
  // Mode 0600: URIs may hold camera passwords.
  return write_file_atomically(path, j.dump(1) + "\n", 0600);
}

Result<std::optional<StreamTable>> read_stream_table(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::optional<StreamTable>();
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    StreamTable t;
    t.version = j.at("version").get<uint64_t>();
    t.writer_pid = j.at("writer_pid").get<int64_t>();
    for (const auto& s : j.at("streams")) {
      StreamTableEntry e{s.at("index").get<uint32_t>(), s.at("id").get<std::string>(), s.at("uri").get<std::string>(),
                         s.at("lane").get<uint32_t>(), s.at("removed").get<bool>(), s.value("max_fps", -1.0),
                         s.value("roi", std::array<double, 4>{0, 0, 1, 1}), std::nullopt, std::nullopt,
                         s.value("source", std::string())};
      if (s.contains("keyframes_only") && s["keyframes_only"].is_boolean()) e.keyframes_only = s["keyframes_only"].get<bool>();
      if (s.contains("rtsp_latency_ms") && s["rtsp_latency_ms"].is_number_unsigned()) {
        e.rtsp_latency_ms = s["rtsp_latency_ms"].get<uint32_t>();
      }
      if (s.contains("turn") && s["turn"].is_string()) e.turn = orientation_from_tag(s["turn"].get<std::string>());
      e.tls.ca_file = s.value("tls_ca_file", std::string());
      e.tls.verify = s.value("tls_verify", true);
      e.tls.fingerprint = s.value("tls_fingerprint", std::string());
      if (const std::string spec = s.value("recorded_at", std::string()); !spec.empty()) {
        auto recorded = parse_recorded_at(spec);
        if (!recorded.ok()) return DataLoss(path + ": stream '" + e.id + "': " + recorded.status().message());
        e.recorded = recorded.value();
        e.recorded.unix_ns = s.value("recorded_unix_ns", int64_t{-1});  // resolved from the file's name too
      }
      e.from_ns = s.value("from_ns", int64_t{0});
      e.to_ns = s.value("to_ns", int64_t{-1});
      e.loop = s.value("loop", false);
      if (e.index != t.entries.size()) return DataLoss(path + ": stream '" + e.id + "' out of order");
      t.entries.push_back(std::move(e));
    }
    return std::optional<StreamTable>(std::move(t));
  } catch (const nlohmann::json::exception& e) {
    return DataLoss(path + ": " + e.what());
  }
}

Result<std::optional<StreamTable>> read_job_stream_table(const std::string& path) {
  VAPIPE_ASSIGN_OR_RETURN(std::optional<StreamTable> table, read_stream_table(path));
  if (table && table->writer_pid != static_cast<int64_t>(::getppid())) return std::optional<StreamTable>();
  return table;
}

Result<StreamConfig> stream_config_of(const StreamTableEntry& entry) {
  StreamConfig s;
  s.id = entry.id;
  VAPIPE_ASSIGN_OR_RETURN(s.parsed, parse_stream_uri(entry.uri, ""));
  s.uri = s.parsed.uri;
  s.max_fps = entry.max_fps;
  s.roi = entry.roi;
  s.keyframes_only = entry.keyframes_only;
  s.rtsp_latency_ms = entry.rtsp_latency_ms;
  s.source = entry.source;
  s.turn = entry.turn;
  s.tls = entry.tls;
  s.recorded = entry.recorded;
  s.from_ns = entry.from_ns;
  s.to_ns = entry.to_ns;
  s.loop = entry.loop;
  return s;
}

UriKind uri_kind_of(const std::string& uri) {
  auto parsed = parse_stream_uri(uri, "");
  return parsed.ok() ? parsed->kind : UriKind::kFile;
}

namespace {

// The first top-level key, other than `streams`, whose value differs between the two documents.
Result<std::string> first_changed_section(const std::string& running_yaml, const std::string& reloaded_yaml) {
  YAML::Node a, b;
  try {
    a = YAML::Load(running_yaml);
    b = YAML::Load(reloaded_yaml);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string("YAML: ") + e.what());
  }
  std::set<std::string> keys;
  for (const YAML::Node* doc : {&a, &b}) {
    if (!doc->IsMap()) continue;
    for (auto it = doc->begin(); it != doc->end(); ++it) keys.insert(it->first.as<std::string>());
  }
  for (const std::string& key : keys) {
    // x- keys hold anchors: what they change shows in the sections that merge them. `publish`, `ingest`
    // and `infer` are compared setting by setting (compare_publish_sections, ...).
    if (key == "streams" || key == "publish" || key == "ingest" || key == "infer" || key == "log" ||
        key.rfind("x-", 0) == 0) {
      continue;
    }
    auto dump = [&](const YAML::Node& doc) { return doc.IsMap() ? canonical_yaml(doc[key]) : canonical_yaml(YAML::Node()); };
    if (dump(a) != dump(b)) return key;
  }
  return std::string();
}

}  // namespace

namespace {

bool is_rtsp(const std::string& uri) { return uri_scheme(uri).rfind("rtsp", 0) == 0; }

// changed_settings(); `taken`: the entries are resolved, and `after` takes the job's settings where it
// sets none of its own (`own`: the entry as the config has it).
std::string changed_settings_of(const StreamTableEntry& before, const StreamTableEntry& after,
                                const StreamTableEntry* own) {
  std::string what;
  auto note = [&](bool differs, const char* name) {
    if (differs) what += (what.empty() ? "" : ", ") + std::string(name);
  };
  auto named = [&](const char* name, bool taken) { return taken ? std::string(name) + " (ingest." + name + ")" : std::string(name); };
  if (before.source.empty()) {
    note(before.uri != after.uri, "uri");
    note(before.max_fps != after.max_fps, named("max_fps", own && own->max_fps < 0).c_str());
    note(before.keyframes_only != after.keyframes_only, named("keyframes_only", own && !own->keyframes_only).c_str());
    note(before.rtsp_latency_ms != after.rtsp_latency_ms,
         named("rtsp_latency_ms", own && !own->rtsp_latency_ms).c_str());
    note(before.turn != after.turn, "rotate or mirror");
    note(before.tls != after.tls, "tls_ca_file, tls_verify or tls_fingerprint");
  }
  note(before.roi != after.roi, "roi");
  return what;
}

}  // namespace

std::string changed_settings(const StreamTableEntry& before, const StreamTableEntry& after) {
  return changed_settings_of(before, after, nullptr);
}

StreamTableEntry resolved_entry(const StreamTableEntry& entry, const IngestConfig& ingest) {
  StreamTableEntry e = entry;
  if (!e.source.empty()) return e;  // a member decodes nothing
  if (e.max_fps < 0) e.max_fps = ingest.max_fps;
  if (!e.keyframes_only) e.keyframes_only = ingest.keyframes_only;
  if (!e.rtsp_latency_ms && is_rtsp(e.uri)) e.rtsp_latency_ms = ingest.rtsp_latency_ms;
  return e;
}

namespace {

// Both entries resolved; a uri that becomes or was an RTSP source's compares its own jitter buffer only
// (the uri's change is what is said).
std::pair<StreamTableEntry, StreamTableEntry> resolved_pair(const StreamTableEntry& before, const StreamTableEntry& after,
                                                            const IngestConfig& ingest_before,
                                                            const IngestConfig& ingest_after) {
  std::pair<StreamTableEntry, StreamTableEntry> p{resolved_entry(before, ingest_before), resolved_entry(after, ingest_after)};
  if (is_rtsp(before.uri) != is_rtsp(after.uri)) {
    p.first.rtsp_latency_ms = before.rtsp_latency_ms;
    p.second.rtsp_latency_ms = after.rtsp_latency_ms;
  }
  return p;
}

}  // namespace

std::string changed_settings(const StreamTableEntry& before, const StreamTableEntry& after,
                             const IngestConfig& ingest_before, const IngestConfig& ingest_after) {
  const auto [a, b] = resolved_pair(before, after, ingest_before, ingest_after);
  return changed_settings_of(a, b, &after);
}

namespace {

// `after` with what the running connection takes as it goes (roi, rotate/mirror, max_fps,
// keyframes_only, rtsp_latency_ms) as `before` has it.
StreamTableEntry same_connection_settings(const StreamTableEntry& before, StreamTableEntry after) {
  after.roi = before.roi;
  after.turn = before.turn;
  after.max_fps = before.max_fps;
  after.keyframes_only = before.keyframes_only;
  after.rtsp_latency_ms = before.rtsp_latency_ms;
  return after;
}

}  // namespace

std::string connection_settings_changed(const StreamTableEntry& before, const StreamTableEntry& after,
                                        const IngestConfig& ingest_before, const IngestConfig& ingest_after) {
  if (!before.source.empty()) return "";  // a member's decoding is its source's
  const auto [a, b] = resolved_pair(before, after, ingest_before, ingest_after);
  return changed_settings_of(a, same_connection_settings(a, b), &after);
}

std::string connection_settings_changed(const StreamTableEntry& before, const StreamTableEntry& after) {
  if (!before.source.empty()) return "";
  return changed_settings(before, same_connection_settings(before, after));
}

bool settings_need_new_connection(const StreamTableEntry& before, const StreamTableEntry& after,
                                  const IngestConfig& ingest_before, const IngestConfig& ingest_after) {
  return !connection_settings_changed(before, after, ingest_before, ingest_after).empty();
}

bool settings_need_new_connection(const StreamTableEntry& before, const StreamTableEntry& after) {
  return !connection_settings_changed(before, after).empty();
}

Result<StreamReload> apply_stream_reload(StreamTable& table, const std::string& running_yaml,
                                         const std::string& reloaded_yaml, const Config& reloaded, size_t lanes) {
  if (reloaded.job.mode != JobMode::kLive) {
    return FailedPrecondition(reloaded.source + ": only a live job's streams can change while it runs (this config "
                              "makes an archive job); restart the job");
  }
  auto changed_section = first_changed_section(running_yaml, reloaded_yaml);
  if (!changed_section.ok()) return changed_section.status().with_context(reloaded.source);
  const std::string& changed = changed_section.value();
  if (!changed.empty()) {
    return FailedPrecondition(reloaded.source + ": `" + changed + "` changed; only `streams`, `log` and some of `publish`, "
                              "`ingest` and `infer` can change while the job runs (restart the job for the rest)");
  }
  auto publish_change = compare_publish_sections(running_yaml, reloaded_yaml, reloaded.source);
  if (!publish_change.ok()) return publish_change.status();
  auto ingest_change = compare_ingest_sections(running_yaml, reloaded_yaml, reloaded.source, reloaded.ingest);
  if (!ingest_change.ok()) return ingest_change.status();
  auto infer_change = compare_infer_sections(running_yaml, reloaded_yaml, reloaded.source, &reloaded.infer);
  if (!infer_change.ok()) return infer_change.status();
  // log.level: compared as the config reader took it (the reloaded config was read whole).
  std::optional<std::string> log_level;
  try {
    const YAML::Node a = YAML::Load(running_yaml), b = YAML::Load(reloaded_yaml);
    auto log_of = [](const YAML::Node& doc) { return doc.IsMap() ? canonical_yaml(doc["log"]) : canonical_yaml(YAML::Node()); };
    if (log_of(a) != log_of(b)) log_level = reloaded.log.level;
  } catch (const YAML::Exception& e) {
    return InvalidArgument(reloaded.source + ": YAML: " + e.what());
  }
  std::map<std::string, const StreamTableEntry*> by_id;
  for (const StreamTableEntry& e : table.entries) by_id[e.id] = &e;
  std::set<std::string> listed;
  StreamReload change;
  std::vector<const StreamConfig*> to_add;
  std::vector<StreamTableEntry> to_retune;  // entries with their new settings (index and lane kept)
  std::vector<StreamTableEntry> to_return;  // removed earlier, listed again (index and lane kept)
  for (const StreamConfig& s : reloaded.streams) {
    listed.insert(s.id);
    auto it = by_id.find(s.id);
    if (it == by_id.end()) {
      to_add.push_back(&s);
    } else if (it->second->removed) {
      // Listed again: a camera (or a region of one) comes back under its id, index and lane, its
      // numbering going on. A file would be read again from its start: its results would repeat.
      const std::string where = reloaded.source + ":" + std::to_string(s.line) + ": stream '" + s.id + "'";
      if (uri_kind_of(it->second->uri) == UriKind::kFile || uri_kind_of(s.uri) == UriKind::kFile) {
        return FailedPrecondition(where + " was removed earlier in this run, and a file's stream cannot come back: it "
                                  "would be read again from its start (add it back under a new id, or restart the job)");
      }
      if (it->second->source != s.source) {
        return FailedPrecondition(where + " was removed earlier in this run with another source ('" +
                                  it->second->source + "'); it comes back only with its source (give it a new id, or "
                                  "restart the job)");
      }
      to_return.push_back(table_entry_of(s, it->second->index, it->second->lane));
    } else if (it->second->source != s.source) {
      return FailedPrecondition(reloaded.source + ":" + std::to_string(s.line) + ": stream '" + s.id +
                                "': its source changed; a running job adds and removes streams by id (give it a "
                                "new id, or restart the job)");
    } else {
      const StreamTableEntry& running = *it->second;
      const StreamTableEntry wanted = table_entry_of(s, running.index, running.lane);
      const std::string where = reloaded.source + ":" + std::to_string(s.line) + ": stream '" + s.id + "': ";
      if (running.recorded != wanted.recorded || running.from_ns != wanted.from_ns || running.to_ns != wanted.to_ns ||
          running.loop != wanted.loop) {
        return FailedPrecondition(where + "its " +
                                  (running.recorded != wanted.recorded ? "recorded_at"
                                   : running.loop != wanted.loop     ? "loop"
                                                                     : "from or to") +
                                  " changed; a file's part and time cannot change while it is read (give it a new id, "
                                  "or restart the job)");
      }
      // As the stream decodes: its own settings, and the job's ingest settings it takes.
      const IngestConfig& ingest_before = ingest_change->before;
      const IngestConfig& ingest_after = ingest_change->after;
      const std::string what = changed_settings(running, wanted, ingest_before, ingest_after);
      // A member's copy of its source's decoding settings follows the source's, unsaid.
      auto as_source = [](StreamTableEntry e) {
        e.source.clear();
        return e;
      };
      // (An own setting written as the job's value it took is kept in the table, and changes nothing.)
      if (changed_settings(as_source(running), as_source(wanted)).empty() &&
          changed_settings(as_source(running), as_source(wanted), ingest_before, ingest_after).empty()) {
        continue;
      }
      // A file's stream takes a new region, rotate/mirror, max_fps or keyframes_only as it goes; a new
      // uri or TLS trust would read it again from its start.
      const bool file_before = uri_kind_of(running.uri) == UriKind::kFile;
      const bool file_after = uri_kind_of(wanted.uri) == UriKind::kFile;
      const std::string reconnecting = connection_settings_changed(running, wanted, ingest_before, ingest_after);
      if (!s.is_member() && (file_before || file_after) && !reconnecting.empty()) {
        return FailedPrecondition(where + "its " + reconnecting + " changed; " +
                                  (file_before ? "a file's" : "a stream that becomes a file's") +
                                  " connection cannot change while the job runs: it would be read again from its "
                                  "start (give it a new id, or restart the job)");
      }
      to_retune.push_back(wanted);
      if (what.empty()) continue;
      change.retuned.push_back(s.id);
      change.retuned_what.push_back(what);
      change.retuned_connects.push_back(!s.is_member() && !reconnecting.empty());
    }
  }
  for (const StreamTableEntry& back : to_return) {
    if (back.source.empty()) continue;
    auto source = by_id.find(back.source);
    const bool source_listed = listed.count(back.source) > 0;
    if (!source_listed || source == by_id.end() || source->second->lane != back.lane) {
      return FailedPrecondition(reloaded.source + ": stream '" + back.id + "' was removed earlier in this run; it "
                                "comes back only while its source '" + back.source + "' is listed too");
    }
  }
  // Nothing is applied before every check has passed.
  std::vector<size_t> per_lane(std::max<size_t>(lanes, 1), 0);
  for (const StreamTableEntry& e : table.entries) {
    if (!e.removed && e.source.empty() && e.lane < per_lane.size()) ++per_lane[e.lane];
  }
  for (const StreamTableEntry& back : to_return) {
    if (back.source.empty() && back.lane < per_lane.size()) ++per_lane[back.lane];
  }
  for (StreamTableEntry& e : table.entries) {
    if (!e.removed && !listed.count(e.id)) {
      e.removed = true;
      if (e.source.empty() && e.lane < per_lane.size()) --per_lane[e.lane];
      change.removed.push_back(e.id);
    }
  }
  // Sources first: a member added with its source goes on the lane its source gets. Lanes are
  // balanced by the streams that decode.
  std::stable_partition(to_add.begin(), to_add.end(), [](const StreamConfig* s) { return !s->is_member(); });
  for (const StreamConfig* s : to_add) {
    uint32_t lane = 0;
    if (s->is_member()) {
      for (const StreamTableEntry& e : table.entries) {
        if (e.id == s->source && !e.removed) lane = e.lane;
      }
    } else {
      for (uint32_t l = 1; l < per_lane.size(); ++l) {
        if (per_lane[l] < per_lane[lane]) lane = l;
      }
      ++per_lane[lane];
    }
    // Every setting of the stream, as at the job's start (its part, recording start and loop too: they
    // were left out before stop 55, so a file added by a reload was read whole, from its start).
    table.entries.push_back(table_entry_of(*s, static_cast<uint32_t>(table.entries.size()), lane));
    change.added.push_back(s->id);
    change.added_lanes.push_back(lane);
  }
  for (StreamTableEntry& retuned : to_retune) table.entries[retuned.index] = std::move(retuned);
  for (StreamTableEntry& back : to_return) {
    change.returned.push_back(back.id);
    table.entries[back.index] = std::move(back);
  }
  // Every reload is a new version, a reload that changed nothing too: ingest then starts again the
  // cameras of its lane that have ended (gave up after ingest.reconnect_attempts, or failed).
  ++table.version;
  change.publish = std::move(publish_change).value();
  change.log_level = std::move(log_level);
  change.ingest = std::move(ingest_change).value();
  change.infer = std::move(infer_change).value();
  return change;
}

}  // namespace vapipe
