// vapipe segments RESULTS.jsonl...|- [--stream ID]... [--label LABEL]... [--min-frames N [--bridge]] [--min-score S|LABEL=S]... [--each-label] [--skip-damaged]
//                 [--reconnect-grace S] [--join NAME=PATTERN [--join-gap S]]... [--clock media|capture|camera]
//                 [--frames DIR [--picture best|first]] [--clips DIR [--clip-pre S] [--clip-post S]]
//                 [--moved FROM TO]... [--json|--csv]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "cli/segment_clips.h"
#include "cli/segment_frames.h"
#include "cli/segments.h"
#include "pipeline/supervisor.h"

namespace vapipe::cli {

namespace {

// A flag's value in seconds from 0 to `max`, or nullopt when it is not one (said, naming the flag).
std::optional<double> seconds_of(const std::string& flag, const std::string& text, int max) {
  char* end = nullptr;
  const double seconds = std::strtod(text.c_str(), &end);
  if (text.empty() || !end || *end || !(seconds >= 0 && seconds <= max)) {
    std::fprintf(stderr, "vapipe segments: %s wants seconds from 0 to %d, got '%s'\n", flag.c_str(), max, text.c_str());
    return std::nullopt;
  }
  return seconds;
}

}  // namespace

int segments_command(const std::vector<std::string>& args) {
  std::vector<std::string> paths;  // read as one, in order (a live job's files named by the date)
  SegmentOptions options;
  bool json = false;
  bool csv = false;  // a spreadsheet's: a header, then a line per segment
  // What the table's from and to are: the video's own time (a file's position), this machine's clock
  // when the frames were decoded, or the camera's clock (RTCP sender reports), as local times. A live
  // camera's media time is its RTP clock's running time, which says nothing to an operator.
  std::string clock = "media";
  bool clock_given = false;
  bool join_gap_given = false;
  std::string frames_dir;  // --frames: a picture of each segment as a JPEG under it
  std::string clips_dir;   // --clips: a clip of each segment as an MP4 under it
  double clip_pre_s = 5, clip_post_s = 5;
  bool clip_span_given = false;
  // --picture: which frame: its best (the highest score of its label: the truck in full view), or its
  // first (the moment it began: the truck's bumper coming in).
  SegmentPicture picture_kind = SegmentPicture::kBest;
  bool picture_given = false;
  bool min_frames_given = false;
  std::vector<MovedFolder> moved;  // --moved FROM TO: where a moved archive's files are now
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--stream" && i + 1 < args.size()) {
      options.stream_ids.insert(args[++i]);
    } else if (args[i] == "--label" && i + 1 < args.size()) {
      options.labels.insert(args[++i]);
    } else if (args[i] == "--min-frames" && i + 1 < args.size()) {
      char* end = nullptr;
      const std::string& given = args[++i];
      const unsigned long long n = std::strtoull(given.c_str(), &end, 10);
      if (given.empty() || given.find_first_not_of("0123456789") != std::string::npos || !end || *end || n == 0) {
        std::fprintf(stderr, "vapipe segments: --min-frames wants a whole number from 1, got '%s'\n", args[i].c_str());
        return kExitUsage;
      }
      options.min_frames = n;
      min_frames_given = true;
    } else if (args[i] == "--min-score" && i + 1 < args.size()) {
      // S for every label, or LABEL=S for one (given again for others); a label may hold '=': the last one splits.
      const std::string& given = args[++i];
      const size_t eq = given.rfind('=');
      const std::string label = eq == std::string::npos ? "" : given.substr(0, eq);
      const std::string number = eq == std::string::npos ? given : given.substr(eq + 1);
      char* end = nullptr;
      const double s = std::strtod(number.c_str(), &end);
      if (number.empty() || !end || *end || !(s >= 0 && s <= 1) || (eq != std::string::npos && label.empty())) {
        std::fprintf(stderr, "vapipe segments: --min-score wants a score from 0 to 1, or LABEL=SCORE, got '%s'\n",
                     given.c_str());
        return kExitUsage;
      }
      if (eq == std::string::npos) {
        options.min_score = s;
      } else {
        options.min_score_by_label[label] = s;
      }
    } else if (args[i] == "--join" && i + 1 < args.size()) {
      // NAME=PATTERN: the streams whose ids match PATTERN are one camera's consecutive files, read as NAME.
      const std::string& given = args[++i];
      const size_t eq = given.find('=');
      JoinedStreams join;
      if (eq != std::string::npos) join = {given.substr(0, eq), given.substr(eq + 1)};
      if (join.name.empty() || join.pattern.empty() || join.name.find('/') != std::string::npos) {
        std::fprintf(stderr, "vapipe segments: --join wants NAME=PATTERN, the streams whose ids match PATTERN (a shell "
                             "pattern, quoted: 'cam1-*') read as one stream NAME; got '%s'\n", given.c_str());
        return kExitUsage;
      }
      for (const JoinedStreams& other : options.joins) {
        if (other.name == join.name) {
          std::fprintf(stderr, "vapipe segments: --join %s is given twice\n", join.name.c_str());
          return kExitUsage;
        }
      }
      options.joins.push_back(std::move(join));
    } else if (args[i] == "--join-gap" && i + 1 < args.size()) {
      const std::optional<double> gap = seconds_of(args[i], args[i + 1], 86400);
      ++i;
      if (!gap) return kExitUsage;
      options.join_gap_ms = *gap * 1000;
      join_gap_given = true;
    } else if (args[i] == "--each-label") {
      options.each_label = true;
    } else if (args[i] == "--skip-damaged") {
      options.skip_damaged = true;
    } else if (args[i] == "--reconnect-grace" && i + 1 < args.size()) {
      const std::optional<double> grace = seconds_of(args[i], args[i + 1], 3600);
      ++i;
      if (!grace) return kExitUsage;
      options.reconnect_grace_s = *grace;
    } else if (args[i] == "--bridge") {
      options.bridge = true;
    } else if (args[i] == "--clock" && i + 1 < args.size()) {
      clock = args[++i];
      clock_given = true;
      if (clock != "media" && clock != "capture" && clock != "camera") {
        std::fprintf(stderr, "vapipe segments: --clock is media, capture or camera, got '%s'\n", clock.c_str());
        return kExitUsage;
      }
    } else if (args[i] == "--frames" && i + 1 < args.size()) {
      frames_dir = args[++i];
      if (frames_dir.empty()) {
        std::fprintf(stderr, "vapipe segments: --frames wants a folder for the pictures\n");
        return kExitUsage;
      }
    } else if (args[i] == "--clips" && i + 1 < args.size()) {
      clips_dir = args[++i];
      if (clips_dir.empty()) {
        std::fprintf(stderr, "vapipe segments: --clips wants a folder for the clips\n");
        return kExitUsage;
      }
    } else if ((args[i] == "--clip-pre" || args[i] == "--clip-post") && i + 1 < args.size()) {
      const std::string& flag = args[i];
      const std::optional<double> seconds = seconds_of(flag, args[i + 1], 600);
      ++i;
      if (!seconds) return kExitUsage;
      (flag == "--clip-pre" ? clip_pre_s : clip_post_s) = *seconds;
      clip_span_given = true;
    } else if (args[i] == "--picture" && i + 1 < args.size()) {
      const std::string& which = args[++i];
      if (which != "best" && which != "first") {
        std::fprintf(stderr, "vapipe segments: --picture is best or first, got '%s'\n", which.c_str());
        return kExitUsage;
      }
      picture_kind = which == "best" ? SegmentPicture::kBest : SegmentPicture::kFirst;
      picture_given = true;
    } else if (args[i] == "--moved" && i + 2 < args.size()) {
      // Folders given as typed, compared as paths: without a trailing '/' ("/" stays "/").
      auto folder = [](std::string f) {
        while (f.size() > 1 && f.back() == '/') f.pop_back();
        return f;
      };
      MovedFolder m{folder(args[i + 1]), folder(args[i + 2])};
      i += 2;
      if (m.from.empty() || m.from[0] != '/') {
        std::fprintf(stderr, "vapipe segments: --moved FROM TO: FROM is the folder as the results name its files, an "
                             "absolute path; got '%s'\n", m.from.c_str());
        return kExitUsage;
      }
      std::error_code ec;
      if (m.to.empty() || !std::filesystem::is_directory(m.to, ec)) {
        std::fprintf(stderr, "vapipe segments: --moved FROM TO: TO (%s) is not a folder here\n", m.to.c_str());
        return kExitUsage;
      }
      m.to = folder(std::filesystem::absolute(m.to, ec).lexically_normal().string());
      moved.push_back(std::move(m));
    } else if (args[i] == "--json") {
      json = true;
    } else if (args[i] == "--csv") {
      csv = true;
    } else if (args[i] == "-" || args[i].rfind("--", 0) != 0) {
      paths.push_back(args[i]);
    } else {
      std::fprintf(stderr, "vapipe segments: unexpected argument '%s'\n", args[i].c_str());
      return kExitUsage;
    }
  }
  if (paths.empty()) {
    std::fprintf(stderr, "vapipe segments: give a job's results file (publish.jsonl_path), or - for standard input\n");
    return kExitUsage;
  }
  if (options.each_label && options.min_score <= 0) {
    std::fprintf(stderr, "vapipe segments: --each-label needs --min-score S (above 0): a label is on a frame when its "
                         "score reaches S\n");
    return kExitUsage;
  }
  for (const auto& [label, s] : options.min_score_by_label) {
    if (options.each_label && s <= 0) {
      std::fprintf(stderr, "vapipe segments: --min-score %s=0 with --each-label would put '%s' on every frame whose "
                           "top_k names it: give a score above 0\n", label.c_str(), label.c_str());
      return kExitUsage;
    }
  }
  if (json && csv) {
    std::fprintf(stderr, "vapipe segments: --json or --csv, not both\n");
    return kExitUsage;
  }
  if (join_gap_given && options.joins.empty()) {
    std::fprintf(stderr, "vapipe segments: --join-gap says when a --join's files follow on: give --join too\n");
    return kExitUsage;
  }
  if (!options.joins.empty()) {
    // A joined segment may begin in one file and end in the next, whose own times start again at 0.
    if (clock_given && clock == "media") {
      std::fprintf(stderr, "vapipe segments: --join with --clock media: a joined segment may begin in one file and end "
                           "in another, whose times say nothing across them; use --clock camera (the default with "
                           "--join) or capture\n");
      return kExitUsage;
    }
    if (!clock_given) clock = "camera";
  }
  options.note = [](const std::string& text) { std::fprintf(stderr, "vapipe segments: %s\n", text.c_str()); };
  bool named_nothing = false;  // a --stream, --label, --min-score or --join that no result has: exit 1
  options.unmatched = [&named_nothing](const std::string& text) {
    std::fprintf(stderr, "vapipe segments: %s\n", text.c_str());
    named_nothing = true;
  };
  if (options.bridge && !min_frames_given) {
    std::fprintf(stderr, "vapipe segments: --bridge joins runs of a label across what lasted fewer than --min-frames "
                         "frames between them: give --min-frames too\n");
    return kExitUsage;
  }
  if (picture_given && frames_dir.empty()) {
    std::fprintf(stderr, "vapipe segments: --picture says which frame --frames DIR writes: give --frames too\n");
    return kExitUsage;
  }
  if (clip_span_given && clips_dir.empty()) {
    std::fprintf(stderr, "vapipe segments: --clip-pre and --clip-post say what --clips DIR cuts: give --clips too\n");
    return kExitUsage;
  }
  if (!moved.empty() && frames_dir.empty() && clips_dir.empty()) {
    std::fprintf(stderr, "vapipe segments: --moved says where --frames DIR or --clips DIR reads the files from: give "
                 "one of them too\n");
    return kExitUsage;
  }
  const bool standard_input = paths.size() == 1 && paths[0] == "-";
  std::vector<std::unique_ptr<std::ifstream>> files;
  std::vector<SegmentInput> inputs;
  for (const std::string& path : standard_input ? std::vector<std::string>{} : paths) {
    if (path == "-") {
      std::fprintf(stderr, "vapipe segments: - (standard input) is read alone, not among files\n");
      return kExitUsage;
    }
    files.push_back(std::make_unique<std::ifstream>(path));
    if (!*files.back()) {
      std::fprintf(stderr, "vapipe segments: %s: cannot read it\n", path.c_str());
      return kExitUsage;
    }
    inputs.push_back(SegmentInput{files.back().get(), path});
  }
  if (standard_input) inputs.push_back(SegmentInput{&std::cin, "standard input"});
  // Each segment is printed as it ends (and flushed): `vapipe sub --with-topic | vapipe segments -`
  // logs a live job's label runs as they happen.
  const int width = clock == "media" ? 14 : 23;
  if (csv) {
    std::printf("%s%s\n", segment_csv_header().c_str(), clips_dir.empty() ? "" : ",clip");
  } else if (!json) {
    std::printf("%-24s %-20s %*s %*s %8s %6s%s\n", "stream", "label", width,
                clock == "media" ? "from" : ("from (" + clock + ")").c_str(), width,
                clock == "media" ? "to" : ("to (" + clock + ")").c_str(), "frames", "score",
                (std::string(frames_dir.empty() ? "" : "  picture") + (clips_dir.empty() ? "" : "  clip")).c_str());
  }
  options.read_events_first = !frames_dir.empty() || !clips_dir.empty();
  std::unique_ptr<SegmentFrames> pictures;
  if (!frames_dir.empty()) pictures = std::make_unique<SegmentFrames>(frames_dir, picture_kind, moved);
  std::unique_ptr<SegmentClips> clips;
  if (!clips_dir.empty()) clips = std::make_unique<SegmentClips>(clips_dir, clip_pre_s, clip_post_s, moved);
  // A file that changed since the job read it: another recording (replaced) has no pictures or clips
  // (its stream put in `unusable`); one appended to or cut has them made; either said once.
  std::set<std::string> grown_said;
  // Each file looked at once (its size, and 64 KiB of it hashed), not once per segment of it.
  std::map<std::string, std::pair<Status, bool>> file_verdicts;
  auto changed_file = [&](const Segment& s, const char* what, std::set<std::string>& unusable) {
    const std::string key = s.uri + '\n' + std::to_string(s.file_bytes) + '\n' + s.file_head;
    auto verdict = file_verdicts.find(key);
    if (verdict == file_verdicts.end()) {
      bool usable = true;
      Status unchanged = file_unchanged_since_classified(s, moved, &usable);
      verdict = file_verdicts.emplace(key, std::make_pair(std::move(unchanged), usable)).first;
    }
    const Status& unchanged = verdict->second.first;
    const bool still_usable = verdict->second.second;
    if (unchanged.ok()) return false;
    if (still_usable) {
      if (grown_said.insert(s.stream_id).second) {
        std::fprintf(stderr, "vapipe segments: stream '%s': %s\n", s.stream_id.c_str(), unchanged.message().c_str());
      }
      return false;
    }
    unusable.insert(s.stream_id);
    std::fprintf(stderr, "vapipe segments: stream '%s': no %s: %s\n", s.stream_id.c_str(), what, unchanged.message().c_str());
    return true;
  };
  std::set<std::string> unclippable;  // streams whose frames cannot be cut again (cameras): said once
  // The clip of a segment: its path, or "" (why said on standard error).
  auto clip_of = [&](const Segment& s) -> std::string {
    if (!clips || unclippable.count(s.stream_id)) return "";
    if (changed_file(s, "clips", unclippable)) return "";
    auto path = clips->save(s);
    if (path.ok()) return path.value();
    if (path.status().code() == StatusCode::kFailedPrecondition || s.uri.empty()) {
      unclippable.insert(s.stream_id);
      std::fprintf(stderr, "vapipe segments: stream '%s': no clips: %s\n", s.stream_id.c_str(),
                   path.status().message().c_str());
    } else {
      std::fprintf(stderr, "vapipe segments: stream '%s': no clip of its %s at %s: %s\n", s.stream_id.c_str(),
                   s.label.c_str(), media_time_text(s.start_ms).c_str(), path.status().message().c_str());
    }
    return "";
  };
  std::set<std::string> unreadable;  // streams whose frames cannot be read again (cameras): said once
  // The picture of a segment: its path, or "" (why said on standard error).
  auto picture_of = [&](const Segment& joined) -> std::string {
    if (!pictures) return "";
    // A --join's segment: its picture is of a frame of one of its files, kept with that file's own.
    Segment s = joined;
    if (!joined.start_stream.empty()) {
      const bool best = picture_kind == SegmentPicture::kBest;
      s.stream_id = best ? joined.best_stream : joined.start_stream;
      if (best && !joined.best_uri.empty()) s.uri = joined.best_uri;
      if (best) s.timeline_restart_ms = joined.best_timeline_restart_ms;
      if (best && !joined.best_uri.empty()) {
        s.file_bytes = joined.best_file_bytes;
        s.file_head = joined.best_file_head;
        s.pts_media_times = joined.best_pts_media_times;
      }
    }
    // A camera's frames are gone, but its live job may have taken the picture as the segment began.
    if (!s.live_picture.empty() && s.uri.rfind("file://", 0) != 0) return s.live_picture;
    if (unreadable.count(s.stream_id)) return "";
    if (changed_file(s, "pictures", unreadable)) return "";
    auto path = pictures->save(s);
    if (path.ok()) return path.value();
    const bool whole_stream = path.status().code() == StatusCode::kFailedPrecondition || s.uri.empty();
    if (whole_stream) {
      unreadable.insert(s.stream_id);
      std::fprintf(stderr, "vapipe segments: stream '%s': no pictures: %s\n", s.stream_id.c_str(),
                   path.status().message().c_str());
    } else {
      std::fprintf(stderr, "vapipe segments: stream '%s': no picture of its %s at %s: %s\n", s.stream_id.c_str(),
                   s.label.c_str(), media_time_text(pictures->picture_ms(s)).c_str(), path.status().message().c_str());
    }
    return "";
  };
  auto print = [json, csv, &clock, width, &picture_of, &pictures, &clip_of, &clips](const Segment& s) {
    auto ms = [](double v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(); };
    const std::string picture = picture_of(s);
    const std::string clip = clip_of(s);
    if (json) {
      nlohmann::json j{{"stream_id", s.stream_id}, {"label", s.label},
                       {"start_ms", s.start_ms >= 0 ? nlohmann::json(s.start_ms) : nlohmann::json()},
                       {"end_ms", s.end_ms >= 0 ? nlohmann::json(s.end_ms) : nlohmann::json()},
                       {"start_seq", s.start_seq}, {"end_seq", s.end_seq}, {"frames", s.frames},
                       {"score_mean", s.score_mean()}, {"best_seq", s.best_seq}, {"best_ms", ms(s.best_ms)},
                       {"best_score", s.best_score}, {"best_capture_unix_ms", ms(s.best_capture_ms)},
                       {"damaged_frames", s.damaged_frames}, {"reconnections", s.reconnections},
                       {"start_capture_unix_ms", ms(s.start_capture_ms)}, {"end_capture_unix_ms", ms(s.end_capture_ms)},
                       {"start_camera_unix_ms", ms(s.start_camera_ms)}, {"end_camera_unix_ms", ms(s.end_camera_ms)}};
      if (!s.start_stream.empty()) {  // a --join's: the files its frames are in (their seq and ms are theirs)
        j["start_stream_id"] = s.start_stream;
        j["end_stream_id"] = s.end_stream;
        j["best_stream_id"] = s.best_stream;
      }
      if (pictures) j["picture"] = picture.empty() ? nlohmann::json() : nlohmann::json(picture);
      if (clips) j["clip"] = clip.empty() ? nlohmann::json() : nlohmann::json(clip);
      std::printf("%s\n", j.dump().c_str());
    } else {
      const std::string from = clock == "media"     ? media_time_text(s.start_ms)
                               : clock == "capture" ? clock_time_text(s.start_capture_ms)
                                                    : clock_time_text(s.start_camera_ms);
      const std::string to = clock == "media"     ? media_time_text(s.end_ms)
                             : clock == "capture" ? clock_time_text(s.end_capture_ms)
                                                  : clock_time_text(s.end_camera_ms);
      if (csv) {
        // (a clip's path is quoted as the picture's is, when it needs it)
        std::printf("%s%s\n", segment_csv_row(s, from, to, picture).c_str(),
                    clips ? ("," + csv_field(clip)).c_str() : "");
      } else {
        std::printf("%-24s %-20s %*s %*s %8llu %6.3f%s%s\n", s.stream_id.c_str(), s.label.c_str(), width, from.c_str(),
                    width, to.c_str(), static_cast<unsigned long long>(s.frames), s.score_mean(),
                    pictures ? ("  " + (picture.empty() ? std::string("-") : picture)).c_str() : "",
                    clips ? ("  " + (clip.empty() ? std::string("-") : clip)).c_str() : "");
      }
    }
    std::fflush(stdout);
  };
  uint64_t incomplete = 0;
  const Status read = for_each_segment(inputs, options, print, &incomplete);
  if (!read.ok()) {
    std::fprintf(stderr, "vapipe segments: %s\n", read.message().c_str());
    return kExitUsage;
  }
  if (incomplete) {
    const std::string what = inputs.size() == 1 ? inputs[0].name + ": its last line is" : std::to_string(incomplete) +
                                                                                        " last lines are";
    std::fprintf(stderr, "vapipe segments: %s incomplete (still being written?), left out\n", what.c_str());
  }
  return named_nothing ? kExitUsage : 0;
}

}  // namespace vapipe::cli
