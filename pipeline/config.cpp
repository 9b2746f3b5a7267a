#include "pipeline/config.h"

#include <cstdint>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <tuple>
#include <set>
#include <sstream>
#include <string_view>

#include <strings.h>

#include "pipeline/demo_config.h"  // generated: kDemoConfigYaml, kSourceDir, kInstallDataDir
#include "pipeline/http_url.h"
#include "pipeline/token_file.h"
#include "pipeline/stream_glob.h"
#include "pipeline/results_path.h"
#include "pipeline/stream_uri.h"
#include "pipeline/utf8.h"

namespace vapipe {

Orientation orientation_from_rotation(uint32_t degrees, bool mirror) {
  switch (degrees) {
    case 90: return mirror ? Orientation::kTransverse : Orientation::kRotate90;  // "flip-rotate-90"
    case 180: return mirror ? Orientation::kFlipVertical : Orientation::kRotate180;
    case 270: return mirror ? Orientation::kTranspose : Orientation::kRotate270;
    default: return mirror ? Orientation::kFlipHorizontal : Orientation::kAsStored;
  }
}

Result<int64_t> parse_media_time(const std::string& text) {
  const std::string expected = "expected seconds (5400) or [H:]MM:SS[.fff] (1:30:00) of the video's own time, got '" +
                               text + "'";
  // Up to three fields separated by ':', the last with an optional fraction; each a plain number.
  std::vector<std::string> fields;
  size_t start = 0;
  for (size_t colon; (colon = text.find(':', start)) != std::string::npos; start = colon + 1) {
    fields.push_back(text.substr(start, colon - start));
  }
  fields.push_back(text.substr(start));
  if (fields.size() > 3) return InvalidArgument(expected);
  double total = 0;
  for (size_t i = 0; i < fields.size(); ++i) {
    const std::string& f = fields[i];
    const bool last = i + 1 == fields.size();
    const bool digits = !f.empty() && std::all_of(f.begin(), f.end(), [&](char c) {
      return std::isdigit(static_cast<unsigned char>(c)) || (last && c == '.');
    });
    if (!digits || std::count(f.begin(), f.end(), '.') > 1 || f.front() == '.' || f.back() == '.') {
      return InvalidArgument(expected);
    }
    const double v = std::stod(f);
    if (i > 0 && v >= 60) return InvalidArgument(expected + " (minutes and seconds below 60)");
    total = total * 60 + v;
  }
  if (total > 1e7) return InvalidArgument(expected + " (more than 115 days)");
  return static_cast<int64_t>(std::llround(total * 1e9));
}

Result<std::string> parse_tls_fingerprint(const std::string& text) {
  std::string hex;
  std::string rest = text;
  // What openssl prints: "sha256 Fingerprint=AB:..." (or "SHA256 Fingerprint="); also "sha256:AB...".
  for (const char* prefix : {"sha256 fingerprint=", "sha256:", "sha256 "}) {
    const size_t n = std::strlen(prefix);
    if (rest.size() > n && std::equal(prefix, prefix + n, rest.begin(), [](char a, char b) {
          return a == std::tolower(static_cast<unsigned char>(b));
        })) {
      rest = rest.substr(n);
      break;
    }
  }
  for (char c : rest) {
    if (c == ':' || c == ' ') continue;
    if (!std::isxdigit(static_cast<unsigned char>(c))) {
      return InvalidArgument("expected the camera certificate's SHA-256 fingerprint, 64 hex digits (as `openssl x509 "
                             "-noout -fingerprint -sha256` prints it: AB:CD:...), got '" + text + "'");
    }
    hex += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  if (hex.size() != 64) {
    return InvalidArgument("expected the camera certificate's SHA-256 fingerprint, 64 hex digits (as `openssl x509 "
                           "-noout -fingerprint -sha256` prints it: AB:CD:...), got " + std::to_string(hex.size()) +
                           " in '" + text + "'" + (hex.size() == 40 ? " (a SHA-1 fingerprint? give -sha256)" : ""));
  }
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) out += (i ? ":" : "") + hex.substr(i, 2);
  return out;
}

std::string media_time_text(int64_t ns) {
  const int64_t ms = (ns + 500000) / 1000000;
  char text[40];
  const long long h = ms / 3600000, m = ms / 60000 % 60, s = ms / 1000 % 60, milli = ms % 1000;
  if (h > 0) {
    std::snprintf(text, sizeof text, "%lld:%02lld:%02lld.%03lld", h, m, s, milli);
  } else {
    std::snprintf(text, sizeof text, "%lld:%02lld.%03lld", m, s, milli);
  }
  return text;
}

namespace {

// "'a.mp4', 'b.mp4' and 3 more": the first five of some file names, for a message.
std::string name_list(const std::vector<std::string>& names) {
  std::ostringstream text;
  for (size_t k = 0; k < names.size() && k < 5; ++k) text << (k ? ", '" : "'") << names[k] << "'";
  if (names.size() > 5) text << " and " << names.size() - 5 << " more";
  return text.str();
}

// streams[].from or to written as a date ("2026-11-30T14:10:00"), not in the video's own time.
bool looks_like_date(const std::string& text) { return text.size() > 4 && text[4] == '-'; }

// streams[].from and to as times of day: placed in a file by when its recording started.
struct TimeOfDayPart {
  std::optional<int64_t> from_unix_ns, to_unix_ns;
  bool given() const { return from_unix_ns || to_unix_ns; }
  // Sets the file's from_ns and to_ns; false when its recording starts at or after the part's end.
  bool place(StreamConfig* s) const {
    const int64_t start = s->recorded.unix_ns;
    s->from_ns = from_unix_ns ? std::max<int64_t>(0, *from_unix_ns - start) : 0;
    s->to_ns = to_unix_ns ? *to_unix_ns - start : -1;
    return !to_unix_ns || s->to_ns > 0;
  }
};

// A number as a config file would give it: 60, 0.5.
std::string number_text(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

// Thrown inside this file only; load_config_* turns it into a Status.
struct ConfigError {
  std::string message;
};

// Whether two keys are a typo apart: one letter left out, added, changed or two swapped ("topicz",
// "usename", "keyfile" for key_file, "segments_min_frame").
bool one_edit_apart(const std::string& a, const std::string& b) {
  if (a == b || a.size() < 3 || b.size() < 3) return false;
  const std::string& longer = a.size() >= b.size() ? a : b;
  const std::string& shorter = a.size() >= b.size() ? b : a;
  if (longer.size() - shorter.size() > 1) return false;
  size_t i = 0;
  while (i < shorter.size() && shorter[i] == longer[i]) ++i;
  if (longer.size() != shorter.size()) return shorter.compare(i, std::string::npos, longer, i + 1, std::string::npos) == 0;
  if (shorter.compare(i + 1, std::string::npos, longer, i + 1, std::string::npos) == 0) return true;  // changed
  return i + 1 < shorter.size() && shorter[i] == longer[i + 1] && shorter[i + 1] == longer[i] &&
         shorter.compare(i + 2, std::string::npos, longer, i + 2, std::string::npos) == 0;  // swapped
}

// A mapping being read, as Context::fail looks at it: a key of it that is a typo of one read so far.
class TypoSource {
 public:
  virtual ~TypoSource() = default;
  // A key not read that is one edit from one that was: its node, its path, and the key it is like.
  virtual bool typo(YAML::Node* at, std::string* path, std::string* like) const = 0;
};

// The line a key's value is on (1-based), 0 when it is not in the file.
int line_of(const YAML::Node& node) { return node.IsDefined() && node.Mark().line >= 0 ? node.Mark().line + 1 : 0; }

class Context {
 public:
  explicit Context(std::string source) : source_(std::move(source)) {}
  // An error of a mapping that holds a typo of one of its keys is most often the typo's doing
  // (`topicz` for topics: "topics: not given"; `usename`: "username: required"): the typo is said
  // instead, as the unknown key it is, with the key it is like.
  [[noreturn]] void fail(const YAML::Node& node, const std::string& key, const std::string& what) const {
    if (!failing_) {
      failing_ = true;
      for (auto reader = readers_.rbegin(); reader != readers_.rend(); ++reader) {
        YAML::Node at;
        std::string path, like;
        if ((*reader)->typo(&at, &path, &like)) fail(at, path, "unknown key (did you mean " + like + "?)");
      }
    }
    std::ostringstream os;
    os << source_;
    if (node.IsDefined() && node.Mark().line >= 0) os << ":" << node.Mark().line + 1;
    os << ": " << key << ": " << what;
    throw ConfigError{os.str()};
  }
  const std::string& source() const { return source_; }
  // Every stream of the job is in the config as read (no glob left for a stream table to fill in).
  bool all_streams_known = true;
  // A node of the document walked (its duplicate keys, its merge keys): an alias is walked each time
  // it is used, so aliases of aliases (a "billion laughs" YAML, 9 levels of 9) would take hours. Past
  // kMaxNodesWalked, the config is refused instead; a real one has a few thousand.
  void walked(const YAML::Node& node) const {
    if (++walked_ > kMaxNodesWalked) {
      fail(node, "(aliases)", "the config expands to more than " + std::to_string(kMaxNodesWalked) +
                                  " nodes through its aliases (*name) of aliases: write them out, or use fewer levels");
    }
  }
  static constexpr size_t kMaxNodesWalked = 1'000'000;
  void reading(const TypoSource* r) const { readers_.push_back(r); }
  void read(const TypoSource* r) const {
    if (auto it = std::find(readers_.begin(), readers_.end(), r); it != readers_.end()) readers_.erase(it);
  }

 private:
  std::string source_;
  mutable std::vector<const TypoSource*> readers_;  // the MapReaders alive, innermost last
  mutable bool failing_ = false;
  mutable size_t walked_ = 0;
};

// An integer in decimal digits, as a config means it: yaml-cpp reads a leading 0 as octal (`top_k: 010`
// is 8, `rtsp_latency_ms: 0200` 128), which no one writing a config means: refused, said why.
bool has_octal_look(const std::string& text) {
  return text.size() > 1 && text[0] == '0' && text.find_first_not_of("0123456789") == std::string::npos;
}
bool decimal_uint(const YAML::Node& n, uint64_t* out) {
  if (!n.IsScalar()) return false;
  const std::string& text = n.Scalar();
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || has_octal_look(text)) return false;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
  if (errno == ERANGE) return false;
  *out = v;
  return true;
}

std::string scalar_text(const YAML::Node& n) {
  if (n.IsScalar() && has_octal_look(n.Scalar())) {
    return "'" + n.Scalar() + "' (YAML reads a leading 0 as octal: write it without)";
  }
  if (n.IsScalar() && n.Scalar().find("${") != std::string::npos) {
    return "'" + n.Scalar() + "' (${...} is expanded in string values only: write the number)";
  }
  if (n.IsScalar()) return "'" + n.Scalar() + "'";
  if (n.IsSequence()) return "a list of " + std::to_string(n.size()) + (n.size() == 1 ? " item" : " items");
  if (n.IsMap()) return "a mapping";
  return "nothing";
}

}  // namespace

std::string unlisted_folders_text(const std::vector<std::string>& folders) {
  std::string list;
  for (size_t i = 0; i < folders.size() && i < 5; ++i) list += (i ? ", " : "") + escape_invalid_utf8(folders[i]);
  if (folders.size() > 5) list += ", and " + std::to_string(folders.size() - 5) + " more";
  return std::to_string(folders.size()) + (folders.size() == 1 ? " folder" : " folders") + kCouldNotBeListed + list +
         ": the files in " + (folders.size() == 1 ? "it" : "them") + " are not in the job (give this user read and "
         "execute rights on " + (folders.size() == 1 ? "it" : "them") + ", or leave " +
         (folders.size() == 1 ? "it" : "them") + " out of the pattern)";
}

Result<GlobFiles> glob_files(const FolderWatch& w) {
  GlobFiles out;
  VAPIPE_ASSIGN_OR_RETURN(std::vector<std::string> files, expand_file_glob(w.pattern, &out.hidden, &out.unreadable));
  out.matched = files.size();
  // settle_s: a file modified that recently may still be being written (a recorder's current file):
  // read now, its end would be missed, and the next --resume would take it as done.
  std::vector<std::string> settled;
  const auto now = std::filesystem::file_time_type::clock::now();
  for (const std::string& file : files) {
    std::error_code ec;
    const auto modified = std::filesystem::last_write_time(file, ec);
    const double age_s = ec ? 1e12 : std::chrono::duration<double>(now - modified).count();
    if (w.settle_s > 0 && age_s < w.settle_s) {
      out.unsettled.push_back(std::filesystem::path(file).filename().string());
    } else {
      settled.push_back(file);
    }
  }
  out.settled = settled.size();
  const std::string base = glob_base_dir(w.pattern);
  TimeOfDayPart day_part;
  day_part.from_unix_ns = w.part_from_unix_ns;
  day_part.to_unix_ns = w.part_to_unix_ns;
  for (const std::string& file : settled) {
    StreamConfig f;
    f.line = w.line;
    f.max_fps = w.each.max_fps;
    f.keyframes_only = w.each.keyframes_only;
    f.rtsp_latency_ms = w.each.rtsp_latency_ms;
    f.roi = w.each.roi;
    f.turn = w.each.turn;
    f.recorded = w.each.recorded;
    f.from_ns = w.each.from_ns;
    f.to_ns = w.each.to_ns;
    const std::string name = std::filesystem::path(file).filename().string();
    if (f.recorded.from == RecordingStart::From::kFileName) {
      f.recorded.unix_ns = time_in_file_name(file, f.recorded.spec.substr(5)).value_or(-1);
      if (!f.recorded.known()) out.undated.push_back(name);
    }
    // A time-of-day part: a file whose start is unknown, or at or after its end, has none of it.
    if (day_part.given() && (!f.recorded.known() || !day_part.place(&f))) {
      if (f.recorded.known()) out.after_part.push_back(name);
      continue;
    }
    f.id = stream_id_for_file(base, file, w.id_prefix);
    if (Status st = validate_stream_id(f.id); !st.ok()) {
      out.refused.emplace_back(file, "id: " + st.message());
      continue;
    }
    auto parsed = parse_stream_uri(file, base);
    if (!parsed.ok()) {
      out.refused.emplace_back(file, "uri: " + parsed.status().message());
      continue;
    }
    f.parsed = parsed.value();
    f.uri = f.parsed.uri;
    out.streams.push_back(std::move(f));
  }
  return out;
}

Result<std::string> expand_environment(const std::string& text) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    if (text.compare(i, 3, "$${") == 0) {  // a literal "${"
      out += "${";
      i += 3;
      continue;
    }
    if (text.compare(i, 2, "${") != 0) {
      out += text[i++];
      continue;
    }
    const size_t end = text.find('}', i + 2);
    if (end == std::string::npos) return InvalidArgument("'${' without its '}' (write $${ for a literal ${)");
    const std::string inner = text.substr(i + 2, end - i - 2);
    const size_t dash = inner.find(":-");
    const std::string name = inner.substr(0, dash);
    const bool valid = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
                       std::all_of(name.begin(), name.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
    if (!valid) return InvalidArgument("expected ${NAME} or ${NAME:-default} with NAME an environment variable, got '${" + inner + "}'");
    const char* value = std::getenv(name.c_str());
    if (value && *value) {
      // A Kubernetes Secret or a .env line made from a file keeps the file's last newline: in a
      // password or a path it is never meant, and fails far from here ("the camera refused ...").
      const std::string_view text(value);
      if (std::any_of(text.begin(), text.end(), [](char ch) { return static_cast<unsigned char>(ch) < 0x20; })) {
        const bool newline_at_end = text.back() == '\n' || text.back() == '\r';
        return InvalidArgument("environment variable " + name + " holds " +
                               (newline_at_end ? std::string("a line break at its end (a Secret or file made with a final "
                                                             "newline?)")
                                               : std::string("a control character (a line break or tab)")) +
                               ": remove it from the variable's value");
      }
      out += value;
    } else if (dash != std::string::npos) {
      out += inner.substr(dash + 2);
    } else {
      // Its name only: the value would be a secret.
      return InvalidArgument("environment variable " + name + (value ? " is empty" : " is not set") +
                             " (give it a value, or ${" + name + ":-default})");
    }
    i = end + 1;
  }
  return out;
}

namespace {

// Reads one mapping; remembers which keys were consumed so that unknown keys are reported.
class MapReader : public TypoSource {
 public:
  MapReader(const Context& ctx, YAML::Node node, std::string path)
      : ctx_(ctx), node_(std::move(node)), path_(std::move(path)) {
    if (node_.IsDefined() && !node_.IsNull() && !node_.IsMap()) {
      ctx_.fail(node_, path_.empty() ? "(top level)" : path_, "expected a mapping, got " + scalar_text(node_));
    }
    ctx_.reading(this);
  }
  ~MapReader() override { ctx_.read(this); }
  MapReader(const MapReader&) = delete;
  MapReader& operator=(const MapReader&) = delete;

  bool typo(YAML::Node* at, std::string* path, std::string* like) const override {
    if (!node_.IsMap()) return false;
    for (auto it = node_.begin(); it != node_.end(); ++it) {
      if (!it->first.IsScalar() || seen_.count(it->first.Scalar())) continue;
      for (const std::string& known : seen_) {
        if (!one_edit_apart(it->first.Scalar(), known)) continue;
        *at = it->first;
        *path = key_path(it->first.Scalar());
        *like = known;
        return true;
      }
    }
    return false;
  }

  std::string key_path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

  YAML::Node child(const std::string& key) {
    seen_.insert(key);
    if (!node_.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    return node_[key];
  }
  // A key that holds a value (not a section): undefined when left out, an error when written without one.
  YAML::Node value(const std::string& key) {
    YAML::Node n = child(key);
    return given(n, key) ? n : YAML::Node(YAML::NodeType::Undefined);
  }

  void str(const std::string& key, std::string* out) {
    YAML::Node n = child(key);
    if (!given(n, key)) return;
    if (!n.IsScalar()) ctx_.fail(n, key_path(key), "expected a string, got " + scalar_text(n));
    auto expanded = expand_environment(n.Scalar());
    if (!expanded.ok()) ctx_.fail(n, key_path(key), expanded.status().message());
    *out = expanded.value();
  }
  void choice(const std::string& key, std::string* out, const std::vector<std::string>& allowed) {
    std::string v = *out;
    str(key, &v);
    for (const auto& a : allowed) {
      if (v == a) {
        *out = v;
        return;
      }
    }
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : " | ") + a;
    ctx_.fail(child(key), key_path(key), "expected one of " + list + ", got '" + v + "'");
  }
  template <typename T>
  void uint(const std::string& key, T* out, uint64_t min, uint64_t max) {
    YAML::Node n = child(key);
    if (!given(n, key)) return;
    uint64_t v = 0;
    if (!decimal_uint(n, &v) || v < min || v > max) {
      ctx_.fail(n, key_path(key), "expected an integer from " + std::to_string(min) + " to " +
                                      std::to_string(max) + ", got " + scalar_text(n));
    }
    *out = static_cast<T>(v);
  }
  void boolean(const std::string& key, bool* out) {
    YAML::Node n = child(key);
    if (!given(n, key)) return;
    bool v = false;
    if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v)) {
      ctx_.fail(n, key_path(key), "expected true or false, got " + scalar_text(n));
    }
    *out = v;
  }
  // Settings that, left out, fall back to another (a stream's own over the job's).
  void optional_boolean(const std::string& key, std::optional<bool>* out) {
    if (!given(child(key), key)) return;
    bool v = false;
    boolean(key, &v);
    *out = v;
  }
  void optional_uint(const std::string& key, std::optional<uint32_t>* out, uint64_t min, uint64_t max) {
    if (!given(child(key), key)) return;
    uint32_t v = 0;
    uint(key, &v, min, max);
    *out = v;
  }
  void number(const std::string& key, double* out, double min, double max) {
    YAML::Node n = child(key);
    if (!given(n, key)) return;
    double v = 0;
    if (!n.IsScalar() || !YAML::convert<double>::decode(n, v) || !(v >= min && v <= max)) {
      std::ostringstream os;
      os << "expected a number from " << min << " to " << max << ", got " << scalar_text(n);
      ctx_.fail(n, key_path(key), os.str());
    }
    *out = v;
  }
  void floats3(const std::string& key, std::array<float, 3>* out, bool positive) {
    YAML::Node n = child(key);
    if (!given(n, key)) return;
    if (!n.IsSequence() || n.size() != 3) ctx_.fail(n, key_path(key), "expected a list of 3 numbers, got " + scalar_text(n));
    for (size_t i = 0; i < 3; ++i) {
      double v = 0;
      // (.nan and .inf are numbers to YAML: a mean of .nan made every tensor NaN, classified as anything.)
      if (!n[i].IsScalar() || !YAML::convert<double>::decode(n[i], v) || !std::isfinite(v) ||
          std::fabs(v) > std::numeric_limits<float>::max() || (positive && !(v > 0))) {
        ctx_.fail(n[i], key_path(key) + "[" + std::to_string(i) + "]",
                  (positive ? "expected a positive number, got " : "expected a number, got ") + scalar_text(n[i]));
      }
      (*out)[i] = static_cast<float>(v);
    }
  }

  // A list of 3 integers from `min` to `max` (a colour's R, G, B). Returns whether the key was given.
  bool uints3(const std::string& key, std::array<uint32_t, 3>* out, uint32_t min, uint32_t max) {
    YAML::Node n = child(key);
    if (!given(n, key)) return false;
    const std::string want = "expected a list of 3 integers from " + std::to_string(min) + " to " + std::to_string(max);
    if (!n.IsSequence() || n.size() != 3) ctx_.fail(n, key_path(key), want + ", got " + scalar_text(n));
    for (size_t i = 0; i < 3; ++i) {
      uint64_t v = 0;
      if (!decimal_uint(n[i], &v) || v < min || v > max) {
        ctx_.fail(n[i], key_path(key) + "[" + std::to_string(i) + "]", want + ", got " + scalar_text(n[i]));
      }
      (*out)[i] = static_cast<uint32_t>(v);
    }
    return true;
  }

  // [x, y, width, height] as fractions of a frame: a region inside it, not empty.
  void region(const std::string& key, std::array<double, 4>* out) {
    YAML::Node n = child(key);
    if (!given(n, key)) return;
    const std::string want = "expected [x, y, width, height] as fractions of the frame (0 to 1), e.g. [0.5, 0, 0.5, 1] "
                             "for its right half";
    if (!n.IsSequence() || n.size() != 4) ctx_.fail(n, key_path(key), want + ", got " + scalar_text(n));
    std::array<double, 4> v{};
    for (size_t i = 0; i < 4; ++i) {
      if (!n[i].IsScalar() || !YAML::convert<double>::decode(n[i], v[i]) || !(v[i] >= 0 && v[i] <= 1)) {
        ctx_.fail(n[i], key_path(key) + "[" + std::to_string(i) + "]", want);
      }
    }
    if (!(v[2] > 0 && v[3] > 0) || v[0] + v[2] > 1 + 1e-9 || v[1] + v[3] > 1 + 1e-9) {
      ctx_.fail(n, key_path(key), "the region must have a width and a height and lie inside the frame (x + width "
                                  "and y + height at most 1)");
    }
    *out = v;
  }

  // Unknown keys are errors: a typo must not silently fall back to a default.
  void finish() {
    if (!node_.IsMap()) return;
    for (auto it = node_.begin(); it != node_.end(); ++it) {
      std::string key = it->first.as<std::string>();
      if (!seen_.count(key)) {
        std::string list;
        for (const auto& k : seen_) list += (list.empty() ? "" : ", ") + k;
        ctx_.fail(it->first, key_path(key), "unknown key (known here: " + list + ")");
      }
    }
    if (missing_) ctx_.fail(missing_->node, missing_->key, missing_->what);
  }
  // A key this mapping needs and lacks, said at finish(): after its unknown keys, which are most often
  // why (`timeout: 5` in a webhook said "topics: not given", and the unknown key only once that was mended).
  void fail_at_finish(const YAML::Node& node, const std::string& key, const std::string& what) {
    if (!missing_) missing_ = Missing{node, key, what};
  }

 private:
  // A key written with no value (`endpoint:` alone, or `~`) is an error, not its default: it is most
  // often a value forgotten, or one indented onto the next line.
  struct Missing {
    YAML::Node node;
    std::string key, what;
  };
  std::optional<Missing> missing_;
  bool given(const YAML::Node& n, const std::string& key) const {
    if (!n.IsDefined()) return false;
    if (n.IsNull()) {
      // (Said at the key: a value left out is marked where the next line begins.)
      YAML::Node at = n;
      for (auto it = node_.begin(); it != node_.end(); ++it) {
        if (it->first.IsScalar() && it->first.Scalar() == key) at = it->first;
      }
      ctx_.fail(at, key_path(key), "has no value: give it one, or leave the key out for its default");
    }
    return true;
  }
  const Context& ctx_;
  YAML::Node node_;
  std::string path_;
  std::set<std::string> seen_;
};

std::string resolve_path(const std::string& base_dir, const std::string& p) {
  if (p.empty()) return p;
  std::filesystem::path path(expand_home(p));
  if (path.is_relative() && !base_dir.empty()) path = std::filesystem::path(base_dir) / path;
  return path.lexically_normal().string();
}

// YAML forbids a key twice in one mapping, but yaml-cpp keeps both entries and a lookup answers the
// first: the second (typically the one just added at the bottom of the file) would be ignored without
// a word.
void refuse_duplicate_keys(const Context& ctx, const YAML::Node& node, const std::string& path) {
  ctx.walked(node);
  if (node.IsMap()) {
    std::map<std::string, int> first_line;
    for (auto it = node.begin(); it != node.end(); ++it) {
      const std::string key = it->first.IsScalar() ? it->first.Scalar() : std::string("?");
      const std::string key_path = path.empty() ? key : path + "." + key;
      if (it->first.IsScalar()) {
        const auto [first, inserted] = first_line.emplace(key, it->first.Mark().line + 1);
        if (!inserted) {
          ctx.fail(it->first, key_path,
                   "given twice in one mapping (first on line " + std::to_string(first->second) +
                       "): only one of the two would count; keep one");
        }
      }
      refuse_duplicate_keys(ctx, it->second, key_path);
    }
  } else if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) {
      refuse_duplicate_keys(ctx, node[i], path + "[" + std::to_string(i) + "]");
    }
  }
}

// YAML's merge key, "<<: *defaults" (or a list of aliases), which yaml-cpp 0.7 reads as a plain key:
// each mapping that has one gets the merged mappings' keys it lacks (the earlier of several merged
// mappings wins), in place, so that every node keeps the line it was written on for errors (a merged
// value names the line in the anchored mapping).
void resolve_merge_keys(const Context& ctx, YAML::Node node, const std::string& path) {
  ctx.walked(node);
  if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) resolve_merge_keys(ctx, node[i], path + "[" + std::to_string(i) + "]");
    return;
  }
  if (!node.IsMap()) return;
  YAML::Node merged;
  bool has_merge_key = false;
  for (auto it = node.begin(); it != node.end(); ++it) {
    const std::string key = it->first.IsScalar() ? it->first.Scalar() : std::string();
    if (key == "<<") {
      merged = it->second;
      has_merge_key = true;
    } else {
      resolve_merge_keys(ctx, it->second, path.empty() ? key : path + "." + key);
    }
  }
  if (!has_merge_key) return;
  const std::string merge_path = path.empty() ? "<<" : path + ".<<";
  std::vector<YAML::Node> sources;
  if (merged.IsMap()) {
    sources.push_back(merged);
  } else if (merged.IsSequence()) {
    for (size_t i = 0; i < merged.size(); ++i) sources.push_back(merged[i]);
  }
  if (sources.empty()) {
    ctx.fail(merged, merge_path, "expected an alias of a mapping (<<: *name) or a list of them, got " +
                                     scalar_text(merged));
  }
  node.remove("<<");
  for (const YAML::Node& source : sources) {
    if (!source.IsMap()) {
      ctx.fail(source, merge_path, "expected an alias of a mapping (<<: *name), got " + scalar_text(source));
    }
    resolve_merge_keys(ctx, source, merge_path);
    for (auto it = source.begin(); it != source.end(); ++it) {
      const YAML::Node& lookup = node;  // const: a lookup that inserts nothing
      if (!lookup[it->first.Scalar()]) node.force_insert(it->first, it->second);
    }
  }
}

// Whether a message topic can start with `prefix` (a subscription's prefix): results/<id>,
// events/<id>, segments/<id>, job/summary.
bool names_a_topic(std::string prefix) {
  if (!prefix.empty() && prefix.back() == '*') prefix.pop_back();  // (segments/gate*: every stream so named)
  for (const char* root : {"results/", "events/", "segments/", "job/summary"}) {
    const std::string r = root;
    if (r.compare(0, prefix.size(), prefix) == 0) return true;  // "seg", "results/"
    if (r.back() == '/' && prefix.compare(0, r.size(), r) == 0) return true;  // "results/cam1"
  }
  return false;
}

// A PEM file of `kind` ("CERTIFICATE", "PRIVATE KEY": any of its forms) that must be readable; `hint`
// says how to make one of another form.
void require_pem_file(const Context& ctx, const YAML::Node& node, const std::string& key, const std::string& path,
                      const std::string& kind, const std::string& hint) {
  std::ifstream in(path);
  if (!in) ctx.fail(node, key, "cannot read " + path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const bool found = kind == "PRIVATE KEY" ? text.find("PRIVATE KEY-----") != std::string::npos
                                           : text.find("-----BEGIN " + kind + "-----") != std::string::npos;
  if (!found) {
    ctx.fail(node, key, path + " holds no PEM " + (kind == "CERTIFICATE" ? "certificate" : "private key") +
                            " (-----BEGIN " + kind + "-----)" + (hint.empty() ? "" : "; " + hint));
  }
}

// Whether a sink's topic prefixes take some topics under `root` ("seg", "segments/", "segments/gate"
// all take segments/).
bool takes_topics_of(const std::vector<std::string>& topics, const std::string& root) {
  return std::any_of(topics.begin(), topics.end(), [&](const std::string& t) {
    return root.compare(0, t.size(), t) == 0 || t.compare(0, root.size(), root) == 0;
  });
}

// What publish.webhooks[i] and publish.mqtt[i] share (MessageSinkConfig): the topics and labels they
// take, the cooldown, TLS's authorities, the timeout, the queue and the format. `tls`: the url is of the
// TLS scheme `tls_scheme` ("https", "mqtts"), which ca_file and tls_verify are for.
void parse_sink_common(const Context& ctx, MapReader& r, const YAML::Node& node, const std::string& path,
                       const std::string& base_dir, const Config& c, bool tls, const std::string& tls_scheme,
                       std::vector<std::string> formats, MessageSinkConfig* w) {
  w->line = node.Mark().line + 1;
  if (YAML::Node topics = r.value("topics"); topics.IsDefined()) {
    const std::string key = path + ".topics";
    const std::string want = "expected a list of topic prefixes, e.g. [segments/, events/] or [segments/gate]";
    if (!topics.IsSequence() || topics.size() == 0) ctx.fail(topics, key, want + ", got " + scalar_text(topics));
    w->topics.clear();
    for (size_t t = 0; t < topics.size(); ++t) {
      const std::string at = key + "[" + std::to_string(t) + "]";
      if (!topics[t].IsScalar() || topics[t].Scalar().empty()) ctx.fail(topics[t], at, want);
      const std::string prefix = topics[t].Scalar();
      if (!names_a_topic(prefix)) {
        ctx.fail(topics[t], at, "'" + prefix + "' starts no topic vapipe publishes: results/<id>, events/<id>, "
                                "segments/<id>, job/summary");
      }
      if (prefix.rfind("segments/", 0) == 0 && c.publish.segments_min_frames == 0) {
        ctx.fail(topics[t], at, "'" + prefix + "' has no messages without publish.segments_min_frames (N >= 1), "
                                "which publishes segments");
      }
      // A stream's topic that names no stream of an archive job (whose streams are all known: a live job's
      // reload may add the camera later, a watched folder its file) is a typo that sends nothing.
      if (const size_t slash = prefix.find('/');
          slash != std::string::npos && slash + 1 < prefix.size() && prefix.rfind("job/", 0) != 0 &&
          c.job.mode == JobMode::kArchive && c.watches.empty() && !c.streams.empty() && ctx.all_streams_known) {
        // A stream's topic is taken whole; with a '*' at its end, every stream whose id starts so.
        const bool starts = prefix.back() == '*';
        const std::string named = prefix.substr(slash + 1, prefix.size() - slash - 1 - (starts ? 1 : 0));
        std::string ids;
        bool found = false, started = false;
        for (const StreamConfig& s : c.streams) {
          found = found || (starts ? s.id.rfind(named, 0) == 0 : s.id == named);
          started = started || s.id.rfind(named, 0) == 0;
          if (ids.size() < 200) ids += (ids.empty() ? "" : ", ") + s.id;
        }
        if (!found) {
          ctx.fail(topics[t], at, "'" + prefix + "' names no stream of this job (" +
                                      (starts ? "no id starts with '" + named + "'"
                                       : started ? "a topic names a stream whole: '" + prefix + "*' takes every "
                                                   "stream whose id starts with '" + named + "'"
                                                 : "no stream '" + named + "'") +
                                      "; its streams: " + ids + (ids.size() >= 200 ? ", ..." : "") + ")");
        }
      }
      w->topics.push_back(prefix);
    }
  } else if (c.publish.segments_min_frames == 0) {
    r.fail_at_finish(node, path + ".topics",
                     "not given, so segments/ (label runs, the alerts), which need publish.segments_min_frames (N >= "
                     "1); set that, or give the topics to send (e.g. [events/])");
  }
  if (YAML::Node labels = r.value("labels"); labels.IsDefined()) {
    const std::string key = path + ".labels";
    const std::string want = "expected a list of labels of infer.labels, e.g. [person, truck]";
    if (!labels.IsSequence() || labels.size() == 0) ctx.fail(labels, key, want + ", got " + scalar_text(labels));
    for (size_t l = 0; l < labels.size(); ++l) {
      if (!labels[l].IsScalar() || labels[l].Scalar().empty()) {
        ctx.fail(labels[l], key + "[" + std::to_string(l) + "]", want);
      }
      w->labels.push_back(labels[l].Scalar());
    }
    w->labels_line = labels.Mark().line + 1;
    const bool labelled_topic = takes_topics_of(w->topics, "segments/") || takes_topics_of(w->topics, "results/");
    // (An MQTT broker's Home Assistant sensors and pictures follow its labels whatever its topics.)
    bool followed_anyway = false;
    for (const char* state : {"home_assistant", "pictures"}) {
      bool on = false;
      const YAML::Node value = node[state];
      followed_anyway |= value.IsDefined() && value.IsScalar() && YAML::convert<bool>::decode(value, on) && on;
    }
    if (!labelled_topic && !followed_anyway) {
      ctx.fail(labels, key, "only segments/ and results/ messages have labels, and its topics take neither");
    }
  }
  r.str("ca_file", &w->ca_file);
  w->ca_file = resolve_path(base_dir, w->ca_file);
  std::optional<bool> verify;
  r.optional_boolean("tls_verify", &verify);
  w->tls_verify = verify.value_or(true);
  if ((!w->ca_file.empty() || verify) && !tls) {
    ctx.fail(r.child(w->ca_file.empty() ? "tls_verify" : "ca_file"), path + (w->ca_file.empty() ? ".tls_verify" : ".ca_file"),
             std::string(tls_scheme[0] == 'm' || tls_scheme[0] == 'h' ? "is for an " : "is for a ") + tls_scheme + ":// url");
  }
  if (!w->ca_file.empty()) {
    if (!w->tls_verify) ctx.fail(r.child("ca_file"), path + ".ca_file", "and tls_verify: false both: keep one");
    require_pem_file(ctx, r.child("ca_file"), path + ".ca_file", w->ca_file, "CERTIFICATE",
                     "a DER .cer: openssl x509 -inform der -in ca.cer -out ca.pem");
  }
  r.number("timeout_s", &w->timeout_s, 0.1, 600);
  r.number("cooldown_s", &w->cooldown_s, 0, 7 * 86400);
  if (w->cooldown_s > 0 && c.publish.segments_min_frames == 0) {
    ctx.fail(r.child("cooldown_s"), path + ".cooldown_s",
             "is for segments (publish.segments_min_frames N >= 1): a segment within it of the last one sent is not "
             "sent");
  }
  r.uint("max_queued", &w->max_queued, 1, 10000000);
  std::string policy = queue_policy_name(w->queue_policy);
  r.choice("queue_policy", &policy, {"drop_oldest", "block"});
  w->queue_policy = *parse_queue_policy(policy);
  r.choice("format", &w->format, std::move(formats));
}

// publish.webhooks: a list of receivers (stages/publish/webhook.h).
std::vector<WebhookConfig> parse_webhooks(const Context& ctx, const YAML::Node& list, const std::string& base_dir,
                                          const Config& c) {
  std::vector<WebhookConfig> hooks;
  if (!list.IsDefined() || list.IsNull()) return hooks;
  if (!list.IsSequence()) {
    ctx.fail(list, "publish.webhooks",
             "expected a list of webhooks, each a mapping with a url (- url: https://...), got " + scalar_text(list));
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = "publish.webhooks[" + std::to_string(i) + "]";
    MapReader r(ctx, list[i], path);
    WebhookConfig w;
    r.str("url", &w.url);
    if (w.url.empty()) ctx.fail(list[i], path + ".url", "required: where to POST the messages (http:// or https://)");
    auto url = parse_http_url(w.url);
    if (!url.ok()) ctx.fail(r.child("url"), path + ".url", url.status().message());
    parse_sink_common(ctx, r, list[i], path, base_dir, c, url->tls, "https",
                      {"json", "text", "slack", "discord", "telegram", "teams"}, &w);
    if (YAML::Node chat = r.child("telegram_chat_id"); chat.IsDefined()) {
      if (!chat.IsScalar() || chat.Scalar().empty()) {
        ctx.fail(chat, path + ".telegram_chat_id", "expected the chat's id (123456789, -1001234567890) or @channel name");
      }
      w.telegram_chat_id = chat.Scalar();
      if (w.format != "telegram") ctx.fail(chat, path + ".telegram_chat_id", "is for format: telegram");
    }
    if (w.format == "telegram") {
      if (w.telegram_chat_id.empty()) {
        ctx.fail(r.child("format"), path + ".telegram_chat_id",
                 "required with format: telegram: the chat the bot writes to (its id, or @channel)");
      }
      const std::string last = url.ok() ? url->target.substr(url->target.rfind('/') + 1) : "";
      if (url.ok() && (url->target.find('?') != std::string::npos || last.rfind("send", 0) == 0)) {
        ctx.fail(r.child("url"), path + ".url",
                 "with format: telegram, the bot's URL (https://api.telegram.org/bot<TOKEN>) without a method or "
                 "query: vapipe adds /sendMessage, or /sendPhoto for a picture");
      }
    }
    if (YAML::Node headers = r.value("headers"); headers.IsDefined()) {
      const std::string key = path + ".headers";
      if (!headers.IsMap()) {
        ctx.fail(headers, key, "expected a mapping of header: value (e.g. {X-Api-Key: ${ALERTS_KEY}}), got " +
                                   scalar_text(headers));
      }
      for (auto it = headers.begin(); it != headers.end(); ++it) {
        const std::string name = it->first.IsScalar() ? it->first.Scalar() : "";
        bool token_chars = !name.empty();
        for (unsigned char ch : name) {
          if (!(std::isalnum(ch) || std::strchr("!#$%&'*+-.^_`|~", ch))) token_chars = false;
        }
        if (!token_chars) ctx.fail(it->first, key, "'" + name + "' is not an HTTP header name");
        std::string lowered = name;
        for (char& ch : lowered) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        if (lowered == "host" || lowered == "content-length" || lowered == "content-type" ||
            lowered == "transfer-encoding" || lowered == "connection") {
          ctx.fail(it->first, key + "." + name, "is set by vapipe itself (the body is JSON)");
        }
        // HTTP header names are case-insensitive: X-A and x-a are one header sent twice.
        for (const auto& [earlier, earlier_value] : w.headers) {
          if (strcasecmp(earlier.c_str(), name.c_str()) == 0) {
            ctx.fail(it->first, key + "." + name, "is headers." + earlier + " too (header names ignore case): keep one");
          }
        }
        if (!it->second.IsScalar()) ctx.fail(it->second, key + "." + name, "expected a string value");
        auto value = expand_environment(it->second.Scalar());
        if (!value.ok()) ctx.fail(it->second, key + "." + name, value.status().message());
        for (unsigned char ch : *value) {
          if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
            ctx.fail(it->second, key + "." + name, "its value holds a control character (a line break ends a header)");
          }
        }
        w.headers.emplace_back(name, *value);
      }
    }
    r.str("token_file", &w.token_file);
    w.token_file = resolve_path(base_dir, w.token_file);
    if (!w.token_file.empty()) {
      auto token = read_webhook_token_file(w.token_file);
      if (!token.ok()) ctx.fail(r.child("token_file"), path + ".token_file", token.status().message());
      for (const auto& [name, value] : w.headers) {
        if (strcasecmp(name.c_str(), "Authorization") == 0) {
          ctx.fail(r.child("token_file"), path + ".token_file",
                   "and headers.Authorization both: token_file sends Authorization: Bearer TOKEN; keep one");
        }
      }
      w.token = *token;
    }
    r.boolean("attach_pictures", &w.attach_pictures);
    r.boolean("attach_clips", &w.attach_clips);
    r.number("attach_max_mb", &w.attach_max_mb, 0.01, 2048);
    if (w.attach_max_mb > 0 && !w.attach_pictures && !w.attach_clips) {
      ctx.fail(r.child("attach_max_mb"), path + ".attach_max_mb",
               "limits the files attached, and neither attach_pictures nor attach_clips is on");
    }
    for (auto [key, on, what, needs, made] :
         {std::tuple{"attach_pictures", w.attach_pictures, "picture", "publish.segments_pictures_dir",
                     !c.publish.segments_pictures_dir.empty()},
          std::tuple{"attach_clips", w.attach_clips, "clip", "publish.segments_clips", c.publish.segments_clips}}) {
      if (!on) continue;
      const YAML::Node at = r.child(key);
      if (!made) {
        ctx.fail(at, path + "." + key, std::string("needs ") + needs + ": the " + what + "s attached are those of the segments");
      } else if (w.format == "slack" || w.format == "teams") {
        ctx.fail(at, path + "." + key,
                 std::string(w.format == "slack" ? "Slack's incoming webhooks" : "Teams' workflow webhooks") +
                     " take no files (format: " + w.format + "); format json, text, discord or telegram can attach them");
      } else if (!takes_topics_of(w.topics, "segments/")) {
        ctx.fail(at, path + "." + key, std::string("its topics take no segments/ messages, whose `") + what +
                                           "` messages the " + what + "s go with");
      }
    }
    r.finish();
    hooks.push_back(std::move(w));
  }
  return hooks;
}

// An MQTT topic (or its prefix) to publish on: no wildcard (+, #), no NUL, UTF-8 checked by the caller's
// YAML; at most 65535 bytes in all (the prefix leaves room for the bus topic).
std::string mqtt_topic_error(const std::string& topic) {
  if (topic.find_first_of("+#") != std::string::npos) {
    return "'" + topic + "' holds '+' or '#', MQTT's wildcards, which a published topic cannot";
  }
  if (topic.find('\0') != std::string::npos) return "it holds a NUL character";
  if (topic.size() > 60000) return "it is longer than MQTT's topics may be";
  return "";
}

}  // namespace

std::string home_assistant_id(const std::string& name) {
  std::string id;
  for (unsigned char c : name) {
    if (std::isalnum(c) && c < 0x80) {
      id.push_back(static_cast<char>(std::tolower(c)));
    } else if (!id.empty() && id.back() != '_') {
      id.push_back('_');
    }
  }
  while (!id.empty() && id.back() == '_') id.pop_back();
  return id.empty() ? "x" : id;
}

namespace {

// What publish.mqtt[i] and publish.redis[i] share: the user and password (the url's `user:password@`,
// or `username` and `password_file`, not both), and a client certificate with its key for the url's
// TLS scheme `tls_scheme` ("mqtts", "rediss").
void parse_login(const Context& ctx, MapReader& r, const std::string& path, const std::string& base_dir,
                 const HttpUrl& url, const std::string& tls_scheme, std::string* username, std::string* password_file,
                 std::string* password, std::string* cert_file, std::string* key_file) {
  *username = url.user;
  if (r.child("username").IsDefined()) {
    if (!username->empty()) ctx.fail(r.child("username"), path + ".username", "and the url's user@ both: keep one");
    r.str("username", username);
  }
  r.str("password_file", password_file);
  *password_file = resolve_path(base_dir, *password_file);
  *password = url.password;
  if (!password_file->empty()) {
    if (!password->empty()) {
      ctx.fail(r.child("password_file"), path + ".password_file", "and the url's :password@ both: keep one");
    }
    auto read = read_password_file(*password_file);
    if (!read.ok()) ctx.fail(r.child("password_file"), path + ".password_file", read.status().message());
    *password = *read;
  }
  r.str("cert_file", cert_file);
  *cert_file = resolve_path(base_dir, *cert_file);
  r.str("key_file", key_file);
  *key_file = resolve_path(base_dir, *key_file);
  if (cert_file->empty() != key_file->empty()) {
    ctx.fail(r.child(cert_file->empty() ? "key_file" : "cert_file"), path + (cert_file->empty() ? ".cert_file" : ".key_file"),
             "required too: a client certificate goes with its key");
  }
  if (!cert_file->empty()) {
    if (!url.tls) {
      ctx.fail(r.child("cert_file"), path + ".cert_file",
               std::string(tls_scheme[0] == 'm' || tls_scheme[0] == 'h' ? "is for an " : "is for a ") + tls_scheme + ":// url");
    }
    require_pem_file(ctx, r.child("cert_file"), path + ".cert_file", *cert_file, "CERTIFICATE", "");
    require_pem_file(ctx, r.child("key_file"), path + ".key_file", *key_file, "PRIVATE KEY", "");
  }
}

// publish.mqtt: a list of brokers (stages/publish/mqtt_publisher.h).
std::vector<MqttConfig> parse_mqtt(const Context& ctx, const YAML::Node& list, const std::string& base_dir,
                                   const Config& c) {
  std::vector<MqttConfig> brokers;
  if (!list.IsDefined() || list.IsNull()) return brokers;
  if (!list.IsSequence()) {
    ctx.fail(list, "publish.mqtt",
             "expected a list of brokers, each a mapping with a url (- url: mqtt://broker:1883), got " + scalar_text(list));
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = "publish.mqtt[" + std::to_string(i) + "]";
    MapReader r(ctx, list[i], path);
    MqttConfig m;
    r.str("url", &m.url);
    if (m.url.empty()) ctx.fail(list[i], path + ".url", "required: the broker (mqtt://host:1883 or mqtts://host:8883)");
    auto url = parse_mqtt_url(m.url);
    if (!url.ok()) ctx.fail(r.child("url"), path + ".url", url.status().message());
    parse_sink_common(ctx, r, list[i], path, base_dir, c, url->tls, "mqtts", {"json", "text"}, &m);
    m.topic_prefix = "vapipe/" + c.job.name + "/";
    r.str("topic_prefix", &m.topic_prefix);
    if (const std::string why = mqtt_topic_error(m.topic_prefix); !why.empty()) {
      ctx.fail(r.child("topic_prefix"), path + ".topic_prefix", why);
    }
    m.status_topic = m.topic_prefix + "status";
    r.str("status_topic", &m.status_topic);
    if (const std::string why = mqtt_topic_error(m.status_topic); !why.empty()) {
      ctx.fail(r.child("status_topic"), path + ".status_topic", why);
    }
    r.uint("qos", &m.qos, 0, 2);
    r.boolean("retain", &m.retain);
    r.str("client_id", &m.client_id);
    if (m.client_id.size() > 65535) ctx.fail(r.child("client_id"), path + ".client_id", "is longer than MQTT allows");
    parse_login(ctx, r, path, base_dir, *url, "mqtts", &m.username, &m.password_file, &m.password, &m.cert_file,
                &m.key_file);
    if (!m.password.empty() && m.username.empty()) {
      ctx.fail(r.child("password_file").IsDefined() ? r.child("password_file") : r.child("url"), path + ".username",
               "required with a password (MQTT sends none without a user name)");
    }
    r.uint("keepalive_s", &m.keepalive_s, 5, 65535);
    r.boolean("home_assistant", &m.home_assistant);
    r.str("discovery_prefix", &m.discovery_prefix);
    if (m.discovery_prefix.empty() || !mqtt_topic_error(m.discovery_prefix).empty()) {
      ctx.fail(r.child("discovery_prefix"), path + ".discovery_prefix",
               m.discovery_prefix.empty() ? "expected a topic (Home Assistant's is homeassistant)"
                                          : mqtt_topic_error(m.discovery_prefix));
    }
    if (m.home_assistant) {
      const YAML::Node key = r.child("home_assistant");
      if (c.publish.segments_min_frames == 0) {
        ctx.fail(key, path + ".home_assistant",
                 "follows segments, which need publish.segments_min_frames (N >= 1)");
      }
      if (m.labels.empty()) {
        ctx.fail(key, path + ".home_assistant",
                 "needs labels: the labels that are each stream's sensors (e.g. [person, truck])");
      }
      std::map<std::string, std::string> ids;
      for (const std::string& label : m.labels) {
        auto [it, added] = ids.emplace(home_assistant_id(label), label);
        if (!added && it->second != label) {
          ctx.fail(r.child("labels"), path + ".labels",
                   "'" + it->second + "' and '" + label + "' are one sensor id for Home Assistant ('" + it->first +
                       "'): keep one");
        }
      }
    }
    m.pictures = m.home_assistant && !c.publish.segments_pictures_dir.empty();
    r.boolean("pictures", &m.pictures);
    if (m.pictures && c.publish.segments_pictures_dir.empty()) {
      ctx.fail(r.child("pictures"), path + ".pictures",
               "needs publish.segments_pictures_dir: the pictures published are those of the segments");
    }
    if (r.child("pictures_max_kb").IsDefined() && !m.pictures) {
      ctx.fail(r.child("pictures_max_kb"), path + ".pictures_max_kb", "limits the pictures published, and pictures is off");
    }
    r.uint("pictures_max_kb", &m.pictures_max_kb, 1, 262144);  // (MQTT's largest message: 256 MB)
    r.finish();
    brokers.push_back(std::move(m));
  }
  return brokers;
}

// publish.redis: a list of Redis servers (stages/publish/redis_streams.h).
std::vector<RedisConfig> parse_redis(const Context& ctx, const YAML::Node& list, const std::string& base_dir,
                                     const Config& c) {
  std::vector<RedisConfig> servers;
  if (!list.IsDefined() || list.IsNull()) return servers;
  if (!list.IsSequence()) {
    ctx.fail(list, "publish.redis",
             "expected a list of servers, each a mapping with a url (- url: redis://host:6379), got " + scalar_text(list));
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = "publish.redis[" + std::to_string(i) + "]";
    MapReader r(ctx, list[i], path);
    RedisConfig m;
    r.str("url", &m.url);
    if (m.url.empty()) ctx.fail(list[i], path + ".url", "required: the server (redis://host:6379)");
    auto url = parse_redis_url(m.url);
    if (!url.ok()) ctx.fail(r.child("url"), path + ".url", url.status().message());
    parse_sink_common(ctx, r, list[i], path, base_dir, c, url->tls, "rediss", {"json", "text"}, &m);
    m.db = url->db;
    m.key_prefix = "vapipe:" + c.job.name + ":";
    r.str("key_prefix", &m.key_prefix);
    r.uint("maxlen", &m.maxlen, 0, uint64_t{1} << 40);
    parse_login(ctx, r, path, base_dir, *url, "rediss", &m.username, &m.password_file, &m.password, &m.cert_file,
                &m.key_file);
    if (!m.username.empty() && m.password.empty()) {
      ctx.fail(r.child("username").IsDefined() ? r.child("username") : r.child("url"), path + ".password_file",
               "required with a user name (Redis's AUTH takes both)");
    }
    r.str("sentinel_password_file", &m.sentinel_password_file);
    m.sentinel_password_file = resolve_path(base_dir, m.sentinel_password_file);
    if (!m.sentinel_password_file.empty()) {
      if (!url->sentinel()) {
        ctx.fail(r.child("sentinel_password_file"), path + ".sentinel_password_file",
                 "is for a master found through Redis Sentinel (a redis+sentinel:// url)");
      }
      auto read = read_password_file(m.sentinel_password_file);
      if (!read.ok()) ctx.fail(r.child("sentinel_password_file"), path + ".sentinel_password_file", read.status().message());
      m.sentinel_password = *read;
    }
    r.finish();
    servers.push_back(std::move(m));
  }
  return servers;
}

// A Kafka topic's letters: ASCII letters, digits, '.', '_' and '-'.
bool kafka_topic_letter(unsigned char ch) { return (std::isalnum(ch) && ch < 0x80) || ch == '.' || ch == '_' || ch == '-'; }

// publish.kafka: a list of clusters (stages/publish/kafka_publisher.h).
std::vector<KafkaConfig> parse_kafka(const Context& ctx, const YAML::Node& list, const std::string& base_dir,
                                     const Config& c) {
  std::vector<KafkaConfig> clusters;
  if (!list.IsDefined() || list.IsNull()) return clusters;
  if (!list.IsSequence()) {
    ctx.fail(list, "publish.kafka",
             "expected a list of clusters, each a mapping with a url (- url: kafka://kafka-1:9092,kafka-2:9092), got " +
                 scalar_text(list));
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = "publish.kafka[" + std::to_string(i) + "]";
    MapReader r(ctx, list[i], path);
    KafkaConfig m;
    r.str("url", &m.url);
    if (m.url.empty()) ctx.fail(list[i], path + ".url", "required: the brokers to start from (kafka://host:9092[,host:9092...])");
    auto url = parse_kafka_url(m.url);
    if (!url.ok()) ctx.fail(r.child("url"), path + ".url", url.status().message());
    parse_sink_common(ctx, r, list[i], path, base_dir, c, url->tls, "kafkas", {"json", "text"}, &m);
    m.topic_prefix = "vapipe." + c.job.name + ".";  // (a job's name has topic letters only)
    r.str("topic_prefix", &m.topic_prefix);
    for (unsigned char ch : m.topic_prefix) {
      if (!kafka_topic_letter(ch)) {
        ctx.fail(r.child("topic_prefix"), path + ".topic_prefix",
                 "'" + m.topic_prefix + "' holds a character Kafka's topic names cannot (they take ASCII letters, "
                 "digits, '.', '_' and '-')");
      }
    }
    // Kafka's longest topic name is 249; the longest kind added is "segments".
    if (m.topic_prefix.size() > 249 - 8) ctx.fail(r.child("topic_prefix"), path + ".topic_prefix", "is longer than 241 characters");
    r.choice("acks", &m.acks, {"all", "leader"});
    std::optional<bool> idempotence;
    r.optional_boolean("idempotence", &idempotence);
    m.idempotence = idempotence.value_or(m.acks == "all");
    if (m.idempotence && m.acks != "all") {
      ctx.fail(r.child("idempotence"), path + ".idempotence",
               "needs acks: all (an idempotent producer counts a message delivered once every in-sync replica has it)");
    }
    r.choice("compression", &m.compression, {"none", "gzip", "snappy", "lz4", "zstd"});
    m.client_id = "vapipe-" + c.job.name;
    r.str("client_id", &m.client_id);
    if (m.client_id.empty()) ctx.fail(r.child("client_id"), path + ".client_id", "expected a name (the brokers log it)");
    parse_login(ctx, r, path, base_dir, *url, "kafkas", &m.username, &m.password_file, &m.password, &m.cert_file,
                &m.key_file);
    r.str("sasl_mechanism", &m.sasl_mechanism);
    if (!m.sasl_mechanism.empty()) {
      for (char& ch : m.sasl_mechanism) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (m.sasl_mechanism != "plain" && m.sasl_mechanism != "scram-sha-256" && m.sasl_mechanism != "scram-sha-512") {
        ctx.fail(r.child("sasl_mechanism"), path + ".sasl_mechanism",
                 "expected plain, scram-sha-256 or scram-sha-512 (as the cluster's listener has it), got '" +
                     m.sasl_mechanism + "'");
      }
      if (m.username.empty()) {
        ctx.fail(r.child("sasl_mechanism"), path + ".username", "required with sasl_mechanism (SASL signs in a user)");
      }
    }
    if (!m.username.empty() && m.password.empty()) {
      ctx.fail(r.child("username").IsDefined() ? r.child("username") : r.child("url"), path + ".password_file",
               "required with a user name (SASL signs in with both)");
    }
    if (!m.username.empty() && m.sasl_mechanism.empty()) {
      ctx.fail(r.child("username").IsDefined() ? r.child("username") : r.child("url"), path + ".sasl_mechanism",
               "required with a user name: plain, scram-sha-256 or scram-sha-512, as the cluster's listener has it");
    }
    r.finish();
    clusters.push_back(std::move(m));
  }
  return clusters;
}

// A ZeroMQ endpoint a stage binds: tcp://HOST:PORT (HOST may be * for every interface) or ipc:///path.
// ZeroMQ itself took a port over 65535 modulo 65536 (99999 bound 34463), and refused the rest only once
// the stage had started (exit 2, no line of the config).
Status check_bind_endpoint(const std::string& endpoint) {
  const size_t scheme_end = endpoint.find("://");
  const std::string scheme = scheme_end == std::string::npos ? std::string() : endpoint.substr(0, scheme_end);
  const std::string rest = scheme_end == std::string::npos ? std::string() : endpoint.substr(scheme_end + 3);
  if (scheme == "ipc") {
    if (rest.empty()) return InvalidArgument("expected ipc:///path/to/socket, got '" + endpoint + "'");
    return Status::Ok();
  }
  // ZeroMQ's other transports (WebSocket, multicast, ...): libzmq checks them as it binds.
  for (const char* other : {"ws", "wss", "pgm", "epgm", "norm", "tipc", "vmci"}) {
    if (scheme == other) {
      if (rest.empty()) return InvalidArgument("expected " + scheme + "://ADDRESS, got '" + endpoint + "'");
      return Status::Ok();
    }
  }
  if (scheme != "tcp") {
    return InvalidArgument("expected a ZeroMQ endpoint tcp://HOST:PORT (such as tcp://127.0.0.1:5560) or ipc:///path "
                           "(or ws://, epgm://, ...: a transport of ZeroMQ's), got '" + endpoint + "'");
  }
  std::string host;
  int port = 0;
  if (!split_host_port(rest, &host, &port).ok() || port < 1) {
    return InvalidArgument("expected tcp://HOST:PORT with a port from 1 to 65535 (such as tcp://127.0.0.1:5560), got '" +
                           endpoint + "'");
  }
  return Status::Ok();
}

// The host and port of a tcp:// endpoint or a HOST:PORT address ("" and 0 otherwise): two that bind one port.
std::pair<std::string, int> tcp_host_port(const std::string& address) {
  std::string rest = address;
  if (rest.rfind("tcp://", 0) == 0) rest = rest.substr(6);
  else if (rest.find("://") != std::string::npos) return {"", 0};
  std::string host;
  int port = 0;
  if (!split_host_port(rest, &host, &port).ok()) return {"", 0};
  return {host, port};
}
// `one_host`: both bound on one machine, where every interface's address (*, 0.0.0.0) takes the port
// of each; otherwise (stages on several hosts, transport.mode tcp) only this host's own: the same
// host, or every interface's against loopback.
bool same_tcp_port(const std::string& a, const std::string& b, bool one_host) {
  const auto [host_a, port_a] = tcp_host_port(a);
  const auto [host_b, port_b] = tcp_host_port(b);
  const auto any = [](const std::string& h) { return h == "*" || h == "0.0.0.0" || h == "::"; };
  const auto local = [&](const std::string& h) {
    return any(h) || h == "localhost" || h == "::1" || h.rfind("127.", 0) == 0 || h == "lo";
  };
  if (port_a <= 0 || port_a != port_b) return false;
  if (host_a == host_b) return true;
  if (one_host) return any(host_a) || any(host_b);
  return (any(host_a) && local(host_b)) || (any(host_b) && local(host_a));
}

Config parse(const YAML::Node& given_root, const std::string& source, const std::string& base_dir,
             const ConfigLoadOptions& options) {
  Context ctx(source);
  Config c;
  c.source = source;
  c.base_dir = base_dir;
  if (!given_root.IsDefined() || given_root.IsNull()) ctx.fail(given_root, "(top level)", "the config is empty");
  refuse_duplicate_keys(ctx, given_root, "");
  resolve_merge_keys(ctx, given_root, "");
  const YAML::Node& root = given_root;
  MapReader top(ctx, root, "");
  // Top-level keys that start with "x-" are the config's own: a place to define YAML anchors that
  // streams or sections merge (as Docker Compose's extension fields).
  if (root.IsMap()) {
    for (auto it = root.begin(); it != root.end(); ++it) {
      if (it->first.IsScalar() && it->first.Scalar().rfind("x-", 0) == 0) top.child(it->first.Scalar());
    }
  }

  std::string mode_text;
  {
    MapReader r(ctx, top.child("job"), "job");
    r.str("name", &c.job.name);
    // The name becomes part of socket paths and shared memory names: same rules as a stream id.
    if (Status s = validate_stream_id(c.job.name); !s.ok()) {
      ctx.fail(top.child("job")["name"], "job.name",
               "'" + c.job.name + "' must be 1 to 64 letters, digits, '_', '-' or '.', and not '.' or '..'");
    }
    mode_text = "";
    r.str("mode", &mode_text);
    if (!mode_text.empty() && mode_text != "archive" && mode_text != "live") {
      ctx.fail(top.child("job")["mode"], "job.mode", "expected archive | live, got '" + mode_text + "'");
    }
    r.number("price_per_gpu_hour", &c.job.price_per_gpu_hour, 0, 1e6);
    r.str("summary_path", &c.job.summary_path);
    // A folder (found only at the job's end: every frame classified, then exit 2). "dir/", ".", "..".
    if (const std::string& given = c.job.summary_path; !given.empty()) {
      std::error_code ec;
      const std::string resolved = resolve_path(base_dir, given);
      const std::string last = std::filesystem::path(given).filename().string();
      // (Looked at only by who reads the file itself: a stage takes `vapipe run`'s copy of the config,
      // and a share that stopped answering would hold up its start.)
      if (given.back() == '/' || last == "." || last == ".." ||
          (!options.file_text && std::filesystem::is_directory(resolved, ec))) {
        ctx.fail(top.child("job")["summary_path"], "job.summary_path",
                 given + " is a folder: give a file's path (" + (given.back() == '/' ? given : given + "/") +
                     "summary.json)");
      }
    }
    c.job.summary_path = resolve_path(base_dir, c.job.summary_path);
    r.number("drain_timeout_s", &c.job.drain_timeout_s, 0.1, 3600);
    r.uint("max_restarts", &c.job.max_restarts, 0, 1000000);
    r.number("stage_timeout_s", &c.job.stage_timeout_s, 0, 86400);
    r.finish();
  }

  YAML::Node first_watch_node;  // streams[].watch_s: only an archive job watches folders
  std::string first_watch_path;
  YAML::Node first_loop_node;  // streams[].loop: only a live job reads a file again at its end
  std::string first_loop_path;
  {
    YAML::Node streams = top.child("streams");
    if (!streams.IsDefined() || streams.IsNull() || !streams.IsSequence() || streams.size() == 0) {
      ctx.fail(streams, "streams", "expected a non-empty list of streams (each with id and uri)");
    }
    std::map<std::string, std::string> ids;  // stream id -> what gave it ("streams[2]", or a glob's file)
    std::vector<std::pair<size_t, size_t>> members;  // (index in c.streams, index in `streams`)
    for (size_t i = 0; i < streams.size(); ++i) {
      const std::string path = "streams[" + std::to_string(i) + "]";
      MapReader r(ctx, streams[i], path);
      StreamConfig s;
      s.line = streams[i].Mark().line + 1;
      std::string glob, id_prefix;
      double settle_s = -1, watch_s = -1;
      r.str("id", &s.id);
      r.str("uri", &s.uri);
      if (const YAML::Node uri = r.child("uri"); uri.IsDefined() && !s.uri.empty()) {
        s.uri_line = uri.Mark().line + 1;
        s.uri_key = path + ".uri";
      }
      r.str("glob", &glob);
      r.str("id_prefix", &id_prefix);
      r.number("settle_s", &settle_s, 0, 7 * 86400);
      r.number("watch_s", &watch_s, 0.1, 86400);
      r.number("max_fps", &s.max_fps, 0, 1000);
      r.optional_boolean("keyframes_only", &s.keyframes_only);
      r.optional_uint("rtsp_latency_ms", &s.rtsp_latency_ms, 0, 60000);
      r.region("roi", &s.roi);
      r.str("source", &s.source);
      r.boolean("loop", &s.loop);
      std::optional<uint32_t> rotate;
      std::optional<bool> mirror;
      if (const YAML::Node turn = r.value("rotate"); turn.IsDefined()) {
        uint64_t degrees = 0;
        if (!decimal_uint(turn, &degrees) || degrees % 90 != 0 || degrees > 270) {
          ctx.fail(turn, path + ".rotate",
                   "expected 0, 90, 180 or 270 (degrees clockwise that turn the picture upright), got " + scalar_text(turn));
        }
        rotate = static_cast<uint32_t>(degrees);
      }
      r.optional_boolean("mirror", &mirror);
      if (rotate || mirror) s.turn = orientation_from_rotation(rotate.value_or(0), mirror.value_or(false));
      std::optional<bool> tls_verify;
      r.str("tls_ca_file", &s.tls.ca_file);
      r.optional_boolean("tls_verify", &tls_verify);
      s.tls.verify = tls_verify.value_or(true);
      std::string tls_fingerprint;
      r.str("tls_fingerprint", &tls_fingerprint);
      if (!tls_fingerprint.empty()) {
        auto pin = parse_tls_fingerprint(tls_fingerprint);
        if (!pin.ok()) ctx.fail(streams[i]["tls_fingerprint"], path + ".tls_fingerprint", pin.status().message());
        s.tls.fingerprint = pin.value();
        const char* other = !s.tls.ca_file.empty() ? "tls_ca_file" : tls_verify.has_value() ? "tls_verify" : nullptr;
        if (other) {
          ctx.fail(streams[i][other], path + "." + other,
                   "tls_fingerprint trusts that one certificate alone, so " + std::string(other) +
                       " would not be used: give one or the other");
        }
      }
      std::string from_text, to_text;
      r.str("from", &from_text);
      r.str("to", &to_text);
      // In the video's own time, or (a date and time: "2026-11-30T14:10:00") a time of day, placed in
      // each file by its recording's start (recorded_at) below.
      TimeOfDayPart day_part;
      for (const auto& [key, text, out, unix_out] :
           {std::tuple<const char*, const std::string&, int64_t*, std::optional<int64_t>*>{"from", from_text, &s.from_ns,
                                                                                           &day_part.from_unix_ns},
            {"to", to_text, &s.to_ns, &day_part.to_unix_ns}}) {
        if (text.empty()) continue;
        auto t = looks_like_date(text) ? parse_date_time(text) : parse_media_time(text);
        if (!t.ok()) ctx.fail(streams[i][key], path + "." + key, t.status().message());
        if (looks_like_date(text)) {
          *unix_out = t.value();
        } else {
          *out = t.value();
        }
      }
      if (!from_text.empty() && !to_text.empty() && looks_like_date(from_text) != looks_like_date(to_text)) {
        ctx.fail(streams[i]["to"], path + ".to",
                 "give from and to alike: both times of day (2026-11-30T14:10:00) or both in the video's own time "
                 "(1:30:00)");
      }
      if (s.to_ns >= 0 && s.to_ns <= s.from_ns) {
        ctx.fail(streams[i]["to"], path + ".to",
                 "must be after from (" + media_time_text(s.from_ns) + "), got " + media_time_text(s.to_ns));
      }
      if (day_part.from_unix_ns && day_part.to_unix_ns && *day_part.to_unix_ns <= *day_part.from_unix_ns) {
        ctx.fail(streams[i]["to"], path + ".to", "must be after from (" + from_text + "), got " + to_text);
      }
      std::string recorded_at;
      r.str("recorded_at", &recorded_at);
      if (!recorded_at.empty()) {
        auto recorded = parse_recorded_at(recorded_at);
        if (!recorded.ok()) ctx.fail(streams[i]["recorded_at"], path + ".recorded_at", recorded.status().message());
        s.recorded = recorded.value();
      }
      if (day_part.given() && (s.recorded.from == RecordingStart::From::kNone ||
                               s.recorded.from == RecordingStart::From::kContainer)) {
        const char* key = !from_text.empty() && looks_like_date(from_text) ? "from" : "to";
        ctx.fail(streams[i][key], path + "." + key,
                 std::string("a time of day needs when the recording started, as the config is read: give ") +
                     (s.recorded.from == RecordingStart::From::kNone ? "recorded_at" : "recorded_at as a time or name:FORMAT "
                                                                                      "(its container is read only when the "
                                                                                      "file opens)") +
                     ", or give from and to in the video's own time (1:30:00)");
      }
      r.finish();
      if (s.is_member()) {
        // Decoded once, by the source: what decides the decoding is the source's to set.
        const char* own = !s.uri.empty()                       ? "uri"
                          : !glob.empty()                      ? "glob"
                          : !id_prefix.empty()                 ? "id_prefix"
                          : settle_s >= 0                      ? "settle_s"
                          : watch_s >= 0                       ? "watch_s"
                          : s.max_fps >= 0                     ? "max_fps"
                          : s.keyframes_only.has_value()       ? "keyframes_only"
                          : s.rtsp_latency_ms.has_value()      ? "rtsp_latency_ms"
                          : rotate.has_value()                 ? "rotate"
                          : mirror.has_value()                 ? "mirror"
                          : !s.tls.ca_file.empty()             ? "tls_ca_file"
                          : tls_verify.has_value()             ? "tls_verify"
                          : !tls_fingerprint.empty()           ? "tls_fingerprint"
                          : !recorded_at.empty()               ? "recorded_at"
                          : !from_text.empty()                 ? "from"
                          : !to_text.empty()                   ? "to"
                          : s.loop                             ? "loop"
                                                               : nullptr;
        if (own) {
          ctx.fail(streams[i][own], path + "." + own,
                   "a stream with `source` classifies the frames of stream '" + s.source + "' as that stream decodes "
                   "them: set " + own + " on '" + s.source + "' instead");
        }
        if (s.id.empty()) ctx.fail(streams[i], path + ".id", "missing (every stream needs an id)");
        if (Status st = validate_stream_id(s.id); !st.ok()) ctx.fail(streams[i]["id"], path + ".id", st.message());
        if (!ids.emplace(s.id, path).second) ctx.fail(streams[i]["id"], path + ".id", "duplicate stream id '" + s.id + "'");
        members.emplace_back(c.streams.size(), i);
        c.streams.push_back(std::move(s));  // its uri is its source's, below
        continue;
      }
      // A camera's TLS certificate: for the streams that speak TLS, a readable PEM certificate file.
      const char* tls_key = !s.tls.ca_file.empty()      ? "tls_ca_file"
                            : tls_verify.has_value()     ? "tls_verify"
                            : !tls_fingerprint.empty()   ? "tls_fingerprint"
                                                         : nullptr;
      if (tls_key && !glob.empty()) {
        ctx.fail(streams[i][tls_key], path + "." + tls_key, "only for rtsps:// and https:// streams, not a glob's files");
      }
      if (!s.tls.ca_file.empty()) {
        s.tls.ca_file = resolve_path(base_dir, s.tls.ca_file);
        std::ifstream pem(s.tls.ca_file);
        const std::string text((std::istreambuf_iterator<char>(pem)), std::istreambuf_iterator<char>());
        if (!pem.good() && text.empty()) {
          ctx.fail(streams[i]["tls_ca_file"], path + ".tls_ca_file", "cannot read " + s.tls.ca_file);
        }
        if (text.find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
          ctx.fail(streams[i]["tls_ca_file"], path + ".tls_ca_file",
                   s.tls.ca_file + " holds no PEM certificate ('-----BEGIN CERTIFICATE-----'): give the camera's "
                   "certificate, or its authority's, as PEM (openssl x509 -inform der -in cam.cer -out cam.pem)");
        }
        if (!tls_verify.value_or(true)) {
          ctx.fail(streams[i]["tls_verify"], path + ".tls_verify",
                   "tls_verify: false checks nothing, so tls_ca_file would not be used: give one or the other");
        }
      }
      if (!glob.empty()) {
        // Every file the pattern matches is a stream; ids come from the files' paths.
        if (!s.id.empty() || !s.uri.empty()) {
          ctx.fail(streams[i], path, "give either uri (with an id) or glob (ids from the file names), not both");
        }
        if (s.loop) {
          ctx.fail(streams[i]["loop"], path + ".loop",
                   "only for a file of its own (uri): a folder's files are each classified once");
        }
        // A watched folder's files are often copied in (cp, rsync, an NVR's export over SMB) while the
        // job looks: one read before its copy ended would be taken as done, cut short. Unless told
        // otherwise (settle_s: 0 for files that land whole, by a rename), a file waits until it has not
        // changed for kWatchedFolderSettleS.
        if (watch_s > 0 && settle_s < 0) settle_s = kWatchedFolderSettleS;
        FolderWatch w;
        w.where = path;
        w.line = s.line;
        w.pattern = resolve_path(base_dir, glob);
        w.id_prefix = id_prefix;
        w.settle_s = std::max(0.0, settle_s);
        w.watch_s = std::max(0.0, watch_s);
        w.each = s;
        w.part_from_unix_ns = day_part.from_unix_ns;
        w.part_to_unix_ns = day_part.to_unix_ns;
        const bool watched = w.watch_s > 0;
        const std::string& pattern = w.pattern;
        // A stage of `vapipe run` takes the files from the job's stream table instead.
        if (!options.expand_globs) ctx.all_streams_known = false;
        if (options.expand_globs) {
          auto found = glob_files(w);
          if (!found.ok()) ctx.fail(streams[i]["glob"], path + ".glob", found.status().message());
          const size_t hidden = found->hidden;
          const std::string hidden_text = std::to_string(hidden) + " hidden file(s) (a name, or a folder's, starting with "
                                          "'.', as the '._' files a Mac leaves beside those it copies) left out, as a "
                                          "shell's glob does; name a '.' in the pattern to take them";
          // A watched folder may be empty yet: the job waits for its first file.
          if (found->matched == 0 && !watched) {
            ctx.fail(streams[i]["glob"], path + ".glob",
                     "no file matches '" + pattern + "'" + (hidden ? " (" + hidden_text + ")" : ""));
          }
          if (hidden > 0) c.notes.push_back(path + ".glob: " + hidden_text);
          if (!found->unreadable.empty()) c.notes.push_back(path + ".glob: " + unlisted_folders_text(found->unreadable));
          if (!found->unsettled.empty()) {
            const std::vector<std::string>& names = found->unsettled;
            if (found->settled == 0 && !watched) {
              ctx.fail(streams[i]["settle_s"], path + ".settle_s",
                       "every file that matches '" + pattern + "' (" + std::to_string(names.size()) +
                           ") was modified in the last " + number_text(settle_s) + " s: none is settled yet (" +
                           name_list(names) + ")");
            }
            c.notes.push_back(path + ".glob: " + std::to_string(names.size()) + " file(s) modified in the last " +
                              number_text(settle_s) + " s are left for a " + (watched ? "later look" : "later run") +
                              " (settle_s: they may still be being written): " + name_list(names));
          }
          if (!found->refused.empty()) {
            const auto& [file, why] = found->refused.front();
            const bool by_prefix = !id_prefix.empty() && why.rfind("id:", 0) == 0;
            ctx.fail(streams[i][by_prefix ? "id_prefix" : "glob"], path + (by_prefix ? ".id_prefix" : ".glob"),
                     file + ": " + why.substr(why.find(':') + 2));
          }
          std::set<std::string> files;
          for (const StreamConfig& f : found->streams) files.insert(file_uri_path(f.uri));
          for (StreamConfig& f : found->streams) {
            const std::string file = file_uri_path(f.uri);
            if (auto [it, added] = ids.emplace(f.id, file); !added) {
              // An id keeps letters, digits, '_', '-' and '.': "a b.mp4" and "a#b.mp4" both make "a-b".
              const bool same_glob = files.count(it->second) > 0;
              ctx.fail(streams[i]["glob"], path + ".glob",
                       file + " makes the stream id '" + f.id + "', as " + it->second + " does (an id keeps only " +
                           "letters, digits, '_', '-' and '.'): " +
                           (same_glob ? "rename one of the two files" : "set id_prefix to tell them apart"));
            }
            c.streams.push_back(std::move(f));
          }
          const std::vector<std::string>& undated = found->undated;
          const std::vector<std::string>& after_part = found->after_part;
          const size_t settled = found->settled;
          if (!undated.empty()) {
            c.notes.push_back(path + ".recorded_at: " + std::to_string(undated.size()) + " of " +
                              std::to_string(settled) + " file names hold no time that " + s.recorded.spec +
                              " reads (" + name_list(undated) + "): " +
                              (day_part.given() ? "left out, as its from and to are times of day"
                                                : "their results' camera_unix_ms stay null"));
          }
          if (!after_part.empty()) {
            c.notes.push_back(path + ".to: " + std::to_string(after_part.size()) + " of " + std::to_string(settled) +
                              " files left out: recorded from " + to_text + " on (" + name_list(after_part) + ")");
          }
          if (day_part.given() && settled > 0 && undated.size() + after_part.size() == settled && !watched) {
            ctx.fail(streams[i]["glob"], path + ".glob",
                     "none of its " + std::to_string(settled) + " files was recorded before its to (" + to_text +
                         ")" + (undated.empty() ? "" : " as far as their names say"));
          }
        }
        if (watched) {
          if (first_watch_path.empty()) {
            first_watch_node = streams[i]["watch_s"];
            first_watch_path = path + ".watch_s";
          }
          c.notes.push_back(path + ".glob: watched: '" + pattern + "' is looked at again every " +
                            number_text(w.watch_s) + " s while the job runs, and each file added to it is classified " +
                            (w.settle_s > 0 ? "once it has not changed for " + number_text(w.settle_s) + " s"
                                            : "as soon as it is seen (settle_s: 0, for files that land whole)"));
          c.watches.push_back(std::move(w));
        }
        continue;
      }
      if (!id_prefix.empty()) ctx.fail(streams[i]["id_prefix"], path + ".id_prefix", "only with glob");
      if (settle_s >= 0) ctx.fail(streams[i]["settle_s"], path + ".settle_s", "only with glob");
      if (watch_s >= 0) ctx.fail(streams[i]["watch_s"], path + ".watch_s", "only with glob (a folder's files)");
      if (s.id.empty()) ctx.fail(streams[i], path + ".id", "missing (every stream needs an id, or use glob)");
      if (Status st = validate_stream_id(s.id); !st.ok()) ctx.fail(streams[i]["id"], path + ".id", st.message());
      if (!ids.emplace(s.id, path).second) ctx.fail(streams[i]["id"], path + ".id", "duplicate stream id '" + s.id + "'");
      if (s.uri.empty()) ctx.fail(streams[i], path + ".uri", "missing (every stream needs a uri)");
      auto parsed = parse_stream_uri(s.uri, base_dir);
      if (!parsed.ok()) ctx.fail(streams[i]["uri"], path + ".uri", parsed.status().message());
      s.parsed = parsed.value();
      s.uri = s.parsed.uri;
      if ((!s.whole_file() || day_part.given()) && s.parsed.kind != UriKind::kFile) {
        const char* key = !from_text.empty() ? "from" : "to";
        ctx.fail(streams[i][key], path + "." + key, "only for files (a part of a recording, in its own time)");
      }
      if (s.loop && s.parsed.kind != UriKind::kFile) {
        ctx.fail(streams[i]["loop"], path + ".loop",
                 "only for files (a recording read again from its start at its end, as an endless camera)");
      }
      if (s.loop && first_loop_path.empty()) {
        first_loop_node = streams[i]["loop"];
        first_loop_path = path + ".loop";
      }
      if (s.recorded.from != RecordingStart::From::kNone) {
        const std::string key = path + ".recorded_at";
        if (s.parsed.kind == UriKind::kNetwork) {
          ctx.fail(streams[i]["recorded_at"], key,
                   "only for files (a camera's own clock comes from its RTCP sender reports, in camera_unix_ms)");
        }
        if (s.parsed.kind == UriKind::kTest && s.recorded.from != RecordingStart::From::kGiven) {
          ctx.fail(streams[i]["recorded_at"], key, "a test:// source has no file name or container: give the time");
        }
        if (s.recorded.from == RecordingStart::From::kFileName) {
          const std::string file = file_uri_path(s.uri);
          s.recorded.unix_ns = time_in_file_name(file, s.recorded.spec.substr(5)).value_or(-1);
          if (!s.recorded.known()) {
            ctx.fail(streams[i]["recorded_at"], key,
                     "the name '" + std::filesystem::path(file).filename().string() + "' holds no time that " +
                         s.recorded.spec + " reads");
          }
        }
        if (day_part.given() && !day_part.place(&s)) {
          ctx.fail(streams[i]["to"], path + ".to",
                   "its recording starts at " + local_time_text(s.recorded.unix_ns) + ", at or after its to (" +
                       to_text + "): nothing of it is in that part");
        }
      }
      if (tls_key && !uri_uses_tls(s.uri)) {
        ctx.fail(streams[i][tls_key], path + "." + tls_key,
                 "only for rtsps:// and https:// streams (this one's uri does not use TLS)");
      }
      c.streams.push_back(std::move(s));
    }
    // Each member's source: a stream of this config that reads its own uri.
    for (const auto& [member, node] : members) {
      StreamConfig& m = c.streams[member];
      const std::string path = "streams[" + std::to_string(node) + "].source";
      auto source = std::find_if(c.streams.begin(), c.streams.end(), [&](const StreamConfig& s) { return s.id == m.source; });
      if (m.source == m.id) ctx.fail(streams[node]["source"], path, "a stream cannot be its own source");
      if (source == c.streams.end()) {
        ctx.fail(streams[node]["source"], path, "no stream has the id '" + m.source + "'");
      }
      if (source->is_member()) {
        ctx.fail(streams[node]["source"], path,
                 "'" + m.source + "' takes its frames from '" + source->source + "' itself: name '" + source->source +
                     "' as the source");
      }
      m.uri = source->uri;
      m.parsed = source->parsed;
      m.max_fps = source->max_fps;
      m.keyframes_only = source->keyframes_only;
      m.rtsp_latency_ms = source->rtsp_latency_ms;
      m.turn = source->turn;
      m.tls = source->tls;
      m.recorded = source->recorded;
      m.from_ns = source->from_ns;
      m.to_ns = source->to_ns;
    }
  }
  // Default mode: archive when every stream ends by itself (files, finite test sources, a video file
  // served over HTTP: one such ran as a camera, and was read again and again for ever).
  if (mode_text.empty()) {
    bool all_finite = true;
    for (const auto& s : c.streams) {
      all_finite = all_finite && ((s.parsed.kind == UriKind::kFile && !s.loop) ||
                                  (s.parsed.kind == UriKind::kNetwork && !s.loop && names_a_video_file_over_http(s.uri)) ||
                                  (s.parsed.kind == UriKind::kTest && s.parsed.test.frames > 0 && !s.parsed.test.live));
    }
    c.job.mode = all_finite ? JobMode::kArchive : JobMode::kLive;
  } else {
    c.job.mode = mode_text == "live" ? JobMode::kLive : JobMode::kArchive;
  }
  if (!first_loop_path.empty() && c.job.mode != JobMode::kLive) {
    ctx.fail(first_loop_node, first_loop_path,
             "only in a live job (a file read again at its end never ends, and an archive job ends when its files "
             "have; each of its frames is classified once)");
  }
  if (!first_watch_path.empty() && c.job.mode != JobMode::kArchive) {
    ctx.fail(first_watch_node, first_watch_path,
             std::string("only in an archive job (every frame of each file classified, once): this one is live") +
                 (mode_text.empty() ? " because some of its streams never end by themselves (cameras)" : " (job.mode)") +
                 "; run the folder in a job of its own");
  }
  c.ingest.queue_policy = c.job.mode == JobMode::kArchive ? QueuePolicy::kBlock : QueuePolicy::kDropOldest;
  c.ingest.queue_capacity = c.job.mode == JobMode::kArchive ? 4 : 8;

  {
    MapReader r(ctx, top.child("ingest"), "ingest");
    uint64_t fixed_threads = 0;
    r.choice("decoder", &c.ingest.decoder, {"auto", "cpu", "nvdec"});
    c.ingest.decoder_line = line_of(r.child("decoder"));
    r.uint("queue_capacity", &c.ingest.queue_capacity, 1, 4096);
    std::string policy = queue_policy_name(c.ingest.queue_policy);
    r.choice("queue_policy", &policy, {"block", "drop_oldest"});
    c.ingest.queue_policy = *parse_queue_policy(policy);
    r.boolean("reconnect", &c.ingest.reconnect);
    r.number("reconnect_delay_s", &c.ingest.reconnect_delay_s, 0, 3600);
    // Left out, the longest wait is at least the first: `reconnect_delay_s: 60` alone was refused by
    // the default of a key not written (30).
    if (!r.child("reconnect_max_delay_s").IsDefined()) {
      c.ingest.reconnect_max_delay_s = std::max(c.ingest.reconnect_max_delay_s, c.ingest.reconnect_delay_s);
    }
    r.number("reconnect_max_delay_s", &c.ingest.reconnect_max_delay_s, 0, 3600);
    r.uint("reconnect_attempts", &c.ingest.reconnect_attempts, 0, 1000000);
    r.number("stall_timeout_s", &c.ingest.stall_timeout_s, 0, 3600);
    r.number("file_open_timeout_s", &c.ingest.file_open_timeout_s, 1, 3600);
    r.uint("rtsp_latency_ms", &c.ingest.rtsp_latency_ms, 0, 60000);
    r.number("max_fps", &c.ingest.max_fps, 0, 1000);
    r.boolean("keyframes_only", &c.ingest.keyframes_only);
    r.uint("max_open_streams", &c.ingest.max_open_streams, 0, 1000000);
    // `auto` is 0's name (the log says "ingest.decoder_threads: auto" for it).
    if (YAML::Node threads = r.value("decoder_threads"); threads.IsDefined() && threads.IsScalar() && threads.Scalar() == "auto") {
      c.ingest.decoder_threads = 0;
    } else if (threads.IsDefined() && (!decimal_uint(threads, &fixed_threads) || fixed_threads > 64)) {
      ctx.fail(threads, "ingest.decoder_threads", "expected auto or an integer from 0 to 64, got " + scalar_text(threads));
    } else if (threads.IsDefined()) {
      c.ingest.decoder_threads = static_cast<uint32_t>(fixed_threads);
    }
    std::string orientation = c.ingest.upright ? "upright" : "as_stored";
    r.choice("orientation", &orientation, {"upright", "as_stored"});
    c.ingest.upright = orientation == "upright";
    std::string deinterlace = c.ingest.first_field ? "first_field" : "off";
    r.choice("deinterlace", &deinterlace, {"first_field", "off"});
    c.ingest.first_field = deinterlace == "first_field";
    if (c.ingest.reconnect_max_delay_s < c.ingest.reconnect_delay_s) {
      std::ostringstream os;
      os << "must be at least ingest.reconnect_delay_s (" << c.ingest.reconnect_delay_s << "), got "
         << c.ingest.reconnect_max_delay_s;
      YAML::Node bad = r.child("reconnect_max_delay_s");
      ctx.fail(bad.IsDefined() ? bad : r.child("reconnect_delay_s"), "ingest.reconnect_max_delay_s", os.str());
    }
    r.finish();
  }
  {
    MapReader r(ctx, top.child("preprocess"), "preprocess");
    r.choice("device", &c.preprocess.device, {"auto", "cpu", "cuda"});
    c.preprocess.device_line = line_of(r.child("device"));
    r.uint("width", &c.preprocess.width, 1, 4096);
    r.uint("height", &c.preprocess.height, 1, 4096);
    r.floats3("mean", &c.preprocess.mean, false);
    r.floats3("std", &c.preprocess.std, true);
    std::string dtype = dtype_name(c.preprocess.dtype);
    r.choice("dtype", &dtype, {"float32", "float16"});
    c.preprocess.dtype = dtype == "float16" ? DType::kFloat16 : DType::kFloat32;
    r.uint("threads", &c.preprocess.threads, 0, 256);
    r.choice("channel_order", &c.preprocess.channel_order, {"rgb", "bgr"});
    r.choice("resize", &c.preprocess.resize, {"stretch", "center_crop", "letterbox"});
    if (r.uints3("pad_color", &c.preprocess.pad_color, 0, 255) && c.preprocess.resize != "letterbox") {
      ctx.fail(r.child("pad_color"), "preprocess.pad_color",
               "is the colour of letterbox's margins: it needs resize: letterbox (resize is " + c.preprocess.resize + ")");
    }
    r.finish();
  }
  {
    MapReader r(ctx, top.child("batch"), "batch");
    YAML::Node size = r.value("max_batch_size");
    uint64_t fixed = 0;
    if (size.IsDefined() && size.IsScalar() && size.Scalar() == "auto") {
      c.batch.auto_size = true;
    } else if (size.IsDefined() && !size.IsNull()) {
      if (!decimal_uint(size, &fixed) || fixed < 1 || fixed > 4096) {
        ctx.fail(size, "batch.max_batch_size", "expected auto or an integer from 1 to 4096, got " + scalar_text(size));
      }
      c.batch.max_batch_size = static_cast<uint32_t>(fixed);
    }
    r.number("max_delay_ms", &c.batch.max_delay_ms, 0, 60000);
    r.uint("auto_limit", &c.batch.auto_limit, 1, 4096);
    r.finish();
    if (c.batch.auto_size) c.batch.max_batch_size = c.batch.auto_limit;
  }
  {
    YAML::Node node = top.child("infer");
    MapReader r(ctx, node, "infer");
    r.str("model", &c.infer.model);
    r.str("labels", &c.infer.labels);
    c.infer.model_line = line_of(r.child("model"));
    c.infer.labels_line = line_of(r.child("labels"));
    r.str("model_name", &c.infer.model_name);
    r.str("device", &c.infer.device);
    c.infer.device_line = line_of(r.child("device"));
    r.uint("top_k", &c.infer.top_k, 1, 1000);
    r.uint("warmup_batches", &c.infer.warmup_batches, 1, 100);
    r.uint("threads", &c.infer.threads, 0, 1024);
    r.boolean("optimize", &c.infer.optimize);
    std::string precision = c.infer.precision == DType::kFloat16 ? "fp16" : "fp32";
    r.choice("precision", &precision, {"fp32", "fp16"});
    c.infer.precision = precision == "fp16" ? DType::kFloat16 : DType::kFloat32;
    r.boolean("channels_last", &c.infer.channels_last);
    r.boolean("jit_optimize", &c.infer.jit_optimize);
    r.choice("batch_shapes", &c.infer.batch_shapes, {"auto", "exact", "padded"});
    r.choice("cuda_graphs", &c.infer.cuda_graphs, {"auto", "on", "off"});
    r.choice("output", &c.infer.output, {"auto", "logits", "probabilities", "multi_label_logits"});
    r.finish();
    if (c.infer.model.empty()) ctx.fail(node, "infer.model", "missing (path of a TorchScript model)");
    if (c.infer.labels.empty()) ctx.fail(node, "infer.labels", "missing (path of a labels file, one per line)");
    if (c.infer.cuda_graphs == "on" && c.infer.batch_shapes == "exact") {
      ctx.fail(node["cuda_graphs"], "infer.cuda_graphs",
               "'on' needs batch_shapes padded or auto (a graph is recorded for each fixed batch size)");
    }
    if (c.infer.cuda_graphs == "on" && c.infer.device == "cpu") {
      ctx.fail(node["cuda_graphs"], "infer.cuda_graphs",
               "'on' needs the model on a GPU, and infer.device is cpu (give auto or off)");
    }
    const std::string& d = c.infer.device;
    const bool cuda_n = d.rfind("cuda:", 0) == 0 && d.size() > 5 &&
                        d.find_first_not_of("0123456789", 5) == std::string::npos;
    if (d != "auto" && d != "cpu" && d != "cuda" && !cuda_n) {
      ctx.fail(node["device"], "infer.device", "expected auto | cpu | cuda | cuda:N, got '" + d + "'");
    }
    c.infer.model = resolve_path(base_dir, c.infer.model);
    c.infer.labels = resolve_path(base_dir, c.infer.labels);
    if (c.infer.model_name.empty()) c.infer.model_name = std::filesystem::path(c.infer.model).stem().string();
  }
  {
    MapReader r(ctx, top.child("publish"), "publish");
    r.str("endpoint", &c.publish.endpoint);
    r.str("metrics_address", &c.publish.metrics_address);
    if (!c.publish.metrics_address.empty()) {
      std::string host;
      int port = 0;
      if (c.publish.metrics_address.find("://") != std::string::npos) {
        // (http://127.0.0.1:9100 passed as a host "http://127.0.0.1", which publish then could not listen on.)
        ctx.fail(r.child("metrics_address"), "publish.metrics_address",
                 "expected HOST:PORT without a scheme (such as 127.0.0.1:9560; it serves http://HOST:PORT/metrics), "
                 "got '" + c.publish.metrics_address + "'");
      } else if (Status s = split_host_port(c.publish.metrics_address, &host, &port); !s.ok()) {
        ctx.fail(r.child("metrics_address"), "publish.metrics_address", s.message());
      }
    }
    r.str("metrics_token_file", &c.publish.metrics_token_file);
    c.publish.metrics_token_file = resolve_path(base_dir, c.publish.metrics_token_file);
    if (!c.publish.metrics_token_file.empty()) {
      auto token = read_metrics_token_file(c.publish.metrics_token_file);
      if (!token.ok()) {
        ctx.fail(r.child("metrics_token_file"), "publish.metrics_token_file", token.status().message());
      } else if (c.publish.metrics_address.empty()) {
        ctx.fail(r.child("metrics_token_file"), "publish.metrics_token_file", "needs publish.metrics_address");
      } else {
        c.publish.metrics_token = std::move(*token);
      }
    }
    r.str("metrics_tls_cert_file", &c.publish.metrics_tls_cert_file);
    r.str("metrics_tls_key_file", &c.publish.metrics_tls_key_file);
    c.publish.metrics_tls_cert_file = resolve_path(base_dir, c.publish.metrics_tls_cert_file);
    c.publish.metrics_tls_key_file = resolve_path(base_dir, c.publish.metrics_tls_key_file);
    for (const auto& [key, path, other] :
         {std::tuple{"metrics_tls_cert_file", &c.publish.metrics_tls_cert_file, &c.publish.metrics_tls_key_file},
          std::tuple{"metrics_tls_key_file", &c.publish.metrics_tls_key_file, &c.publish.metrics_tls_cert_file}}) {
      if (path->empty()) continue;
      const std::string name = std::string("publish.") + key;
      if (c.publish.metrics_address.empty()) {
        ctx.fail(r.child(key), name, "needs publish.metrics_address");
      } else if (other->empty()) {
        ctx.fail(r.child(key), name, "needs publish.metrics_tls_cert_file and metrics_tls_key_file both");
      } else if (!std::ifstream(*path).good()) {
        ctx.fail(r.child(key), name, "cannot read " + *path);
      }
    }
    r.str("metrics_tls_client_ca_file", &c.publish.metrics_tls_client_ca_file);
    c.publish.metrics_tls_client_ca_file = resolve_path(base_dir, c.publish.metrics_tls_client_ca_file);
    if (!c.publish.metrics_tls_client_ca_file.empty()) {
      const char* key = "metrics_tls_client_ca_file";
      if (c.publish.metrics_tls_cert_file.empty()) {
        ctx.fail(r.child(key), "publish.metrics_tls_client_ca_file",
                 "needs publish.metrics_tls_cert_file and metrics_tls_key_file (client certificates need HTTPS)");
      } else if (!std::ifstream(c.publish.metrics_tls_client_ca_file).good()) {
        ctx.fail(r.child(key), "publish.metrics_tls_client_ca_file", "cannot read " + c.publish.metrics_tls_client_ca_file);
      }
    }
    r.uint("segments_min_frames", &c.publish.segments_min_frames, 0, 1000000);
    r.number("segments_min_score", &c.publish.segments_min_score, 0, 1);
    if (c.publish.segments_min_score > 0 && c.publish.segments_min_frames == 0) {
      ctx.fail(r.child("segments_min_score"), "publish.segments_min_score",
               "needs publish.segments_min_frames (N >= 1): it decides which frames count for segments");
    }
    r.choice("segments_labels", &c.publish.segments_labels, {"top1", "each"});
    if (c.publish.segments_labels == "each" && (c.publish.segments_min_frames == 0 || c.publish.segments_min_score <= 0)) {
      ctx.fail(r.child("segments_labels"), "publish.segments_labels",
               "each needs publish.segments_min_frames (N >= 1) and segments_min_score (above 0): a label is on a "
               "frame when its score reaches segments_min_score");
    }
    // Which labels these are is the labels file's to say: infer checks them when it loads it (and so
    // does `vapipe validate`), naming this file and line.
    if (YAML::Node by_label = r.value("segments_min_score_by_label"); by_label.IsDefined()) {
      const std::string key = "publish.segments_min_score_by_label";
      if (!by_label.IsMap()) {
        ctx.fail(by_label, key, "expected a mapping of label: score (e.g. {smoke: 0.3, person: 0.7}), got " +
                                    scalar_text(by_label));
      }
      if (c.publish.segments_min_frames == 0 && by_label.size() > 0) {
        ctx.fail(by_label, key, "needs publish.segments_min_frames (N >= 1): it decides which frames count for segments");
      }
      for (auto it = by_label.begin(); it != by_label.end(); ++it) {
        if (!it->first.IsScalar() || it->first.Scalar().empty()) ctx.fail(it->first, key, "expected a label as each key");
        const std::string label = it->first.Scalar();
        double v = 0;
        if (!it->second.IsScalar() || !YAML::convert<double>::decode(it->second, v) || !(v >= 0 && v <= 1)) {
          ctx.fail(it->second, key + "." + label, "expected a number from 0 to 1, got " + scalar_text(it->second));
        }
        if (c.publish.segments_labels == "each" && v <= 0) {
          ctx.fail(it->second, key + "." + label,
                   "expected a number above 0 with segments_labels: each (at 0 the label would be on every frame whose "
                   "top_k names it)");
        }
        c.publish.segments_min_score_by_label[label] = {v, it->first.Mark().line + 1};
      }
    }
    r.boolean("segments_skip_damaged", &c.publish.segments_skip_damaged);
    if (c.publish.segments_skip_damaged && c.publish.segments_min_frames == 0) {
      ctx.fail(r.child("segments_skip_damaged"), "publish.segments_skip_damaged",
               "needs publish.segments_min_frames (N >= 1): it decides which frames count for segments");
    }
    r.number("segments_reconnect_grace_s", &c.publish.segments_reconnect_grace_s, 0, 3600);
    if (c.publish.segments_reconnect_grace_s > 0 && c.publish.segments_min_frames == 0) {
      ctx.fail(r.child("segments_reconnect_grace_s"), "publish.segments_reconnect_grace_s",
               "needs publish.segments_min_frames (N >= 1): it keeps segments open across a lost connection");
    }
    r.str("segments_pictures_dir", &c.publish.segments_pictures_dir);
    c.publish.segments_pictures_dir = resolve_path(base_dir, c.publish.segments_pictures_dir);
    if (!c.publish.segments_pictures_dir.empty()) {
      const YAML::Node at = r.child("segments_pictures_dir");
      if (c.publish.segments_min_frames == 0) {
        ctx.fail(at, "publish.segments_pictures_dir",
                 "needs publish.segments_min_frames (N >= 1): a picture is taken when a segment begins");
      } else if (c.job.mode == JobMode::kArchive) {
        ctx.fail(at, "publish.segments_pictures_dir",
                 "is for live jobs (a picture of the frame a camera shows when a segment begins); an archive job's "
                 "files are decoded again for pictures of their segments: vapipe segments RESULTS.jsonl --frames DIR");
      }
    }
    r.choice("segments_picture_frame", &c.publish.segments_picture_frame, {"best", "first"});
    if (c.publish.segments_picture_frame != "best" && c.publish.segments_pictures_dir.empty()) {
      ctx.fail(r.child("segments_picture_frame"), "publish.segments_picture_frame",
               "only with publish.segments_pictures_dir: it says which frame of a segment is pictured");
    }
    r.uint("segments_pictures_keep_days", &c.publish.segments_pictures_keep_days, 0, 100000);
    if (c.publish.segments_pictures_keep_days > 0 && c.publish.segments_pictures_dir.empty()) {
      ctx.fail(r.child("segments_pictures_keep_days"), "publish.segments_pictures_keep_days",
               "only with publish.segments_pictures_dir: it deletes that folder's older days");
    }
    r.boolean("segments_clips", &c.publish.segments_clips);
    r.number("segments_clip_pre_s", &c.publish.segments_clip_pre_s, 0, 60);
    r.number("segments_clip_post_s", &c.publish.segments_clip_post_s, 0, 600);
    r.number("segments_clip_max_s", &c.publish.segments_clip_max_s, 1, 3600);
    if (c.publish.segments_clips && c.publish.segments_pictures_dir.empty()) {
      ctx.fail(r.child("segments_clips"), "publish.segments_clips",
               "needs publish.segments_pictures_dir: each clip is written beside its segment's picture");
    }
    // Given otherwise than by default without clips: a clips key whose clips were left off.
    const PublishConfig defaults;
    for (auto [key, value, by_default] :
         {std::tuple{"segments_clip_pre_s", c.publish.segments_clip_pre_s, defaults.segments_clip_pre_s},
          std::tuple{"segments_clip_post_s", c.publish.segments_clip_post_s, defaults.segments_clip_post_s},
          std::tuple{"segments_clip_max_s", c.publish.segments_clip_max_s, defaults.segments_clip_max_s}}) {
      if (value != by_default && !c.publish.segments_clips) {
        ctx.fail(r.child(key), std::string("publish.") + key, "only with publish.segments_clips: true");
      }
    }
    r.str("jsonl_path", &c.publish.jsonl_path);
    c.publish.jsonl_path = resolve_path(base_dir, c.publish.jsonl_path);
    r.uint("jsonl_keep", &c.publish.jsonl_keep, 0, 1000000);
    if (c.publish.jsonl_keep > 0 && !results_path_is_timed(c.publish.jsonl_path)) {
      ctx.fail(r.child("jsonl_keep"), "publish.jsonl_keep",
               "only with a publish.jsonl_path named by the time (results/%Y-%m-%d.jsonl): it keeps that many of its "
               "files");
    }
    // The results file naming one of the job's own inputs (a copy-paste, a typo) would be emptied at an
    // archive job's start: a recording or the model gone without a word (found 2026-12-07).
    // So would the summary file, and either would overwrite the config itself (found 2026-12-07).
    {
      const auto same_file = [](const std::string& a, const std::string& b) {
        std::error_code ec;
        if (std::filesystem::equivalent(a, b, ec) && !ec) return true;
        return std::filesystem::weakly_canonical(a, ec) == std::filesystem::weakly_canonical(b, ec) && !ec;
      };
      // (The config's own file only by who reads it: a stage takes `vapipe run`'s copy, and stat() of
      // a config on a share that stopped answering held up a lane's restart for ever.)
      std::vector<std::pair<std::string, std::string>> inputs = {{"infer.model", c.infer.model},
                                                                 {"infer.labels", c.infer.labels}};
      if (!options.file_text) inputs.emplace_back("the config", c.source);
      for (size_t i = 0; i < c.streams.size(); ++i) {
        if (c.streams[i].parsed.kind == UriKind::kFile) {
          inputs.emplace_back("stream '" + c.streams[i].id + "'", file_uri_path(c.streams[i].parsed.uri));
        }
      }
      const auto overwrites = [&](const std::string& output, const std::vector<std::pair<std::string, std::string>>& of) {
        for (const auto& [what, path] : of) {
          if (!path.empty() && same_file(path, output)) return what;
        }
        return std::string();
      };
      if (!c.publish.jsonl_path.empty() && !results_path_is_timed(c.publish.jsonl_path)) {
        auto with_summary = inputs;
        with_summary.emplace_back("job.summary_path", c.job.summary_path);
        if (const std::string what = overwrites(c.publish.jsonl_path, with_summary); !what.empty()) {
          ctx.fail(r.child("jsonl_path"), "publish.jsonl_path",
                   c.publish.jsonl_path + " is " + what + "'s file too: the results would overwrite it; give another path");
        }
      }
      if (!c.job.summary_path.empty()) {
        if (const std::string what = overwrites(c.job.summary_path, inputs); !what.empty()) {
          ctx.fail(top.child("job")["summary_path"], "job.summary_path",
                   c.job.summary_path + " is " + what + "'s file too: the summary would overwrite it; give another path");
        }
      }
    }
    if (results_path_is_timed(c.publish.jsonl_path)) {
      // A file per day or hour (pipeline/results_path.h): a live job's; an archive job's --resume
      // reads its one file.
      if (Status st = check_timed_results_path(c.publish.jsonl_path); !st.ok()) {
        ctx.fail(r.child("jsonl_path"), "publish.jsonl_path", st.message());
      }
      if (c.job.mode == JobMode::kArchive) {
        ctx.fail(r.child("jsonl_path"), "publish.jsonl_path",
                 "a results file named by the time (" + c.publish.jsonl_path + ") is for live jobs: an archive job "
                 "ends, and its --resume reads one file; give a plain path");
      }
    }
    r.uint("wait_for_subscribers", &c.publish.wait_for_subscribers, 0, 1000);
    r.number("wait_timeout_s", &c.publish.wait_timeout_s, 0, 86400);
    r.str("curve_secret_key", &c.publish.curve_secret_key);
    r.str("curve_authorized_keys", &c.publish.curve_authorized_keys);
    c.publish.curve_secret_key = resolve_path(base_dir, c.publish.curve_secret_key);
    c.publish.curve_authorized_keys = resolve_path(base_dir, c.publish.curve_authorized_keys);
    if (!c.publish.curve_secret_key.empty()) {
      auto keys = read_curve_secret_key_file(c.publish.curve_secret_key);
      if (!keys.ok()) ctx.fail(r.child("curve_secret_key"), "publish.curve_secret_key", keys.status().message());
      c.publish.curve_keys = keys.value();
    }
    if (!c.publish.curve_authorized_keys.empty()) {
      if (c.publish.curve_secret_key.empty()) {
        ctx.fail(r.child("curve_authorized_keys"), "publish.curve_authorized_keys",
                 "needs publish.curve_secret_key (the bus's own key pair, from `vapipe keygen`)");
      }
      auto clients = read_curve_public_key_file(c.publish.curve_authorized_keys);
      if (!clients.ok()) {
        ctx.fail(r.child("curve_authorized_keys"), "publish.curve_authorized_keys", clients.status().message());
      }
      c.publish.curve_clients = clients.value();
    }
    c.publish.webhooks = parse_webhooks(ctx, r.child("webhooks"), base_dir, c);
    c.publish.mqtt = parse_mqtt(ctx, r.child("mqtt"), base_dir, c);
    c.publish.redis = parse_redis(ctx, r.child("redis"), base_dir, c);
    c.publish.kafka = parse_kafka(ctx, r.child("kafka"), base_dir, c);
    // A topic_prefix is taken as written (one may end mid-level, "cam-"), but "site-3/vapipe" glued to
    // its topics ("site-3/vapipesegments/gate") is almost always a '/' forgotten: said where the job starts.
    for (size_t i = 0; i < c.publish.mqtt.size(); ++i) {
      const std::string& prefix = c.publish.mqtt[i].topic_prefix;
      if (prefix.empty() || prefix.back() == '/') continue;
      c.notes.push_back("publish.mqtt[" + std::to_string(i) + "].topic_prefix: '" + prefix +
                        "' does not end in '/', so the topics are '" + prefix + "segments/<stream>', '" + prefix +
                        "job/summary', ... (end it in '/' for a topic level of its own)");
    }
    for (size_t i = 0; i < c.publish.kafka.size(); ++i) {
      const std::string& prefix = c.publish.kafka[i].topic_prefix;
      if (prefix.empty() || prefix.back() == '.' || prefix.back() == '_' || prefix.back() == '-') continue;
      c.notes.push_back("publish.kafka[" + std::to_string(i) + "].topic_prefix: '" + prefix +
                        "' does not end in '.', '_' or '-', so the topics are '" + prefix + "results', '" + prefix +
                        "segments', ... (end it in '.' to set the kind apart)");
    }
    // A sink's stream topic is taken whole: one that names no stream while some ids start with it (a
    // watched folder's files, cam1-0800; a live job's streams) took them before 2026-12-07 and now takes
    // none, which nothing said (an archive job's is an error, above).
    const auto note_partial_topics = [&](const std::string& key, const std::vector<std::string>& topics) {
      for (const std::string& t : topics) {
        const size_t slash = t.find('/');
        if (slash == std::string::npos || slash + 1 >= t.size() || t.back() == '*' || t.rfind("job/", 0) == 0) continue;
        const std::string named = t.substr(slash + 1);
        bool exact = false;
        std::string starting;
        for (const StreamConfig& st : c.streams) {
          exact = exact || st.id == named;
          if (st.id != named && st.id.rfind(named, 0) == 0 && starting.size() < 120) {
            starting += (starting.empty() ? "'" : ", '") + st.id + "'";
          }
        }
        if (!exact && (!starting.empty() || !c.watches.empty())) {
          c.notes.push_back(key + ".topics: '" + t + "' takes stream '" + named + "''s messages alone (a stream's topic "
                            "is taken whole)" + (starting.empty() ? std::string(", and a watched folder's files are "
                                                                                  "streams of their own, named by their files")
                                                                  : ", not those of " + starting) +
                            ": '" + t + "*' takes every stream whose id starts with '" + named + "'");
        }
      }
    };
    for (size_t i = 0; i < c.publish.webhooks.size(); ++i) {
      note_partial_topics("publish.webhooks[" + std::to_string(i) + "]", c.publish.webhooks[i].topics);
    }
    for (size_t i = 0; i < c.publish.mqtt.size(); ++i) note_partial_topics("publish.mqtt[" + std::to_string(i) + "]", c.publish.mqtt[i].topics);
    for (size_t i = 0; i < c.publish.redis.size(); ++i) {
      note_partial_topics("publish.redis[" + std::to_string(i) + "]", c.publish.redis[i].topics);
    }
    for (size_t i = 0; i < c.publish.kafka.size(); ++i) {
      note_partial_topics("publish.kafka[" + std::to_string(i) + "]", c.publish.kafka[i].topics);
    }
    // A sink's secret sent unencrypted beyond this host (a bearer token over http://, a password over
    // mqtt://, SASL PLAIN over kafka://) is read by anyone on the network between: said where the job
    // starts, as an open bus is (found 2026-12-07: nothing said it).
    const auto in_clear_to = [](const std::string& url, const std::string& tls_scheme) -> std::string {
      const size_t colon = url.find("://");
      if (colon == std::string::npos || url.compare(0, tls_scheme.size(), tls_scheme) == 0) return "";  // (rediss+sentinel)
      size_t start = colon + 3;
      const size_t end_of_authority = url.find_first_of("/?#", start);
      const size_t at = url.rfind('@', end_of_authority == std::string::npos ? url.size() : end_of_authority);
      if (at != std::string::npos && at >= start) start = at + 1;
      std::string host;
      if (start < url.size() && url[start] == '[') {
        host = url.substr(start + 1, url.find(']', start) - start - 1);
      } else {
        host = url.substr(start, url.find_first_of(":/,?#", start) - start);
      }
      const bool loopback = host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
      return loopback ? "" : url.substr(0, colon) + ":// to " + host;
    };
    const auto note_in_clear = [&](const std::string& key, const char* what, const std::string& to,
                                   const std::string& tls_scheme) {
      if (to.empty()) return;
      c.notes.push_back(key + ": its " + what + " goes unencrypted over " + to + ": anyone on the network between "
                        "may read it (" + tls_scheme + ":// keeps it private)");
    };
    for (size_t i = 0; i < c.publish.webhooks.size(); ++i) {
      const WebhookConfig& w = c.publish.webhooks[i];
      const std::string key = "publish.webhooks[" + std::to_string(i) + "]";
      const size_t authority = w.url.find("://") == std::string::npos ? 0 : w.url.find("://") + 3;
      const size_t at = w.url.find('@', authority), path = w.url.find_first_of("/?#", authority);
      const bool basic = at != std::string::npos && (path == std::string::npos || at < path);
      const bool header_secret = std::any_of(w.headers.begin(), w.headers.end(), [](const auto& h) {
        std::string name = h.first;
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return std::tolower(ch); });
        return name == "authorization" || name.find("key") != std::string::npos || name.find("token") != std::string::npos;
      });
      if (!w.token.empty() || basic || header_secret) {
        note_in_clear(key, !w.token.empty() ? "bearer token" : basic ? "user and password" : "secret header",
                      in_clear_to(w.url, "https"), "https");
      }
    }
    for (size_t i = 0; i < c.publish.mqtt.size(); ++i) {
      if (c.publish.mqtt[i].password.empty()) continue;
      note_in_clear("publish.mqtt[" + std::to_string(i) + "]", "password", in_clear_to(c.publish.mqtt[i].url, "mqtts"),
                    "mqtts");
    }
    for (size_t i = 0; i < c.publish.redis.size(); ++i) {
      if (c.publish.redis[i].password.empty()) continue;
      note_in_clear("publish.redis[" + std::to_string(i) + "]", "password", in_clear_to(c.publish.redis[i].url, "rediss"),
                    "rediss");
    }
    for (size_t i = 0; i < c.publish.kafka.size(); ++i) {
      const KafkaConfig& k = c.publish.kafka[i];
      if (k.password.empty() || k.sasl_mechanism.rfind("scram", 0) == 0) continue;  // (SCRAM sends no password)
      note_in_clear("publish.kafka[" + std::to_string(i) + "]", "SASL PLAIN password", in_clear_to(k.url, "kafkas"),
                    "kafkas");
    }
    r.finish();
    if (Status st = check_bind_endpoint(c.publish.endpoint); !st.ok()) {
      ctx.fail(top.child("publish")["endpoint"], "publish.endpoint", st.message());
    }
    if (!c.publish.metrics_address.empty() && same_tcp_port(c.publish.metrics_address, c.publish.endpoint, true)) {
      ctx.fail(top.child("publish")["metrics_address"], "publish.metrics_address",
               c.publish.metrics_address + " is the result bus's port too (publish.endpoint " + c.publish.endpoint +
                   "): give another port");
    }
  }
  {
    YAML::Node node = top.child("transport");
    MapReader r(ctx, node, "transport");
    std::string mode = c.transport.mode == TransportMode::kShm ? "shm" : "tcp";
    r.choice("mode", &mode, {"shm", "tcp"});
    c.transport.mode = mode == "shm" ? TransportMode::kShm : TransportMode::kTcp;
    r.uint("frame_slots", &c.transport.frame_slots, 0, 65536);
    if (c.transport.frame_slots == 1) {
      ctx.fail(node["frame_slots"], "transport.frame_slots", "must be 0 (2 per stream, at least 32) or at least 2");
    }
    // A decoded stream with members holds its frame while it waits for a slot for each member's copy:
    // with as many such streams as slots, each could hold one and wait for ever.
    std::set<std::string> sources_with_members;
    for (const StreamConfig& s : c.streams) {
      if (s.is_member()) sources_with_members.insert(s.source);
    }
    if (c.transport.frame_slots > 0 && c.transport.frame_slots <= sources_with_members.size()) {
      ctx.fail(node["frame_slots"], "transport.frame_slots",
               std::to_string(c.transport.frame_slots) + " slots are too few for " +
                   std::to_string(sources_with_members.size()) + " streams with members (streams[].source): each " +
                   "holds its decoded frame while it waits for a slot for a member's copy; give at least " +
                   std::to_string(sources_with_members.size() + 1) + " (or 0: 2 per stream, at least 32)");
    }
    r.uint("frame_slot_bytes", &c.transport.frame_slot_bytes, 0, 1ull << 32);
    if (c.transport.frame_slot_bytes > 0 && c.transport.frame_slot_bytes < 4096) {
      ctx.fail(node["frame_slot_bytes"], "transport.frame_slot_bytes",
               "must be 0 (1920x1080 RGB in host memory, 3840x2160 NV12 in GPU memory) or at least 4096");
    }
    r.uint("tensor_slots", &c.transport.tensor_slots, 0, 65536);
    r.boolean("device_pools", &c.transport.device_pools);
    YAML::Node eps = r.child("endpoints");
    c.transport.endpoints_line = line_of(eps);
    MapReader er(ctx, eps, "transport.endpoints");
    for (StageKind k : {StageKind::kPreprocess, StageKind::kBatch, StageKind::kInfer, StageKind::kPublish}) {
      std::string ep;
      er.str(stage_kind_name(k), &ep);
      if (!ep.empty()) {
        const std::string key = std::string("transport.endpoints.") + stage_kind_name(k);
        if (Status st = check_bind_endpoint(ep); !st.ok()) ctx.fail(eps[stage_kind_name(k)], key, st.message());
        // Two stages binding one address: the second failed to start (exit 2, "Address already in use").
        // (In tcp mode a stage may run on another host: only this host's own ports clash there.)
        const bool one_host = c.transport.mode == TransportMode::kShm;
        for (const auto& [other, other_ep] : c.transport.endpoints) {
          if (other_ep == ep || same_tcp_port(other_ep, ep, one_host)) {
            ctx.fail(eps[stage_kind_name(k)], key, ep + " is transport.endpoints." + stage_kind_name(other) +
                                                       " too: each stage's input needs its own");
          }
        }
        // (publish's own input binds beside the bus, on publish's host: every interface's takes it.)
        if (ep == c.publish.endpoint || same_tcp_port(ep, c.publish.endpoint, one_host || k == StageKind::kPublish)) {
          ctx.fail(eps[stage_kind_name(k)], key, ep + " is the result bus's (publish.endpoint) too: give another");
        }
        if (!c.publish.metrics_address.empty() &&
            same_tcp_port(c.publish.metrics_address, ep, one_host || k == StageKind::kPublish)) {
          ctx.fail(eps[stage_kind_name(k)], key, ep + " is publish.metrics_address's port too: give another");
        }
        c.transport.endpoints[k] = ep;
      }
    }
    er.finish();
    // The pools' settings with no pools to set (tcp carries each payload in its message): a config
    // moved to several hosts that still sizes them would be read as if it did something.
    if (c.transport.mode == TransportMode::kTcp) {
      for (const char* key : {"frame_slots", "frame_slot_bytes", "tensor_slots", "device_pools"}) {
        if (node[key].IsDefined()) {
          ctx.fail(node[key], std::string("transport.") + key,
                   "only with transport.mode: shm (tcp carries each frame and tensor in its message: no pools)");
        }
      }
    }
    r.uint("io_threads", &c.transport.io_threads, 0, 64);
    r.str("curve_secret_key", &c.transport.curve_secret_key);
    c.transport.curve_secret_key = resolve_path(base_dir, c.transport.curve_secret_key);
    if (!c.transport.curve_secret_key.empty()) {
      if (c.transport.mode != TransportMode::kTcp) {
        ctx.fail(r.child("curve_secret_key"), "transport.curve_secret_key",
                 "only with transport.mode: tcp (edges within one host stay on this host)");
      }
      auto keys = read_curve_secret_key_file(c.transport.curve_secret_key);
      if (!keys.ok()) ctx.fail(r.child("curve_secret_key"), "transport.curve_secret_key", keys.status().message());
      c.transport.curve_keys = keys.value();
    }
    r.finish();
    if (c.transport.tensor_slots != 0 && c.transport.tensor_slots < c.batch.max_batch_size) {
      ctx.fail(node["tensor_slots"], "transport.tensor_slots",
               "must be at least batch.max_batch_size (" + std::to_string(c.batch.max_batch_size) +
                   "), or 0 for 4 x max_batch_size");
    }
  }
  {
    YAML::Node node = top.value("gpus");
    if (node.IsDefined()) {
      c.gpus.line = node.Mark().line + 1;
      const std::string expected = "expected all, none or a list of GPU indices such as [0, 1]";
      if (node.IsScalar()) {
        if (node.Scalar() == "all") {
          c.gpus.kind = GpuSelection::Kind::kAll;
        } else if (node.Scalar() == "none") {
          c.gpus.kind = GpuSelection::Kind::kNone;
        } else {
          ctx.fail(node, "gpus", expected + ", got " + scalar_text(node));
        }
      } else if (node.IsSequence() && node.size() > 0) {
        c.gpus.kind = GpuSelection::Kind::kList;
        std::set<int> seen;
        for (size_t i = 0; i < node.size(); ++i) {
          uint64_t given = 0;
          const int index = decimal_uint(node[i], &given) && given <= 1023 ? static_cast<int>(given) : -1;
          if (index < 0) {
            ctx.fail(node[i], "gpus[" + std::to_string(i) + "]", "expected a GPU index (0, 1, ...), got " +
                                                                   scalar_text(node[i]));
          }
          if (!seen.insert(index).second) {
            ctx.fail(node[i], "gpus[" + std::to_string(i) + "]", "GPU " + std::to_string(index) + " is listed twice");
          }
          c.gpus.list.push_back(index);
        }
      } else {
        ctx.fail(node, "gpus", expected + ", got " + scalar_text(node));
      }
    }
  }
  top.uint("lanes_per_device", &c.lanes_per_device, 1, 64);
  {
    MapReader r(ctx, top.child("log"), "log");
    r.choice("level", &c.log.level, {"trace", "debug", "info", "warn", "error", "off"});
    r.finish();
  }
  top.finish();
  return c;
}

// The line (from 1) where a second YAML document's content starts: after a document marker ("---" or
// "..." at the start of a line, which ends any scalar) that follows content, some content that is not
// a comment. 0: none. A "---" before any content opens the first document.
int second_document_line(const std::string& yaml) {
  bool content = false, after_marker = false;
  int line_number = 0;
  for (size_t start = 0; start < yaml.size();) {
    const size_t end = std::min(yaml.find('\n', start), yaml.size());
    std::string line = yaml.substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const bool marker = (line.rfind("---", 0) == 0 || line.rfind("...", 0) == 0) &&
                        (line.size() == 3 || line[3] == ' ' || line[3] == '\t');
    std::string rest = marker ? line.substr(3) : line;
    const size_t first = rest.find_first_not_of(" \t");
    const bool has_content = first != std::string::npos && rest[first] != '#' && !(line_number == 1 && rest[0] == '%');
    if (marker) {
      if (content) after_marker = true;
      if (!has_content) continue;
    }
    if (has_content) {
      if (after_marker) return line_number;
      content = true;
    }
  }
  return 0;
}

// A line without its quoted parts ('...' and "..."): what YAML reads as plain scalars and punctuation.
// (A comma separates a flow mapping's entries: alone it is no sign of an unquoted URI.)
// (A quote opens a quoted scalar only where a scalar starts: o'neil in a plain one is a letter.)
std::string unquoted(const std::string& line) {
  std::string out;
  char quote = 0;
  char before = 0;  // the last character outside quotes that is not a space
  for (const char ch : line) {
    if (quote) {
      if (ch == quote) quote = 0;
    } else if ((ch == '"' || ch == '\'') && (before == 0 || std::strchr(":{[,-?", before) != nullptr)) {
      quote = ch;
    } else {
      out += ch;
      if (ch != ' ') before = ch;
    }
  }
  return out;
}

Result<Config> parse_text(const std::string& yaml, const std::string& source, const std::string& base_dir,
                          const ConfigLoadOptions& options) {
  // YAML is UTF-8 (or UTF-16/32, which no editor writes unasked); yaml-cpp takes other bytes as they
  // are, and a Latin-1 model name or path would then fail every result's JSON.
  if (const size_t bad = first_invalid_utf8(yaml); bad != std::string::npos) {
    const size_t line_start = yaml.rfind('\n', bad == 0 ? 0 : bad - 1);
    const size_t column = line_start == std::string::npos || bad == 0 ? bad + 1 : bad - line_start;
    return InvalidArgument(source + ":" + std::to_string(std::count(yaml.begin(), yaml.begin() + bad, '\n') + 1) +
                           ": " + not_utf8_text(static_cast<unsigned char>(yaml[bad]), column));
  }
  try {
    // A config is one document: a second one after `---` (two configs pasted into one file) would be
    // left unread, its streams not run, were it not said. (Found in the text: yaml-cpp 0.7's LoadAll
    // loops for ever on some malformed input, which libFuzzer found at once.)
    if (const int second = second_document_line(yaml); second > 0) {
      return InvalidArgument(source + ":" + std::to_string(second) +
                             ": a second YAML document (after '---'): a config is one document; put what it holds in "
                             "the first, or in a config of its own");
    }
    YAML::Node root = YAML::Load(yaml);
    return parse(root, source, base_dir, options);
  } catch (const ConfigError& e) {
    return InvalidArgument(e.message);
  } catch (const YAML::Exception& e) {
    std::ostringstream os;
    os << source;
    if (e.mark.line >= 0) os << ":" << e.mark.line + 1;
    // (yaml-cpp puts the byte it stopped at in its message: a NUL or another control byte is shown
    // escaped, not written to the terminal.)
    os << ": YAML syntax error: ";
    for (const char ch : e.msg) {
      const auto byte = static_cast<unsigned char>(ch);
      if (byte < 0x20 || byte == 0x7f) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "\\x%02X", byte);
        os << hex;
      } else {
        os << ch;
      }
    }
    if (e.mark.column >= 0) {
      // yaml-cpp counts bytes; an editor counts characters (a name with an é before the error was off by one).
      int column = e.mark.column;
      const size_t bom = yaml.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0;  // not counted in mark.pos
      const size_t at = static_cast<size_t>(e.mark.pos) + bom;
      if (e.mark.pos >= e.mark.column && at <= yaml.size()) {
        for (size_t i = at - static_cast<size_t>(e.mark.column); i < at; ++i) {
          if ((static_cast<unsigned char>(yaml[i]) & 0xC0) == 0x80) --column;  // a UTF-8 continuation byte
        }
      }
      os << " at column " << column + 1;
    }
    // yaml-cpp does not say why a tab breaks a line ("illegal block entry"): YAML indents with spaces
    // only, and an editor's tab key puts tabs in. Nor why a value in a `{ ... }` mapping breaks it: an
    // unquoted uri's ? & # or , (the README writes URIs in block style, the docs' streams are in flow
    // style: the two put together gave "unknown token" alone).
    if (e.mark.line >= 0) {
      size_t start = 0;
      for (int line = 0; line < e.mark.line && start != std::string::npos; ++line) {
        start = yaml.find('\n', start);
        if (start != std::string::npos) ++start;
      }
      if (start != std::string::npos) {
        const size_t indent_end = yaml.find_first_not_of(" \t", start);
        const std::string indent = yaml.substr(start, indent_end == std::string::npos ? std::string::npos : indent_end - start);
        const size_t end = yaml.find('\n', start);
        const std::string line = yaml.substr(start, end == std::string::npos ? std::string::npos : end - start);
        if (indent.find('\t') != std::string::npos) {
          os << " (the line is indented with a tab: YAML indents with spaces only)";
        } else if (line.find('{') != std::string::npos && unquoted(line).find_first_of("?&#*!|>%@`") != std::string::npos) {
          os << " (in a { ... } mapping, quote a value that holds ? & # , * or :, as a uri's query does: "
                "uri: \"test://ball?frames=300&motion=wavy\")";
        }
      }
    }
    return InvalidArgument(os.str());
  }
}

}  // namespace

Result<std::string> read_metrics_token_file(const std::string& path) {
  return read_token_line(path, [](size_t size) {
    return size < 16 || size > 4096 ? "expected a token of 16 to 4096 characters on the first line (e.g. from `head -c "
                                      "32 /dev/urandom | base64`), got " + std::to_string(size)
                                    : std::string();
  });
}

Status split_host_port(const std::string& address, std::string* host, int* port) {
  const auto colon = address.rfind(':');
  const std::string expected = "expected HOST:PORT such as 127.0.0.1:9560 or 0.0.0.0:9560, got '" + address + "'";
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) return InvalidArgument(expected);
  std::string h = address.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  const std::string p = address.substr(colon + 1);
  if (h.empty() || p.find_first_not_of("0123456789") != std::string::npos || p.size() > 5) return InvalidArgument(expected);
  const int value = std::atoi(p.c_str());
  if (value > 65535) return InvalidArgument(expected);
  *host = h;
  *port = value;
  return Status::Ok();
}

Result<Config> load_config_string(const std::string& yaml, const std::string& source_name,
                                  const std::string& base_dir, const ConfigLoadOptions& options) {
  return parse_text(yaml, source_name, base_dir, options);
}

Result<Config> load_config_file(const std::string& path, std::string* text, const ConfigLoadOptions& options) {
  std::string read;
  if (!options.file_text) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      return InvalidArgument("config file " + path + ": is a folder, not a config file (a job's config is a YAML file)");
    }
    std::ifstream in(path);
    if (!in) {
      const int why = errno;
      return NotFound("config file " + path + ": cannot be opened" + (why ? std::string(" (") + std::strerror(why) + ")" : ""));
    }
    std::stringstream ss;
    ss << in.rdbuf();
    read = ss.str();
  }
  const std::string& yaml = options.file_text ? *options.file_text : read;
  if (text) *text = yaml;
  std::string base = std::filesystem::absolute(std::filesystem::path(path)).parent_path().string();
  return parse_text(yaml, path, base, options);
}

std::string demo_config_text() { return kDemoConfigYaml; }

Result<Config> load_demo_config(const ConfigLoadOptions& options) {
  // The demo's paths are relative to configs/: prefer the source tree the binary was built from,
  // then the install prefix.
  for (const char* root : {kSourceDir, kInstallDataDir}) {
    std::filesystem::path configs = std::filesystem::path(root) / "configs";
    if (std::filesystem::exists(configs / "demo.yaml")) {
      return parse_text(kDemoConfigYaml, "<embedded demo config>", configs.string(), options);
    }
  }
  return NotFound(std::string("the demo's models and media were found neither in ") + kSourceDir +
                  " nor in " + kInstallDataDir);
}

}  // namespace vapipe
