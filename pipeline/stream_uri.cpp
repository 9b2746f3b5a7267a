#include "pipeline/stream_uri.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <filesystem>

namespace vapipe {

const std::vector<std::string>& test_patterns() {
  static const std::vector<std::string> kPatterns = {
      "smpte", "snow", "black", "white", "red", "green", "blue", "checkers-1", "checkers-2",
      "checkers-4", "checkers-8", "circular", "blink", "smpte75", "zone-plate", "gamut",
      "chroma-zone-plate", "solid-color", "ball", "smpte100", "bar", "pinwheel", "spokes",
      "gradient", "colors", "smpte-rp-219"};
  return kPatterns;
}

namespace {

template <typename T>
bool parse_number(std::string_view s, T* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

std::string percent_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// A local path as a file:// URI's path: what a URI reserves (a space, '#', '%', '?', bytes past ASCII
// such as an 'é') percent-escaped, as GLib's g_filename_to_uri does; uridecodebin opens nothing else.
// `text` with each byte for which `escape` says so written as %XX.
template <typename Escape>
std::string percent_encode(std::string_view text, Escape escape) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (escape(byte)) {
      out += {'%', kHex[byte >> 4], kHex[byte & 0xF]};
    } else {
      out.push_back(c);
    }
  }
  return out;
}


// A network URI with the bytes no URI may hold as they are (spaces, control characters, anything not
// ASCII, and "<>\\^`{|}) percent-escaped, the rest as written (reserved characters and existing
// escapes keep their meaning). An NVR's "rtsp://nvr/Camera 1" otherwise broke RTSP's request line (a
// space separates its fields: "Could not read from resource"), and "caméra" went out as raw UTF-8.
std::string escape_unsafe_uri_bytes(std::string_view uri) {
  static constexpr std::string_view kUnsafe = "\"<>\\^`{|}";
  return percent_encode(uri, [](unsigned char byte) {
    return byte <= 0x20 || byte >= 0x7F || kUnsafe.find(static_cast<char>(byte)) != std::string_view::npos;
  });
}

// A user name or password holding a character URIs reserve ('@', '#', '/', '?': camera passwords often
// do, and ${CAMERA_PASSWORD} puts them in as they are) breaks the URI where it stands: the host is read
// from inside the password, or the authority is cut short, and rtspsrc says only that no server
// answered (and the log's redaction, which looks for the authority's '@', misses the password). Such a
// URI is refused, saying which character to escape; the message never holds the URI.
Status check_authority(std::string_view uri, size_t authority_start) {
  size_t authority_end = uri.find_first_of("/?#", authority_start);
  if (authority_end == std::string_view::npos) authority_end = uri.size();
  const std::string_view authority = uri.substr(authority_start, authority_end - authority_start);
  const size_t at = authority.rfind('@');
  const std::string_view userinfo = at == std::string_view::npos ? std::string_view() : authority.substr(0, at);
  const std::string_view host_port = at == std::string_view::npos ? authority : authority.substr(at + 1);
  if (userinfo.find('@') != std::string_view::npos) {
    return InvalidArgument("the user name or password in the uri holds an '@': write it as %40 (percent-escaped)");
  }
  // A '%' that starts no escape ("50%off"): the user name or password cannot be decoded, so the camera
  // gets none, or another one.
  for (size_t i = userinfo.find('%'); i != std::string_view::npos; i = userinfo.find('%', i + 1)) {
    if (i + 2 >= userinfo.size() || !std::isxdigit(static_cast<unsigned char>(userinfo[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(userinfo[i + 2]))) {
      return InvalidArgument("the user name or password in the uri holds a '%' that starts no escape: write it as "
                             "%25 (percent-escaped)");
    }
  }
  // A '#' (a fragment, which no camera or server is sent) followed by "...@host": a password with a '#'.
  if (authority_end < uri.size() && uri[authority_end] == '#' &&
      uri.find('@', authority_end) < uri.find('/', authority_end)) {
    return InvalidArgument("the uri's user name or password holds a '#' (its authority ends there): write it as %23 "
                           "(percent-escaped)" + std::string(at != std::string_view::npos ? ", and an '@' as %40" : ""));
  }
  // "user:pa/ss@host:554/path": cut at the '/', the host is read from the password (the log's redaction
  // then showed the rest of it), and the path's first part ends in "@host[:port]". Said as for '#'.
  // (Only "@host:port" or "@1.2.3.4" there: "rtsp://cam/live@main" and ".../a@b.mp4" are paths.) The
  // authority may hold no '@' then: "admin:2024/07@cam:554" reads as host admin, port 2024.
  if (authority_end < uri.size() && uri[authority_end] == '/') {
    const size_t segment_end = std::min(uri.find_first_of("/?#", authority_end + 1), uri.size());
    const size_t path_at = uri.find('@', authority_end + 1);
    const std::string_view after = path_at < segment_end ? uri.substr(path_at + 1, segment_end - path_at - 1) : "";
    const size_t port_colon = after.rfind(':');
    const bool has_port = port_colon != std::string_view::npos && port_colon + 1 < after.size() &&
                          std::all_of(after.begin() + static_cast<std::ptrdiff_t>(port_colon + 1), after.end(),
                                      [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    const bool ipv4 = !after.empty() && std::count(after.begin(), after.end(), '.') == 3 &&
                      std::all_of(after.begin(), after.end(),
                                  [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '.'; });
    const bool host_like = !after.empty() && std::all_of(after.begin(), after.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' || c == '[' || c == ']';
    });
    if (host_like && (has_port || ipv4)) {
      return InvalidArgument("the uri's user name or password holds a '/' (its authority ends there, and the host "
                             "is read from inside it): write it as %2F (percent-escaped)" +
                             std::string(at != std::string_view::npos ? ", and an '@' as %40" : ""));
    }
  }
  // The port is what follows the host's last ':' ("[v6::addr]:554" keeps the brackets' colons).
  const size_t bracket = host_port.rfind(']');
  const size_t colon = host_port.rfind(':');
  if (colon == std::string_view::npos || (bracket != std::string_view::npos && colon < bracket)) return Status::Ok();
  const std::string_view port = host_port.substr(colon + 1);
  if (std::all_of(port.begin(), port.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    return Status::Ok();
  }
  if (at == std::string_view::npos && uri.find('@', authority_end) != std::string_view::npos) {
    // "user:pa#ss@host": cut at the '#', the password reads as a port.
    return InvalidArgument("the uri's user name or password holds a '#', '/' or '?' (its authority ends there, and "
                           "what follows ':' is not a port): write them as %23, %2F and %3F (percent-escaped)");
  }
  return InvalidArgument("the uri's port is not a number");
}

Result<TestSourceSpec> parse_test_uri(std::string_view rest) {
  TestSourceSpec spec;
  std::string_view pattern = rest, query;
  if (auto q = rest.find('?'); q != std::string_view::npos) {
    pattern = rest.substr(0, q);
    query = rest.substr(q + 1);
  }
  spec.pattern = std::string(pattern);
  bool known = false;
  for (const auto& p : test_patterns()) known = known || p == spec.pattern;
  if (!known) {
    std::string list;
    for (const auto& p : test_patterns()) list += (list.empty() ? "" : ", ") + p;
    return InvalidArgument("unknown test pattern '" + spec.pattern + "' (known: " + list + ")");
  }
  std::vector<std::string_view> given;  // a parameter twice: which one counts is a guess (the last did)
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (item.empty()) continue;
    auto eq = item.find('=');
    if (eq == std::string_view::npos) return InvalidArgument("test URI parameter '" + std::string(item) + "' needs a value");
    std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
    if (std::find(given.begin(), given.end(), key) != given.end()) {
      return InvalidArgument("test URI parameter '" + std::string(key) + "' given twice: give it once");
    }
    given.push_back(key);
    bool ok = true;
    // (GStreamer's num-buffers is a 32-bit int: more frames were cut to their low 32 bits.)
    if (key == "frames") ok = parse_number(value, &spec.frames) && spec.frames <= kMaxTestFrames;
    else if (key == "width") ok = parse_number(value, &spec.width) && spec.width >= 16 && spec.width <= 8192;
    else if (key == "height") ok = parse_number(value, &spec.height) && spec.height >= 16 && spec.height <= 8192;
    else if (key == "fps") ok = parse_number(value, &spec.fps) && spec.fps >= 1 && spec.fps <= 1000;
    else if (key == "speed") ok = parse_number(value, &spec.speed);
    else if (key == "format") {
      spec.format = std::string(value);
      ok = value == "I420" || value == "NV12" || value == "RGB";
    } else if (key == "motion") {
      spec.motion = std::string(value);
      ok = value == "wavy" || value == "sweep" || value == "hsweep";
    } else if (key == "live") {
      ok = value == "true" || value == "false";
      spec.live = value == "true";
    } else {
      return InvalidArgument("unknown test URI parameter '" + std::string(key) +
                             "' (known: frames, width, height, fps, format, motion, speed, live)");
    }
    if (!ok) return InvalidArgument("bad value '" + std::string(value) + "' for test URI parameter '" + std::string(key) + "'");
  }
  return spec;
}

}  // namespace

std::string percent_encode_path(const std::string& path) {
  static constexpr std::string_view kKept = "-._~!$&'()*+,;=:@/";
  return percent_encode(path, [](unsigned char byte) {
    return !(byte < 0x80 && std::isalnum(byte)) && kKept.find(static_cast<char>(byte)) == std::string_view::npos;
  });
}

std::string file_uri_path(std::string_view uri) {
  constexpr std::string_view kPrefix = "file://";
  if (uri.substr(0, kPrefix.size()) != kPrefix) return "";
  return percent_decode(uri.substr(kPrefix.size()));
}

std::string expand_home(const std::string& path) {
  if (path.empty() || path[0] != '~') return path;
  const size_t slash = path.find('/');
  const std::string user = path.substr(1, slash == std::string::npos ? std::string::npos : slash - 1);
  std::string home;
  if (user.empty()) {
    const char* env = std::getenv("HOME");
    if (env && *env) {
      home = env;
    } else if (const passwd* pw = getpwuid(getuid())) {
      home = pw->pw_dir;
    }
  } else if (const passwd* pw = getpwnam(user.c_str())) {
    home = pw->pw_dir;
  }
  if (home.empty()) return path;
  return slash == std::string::npos ? home : home + path.substr(slash);
}

Result<ParsedUri> parse_stream_uri(std::string_view uri, const std::string& base_dir) {
  ParsedUri out;
  if (uri.empty()) return InvalidArgument("empty stream URI");
  auto scheme_end = uri.find("://");
  if (scheme_end == std::string_view::npos) {
    // A plain path: resolve against the config's directory.
    std::filesystem::path p{expand_home(std::string(uri))};
    if (p.is_relative() && !base_dir.empty()) p = std::filesystem::path(base_dir) / p;
    out.kind = UriKind::kFile;
    out.uri = "file://" + percent_encode_path(p.lexically_normal().string());
    return out;
  }
  std::string scheme(uri.substr(0, scheme_end));
  for (char c : scheme) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.') {
      return InvalidArgument("bad URI scheme '" + scheme + "'");
    }
  }
  if (scheme == "test") {
    VAPIPE_ASSIGN_OR_RETURN(out.test, parse_test_uri(uri.substr(scheme_end + 3)));
    out.kind = UriKind::kTest;
    out.uri = std::string(uri);
    return out;
  }
  if (scheme == "file") {
    std::string path = file_uri_path(uri);
    if (path.empty() || path[0] != '/') {
      return InvalidArgument("file URI '" + std::string(uri) + "' must hold an absolute path (file:///abs/path); use a plain path for a relative one");
    }
    out.kind = UriKind::kFile;
    out.uri = std::string(uri);
    return out;
  }
  VAPIPE_RETURN_IF_ERROR(check_authority(uri, scheme_end + 3));
  out.kind = UriKind::kNetwork;
  out.uri = escape_unsafe_uri_bytes(uri);
  return out;
}

namespace {

// A query parameter that carries a secret: a camera's password (Foscam's and Dahua's CGI `pwd=`), a
// signed URL's token or signature (a CDN's HLS, S3's X-Amz-*), an API key.
bool secret_query_key(std::string key) {
  std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return std::tolower(c); });
  static const char* const kSecrets[] = {"password", "passwd", "pwd",      "pass",       "pw",        "token",
                                         "auth",     "key",    "apikey",   "api_key",    "secret",    "signature",
                                         "sig",      "sign",   "credential", "session", "sessionid", "access_token",
                                         "x-amz-signature", "x-amz-credential", "x-amz-security-token", "jwt",
                                         "hdnts",    "hdnea",  "policy",   "key-pair-id"};
  for (const char* secret : kSecrets) {
    if (key == secret) return true;
  }
  // (auth_token, client_secret, x-goog-signature, ...)
  for (const char* part : {"token", "secret", "password", "signature", "credential"}) {
    if (key.find(part) != std::string::npos) return true;
  }
  return false;
}

// The query's secret values as "***" (their keys kept: what the URL asks is still told).
std::string redact_query(std::string_view query) {
  std::string out;
  size_t start = 0;
  while (start <= query.size()) {
    size_t end = query.find('&', start);
    if (end == std::string_view::npos) end = query.size();
    const std::string_view pair = query.substr(start, end - start);
    const size_t eq = pair.find('=');
    if (!out.empty() || start > 0) out += '&';
    if (eq != std::string_view::npos && eq + 1 < pair.size() && secret_query_key(std::string(pair.substr(0, eq)))) {
      out += std::string(pair.substr(0, eq + 1)) + "***";
    } else {
      out += std::string(pair);
    }
    start = end + 1;
  }
  return out;
}

}  // namespace

std::string redact_uri(std::string_view uri) {
  auto scheme_end = uri.find("://");
  if (scheme_end == std::string_view::npos) return std::string(uri);
  size_t authority_start = scheme_end + 3;
  size_t authority_end = uri.find_first_of("/?#", authority_start);
  if (authority_end == std::string_view::npos) authority_end = uri.size();
  auto at = uri.rfind('@', authority_end);
  std::string redacted = at == std::string_view::npos || at < authority_start
                             ? std::string(uri)
                             : std::string(uri.substr(0, authority_start)) + "***@" + std::string(uri.substr(at + 1));
  // Secrets in the query too (not a test:// or a file's path: their query is the source's settings).
  if (uri.rfind("test://", 0) == 0 || uri.rfind("file://", 0) == 0) return redacted;
  const size_t question = redacted.find('?');
  if (question == std::string::npos) return redacted;
  const size_t hash = redacted.find('#', question);
  const std::string tail = hash == std::string::npos ? "" : redacted.substr(hash);
  return redacted.substr(0, question + 1) +
         redact_query(std::string_view(redacted).substr(question + 1, hash == std::string::npos ? std::string::npos
                                                                                                 : hash - question - 1)) +
         tail;
}

std::vector<SharedSource> shared_network_sources(const std::vector<std::pair<std::string, std::string>>& streams) {
  std::vector<SharedSource> sources;
  for (const auto& [id, uri] : streams) {
    if (uri.rfind("file://", 0) == 0 || uri.rfind("test://", 0) == 0 || uri.find("://") == std::string::npos) continue;
    std::string source = redact_uri(uri);  // without its credentials
    if (const size_t at = source.find("://***@"); at != std::string::npos) source.erase(at + 3, 4);
    auto it = std::find_if(sources.begin(), sources.end(), [&](const SharedSource& s) { return s.uri == source; });
    if (it == sources.end()) {
      sources.push_back(SharedSource{source, {id}});
    } else {
      it->stream_ids.push_back(id);
    }
  }
  sources.erase(std::remove_if(sources.begin(), sources.end(), [](const SharedSource& s) { return s.stream_ids.size() < 2; }),
                sources.end());
  return sources;
}

std::string describe(const SharedSource& shared) {
  std::string ids;
  for (size_t i = 0; i < shared.stream_ids.size(); ++i) {
    ids += (i == 0 ? "'" : i + 1 == shared.stream_ids.size() ? " and '" : ", '") + shared.stream_ids[i] + "'";
  }
  return "streams " + ids + " read the same source " + shared.uri + ": each opens its own connection to it and " +
         "decodes it again (a camera may refuse connections beyond its few; the stream is then reconnected with the "
         "camera's error); to decode it once, give the others `source: " + shared.stream_ids.front() +
         "` instead of its uri";
}

std::string uri_scheme(std::string_view uri) {
  const size_t colon = uri.find("://");
  if (colon == std::string_view::npos) return "";
  std::string scheme(uri.substr(0, colon));
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return scheme;
}

bool names_a_video_file_over_http(std::string_view uri) {
  const std::string scheme = uri_scheme(uri);
  if (scheme != "http" && scheme != "https") return false;
  std::string_view path = uri.substr(scheme.size() + 3);
  path = path.substr(0, path.find('#'));
  if (const size_t question = path.find('?'); question != std::string_view::npos) {
    // A query is a camera server's (go2rtc's stream.mp4?src=cam1), unless it signs the URL: an object
    // store's presigned link to a recording (S3's X-Amz-Signature, Google's X-Goog-Signature, Azure's
    // SAS sig, CloudFront's Signature) is a file's.
    std::string query(path.substr(question + 1));
    for (char& c : query) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    bool signed_url = false;
    for (size_t start = 0; start <= query.size() && !signed_url;) {
      size_t end = query.find('&', start);
      if (end == std::string::npos) end = query.size();
      const std::string key = query.substr(start, std::min(query.find('=', start), end) - start);
      signed_url = key == "x-amz-signature" || key == "x-goog-signature" || key == "signature" || key == "sig";
      start = end + 1;
    }
    if (!signed_url) return false;
    path = path.substr(0, question);
  }
  const size_t slash = path.find('/');
  if (slash == std::string_view::npos) return false;  // no path
  path = path.substr(slash);
  const size_t dot = path.rfind('.');
  if (dot == std::string_view::npos || path.find('/', dot) != std::string_view::npos) return false;
  std::string extension(path.substr(dot + 1));
  for (char& c : extension) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // (not .flv: HTTP-FLV is how SRS and nginx serve live cameras)
  for (const char* video : {"mp4", "m4v", "mov", "mkv", "webm", "avi", "mpg", "mpeg", "3gp", "wmv", "mxf"}) {
    if (extension == video) return true;
  }
  return false;
}

bool uri_uses_tls(std::string_view uri) {
  const std::string scheme = uri_scheme(uri);
  return scheme == "https" || scheme.rfind("rtsps", 0) == 0;
}

}  // namespace vapipe
