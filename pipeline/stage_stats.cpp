#include "pipeline/stage_stats.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/atomic_file.h"
#include "pipeline/envelope.h"

namespace vapipe {

namespace {

using ByStream = std::vector<std::pair<std::string, uint64_t>>;

// A per-stream count as {"id": n, ...} under `key`, left out when no stream has one.
void put_by_stream(nlohmann::json& j, const char* key, const ByStream& counts) {
  if (counts.empty()) return;
  nlohmann::json by_id = nlohmann::json::object();
  for (const auto& [id, n] : counts) by_id[id] = n;
  j[key] = by_id;
}

void take_by_stream(const nlohmann::json& j, const char* key, ByStream* counts) {
  if (!j.contains(key)) return;
  for (const auto& [id, n] : j.at(key).items()) counts->emplace_back(id, n.get<uint64_t>());
}

}  // namespace

std::string stage_stats_path(const JobLayout& layout, StageKind kind) {
  return layout.run_dir + "/stats-" + stage_kind_name(kind) + "-" + std::to_string(layout.lane) + ".json";
}

Status write_stage_stats(const StageStatsSnapshot& s, const std::string& path) {
  nlohmann::json counters = nlohmann::json::object();
  for (const auto& [name, value] : s.counters) counters[name] = value;
  nlohmann::json j{{"stage", s.stage},         {"lane", s.lane}, {"has_input", s.has_input},
                   {"up_s", s.up_s},           {"messages_in", s.messages_in},
                   {"errors", s.errors},       {"busy_s", s.busy_s},
                   {"send_blocked_s", s.send_blocked_s}, {"slot_wait_s", s.slot_wait_s},
                   {"input_wait_s", s.input_wait_s},     {"counters", counters},
                   {"written_unix_s", static_cast<double>(wall_clock_ns()) / 1e9},
                   {"written_monotonic_s", static_cast<double>(monotonic_clock_ns()) / 1e9},
                   {"working_s", s.working_s}, {"stuck_after_s", s.stuck_after_s}, {"ended", s.ended}};
  if (!s.working_on.empty()) j["working_on"] = s.working_on;
  if (!s.facts.empty()) {
    nlohmann::json facts = nlohmann::json::object();
    for (const auto& [name, value] : s.facts) facts[name] = value;
    j["facts"] = facts;
  }
  put_by_stream(j, "stream_dropped", s.stream_dropped);
  put_by_stream(j, "stream_continuity_errors", s.stream_continuity_errors);
  put_by_stream(j, "stream_undecoded", s.stream_undecoded);
  put_by_stream(j, "stream_rtp_lost", s.stream_rtp_lost);
  put_by_stream(j, "stream_rtp_received", s.stream_rtp_received);
  return write_file_atomically(path, j.dump() + "\n", 0644);
}

std::vector<StageStatsSnapshot> read_stage_stats(const std::string& run_dir) {
  std::vector<StageStatsSnapshot> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("stats-", 0) != 0 || entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path());
    try {
      const nlohmann::json j = nlohmann::json::parse(in);
      StageStatsSnapshot s;
      s.stage = j.at("stage").get<std::string>();
      s.lane = j.at("lane").get<uint32_t>();
      s.up_s = j.at("up_s").get<double>();
      s.has_input = j.at("has_input").get<bool>();
      s.messages_in = j.at("messages_in").get<uint64_t>();
      s.errors = j.at("errors").get<uint64_t>();
      s.busy_s = j.at("busy_s").get<double>();
      s.send_blocked_s = j.at("send_blocked_s").get<double>();
      s.slot_wait_s = j.at("slot_wait_s").get<double>();
      s.input_wait_s = j.at("input_wait_s").get<double>();
      for (const auto& [k, v] : j.at("counters").items()) s.counters.emplace_back(k, v.get<double>());
      // (Absent from a snapshot of an earlier version: taken as not known.)
      s.written_unix_s = j.value("written_unix_s", 0.0);
      s.written_monotonic_s = j.value("written_monotonic_s", 0.0);
      s.working_s = j.value("working_s", 0.0);
      s.working_on = j.value("working_on", std::string());
      s.stuck_after_s = j.value("stuck_after_s", 0.0);
      s.ended = j.value("ended", false);
      if (j.contains("facts")) {
        for (const auto& [k, v] : j.at("facts").items()) s.facts.emplace_back(k, v.get<std::string>());
      }
      take_by_stream(j, "stream_dropped", &s.stream_dropped);
      take_by_stream(j, "stream_continuity_errors", &s.stream_continuity_errors);
      take_by_stream(j, "stream_undecoded", &s.stream_undecoded);
      take_by_stream(j, "stream_rtp_lost", &s.stream_rtp_lost);
      take_by_stream(j, "stream_rtp_received", &s.stream_rtp_received);
      out.push_back(std::move(s));
    } catch (const nlohmann::json::exception&) {
      continue;  // being written by a stage of another version, or not ours: skip
    }
  }
  // The pipeline's order, then lane.
  auto rank = [](const std::string& stage) {
    auto kind = parse_stage_kind(stage);
    return kind ? static_cast<int>(*kind) : 99;
  };
  std::sort(out.begin(), out.end(), [&](const StageStatsSnapshot& a, const StageStatsSnapshot& b) {
    return std::make_pair(rank(a.stage), a.lane) < std::make_pair(rank(b.stage), b.lane);
  });
  return out;
}

}  // namespace vapipe
