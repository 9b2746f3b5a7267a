#include "cli/segment_frames.h"

#include <cstdint>
#include <gst/app/gstappsink.h>
#include <gst/gst.h>
#include <gst/video/video.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include "pipeline/file_identity.h"
#include "pipeline/picture_requests.h"
#include "pipeline/stream_uri.h"
#include "stages/ingest/decoder_input_gate.h"
#include "stages/ingest/frame_picture.h"
#include "stages/ingest/joined_timeline.h"
#include "stages/ingest/edit_list_timeline.h"
#include "stages/ingest/ps_segment_start.h"
#include "stages/ingest/stream_reader.h"

namespace vapipe::cli {

namespace {

constexpr int64_t kHalfMillisecond = 500'000;  // results' pts_ms are rounded to the microsecond
constexpr GstClockTime kWait = 20 * GST_SECOND;  // a state change or a frame of one file

std::string time_text(int64_t ns) { return media_time_text(static_cast<double>(ns) / 1e6); }

}  // namespace

std::string segment_frame_path(const std::string& dir, const Segment& s, double picture_ms) {
  const auto ms = static_cast<long long>(std::llround(std::max(0.0, picture_ms)));
  char when[32];
  std::snprintf(when, sizeof when, "%02lld-%02lld-%02lld.%03lld", ms / 3'600'000, ms / 60'000 % 60, ms / 1000 % 60,
                ms % 1000);
  return (std::filesystem::path(dir) / stream_for_file_name(s.stream_id) /
          (std::string(when) + "_" + label_for_file_name(s.label) + ".jpg"))
      .string();
}

// A file whose timestamps start over part way (files joined end to end, its eos event's
// timeline_restart_ms): ingest put its parts on one timeline at its decoder's input (joined_timeline.h),
// which the results' pts_ms are on and the file's own clock is not, so a seek by time would land in
// another part. Its frames are found on that timeline instead: the decoder's input is put on it as
// ingest's was; the key frames' places on it are listed once, reading the file through with every
// frame dropped at the decoder's input, undecoded (the index); and a frame is decoded from the file's
// start with the frames before the key frame 2 s or more before it dropped there.
struct JoinedRead {
  enum class Mode {
    kIndex,    // every frame is dropped, the key frames' times listed
    kFromKey,  // frames are dropped up to the key frame at `start_key`
    kPass,     // every frame is decoded
  };
  TimelineRestarts restarts;  // (ingest said them: not logged again)
  std::mutex mutex;
  Mode mode = Mode::kIndex;
  std::optional<std::pair<Mode, int64_t>> after_flush;  // what the next flush (a seek) starts
  int64_t start_key = -1;
  std::vector<int64_t> key_frames;  // their times on the one timeline, in decoding order
  uint64_t frames_in = 0;           // frames come to the decoder's input (the index's progress)
  bool probed = false;              // the file's first video decoder has the probes; others none
};

namespace {

// Whether the frame at the decoder's input goes on to decoding (see JoinedRead).
bool joined_frame_passes(JoinedRead& read, GstBuffer* buffer) {
  std::lock_guard<std::mutex> lock(read.mutex);
  ++read.frames_in;
  const bool key = !GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_DELTA_UNIT);
  const GstClockTime pts = GST_BUFFER_PTS(buffer);
  switch (read.mode) {
    case JoinedRead::Mode::kIndex:
      if (key && GST_CLOCK_TIME_IS_VALID(pts)) read.key_frames.push_back(static_cast<int64_t>(pts));
      return false;
    case JoinedRead::Mode::kFromKey:
      if (!key || !GST_CLOCK_TIME_IS_VALID(pts) || std::llabs(static_cast<int64_t>(pts) - read.start_key) > kHalfMillisecond) {
        return false;
      }
      read.mode = JoinedRead::Mode::kPass;
      return true;
    case JoinedRead::Mode::kPass:
      return true;
  }
  return true;
}

GstPadProbeReturn on_joined_decoder_input(GstPad*, GstPadProbeInfo* info, gpointer user) {
  auto& read = *static_cast<JoinedRead*>(user);
  if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_EVENT_FLUSH) {
    GstEvent* event = GST_PAD_PROBE_INFO_EVENT(info);
    std::lock_guard<std::mutex> lock(read.mutex);
    if (event && GST_EVENT_TYPE(event) == GST_EVENT_FLUSH_STOP && read.after_flush) {
      std::tie(read.mode, read.start_key) = *read.after_flush;
      read.after_flush.reset();
    }
    return GST_PAD_PROBE_OK;
  }
  return keep_buffers_where(info, [&](GstBuffer* buffer) { return joined_frame_passes(read, buffer); });
}

// uridecodebin's deep-element-added: the first video decoder's input is put on the one timeline, then
// judged by on_joined_decoder_input.
void probe_joined_decoder(GstBin*, GstBin*, GstElement* element, gpointer user) {
  if (!GST_IS_VIDEO_DECODER(element)) return;
  auto& read = *static_cast<JoinedRead*>(user);
  {
    std::lock_guard<std::mutex> lock(read.mutex);
    if (std::exchange(read.probed, true)) return;
  }
  GstPad* sink = gst_element_get_static_pad(element, "sink");
  if (!sink) return;
  join_restarted_timelines(sink, &read.restarts, "", /*say_first=*/false);
  gst_pad_add_probe(sink,
                    static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_BUFFER_LIST |
                                                 GST_PAD_PROBE_TYPE_EVENT_FLUSH),
                    &on_joined_decoder_input, &read, nullptr);
  gst_object_unref(sink);
}

}  // namespace

// One file's decoding pipeline, kept open across its segments: uridecodebin, its video pad only,
// turned upright as the file says (videoflip's automatic direction reads the orientation tag, as
// ingest does) or as its stream's config said (`turn`: streams[].rotate, mirror, which win over the
// tag there too), as I420 into an appsink that is pulled from.
class SegmentFrames::FileDecoder {
 public:
  // `joined`: the file's timestamps start over part way (JoinedRead): its key frames are listed first.
  static Result<std::unique_ptr<FileDecoder>> open(const std::string& uri, std::optional<Orientation> turn,
                                                   bool joined) {
    auto d = std::unique_ptr<FileDecoder>(new FileDecoder());
    if (joined) d->joined_ = std::make_unique<JoinedRead>();
    GError* err = nullptr;
    d->pipeline_ = gst_parse_launch(
        "uridecodebin name=decode videoconvert name=convert ! videoflip name=flip video-direction=auto ! "
        "videoconvert ! appsink name=sink sync=false max-buffers=1 caps=video/x-raw,format=I420",
        &err);
    if (!d->pipeline_ || err) {
      const std::string why = err ? err->message : "unknown error";
      if (err) g_error_free(err);
      return Internal("cannot make a decoding pipeline: " + why);
    }
    if (turn) {
      // Orientation's values are GstVideoOrientationMethod's (identity, 90r, 180, 90l, horiz, vert, ul-lr, ur-ll).
      GstElement* flip = gst_bin_get_by_name(GST_BIN(d->pipeline_), "flip");
      g_object_set(flip, "video-direction", static_cast<int>(*turn), nullptr);
      gst_object_unref(flip);
    }
    GstElement* decode = gst_bin_get_by_name(GST_BIN(d->pipeline_), "decode");
    GstElement* convert = gst_bin_get_by_name(GST_BIN(d->pipeline_), "convert");
    d->sink_ = gst_bin_get_by_name(GST_BIN(d->pipeline_), "sink");
    g_object_set(decode, "uri", uri.c_str(), nullptr);
    // An MPEG-PS file's first frames, which its demuxer leaves out, are read as ingest reads them.
    start_ps_segments_at_first_frame_in(decode);
    // An MP4's frames on its edit list's timeline, as ingest reads them (edit_list_timeline.h).
    put_on_edit_list_timeline_in(decode, d->edit_list_);
    // (and its frames before the edit list's start, decoded for those after them, give no picture)
    if (GstPad* pictures = gst_element_get_static_pad(convert, "sink")) {
      leave_out_hidden_pictures(pictures);
      gst_object_unref(pictures);
    }
    if (joined) g_signal_connect(decode, "deep-element-added", G_CALLBACK(&probe_joined_decoder), d->joined_.get());
    // The first video pad goes to the converter; audio and other tracks stay unlinked.
    g_signal_connect(decode, "pad-added", G_CALLBACK(+[](GstElement*, GstPad* pad, gpointer data) {
                       GstCaps* caps = gst_pad_get_current_caps(pad);
                       if (!caps) caps = gst_pad_query_caps(pad, nullptr);
                       const bool video = caps && gst_caps_get_size(caps) > 0 &&
                                          g_str_has_prefix(gst_structure_get_name(gst_caps_get_structure(caps, 0)),
                                                           "video/x-raw");
                       if (caps) gst_caps_unref(caps);
                       GstPad* sink = gst_element_get_static_pad(GST_ELEMENT(data), "sink");
                       if (video && !gst_pad_is_linked(sink)) gst_pad_link(pad, sink);
                       gst_object_unref(sink);
                     }),
                     convert);
    gst_object_unref(decode);
    gst_object_unref(convert);
    if (joined) {
      VAPIPE_RETURN_IF_ERROR(d->list_key_frames());
      return d;
    }
    if (gst_element_set_state(d->pipeline_, GST_STATE_PAUSED) == GST_STATE_CHANGE_FAILURE ||
        gst_element_get_state(d->pipeline_, nullptr, nullptr, kWait) != GST_STATE_CHANGE_SUCCESS) {
      return Unavailable(d->failure("it did not open"));
    }
    if (gst_element_set_state(d->pipeline_, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
      return Unavailable(d->failure("it did not play"));
    }
    return d;
  }

  ~FileDecoder() {
    if (pipeline_) {
      gst_element_set_state(pipeline_, GST_STATE_NULL);
      gst_object_unref(pipeline_);
    }
    if (sink_) gst_object_unref(sink_);
  }

  // The decoded frame whose timestamp is `pts_ns` (a result's pts_ms: the buffer's own timestamp, as
  // ingest read it). A frame a few seconds after the last one found is decoded on to (a stream's
  // segments come in order); others are found as ingest's resume finds a frame: a seek to the key
  // frame 2 s or more before it, then frames decoded up to it; a seek that went past it is done again
  // from the start.
  //
  // A joined file's frame (JoinedRead) is decoded on to as well when the key frame it is decoded from
  // has been decoded past; else from that key frame, the file read from its start (kFromKey).
  // How far its video's edit list is into its media (an MP4's; 0 for others), once open.
  int64_t edit_list_offset_ns() const { return edit_list_->video_ns.load(); }

  Result<GstSample*> frame_at(int64_t pts_ns) {
    enum class Way { kDecodeOn, kSeek, kFromStart, kFromKey };
    const bool ahead = last_pts_ >= 0 && pts_ns > last_pts_ + kHalfMillisecond;
    const bool close_ahead = ahead && pts_ns - last_pts_ < 4 * static_cast<int64_t>(GST_SECOND);
    const int64_t key = joined_ ? key_frame_before(pts_ns) : -1;
    std::vector<Way> ways = {Way::kDecodeOn, Way::kSeek, Way::kFromStart};
    if (joined_) ways = {Way::kDecodeOn, Way::kFromKey};
    for (const Way way : ways) {
      if (way == Way::kDecodeOn && !close_ahead && !(joined_ && ahead && key >= 0 && key <= last_pts_)) continue;
      if (way == Way::kFromKey) {
        {
          std::lock_guard<std::mutex> lock(joined_->mutex);
          joined_->after_flush = std::make_pair(key >= 0 ? JoinedRead::Mode::kFromKey : JoinedRead::Mode::kPass, key);
        }
        if (!gst_element_seek_simple(pipeline_, GST_FORMAT_TIME, GST_SEEK_FLAG_FLUSH, 0)) {
          return Unavailable("it cannot be read again from its start");
        }
      } else if (way != Way::kDecodeOn) {
        const int64_t target =
            way == Way::kFromStart ? 0 : std::max<int64_t>(0, pts_ns - 2 * static_cast<int64_t>(GST_SECOND));
        const auto flags =
            static_cast<GstSeekFlags>(GST_SEEK_FLAG_FLUSH | GST_SEEK_FLAG_KEY_UNIT | GST_SEEK_FLAG_SNAP_BEFORE);
        if (!gst_element_seek_simple(pipeline_, GST_FORMAT_TIME, flags, target)) {
          return Unavailable("it cannot be sought in");
        }
      }
      last_pts_ = -1;
      int64_t first = -1;  // the first frame's timestamp this way
      while (true) {
        GstSample* sample = gst_app_sink_try_pull_sample(GST_APP_SINK(sink_), kWait);
        if (!sample) {
          if (gst_app_sink_is_eos(GST_APP_SINK(sink_))) {
            return NotFound("the file ends before " + time_text(pts_ns) + " (its last frame is before it)");
          }
          return Unavailable(failure("no frame came within " + std::to_string(kWait / GST_SECOND) + " s"));
        }
        GstBuffer* buffer = gst_sample_get_buffer(sample);
        const bool timed = buffer && GST_BUFFER_PTS_IS_VALID(buffer);
        const int64_t pts = timed ? static_cast<int64_t>(GST_BUFFER_PTS(buffer)) : -1;
        if (first < 0) first = pts;
        if (timed && pts >= pts_ns - kHalfMillisecond) {
          if (pts <= pts_ns + kHalfMillisecond) {
            last_pts_ = pts;
            return sample;
          }
          gst_sample_unref(sample);
          // Landed after it (or, decoding on, it was not between the frames): a seek further back decides.
          if (first > pts_ns - kHalfMillisecond && way != Way::kFromStart && way != Way::kFromKey) break;
          return NotFound("no frame has the timestamp " + time_text(pts_ns) + " (the next is at " + time_text(pts) +
                          "): is this the file the results were made from?");
        }
        gst_sample_unref(sample);
      }
    }
    return NotFound("no frame has the timestamp " + time_text(pts_ns));
  }

 private:
  FileDecoder() = default;

  // The index of a joined file (JoinedRead): the file read through, playing, each frame dropped at the
  // decoder's input, to its end. A file that is long to read is waited for while frames come.
  Status list_key_frames() {
    if (gst_element_set_state(pipeline_, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
      return Unavailable(failure("it did not play"));
    }
    uint64_t seen = 0;
    auto last_progress = std::chrono::steady_clock::now();
    while (!gst_app_sink_is_eos(GST_APP_SINK(sink_))) {
      if (GstSample* sample = gst_app_sink_try_pull_sample(GST_APP_SINK(sink_), 100 * GST_MSECOND)) {
        gst_sample_unref(sample);  // (none is expected: every frame is dropped)
      }
      if (std::string error = failure(""); !error.empty()) return Unavailable(error);
      uint64_t now_seen;
      {
        std::lock_guard<std::mutex> lock(joined_->mutex);
        now_seen = joined_->frames_in;
      }
      if (now_seen != seen) {
        seen = now_seen;
        last_progress = std::chrono::steady_clock::now();
      } else if (std::chrono::steady_clock::now() - last_progress > std::chrono::nanoseconds(kWait)) {
        return Unavailable("reading it through to list its key frames, no frame came within " +
                           std::to_string(kWait / GST_SECOND) + " s");
      }
    }
    return Status::Ok();
  }

  // The key frame a joined file's frame at `pts_ns` is decoded from: the last one, in decoding order,
  // 2 s or more before it (an open GOP's leading frames, and those a seek's keyframe would skip, are
  // then decoded whole), else the first; -1 when the file has none (decoded from its start).
  int64_t key_frame_before(int64_t pts_ns) {
    std::lock_guard<std::mutex> lock(joined_->mutex);
    const std::vector<int64_t>& keys = joined_->key_frames;
    if (keys.empty()) return -1;
    int64_t chosen = keys.front();
    for (const int64_t k : keys) {
      if (k + 2 * static_cast<int64_t>(GST_SECOND) <= pts_ns) chosen = k;
    }
    return chosen;
  }

  // What the pipeline's bus says went wrong (GStreamer's error with the element that raised it), or
  // `otherwise`.
  std::string failure(const std::string& otherwise) {
    GstBus* bus = gst_element_get_bus(pipeline_);
    std::string why = otherwise;
    while (GstMessage* m = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR)) {
      GError* err = nullptr;
      gst_message_parse_error(m, &err, nullptr);
      if (err && why == otherwise) why = std::string(err->message) + " (" + GST_OBJECT_NAME(m->src) + ")";
      if (err) g_error_free(err);
      gst_message_unref(m);
    }
    gst_object_unref(bus);
    return why;
  }

  GstElement* pipeline_ = nullptr;
  GstElement* sink_ = nullptr;
  std::unique_ptr<JoinedRead> joined_;  // a joined file's; outlives the pipeline, whose probes use it
  std::shared_ptr<EditListOffset> edit_list_ = std::make_shared<EditListOffset>();
  int64_t last_pts_ = -1;  // the frame handed out last, the appsink holding the one after it (-1: none)
};

std::string path_now(const std::string& path, const std::vector<MovedFolder>& moved) {
  const MovedFolder* best = nullptr;
  for (const MovedFolder& m : moved) {
    const bool under = path.compare(0, m.from.size(), m.from) == 0 &&
                       (path.size() == m.from.size() || path[m.from.size()] == '/' || m.from == "/");
    if (under && (!best || m.from.size() > best->from.size())) best = &m;
  }
  if (!best) return path;
  // What follows FROM, from its '/' on ("" for FROM itself); under "/", the whole path.
  const std::string rest = best->from == "/" ? path : path.substr(best->from.size());
  const std::string now = (best->to == "/" ? "" : best->to) + rest;
  return now.empty() ? "/" : now;
}

Status file_unchanged_since_classified(const Segment& s, const std::vector<MovedFolder>& moved, bool* still_usable) {
  *still_usable = true;
  if (s.file_bytes < 0 || s.uri.rfind("file://", 0) != 0) return Status::Ok();
  const std::string named = file_uri_path(s.uri);
  const std::string file_path = path_now(named, moved);
  std::error_code ec;
  const auto now = std::filesystem::file_size(file_path, ec);
  if (ec) return Status::Ok();
  const bool same_size = static_cast<int64_t>(now) == s.file_bytes;
  // Its beginning, where the results say what it was: another recording of any size differs there.
  const bool same_head = s.file_head.empty() ? same_size
                                             : file_head_hash(file_path, head_bytes_then(s.file_bytes)) == s.file_head;
  if (same_size && same_head) return Status::Ok();
  const std::string file = file_path == named ? named : file_path + " (moved from " + named + ")";
  const std::string sizes = " (" + std::to_string(s.file_bytes) + " bytes then, " + std::to_string(now) + " now" +
                            (same_size ? ", and its first bytes differ)" : ")");
  if (same_head && !s.file_head.empty()) {  // appended to, or cut: the frames classified are there, or gone
    return FailedPrecondition(file + " has " + (static_cast<int64_t>(now) > s.file_bytes ? "grown" : "been cut") +
                              " since it was classified" + sizes + ", its beginning the same");
  }
  if (static_cast<int64_t>(now) > s.file_bytes && s.file_head.empty()) {  // results of before head_hash: maybe appended to
    return FailedPrecondition(file + " has grown since it was classified" + sizes +
                              ": its frames at the results' times are the ones classified only if it was appended to");
  }
  *still_usable = false;
  return FailedPrecondition(file + " has changed since it was classified" + sizes +
                            ": it is not the recording the results are of (replaced or cut since?); classify it again");
}

SegmentFrames::SegmentFrames(std::string dir, SegmentPicture which, std::vector<MovedFolder> moved)
    : dir_(std::move(dir)), which_(which), moved_(std::move(moved)) {}

SegmentFrames::~SegmentFrames() = default;

Result<std::string> SegmentFrames::save(const Segment& s) {
  constexpr size_t kOpenFiles = 4;
  if (s.uri.empty()) return NotFound("its stream's start event is not in the results");
  if (s.uri.rfind("file://", 0) != 0) {
    return FailedPrecondition(s.uri + " is not a file: only a file's frames can be read again");
  }
  const double ms = picture_ms(s);
  if (ms < 0) return NotFound("its frame has no timestamp");
  if (!ensure_gstreamer()) return Internal("GStreamer cannot start here");
  // The file as the results name it, or where --moved says it is now.
  const std::string named = file_uri_path(s.uri);
  const std::string file_path = path_now(named, moved_);
  const std::string file = file_path == named ? s.uri : file_path + " (moved from " + named + ")";  // for errors
  std::string uri = s.uri;
  if (file_path != named) {
    gchar* now = gst_filename_to_uri(file_path.c_str(), nullptr);
    if (!now) return InvalidArgument(file + ": not a path GStreamer can read");
    uri = now;
    g_free(now);
  }
  // streams[].rotate / mirror, when the stream's config gave them (else the file's own tag).
  const std::optional<Orientation> turn = s.turn.empty() ? std::nullopt : orientation_from_tag(s.turn);
  const bool joined = s.timeline_restart_ms >= 0;  // its timestamps start over part way (JoinedRead)
  const std::string key = uri + '\n' + s.turn + (joined ? "\njoined" : "");  // one file turned two ways: two decoders
  auto it = decoders_.begin();
  while (it != decoders_.end() && it->first != key) ++it;
  if (it != decoders_.end()) {
    decoders_.splice(decoders_.begin(), decoders_, it);  // most recently used first
  } else {
    std::error_code ec;
    if (!std::filesystem::exists(file_path, ec)) {
      return NotFound(file + ": no such file" +
                      (moved_.empty() ? std::string(" (moved? --moved FROM TO reads the files of folder FROM in TO)")
                                      : std::string()));
    }
    auto opened = FileDecoder::open(uri, turn, joined);
    if (!opened.ok()) return Status(opened.status().code(), file + ": " + opened.status().message());
    decoders_.emplace_front(key, std::move(opened).value());
    if (decoders_.size() > kOpenFiles) decoders_.pop_back();
  }
  // Results of earlier versions: an MP4's frame at its media time, its edit list's offset later.
  const int64_t media_offset_ns = s.pts_media_times ? decoders_.front().second->edit_list_offset_ns() : 0;
  const auto pts_ns = static_cast<int64_t>(std::llround(ms * 1e6)) - media_offset_ns;
  auto frame = decoders_.front().second->frame_at(pts_ns);
  if (!frame.ok()) {
    decoders_.pop_front();  // a decoder that failed is not trusted with the next segment
    return Status(frame.status().code(), file + ": " + frame.status().message());
  }
  GstSample* raw = frame.value();
  // An anamorphic file's pixels (upright, as turned) are shown wider or narrower than tall: its
  // picture is scaled to the shape shown, as a live job's are.
  const auto [par_n, par_d] = pixel_aspect_of(raw);
  if (s.roi != std::array<double, 4>{0, 0, 1, 1}) {
    auto region = crop_i420_to_roi(raw, s.roi);
    gst_sample_unref(raw);
    if (!region.ok()) return region.status();
    raw = region.value();
  }
  if (par_n != par_d) {
    auto square = square_pixels_i420(raw, par_n, par_d);
    gst_sample_unref(raw);
    if (!square.ok()) return square.status();
    raw = square.value();
  }
  auto bytes = encode_jpeg(raw);
  gst_sample_unref(raw);
  if (!bytes.ok()) return bytes.status();
  const std::string path = segment_frame_path(dir_, s, ms);
  VAPIPE_RETURN_IF_ERROR(write_picture_file(path, *bytes));
  return path;
}

}  // namespace vapipe::cli
