#include "pipeline/recorded_at.h"

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>

namespace vapipe {
namespace {

constexpr int64_t kNsPerSecond = 1000000000;
// Nanoseconds since 1970 in an int64_t reach 2262-04-11; a second less leaves room for a fraction.
constexpr int64_t kLastSecond = INT64_MAX / kNsPerSecond - 1;
constexpr const char* kOutsideRange = " (it must lie between 1970 and 2262)";

// A broken-down time read by strptime: local (mktime, TZ) unless it carried its own offset. Nothing
// for a time before 1970 or after 2262 (a year strptime read from digits that were something else).
std::optional<int64_t> unix_ns_of(std::tm tm, bool zoned, long offset_s) {
  int64_t seconds = 0;
  if (zoned) {
    seconds = static_cast<int64_t>(timegm(&tm)) - offset_s;
  } else {
    tm.tm_isdst = -1;  // whether summer time held then: mktime finds out
    const time_t local = mktime(&tm);
    if (local == static_cast<time_t>(-1)) return std::nullopt;
    seconds = local;
  }
  if (seconds < 0 || seconds > kLastSecond) return std::nullopt;
  return seconds * kNsPerSecond;
}

}  // namespace

Result<int64_t> parse_date_time(const std::string& text) {
  const std::string expected =
      "expected a date and time as ISO 8601 writes it (2026-11-30T14:30:00+01:00, or without a zone for this "
      "machine's local time), got '" + text + "'";
  std::tm tm{};
  const char* rest = nullptr;
  for (const char* format : {"%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"}) {
    tm = std::tm{};
    rest = strptime(text.c_str(), format, &tm);
    if (rest) break;
  }
  if (!rest) return InvalidArgument(expected);
  int64_t fraction_ns = 0;
  if (*rest == '.' || *rest == ',') {
    ++rest;
    int64_t scale = kNsPerSecond / 10;
    if (!std::isdigit(static_cast<unsigned char>(*rest))) return InvalidArgument(expected);
    for (; std::isdigit(static_cast<unsigned char>(*rest)); ++rest, scale /= 10) fraction_ns += (*rest - '0') * scale;
  }
  bool zoned = false;
  long offset_s = 0;
  if (*rest == 'Z' || *rest == 'z') {
    zoned = true;
    ++rest;
  } else if (*rest == '+' || *rest == '-') {
    const int sign = *rest == '-' ? -1 : 1;
    int hours = 0, minutes = 0, used = 0;
    if (std::sscanf(rest + 1, "%2d:%2d%n", &hours, &minutes, &used) == 2 ||
        std::sscanf(rest + 1, "%2d%2d%n", &hours, &minutes, &used) == 2) {
      rest += 1 + used;
    } else if (std::sscanf(rest + 1, "%2d%n", &hours, &used) == 1 && used == 2) {
      rest += 1 + used;
    } else {
      return InvalidArgument(expected);
    }
    if (hours > 14 || minutes > 59) return InvalidArgument(expected);
    zoned = true;
    offset_s = sign * (hours * 3600L + minutes * 60L);
  }
  if (*rest != '\0') return InvalidArgument(expected);
  const std::optional<int64_t> ns = unix_ns_of(tm, zoned, offset_s);
  if (!ns) return InvalidArgument(expected + kOutsideRange);
  return *ns + fraction_ns;
}

Result<RecordingStart> parse_recorded_at(const std::string& spec) {
  RecordingStart r;
  r.spec = spec;
  if (spec == "container") {
    r.from = RecordingStart::From::kContainer;
    return r;
  }
  if (spec.rfind("name:", 0) == 0) {
    const std::string format = spec.substr(5);
    // A format that reads a date: a year and a day of it, or seconds since the epoch.
    const bool year = format.find("%Y") != std::string::npos || format.find("%y") != std::string::npos ||
                      format.find("%F") != std::string::npos;
    const bool day = format.find("%d") != std::string::npos || format.find("%j") != std::string::npos ||
                     format.find("%F") != std::string::npos || format.find("%e") != std::string::npos;
    if (format.find("%s") == std::string::npos && !(year && day)) {
      return InvalidArgument("name:" + format + " reads no date from a file's name: give strptime's conversions for "
                             "at least the year and day (%Y %m %d, and %H %M %S for the time), as in "
                             "name:%Y%m%d_%H%M%S for 'cam1_20261130_143000.mp4'");
    }
    r.from = RecordingStart::From::kFileName;
    return r;
  }
  VAPIPE_ASSIGN_OR_RETURN(r.unix_ns, parse_date_time(spec));
  r.from = RecordingStart::From::kGiven;
  return r;
}

std::optional<int64_t> time_in_file_name(const std::string& path, const std::string& format) {
  const std::string name = std::filesystem::path(path).filename().string();
  const bool zoned = format.find("%z") != std::string::npos;
  for (size_t at = 0; at < name.size(); ++at) {
    std::tm tm{};
    if (!strptime(name.c_str() + at, format.c_str(), &tm)) continue;
    if (format.find("%s") != std::string::npos) {
      // %s is read as local broken-down time already: back to the same instant.
      if (auto ns = unix_ns_of(tm, false, 0)) return ns;
      continue;
    }
    if (auto ns = unix_ns_of(tm, zoned, zoned ? tm.tm_gmtoff : 0)) return ns;
  }
  return std::nullopt;
}

std::string local_time_text(int64_t unix_ns, bool with_offset) {
  const time_t seconds = static_cast<time_t>(unix_ns / kNsPerSecond);
  std::tm local{};
  if (!localtime_r(&seconds, &local)) return std::to_string(unix_ns / kNsPerSecond) + " s since 1970";
  char text[64];
  std::strftime(text, sizeof text, with_offset ? "%Y-%m-%d %H:%M:%S %z" : "%Y-%m-%d %H:%M:%S", &local);
  return text;
}

}  // namespace vapipe
