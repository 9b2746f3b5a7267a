// Stream URIs as the config gives them: anything GStreamer's uridecodebin opens (file://, rtsp://,
// http://...), a plain file path, or test://<pattern>?key=value for a synthetic videotestsrc stream.
// No GStreamer here: this is parsing and validation, so config errors are found at start-up.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipeline/status.h"

namespace vapipe {

enum class UriKind { kTest, kFile, kNetwork };

inline constexpr uint64_t kMaxTestFrames = 2147483647;  // GStreamer's num-buffers (a gint)

struct TestSourceSpec {
  std::string pattern = "smpte";  // a videotestsrc pattern nickname
  uint64_t frames = 300;          // 0 = endless (a live-like source); at most kMaxTestFrames
  uint32_t width = 640;
  uint32_t height = 480;
  uint32_t fps = 30;
  std::string format = "I420";    // I420 | NV12 | RGB
  std::string motion;             // ball only: wavy | sweep | hsweep
  int32_t speed = 0;              // horizontal-speed (pixels per frame)
  bool live = false;              // is-live=true: frames paced at fps
};

// Classifies a URI and, for plain paths, returns the file:// form (relative paths resolved against
// base_dir). Returns kInvalidArgument naming what is wrong.
struct ParsedUri {
  UriKind kind = UriKind::kFile;
  std::string uri;  // normalised
  TestSourceSpec test;
};
Result<ParsedUri> parse_stream_uri(std::string_view uri, const std::string& base_dir);

// The videotestsrc pattern nicknames vapipe accepts.
const std::vector<std::string>& test_patterns();

// Removes credentials (user:password@, and the values of a query's secret parameters: `pwd=`, `token=`,
// `Signature=`, ... as "***") so that a URI can be logged or published.
std::string redact_uri(std::string_view uri);

// A path as a shell reads it at its start: "~/x" is $HOME/x (the account's home if HOME is unset),
// "~name/x" that user's home; anything else, or a user that does not exist, as it is. (A config's
// "~/videos" was otherwise taken relative to the config's folder: "/etc/vapipe/~/videos".)
std::string expand_home(const std::string& path);

// The URI's scheme in lower case ("rtsp" of "RTSP://cam/s"); empty when it has none ("a/b.mp4").
std::string uri_scheme(std::string_view uri);

// Whether the URI's scheme is carried over TLS: rtsps:// (and rtspsu/rtspst/rtspsh), https://.
bool uri_uses_tls(std::string_view uri);

// Whether an http(s):// URI names a video file by its path's extension (.mp4, .mkv, .mov, .webm, .avi,
// ...) and has no query: a recording served whole, which ends, not a camera's stream (an MJPEG camera's
// /video.cgi, an MPEG-TS, HLS or HTTP-FLV stream, go2rtc's /api/stream.mp4?src=cam1, which are live).
bool names_a_video_file_over_http(std::string_view uri);

// Local path of a file:// URI ("" if not a file URI); percent-escapes decoded.
std::string file_uri_path(std::string_view uri);
// A path with what a URI path reserves (a space, '#', '%', '?', bytes past ASCII) percent-escaped, '/'
// kept: a local file's path in a file:// URI, or a served file's in an http:// one.
std::string percent_encode_path(const std::string& path);

// A network source (a camera, an HTTP stream) that several streams read, each with its own connection
// and its own decode: cameras allow few connections, and may refuse the extra ones.
struct SharedSource {
  std::string uri;                      // without credentials
  std::vector<std::string> stream_ids;  // two or more, in the order given
};
// The shared network sources among (stream id, normalised URI) pairs, in order of first appearance.
// URIs that differ only in their credentials name the same source.
std::vector<SharedSource> shared_network_sources(const std::vector<std::pair<std::string, std::string>>& streams);
// "streams 'a' and 'b' read the same source rtsp://host/x: ..." for a log line or `vapipe validate`.
std::string describe(const SharedSource& shared);

}  // namespace vapipe
