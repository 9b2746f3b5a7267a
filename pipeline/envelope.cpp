#include <cstdint>

#include "pipeline/envelope.h"

namespace vapipe {

const char* stage_kind_name(StageKind kind) {
  switch (kind) {
    case StageKind::kIngest: return "ingest";
    case StageKind::kPreprocess: return "preprocess";
    case StageKind::kBatch: return "batch";
    case StageKind::kInfer: return "infer";
    case StageKind::kPublish: return "publish";
  }
  return "unknown";
}

std::optional<StageKind> parse_stage_kind(std::string_view name) {
  for (int i = 0; i < kStageKindCount; ++i) {
    auto kind = static_cast<StageKind>(i);
    if (name == stage_kind_name(kind)) return kind;
  }
  return std::nullopt;
}

int64_t monotonic_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t wall_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Status validate_stream_id(std::string_view id) {
  if (id.empty() || id.size() > 64) {
    return InvalidArgument("stream id '" + std::string(id) + "' must be 1 to 64 characters");
  }
  if (id == "." || id == "..") {
    // Ids name folders (pictures of segments, DIR/<stream>/...): these two are folders already.
    return InvalidArgument("stream id '" + std::string(id) + "' may not be '.' or '..'");
  }
  for (char c : id) {
    bool allowed = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '_' || c == '-' || c == '.';
    if (!allowed) {
      return InvalidArgument("stream id '" + std::string(id) +
                             "' may only contain letters, digits, '_', '-' and '.'");
    }
  }
  return Status::Ok();
}

}  // namespace vapipe
