// What a reload of a running live job would do, asked before it is sent (`vapipe validate CONFIG
// --reload`): the job's run folder holds the config it started with, its stream table as the reloads
// so far left it, and the path of the config file it reloads from. The same apply_stream_reload the
// job runs on SIGHUP works on a copy, so the answer is the job's own (a refusal word for word).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/config.h"
#include "pipeline/status.h"
#include "pipeline/stream_table.h"

namespace vapipe {

// In a job's run folder: the absolute path of the config file `vapipe run` was given, which SIGHUP
// reads again.
std::string config_path_mark(const std::string& run_dir);
// `path` made absolute, its links and `..` resolved (as far as it exists): how the mark says it.
std::string absolute_path_of(const std::string& path);
// The mark's text for a job started with `config_path`: its absolute path with links resolved, then as
// written (absolute, `..` resolved, links kept). A job is found by either: a Kubernetes ConfigMap's
// file is a link whose target changes with each update of the map (`..data` swapped), so the resolved
// path of the same file changes while the job runs.
std::string config_path_mark_text(const std::string& config_path);

struct RunningJob {
  std::string run_dir;
  int64_t pid = 0;  // its `vapipe run` (0: not known, below)
  // Set when the job's files cannot be read by this user (they are its owner's alone: they hold camera
  // passwords): why, with what to do.
  std::string unreadable;
};

// The jobs running now (their `vapipe run` alive) that were started with the config file at
// `config_path` (compared by absolute path), found among the run folders in `runs_root`
// (vapipe-<job id>); with `unreadable` set, those whose state this user cannot read.
std::vector<RunningJob> running_jobs_of(const std::string& config_path, const std::string& runs_root = "/tmp");

struct ReloadPreview {
  StreamReload change;
  size_t streams_then = 0;  // live streams after it
  size_t lanes = 1;         // the job's, as its table shows them
};

// What a reload of `job` to `reloaded` (its text `reloaded_text`) would do; the error the job would
// log when it would refuse it (nothing of the job changes either way).
Result<ReloadPreview> preview_reload(const RunningJob& job, const std::string& reloaded_text, const Config& reloaded);

// "added 'a', 'b' (lane 1); removed none; changed 'front' (uri)": what the job's log says of a reload.
std::string describe_reload(const StreamReload& change, size_t lanes);
// Whether it changes settings other than the streams (publish's outputs, ingest's sampling and
// reconnection, log.level), and what it changes of them ("publish.webhooks added [1]; ingest.max_fps
// changed; log.level debug"; empty: nothing).
bool settings_changed(const StreamReload& change);
std::string describe_settings_reload(const StreamReload& change);

// What became of a live job's reloads (SIGHUP, POST /-/reload, `vapipe reload`), kept in its run folder
// by `vapipe run` after each one: for publish's /metrics and /healthz (a refused reload is otherwise
// only a log line), and for `vapipe reload`, which waits for the outcome of the one it asked for.
struct ReloadOutcome {
  uint64_t number = 0;     // reloads so far (this one's: 1, 2, ...)
  double at_unix_s = 0;    // when it ended
  bool taken = false;      // applied; false: refused, nothing changed
  std::string message;     // what it changed, or why it was refused (as the job's log says it)
  uint64_t taken_total = 0, refused_total = 0;
  double last_taken_unix_s = 0;  // when the last one taken ended (0: none yet)
  // When its config's read began (0: not read): an answer to a SIGHUP sent at T is one whose read began
  // at T or later (a read already under way at T is of the file as it was before).
  double read_started_unix_s = 0;
  // Taken, and it has each lane's infer load a model (a new path, settings that need one, or a file
  // replaced under the same path): `vapipe reload` waits for each lane's word (LaneModel).
  bool model_loads = false;
};
std::string reload_outcome_path(const std::string& run_dir);
Status write_reload_outcome(const std::string& run_dir, const ReloadOutcome& outcome);
// None before the job's first reload (or when unreadable).
std::optional<ReloadOutcome> read_reload_outcome(const std::string& run_dir);

// Each lane's infer as its stats file says it (run_dir/stats-infer-<lane>.json, written once a second:
// InferStage's facts and counters): the model it runs, one it is loading, how its reloads went, and the
// identity of the job's copy of its config as it last looked at it (`config_copy`).
struct LaneModel {
  uint32_t lane = 0;
  std::string model, model_file, loading, last_reload_error, config_copy;
  uint64_t reloads = 0, failures = 0;
  bool running = false;  // its stats file was written within the last 3 s (its infer runs)
};
std::vector<LaneModel> read_lane_models(const std::string& run_dir);

// What became of a reload's new model, lane by lane, from their infer's word before the reload
// (`before`) and now: done once each running lane has looked at the copy as the reload left it
// (`copy_identity`) and loads nothing more. `failed`: a lane could not use the new model (its old one
// goes on). `text`: a line per lane ("lane 0: model 'door-v2' (/models/door-v2.pt) classifies from now
// on"), those still loading said so.
struct ModelReloadReport {
  bool done = false, failed = false;
  std::string text;
};
ModelReloadReport report_model_reload(const std::vector<LaneModel>& before, const std::vector<LaneModel>& now,
                                      const std::string& copy_identity);

// The answer to one reload asked of a running job: SIGHUP to its `vapipe run`, then its outcome of that
// re-read, and of a model the reload has each lane load. What `vapipe reload` prints and POST /-/reload
// answers.
struct ReloadAnswer {
  enum class Verdict {
    kTaken,             // applied (and every running lane took its model, if it has one loaded)
    kRefused,           // nothing changed
    kModelNotUsed,      // applied, but a lane could not use the new model: its old one goes on
    kNoAnswer,          // no outcome within the time given (its config still being read?)
    kModelNotYetTaken,  // applied; a lane has not taken its model within the time given
  };
  Verdict verdict = Verdict::kNoAnswer;
  // The job's word, said of it ("reloaded: added 'a'; removed none", "refused the reload, and changed
  // nothing: why", "has not said within 60 s what became of the reload ..."): one line, no newline.
  std::string said;
  // With a model: a line per lane (report_model_reload), and one that says a lane has not taken it.
  std::string lanes;
};
// Sends SIGHUP to `supervisor_pid`, the `vapipe run` of the job whose run folder is `run_dir`, and waits
// up to `timeout` for its answer; `stop` (may be null) set ends the wait early (kNoAnswer), and so does
// the end of that process ("ended before it said ..."). Error: the signal could not be sent.
Result<ReloadAnswer> reload_and_wait(const std::string& run_dir, int64_t supervisor_pid,
                                     std::chrono::milliseconds timeout, const std::atomic<bool>* stop = nullptr);

}  // namespace vapipe
