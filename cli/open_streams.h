// Streams opened for real until their first decoded frame, as ingest opens them: `vapipe validate
// --open` (a config's streams) and `vapipe discover --open` (the stream URIs cameras gave).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "pipeline/config.h"

namespace vapipe::cli {

// What opening a stream until its first decoded frame showed: its size and format, or why not.
struct OpenedStream {
  std::string id;
  bool ok = false;
  std::string what;  // "1920x1080 I420, first frame after 0.42 s", or the error
};

// Each stream that decodes (not a `source`'s members) opened as ingest opens it (its TLS trust,
// rotation, decoder), without reconnection, until its first frame or `timeout`; `parallel` at once.
// Cameras answer in seconds, so 40 of them take about a minute, not ten. In the order given.
std::vector<OpenedStream> open_each_stream(const std::vector<StreamConfig>& streams, const IngestConfig& ingest,
                                           std::chrono::seconds timeout, size_t parallel);

}  // namespace vapipe::cli
