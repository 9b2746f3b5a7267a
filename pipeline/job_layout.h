// Where the stages of one job meet: the endpoint each stage's input binds, and the names of the
// shared memory pools. Derived from the config and a job id, so that stages started by the supervisor
// or by hand (`vapipe stage NAME --job-id ID`) agree without talking to each other.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "pipeline/config.h"
#include "pipeline/shm_pool.h"

namespace vapipe {

struct JobLayout {
  std::string job_id;
  uint32_t lane = 0;     // which lane's edges and pools these are (see pipeline/placement.h)
  std::string run_dir;  // per-job folder for ipc:// sockets (mode shm)
  bool by_reference = true;  // payloads as shared memory descriptors
  std::map<StageKind, std::string> input_endpoint;  // preprocess, batch, infer (the lane's), publish (shared)
  std::string frame_pool;   // owned by the lane's ingest
  std::string tensor_pool;  // owned by the lane's preprocess
};

JobLayout make_job_layout(const Config& config, const std::string& job_id, uint32_t lane = 0);

// Whether `shm_name`, an entry of /dev/shm (no leading '/'), is one of `job_id`'s pools, of any lane:
// exactly, not one of a job whose id merely starts with it ("a" and "a-2").
bool is_pool_of_job(const std::string& shm_name, const std::string& job_id);

// The pools a stage's input may map when a message names one (MessageReceiver::bind): the job's own,
// of any lane, by their names ("/vapipe-<id>-frames-<lane>"); none (empty) when payloads travel
// inline (mode tcp).
PoolFilter pools_accepted_by_stages(const JobLayout& layout);

// The start-up gate. `vapipe run` makes an "opening" mark for every stage but ingest before it starts
// any; each stage removes its own once open() has succeeded (model loaded and warmed up, pools made).
// Ingest starts its streams when the marks of its lane's stages and publish's are gone, so no frame
// is decoded before the pipeline can take it (DeepStream, likewise, does not play before nvinfer has
// its engine). Stages started by hand have no marks, so nothing waits. The mark of `kind` in
// `layout.lane` (publish has one for the job).
std::string opening_mark(const JobLayout& layout, StageKind kind);

// Made by `vapipe run` when a stage has crashed and the job will restart (job.max_restarts): the
// stages it then stops are not ending the job, so publish keeps the job summary for the run that does.
std::string restart_mark(const JobLayout& layout);

// Made by `vapipe run` when the job is being stopped (Ctrl-C, SIGTERM). Only ingest gets the signal;
// the other stages drain behind its streams' ends. A job that watches folders (streams[].watch_s)
// does not end when its streams have, so its stages, idle with every stream ended, end on this mark.
std::string stopping_mark(const JobLayout& layout);

// Where publish asks ingest for pictures of streams (publish.segments_pictures_dir): publish binds a
// ZeroMQ PUB socket there, every lane's ingest subscribes. ipc:// in the job's run folder: both on one
// host (the pictures are files on it).
std::string picture_requests_endpoint(const JobLayout& layout);

// Set by `vapipe run` for the stages it starts again after a crash in a live job (a lane's stages, or
// publish alone; pipeline/supervisor.h): why, e.g. "stage infer[1] (pid 42) failed: killed by signal
// 9 (Killed)". Ingest then resumes its streams rather than starting them; publish appends to its
// JSON-lines file and takes each stream's numbering from its next result.
inline constexpr const char* kRestartReasonEnv = "VAPIPE_RESTART_REASON";

// Set with kRestartReasonEnv when the job is being stopped while the crashed stages were down: they
// start with their stop already requested, so that their streams end (and publish writes the summary).
inline constexpr const char* kStopRequestedEnv = "VAPIPE_STOP_REQUESTED";

// Set for every stage `vapipe run` starts: the job's streams are its stream table, so the stage does
// not look for a `glob:`'s files again (ConfigLoadOptions::expand_globs; a share that has stopped
// answering would hold up its start, and its files could differ from the supervisor's).
inline constexpr const char* kStreamsFromTableEnv = "VAPIPE_STREAMS_FROM_TABLE";
// Set by `vapipe run` for an archive job's stages: how many times it has restarted the job whole after
// a crash so far (publish's vapipe_job_restarts_total, the summary's job_restarts).
inline constexpr const char* kJobRestartsEnv = "VAPIPE_JOB_RESTARTS";

// Set for every stage `vapipe run` starts from a config file: a copy of the text the job started with
// (in its run folder, config_as_started_path), which the stage parses instead of the file. A stage
// started again after a crash then runs with the job's config, not with the file as edited since (a
// section a reload refused, a half-saved edit), and does not read a config on a share that has stopped
// answering.
inline constexpr const char* kConfigAsStartedEnv = "VAPIPE_CONFIG_AS_STARTED";
std::string config_as_started_path(const std::string& run_dir);

// A live job's SIGHUP re-read of its config under way (a share that does not answer shows as this
// growing old): the supervisor writes the time it began (seconds since 1970) when it starts the read
// and removes the file when it ends; publish shows it on /healthz, /metrics and `vapipe status`.
std::string reload_mark(const JobLayout& layout);
void write_reload_mark(const JobLayout& layout, double since_unix_s);
void remove_reload_mark(const JobLayout& layout);
double read_reload_mark(const JobLayout& layout);  // 0: none under way

// Message queue depth per edge: shared memory slots bound the memory; this bounds the descriptors.
inline constexpr int kEdgeHighWaterMark = 64;

}  // namespace vapipe
