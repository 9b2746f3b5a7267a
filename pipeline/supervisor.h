// `vapipe run`: starts every stage as its own OS process, watches them, forwards SIGINT/SIGTERM for a
// clean shutdown (ingest stops first, the rest drain), reports which stage failed if one dies, and
// exits when the job is done.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "pipeline/config.h"
#include "pipeline/placement.h"
#include "pipeline/signals.h"

namespace vapipe {

// Exit statuses of `vapipe run`.
inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 1;         // bad arguments or config
inline constexpr int kExitStageFailed = 2;   // a stage process died or failed to start
inline constexpr int kExitStreamsFailed = 3; // the job finished, but some stream failed
inline constexpr int kExitInterrupted = 130; // a second SIGINT/SIGTERM killed the stages
// An archive job stopped before some stream's end (publish's kExitArchiveUnfinished). `vapipe run`
// stopped by a signal then ends by that signal (die_by_stop_signal), as a shell and a batch system
// expect of an interrupted command; 4 is what it exits with when it cannot (PID 1 in a container: the
// kernel ignores its own default-action signal) or its stages were stopped otherwise.
inline constexpr int kExitStreamsUnfinished = 4;
// Publish's exit when an archive job's results file cannot be written (a full disk): not restarted,
// since every restart would fail the same way (it cost job.max_restarts futile restarts). A live
// job's publish goes on instead, keeping the lines for the file (stages/publish/publish_stage.h).
inline constexpr int kExitResultsUnwritable = 5;
// Publish's exit when job.summary_path could not be written at the job's end: not restarted either.
inline constexpr int kExitSummaryUnwritable = 6;
// Publish's exit, and the job's, when an archive job finished but messages did not reach its webhooks,
// MQTT brokers, Redis servers or Kafka clusters: the results file is whole; not restarted.
inline constexpr int kExitSinksUndelivered = 7;

// Ends the process by the signal that stopped it (`flags.signal`), its handler reset: a shell then
// sees it interrupted (130 for SIGINT, 143 for SIGTERM) and stops a loop of jobs, and a Kubernetes
// Job's pod that was evicted is not taken for one that finished. Returns if no signal stopped it.
void die_by_stop_signal(const ShutdownFlags& flags);

struct SupervisorOptions {
  std::string self_exe;                 // the vapipe binary (stages run as `vapipe stage NAME ...`)
  std::vector<std::string> config_args; // how a stage finds the config: {"--config", path} or {"--demo"}
  std::string job_id;                   // empty: made from pid and time
  int visible_gpus = -1;                // -1: probe (visible_gpu_count()); tests give a count
  // Archive jobs: go on from the job's JSON-lines file (pipeline/resume.h) instead of starting afresh.
  bool resume = false;
  // The config file and the text the job started from: on SIGHUP (flags.reload) a live job re-reads
  // the file and adds and removes streams (pipeline/stream_table.h). Empty path: the demo, no reload.
  std::string config_path;
  std::string config_text;
  // What a config alone cannot know, asked of a reload's config before it is taken (`vapipe validate`
  // asks it too): that GStreamer here reads each network stream's scheme. A typo (rtsx://) was taken,
  // answered "reloaded", and the camera it replaced retried for ever. Null: not asked.
  std::function<Status(const Config&)> check_streams;
  // `--resume` of an archive job already complete in its results file: sends its sinks the file's lines
  // after their delivery marks (a receiver down at the job's end: exit 7), as a restart would; returns
  // how many messages they still did not take; `stop` (a signal) cuts the wait. Null: not sent (the
  // supervisor has no sinks of its own).
  std::function<Result<uint64_t>(const Config&, const std::atomic<bool>* stop)> deliver_what_sinks_missed;
};

// Runs the job. A stage that crashes once every stage has opened is restarted (job.max_restarts in a
// row, with a back-off): in a live job, that stage's lane (ingest, preprocess, batch and infer of its
// GPU) or publish alone, while the rest of the job goes on; an archive job restarts whole and goes on
// from its JSON-lines file, so that every frame still has exactly one result.
int run_supervisor(const Config& config, const SupervisorOptions& options, ShutdownFlags& flags);

// Why a job whose stage failed is not restarted, as a suffix for the log line (empty: it is).
// `failed_after_opening`: every stage had opened (a crash, not a start-up error); `stopping`: the user
// asked the job to stop.
std::string restart_refusal(const Config& config, bool failed_after_opening, uint32_t restarts_in_a_row,
                            bool stopping);

// Removes what a job leaves behind (ipc folder, shared memory names of every lane) after a crash.
void cleanup_job_resources(const Config& config, const std::string& job_id, size_t lanes);

}  // namespace vapipe
