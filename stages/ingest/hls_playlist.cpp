#include "stages/ingest/hls_playlist.h"

#include <gst/app/gstappsink.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "stages/ingest/gst_object_ptr.h"

namespace vapipe {
namespace {

std::string_view trimmed(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
  while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
  return line;
}

template <typename F>
void for_each_line(std::string_view text, F&& f) {
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    if (!f(trimmed(text.substr(start, end - start)))) return;
    start = end + 1;
  }
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

}  // namespace

bool hls_is_master_playlist(std::string_view text) {
  bool master = false;
  for_each_line(text, [&](std::string_view line) {
    master = starts_with(line, "#EXT-X-STREAM-INF");
    return !master;
  });
  return master;
}

std::vector<std::string> hls_variant_uris(std::string_view text, const std::string& base_uri) {
  std::vector<std::string> uris;
  bool next_is_variant = false;
  for_each_line(text, [&](std::string_view line) {
    if (starts_with(line, "#EXT-X-STREAM-INF")) {
      next_is_variant = true;
    } else if (next_is_variant && !line.empty() && line.front() != '#') {
      next_is_variant = false;
      const std::string relative(line);
      gchar* resolved = g_uri_resolve_relative(base_uri.c_str(), relative.c_str(), G_URI_FLAGS_NONE, nullptr);
      uris.push_back(resolved ? resolved : relative);
      g_free(resolved);
    }
    return true;
  });
  return uris;
}

bool hls_playlist_ended(std::string_view text) {
  bool ended = false;
  for_each_line(text, [&](std::string_view line) {
    ended = line == "#EXT-X-ENDLIST";
    return !ended;
  });
  return ended;
}

bool hls_playlist_is_recording(std::string_view state) {
  size_t playlists = 0, recordings = 0;
  for_each_line(state, [&](std::string_view line) {
    if (line == "#EXTM3U") ++playlists;
    if (line == "#EXT-X-PLAYLIST-TYPE:VOD") ++recordings;
    return true;
  });
  return playlists > 0 && recordings == playlists;
}

bool dash_manifest_is_static(std::string_view mpd) {
  const size_t open = mpd.find("<MPD");
  if (open == std::string_view::npos) return false;
  const size_t close = mpd.find('>', open);
  const std::string_view tag = mpd.substr(open, close == std::string_view::npos ? std::string_view::npos : close - open);
  // type="dynamic" (or 'dynamic'): live; "static", or no type (the schema's default): a presentation
  // whose segments are all there.
  for (size_t at = tag.find("type"); at != std::string_view::npos; at = tag.find("type", at + 4)) {
    const bool attribute = at > 0 && (tag[at - 1] == ' ' || tag[at - 1] == '\t' || tag[at - 1] == '\n' || tag[at - 1] == '\r');
    if (!attribute) continue;  // mimeType=, profileType=, ...
    size_t v = at + 4;
    while (v < tag.size() && (tag[v] == ' ' || tag[v] == '=')) ++v;
    if (v >= tag.size() || (tag[v] != '"' && tag[v] != '\'')) continue;
    return tag.substr(v + 1, 7) != "dynamic";
  }
  return true;
}

Result<std::string> fetch_http_body(const std::string& uri, const HttpSourceSetup& setup,
                                    std::chrono::milliseconds timeout, size_t max_bytes) {
  GstElementPtr pipeline(gst_pipeline_new(nullptr));
  GstElement* source = gst_element_factory_make("souphttpsrc", nullptr);
  GstElement* sink = gst_element_factory_make("appsink", nullptr);
  if (!pipeline || !source || !sink) {
    if (source) gst_object_unref(source);
    if (sink) gst_object_unref(sink);
    return Unavailable("cannot make souphttpsrc and appsink (GStreamer's soup plugin is missing?)");
  }
  gst_bin_add_many(GST_BIN(pipeline.get()), source, sink, nullptr);
  if (!gst_element_link(source, sink)) return Unavailable("cannot link souphttpsrc to appsink");
  const auto seconds = static_cast<guint>(std::max<int64_t>(1, (timeout.count() + 999) / 1000));
  g_object_set(source, "location", uri.c_str(), "timeout", seconds, "retries", 0, "is-live", FALSE, nullptr);
  if (setup) setup(source);
  g_object_set(sink, "sync", FALSE, "emit-signals", FALSE, nullptr);
  GstBusPtr bus(gst_element_get_bus(pipeline.get()));
  // Stopped on every way out: a fetch cut short leaves no streaming thread behind.
  struct Stop {
    GstElement* p;
    ~Stop() { gst_element_set_state(p, GST_STATE_NULL); }
  } stop{pipeline.get()};
  if (gst_element_set_state(pipeline.get(), GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
    return Unavailable("cannot start fetching " + uri);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string body;
  // An error the source posted: it is on the bus before its end of stream reaches the appsink.
  auto posted_error = [&]() -> std::optional<std::string> {
    GstMessage* m = gst_bus_pop_filtered(bus.get(), GST_MESSAGE_ERROR);
    if (!m) return std::nullopt;
    GError* err = nullptr;
    gst_message_parse_error(m, &err, nullptr);
    std::string why = err ? err->message : "an error";
    g_clear_error(&err);
    gst_message_unref(m);
    return why;
  };
  while (true) {
    if (auto why = posted_error()) return Unavailable(*why);
    const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Unavailable("no whole answer within " + std::to_string(timeout.count()) + " ms");
    // Pulled in slices, so that an error on the bus is seen soon.
    const auto slice = std::min<int64_t>(left.count(), 50'000'000);
    GstSample* sample = gst_app_sink_try_pull_sample(GST_APP_SINK(sink), static_cast<GstClockTime>(slice));
    if (!sample) {
      if (gst_app_sink_is_eos(GST_APP_SINK(sink))) {
        if (auto why = posted_error()) return Unavailable(*why);
        return body;
      }
      continue;
    }
    if (GstBuffer* buffer = gst_sample_get_buffer(sample)) {
      GstMapInfo map;
      if (gst_buffer_map(buffer, &map, GST_MAP_READ)) {
        body.append(reinterpret_cast<const char*>(map.data), map.size);
        gst_buffer_unmap(buffer, &map);
      }
    }
    gst_sample_unref(sample);
    if (body.size() > max_bytes) return DataLoss("larger than " + std::to_string(max_bytes) + " bytes");
  }
}

std::string hls_without_query_strings(std::string_view text) {
  auto cut_query = [](std::string_view uri) {
    const size_t q = uri.find_first_of("?#");
    return q == std::string_view::npos ? uri : uri.substr(0, q);
  };
  std::string out;
  out.reserve(text.size());
  for_each_line(text, [&](std::string_view line) {
    if (line.empty()) return true;  // blank lines mean nothing in a playlist
    if (line.front() != '#') {
      out.append(cut_query(line));  // a segment's (or a variant's) URI
    } else if (const size_t at = line.find("URI=\""); at != std::string_view::npos) {
      // A tag's URI attribute (#EXT-X-KEY, #EXT-X-MAP, #EXT-X-MEDIA): its query goes too.
      const size_t from = at + 5;
      const size_t to = line.find('"', from);
      out.append(line.substr(0, from));
      if (to == std::string_view::npos) {
        out.append(line.substr(from));
      } else {
        out.append(cut_query(line.substr(from, to - from)));
        out.append(line.substr(to));
      }
    } else {
      out.append(line);
    }
    out.push_back('\n');
    return true;
  });
  return out;
}

std::optional<std::string> hls_playlist_state(const std::string& uri, const HttpSourceSetup& setup,
                                              std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto left = [&] {
    return std::max(std::chrono::milliseconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                       deadline - std::chrono::steady_clock::now()));
  };
  Result<std::string> top = fetch_http_body(uri, setup, left());
  if (!top.ok()) return std::nullopt;
  if (!hls_is_master_playlist(*top)) return hls_without_query_strings(*top);
  std::string state;
  const std::vector<std::string> variants = hls_variant_uris(*top, uri);
  for (size_t i = 0; i < variants.size() && i < 8; ++i) {
    Result<std::string> media = fetch_http_body(variants[i], setup, left());
    if (!media.ok()) return std::nullopt;
    state += hls_without_query_strings(variants[i]) + hls_without_query_strings(*media) + "\n";
  }
  return state;
}

}  // namespace vapipe
