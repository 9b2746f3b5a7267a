// The envelope every frame carries through the pipeline (MediaPipe's typed Timestamp habit):
// stream id, a per-stream sequence number contiguous from 0, the presentation timestamp, the capture
// wall-clock time, and the time the frame entered each stage, so a result can report its latency
// breakdown.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "pipeline/status.h"

namespace vapipe {

enum class StageKind : uint8_t { kIngest = 0, kPreprocess, kBatch, kInfer, kPublish };
inline constexpr int kStageKindCount = 5;
const char* stage_kind_name(StageKind kind);
std::optional<StageKind> parse_stage_kind(std::string_view name);

// Nanoseconds since the Unix epoch on the wall clock (comparable across processes on one host).
int64_t wall_clock_ns();
// Nanoseconds on the host's monotonic clock (CLOCK_MONOTONIC: comparable across processes on one host,
// and never stepped as the wall clock is by NTP or a person): for how long something has lasted.
int64_t monotonic_clock_ns();

// A stream id is used in ZeroMQ topics and file names, so it is restricted to [A-Za-z0-9_.-]{1,64}.
Status validate_stream_id(std::string_view id);

struct Envelope {
  std::string stream_id;
  uint32_t stream_index = 0;   // position of the stream in the job config
  uint64_t seq = 0;            // per-stream, contiguous from 0; a gap means a frame was dropped
  int64_t pts_ns = -1;         // presentation timestamp from the decoder, -1 if unknown
  int64_t capture_ns = 0;      // wall clock when ingest received the decoded frame
  int64_t camera_ns = -1;      // the camera's own clock when it took the frame (RTCP), -1 if unknown
  // Decoded from incomplete data: a packet of this frame, or of one it refers to since the last key
  // frame, was lost on the way (RTP over UDP), or its decoder said it was corrupt. The decoder
  // concealed what was missing, so the picture may be smeared where it was.
  bool damaged = false;
  std::array<int64_t, kStageKindCount> stage_entry_ns{};  // wall clock at entry of each stage

  void mark_entry(StageKind stage, int64_t now_ns) { stage_entry_ns[static_cast<int>(stage)] = now_ns; }
  int64_t entry(StageKind stage) const { return stage_entry_ns[static_cast<int>(stage)]; }
};

}  // namespace vapipe
