// streams[].recorded_at: when a file's recording started, so that each of its frames carries the time
// of day it shows (camera_unix_ms = the start + the frame's timestamp): what an analyst asks of a DVR
// export ("when was the truck at the gate?"). Three ways to know it: given in the config, read from
// the file's name (recorders name their files by the time they start), or the container's own
// creation date (a phone's or a body camera's MP4; a file exported or converted later says when that
// was done instead).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "pipeline/status.h"

namespace vapipe {

struct RecordingStart {
  enum class From : uint8_t { kNone = 0, kGiven, kFileName, kContainer };
  From from = From::kNone;
  // kGiven, and kFileName once the name was read: nanoseconds since the Unix epoch; -1: not known (a
  // file whose name holds no such time, or kContainer until the file says).
  int64_t unix_ns = -1;
  std::string spec;  // as the config wrote it: "container", "name:FORMAT" or the time
  bool known() const { return unix_ns >= 0; }
  bool operator==(const RecordingStart& o) const { return from == o.from && unix_ns == o.unix_ns && spec == o.spec; }
  bool operator!=(const RecordingStart& o) const { return !(*this == o); }
};

// A date and time as ISO 8601 writes it: "2026-11-30T14:30:00+01:00", "2026-11-30 14:30:00.250Z",
// "2026-11-30T14:30" (seconds and fractions optional; 'T' or a space); without a zone it is this
// machine's local time (TZ).
Result<int64_t> parse_date_time(const std::string& text);

// streams[].recorded_at's three forms: "container", "name:FORMAT" (strptime's conversions: %Y %m %d
// %H %M %S, %y, %b, %j, %s, %z, ...) or a date and time (parse_date_time). kFileName is resolved per
// file by time_in_file_name.
Result<RecordingStart> parse_recorded_at(const std::string& spec);

// The time FORMAT finds in a file's name (folders left out), at the first place in it where FORMAT
// reads whole: "ch01_20261130143000.mp4" with "%Y%m%d%H%M%S" is 2026-11-30 14:30:00. Local time (TZ)
// unless FORMAT has %z. nullopt where it reads nowhere.
std::optional<int64_t> time_in_file_name(const std::string& path, const std::string& format);

// "2026-11-30 14:30:00 +0100": a Unix time in this machine's local time, with its offset (or without
// it, `with_offset` false: "2026-11-30 14:30:00", for a line a person reads where the zone is theirs).
std::string local_time_text(int64_t unix_ns, bool with_offset = true);

}  // namespace vapipe
