#include "cli/segment_clips.h"

#include <cstdint>
#include <gst/app/gstappsink.h>
#include <gst/gst.h>

#include <cmath>
#include <deque>
#include <filesystem>
#include <memory>
#include <system_error>

#include "pipeline/stream_uri.h"
#include "stages/ingest/clip_recorder.h"
#include "stages/ingest/edit_list_timeline.h"
#include "stages/ingest/joined_timeline.h"
#include "stages/ingest/mp4_orientation.h"
#include "stages/ingest/stream_reader.h"

namespace vapipe::cli {

namespace {

constexpr GstClockTime kWait = 20 * GST_SECOND;  // a state change or a frame of one file

struct PipelineUnref {
  void operator()(GstElement* p) const {
    gst_element_set_state(p, GST_STATE_NULL);
    gst_object_unref(p);
  }
};

// The first video stream parsebin finds goes to the appsink (as the demuxer gives it: compressed,
// parsed); the others stay unlinked.
void link_first_video(GstElement*, GstPad* pad, gpointer sink) {
  GstCaps* caps = gst_pad_get_current_caps(pad);
  if (!caps) caps = gst_pad_query_caps(pad, nullptr);
  const bool video = caps && gst_caps_get_size(caps) > 0 &&
                     (g_str_has_prefix(gst_structure_get_name(gst_caps_get_structure(caps, 0)), "video/") ||
                      g_str_has_prefix(gst_structure_get_name(gst_caps_get_structure(caps, 0)), "image/jpeg"));
  if (caps) gst_caps_unref(caps);
  GstPad* sink_pad = gst_element_get_static_pad(GST_ELEMENT(sink), "sink");
  if (video && !gst_pad_is_linked(sink_pad)) gst_pad_link(pad, sink_pad);
  gst_object_unref(sink_pad);
}

}  // namespace

std::string segment_clip_file(const std::string& dir, const Segment& s) {
  return std::filesystem::path(segment_frame_path(dir, s, s.start_ms)).replace_extension(".mp4").string();
}

Result<std::string> SegmentClips::save(const Segment& s) const {
  if (s.uri.empty()) return NotFound("its stream's start event is not in the results");
  if (s.uri.rfind("file://", 0) != 0) {
    return FailedPrecondition(s.uri + " is not a file: only a file's frames can be cut again (a live job makes its "
                              "own clips: publish.segments_clips)");
  }
  if (s.start_ms < 0 || s.end_ms < 0) return NotFound("its frames have no timestamps");
  if (!ensure_gstreamer()) return Internal("GStreamer cannot start here");
  const std::string named = file_uri_path(s.uri);
  const std::string file_path = path_now(named, moved_);
  const std::string file = file_path == named ? named : file_path + " (moved from " + named + ")";  // for errors
  std::error_code ec;
  if (!std::filesystem::exists(file_path, ec)) {
    return NotFound(file + ": no such file" +
                    (moved_.empty() ? std::string(" (moved? --moved FROM TO reads the files of folder FROM in TO)")
                                    : std::string()));
  }
  GError* err = nullptr;
  GstElement* made = gst_parse_launch("filesrc name=src ! parsebin name=parse appsink name=sink sync=false", &err);
  if (!made || err) {
    const std::string why = err ? err->message : "unknown error";
    if (err) g_error_free(err);
    if (made) gst_object_unref(made);
    return Internal("cannot make a pipeline to read " + file + ": " + why);
  }
  std::unique_ptr<GstElement, PipelineUnref> pipeline(made);
  GstElement* src = gst_bin_get_by_name(GST_BIN(made), "src");
  GstElement* parse = gst_bin_get_by_name(GST_BIN(made), "parse");
  GstElement* sink = gst_bin_get_by_name(GST_BIN(made), "sink");
  g_object_set(src, "location", file_path.c_str(), nullptr);
  g_signal_connect(parse, "pad-added", G_CALLBACK(&link_first_video), sink);
  put_on_edit_list_timeline_in(parse, nullptr);  // an MP4's frames at the times ingest gave them
  gst_object_unref(src);
  gst_object_unref(parse);
  std::unique_ptr<GstElement, void (*)(gpointer)> sink_ref(sink, &gst_object_unref);
  auto failure = [&](const std::string& otherwise) {
    const std::string why = first_bus_error(made);
    return file + ": " + (why.empty() ? otherwise : why);
  };
  if (gst_element_set_state(made, GST_STATE_PAUSED) == GST_STATE_CHANGE_FAILURE ||
      gst_element_get_state(made, nullptr, nullptr, kWait) != GST_STATE_CHANGE_SUCCESS) {
    return Unavailable(failure("it did not open"));
  }
  const double pre_ms = std::max(0.0, s.start_ms - pre_s_ * 1000);
  const auto from_ns = static_cast<int64_t>(std::llround(pre_ms * 1e6));
  const auto to_ns = static_cast<int64_t>(std::llround((s.end_ms + post_s_ * 1000) * 1e6));
  // A file whose timestamps start over (files joined end to end): ingest put its parts on one timeline
  // (joined_timeline.h), which the segment's times are on and the file's own clock is not, so that a
  // seek by time would land in another part. Its frames are put on that timeline as they come, and read
  // from the file's start, keeping those since the last key frame until the pre-roll's (a GOP).
  const bool joined = s.timeline_restart_ms >= 0;
  TimelineRestarts restarts;  // (ingest said them: not logged again)
  if (joined) {
    GstPad* sink_pad = gst_element_get_static_pad(sink, "sink");
    join_restarted_timelines(sink_pad, &restarts, s.stream_id, /*say_first=*/false);
    gst_object_unref(sink_pad);
  } else {
    // From the key frame at or before the pre-roll.
    const auto flags = static_cast<GstSeekFlags>(GST_SEEK_FLAG_FLUSH | GST_SEEK_FLAG_KEY_UNIT | GST_SEEK_FLAG_SNAP_BEFORE);
    if (!gst_element_seek_simple(made, GST_FORMAT_TIME, flags, from_ns)) return Unavailable(file + ": it cannot be sought in");
  }
  if (gst_element_set_state(made, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
    return Unavailable(failure("it did not play"));
  }
  // The clip is an MP4, which browsers and phones play. A Matroska file's frames come without decoding
  // times, which an MP4 needs: for H.264 and H.265 the writer works them out (decoding_times.h, as for
  // an RTSP camera's). Other codecs of Matroska and WebM (VP8, VP9, AV1, MPEG-2) keep their container.
  const std::string extension = std::filesystem::path(file_path).extension().string();
  const bool matroska = extension == ".mkv" || extension == ".MKV" || extension == ".webm" || extension == ".WEBM";
  // Shown as the stream's rotate/mirror say (its started event's turn; `rotate: 0` as stored), else as
  // the file itself says (a phone's portrait video: its track's matrix, which mp4mux does not copy).
  Orientation turn = Orientation::kAsStored;
  if (const std::optional<Orientation> set = orientation_from_tag(s.turn)) {
    turn = *set;
  } else if (Result<Orientation> own = mp4_orientation(file_path); own.ok()) {
    turn = *own;
  }
  std::string path;
  std::unique_ptr<ClipWriter> writer;
  int64_t base_ns = -1;
  int64_t last_ns = -1;  // the last frame's decoding (or presentation) time
  // A joined file's frames from its last key frame, until the pre-roll's frame comes (at most a GOP of
  // kMaxGop frames: a longer one is left, and the clip starts at the next key frame).
  constexpr size_t kMaxGop = 3000;
  std::deque<GstSample*> gop;
  struct UnrefAll {
    std::deque<GstSample*>& samples;
    ~UnrefAll() {
      for (GstSample* sample : samples) gst_sample_unref(sample);
    }
  } unref_gop{gop};
  std::unique_ptr<GstCaps, void (*)(GstCaps*)> clip_caps(nullptr, [](GstCaps* c) { gst_caps_unref(c); });  // its writer's
  while (true) {
    GstSample* sample = nullptr;
    if (writer && !gop.empty()) {
      sample = gop.front();  // the GOP kept before the pre-roll's frame, first
      gop.pop_front();
    } else {
      sample = gst_app_sink_try_pull_sample(GST_APP_SINK(sink), kWait);
    }
    if (!sample) {
      if (gst_app_sink_is_eos(GST_APP_SINK(sink))) break;  // the file ends within the post-roll
      return Unavailable(failure("no frame came within " + std::to_string(kWait / GST_SECOND) + " s"));
    }
    GstBuffer* buffer = gst_sample_get_buffer(sample);
    int64_t pts = GST_BUFFER_PTS_IS_VALID(buffer) ? static_cast<int64_t>(GST_BUFFER_PTS(buffer)) : -1;
    int64_t dts = GST_BUFFER_DTS_IS_VALID(buffer) ? static_cast<int64_t>(GST_BUFFER_DTS(buffer)) : -1;
    // By decoding time where there is one: every frame shown up to the end is decoded by then. A time
    // that goes back by more than a second is the next part of files joined end to end (not put on one
    // timeline): not this clip's.
    int64_t at = dts >= 0 ? dts : pts;
    if (at > to_ns || (at >= 0 && last_ns >= 0 && at + static_cast<int64_t>(GST_SECOND) < last_ns)) {
      gst_sample_unref(sample);
      break;
    }
    if (joined && !writer) {
      // Before the pre-roll: kept from the last key frame (a frame before any is of no use).
      const bool key = !GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_DELTA_UNIT);
      if (key || gop.size() >= kMaxGop) {
        for (GstSample* kept : gop) gst_sample_unref(kept);
        gop.clear();
      }
      if (key || !gop.empty()) gop.push_back(sample);
      if (!key && gop.empty()) gst_sample_unref(sample);
      if (at < from_ns || gop.empty()) continue;
      sample = gop.front();  // the pre-roll's frame came: the clip starts at the GOP's key frame
      gop.pop_front();
      buffer = gst_sample_get_buffer(sample);
      pts = GST_BUFFER_PTS_IS_VALID(buffer) ? static_cast<int64_t>(GST_BUFFER_PTS(buffer)) : -1;
      dts = GST_BUFFER_DTS_IS_VALID(buffer) ? static_cast<int64_t>(GST_BUFFER_DTS(buffer)) : -1;
      at = dts >= 0 ? dts : pts;
    }
    if (at >= 0) last_ns = std::max(last_ns, at);
    if (writer && joined && clip_caps) {
      // A part joined after with other caps (another camera's, other parameter sets): the clip ends there.
      GstCaps* caps = gst_sample_get_caps(sample);
      if (caps && !gst_caps_is_equal(caps, clip_caps.get())) {
        gst_sample_unref(sample);
        break;
      }
    }
    if (!writer) {
      if (pts < 0) {  // nothing to place the clip by yet
        gst_sample_unref(sample);
        continue;
      }
      GstCaps* caps = gst_sample_get_caps(sample);
      const GstStructure* format = caps && gst_caps_get_size(caps) > 0 ? gst_caps_get_structure(caps, 0) : nullptr;
      const bool h26x = format && (gst_structure_has_name(format, "video/x-h264") ||
                                   gst_structure_has_name(format, "video/x-h265"));
      const bool keep_matroska = matroska && !h26x;
      path = keep_matroska ? std::filesystem::path(segment_clip_file(dir_, s)).replace_extension(".mkv").string()
                           : ClipWriter::path_for(segment_clip_file(dir_, s), caps);  // Motion JPEG: .mov
      auto opened = ClipWriter::open(path, caps,
                                     keep_matroska ? ClipWriter::Container::kMatroska : ClipWriter::Container::kMp4,
                                     turn);
      if (!opened.ok()) {
        gst_sample_unref(sample);
        return Status(opened.status().code(), file + ": " + opened.status().message());
      }
      writer = std::move(opened).value();
      if (caps) clip_caps.reset(gst_caps_ref(caps));
      base_ns = dts >= 0 ? std::min(pts, dts) : pts;
    }
    writer->push(buffer, base_ns);
    gst_sample_unref(sample);
    if (writer->failed()) break;  // finish() says why
  }
  if (!writer) return NotFound(file + ": no frame from " + media_time_text(pre_ms) + " on");
  writer->end_of_stream();
  VAPIPE_RETURN_IF_ERROR(writer->finish(std::chrono::seconds(60)));
  return path;
}

}  // namespace vapipe::cli
