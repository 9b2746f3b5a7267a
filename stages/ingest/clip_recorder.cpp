#include "stages/ingest/clip_recorder.h"

#include <cstdint>
#include <gst/app/gstappsrc.h>

#include <climits>
#include <filesystem>
#include <optional>
#include <system_error>

#include <fmt/format.h>

#include "pipeline/logging.h"
#include "stages/ingest/decoder_input_gate.h"
#include "stages/ingest/mp4_orientation.h"

namespace vapipe {

namespace {

// The parser that gives mp4mux (qtmux for JPEG) what it takes of a codec (H.264/H.265 in avc/hvc1 form,
// whatever form they came in; VP9 with its chroma format); null: an MP4 cannot hold it as it is.
const char* parser_for(const std::string& codec) {
  if (codec == "video/x-h264") return "h264parse";
  if (codec == "video/x-h265") return "h265parse";
  if (codec == "image/jpeg") return "jpegparse";
  // vp9parse adds the chroma format mp4mux asks for (an encoder's or rtpvp9depay's caps lack it).
  if (codec == "video/x-vp9") return "vp9parse";
  if (codec == "video/x-av1") return "av1parse";
  return nullptr;
}

// Notes an error as it is posted (on the failing element's thread), and leaves it on the bus for finish().
GstBusSyncReply note_error(GstBus*, GstMessage* message, gpointer failed) {
  if (GST_MESSAGE_TYPE(message) == GST_MESSAGE_ERROR) static_cast<std::atomic<bool>*>(failed)->store(true);
  return GST_BUS_PASS;
}

int64_t duration_of(GstBuffer* buffer) {
  return GST_BUFFER_DURATION_IS_VALID(buffer) ? static_cast<int64_t>(GST_BUFFER_DURATION(buffer)) : 0;
}

void remove_quietly(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove(path, ec);
}

}  // namespace

ClipWriter::ClipWriter(std::string path, GstElement* pipeline, GstElement* src, Container container, Orientation turn)
    : path_(std::move(path)), part_(path_ + ".part"), pipeline_(pipeline), src_(src), container_(container), turn_(turn) {}

namespace {
bool needs_quicktime(GstCaps* caps, ClipWriter::Container container) {
  return container == ClipWriter::Container::kMp4 && caps && gst_caps_get_size(caps) > 0 &&
         gst_structure_has_name(gst_caps_get_structure(caps, 0), "image/jpeg");
}
}  // namespace

std::string ClipWriter::path_for(const std::string& path, GstCaps* caps, Container container) {
  return needs_quicktime(caps, container) ? std::filesystem::path(path).replace_extension(".mov").string() : path;
}

Result<std::unique_ptr<ClipWriter>> ClipWriter::open(const std::string& path, GstCaps* caps, Container container,
                                                     Orientation turn) {
  const GstStructure* s = caps && gst_caps_get_size(caps) > 0 ? gst_caps_get_structure(caps, 0) : nullptr;
  if (!s) return FailedPrecondition("the stream's frames have no caps: nothing says what codec they are");
  const std::string codec = gst_structure_get_name(s);
  const bool mp4 = container == Container::kMp4;
  const char* parser = mp4 ? parser_for(codec) : "identity";  // Matroska holds any codec GStreamer parses
  // A JPEG with its size in the caps (RTP's, a demuxer's) needs no parser, and GStreamer 1.22's
  // jpegparse drops the last frame at the end of the stream.
  if (parser && codec == "image/jpeg" && gst_structure_has_field(s, "width") && gst_structure_has_field(s, "height")) {
    parser = "identity";
  }
  if (!parser) {
    return FailedPrecondition("the stream's codec (" + codec +
                         ") is not put in an MP4 as it is; clips are of H.264, H.265, VP9 and AV1 streams, and of "
                         "Motion JPEG (in a QuickTime .mov)");
  }
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) return Internal("cannot make the folder of " + path + ": " + ec.message());
  GError* err = nullptr;
  GstElement* pipeline = gst_parse_launch(
      // The codec's name after the parser: the link to the muxer is made now, before appsrc has its caps,
      // and a muxer asked for a pad for anything (identity's) gives its first kind, an audio pad (qtmux).
      fmt::format("appsrc name=src format=time max-bytes=0 ! {} ! capsfilter caps={} ! {} name=mux ! filesink name=sink "
                  "sync=false", parser, codec,
                  !mp4 ? "matroskamux" : needs_quicktime(caps, container) ? "qtmux faststart=true" : "mp4mux faststart=true")
          .c_str(),
      &err);
  if (!pipeline) {
    const std::string why = err ? err->message : "unknown error";
    if (err) g_error_free(err);
    return Internal("cannot make a muxer for the clip: " + why);
  }
  if (err) g_error_free(err);
  GstElement* src = gst_bin_get_by_name(GST_BIN(pipeline), "src");
  GstElement* mux = gst_bin_get_by_name(GST_BIN(pipeline), "mux");
  GstElement* sink = gst_bin_get_by_name(GST_BIN(pipeline), "sink");
  std::unique_ptr<ClipWriter> writer(new ClipWriter(path, pipeline, src, container, turn));
  // faststart: the index first, so that a browser or a phone plays the clip as it downloads; the
  // frames wait in a file beside the clip's meanwhile (not in /tmp, which may be small).
  if (mp4) g_object_set(mux, "faststart-file", (writer->part_ + ".frames").c_str(), nullptr);
  g_object_set(sink, "location", writer->part_.c_str(), nullptr);
  g_object_set(src, "caps", caps, nullptr);
  gst_object_unref(mux);
  gst_object_unref(sink);
  GstBus* bus = gst_element_get_bus(pipeline);
  gst_bus_set_sync_handler(bus, &note_error, &writer->failed_, nullptr);
  gst_object_unref(bus);
  if (gst_element_set_state(pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
    const std::string why = first_bus_error(pipeline);
    return Internal("cannot start the clip's muxer at " + writer->part_ + (why.empty() ? "" : ": " + why));
  }
  return writer;
}

ClipWriter::~ClipWriter() {
  if (pipeline_) {
    gst_element_set_state(pipeline_, GST_STATE_NULL);
    gst_object_unref(src_);
    gst_object_unref(pipeline_);
  }
  for (GstBuffer* buffer : waiting_) gst_buffer_unref(buffer);
  if (!finished_) {
    remove_quietly(part_);
    remove_quietly(part_ + ".frames");
  }
}

void ClipWriter::push(GstBuffer* buffer, int64_t base_ns) {
  int64_t pts = GST_BUFFER_PTS_IS_VALID(buffer) ? static_cast<int64_t>(GST_BUFFER_PTS(buffer)) : -1;
  const int64_t dts = GST_BUFFER_DTS_IS_VALID(buffer) ? static_cast<int64_t>(GST_BUFFER_DTS(buffer)) : -1;
  const int64_t duration = duration_of(buffer);
  if (frames_ == 0 && waiting_.empty() && latest_pts_ < 0 && dts < 0) decoding_times_worked_out_ = true;
  if ((dts < 0 || decoding_times_worked_out_) && container_ == Container::kMp4) {
    // An RTSP camera's frames: RTP's presentation times, through the jitter buffer, in decoding order,
    // with no decoding times, which an MP4 needs (decoding_times.h works them out, and places the
    // frames the jitter buffer leaves untimed).
    if (pts < 0 ? latest_pts_ < 0 : pts < base_ns) return;  // nothing to place it by yet; or shown before the key frame
    latest_pts_ = std::max(latest_pts_, pts);
    base_ns_ = base_ns;
    waiting_.push_back(gst_buffer_ref(buffer));
    decoding_times_.add(pts, duration);
    push_decided(base_ns);
    return;
  }
  if (pts < 0 && latest_pts_ >= 0) pts = latest_pts_ + std::max<int64_t>(1, last_duration_);  // (Matroska: as they come)
  if (pts < 0 || pts < base_ns) return;  // nothing to place it by yet; or shown before the clip's key frame
  latest_pts_ = std::max(latest_pts_, pts);
  last_duration_ = duration;
  place(buffer, pts, dts, dts >= 0, duration, base_ns);
}

void ClipWriter::push_decided(int64_t base_ns) {
  while (std::optional<DecodingTimes::Frame> frame = decoding_times_.take()) {
    GstBuffer* buffer = waiting_.front();
    waiting_.pop_front();
    place(buffer, frame->pts, frame->dts, /*has_dts=*/true, duration_of(buffer), base_ns);
    gst_buffer_unref(buffer);
  }
}

void ClipWriter::place(GstBuffer* buffer, int64_t pts, int64_t dts, bool has_dts, int64_t duration, int64_t base_ns) {
  // The file's time 0: the clip's key frame, or its decoding time where that comes first (B-frames;
  // worked-out decoding times can be before the stream's 0).
  if (origin_ns_ == kNoOrigin) origin_ns_ = has_dts ? std::min(base_ns, dts) : base_ns;
  GstBuffer* copy = gst_buffer_copy(buffer);  // its memory shared, not copied
  GST_BUFFER_PTS(copy) = static_cast<GstClockTime>(pts - origin_ns_);
  GST_BUFFER_DTS(copy) =
      !has_dts ? GST_CLOCK_TIME_NONE : static_cast<GstClockTime>(dts > origin_ns_ ? dts - origin_ns_ : 0);
  gst_app_src_push_buffer(GST_APP_SRC(src_), copy);
  ++frames_;
  duration_ns_ = std::max(duration_ns_, pts - origin_ns_ + duration);
}

GstCaps* ClipWriter::caps() const {
  GstCaps* caps = nullptr;
  g_object_get(src_, "caps", &caps, nullptr);
  return caps;
}

uint64_t ClipWriter::queued_bytes() const { return gst_app_src_get_current_level_bytes(GST_APP_SRC(src_)); }

void ClipWriter::end_of_stream() {
  decoding_times_.end();
  push_decided(base_ns_);
  gst_app_src_end_of_stream(GST_APP_SRC(src_));
}

Status ClipWriter::finish(std::chrono::milliseconds timeout) {
  if (frames_ == 0) return NotFound("no frame of the stream came for it");
  GstBus* bus = gst_element_get_bus(pipeline_);
  GstMessage* m = gst_bus_timed_pop_filtered(bus, static_cast<GstClockTime>(timeout.count()) * GST_MSECOND,
                                             static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
  gst_object_unref(bus);
  if (!m) return Unavailable(fmt::format("its muxer did not finish in {} s", timeout.count() / 1000.0));
  std::string why;
  if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR) {
    GError* err = nullptr;
    gst_message_parse_error(m, &err, nullptr);
    why = err ? err->message : "unknown error";
    if (err) g_error_free(err);
  }
  gst_message_unref(m);
  gst_element_set_state(pipeline_, GST_STATE_NULL);  // the file closed
  if (!why.empty()) return Internal("its muxer failed: " + why);
  // mp4mux writes no matrix from an image-orientation tag (GStreamer 1.22): set in place, 36 bytes.
  if (container_ == Container::kMp4 && turn_ != Orientation::kAsStored) {
    if (Status turned = set_mp4_orientation(part_, turn_); !turned.ok()) {
      return Internal(std::string("its MP4 cannot say how it is turned (") + orientation_name(turn_) +
                      "): " + turned.message());
    }
  }
  std::error_code ec;
  std::filesystem::rename(part_, path_, ec);
  if (ec) return Internal("cannot rename " + part_ + " to " + path_ + ": " + ec.message());
  finished_ = true;
  remove_quietly(part_ + ".frames");
  return Status::Ok();
}

std::vector<std::string> remove_unfinished_clips(const std::string& pictures_dir, const std::string& stream_id) {
  namespace fs = std::filesystem;
  std::vector<std::string> removed;
  std::error_code ec;
  for (const fs::directory_entry& day : fs::directory_iterator(fs::path(pictures_dir) / stream_id, ec)) {
    std::error_code day_error;
    if (!day.is_directory(day_error)) continue;
    for (const fs::directory_entry& f : fs::directory_iterator(day.path(), day_error)) {
      const std::string name = f.path().filename().string();
      auto ends_with = [&name](const std::string& end) {
        return name.size() > end.size() && name.compare(name.size() - end.size(), end.size(), end) == 0;
      };
      std::error_code file_error;
      const bool unwritten = ends_with(".mp4.part") || ends_with(".mp4.part.frames") || ends_with(".mov.part") ||
                             ends_with(".mov.part.frames");
      if (unwritten && fs::remove(f.path(), file_error)) {
        removed.push_back(f.path().string());
      }
    }
  }
  return removed;
}

namespace {
// Its clip's n-th part: the path itself for the first, PATH with .<n>.mp4 for the others.
std::string part_path(const std::string& path, uint32_t part) {
  if (part <= 1) return path;
  std::filesystem::path p(path);
  const std::string extension = p.extension().string();
  return p.replace_extension("." + std::to_string(part) + extension).string();
}
}  // namespace

struct ClipRecorder::Clip {
  uint64_t id = 0;
  ClipOrder order;
  std::mutex mutex;
  std::unique_ptr<ClipWriter> writer;
  int64_t base_ns = -1;         // subtracted from its frames' timestamps
  int64_t first_pts_ns = -1;    // its current part's first frame's
  uint32_t part = 1;
  bool next_part_due = false;        // past `max`: a next part begins at a key frame once it is open
  std::unique_ptr<ClipWriter> next_writer;  // that part, opened by the finisher
  std::string next_part_error;              // or why it could not be
  int64_t end_after_ns = INT64_MAX;  // end(): frames after this are not its
  std::string end_why;               // why it ends there, when not as its segment did
  int64_t begun_unix_ns = 0;         // when start() was asked (the wall clock)
  bool ending = false;               // no more frames are taken
  bool intra_only = false;           // each frame a key frame, whatever its flags (Motion JPEG)
  // The part cut by a new decoder (a reconnection, whose segment publish may hold across the outage)
  // or new caps while its segment was open, until it is known whether the clip goes on (go_on) or the
  // part was its last: set while it waits (null otherwise); the part at the finisher holds it too.
  std::shared_ptr<PartWait> wait;
  bool waiting_after_caps_change = false;  // (not a new decoder: it goes on by itself)
  uint64_t decoder = 0;  // RecentFrames::decoder() whose frames its tap was added to
};

ClipRecorder::ClipRecorder(std::string stream_id, RecentFrames* recent, Options options)
    : stream_id_(std::move(stream_id)), recent_(recent), options_(options), hold_(options.hold_across_reconnections) {}

ClipRecorder::~ClipRecorder() { close(std::chrono::milliseconds(0), "the stream ended"); }

void ClipRecorder::start(ClipOrder order) {
  std::lock_guard<std::mutex> serial(start_close_mutex_);  // a clip begun is one close() ends
  const CapsRef caps = recent_->caps();
  order.path = ClipWriter::path_for(order.path, caps.get());  // Motion JPEG: a .mov
  auto clip = std::make_shared<Clip>();
  clip->id = next_id_++;
  clip->order = order;
  clip->intra_only = is_intra_only_codec(caps.get());
  clip->begun_unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
  const Key key{order.stream_id, order.label, order.segment_start_seq};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) {
      done_.push_back(ClipDone{std::move(order), false, "the stream has ended"});
      done_waiting_.store(true, std::memory_order_release);
      return;
    }
    if (open_.count(key)) return;  // asked twice (a restarted publish asks again): one clip
    open_[key] = clip;
  }
  Status failed = Status::Ok();
  bool kept = false;
  if (order.first_pts_ns < 0) {
    failed = NotFound("its frames have no timestamps to find the segment's first by");
  } else {
    // The file is made before the tap is added: the keeper's lock holds up the stream's decoding, and a
    // folder on a share can take its time.
    auto writer = caps ? ClipWriter::open(order.path, caps.get(), ClipWriter::Container::kMp4, order.turn)
                       : Result<std::unique_ptr<ClipWriter>>(std::unique_ptr<ClipWriter>());
    if (!writer.ok()) {
      failed = writer.status();
    } else if (caps) {
      clip->decoder = recent_->decoder();
      kept = recent_->add_tap(clip->id, order.first_pts_ns - options_.pre.count(), [&](GstCaps* now) -> RecentFrames::Tap {
        if (!gst_caps_is_equal(now, caps.get())) {
          failed = Unavailable("the stream's resolution or codec changed as its clip began");
          return {};
        }
        clip->writer = std::move(writer).value();
        return [this, clip](GstBuffer* buffer, RecentFrames::StartOver why) { return tap(clip, buffer, why); };
      });
    }
    if (!kept && failed.ok()) {
      failed = NotFound("none of its compressed frames is kept (a test:// source has none; or it has just connected)");
    }
  }
  if (failed.ok()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = open_.find(key); it != open_.end() && it->second == clip) open_.erase(it);
  }
  done(ClipDone{std::move(order), false, failed.message()});
}

bool ClipRecorder::tap(const std::shared_ptr<Clip>& clip, GstBuffer* buffer, RecentFrames::StartOver why) {
  std::lock_guard<std::mutex> lock(clip->mutex);
  if (clip->ending) return false;
  if (!buffer) {
    const bool new_caps = why == RecentFrames::StartOver::kNewCaps;
    const std::string cut = new_caps ? "the stream's resolution or codec changed"
                                     : "the stream's decoder started over (a reconnection, or a looping file read again)";
    if (clip->end_after_ns != INT64_MAX || !clip->writer || (!new_caps && !hold_.load(std::memory_order_relaxed))) {
      finish_later(clip, cut);  // its segment has ended already (or no grace holds it across the reconnection)
      return false;
    }
    // This part is finished, and says whether it is the last once that is known: after new caps the
    // clip goes on by itself in a next part (its segment goes on: publish sees frames, not caps), from
    // the next key frame, opened by the finisher (never under the keeper's lock); after a new decoder,
    // with publish.segments_reconnect_grace_s, publish says whether the segment went on across the outage.
    clip->wait = std::make_shared<PartWait>();
    clip->waiting_after_caps_change = new_caps;
    if (clip->base_ns < 0) {
      // Cut again before its first key frame (two changes a few frames apart, as an adaptive stream's
      // switches can be; a camera lost again as it came back): the part before said it goes on, and it
      // still may, from the newest caps or connection, under this part's number. Until stop 66 this
      // part was finished with no frame: "not written", and the clip ended there.
      ClipDone dropped;
      dropped.order = clip->order;
      dropped.order.path = part_path(clip->order.path, clip->part);
      dropped.part = clip->part;
      dropped.message = cut + " before this part's first key frame came";
      clip->wait->if_ends = std::move(dropped);
      clip->writer.reset();  // its file is removed
      --clip->part;
    } else {
      finish_part(*clip, cut, /*continues=*/false, clip);
    }
    if (new_caps) {
      std::lock_guard<std::mutex> queue_lock(mutex_);
      going_on_.push_back(clip);
      changed_.notify_all();
    }
    clip->base_ns = -1;
    clip->first_pts_ns = -1;
    clip->next_part_due = false;
    clip->next_writer.reset();
    clip->next_part_error.clear();
    return false;
  }
  const int64_t pts = GST_BUFFER_PTS_IS_VALID(buffer) ? static_cast<int64_t>(GST_BUFFER_PTS(buffer)) : -1;
  if (clip->base_ns < 0) {
    if (pts < 0) return true;  // not to be placed: the clip begins at its first timed frame
    // (A part from the frames to come, after new caps: from the first key frame.)
    if (!clip->intra_only && GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_DELTA_UNIT)) return true;
    clip->base_ns = pts;
    if (GST_BUFFER_DTS_IS_VALID(buffer)) clip->base_ns = std::min<int64_t>(pts, GST_BUFFER_DTS(buffer));
    clip->first_pts_ns = pts;
  } else if (const int64_t at = GST_BUFFER_DTS_IS_VALID(buffer) ? static_cast<int64_t>(GST_BUFFER_DTS(buffer)) : pts;
             at >= 0) {
    // By the decoding time where there is one: every frame shown up to the end is decoded by then (a
    // B-frame comes after the later frame it refers to).
    if (at > clip->end_after_ns) {
      finish_later(clip, clip->end_why);
      return false;
    }
    if (at - clip->first_pts_ns >= options_.max.count() && !clip->next_part_due) {
      // Its segment goes on past segments_clip_max_s: its next part's file is made off this thread
      // (this is under the keeper's lock, which holds up the stream's decoding, and a folder on a
      // share can take its time), and begins at the first key frame after it is ready.
      clip->next_part_due = true;
      open_next_part(clip);
    }
    if (clip->next_part_due && (clip->intra_only || !GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_DELTA_UNIT)) &&
        pts >= 0) {
      if (!clip->next_part_error.empty()) {
        finish_later(clip, fmt::format("cut at {:g} s (publish.segments_clip_max_s): its next part could not "
                                       "begin: {}",
                                       std::chrono::duration<double>(options_.max).count(), clip->next_part_error));
        return false;
      }
      if (clip->next_writer) {
        finish_part(*clip, "", /*continues=*/true);
        clip->writer = std::move(clip->next_writer);
        ++clip->part;
        clip->next_part_due = false;
        clip->base_ns = pts;
        if (GST_BUFFER_DTS_IS_VALID(buffer)) clip->base_ns = std::min<int64_t>(pts, GST_BUFFER_DTS(buffer));
        clip->first_pts_ns = pts;
      }  // else not ready yet: this part goes on to the next key frame
    }
  }
  if (clip->writer->failed()) {  // finish() says why; frames would only pile up in its queue
    finish_later(clip, "");
    return false;
  }
  if (const uint64_t queued = clip->writer->queued_bytes(); queued > ClipWriter::kMostQueuedBytes) {
    // Memory is not spent on a folder that does not keep up: the clip ends with what was written.
    finish_later(clip, fmt::format("cut: its folder did not take its frames as fast as they came ({} MB waiting)",
                                   queued >> 20));
    return false;
  }
  clip->writer->push(buffer, clip->base_ns);
  return true;
}

void ClipRecorder::finish_part(Clip& clip, const std::string& why, bool continues, std::shared_ptr<Clip> waits_in) {
  Part part;
  if (waits_in) part.wait = waits_in->wait;
  part.waits_in = std::move(waits_in);
  part.done.order = clip.order;
  part.done.order.path = part_path(clip.order.path, clip.part);
  part.done.message = why;
  part.done.start_pts_ns = clip.first_pts_ns;
  part.done.part = clip.part;
  part.done.continues = continues;
  part.writer = std::move(clip.writer);
  if (part.writer) part.writer->end_of_stream();
  std::lock_guard<std::mutex> lock(mutex_);
  finishing_.push_back(std::move(part));
  if (!finisher_.joinable() && !closed_) finisher_ = std::thread([this] { run_finisher(); });
  changed_.notify_all();
}

void ClipRecorder::open_next_part(const std::shared_ptr<Clip>& clip) {
  NextPart next{clip, part_path(clip->order.path, clip->part + 1), CapsRef(clip->writer->caps()), clip->order.turn};
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return;  // (the clip ends with the stream)
  opening_.push_back(std::move(next));
  if (!finisher_.joinable()) finisher_ = std::thread([this] { run_finisher(); });
  changed_.notify_all();
}

void ClipRecorder::finish_later(const std::shared_ptr<Clip>& clip, const std::string& why) {
  clip->ending = true;
  finish_part(*clip, why, false);
  std::lock_guard<std::mutex> lock(mutex_);
  const Key key{clip->order.stream_id, clip->order.label, clip->order.segment_start_seq};
  if (auto it = open_.find(key); it != open_.end() && it->second == clip) open_.erase(it);
}

void ClipRecorder::release_waiting(const std::shared_ptr<Clip>& clip, bool continues, const std::string& more) {
  if (!clip->wait) return;
  const std::shared_ptr<PartWait> wait = std::move(clip->wait);
  wait->decided = true;
  wait->continues = continues;
  wait->more = more;
  if (wait->done) {
    ClipDone d = std::move(*wait->done);
    wait->done.reset();
    d.continues = continues;
    d.message += more;
    done(std::move(d));
  }  // else still being written: the finisher says it as decided
  if (continues) return;
  if (wait->if_ends) {
    ClipDone d = std::move(*wait->if_ends);
    wait->if_ends.reset();
    d.message += more;
    done(std::move(d));
  }
  clip->ending = true;
  std::lock_guard<std::mutex> lock(mutex_);
  const Key key{clip->order.stream_id, clip->order.label, clip->order.segment_start_seq};
  if (auto it = open_.find(key); it != open_.end() && it->second == clip) open_.erase(it);
}

void ClipRecorder::end(const std::string& stream_id, const std::string& label, uint64_t segment_start_seq,
                       int64_t last_pts_ns) {
  std::shared_ptr<Clip> clip;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = open_.find(Key{stream_id, label, segment_start_seq});
    if (it == open_.end()) return;  // ended already (cut, the stream's caps changed), or never begun
    clip = it->second;
  }
  std::lock_guard<std::mutex> lock(clip->mutex);
  if (clip->wait) {  // it ended before the stream's decoder started over: the part before is its last
    release_waiting(clip, false);
    return;
  }
  // Without the last frame's timestamp, at the next frame.
  if (!clip->ending) clip->end_after_ns = last_pts_ns >= 0 ? last_pts_ns + options_.post.count() : INT64_MIN;
}

void ClipRecorder::go_on_after_restart(const std::string& stream_id, const std::string& label,
                                       uint64_t segment_start_seq, int64_t pts_ns) {
  std::shared_ptr<Clip> clip;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = open_.find(Key{stream_id, label, segment_start_seq});
    if (it == open_.end() || closed_) return;
    clip = it->second;
  }
  if (pts_ns < 0) {
    std::lock_guard<std::mutex> lock(clip->mutex);
    release_waiting(clip, false, "; its segment went on after the reconnection, but its clip could not: its frames "
                                 "have no timestamps to find where it goes on");
    return;
  }
  go_on(clip, pts_ns - options_.pre.count(), /*from_next_frames=*/false);
}

void ClipRecorder::go_on(const std::shared_ptr<Clip>& clip, int64_t from_pts_ns, bool from_next_frames) {
  std::string path;
  std::string where;
  // After new caps, the frames of the decoder it was cut in (a new decoder since is another connection,
  // another timeline: the clip ends); after a reconnection, the new decoder's.
  std::optional<uint64_t> in_decoder;
  {
    std::lock_guard<std::mutex> lock(clip->mutex);
    if (!clip->wait || clip->ending) return;  // (asked twice; not cut by a restart; or ended meanwhile)
    path = part_path(clip->order.path, clip->part + 1);
    where = clip->waiting_after_caps_change ? "after the stream's resolution or codec changed"
                                            : "after the reconnection";
    if (clip->waiting_after_caps_change) in_decoder = clip->decoder;
  }
  const uint64_t decoder = in_decoder.value_or(recent_->decoder());
  // As start(): the file is made before the tap is added, with no lock held (the keeper's holds up the
  // stream's decoding, and a folder on a share can take its time). close() may come meanwhile: it ends
  // the clip before it removes its tap, so a tap is added only to a clip still waiting (checked under
  // its lock, within the keeper's), and one added before is removed.
  Status failed = Status::Ok();
  const CapsRef caps = recent_->caps();
  if (!caps) {
    failed = NotFound("none of the stream's compressed frames is kept since");
  } else {
    auto writer = ClipWriter::open(ClipWriter::path_for(path, caps.get()), caps.get(), ClipWriter::Container::kMp4,
                                   clip->order.turn);
    if (!writer.ok()) {
      failed = writer.status();
    } else {
      const bool added = recent_->add_tap(
          clip->id, from_pts_ns,
          [&](GstCaps* now) -> RecentFrames::Tap {
            if (!gst_caps_is_equal(now, caps.get())) {
              failed = Unavailable("the stream's resolution or codec changed again as its clip went on");
              return {};
            }
            std::lock_guard<std::mutex> lock(clip->mutex);
            if (!clip->wait || clip->ending) return {};  // ended meanwhile
            clip->writer = std::move(writer).value();
            clip->intra_only = is_intra_only_codec(now);
            clip->decoder = decoder;
            ++clip->part;
            release_waiting(clip, true);  // before any frame of the next part: the tap's next restart is its own
            return [this, clip](GstBuffer* buffer, RecentFrames::StartOver why) { return tap(clip, buffer, why); };
          },
          from_next_frames, decoder);
      if (!added && failed.ok()) {
        failed = in_decoder && recent_->decoder() != *in_decoder
                     ? Unavailable("the stream's decoder started over (a reconnection) before it could")
                     : NotFound("none of the stream's compressed frames is kept since");
      }
    }
  }
  if (failed.ok()) return;
  std::lock_guard<std::mutex> lock(clip->mutex);
  release_waiting(clip, false, "; its segment went on " + where + ", but its clip could not: " + failed.message());
}

void ClipRecorder::end_clips_before(int64_t before_unix_ns) {
  std::vector<std::shared_ptr<Clip>> open;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [key, clip] : open_) open.push_back(clip);
  }
  for (const std::shared_ptr<Clip>& clip : open) {
    std::lock_guard<std::mutex> lock(clip->mutex);
    if (clip->wait && clip->begun_unix_ns < before_unix_ns) {
      release_waiting(clip, false);
      continue;
    }
    if (clip->ending || clip->begun_unix_ns >= before_unix_ns || clip->end_after_ns != INT64_MAX) continue;
    clip->end_after_ns = INT64_MIN;  // at its next frame
    clip->end_why = "publish was restarted: it no longer follows this segment, whose end is not known";
  }
}

void ClipRecorder::done(ClipDone d) {
  std::lock_guard<std::mutex> lock(mutex_);
  done_.push_back(std::move(d));
  done_waiting_.store(true, std::memory_order_release);
}

bool ClipRecorder::wait_next_parts_open(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return opening_.empty() && going_on_.empty() && opening_now_ == 0; });
}

std::vector<ClipDone> ClipRecorder::take_done() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<ClipDone> out;
  out.swap(done_);
  done_waiting_.store(false, std::memory_order_release);
  return out;
}

void ClipRecorder::run_finisher() {
  // The index goes first (faststart): a long clip's frames are copied once more at its end.
  constexpr auto kFinishTimeout = std::chrono::seconds(60);
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return closed_ || !finishing_.empty() || !opening_.empty() || !going_on_.empty(); });
    if (!going_on_.empty() && !closed_) {
      std::shared_ptr<Clip> clip = std::move(going_on_.front());
      going_on_.pop_front();
      ++opening_now_;
      lock.unlock();
      go_on(clip, INT64_MIN, /*from_next_frames=*/true);  // from the first key frame of the new caps
      lock.lock();
      --opening_now_;
      changed_.notify_all();
      continue;
    }
    if (!opening_.empty() && !closed_) {
      NextPart next = std::move(opening_.front());
      opening_.pop_front();
      ++opening_now_;
      lock.unlock();
      {
        // Made with no lock held: the clip takes it at a key frame once it is there (a clip that ended
        // meanwhile drops it, and its file with it, here, before the lock is taken again).
        auto writer = ClipWriter::open(next.path, next.caps.get(), ClipWriter::Container::kMp4, next.turn);
        if (std::shared_ptr<Clip> clip = next.clip.lock()) {
          std::lock_guard<std::mutex> clip_lock(clip->mutex);
          if (!clip->ending && clip->next_part_due) {
            if (writer.ok()) {
              clip->next_writer = std::move(writer).value();
            } else {
              clip->next_part_error = writer.status().message();
            }
          }
        }
      }
      lock.lock();
      --opening_now_;
      changed_.notify_all();
      continue;
    }
    if (finishing_.empty()) return;
    Part part = std::move(finishing_.front());
    finishing_.pop_front();
    ++finishing_now_;
    lock.unlock();
    // Taken no more frames: the writer is this thread's now.
    ClipDone d = std::move(part.done);
    Status written = part.writer ? part.writer->finish(kFinishTimeout) : NotFound("no muxer");
    d.written = written.ok();
    if (!written.ok()) d.message = written.message();
    d.duration_ns = part.writer ? part.writer->duration_ns() : 0;
    d.frames = part.writer ? part.writer->frames() : 0;
    part.writer.reset();  // a file not written is removed
    bool waits = false;
    if (part.wait) {  // cut by new caps or a new decoder: whether the clip goes on may not be known yet
      std::lock_guard<std::mutex> clip_lock(part.waits_in->mutex);
      Clip& clip = *part.waits_in;
      PartWait& wait = *part.wait;
      if (!wait.decided && d.written) {
        wait.done = std::move(d);  // said when it is known
        waits = true;
      } else if (!wait.decided) {  // not written: nothing to go on from, the clip ends with it
        wait.decided = true;
        if (clip.wait == part.wait) clip.wait.reset();
        clip.ending = true;
        std::lock_guard<std::mutex> open_lock(mutex_);
        const Key key{clip.order.stream_id, clip.order.label, clip.order.segment_start_seq};
        if (auto it = open_.find(key); it != open_.end() && it->second == part.waits_in) open_.erase(it);
      } else {  // known already
        d.continues = d.written && wait.continues;
        d.message += wait.more;
      }
    }
    lock.lock();
    --finishing_now_;
    if (waits) {
      changed_.notify_all();
      continue;
    }
    done_.push_back(std::move(d));
    done_waiting_.store(true, std::memory_order_release);
    changed_.notify_all();
  }
}

void ClipRecorder::close(std::chrono::milliseconds wait, const std::string& why) {
  std::lock_guard<std::mutex> serial(start_close_mutex_);
  std::vector<std::shared_ptr<Clip>> open;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [key, clip] : open_) open.push_back(clip);
  }
  for (const std::shared_ptr<Clip>& clip : open) {
    {
      std::lock_guard<std::mutex> lock(clip->mutex);
      if (clip->wait) {
        release_waiting(clip, false);  // its part before the restart is its last
      } else if (!clip->ending) {
        finish_later(clip, why);
      }
    }
    // No frame after this one; after the clip ended, so that a part going on (go_on) adds no tap after it.
    recent_->remove_tap(clip->id);
  }
  std::thread finisher;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_for(lock, wait, [&] { return finishing_.empty() && finishing_now_ == 0; });
    for (Part& part : finishing_) {
      part.done.written = false;
      part.done.continues = false;
      part.done.message = "the stream ended before its clip was written";
      done_.push_back(std::move(part.done));
      done_waiting_.store(true, std::memory_order_release);
    }
    finishing_.clear();
    opening_.clear();
    going_on_.clear();
    closed_ = true;
    changed_.notify_all();
    finisher = std::move(finisher_);
  }
  if (finisher.joinable()) finisher.join();
}

}  // namespace vapipe
