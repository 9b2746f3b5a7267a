#include "stages/ingest/gif_timeline.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <memory>
#include <utility>

#include "pipeline/logging.h"

namespace vapipe {
namespace {

// libav's GIF demuxer's rule (GIF_MIN_DELAY, GIF_DEFAULT_DELAY), as browsers play them: a delay under
// 2 hundredths of a second is taken as 10.
constexpr int kMinDelayCs = 2;
constexpr int kDefaultDelayCs = 10;
constexpr int64_t kNsPerCs = 10'000'000;

class Bytes {
 public:
  explicit Bytes(std::string_view b) : b_(b) {}
  bool has(size_t n) const { return at_ + n <= b_.size(); }
  uint8_t byte() { return static_cast<uint8_t>(b_[at_++]); }
  uint16_t le16() {
    const uint16_t v = static_cast<uint16_t>(static_cast<uint8_t>(b_[at_]) | (static_cast<uint8_t>(b_[at_ + 1]) << 8));
    at_ += 2;
    return v;
  }
  std::string_view take(size_t n) {
    std::string_view v = b_.substr(at_, n);
    at_ += n;
    return v;
  }
  size_t at() const { return at_; }
  // Skips a chain of sub-blocks (a size byte, that many bytes, ..., a 0); false when the bytes end first.
  // `first`: the first sub-block's bytes.
  bool skip_sub_blocks(std::string_view* first = nullptr) {
    bool is_first = true;
    while (has(1)) {
      const uint8_t size = byte();
      if (size == 0) return true;
      if (!has(size)) return false;
      const std::string_view data = take(size);
      if (is_first && first) *first = data;
      is_first = false;
    }
    return false;
  }

 private:
  std::string_view b_;
  size_t at_ = 0;
};

Status cut_short(size_t at, size_t frames) {
  return DataLoss("the GIF is cut short at byte " + std::to_string(at) + ", before its first frame ended (" +
                  std::to_string(frames) + " whole)");
}

// A color table's size from a packed byte (its top bit says there is one).
size_t color_table_bytes(uint8_t packed) { return (packed & 0x80) ? 3u * (2u << (packed & 0x07)) : 0u; }

}  // namespace

Result<GifTimeline> parse_gif_timeline(std::string_view bytes) {
  Bytes b(bytes);
  if (!b.has(13) || (bytes.substr(0, 6) != "GIF87a" && bytes.substr(0, 6) != "GIF89a")) {
    return InvalidArgument("not a GIF (it does not begin with GIF87a or GIF89a and a screen descriptor)");
  }
  b.take(6 + 4);
  const uint8_t packed = b.byte();
  b.take(2);
  const size_t global = color_table_bytes(packed);
  if (!b.has(global)) return cut_short(bytes.size(), 0);
  b.take(global);
  GifTimeline t;
  int delay_cs = kDefaultDelayCs;
  int64_t now_ns = 0;
  // A file cut short keeps the frames before the cut (the demuxer gives them too).
  auto ended = [&]() -> Result<GifTimeline> {
    if (t.pts_ns.empty()) return cut_short(bytes.size(), 0);
    return t;
  };
  while (b.has(1)) {
    const uint8_t block = b.byte();
    if (block == 0x3B) {  // the trailer
      t.whole = true;
      return t;
    }
    if (block == 0x21) {          // an extension
      if (!b.has(1)) return ended();
      const uint8_t label = b.byte();
      std::string_view first;
      if (!b.skip_sub_blocks(&first)) return ended();
      if (label == 0xF9 && first.size() >= 3) {  // Graphic Control: this frame's delay
        delay_cs = static_cast<uint8_t>(first[1]) | (static_cast<uint8_t>(first[2]) << 8);
        if (delay_cs < kMinDelayCs) delay_cs = kDefaultDelayCs;
      } else if (label == 0xFF && first.substr(0, 11) == "NETSCAPE2.0") {
        t.loops = true;
      }
      continue;
    }
    if (block == 0x2C) {  // an image: left, top, width, height, packed; its color table; its LZW data
      if (!b.has(9)) return ended();
      b.take(8);
      const size_t local = color_table_bytes(b.byte());
      if (!b.has(local + 1)) return ended();
      b.take(local + 1);  // (and the LZW minimum code size)
      if (!b.skip_sub_blocks()) return ended();
      t.pts_ns.push_back(now_ns);
      t.duration_ns.push_back(delay_cs * kNsPerCs);
      t.frames_end = b.at();
      now_ns += delay_cs * kNsPerCs;
      continue;
    }
    // Bytes that begin no block: the file ends here for the frames counted (libav's reader skips to
    // what looks like the next block; anything it gives after the last frame counted is left out).
    if (t.pts_ns.empty()) {
      return InvalidArgument("the GIF has no frame before byte " + std::to_string(b.at() - 1) +
                             ", which begins no GIF block");
    }
    return t;
  }
  return ended();
}

Result<GifTimeline> read_gif_timeline(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot be opened");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return Unavailable("cannot be read");
  Result<GifTimeline> timeline = parse_gif_timeline(bytes);
  if (timeline.ok() && !timeline->whole) {
    timeline->mended = std::make_shared<const std::string>(bytes.substr(0, timeline->frames_end) + ";");
  }
  // Cut before its first frame ended: no frame, and its reader would look for one for ever (a core at
  // 100%, found 2026-12-07). Read as its header and a trailer: a GIF of no frame, which ends at once.
  if (!timeline.ok() && timeline.status().code() == StatusCode::kDataLoss && bytes.size() >= 13) {
    const size_t header = 13 + color_table_bytes(static_cast<uint8_t>(bytes[10]));
    if (header <= bytes.size()) {
      GifTimeline none;
      none.no_frame_because = timeline.status().message();
      none.frames_end = header;
      none.mended = std::make_shared<const std::string>(bytes.substr(0, header) + ";");
      return none;
    }
  }
  return timeline;
}

namespace {

// Per demuxer source pad: the packets seen since the last flush, and whether the end was sent.
struct GifEnd {
  std::shared_ptr<const GifTimeline> timeline;
  size_t packets = 0;
  bool pushing_last = false;
  bool ended = false;
};

GstPadProbeReturn on_gif_packet(GstPad* pad, GstPadProbeInfo* info, gpointer user) {
  auto& end = *static_cast<GifEnd*>(user);
  if (info->type & GST_PAD_PROBE_TYPE_QUERY_UPSTREAM) {
    // Its duration, as its frames are timed: libav counts a frame without a Graphic Control Extension
    // as 0 ms long (its pictures are timed 100 ms apart: a started event's duration_ms and a summary's
    // media_s fell short).
    GstQuery* query = GST_PAD_PROBE_INFO_QUERY(info);
    GstFormat format = GST_FORMAT_UNDEFINED;
    if (!query || GST_QUERY_TYPE(query) != GST_QUERY_DURATION) return GST_PAD_PROBE_OK;
    gst_query_parse_duration(query, &format, nullptr);
    if (format != GST_FORMAT_TIME) return GST_PAD_PROBE_OK;
    gst_query_set_duration(query, GST_FORMAT_TIME, end.timeline->last_pts_ns() + end.timeline->duration_ns.back());
    return GST_PAD_PROBE_HANDLED;
  }
  if (info->type & GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM) {
    GstEvent* event = GST_PAD_PROBE_INFO_EVENT(info);
    // A seek: its flush, and the segment it begins (the untimed packets are counted from there).
    if (event && (GST_EVENT_TYPE(event) == GST_EVENT_FLUSH_STOP || GST_EVENT_TYPE(event) == GST_EVENT_SEGMENT)) {
      end.packets = 0;
      end.ended = false;
    }
    return GST_PAD_PROBE_OK;
  }
  if (end.pushing_last) return GST_PAD_PROBE_OK;  // the last packet, pushed again below
  if (end.ended) return GST_PAD_PROBE_DROP;       // after the last frame: nothing
  GstBuffer* buffer = GST_PAD_PROBE_INFO_BUFFER(info);
  if (!buffer) return GST_PAD_PROBE_OK;
  ++end.packets;
  // The last frame's packet by its time (libav times them as the timeline does), or, untimed, by the
  // count since the file's start (a seek's packets are timed).
  const GstClockTime pts = GST_BUFFER_PTS(buffer);
  const bool last = GST_CLOCK_TIME_IS_VALID(pts)
                        ? static_cast<int64_t>(pts) + end.timeline->duration_ns.back() / 2 >= end.timeline->last_pts_ns()
                        : end.packets >= end.timeline->pts_ns.size();
  if (!last) return GST_PAD_PROBE_OK;
  VAPIPE_LOG_DEBUG("GIF: its last frame's packet (pts {} ns, packet {} since the start or a seek): the end follows",
                   GST_CLOCK_TIME_IS_VALID(pts) ? static_cast<int64_t>(pts) : -1, end.packets);
  // The demuxer would read on at the file's end for ever: the packet goes on, then the end.
  end.ended = true;
  end.pushing_last = true;
  gst_pad_push(pad, gst_buffer_ref(buffer));
  end.pushing_last = false;
  gst_pad_push_event(pad, gst_event_new_eos());
  return GST_PAD_PROBE_DROP;  // (pushed above)
}

// A pull of the demuxer's that reaches the last whole frame's end is answered from the mended bytes
// (the trailer after it, then the end); the pulls before go to the file.
GstPadProbeReturn on_gif_pull(GstPad*, GstPadProbeInfo* info, gpointer user) {
  const auto& mended = *static_cast<std::shared_ptr<const std::string>*>(user);
  const uint64_t whole_end = mended->size() - 1;  // (the trailer's byte)
  if (GST_PAD_PROBE_INFO_DATA(info) != nullptr || info->offset + info->size <= whole_end) return GST_PAD_PROBE_PASS;
  if (info->offset >= mended->size()) {
    // Trailers again, not the end: libav's GIF reader that meets the end looks for a block for ever (a
    // GIF of no whole frame read its one trailer while it probed, then spun), and a trailer ends it.
    const size_t size = std::max<size_t>(1, std::min<size_t>(info->size, 4096));
    GstBuffer* trailers = gst_buffer_new_allocate(nullptr, size, nullptr);
    gst_buffer_memset(trailers, 0, ';', size);
    GST_BUFFER_OFFSET(trailers) = info->offset;
    GST_PAD_PROBE_INFO_DATA(info) = trailers;
    return GST_PAD_PROBE_DROP;
  }
  const size_t size = std::min<uint64_t>(info->size, mended->size() - info->offset);
  GstBuffer* buffer = gst_buffer_new_allocate(nullptr, size, nullptr);
  gst_buffer_fill(buffer, 0, mended->data() + info->offset, size);
  GST_BUFFER_OFFSET(buffer) = info->offset;
  GST_PAD_PROBE_INFO_DATA(info) = buffer;
  return GST_PAD_PROBE_DROP;  // (a pull answered: GStreamer 1.22 passes HANDLED's flow, not the buffer)
}

void on_gif_pad_added(GstElement*, GstPad* pad, gpointer user) {
  if (GST_PAD_DIRECTION(pad) != GST_PAD_SRC) return;
  auto* end = new GifEnd{*static_cast<std::shared_ptr<const GifTimeline>*>(user)};
  gst_pad_add_probe(pad,
                    static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM |
                                                 GST_PAD_PROBE_TYPE_QUERY_UPSTREAM),
                    &on_gif_packet, end, [](gpointer data) { delete static_cast<GifEnd*>(data); });
}

}  // namespace

void end_gif_after_its_last_frame(GstElement* demuxer, std::shared_ptr<const GifTimeline> timeline) {
  if (!timeline) return;
  if (timeline->mended) {
    // A blocking probe, as only those are asked before a pull (and may answer it); PASS lets the others by.
    GstPad* sink = gst_element_get_static_pad(demuxer, "sink");
    if (sink) {
      gst_pad_add_probe(sink, static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_PULL | GST_PAD_PROBE_TYPE_BLOCK),
                        &on_gif_pull, new std::shared_ptr<const std::string>(timeline->mended),
                        [](gpointer data) { delete static_cast<std::shared_ptr<const std::string>*>(data); });
      gst_object_unref(sink);
    }
  }
  if (timeline->pts_ns.empty()) return;  // (no frame: its reader ends at the trailer)
  g_signal_connect_data(demuxer, "pad-added", G_CALLBACK(&on_gif_pad_added),
                        new std::shared_ptr<const GifTimeline>(std::move(timeline)),
                        [](gpointer data, GClosure*) { delete static_cast<std::shared_ptr<const GifTimeline>*>(data); },
                        static_cast<GConnectFlags>(0));
}

}  // namespace vapipe
