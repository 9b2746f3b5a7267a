// Each stage process's running counters, written to the job's run folder once a second, so that
// publish serves them with its metrics: where the time of each stage and lane goes (its own work,
// blocked sending, waiting for pool slots, waiting for input), which is what says which stage
// limits a running job.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/job_layout.h"
#include "pipeline/stage.h"
#include "pipeline/status.h"

namespace vapipe {

struct StageStatsSnapshot {
  std::string stage;  // ingest, preprocess, batch, infer, publish
  uint32_t lane = 0;
  double up_s = 0;    // since the stage was ready
  // Whether messages_in, errors, busy_s and input_wait_s were measured. Ingest has no input, and
  // decodes on GStreamer's threads: it reports only its waits and its own totals.
  bool has_input = true;
  uint64_t messages_in = 0;
  uint64_t errors = 0;  // malformed messages and process() errors
  double busy_s = 0;    // in the stage's own calls, including the two below
  double send_blocked_s = 0;
  double slot_wait_s = 0;
  double input_wait_s = 0;
  // Whether the stage's work is moving (publish's /healthz says a stage that is not: a process
  // stopped or stuck). written_unix_s: when the snapshot was written (set by write_stage_stats); a
  // running stage writes one every second, even while its work waits. working_s: how long its
  // stretch of own work under way has lasted (0 while it waits; working_on names it), and
  // stuck_after_s when its watchdog aborts such a stretch (0: none, job.stage_timeout_s). ended: its
  // last snapshot, written as it exits (an ended stage's figures stand still).
  double written_unix_s = 0;
  double written_monotonic_s = 0;  // the same on the host's monotonic clock (0: not known)
  double working_s = 0;
  std::string working_on;
  double stuck_after_s = 0;
  bool ended = false;
  StageCounters counters;  // the stage's own (Stage::counters())
  StageFacts facts;        // the stage's own (Stage::facts())
  // Ingest: frames each stream's queue has dropped so far (live mode), by stream id; publish serves
  // them as they happen instead of as of each stream's latest event.
  std::vector<std::pair<std::string, uint64_t>> stream_dropped;
  // Ingest: each MPEG-TS stream's video continuity errors so far (packets lost or damaged before its
  // decoder: a live udp:// or srt:// stream's network, a file's damage), by stream id; only those with any.
  std::vector<std::pair<std::string, uint64_t>> stream_continuity_errors;
  // Ingest: frames each stream's decoder took and gave no picture for so far (decoder_input_gate.h's
  // undecoded), by stream id; only those with any.
  std::vector<std::pair<std::string, uint64_t>> stream_undecoded;
  // Ingest: each RTSP camera's RTP packets so far, lost on the network and received (its jitter
  // buffers' counts), by stream id; only cameras with RTP.
  std::vector<std::pair<std::string, uint64_t>> stream_rtp_lost, stream_rtp_received;
};

// run_dir/stats-<stage>-<lane>.json
std::string stage_stats_path(const JobLayout& layout, StageKind kind);
Status write_stage_stats(const StageStatsSnapshot& stats, const std::string& path);
// Every stage's latest snapshot in `run_dir` (a file that cannot be read is skipped), by stage then lane.
std::vector<StageStatsSnapshot> read_stage_stats(const std::string& run_dir);

}  // namespace vapipe
