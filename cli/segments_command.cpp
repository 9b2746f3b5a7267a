// vapipe segments RESULTS.jsonl|- [--stream ID] [--label LABEL] [--min-frames N [--bridge]] [--clock media|capture|camera]
//                 [--json]
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/segments.h"
#include "pipeline/supervisor.h"

namespace vapipe::cli {

int segments_command(const std::vector<std::string>& args) {
  std::string path;
  SegmentOptions options;
  bool json = false;
  // What the table's from and to are: the video's own time (a file's position), this machine's clock
  // when the frames were decoded, or the camera's clock (RTCP sender reports), as local times. A live
  // camera's media time is its RTP clock's running time, which says nothing to an operator.
  std::string clock = "media";
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--stream" && i + 1 < args.size()) {
      options.stream_id = args[++i];
    } else if (args[i] == "--label" && i + 1 < args.size()) {
      options.label = args[++i];
    } else if (args[i] == "--min-frames" && i + 1 < args.size()) {
      char* end = nullptr;
      const unsigned long long n = std::strtoull(args[++i].c_str(), &end, 10);
      if (!end || *end || n == 0) {
        std::fprintf(stderr, "vapipe segments: --min-frames wants a whole number from 1, got '%s'\n", args[i].c_str());
        return kExitUsage;
      }
      options.min_frames = n;
    } else if (args[i] == "--bridge") {
      options.bridge = true;
    } else if (args[i] == "--clock" && i + 1 < args.size()) {
      clock = args[++i];
      if (clock != "media" && clock != "capture" && clock != "camera") {
        std::fprintf(stderr, "vapipe segments: --clock is media, capture or camera, got '%s'\n", clock.c_str());
        return kExitUsage;
      }
    } else if (args[i] == "--json") {
      json = true;
    } else if (path.empty() && (args[i] == "-" || args[i].rfind("--", 0) != 0)) {
      path = args[i];
    } else {
      std::fprintf(stderr, "vapipe segments: unexpected argument '%s'\n", args[i].c_str());
      return kExitUsage;
    }
  }
  if (path.empty()) {
    std::fprintf(stderr, "vapipe segments: give a job's results file (publish.jsonl_path), or - for standard input\n");
    return kExitUsage;
  }
  std::ifstream file;
  if (path != "-") {
    file.open(path);
    if (!file) {
      std::fprintf(stderr, "vapipe segments: %s: cannot read it\n", path.c_str());
      return kExitUsage;
    }
  }
  // Each segment is printed as it ends (and flushed): `vapipe sub --with-topic | vapipe segments -`
  // logs a live job's label runs as they happen.
  const int width = clock == "media" ? 14 : 23;
  if (!json) {
    std::printf("%-24s %-20s %*s %*s %8s %6s\n", "stream", "label", width,
                clock == "media" ? "from" : ("from (" + clock + ")").c_str(), width,
                clock == "media" ? "to" : ("to (" + clock + ")").c_str(), "frames", "score");
  }
  auto print = [json, &clock, width](const Segment& s) {
    auto ms = [](double v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(); };
    if (json) {
      nlohmann::json j{{"stream_id", s.stream_id}, {"label", s.label},
                       {"start_ms", s.start_ms >= 0 ? nlohmann::json(s.start_ms) : nlohmann::json()},
                       {"end_ms", s.end_ms >= 0 ? nlohmann::json(s.end_ms) : nlohmann::json()},
                       {"start_seq", s.start_seq}, {"end_seq", s.end_seq}, {"frames", s.frames},
                       {"score_mean", s.score_mean()},
                       {"start_capture_unix_ms", ms(s.start_capture_ms)}, {"end_capture_unix_ms", ms(s.end_capture_ms)},
                       {"start_camera_unix_ms", ms(s.start_camera_ms)}, {"end_camera_unix_ms", ms(s.end_camera_ms)}};
      std::printf("%s\n", j.dump().c_str());
    } else {
      const std::string from = clock == "media"     ? media_time_text(s.start_ms)
                               : clock == "capture" ? clock_time_text(s.start_capture_ms)
                                                    : clock_time_text(s.start_camera_ms);
      const std::string to = clock == "media"     ? media_time_text(s.end_ms)
                             : clock == "capture" ? clock_time_text(s.end_capture_ms)
                                                  : clock_time_text(s.end_camera_ms);
      std::printf("%-24s %-20s %*s %*s %8llu %6.3f\n", s.stream_id.c_str(), s.label.c_str(), width, from.c_str(), width,
                  to.c_str(), static_cast<unsigned long long>(s.frames), s.score_mean());
    }
    std::fflush(stdout);
  };
  const std::string name = path == "-" ? "standard input" : path;
  uint64_t incomplete = 0;
  const Status read = for_each_segment(path == "-" ? std::cin : file, name, options, print, &incomplete);
  if (!read.ok()) {
    std::fprintf(stderr, "vapipe segments: %s\n", read.message().c_str());
    return kExitUsage;
  }
  if (incomplete) {
    std::fprintf(stderr, "vapipe segments: %s: its last line is incomplete (still being written?), left out\n",
                 name.c_str());
  }
  return 0;
}

}  // namespace vapipe::cli
