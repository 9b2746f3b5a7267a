// The result bus's payloads: JSON, schema "vapipe.result" / "vapipe.event" / "vapipe.job_summary",
// version kSchemaVersion. This is a public contract (docs/result-schema.md): change it only by adding
// fields, or by bumping the version.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include <string>

#include "pipeline/message.h"

namespace vapipe {

inline constexpr int kSchemaVersion = 1;

std::string result_topic(const std::string& stream_id);  // "results/<stream_id>"
std::string event_topic(const std::string& stream_id);   // "events/<stream_id>"
std::string segment_topic(const std::string& stream_id); // "segments/<stream_id>"
inline constexpr const char* kJobSummaryTopic = "job/summary";

// One frame's result. `publish_ns` is the wall clock at publishing.
nlohmann::json result_json(const Message& result, int64_t publish_ns);
// A stream event: "started", "eos", "error", "reconnecting", "resumed" or "changed".
nlohmann::json event_json(const Message& event, int64_t publish_ns);

// A payload's text. Text from outside (file names, decoder messages) that is not UTF-8 was escaped as
// \xNN when the payload was made; anything left over becomes U+FFFD rather than an exception
// (nlohmann::json throws on invalid UTF-8, which would end publish and, in an archive job, the job).
std::string json_text(const nlohmann::json& payload, int indent = -1);

}  // namespace vapipe
