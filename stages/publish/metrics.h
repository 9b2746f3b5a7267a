// What publish knows about the job, as Prometheus metrics and a health document. Publish sees every
// result and stream event of every lane, so it is where per-stream state lives; a snapshot is taken on
// the stage's thread and served by MetricsServer from its own.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/stage_stats.h"

namespace vapipe {

struct StreamMetrics {
  std::string id;
  std::string state;  // pending | running | reconnecting | done | failed | stopped | removed
  uint64_t results = 0;
  uint64_t frame_errors = 0;
  uint64_t gaps = 0;
  uint64_t dropped = 0;  // from the stream's latest event
  uint64_t reconnects = 0;
  uint64_t restarts = 0;  // its lane's processes restarted after a crash
  double latency_sum_s = 0;
  uint64_t latency_count = 0;  // results whose latency is in latency_sum_s (a resumed job's earlier ones are not)
  double latency_max_s = 0;
  double last_result_unix_s = 0;  // 0: none yet
};

struct JobMetrics {
  std::string job;
  std::string mode;  // archive | live
  double start_unix_s = 0;
  double now_unix_s = 0;
  std::vector<StreamMetrics> streams;
  std::vector<StageStatsSnapshot> stages;  // every stage process's latest totals (pipeline/stage_stats.h)
};

// The states a stream can be in, in the order vapipe_stream_state lists them.
const std::vector<std::string>& stream_states();

// Prometheus text exposition format 0.0.4.
std::string prometheus_text(const JobMetrics& m);

// GET /healthz's body: the job, and each stream's state, results and seconds since its last result.
nlohmann::json health_json(const JobMetrics& m);

}  // namespace vapipe
