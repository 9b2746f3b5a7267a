#include "stages/ingest/recent_frames.h"

#include <cstdint>
#include <gst/app/gstappsink.h>
#include <gst/app/gstappsrc.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>

#include "stages/ingest/decoder_input_gate.h"

namespace vapipe {

void RecentFrames::new_decoder() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++decoders_;
  end_taps(StartOver::kNewDecoder);
  compressed_.clear();
  bytes_ = 0;
  caps_.reset();
}

void RecentFrames::set_caps(GstCaps* caps) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (caps_ && caps && gst_caps_is_equal(caps_.get(), caps)) return;
  end_taps(StartOver::kNewCaps);
  compressed_.clear();  // decoded with other caps, they would not decode with these
  bytes_ = 0;
  caps_.reset(caps ? gst_caps_ref(caps) : nullptr);
  intra_only_ = is_intra_only_codec(caps);
}

void RecentFrames::add_compressed(GstBuffer* buffer) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!caps_) return;
  // As the decoder's gate judges it: an intra-only codec's frames are key frames whatever their flags.
  const bool key = intra_only_ || !GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_DELTA_UNIT);
  for (auto it = taps_.begin(); it != taps_.end();) it = it->second(buffer, StartOver::kNo) ? std::next(it) : taps_.erase(it);
  if (compressed_.empty() && !key) return;  // nothing to decode it from
  const int64_t pts = GST_BUFFER_PTS_IS_VALID(buffer) ? static_cast<int64_t>(GST_BUFFER_PTS(buffer)) : -1;
  const size_t bytes = gst_buffer_get_size(buffer);
  compressed_.push_back(Compressed{BufferRef(gst_buffer_ref(buffer)), pts, key, bytes});
  bytes_ += bytes;
  if (key || bytes_ > max_bytes_) prune_compressed();
}

void RecentFrames::end_taps(StartOver why) {
  for (auto& [id, tap] : taps_) tap(nullptr, why);
  taps_.clear();
}

bool RecentFrames::add_tap(uint64_t id, int64_t from_pts_ns, const std::function<Tap(GstCaps* caps)>& make,
                           bool or_next_frames, std::optional<uint64_t> in_decoder) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!caps_ || (compressed_.empty() && !or_next_frames)) return false;
  if (in_decoder && *in_decoder != decoders_) return false;
  size_t from = 0;  // the first kept is a key frame
  for (size_t i = 0; i < compressed_.size(); ++i) {
    const Compressed& c = compressed_[i];
    if (!c.key || c.pts < 0) continue;
    if (c.pts > from_pts_ns) break;
    from = i;
  }
  Tap tap = make(caps_.get());
  if (!tap) return true;
  for (size_t i = from; i < compressed_.size(); ++i) {
    if (!tap(compressed_[i].buffer.get(), StartOver::kNo)) return true;
  }
  taps_[id] = std::move(tap);
  return true;
}

CapsRef RecentFrames::caps() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return CapsRef(caps_ ? gst_caps_ref(caps_.get()) : nullptr);
}

uint64_t RecentFrames::decoder() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return decoders_;
}

void RecentFrames::remove_tap(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  taps_.erase(id);
}

void RecentFrames::drop_front(size_t count) {
  for (size_t i = 0; i < count && !compressed_.empty(); ++i) {
    bytes_ -= compressed_.front().bytes;
    compressed_.pop_front();
  }
}

// From the key frame before the latest key frame no later than the earliest frame a picture can still
// ask for (find's key_frames_back 1; key frames' timestamps rise in decode order; an untimed one is
// never asked for); then, over max_bytes_, one GOP at a time while another key frame follows, or
// everything (nothing decodes the rest).
void RecentFrames::prune_compressed() {
  if (keep_from_ns_ >= 0) {
    size_t latest = 0, before = 0;
    for (size_t i = 0; i < compressed_.size(); ++i) {
      const Compressed& c = compressed_[i];
      if (!c.key) continue;
      if (c.pts > keep_from_ns_ - keep_before_ns_) break;
      before = latest;
      latest = i;
    }
    drop_front(before);
  }
  while (bytes_ > max_bytes_) {
    size_t next_key = 0;
    for (size_t i = 1; i < compressed_.size(); ++i) {
      if (compressed_[i].key) {
        next_key = i;
        break;
      }
    }
    drop_front(next_key > 0 ? next_key : compressed_.size());
  }
}

void RecentFrames::add_sent(const Envelope& env, Orientation turn) {
  if (env.pts_ns < 0) return;  // never asked for by its timestamp
  std::lock_guard<std::mutex> lock(mutex_);
  if (!sent_.empty() && env.pts_ns < sent_.back().env.pts_ns - in_flight_ns_) sent_.clear();  // went back: a seek
  sent_.push_back(Sent{env, turn});
  constexpr size_t kMostSent = 10000;  // 5.5 min of a 30 fps stream (segments_min_frames may say more)
  while (sent_.size() > kMostSent ||
         (sent_.size() > frames_back_ + 1 && sent_.front().env.pts_ns < sent_.back().env.pts_ns - in_flight_ns_)) {
    sent_.pop_front();
  }
  keep_from_ns_ = sent_.front().env.pts_ns;
}

void RecentFrames::forget_sent() {
  std::lock_guard<std::mutex> lock(mutex_);
  sent_.clear();
  keep_from_ns_ = -1;
}

std::optional<Orientation> RecentFrames::turn_sent(int64_t pts_ns) const {
  if (pts_ns < 0) return std::nullopt;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = sent_.rbegin(); it != sent_.rend(); ++it) {
    if (it->env.pts_ns == pts_ns) return it->turn;
  }
  return std::nullopt;
}

std::optional<RecentFrames::Kept> RecentFrames::find(int64_t pts_ns, unsigned key_frames_back) const {
  if (pts_ns < 0) return std::nullopt;
  std::lock_guard<std::mutex> lock(mutex_);
  const Sent* sent = nullptr;
  for (auto it = sent_.rbegin(); it != sent_.rend(); ++it) {
    if (it->env.pts_ns == pts_ns) {
      // Frames sent one after another with one timestamp: a decoder's output that went back (a jitter
      // buffer's disordered times, B-frames) is given the frame's before by GstVideoDecoder. That
      // timestamp's own compressed frame is the first's.
      while (std::next(it) != sent_.rend() && std::next(it)->env.pts_ns == pts_ns) ++it;
      sent = &*it;
      break;
    }
  }
  if (!sent || !caps_) return std::nullopt;
  size_t at = compressed_.size();
  for (size_t i = compressed_.size(); i-- > 0;) {
    if (compressed_[i].pts == pts_ns) {
      at = i;
      break;
    }
  }
  if (at == compressed_.size()) return std::nullopt;
  size_t from = at;
  for (unsigned keys = 0;; --from) {
    if (compressed_[from].key && keys++ == key_frames_back) break;
    if (from == 0) return std::nullopt;  // not kept that far back (the first kept is a key frame)
  }
  Kept kept{*sent, CapsRef(gst_caps_ref(caps_.get())), {}};
  kept.compressed.reserve(at - from + 1);
  for (size_t i = from; i <= at; ++i) kept.compressed.emplace_back(gst_buffer_ref(compressed_[i].buffer.get()));
  return kept;
}

size_t RecentFrames::compressed_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

size_t RecentFrames::compressed_frames() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return compressed_.size();
}

size_t RecentFrames::sent_frames() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return sent_.size();
}

namespace {

GstPadProbeReturn on_decoder_input(GstPad*, GstPadProbeInfo* info, gpointer user) {
  auto* recent = static_cast<RecentFrames*>(user);
  if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM) {
    GstEvent* event = GST_PAD_PROBE_INFO_EVENT(info);
    if (event && GST_EVENT_TYPE(event) == GST_EVENT_CAPS) {
      GstCaps* caps = nullptr;
      gst_event_parse_caps(event, &caps);
      recent->set_caps(caps);
    }
  } else if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER) {
    if (GstBuffer* buffer = GST_PAD_PROBE_INFO_BUFFER(info)) recent->add_compressed(buffer);
  } else if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER_LIST) {
    GstBufferList* list = GST_PAD_PROBE_INFO_BUFFER_LIST(info);
    for (guint i = 0; list && i < gst_buffer_list_length(list); ++i) recent->add_compressed(gst_buffer_list_get(list, i));
  }
  return GST_PAD_PROBE_OK;
}

}  // namespace

void keep_decoder_input(GstPad* decoder_sink, RecentFrames* recent) {
  recent->new_decoder();
  if (GstCaps* caps = gst_pad_get_current_caps(decoder_sink)) {
    recent->set_caps(caps);
    gst_caps_unref(caps);
  }
  gst_pad_add_probe(decoder_sink,
                    static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_BUFFER_LIST |
                                                 GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM),
                    &on_decoder_input, recent, nullptr);
}

namespace {

struct ElementUnref {
  void operator()(GstElement* e) const {
    gst_element_set_state(e, GST_STATE_NULL);
    gst_object_unref(e);
  }
};

// libav's decoders send pictures they could not decode whole unless told not to; such a picture (a
// frame after a recovery point, before the refresh completes) is no picture of the frame.
// One thread: a decoder's threads each hold frames of their own (a 1080p frame is 3 MB), and the
// stream's own decoding has the CPUs.
void on_element_added(GstBin*, GstBin*, GstElement* element, gpointer) {
  if (!GST_IS_ELEMENT(element)) return;
  GObjectClass* type = G_OBJECT_GET_CLASS(element);
  if (g_object_class_find_property(type, "output-corrupt")) g_object_set(element, "output-corrupt", FALSE, nullptr);
  if (g_object_class_find_property(type, "max-threads")) g_object_set(element, "max-threads", 1, nullptr);
}

// At most two frames (a quarter of the CPUs, on a larger machine) are decoded again at once in a
// process: a burst of segments beginning on many cameras waits its turn instead of taking every CPU
// and a decoder's frames (tens of MB at 1080p) each.
class DecodeTurn {
 public:
  DecodeTurn() {
    static const int at_once = std::max(2, static_cast<int>(std::thread::hardware_concurrency() / 4));
    std::unique_lock<std::mutex> lock(mutex());
    changed().wait(lock, [] { return running() < at_once; });
    ++running();
  }
  ~DecodeTurn() {
    std::lock_guard<std::mutex> lock(mutex());
    --running();
    changed().notify_one();
  }
  DecodeTurn(const DecodeTurn&) = delete;
  DecodeTurn& operator=(const DecodeTurn&) = delete;

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::condition_variable& changed() {
    static std::condition_variable cv;
    return cv;
  }
  static int& running() {
    static int n = 0;
    return n;
  }
};

// The picture decoder's streaming threads run at a lower priority (nice 10): on a busy machine the
// cameras' own decoding goes first and no frame of theirs is lost for a picture, which comes later.
GstBusSyncReply lower_streaming_threads(GstBus*, GstMessage* message, gpointer) {
  if (GST_MESSAGE_TYPE(message) == GST_MESSAGE_STREAM_STATUS) {
    GstStreamStatusType type;
    GstElement* owner = nullptr;
    gst_message_parse_stream_status(message, &type, &owner);
    // Posted from the new thread itself as it starts.
    if (type == GST_STREAM_STATUS_TYPE_ENTER) setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 10);
  }
  return GST_BUS_PASS;
}


}  // namespace

std::string first_bus_error(GstElement* pipeline) {
  GstBus* bus = gst_element_get_bus(pipeline);
  std::string why;
  while (GstMessage* m = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR)) {
    GError* err = nullptr;
    gst_message_parse_error(m, &err, nullptr);
    if (why.empty() && err) why = err->message;
    if (err) g_error_free(err);
    gst_message_unref(m);
  }
  gst_object_unref(bus);
  return why;
}

bool share_key_frame(const RecentFrames::Kept& a, const RecentFrames::Kept& b) {
  return !a.compressed.empty() && !b.compressed.empty() && a.compressed.front().get() == b.compressed.front().get();
}

std::vector<Result<GstSample*>> decode_kept_frames(const std::vector<const RecentFrames::Kept*>& kept) {
  std::vector<Result<GstSample*>> out;
  if (kept.empty()) return out;
  // The one with the most compressed frames holds the others' (each runs from the same key frame).
  const RecentFrames::Kept* longest = kept.front();
  for (const RecentFrames::Kept* k : kept) {
    if (k->compressed.size() > longest->compressed.size()) longest = k;
  }
  auto all_fail = [&](const Status& why) {
    out.assign(kept.size(), Result<GstSample*>(why));
    return out;
  };
  DecodeTurn turn;
  GError* err = nullptr;
  GstElement* made = gst_parse_launch(
      "appsrc name=src format=time ! decodebin name=decode ! videoconvert ! video/x-raw,format=I420 ! "
      "appsink name=sink sync=false max-buffers=2",
      &err);
  if (!made) {
    const std::string why = err ? err->message : "unknown error";
    if (err) g_error_free(err);
    return all_fail(Internal("cannot make a decoder for the picture: " + why));
  }
  if (err) g_error_free(err);
  std::unique_ptr<GstElement, ElementUnref> pipeline(made);
  GstElement* src = gst_bin_get_by_name(GST_BIN(made), "src");
  GstElement* decode = gst_bin_get_by_name(GST_BIN(made), "decode");
  GstElement* sink = gst_bin_get_by_name(GST_BIN(made), "sink");
  g_signal_connect(decode, "deep-element-added", G_CALLBACK(&on_element_added), nullptr);
  GstBus* bus = gst_element_get_bus(made);
  gst_bus_set_sync_handler(bus, &lower_streaming_threads, nullptr, nullptr);
  gst_object_unref(bus);
  g_object_set(src, "caps", longest->caps.get(), nullptr);
  gst_object_unref(decode);
  auto release = [&] {
    gst_object_unref(src);
    gst_object_unref(sink);
  };
  if (gst_element_set_state(made, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
    const std::string why = first_bus_error(made);
    release();
    return all_fail(Internal("cannot start a decoder for the picture" + (why.empty() ? "" : ": " + why)));
  }
  for (const BufferRef& b : longest->compressed) gst_app_src_push_buffer(GST_APP_SRC(src), gst_buffer_ref(b.get()));
  gst_app_src_end_of_stream(GST_APP_SRC(src));  // the decoder gives every picture it holds
  std::vector<GstSample*> found(kept.size(), nullptr);
  size_t missing = kept.size();
  while (missing > 0) {
    GstSample* sample = gst_app_sink_try_pull_sample(GST_APP_SINK(sink), 10 * GST_SECOND);
    if (!sample) break;  // the end, an error, or nothing in 10 s
    GstBuffer* b = gst_sample_get_buffer(sample);
    const int64_t pts = b && GST_BUFFER_PTS_IS_VALID(b) ? static_cast<int64_t>(GST_BUFFER_PTS(b)) : -1;
    for (size_t i = 0; i < kept.size(); ++i) {
      if (!found[i] && kept[i]->sent.env.pts_ns == pts) {
        found[i] = gst_sample_ref(sample);
        --missing;
      }
    }
    gst_sample_unref(sample);
  }
  const std::string why = missing > 0 ? first_bus_error(made) : "";
  release();
  for (size_t i = 0; i < kept.size(); ++i) {
    if (found[i]) {
      out.emplace_back(found[i]);
    } else {
      const int64_t target = kept[i]->sent.env.pts_ns;
      out.emplace_back(NotFound("the decoder gave no picture of the frame at " + std::to_string(target / 1000000) +
                                " ms of its " + std::to_string(kept[i]->compressed.size()) + " compressed frames" +
                                (why.empty() ? "" : ": " + why)));
    }
  }
  return out;
}

Result<GstSample*> decode_kept_frame(const RecentFrames::Kept& kept) { return decode_kept_frames({&kept}).front(); }

}  // namespace vapipe
