// What a live job's reload changes of its `publish` section. Its outputs (webhooks, MQTT brokers, Redis
// servers) and its segments' settings change while the job runs, in the running publish process (no
// restart: the bus, its subscribers and every stream's state go on); the rest of `publish` (the bus's
// address and keys, the metrics address, the results file, pictures and clips) needs a restart.
//
// The supervisor checks a reload with compare_publish_sections() (through apply_stream_reload(),
// pipeline/stream_table.h) and, when it passes, writes the reloaded text as the job's copy of its
// config (config_as_started_path); publish finds the copy rewritten and applies the same comparison.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipeline/status.h"

namespace YAML {
class Node;
}

namespace vapipe {

// A YAML value as the config reader takes it, whatever its style (flow or block, quoted or not, keys
// in any order, merge keys taken in): two values with the same text are the same settings.
std::string canonical_yaml(const YAML::Node& node);

// publish's settings that a running job takes from a reload, as the config names them.
inline constexpr const char* kReloadablePublishKeys[] = {
    "webhooks", "mqtt", "redis", "segments_min_frames", "segments_min_score", "segments_min_score_by_label",
    "segments_labels", "segments_picture_frame", "segments_pictures_keep_days"};

struct PublishReload {
  // One list of outputs (publish.webhooks, mqtt or redis). An entry of the reloaded list that is the
  // same as a running one (compared as YAML) keeps that one: its connection, its queue, its numbering.
  struct Outputs {
    // By the reloaded list's index: the running list's index of the entry it keeps, or none (a new one).
    std::vector<std::optional<size_t>> kept_from;
    std::vector<size_t> removed;  // the running list's indexes that no reloaded entry keeps
    size_t running = 0;           // the running list's length
    bool changed() const;
  };
  Outputs webhooks, mqtt, redis;
  // The segments' settings that changed, as the config names them ("segments_min_frames").
  std::vector<std::string> segment_keys;
  bool changed() const { return webhooks.changed() || mqtt.changed() || redis.changed() || !segment_keys.empty(); }
};

// Compares the `publish` sections of the running config's text and the reloaded one's. An error names
// the first setting that changed and cannot change while the job runs (`source`: the reloaded file,
// for the message; its line where the reloaded text has the key).
Result<PublishReload> compare_publish_sections(const std::string& running_yaml, const std::string& reloaded_yaml,
                                               const std::string& source);

// "publish.webhooks: added [2], removed [0]; publish.segments_min_frames": what the job's log says of a
// reload's outputs and settings; empty when none changed.
std::string describe_publish_reload(const PublishReload& change);

}  // namespace vapipe
