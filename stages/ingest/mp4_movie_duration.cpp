#include "stages/ingest/mp4_movie_duration.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "pipeline/logging.h"

namespace vapipe {
namespace {

uint64_t big_endian(std::string_view bytes, size_t at, int size) {
  uint64_t v = 0;
  for (int i = 0; i < size; ++i) v = (v << 8) | static_cast<uint8_t>(bytes[at + static_cast<size_t>(i)]);
  return v;
}

// A box inside `bytes` at `at`: its type, and where its body and the box end (false if cut short).
struct Box {
  std::string_view type;
  size_t body = 0;
  size_t end = 0;
};
bool box_at(std::string_view bytes, size_t at, Box* box) {
  if (at + 8 > bytes.size()) return false;
  uint64_t size = big_endian(bytes, at, 4);
  box->type = bytes.substr(at + 4, 4);
  box->body = at + 8;
  if (size == 1) {
    if (at + 16 > bytes.size()) return false;
    size = big_endian(bytes, at + 8, 8);
    box->body = at + 16;
  } else if (size == 0) {
    size = bytes.size() - at;
  }
  if (size < box->body - at || size > bytes.size() - at) return false;
  box->end = at + static_cast<size_t>(size);
  return true;
}

// The first child of type `type` in the box body [from, to).
std::optional<Box> child(std::string_view bytes, size_t from, size_t to, std::string_view type) {
  for (size_t at = from; at + 8 <= to;) {
    Box box;
    if (!box_at(bytes.substr(0, to), at, &box)) return std::nullopt;
    if (box.type == type) return box;
    at = box.end;
  }
  return std::nullopt;
}

// A full box's (mvhd, mdhd) timescale and duration, and where its duration is.
struct Timing {
  uint32_t timescale = 0;
  uint64_t duration = 0;
  size_t duration_at = 0;
  int duration_size = 4;
};
std::optional<Timing> timing_of(std::string_view bytes, const Box& box) {
  if (box.body + 4 > box.end) return std::nullopt;
  const bool wide = bytes[box.body] == 1;
  const size_t timescale_at = box.body + 4 + (wide ? 16 : 8);
  Timing t;
  t.duration_size = wide ? 8 : 4;
  t.duration_at = timescale_at + 4;
  if (t.duration_at + static_cast<size_t>(t.duration_size) > box.end) return std::nullopt;
  t.timescale = static_cast<uint32_t>(big_endian(bytes, timescale_at, 4));
  t.duration = big_endian(bytes, t.duration_at, t.duration_size);
  if (t.timescale == 0) return std::nullopt;
  return t;
}

// The latest point, in movie units, that one track's edits need the movie to last to: each edit's end
// on the timeline plus its start in the media (in movie units). 0 when the track has no edit list.
uint64_t edits_reach(std::string_view bytes, const Box& trak, uint32_t movie_timescale) {
  const auto edts = child(bytes, trak.body, trak.end, "edts");
  const auto mdia = child(bytes, trak.body, trak.end, "mdia");
  if (!edts || !mdia) return 0;
  const auto elst = child(bytes, edts->body, edts->end, "elst");
  const auto mdhd = child(bytes, mdia->body, mdia->end, "mdhd");
  if (!elst || !mdhd) return 0;
  const std::optional<Timing> media = timing_of(bytes, *mdhd);
  if (!media || elst->body + 8 > elst->end) return 0;
  const bool wide = bytes[elst->body] == 1;
  const int size = wide ? 8 : 4;
  const uint64_t entries = big_endian(bytes, elst->body + 4, 4);
  uint64_t timeline = 0, reach = 0;
  size_t at = elst->body + 8;
  for (uint64_t i = 0; i < entries && at + 2 * static_cast<size_t>(size) + 4 <= elst->end; ++i) {
    const uint64_t duration = big_endian(bytes, at, size);
    uint64_t raw_media_time = big_endian(bytes, at + static_cast<size_t>(size), size);
    const bool empty = wide ? static_cast<int64_t>(raw_media_time) < 0 : static_cast<int32_t>(raw_media_time) < 0;
    timeline += duration;
    if (!empty) {
      // (media units to movie units, rounded up: the read must reach the edit's last frame)
      const __int128 start = (static_cast<__int128>(raw_media_time) * movie_timescale + media->timescale - 1) /
                             media->timescale;
      const __int128 end = static_cast<__int128>(timeline) + start;
      if (end > static_cast<__int128>(reach)) reach = end > static_cast<__int128>(UINT64_MAX) ? UINT64_MAX : static_cast<uint64_t>(end);
    }
    at += 2 * static_cast<size_t>(size) + 4;
  }
  return reach;
}

}  // namespace

std::optional<MovieDurationPatch> movie_duration_past_edit_lists(std::string_view moov) {
  Box root;
  if (!box_at(moov, 0, &root) || root.type != "moov") return std::nullopt;
  if (child(moov, root.body, root.end, "mvex")) return std::nullopt;  // fragmented: timed by its fragments
  const auto mvhd = child(moov, root.body, root.end, "mvhd");
  if (!mvhd) return std::nullopt;
  const std::optional<Timing> movie = timing_of(moov, *mvhd);
  if (!movie || movie->duration == 0) return std::nullopt;
  uint64_t reach = 0;
  for (size_t at = root.body; at + 8 <= root.end;) {
    Box box;
    if (!box_at(moov.substr(0, root.end), at, &box)) break;
    if (box.type == "trak") reach = std::max(reach, edits_reach(moov, box, movie->timescale));
    at = box.end;
  }
  // Any edit that starts into its media reaches past the movie's duration: a B-frame file's by a frame
  // or two (its last frames were lost too when a key frame fell in them), a trim's by the part cut.
  if (reach <= movie->duration) return std::nullopt;
  if (movie->duration_size == 4 && reach >= UINT32_MAX) return std::nullopt;
  MovieDurationPatch patch;
  patch.duration_at = movie->duration_at;
  patch.duration_size = movie->duration_size;
  patch.timescale = movie->timescale;
  patch.duration = movie->duration;
  patch.read_as = reach + 1;  // (qtdemux ends at a position equal to it)
  return patch;
}

namespace {

// The file's own duration once its moov was patched (0 until then), shared by the demuxer's pads.
struct MovieDuration {
  std::atomic<uint64_t> file_ns{0};
};

GstPadProbeReturn on_moov_pull(GstPad*, GstPadProbeInfo* info, gpointer user) {
  GstBuffer* buffer = GST_PAD_PROBE_INFO_BUFFER(info);
  if (!buffer || gst_buffer_get_size(buffer) < 8) return GST_PAD_PROBE_OK;
  char head[8];
  gst_buffer_extract(buffer, 0, head, sizeof head);
  if (std::memcmp(head + 4, "moov", 4) != 0) return GST_PAD_PROBE_OK;
  GstMapInfo map;
  if (!gst_buffer_map(buffer, &map, GST_MAP_READ)) return GST_PAD_PROBE_OK;
  const std::optional<MovieDurationPatch> patch =
      movie_duration_past_edit_lists(std::string_view(reinterpret_cast<const char*>(map.data), map.size));
  gst_buffer_unmap(buffer, &map);
  if (!patch) return GST_PAD_PROBE_OK;
  auto& duration = **static_cast<std::shared_ptr<MovieDuration>*>(user);
  duration.file_ns = gst_util_uint64_scale(patch->duration, GST_SECOND, patch->timescale);
  buffer = gst_buffer_make_writable(buffer);
  unsigned char field[8];
  uint64_t v = patch->read_as;
  for (int i = patch->duration_size - 1; i >= 0; --i, v >>= 8) field[i] = static_cast<unsigned char>(v & 0xff);
  gst_buffer_fill(buffer, patch->duration_at, field, static_cast<gsize>(patch->duration_size));
  GST_PAD_PROBE_INFO_DATA(info) = buffer;
  VAPIPE_LOG_DEBUG("MP4: its movie ({} ms shown) is read as {} ms long, as far as its edit lists reach into their "
                   "media, so that qtdemux reads the part shown whole",
                   duration.file_ns.load() / 1000000, gst_util_uint64_scale(patch->read_as, 1000, patch->timescale));
  return GST_PAD_PROBE_OK;
}

GstPadProbeReturn on_duration_query(GstPad*, GstPadProbeInfo* info, gpointer user) {
  GstQuery* query = GST_PAD_PROBE_INFO_QUERY(info);
  if (!query || GST_QUERY_TYPE(query) != GST_QUERY_DURATION) return GST_PAD_PROBE_OK;
  const uint64_t file_ns = (*static_cast<std::shared_ptr<MovieDuration>*>(user))->file_ns.load();
  GstFormat format = GST_FORMAT_UNDEFINED;
  gst_query_parse_duration(query, &format, nullptr);
  if (file_ns == 0 || format != GST_FORMAT_TIME) return GST_PAD_PROBE_OK;
  gst_query_set_duration(query, GST_FORMAT_TIME, static_cast<gint64>(file_ns));
  return GST_PAD_PROBE_HANDLED;
}

void on_pad_added(GstElement*, GstPad* pad, gpointer user) {
  if (GST_PAD_DIRECTION(pad) != GST_PAD_SRC) return;
  auto* duration = static_cast<std::shared_ptr<MovieDuration>*>(user);
  gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_QUERY_UPSTREAM, &on_duration_query,
                    new std::shared_ptr<MovieDuration>(*duration),
                    [](gpointer data) { delete static_cast<std::shared_ptr<MovieDuration>*>(data); });
}

}  // namespace

void read_trimmed_mp4s_whole(GstElement* qtdemux) {
  auto duration = std::make_shared<MovieDuration>();
  if (GstPad* sink = gst_element_get_static_pad(qtdemux, "sink")) {
    gst_pad_add_probe(sink, static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_PULL | GST_PAD_PROBE_TYPE_BUFFER),
                      &on_moov_pull, new std::shared_ptr<MovieDuration>(duration),
                      [](gpointer data) { delete static_cast<std::shared_ptr<MovieDuration>*>(data); });
    gst_object_unref(sink);
  }
  g_signal_connect_data(qtdemux, "pad-added", G_CALLBACK(&on_pad_added), new std::shared_ptr<MovieDuration>(duration),
                        [](gpointer data, GClosure*) { delete static_cast<std::shared_ptr<MovieDuration>*>(data); },
                        static_cast<GConnectFlags>(0));
}

}  // namespace vapipe
