// Resuming an archive job after a crash (`vapipe run CONFIG --resume`). The job's JSON-lines file
// (publish.jsonl_path) is its durable record: what it holds was published. The supervisor reads it
// once into a ResumePlan, keeps the file up to a cut point and hands the plan to the stages (a file in
// the run folder, named by VAPIPE_RESUME_PLAN): ingest decodes and drops each stream's frames that
// already have results, publish appends after the cut and counts the earlier results in its summary.
// So every frame still has exactly one result in the file, in order.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "pipeline/config.h"
#include "pipeline/status.h"

namespace vapipe {

struct StreamProgress {
  uint64_t results = 0;       // results kept: seq 0 .. results-1, each once
  uint64_t frame_errors = 0;  // of those, error results
  uint64_t damaged = 0;       // of those, of pictures decoded from damaged data ("damaged": true)
  bool started = false;       // its "started" event is kept
  // "" (to resume), "done" (its eos), "failed" (error event) or "removed" (eos "removed from the
  // config": a stream an earlier --resume found gone from the config before it had finished)
  std::string ended;
  std::string message;        // failed: the error
  // The presentation timestamp of the last kept result, when every kept result had one and they
  // rose strictly (then ingest can seek past it instead of decoding its way there); else -1.
  double last_pts_ms = -1;
  // A file's size when it was first opened (its `started` event's `bytes`); -1: not recorded.
  int64_t file_bytes = -1;
  std::string uri;  // as its `started` event said it (redacted), for an end that an earlier run did not say
  std::string file_head;  // its `started` event's head_hash: file_head_hash() of the file then ("": not said)
  double duration_ms = -1;  // its `started` event's duration_ms (a file's; -1: not said)
  // A file's `started` event without edit_list_ms (vapipe before 2026-12-07): its pts_ms are media
  // times, which for an MP4 with an edit list are later than its frames' times now (edit_list_timeline.h).
  bool pts_media_times = false;
  bool pts_rising = true;  // while reading the file: every result so far had a timestamp above the last
  // Kept results by top-1 label (error results not counted), for the summary's top_labels.
  std::map<std::string, uint64_t> labels;
};

struct ResumePlan {
  std::map<std::string, StreamProgress> streams;  // by stream id; every stream of the config
  // Streams in the file that the config no longer has: a file that left a glob's folder (retention
  // deleted it, an analyst moved it), an entry taken out of `streams`. Their results stay in the file
  // and count in the summary; one that had not ended ends as "removed" (publish says so) instead of
  // running. The file's streams all gone from the config is an error (the wrong config, most likely).
  std::map<std::string, StreamProgress> departed;
  uint64_t keep_bytes = 0;    // the file is kept up to here, the rest is cut (and its frames redone)
  uint64_t kept_lines = 0;
  uint64_t cut_lines = 0;     // complete lines after the cut point
  std::string cut_reason;     // why the file is cut where it is ("" when nothing is cut)
  bool summarized = false;    // the file ends with the job summary of a run that ended
  std::string summary_json;   // that summary's payload, as job.summary_path holds it ("" without)
  bool complete() const;      // every stream ended, departed ones too: nothing to resume
};

// Reads `config.publish.jsonl_path`. The cut point is the first line that is not a complete JSON
// line, a "stopped" end event (a stop, not the stream's end), or the job summary (of a stopped run):
// what came before is kept. A missing file resumes nothing (every stream from its first frame).
// Errors name the file and line: a result out of sequence (the file cannot give exactly once); and
// the file: none of its streams in the config.
Result<ResumePlan> read_resume_plan(const Config& config);

// The plan as a file for the stages, and back. VAPIPE_RESUME_PLAN names it for the stages.
Status write_resume_plan(const ResumePlan& plan, const std::string& path);
Result<ResumePlan> load_resume_plan(const std::string& path);
inline constexpr const char* kResumePlanEnv = "VAPIPE_RESUME_PLAN";
// The lines --resume cut from the file (up to kMostResumeCutBytes of them), kept in the run folder for
// publish: its sinks' delivery marks may be past the cut, and what they took of those lines, redone,
// is not sent to them again (stages/publish/sink_marks.h).
inline constexpr const char* kResumeCutFile = "resume-cut.jsonl";
inline constexpr uint64_t kMostResumeCutBytes = 64ull << 20;

// The plan of this process's job, if it resumes (VAPIPE_RESUME_PLAN set); an error if the file named
// cannot be read.
Result<std::optional<ResumePlan>> resume_plan_from_environment();

// --resume of a file that a stream had not finished (`earlier`, with results): is it still the
// recording its results are of? Ok when its beginning (file_head_hash) is as its `started` event said,
// or that event said none (a results file of before 2026-12-07) and its size is the same; a file with
// the same beginning and more bytes (a recorder appended to it) goes on, `*note` saying so. Else
// FailedPrecondition naming the file and both sizes: another recording under its name (the rest of it
// would follow the results of the first as one stream). `shown` is the file as errors name it.
Status check_resumed_file(const std::string& path, const std::string& shown, const StreamProgress& earlier,
                          std::string* note);

}  // namespace vapipe
