// The streams of a running live job, as the supervisor last applied them. `vapipe run` re-reads its
// config on SIGHUP and adds and removes streams without a restart; the other streams go on untouched.
//
// Indices are stable: a stream keeps its index (the envelope's stream_index) for the life of the run.
// A removed stream stays in the table, marked; an added one takes the next index, on the lane with the
// fewest live streams. The supervisor writes the table (run_dir/streams.json, mode 0600: URIs may hold
// passwords) before it tells anyone; ingest polls it and starts or stops its lane's streams; the other
// stages read it when they meet a stream they did not know, or before they would exit because every
// stream they knew has ended. Without a table, the job's streams are the config's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/config.h"
#include "pipeline/infer_reload.h"
#include "pipeline/ingest_reload.h"
#include "pipeline/job_layout.h"
#include "pipeline/placement.h"
#include "pipeline/publish_reload.h"
#include "pipeline/status.h"

namespace vapipe {

struct StreamTableEntry {
  uint32_t index = 0;
  std::string id;
  std::string uri;  // normalised, as in StreamConfig
  uint32_t lane = 0;
  bool removed = false;
  double max_fps = -1;  // StreamConfig::max_fps
  std::array<double, 4> roi{0, 0, 1, 1};  // StreamConfig::roi
  std::optional<bool> keyframes_only = std::nullopt;  // StreamConfig::keyframes_only
  std::optional<uint32_t> rtsp_latency_ms = std::nullopt;  // StreamConfig::rtsp_latency_ms
  std::string source = "";  // StreamConfig::source: a member of that stream's group, on its lane
  std::optional<Orientation> turn = std::nullopt;  // StreamConfig::turn (streams[].rotate, mirror)
  SourceTls tls = {};  // StreamConfig::tls (streams[].tls_ca_file, tls_verify)
  RecordingStart recorded = {};  // StreamConfig::recorded (streams[].recorded_at), resolved
  int64_t from_ns = 0, to_ns = -1;  // StreamConfig::from_ns, to_ns (streams[].from, to)
  bool loop = false;                 // StreamConfig::loop (streams[].loop)
};

struct StreamTable {
  uint64_t version = 0;  // raised by every reload (one that changed nothing too: ended cameras start again)
  int64_t writer_pid = 0;  // the supervisor that wrote it
  std::vector<StreamTableEntry> entries;  // entries[i].index == i
  size_t live_streams() const;
};

std::string stream_table_path(const JobLayout& layout);

// The job's streams as it started: the config's, on the lanes of the placement; written by this
// process (writer_pid).
StreamTable initial_stream_table(const Config& config, const Placement& placement);

// Written to a temporary file and renamed, so that a reader never sees half a table.
Status write_stream_table(const StreamTable& table, const std::string& path);
// nullopt: there is no table.
Result<std::optional<StreamTable>> read_stream_table(const std::string& path);
// For a stage process: the table of the supervisor that started it (its parent). nullopt also for a
// table some other process left (a supervisor that was killed, and stages now started by hand).
Result<std::optional<StreamTable>> read_job_stream_table(const std::string& path);

// The entry of a stream with `index` on `lane`: every setting of the stream that the table carries.
StreamTableEntry table_entry_of(const StreamConfig& stream, uint32_t index, uint32_t lane);

// The kind of an entry's (normalised) uri; one that does not parse counts as a file's (nothing starts
// again from it).
UriKind uri_kind_of(const std::string& uri);

// The StreamConfig of an entry (its URI parsed again).
Result<StreamConfig> stream_config_of(const StreamTableEntry& entry);

// What a reload changed of a running stream's settings, as the config names them ("uri, max_fps");
// empty when nothing. Members (`source`) take their source's decoding settings, so theirs show only
// their `roi`.
std::string changed_settings(const StreamTableEntry& before, const StreamTableEntry& after);
// Of those, the ones the stream's connection was made with, which need its source connected again (a
// new pipeline): `uri` and TLS trust. `roi` the next frame takes as it is; rotate/mirror, `max_fps`,
// `keyframes_only` and `rtsp_latency_ms` the running connection takes (StreamReader::retune). Empty
// when none.
std::string connection_settings_changed(const StreamTableEntry& before, const StreamTableEntry& after);
bool settings_need_new_connection(const StreamTableEntry& before, const StreamTableEntry& after);

// An entry with the job's ingest settings it takes filled in: max_fps and keyframes_only where it sets
// none of its own, and an RTSP source's rtsp_latency_ms (the others have no jitter buffer).
StreamTableEntry resolved_entry(const StreamTableEntry& entry, const IngestConfig& ingest);
// The same, as the stream decodes: its settings resolved against the job's ingest settings before the
// reload and after (pipeline/ingest_reload.h). A setting it takes from the job is named with the job's
// ("max_fps (ingest.max_fps)"); an own setting written as the job's value it had is no change.
std::string changed_settings(const StreamTableEntry& before, const StreamTableEntry& after,
                             const IngestConfig& ingest_before, const IngestConfig& ingest_after);
std::string connection_settings_changed(const StreamTableEntry& before, const StreamTableEntry& after,
                                        const IngestConfig& ingest_before, const IngestConfig& ingest_after);
bool settings_need_new_connection(const StreamTableEntry& before, const StreamTableEntry& after,
                                  const IngestConfig& ingest_before, const IngestConfig& ingest_after);

struct StreamReload {
  std::vector<std::string> added;    // ids
  std::vector<uint32_t> added_lanes;  // the lane of each
  std::vector<std::string> removed;  // ids
  // Running streams whose settings changed (`uri`, `max_fps`, `roi`, ...), kept under their ids, and
  // what changed of each (changed_settings).
  std::vector<std::string> retuned;
  std::vector<std::string> retuned_what;
  // Of each, whether it connects again to take them (connection_settings_changed: a gap in its
  // results, a camera's until its next key frame), or takes them as its connection goes on.
  std::vector<bool> retuned_connects;
  // Ids removed earlier in the run and listed again: cameras (and regions of them) that come back
  // under their id, index and lane, their numbering going on.
  std::vector<std::string> returned;
  bool changed() const { return !added.empty() || !removed.empty() || !retuned.empty() || !returned.empty(); }
  // What it changes of `publish` (its outputs, its segments' settings: pipeline/publish_reload.h).
  PublishReload publish;
  // What it changes of `ingest` (sampling, jitter buffers, reconnection: pipeline/ingest_reload.h).
  // The streams that take a new sampling or jitter buffer are in `retuned` too.
  IngestReload ingest;
  // What it changes of `infer` (the model and how it runs: pipeline/infer_reload.h).
  InferReload infer;
  // log.level, when it changed (every process takes it: pipeline/logging.h, LogLevelFollower).
  std::optional<std::string> log_level;
};

// Applies a reloaded config: streams with a new id are added, streams no longer listed are removed,
// and a running stream whose settings changed keeps its id, index and lane with its new settings: a
// camera's `uri` (a new address, a new password) and TLS trust (a new connection with them: ingest
// reconnects it, its numbering going on), any stream's `max_fps`, `keyframes_only`, `rtsp_latency_ms`
// and `rotate`/`mirror` (taken as its connection goes on: connection_settings_changed) and `roi` (from
// its next frame). An error leaves the table as it was and names what cannot change while the job
// runs: a section other than `streams`, `publish`, `ingest`, `infer` and `log`, or a setting of `publish`
// other than its outputs and segments' (compared as YAML: `running_yaml` is the config text the job runs
// with: compare_publish_sections()), or of `ingest` other than its sampling, jitter buffer and
// reconnection (compare_ingest_sections()), or of `infer` other than its model and how it runs
// (compare_infer_sections()), an archive job, a stream's source, a file's uri or TLS
// trust (a change would read it again from its start) or a uri that becomes or was a file's, a file's
// id removed earlier in this run (a camera's comes back: `returned`). A stream with a source is added
// on its source's lane. The table's version rises with every reload that passes.
Result<StreamReload> apply_stream_reload(StreamTable& table, const std::string& running_yaml,
                                         const std::string& reloaded_yaml, const Config& reloaded, size_t lanes);

}  // namespace vapipe
