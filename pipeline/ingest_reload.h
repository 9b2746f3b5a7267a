// What a live job's reload changes of its `ingest` section. How streams are sampled (max_fps,
// keyframes_only), a camera's jitter buffer (rtsp_latency_ms) and how a stream that fails or stalls is
// reconnected (reconnect, reconnect_delay_s, reconnect_max_delay_s, reconnect_attempts,
// stall_timeout_s) change while the job runs, in its running ingest processes:
// - a stream that samples or buffers with a changed max_fps, keyframes_only or rtsp_latency_ms (one
//   that does not set its own) takes it as its connection goes on, with no new connection, a file's
//   stream too, as when a reload changes its own setting, its numbering going on
//   (pipeline/stream_table.h: changed_settings() of streams resolved against the job's ingest
//   settings before and after);
// - the reconnection settings are taken at once by every stream, with no new connection: the next
//   attempt, the next wait, the next look for a stall;
// - deinterlace (first_field | off) at each stream's next frame sent (it is read as a frame goes out);
// - orientation (upright | as_stored) from each stream's next frame kept: a file whose tag turns its
//   frames (and no rotate/mirror of its own) says it with a `changed` event before the first of them.
// The rest of `ingest` (the decoder, queues, decoder threads, the limits of files) needs a restart.
//
// As with publish's (pipeline/publish_reload.h), the supervisor checks a reload with
// compare_ingest_sections() (through apply_stream_reload()) and writes the reloaded text as the job's
// copy of its config before the new stream table; ingest reads the copy again when the table's version
// rises, and a lane started again reads it as it starts.
#pragma once

#include <string>
#include <vector>

#include "pipeline/config.h"
#include "pipeline/status.h"

namespace vapipe {

// ingest's settings that a running job takes from a reload, as the config names them.
const std::vector<std::string>& reloadable_ingest_keys();
// Copies those settings from `from` into `to`, the rest of `to` as it was. (The one list of them: a key
// added there is compared and taken.)
void take_reloadable_ingest_settings(const IngestConfig& from, IngestConfig& to);
// The reloadable settings whose values differ, as the config names them ("max_fps").
std::vector<std::string> changed_ingest_settings(const IngestConfig& before, const IngestConfig& after);
struct IngestReload {
  std::vector<std::string> keys;  // the reloadable settings whose values changed
  IngestConfig before, after;     // their values as the job runs them, and as reloaded
  bool changed() const { return !keys.empty(); }
};

// Compares the `ingest` sections of the running config's text and the reloaded one's (`reloaded`: the
// reloaded config's, as read). An error names the first setting that changed and cannot change while
// the job runs, with the line of the reloaded file (`source`) that has it. Settings are compared by
// value: `max_fps: 5` and `max_fps: 5.0` are the same.
Result<IngestReload> compare_ingest_sections(const std::string& running_yaml, const std::string& reloaded_yaml,
                                             const std::string& source, const IngestConfig& reloaded);

// "ingest.max_fps, ingest.reconnect_attempts changed"; empty when none did.
std::string describe_ingest_reload(const IngestReload& change);

}  // namespace vapipe
