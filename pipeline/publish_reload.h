// What a live job's reload changes of its `publish` section. Its outputs (webhooks, MQTT brokers, Redis
// servers, Kafka clusters) and its segments' settings change while the job runs, in the running publish
// process (no restart: the bus, its subscribers and every stream's state go on); the rest of `publish`
// (the bus's address and keys, the metrics address, the results file, pictures and clips) needs a
// restart.
//
// The supervisor checks a reload with compare_publish_sections() (through apply_stream_reload(),
// pipeline/stream_table.h) and, when it passes, writes the reloaded text as the job's copy of its
// config (config_as_started_path); publish finds the copy rewritten and applies the same comparison.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipeline/status.h"

namespace vapipe {

struct PublishConfig;  // pipeline/config.h

// publish's settings that a running job takes from a reload, as the config names them: its outputs
// (webhooks, mqtt, redis, kafka) and its segments' settings.
const std::vector<std::string>& reloadable_publish_keys();
// Copies those settings from `from` into `to`, the rest of `to` as it was: what publish takes of a
// reloaded config. (The one list of them: a key added there is compared and taken.)
void take_reloadable_publish_settings(const PublishConfig& from, PublishConfig& to);

struct PublishReload {
  // One list of outputs (publish.webhooks, mqtt, redis or kafka). An entry of the reloaded list that is the
  // same as a running one (compared as YAML) keeps that one: its connection, its queue, its numbering.
  struct Outputs {
    // By the reloaded list's index: the running list's index of the entry it keeps, or none (a new one).
    std::vector<std::optional<size_t>> kept_from;
    std::vector<size_t> removed;  // the running list's indexes that no reloaded entry keeps
    size_t running = 0;           // the running list's length
    bool changed() const;
  };
  Outputs webhooks, mqtt, redis, kafka;
  // The segments' settings that changed, as the config names them ("segments_min_frames").
  std::vector<std::string> segment_keys;
  bool changed() const {
    return webhooks.changed() || mqtt.changed() || redis.changed() || kafka.changed() || !segment_keys.empty();
  }
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
