#include "stages/ingest/stream_reader.h"

#include <cstdint>
#include <gst/app/gstappsink.h>
#include <gio/gio.h>
#include <gst/gst.h>
#include <gst/video/gstvideodecoder.h>
#include <gst/video/video.h>

#include <sys/stat.h>
#include <pwd.h>
#include <unistd.h>

#include <malloc.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "pipeline/bounded_queue.h"
#include "pipeline/cuda/device_memory.h"
#include "pipeline/file_identity.h"
#include "pipeline/ingest_reload.h"
#include "pipeline/logging.h"
#include "pipeline/open_files.h"
#include "pipeline/utf8.h"
#include "stages/ingest/bus_messages.h"
#include "stages/ingest/container_end.h"
#include "stages/ingest/gst_object_ptr.h"
#include "stages/ingest/hls_playlist.h"
#include "stages/ingest/network_reachability.h"
#include "stages/ingest/tls_pin.h"
#include "stages/ingest/ts_tail_loss.h"
#include "stages/ingest/decoder_input_gate.h"
#include "stages/ingest/decoder_plugins.h"
#include "stages/ingest/frame_picture.h"
#include "stages/ingest/joined_timeline.h"
#include "stages/ingest/edit_list_timeline.h"
#include "stages/ingest/gif_timeline.h"
#include "stages/ingest/picture_slots.h"
#include "stages/ingest/untimed_frames.h"
#include "pipeline/tcp_reachability.h"
#include "stages/ingest/ps_segment_start.h"
#include "stages/ingest/rtp_timeline.h"
#include "stages/ingest/stream_fan_out.h"
#include "stages/ingest/nvdec_support.h"
#include "stages/ingest/recent_frames.h"
#include "stages/ingest/watched_state_change.h"

namespace vapipe {

bool ensure_gstreamer() {
  static std::once_flag once;
  static bool ok = false;
  std::call_once(once, [] {
    // nvcodec's decoders set up GL interop and, on a headless server without these, hang looking for
    // a display (seen on the GPU machine; ../shared/device/README.md). We never use GL: ask for
    // surfaceless EGL unless the user chose otherwise.
    setenv("GST_GL_WINDOW", "surfaceless", /*overwrite=*/0);
    setenv("GST_GL_PLATFORM", "egl", 0);
    if (!std::getenv("XDG_RUNTIME_DIR")) {
      const std::string dir = "/tmp/vapipe-runtime-" + std::to_string(getuid());
      if (mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST) setenv("XDG_RUNTIME_DIR", dir.c_str(), 0);
    }
    GError* err = nullptr;
    ok = gst_init_check(nullptr, nullptr, &err);
    if (!ok) {
      VAPIPE_LOG_ERROR("GStreamer failed to initialise: {}", err ? err->message : "unknown error");
      if (err) g_error_free(err);
    }
  });
  return ok;
}

namespace {

struct SampleUnref {
  void operator()(GstSample* s) const {
    if (s) gst_sample_unref(s);
  }
};
using SamplePtr = std::unique_ptr<GstSample, SampleUnref>;

// What the appsink callback hands to the reader thread.
struct QueuedFrame {
  SamplePtr sample;  // null: end-of-stream marker
  uint64_t seq = 0;
  int64_t capture_ns = 0;
  int64_t pts_ns = -1;  // the buffer's, or for an untimed live source its arrival (frame_pts_ns)
  uint32_t generation = 0;  // the settings it was kept under (Impl::settings_generation)
  Orientation turn = Orientation::kAsStored;  // how it is shown upright, as it was kept (Impl::orientation)
};

// Calls `fn` on each element inside `bin`, at any depth.
template <typename Fn>
void for_each_element_in(GstBin* bin, Fn fn) {
  GstIterator* it = gst_bin_iterate_recurse(bin);
  GValue item = G_VALUE_INIT;
  for (bool done = false; !done;) {
    switch (gst_iterator_next(it, &item)) {
      case GST_ITERATOR_OK:
        fn(GST_ELEMENT(g_value_get_object(&item)));
        g_value_reset(&item);
        break;
      case GST_ITERATOR_RESYNC:
        gst_iterator_resync(it);
        break;
      default:
        done = true;
    }
  }
  g_value_unset(&item);
  gst_iterator_free(it);
}

std::string factory_name_of(GstElement* element) {
  GstElementFactory* factory = gst_element_get_factory(element);
  return factory ? GST_OBJECT_NAME(factory) : "";
}

// An RTSP connection's jitter buffer set to `ms` while it runs: rtpbin passes a new latency on to the
// jitter buffers it has, and rtspsrc keeps it for the sessions it makes later. What the jitter buffer
// has then, read back from it; nullopt when `pipeline` has none (not RTSP, or no session set up yet).
std::optional<uint32_t> set_jitter_buffer(GstElement* pipeline, uint32_t ms) {
  if (!pipeline || !GST_IS_BIN(pipeline)) return std::nullopt;
  for_each_element_in(GST_BIN(pipeline), [&](GstElement* e) {
    const std::string factory = factory_name_of(e);
    if (factory == "rtpbin" || factory == "rtspsrc") g_object_set(e, "latency", static_cast<guint>(ms), nullptr);
  });
  std::optional<uint32_t> now;
  for_each_element_in(GST_BIN(pipeline), [&](GstElement* e) {
    if (now || factory_name_of(e) != "rtpjitterbuffer") return;
    guint latency = 0;
    g_object_get(e, "latency", &latency, nullptr);
    now = latency;
  });
  return now;
}

// A stream's reconnection attempts said each in the log; after them, one every kAttemptsSaidEvery.
constexpr uint32_t kAttemptsEachSaid = 10;
constexpr std::chrono::minutes kAttemptsSaidEvery{10};
// How long an RTSP server may take to answer DESCRIBE, at least (stall_timeout_s when longer): an NVR
// waking a channel took 12 s.
constexpr std::chrono::seconds kRtspAnswerWait{30};

// The error StreamReader::Impl::on_no_more_pads posts when a source has no video pad.
constexpr const char* kNoVideoPad = "no video stream to decode";

// Why a file gave no picture from its `frames` compressed frames (0: not counted) though it has some.
std::string no_key_frame_to_start_from(uint64_t frames) {
  return "none of its " + (frames > 0 ? std::to_string(frames) + " " : std::string()) +
         "compressed frames could be decoded: it has no key frame to start from (cut from a longer recording?)";
}

// Whether a bus error (pop_bus_error's text) is an H.264 or H.265 parser's at the end of a stream in
// which it found no frame it could pass on (GstBaseParse's words, its element named by its factory's).
bool is_video_parser_without_frames(const std::string& error) {
  return error.rfind("No valid frames found before end of stream", 0) == 0 &&
         (error.find("(element h264parse") != std::string::npos || error.find("(element h265parse") != std::string::npos);
}

// The camera's clock when it took the frame, in Unix ns (-1 when not known): rtspsrc's reference
// timestamp from the camera's RTCP sender reports (NTP time, from 1900), once the first has come.
int64_t camera_clock_ns(GstBuffer* buffer) {
  static GstCaps* const ntp = gst_caps_new_empty_simple("timestamp/x-ntp");  // for the process's life
  const GstReferenceTimestampMeta* meta = gst_buffer_get_reference_timestamp_meta(buffer, ntp);
  constexpr uint64_t kNtpEpochToUnixNs = 2'208'988'800ull * 1'000'000'000ull;  // 1900-01-01 to 1970-01-01
  if (!meta || meta->timestamp == GST_CLOCK_TIME_NONE || meta->timestamp < kNtpEpochToUnixNs) return -1;
  return static_cast<int64_t>(meta->timestamp - kNtpEpochToUnixNs);
}

// http:// or https:// (a snapshot URL is one of these; an RTSP camera's connection that ends after a
// picture is a fault, reconnected as such).
bool is_http_uri(const std::string& uri) {
  const std::string scheme = uri_scheme(uri);
  return scheme == "http" || scheme == "https";
}

// Why a connection to the stream's host fails, in words: refused, no answer, a name that does not
// resolve, or (rtsps://, https://) a certificate the source refuses. Empty when none of these.
std::string connection_failure(const StreamConfig& stream) {
  std::string why = tcp_connect_failure(stream.uri, std::chrono::seconds(2));
  if (why.empty() && uri_uses_tls(stream.uri) && stream.tls.verify) {
    why = tls_certificate_failure(stream.uri, std::chrono::seconds(2), stream.tls);
  }
  return why;
}

// "something accepts connections at HOST:PORT but does not answer as an RTSP server (...)", for a
// stream whose server answered in something else; empty when its uri names no host and port.
std::string not_an_rtsp_server(const StreamConfig& stream) {
  const auto authority = uri_authority(stream.uri);
  if (!authority) return "";
  const bool ipv6 = authority->host.find(':') != std::string::npos;
  return "something accepts connections at " + (ipv6 ? "[" + authority->host + "]" : authority->host) + ":" +
         std::to_string(authority->port) +
         " but does not answer as an RTSP server (another service on that port, or the camera's RTSP turned off: "
         "check the port, RTSP's own is 554)";
}

// The first error on the bus, as "message (element NAME)", if there is one. The warnings before it are
// gone through too: video continuity errors counted in `continuity_errors` (may be null).
std::optional<std::string> pop_bus_error(GstBus* bus, const StreamConfig& stream,
                                         std::atomic<uint64_t>* continuity_errors = nullptr) {
  GstMessage* m = nullptr;
  while ((m = gst_bus_pop_filtered(bus, static_cast<GstMessageType>(GST_MESSAGE_ERROR | GST_MESSAGE_WARNING))) &&
         GST_MESSAGE_TYPE(m) == GST_MESSAGE_WARNING) {
    if (continuity_errors && is_video_continuity_error(m)) continuity_errors->fetch_add(1);
    gst_message_unref(m);
  }
  if (!m) return std::nullopt;
  GError* err = nullptr;
  gchar* debug = nullptr;
  gst_message_parse_error(m, &err, &debug);
  std::string text = err ? err->message : "unknown GStreamer error";
  if (GST_MESSAGE_SRC(m)) text += std::string(" (element ") + GST_OBJECT_NAME(GST_MESSAGE_SRC(m)) + ")";
  // rtspsrc's and souphttpsrc's errors say what failed in their terms; what it means for a camera, for
  // the operator.
  const std::string source_type = GST_MESSAGE_SRC(m) ? G_OBJECT_TYPE_NAME(GST_MESSAGE_SRC(m)) : "";
  if (err && (source_type == "GstRTSPSrc" || source_type == "GstSoupHTTPSrc") && err->domain == GST_RESOURCE_ERROR) {
    if (err->code == GST_RESOURCE_ERROR_NOT_AUTHORIZED) {
      // user:password@ before the host: given (and refused), or not given at all (the camera wants one).
      const size_t scheme_end = stream.uri.find("://");
      const size_t host_start = scheme_end == std::string::npos ? 0 : scheme_end + 3;
      const size_t at = stream.uri.find('@', host_start);
      const bool has_login = at != std::string::npos && at < stream.uri.find('/', host_start);
      text += has_login ? ": the camera refused the user name and password in the stream's uri"
                        : ": the camera asks for a user name and password, and the stream's uri has none "
                          "(rtsp://USER:${CAMERA_PASSWORD}@host/...)";
    } else if (err->code == GST_RESOURCE_ERROR_NOT_FOUND) {
      text += ": the server answered but has no stream at this path (check the path in the uri)";
    } else if (std::string answer = source_type == "GstRTSPSrc" && debug ? rtsp_answer_meaning(debug) : "";
               !answer.empty()) {
      text += ": " + answer;
    } else if (err->code == GST_RESOURCE_ERROR_OPEN_READ_WRITE && source_type == "GstRTSPSrc") {
      // rtspsrc says the same whether nothing listens or the camera's TLS certificate was refused.
      // A connection that opens (ours, just now) means something listens there that did not speak RTSP
      // (another service on the port, a camera whose RTSP is off): "no server answered" misled.
      const std::string why = connection_failure(stream);
      const std::string not_rtsp = not_an_rtsp_server(stream);
      text += !why.empty()      ? ": " + why
              : !not_rtsp.empty() ? ": " + not_rtsp
                                  : ": no RTSP server answered at this address and port (wrong address or port, camera "
                                    "off or unreachable, or a firewall)";
    } else if (err->code == GST_RESOURCE_ERROR_READ && source_type == "GstRTSPSrc" && debug &&
               std::strstr(debug, "Parse error")) {
      // Its answer was no RTSP at all (an HTTP server's, random bytes): "Could not read from resource".
      const std::string not_rtsp = not_an_rtsp_server(stream);
      text += ": " + (!not_rtsp.empty() ? not_rtsp : "its server's answer is not RTSP (another kind of server on that port?)");
    } else if (err->code == GST_RESOURCE_ERROR_READ && source_type == "GstRTSPSrc" && debug &&
               std::strstr(debug, "Timeout while waiting for server response")) {
      // (rtspsrc's tcp-timeout, 20 s)
      text += ": its server took the connection but did not answer in time (a hung camera, or another kind of server "
              "on that port?)";
    } else if (err->code == GST_RESOURCE_ERROR_READ && source_type == "GstRTSPSrc" && debug &&
               (std::strstr(debug, "Received end-of-file") || std::strstr(debug, "System error"))) {
      // (A connection closed at once, or reset: "System error"; closed after the request: end-of-file.)
      text += ": its server closed the connection (a camera restarting, or one that takes no more clients; or another "
              "kind of server on that port)";
    } else if (err->code == GST_RESOURCE_ERROR_SEEK && source_type == "GstSoupHTTPSrc") {
      // souphttpsrc goes on after a dropped connection with a request for the rest (Range): a server
      // that takes none leaves only this (found 2026-12-07).
      text += ": its server closed the connection before the file's end, and takes no request for the rest of it "
              "(Range): the file cannot be read whole from there (a server or proxy that cuts long downloads?)";
    }
  }
  // An MPEG-TS file whose program changes part way (two recorders' files joined with `cat`: other PIDs,
  // another program): tsdemux replaces its pads, and the new video pad, which the stream is not read
  // from, says only "Internal data stream error" (not-linked). Found 2026-12-07.
  if (err && err->domain == GST_STREAM_ERROR && source_type == "GstTSDemux" && debug &&
      std::strstr(debug, "not-linked")) {
    text += ": its MPEG-TS program changes part way (its video moves to another stream: recordings of different "
            "recorders joined end to end?), and only the first program's video is read, to there: split the file "
            "where it changes and give each part as a stream of its own";
  }
  // souphttpsrc (1.22) says only "Internal data stream error" when it cannot connect: a connection of
  // our own says why (refused, no answer, a name that does not resolve, a refused certificate).
  if (err && err->domain == GST_STREAM_ERROR && err->code == GST_STREAM_ERROR_FAILED &&
      source_type == "GstSoupHTTPSrc") {
    if (std::string why = connection_failure(stream); !why.empty()) {
      text += ": " + why;
    } else if (debug && std::strstr(debug, "reason error")) {
      // A server that can be reached, whose connection broke part way, and whose request for the rest
      // (Range) failed too: souphttpsrc's loop stops with an error it does not say (found 2026-12-07).
      text += ": its server closed the connection before the file's end, and the request for the rest of it (Range) "
              "failed too: the file cannot be read whole from there (a server restarting, or one or a proxy that cuts "
              "long downloads?)";
    }
  }
  // A process out of descriptors fails to open anything, and GStreamer says only "Could not open".
  if (debug && std::strstr(debug, "Too many open files")) {
    text += ": ingest has run out of open files (" + std::to_string(open_file_limit().soft) +
            " allowed, RLIMIT_NOFILE): raise the limit (ulimit -n, LimitNOFILE=, docker --ulimit nofile=), or "
            "lower ingest.max_open_streams";
  }
  VAPIPE_LOG_DEBUG("GStreamer error detail: {}", debug ? debug : "");
  g_clear_error(&err);
  g_free(debug);
  gst_message_unref(m);
  return text;
}

// The GPU an nvcodec decoder factory decodes on (its elements' cuda-device-id), kNotNvcodec for any
// other factory, -1 when an nvcodec decoder does not say. Learned once per factory, from an instance.
constexpr int kNotNvcodec = -2;
int nvcodec_decoder_gpu(GstElementFactory* factory) {
  static std::mutex mutex;
  static std::map<std::string, int> known;
  const std::string name = gst_plugin_feature_get_name(GST_PLUGIN_FEATURE(factory));
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = known.find(name); it != known.end()) return it->second;
  const gchar* plugin = gst_plugin_feature_get_plugin_name(GST_PLUGIN_FEATURE(factory));
  const gchar* klass = gst_element_factory_get_metadata(factory, GST_ELEMENT_METADATA_KLASS);
  int gpu = kNotNvcodec;
  if (plugin && std::strcmp(plugin, "nvcodec") == 0 && klass && std::strstr(klass, "Decoder")) {
    gpu = -1;
    if (GstElement* e = gst_element_factory_create(factory, nullptr)) {
      gst_object_ref_sink(e);
      GParamSpec* spec = g_object_class_find_property(G_OBJECT_GET_CLASS(e), "cuda-device-id");
      if (spec && spec->value_type == G_TYPE_UINT) {
        guint id = 0;
        g_object_get(e, "cuda-device-id", &id, nullptr);
        gpu = static_cast<int>(id);
      } else if (spec && spec->value_type == G_TYPE_INT) {
        gint id = -1;
        g_object_get(e, "cuda-device-id", &id, nullptr);
        gpu = id;
      }
      gst_object_unref(e);
    }
  }
  known[name] = gpu;
  return gpu;
}

// Gives a CPU decoder `threads` threads, through whichever property its plug-in has (libav:
// max-threads, libvpx: threads, dav1d: n-threads), within the property's range; returns what the
// decoder then says it has, 0 if it has no such property (NVDEC, jpegdec).
uint32_t set_decoder_threads(GstElement* decoder, uint32_t threads) {
  for (const char* name : {"max-threads", "threads", "n-threads"}) {
    GParamSpec* spec = g_object_class_find_property(G_OBJECT_GET_CLASS(decoder), name);
    if (!spec || !(spec->flags & G_PARAM_WRITABLE) || !(spec->flags & G_PARAM_READABLE)) continue;
    if (G_IS_PARAM_SPEC_INT(spec)) {
      const gint value = std::clamp(static_cast<gint>(threads), G_PARAM_SPEC_INT(spec)->minimum, G_PARAM_SPEC_INT(spec)->maximum);
      g_object_set(decoder, name, value, nullptr);
      gint now = 0;
      g_object_get(decoder, name, &now, nullptr);
      return static_cast<uint32_t>(std::max(now, 0));
    }
    if (G_IS_PARAM_SPEC_UINT(spec)) {
      const guint value = std::clamp(static_cast<guint>(threads), G_PARAM_SPEC_UINT(spec)->minimum, G_PARAM_SPEC_UINT(spec)->maximum);
      g_object_set(decoder, name, value, nullptr);
      guint now = 0;
      g_object_get(decoder, name, &now, nullptr);
      return now;
    }
  }
  return 0;
}

}  // namespace

struct StreamReader::Impl {
  StreamConfig stream;
  uint32_t index = 0;
  IngestConfig ingest;
  ReaderOptions options;
  GstElementPtr pipeline;
  // A stopped file's pipeline that could not be stopped (its read blocked in the kernel: a share that
  // does not answer) was left to a thread of its own; its callbacks and probes point into this Impl,
  // which is then never freed (the stage is ending).
  bool pipeline_left_behind = false;
  GstElement* appsink = nullptr;     // owned by the pipeline
  GstElement* convert_sink = nullptr;  // where uridecodebin's video pad links (through videoconvert)
  GstElement* caps_sink = nullptr;     // where a pad that can carry CUDA memory links (nvdec: no videoconvert)
  GstElement* scale_out = nullptr;     // videoscale, behind videoconvert: host frames larger than a slot shrink
  GstElement* fit_filter = nullptr;    // the caps filter in front of the appsink (sizes frames to fit a slot)
  std::string fit_filter_caps;         // its caps, without a size
  FrameSize fit_applied;               // the size fit_filter asks for now; 0 x 0: none (streaming thread)
  std::mutex fit_mutex;
  std::set<std::pair<uint32_t, uint32_t>> fit_logged;  // frame sizes said to be scaled (once each)
  std::string orientation_logged;  // the last image-orientation said for this stream (any connection)
  // How the stream's frames are shown upright: its rotate/mirror, else its file's image-orientation
  // tag (kAsStored with ingest.orientation: as_stored). Set on a streaming thread before the frames it
  // applies to (the tag), or by run()'s thread as it takes a reload's retune (under sampling_mutex too:
  // a frame kept carries the turn of its generation, QueuedFrame::turn). settled_orientation().
  std::atomic<Orientation> orientation{Orientation::kAsStored};
  // The two it is made of, under turn_mutex (taken before sampling_mutex): the config's, which a reload
  // may change while the connection goes on, and the connection's file tag's (nullopt: none, or one
  // GStreamer does not define).
  std::mutex turn_mutex;
  std::optional<Orientation> turn_by_config;
  std::optional<Orientation> turn_by_file;
  bool upright_by_file = true;  // ingest.orientation: upright (the file's tag turns the frames), as a reload left it
  // take_waiting_ingest(): a reload's ingest.orientation turned the frames kept from this settings
  // generation on (run()'s thread: said as a retune is, before the first of them).
  std::optional<uint32_t> orientation_reloaded;
  // streams[].recorded_at: container: the file's creation date (its tags), ns since 1970; -1 unknown.
  std::atomic<int64_t> container_recorded_ns{-1};
  bool recorded_logged = false;
  BoundedQueue<QueuedFrame> queue;
  std::atomic<uint64_t> next_seq{0};
  std::atomic<uint64_t> decoded{0};  // pictures that reached the appsink, kept or not (every connection)
  // MPEG-TS continuity errors on the video's packets, as the bus said them (pop_bus_error).
  std::atomic<uint64_t> continuity_errors{0};
  // An RTSP camera's RTP packets lost on the network: its connection's jitter buffers (rtspsrc's,
  // one per RTP stream) count them; those of the connections before are added up as they go.
  std::mutex jitter_mutex;
  std::vector<GstElementPtr> jitter_buffers;
  // Each one's losses counted before the connection's first frame, left out: joining a camera that
  // already streams to another client (an NVR's; a shared RTSP media), the jitter buffer takes the packets
  // between the RTP-Info's seq and the first that came for lost (found 2026-12-07: 884 "lost" at each
  // such join, none of them real: an alert on the loss rate fired for every camera an NVR also records).
  std::vector<guint64> lost_before_first_frame;
  RtpPackets rtp_before;
  static std::pair<guint64, guint64> lost_and_pushed(GstElement* jb) {
    GstStructure* stats = nullptr;
    g_object_get(jb, "stats", &stats, nullptr);
    guint64 lost = 0, pushed = 0;
    if (stats) {
      gst_structure_get_uint64(stats, "num-lost", &lost);
      gst_structure_get_uint64(stats, "num-pushed", &pushed);
      gst_structure_free(stats);
    }
    return {lost, pushed};
  }
  RtpPackets rtp_packets() {
    std::lock_guard<std::mutex> lock(jitter_mutex);
    RtpPackets all = rtp_before;
    for (size_t i = 0; i < jitter_buffers.size(); ++i) {
      const auto [lost, pushed] = lost_and_pushed(jitter_buffers[i].get());
      const guint64 before = i < lost_before_first_frame.size() ? lost_before_first_frame[i] : 0;
      all.lost += lost > before ? lost - before : 0;
      all.received += pushed;
    }
    return all;
  }
  // The connection's first frame: the losses counted so far are of its join, not of the network.
  void start_counting_rtp_losses() {
    std::lock_guard<std::mutex> lock(jitter_mutex);
    lost_before_first_frame.assign(jitter_buffers.size(), 0);
    for (size_t i = 0; i < jitter_buffers.size(); ++i) lost_before_first_frame[i] = lost_and_pushed(jitter_buffers[i].get()).first;
  }
  // A new connection: its old jitter buffers' counts are kept, the elements let go.
  void forget_jitter_buffers() {
    const RtpPackets all = rtp_packets();
    std::lock_guard<std::mutex> lock(jitter_mutex);
    rtp_before = all;
    jitter_buffers.clear();
    lost_before_first_frame.clear();
  }
  std::unique_ptr<CudaStream> cuda_stream;  // copies of device frames (created on first use)
  uint64_t device_frames = 0;
  uint64_t host_frames = 0;
  bool fallback_logged = false;
  bool camera_clock_checked = false;  // the camera's clock compared with this machine's (once)
  bool interlace_logged = false;
  std::mutex picture_mutex;
  std::vector<PictureOrder> pictures_wanted;  // take_picture's, for the next frame
  std::atomic<bool> pictures_waiting{false};   // pictures_wanted is not empty: each frame looks without a lock
  // Pictures of frames already sent (ReaderOptions::picture_frames_back): what is kept of them, and the
  // picture thread that decodes them again (started with the first), off the stream's thread, whose
  // queue must not fill while a GOP is decoded. Its written pictures wait in pictures_done until the
  // stream's thread says them (the emitter is that thread's).
  std::unique_ptr<RecentFrames> recent;
  std::atomic<bool> recent_attached{false};  // to this connection's decoder
  // Clips of segments (ReaderOptions::clips), from what `recent` keeps; after it, so gone before it.
  std::unique_ptr<ClipRecorder> clips;
  std::atomic<bool> picture_fallback_logged{false};
  struct PictureJob {
    RecentFrames::Kept kept;
    PictureOrder order;
  };
  struct PictureDone {
    Envelope env;  // the pictured frame's
    PictureOrder order;
    Status written;
    double took_ms = 0;
  };
  std::mutex jobs_mutex;
  std::condition_variable jobs_changed;
  std::deque<PictureJob> picture_jobs;
  size_t jobs_running = 0;
  bool jobs_closed = false;
  std::vector<PictureDone> pictures_done;
  std::atomic<bool> pictures_done_waiting{false};
  std::thread picture_thread;
  bool said_earlier_key_frame = false;  // the picture thread's: said once a stream
  std::atomic<bool> nvdec_refusal_logged{false};  // on_autoplug_select_nvdec runs on streaming threads
  std::atomic<bool> video_pad{false};  // uridecodebin exposed a video stream (any connection)
  std::atomic<bool> hls{false};  // this connection reads an HLS playlist (hlsdemux appeared)
  std::atomic<bool> dash{false};  // or a DASH manifest (dashdemux)
  std::atomic<bool> avi{false};   // an AVI file (avidemux): one frame a chunk at the file's frame rate
  std::atomic<bool> gif{false};
  std::mutex gif_mutex;
  std::string gif_unreadable;  // why a GIF gives no frame (cut before its first ended), under gif_mutex
  std::string gif_unreadable_because() {
    std::lock_guard<std::mutex> lock(gif_mutex);
    return gif_unreadable;
  }   // a GIF (avdemux_gif, gif_timeline.h): not sought in
  uint64_t pipelines_built = 0;   // each connection's (run thread)
  std::atomic<bool> video_linked{false};  // this connection's first video pad is linked; others are not
  std::atomic<bool> extra_video_logged{false};  // a file's second video stream was said to be left out
  std::mutex pads_mutex;
  std::string other_pads;  // the caps of the streams that were not video ("audio/x-raw")
  std::string undecodable;  // streams no decoder here took ("video/x-h264, profile high-4:4:4")
  std::string decoder_load_failure;  // a decoder for one of them installed whose plug-in did not load
  bool rtsp_logged = false;  // on_source_setup: once per stream, not per reconnection
  bool tls_unchecked_logged = false;  // apply_tls_trust: once per stream
  // What decodes the current connection: a still-image decoder (jpegdec, pngdec) without a multipart
  // demuxer in front means a snapshot URL, one picture per request (run() polls it).
  std::atomic<bool> image_decoder{false}, multipart{false};
  bool snapshot_logged = false;
  // Polled as a snapshot URL: each poll's picture is kept (the poll's period is max_fps already).
  std::atomic<bool> snapshot_mode{false};
  // An untimed network source's clock (frame_pts_ns): steady time since its first frame, so that its
  // timestamps rise across reconnections and snapshot polls (each new pipeline starts at 0).
  std::atomic<int64_t> untimed_origin_ns{-1};
  // --resume by seeking: frames whose timestamp is at most this are dropped without a number (the
  // first one above it is frame skip_frames); -1: none. The seek lands before that frame, so at least
  // one is dropped; a first frame already above it means the seek went too far (a frame could be
  // lost): then every frame is dropped until run() seeks to the start and drops them by count.
  std::atomic<int64_t> drop_through_pts{-1};
  // After a Matroska file was read again past its damage (skip_damage in run()): frames at or before
  // the last one sent are dropped, whatever the seek gave first (-1: none).
  std::atomic<int64_t> drop_up_to_pts{-1};
  std::atomic<bool> dropped_by_pts{false};
  std::atomic<bool> seek_overshot{false};
  // A seek by time was made (a resume's, a from's, a lane restart's) and not gone back from: one that
  // lands where nothing decodes goes back to the start as one that went too far does.
  bool sought_by_time = false;
  bool seek_found_nothing = false;
  // streams[].to: a frame at or after it was reached (the end of the part classified).
  std::atomic<bool> part_ended{false};
  // ingest.max_fps: at most one frame per period of the stream's own timestamps, the first at or after
  // each multiple of the period (so a resumed run keeps the same frames as the first); 0: every frame.
  // Frames without a timestamp are all kept. The appsink thread samples; run() changes the period (a
  // reload, retune()) while it does: the four under sampling_mutex. Each change is a new generation,
  // which the frames kept under it carry (QueuedFrame::generation): the change is said before the first.
  std::mutex sampling_mutex;
  std::atomic<int64_t> sample_period_ns{0};
  int64_t last_kept_slot = -1;
  int64_t last_kept_pts = -1;
  uint32_t settings_generation = 0;
  std::atomic<uint64_t> sampled_out{0};  // frames left out by max_fps
  // ingest.keyframes_only: compressed frames that are not key frames are dropped on the way into the
  // decoder (never decoded); they, and those before a connection's first key frame, are counted in
  // decoder_input (decoder_input_gate.h). The decoder's gate reads it at each frame.
  std::atomic<bool> keyframes_only{false};
  DecoderInputCounters decoder_input;
  // Compressed frames a demuxer gave the H.264 or H.265 parser (timed; a raw stream's chunks are not
  // frames): it drops them all when it finds no parameter sets to start from, and the decoder gets none.
  std::atomic<uint64_t> parser_input{0};
  // A file's other video streams' decoders (decodebin decodes each, and only the first is classified):
  // their gates count here, apart (found 2026-12-07: a dash camera's rear track's frames were counted
  // with the front's, and its pictures, which go nowhere, said missing: "its decoder gave no picture for
  // 2 of its 60 frames"). Kept for the process's life: a gate's probes hold them.
  std::mutex other_decoders_mutex;
  std::deque<DecoderInputCounters> other_decoders_input;
  std::atomic<bool> decoder_gated{false};  // this connection's first video decoder has decoder_input
  // MPEG-TS: the frames after a key frame tsdemux dropped, from its pads to the decoder gate.
  std::shared_ptr<FramesAfterLostKeyFrames> lost_key_frames = std::make_shared<FramesAfterLostKeyFrames>();
  TimelineRestarts timeline_restarts;  // a file's parts joined end to end
  // An MP4's edit list: its video's frames are on the edit list's timeline (edit_list_timeline.h), this
  // far from its media times.
  std::shared_ptr<EditListOffset> edit_list = std::make_shared<EditListOffset>();
  bool keyframes_logged = false;  // once per stream, not per reconnection
  std::atomic<uint32_t> decoder_threads{0};  // as read back from the decoder (0: none set)
  // stop(): this stream alone ends (removed from a running job), with this reason.
  std::atomic<bool> stop_requested{false};
  std::mutex stop_mutex;
  std::string stop_reason;
  // reconfigure(): settings the next connection takes (under stop_mutex), and what changed.
  std::atomic<bool> settings_waiting{false};
  std::optional<StreamConfig> next_settings;
  std::string next_settings_what;
  // retune(): a reload's max_fps, keyframes_only and rtsp_latency_ms (the stream's own, and as resolved
  // with the job's; under stop_mutex), taken by run()'s thread while the connection goes on
  // (take_waiting_retune). Never waiting together with next_settings: whichever comes later takes the
  // other in.
  struct Retune {
    double own_max_fps;  // StreamConfig's: -1 takes the job's
    std::optional<bool> own_keyframes_only;
    std::optional<uint32_t> own_rtsp_latency_ms;
    std::optional<Orientation> own_turn;  // rotate/mirror (nullopt: none; a file's tag may then turn it)
    double max_fps;  // as the stream samples and buffers: with the job's it takes
    bool keyframes_only;
    uint32_t rtsp_latency_ms;
  };
  std::atomic<bool> retune_waiting{false};
  std::optional<Retune> next_retune;
  std::string next_retune_what;
  // The RTSP jitter buffer's latency (ms): as given to the connection's rtspsrc (on_source_setup), or
  // read back from the jitter buffer once a reload set it (take_waiting_retune); -1: no RTSP connection
  // yet (StreamReader::jitter_buffer_ms).
  std::atomic<int32_t> jitter_buffer_ms{-1};
  std::atomic<int64_t> opened_file_bytes{-1};  // a file's size when it was opened (its started event's)
  // The connection's RTSP handshake (steady-clock ns): since when its rtspsrc waits for the server's
  // answer to DESCRIBE (0: not waiting), and when the answer came (0: none yet). The stall clock starts
  // at the answer: an NVR that wakes a channel, or a camera on a slow link, may answer after more than
  // stall_timeout_s (found 2026-12-07: one that answered after 12 s was torn down at 10 s, at every
  // attempt, for ever).
  std::atomic<int64_t> rtsp_asked_ns{0};
  std::atomic<int64_t> rtsp_answered_ns{0};
  // set_ingest(): the job's ingest settings as a reload left them (under stop_mutex), taken by run()'s
  // thread (take_waiting_ingest), the only one that reads `ingest` once the stream runs.
  std::atomic<bool> ingest_waiting{false};
  std::optional<IngestConfig> next_ingest;

  Impl(const StreamConfig& s, uint32_t i, const IngestConfig& in, ReaderOptions o)
      : stream(s), index(i), ingest(in), options(o), queue(in.queue_capacity, in.queue_policy), next_seq(o.first_seq),
        sample_period_ns(period_of(s.max_fps >= 0 ? s.max_fps : in.max_fps)),
        keyframes_only(in.keyframes_only_for(s)) {
    turn_by_config = s.turn;  // a file's tag may still turn it (on_orientation_tag)
    upright_by_file = in.upright;
    orientation = s.turn.value_or(Orientation::kAsStored);
    if (o.picture_frames_back > 0) {
      const std::chrono::nanoseconds keep_before = o.clips ? o.clip_options.pre : std::chrono::nanoseconds(0);
      recent = std::make_unique<RecentFrames>(o.picture_frames_back, RecentFrames::kDefaultInFlight,
                                              RecentFrames::kDefaultMaxBytes, keep_before);
      if (o.clips) clips = std::make_unique<ClipRecorder>(s.id, recent.get(), o.clip_options);
    }
  }
  ~Impl() {
    close_picture_jobs(std::chrono::milliseconds(0));
    if (clips) clips->close(std::chrono::milliseconds(0), "the stream ended");
  }

  // A picture of a kept frame, for the picture thread.
  void submit_picture(RecentFrames::Kept kept, PictureOrder order) {
    constexpr size_t kMostQueued = 16;
    std::lock_guard<std::mutex> lock(jobs_mutex);
    if (jobs_closed) {
      VAPIPE_LOG_WARN("stream '{}': no picture for its '{}' segment: the stream has ended", order.stream_id, order.label);
      return;
    }
    if (picture_jobs.size() >= kMostQueued) {
      VAPIPE_LOG_WARN("stream '{}': no picture for its '{}' segment: {} pictures wait to be decoded already",
                      order.stream_id, order.label, kMostQueued);
      return;
    }
    picture_jobs.push_back(PictureJob{std::move(kept), std::move(order)});
    if (!picture_thread.joinable()) picture_thread = std::thread([this] { run_picture_jobs(); });
    jobs_changed.notify_all();
  }
  // A picture of the next frame sent.
  void want_next_frame_picture(PictureOrder order) {
    constexpr size_t kMostWaiting = 16;
    std::lock_guard<std::mutex> lock(picture_mutex);
    if (pictures_wanted.size() >= kMostWaiting) {
      VAPIPE_LOG_WARN("stream '{}': no picture for its '{}' segment: {} pictures wait for its next frame already",
                      order.stream_id, order.label, kMostWaiting);
      return;
    }
    order.frame_pts_ns = -1;
    pictures_wanted.push_back(std::move(order));
    pictures_waiting.store(true, std::memory_order_release);
  }
  void run_picture_jobs() {
    std::unique_lock<std::mutex> lock(jobs_mutex);
    while (true) {
      jobs_changed.wait(lock, [&] { return jobs_closed || !picture_jobs.empty(); });
      if (picture_jobs.empty()) return;  // closed, and nothing left
      // Orders that come together (the streams of a `source` group, labels that began at once) share
      // their key frame: a moment for them all to arrive, then one decode for them.
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      lock.lock();
      if (picture_jobs.empty()) continue;  // closed meanwhile
      std::vector<PictureJob> group;
      group.push_back(std::move(picture_jobs.front()));
      picture_jobs.pop_front();
      for (auto it = picture_jobs.begin(); it != picture_jobs.end();) {
        if (share_key_frame(it->kept, group.front().kept)) {
          group.push_back(std::move(*it));
          it = picture_jobs.erase(it);
        } else {
          ++it;
        }
      }
      jobs_running += group.size();
      lock.unlock();
      const auto started = std::chrono::steady_clock::now();
      std::vector<const RecentFrames::Kept*> kept;
      for (const PictureJob& job : group) kept.push_back(&job.kept);
      std::vector<Result<GstSample*>> decoded = decode_kept_frames(kept);
      const double decode_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
      size_t longest = 0;
      for (const PictureJob& job : group) longest = std::max(longest, job.kept.compressed.size());
      VAPIPE_LOG_DEBUG("stream '{}': {} frame(s) decoded again from {} compressed frames in {:.1f} ms ({} KB kept)",
                       stream.id, group.size(), longest, decode_ms, recent->compressed_bytes() / 1024);
      std::vector<PictureDone> done;
      for (size_t i = 0; i < group.size(); ++i) {
        PictureJob& job = group[i];
        if (!decoded[i].ok()) {
          // Not whole from its own key frame: a frame within an intra-refresh camera's refresh after its
          // recovery point, or an H.265 open GOP's leading B-frame. Again from the key frame before, if kept.
          if (auto earlier = recent->find(job.kept.sent.env.pts_ns, 1)) {
            decoded[i] = decode_kept_frame(*earlier);
            if (decoded[i].ok() && !said_earlier_key_frame) {
              said_earlier_key_frame = true;
              VAPIPE_LOG_INFO("stream '{}': a picture's frame was not whole from its own key frame, and is decoded "
                              "from the one before (an intra-refresh camera's recovery points, or an open GOP); "
                              "such pictures cost up to a GOP more of decoding", stream.id);
            }
          }
        }
        if (!decoded[i].ok()) {
          VAPIPE_LOG_INFO("stream '{}': its '{}' segment gets a picture of its next frame instead of frame {}: {}",
                          job.order.stream_id, job.order.label, job.kept.sent.env.seq, decoded[i].status().message());
          want_next_frame_picture(std::move(job.order));
          continue;
        }
        Status written = write_frame_picture(decoded[i].value(), job.kept.sent.turn, job.order.roi, job.order.path);
        gst_sample_unref(decoded[i].value());
        const double took_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
        done.push_back(PictureDone{job.kept.sent.env, std::move(job.order), std::move(written), took_ms});
      }
      release_freed_heap_memory();  // the decoder's frames and threads were these pictures' alone
      lock.lock();
      jobs_running -= group.size();
      if (!done.empty()) {
        for (PictureDone& d : done) pictures_done.push_back(std::move(d));
        pictures_done_waiting.store(true, std::memory_order_release);
      }
      jobs_changed.notify_all();
    }
  }
  // The stream ends: the pictures being decoded are waited for up to `wait` (those queued are decoded
  // too), then the thread stops; what it did not get to is said in the log.
  void close_picture_jobs(std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> lock(jobs_mutex);
    jobs_changed.wait_for(lock, wait, [&] { return picture_jobs.empty() && jobs_running == 0; });
    for (const PictureJob& job : picture_jobs) {
      VAPIPE_LOG_WARN("stream '{}': no picture for its '{}' segment: the stream ended before it was decoded",
                      job.order.stream_id, job.order.label);
    }
    picture_jobs.clear();
    jobs_closed = true;
    jobs_changed.notify_all();
    lock.unlock();
    if (picture_thread.joinable()) picture_thread.join();
  }
  // (Capped at about 292 years: the period of a max_fps under 1.1e-10 overflowed to "every frame".)
  static int64_t period_of(double max_fps) {
    return max_fps > 0 ? static_cast<int64_t>(std::min(1e9 / max_fps, 9.2e18)) : 0;
  }

  // ingest.max_fps: whether this frame is the first of its period (see sample_period_ns); `generation`:
  // the sampling's, and `turn` its orientation.
  bool keep_by_max_fps(int64_t pts, uint32_t* generation, Orientation* turn) {
    std::lock_guard<std::mutex> lock(sampling_mutex);
    *generation = settings_generation;
    *turn = orientation.load();
    if (pts < 0) return true;
    const int64_t period = sample_period_ns.load();
    if (period <= 0) {
      last_kept_pts = pts;  // where a max_fps a reload sets goes on from (take_waiting_retune)
      return true;
    }
    const int64_t slot = pts / period;
    // Timestamps that went back (a reconnection's new pipeline, a seek to the start) start over.
    if (slot <= last_kept_slot && pts >= last_kept_pts) {
      sampled_out.fetch_add(1);
      return false;
    }
    last_kept_slot = slot;
    last_kept_pts = pts;
    return true;
  }
  // The job's reloaded ingest settings (set_ingest()), on run()'s thread: whether some were waiting.
  bool take_waiting_ingest() {
    if (!ingest_waiting.load()) return false;
    std::lock_guard<std::mutex> lock(stop_mutex);
    ingest_waiting = false;
    if (!next_ingest) return false;
    const bool first_field_before = ingest.first_field;
    take_reloadable_ingest_settings(*next_ingest, ingest);
    next_ingest.reset();
    if (ingest.first_field != first_field_before) interlace_logged = false;  // an interlaced stream says it again
    std::lock_guard<std::mutex> turning(turn_mutex);
    if (ingest.upright != upright_by_file) {
      // The frames kept from now on are turned (or not) as the file's tag says; those kept are sent as
      // they were kept (QueuedFrame::turn).
      upright_by_file = ingest.upright;
      std::lock_guard<std::mutex> sampling(sampling_mutex);
      const Orientation before = orientation;
      orientation = settled_orientation();
      if (orientation != before) orientation_reloaded = ++settings_generation;
    }
    return true;
  }
  // A reload's settings (reconfigure()), taken between connections (no streaming thread runs): what
  // changed, or nullopt when none wait. What create() worked out of the old ones is worked out again,
  // and what was said once per stream is said again for the new source.
  std::optional<std::string> take_waiting_settings() {
    take_waiting_ingest();  // the defaults the new settings fall back on
    if (!settings_waiting.load()) return std::nullopt;
    std::lock_guard<std::mutex> lock(stop_mutex);
    settings_waiting = false;
    if (!next_settings) return std::nullopt;
    StreamConfig next = std::move(*next_settings);
    next_settings.reset();
    // Every field but the id, which the picture thread reads meanwhile (its log lines). A field added
    // to StreamConfig is taken here too (pipeline/config.h says so).
    stream.uri = std::move(next.uri);
    stream.parsed = std::move(next.parsed);
    stream.line = next.line;
    stream.max_fps = next.max_fps;
    stream.keyframes_only = next.keyframes_only;
    stream.rtsp_latency_ms = next.rtsp_latency_ms;
    stream.roi = next.roi;
    stream.turn = next.turn;
    stream.tls = std::move(next.tls);
    stream.recorded = std::move(next.recorded);
    stream.from_ns = next.from_ns;
    stream.to_ns = next.to_ns;
    stream.source = std::move(next.source);
    {
      std::lock_guard<std::mutex> sampling(sampling_mutex);
      sample_period_ns = period_of(stream.max_fps >= 0 ? stream.max_fps : ingest.max_fps);
      keep_from(-1);
    }
    keyframes_only = ingest.keyframes_only_for(stream);
    {
      std::lock_guard<std::mutex> turning(turn_mutex);
      turn_by_config = stream.turn;
      turn_by_file.reset();  // the new source's tag, if any, says its own
      orientation = settled_orientation();
    }
    {
      std::lock_guard<std::mutex> fit(fit_mutex);
      orientation_logged.clear();
    }
    rtsp_logged = false;
    jitter_buffer_ms = -1;  // the next RTSP connection's, if it is one
    tls_unchecked_logged = false;
    keyframes_logged = false;
    snapshot_logged = false;
    snapshot_mode = false;
    image_decoder = false;
    multipart = false;
    return std::exchange(next_settings_what, std::string());
  }
  // A reload's max_fps, keyframes_only and rtsp_latency_ms (retune()), on run()'s thread, while the
  // connection goes on: the new settings generation and what changed, or nullopt. The next frame kept
  // is the first at or after the new period's next multiple past the last one kept; the decoder's gate
  // takes keyframes_only at its next frame (decoder_input_gate.h: frames already in the decoder come
  // out as they went in); an RTSP camera's jitter buffer takes its new latency at once
  // (set_jitter_buffer), and the next connection is made with it.
  std::optional<std::pair<uint32_t, std::string>> take_waiting_retune() {
    if (!retune_waiting.load()) return std::nullopt;
    std::optional<Retune> taken;
    std::string what;
    {
      std::lock_guard<std::mutex> lock(stop_mutex);
      retune_waiting = false;
      taken = std::exchange(next_retune, std::nullopt);
      what = std::exchange(next_retune_what, std::string());
    }
    if (!taken) return std::nullopt;
    stream.max_fps = taken->own_max_fps;
    stream.keyframes_only = taken->own_keyframes_only;
    stream.rtsp_latency_ms = taken->own_rtsp_latency_ms;
    stream.turn = taken->own_turn;
    if (const int32_t wanted = static_cast<int32_t>(taken->rtsp_latency_ms);
        jitter_buffer_ms.load() >= 0 && wanted != jitter_buffer_ms.load()) {
      if (auto now = set_jitter_buffer(pipeline.get(), taken->rtsp_latency_ms)) jitter_buffer_ms = *now;
    }
    uint32_t generation = 0;
    {
      std::lock_guard<std::mutex> turning(turn_mutex);
      turn_by_config = taken->own_turn;
      std::lock_guard<std::mutex> sampling(sampling_mutex);
      sample_period_ns = period_of(taken->max_fps);
      keep_from(last_kept_pts);
      orientation = settled_orientation();  // frames kept from now on are turned so
      generation = ++settings_generation;
    }
    keyframes_only = taken->keyframes_only;
    return std::make_pair(generation, std::move(what));
  }
  // How the stream's frames are shown upright, from the config's turn and the file's (under turn_mutex):
  // streams[].rotate / mirror win; a file's tag turns them with ingest.orientation: upright.
  Orientation settled_orientation() const {
    if (turn_by_config) return *turn_by_config;
    return upright_by_file && turn_by_file ? *turn_by_file : Orientation::kAsStored;
  }
  // What keep_by_max_fps would know had it kept the frame at `pts` (resuming after it).
  void kept_up_to(int64_t pts) {
    std::lock_guard<std::mutex> lock(sampling_mutex);
    keep_from(pts);
  }
  void keep_from(int64_t pts) {  // kept_up_to, under sampling_mutex
    const int64_t period = sample_period_ns.load();
    last_kept_slot = period > 0 && pts >= 0 ? pts / period : -1;
    last_kept_pts = pts;
  }

  // A live job's file is read at its own pace, as a camera sends (pace()): its frames leave at the times
  // their timestamps say, from the first one kept. Only the appsink's streaming thread touches this
  // (a new pipeline's appsink starts it afresh).
  struct Pace {
    GstAppSink* sink = nullptr;  // whose frames it paces
    std::chrono::steady_clock::time_point anchor_at;
    int64_t anchor_pts = -1, last_pts = -1;
    std::chrono::steady_clock::time_point last_due;  // when the last frame was due
    int64_t last_interval_ns = 0;                     // between the last two frames' timestamps
  } pace_state;
  // A gap between two frames longer than this (a recording that paused: an NVR's motion-only file) is
  // not waited out; nor is falling this far behind caught up in a burst.
  static constexpr int64_t kPaceGapNs = 5'000'000'000;
  static constexpr auto kPaceBehind = std::chrono::seconds(1);
  // Waits until the frame at `pts` is due. False: the stream stops, or its pipeline is torn down (its
  // sink flushing) meanwhile.
  bool pace(GstAppSink* sink, int64_t pts) {
    Pace& p = pace_state;
    auto now = std::chrono::steady_clock::now();
    if (p.sink != sink || p.anchor_pts < 0 || pts < p.last_pts || pts - p.last_pts > kPaceGapNs) {
      // The first frame, a seek (back or far on), a gap, a looping file's next read: from here. A next
      // read keeps the rhythm: its first frame is due a frame's time after the last one (not at once).
      // (Known by its timestamps going back: a new pipeline's appsink may have the old one's address.)
      const bool goes_on = (p.sink != sink || pts < p.last_pts) && pts - p.last_pts <= kPaceGapNs &&
                           p.anchor_pts >= 0 && p.last_interval_ns > 0 && p.last_interval_ns <= kPaceGapNs;
      const auto from = goes_on ? std::max(now, p.last_due + std::chrono::nanoseconds(p.last_interval_ns)) : now;
      p = Pace{sink, from, pts, pts, from, p.last_interval_ns};
    } else {
      p.last_interval_ns = pts - p.last_pts;
      p.last_pts = pts;
    }
    auto due = p.anchor_at + std::chrono::nanoseconds(pts - p.anchor_pts);
    if (now - due > kPaceBehind) {  // decoding or the machine fell behind: on from here, no burst
      p.anchor_at = now;
      p.anchor_pts = pts;
      p.last_due = now;
      return true;
    }
    p.last_due = due;
    GstPad* pad = GST_BASE_SINK_PAD(GST_BASE_SINK(sink));
    while (now < due) {
      if (stop_requested.load() || GST_PAD_IS_FLUSHING(pad)) return false;
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(due - now, std::chrono::milliseconds(20)));
      now = std::chrono::steady_clock::now();
    }
    return true;
  }

  Envelope envelope() const {
    Envelope e;
    e.stream_id = stream.id;
    e.stream_index = index;
    return e;
  }

  // A frame's timestamp. An MJPEG camera over HTTP sends none (multipart/x-mixed-replace has no
  // clock), nor does a snapshot URL: their frames are stamped with their arrival at the appsink, as a
  // live source stamps its own, so that results have a pts_ms and max_fps can pick frames. A file
  // without timestamps (a raw .mjpeg) is timed by its frame rate before this (untimed_frames.h).
  int64_t frame_pts_ns(GstBuffer* buffer) {
    // A snapshot's decoder stamps each picture 0: its arrival is its time.
    const bool timed = buffer && GST_BUFFER_PTS_IS_VALID(buffer) && !snapshot_mode.load();
    // The clock is read for a network stream's first frame (its origin) and its untimed ones only.
    if (stream.parsed.kind != UriKind::kNetwork || (timed && untimed_origin_ns.load() >= 0)) {
      return timed ? static_cast<int64_t>(GST_BUFFER_PTS(buffer)) : -1;
    }
    const int64_t arrived = arrival_ns();
    return timed ? static_cast<int64_t>(GST_BUFFER_PTS(buffer)) : arrived;
  }
  // Now, from the stream's first frame (which sets the origin), on any connection of it.
  int64_t arrival_ns() {
    const int64_t now =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
    int64_t origin = -1;
    untimed_origin_ns.compare_exchange_strong(origin, now);
    return now - untimed_origin_ns.load();
  }
  // MPEG-TS: the frames tsdemux sends cut short by packets lost at their end (ts_tail_loss.h) are marked
  // DISCONT, so that the decoder gate starts a damaged stretch at them.
  // And the frames after a key frame tsdemux dropped whole are told to the decoder gate (lost_key_frames).
  struct TsWatch {
    TsTailLossWatch watch;
    uint64_t next_offset = GST_BUFFER_OFFSET_NONE;  // (pull mode: tsdemux also reads the file's end first)
    std::shared_ptr<FramesAfterLostKeyFrames> lost_key_frames;
  };
  static void watch_tsdemux(GstElement* demux, std::shared_ptr<FramesAfterLostKeyFrames> lost_key_frames) {
    auto* watch = new std::shared_ptr<TsWatch>(std::make_shared<TsWatch>());
    (*watch)->lost_key_frames = std::move(lost_key_frames);
    if (GstPad* sink = gst_element_get_static_pad(demux, "sink")) {
      gst_pad_add_probe(sink,
                        static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_PUSH |
                                                     GST_PAD_PROBE_TYPE_PULL),
                        &on_ts_bytes, new std::shared_ptr<TsWatch>(*watch), &delete_ts_watch);
      gst_object_unref(sink);
    }
    g_signal_connect_data(demux, "pad-added", G_CALLBACK(&on_tsdemux_pad), watch,
                          [](gpointer data, GClosure*) { delete static_cast<std::shared_ptr<TsWatch>*>(data); },
                          static_cast<GConnectFlags>(0));
  }
  static void delete_ts_watch(gpointer data) { delete static_cast<std::shared_ptr<TsWatch>*>(data); }
  static GstPadProbeReturn on_ts_bytes(GstPad*, GstPadProbeInfo* info, gpointer user) {
    GstBuffer* buffer = GST_PAD_PROBE_INFO_BUFFER(info);
    if (!buffer) return GST_PAD_PROBE_OK;
    TsWatch& w = **static_cast<std::shared_ptr<TsWatch>*>(user);
    const uint64_t offset = GST_BUFFER_OFFSET(buffer);
    const bool jumped = offset != GST_BUFFER_OFFSET_NONE && w.next_offset != GST_BUFFER_OFFSET_NONE && offset != w.next_offset;
    GstMapInfo map;
    if (!gst_buffer_map(buffer, &map, GST_MAP_READ)) return GST_PAD_PROBE_OK;
    w.watch.feed(map.data, map.size, jumped || GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_DISCONT));
    w.next_offset = offset != GST_BUFFER_OFFSET_NONE ? offset + map.size : GST_BUFFER_OFFSET_NONE;
    gst_buffer_unmap(buffer, &map);
    return GST_PAD_PROBE_OK;
  }
  struct TsVideoPad {
    std::shared_ptr<TsWatch> watch;
    uint16_t pid;
  };
  static void on_tsdemux_pad(GstElement*, GstPad* pad, gpointer user) {
    const std::optional<uint16_t> pid = TsTailLossWatch::pid_of_pad(GST_PAD_NAME(pad));
    if (!g_str_has_prefix(GST_PAD_NAME(pad), "video") || !pid) return;
    gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, &on_ts_frame,
                      new TsVideoPad{*static_cast<std::shared_ptr<TsWatch>*>(user), *pid},
                      [](gpointer data) { delete static_cast<TsVideoPad*>(data); });
  }
  static GstPadProbeReturn on_ts_frame(GstPad*, GstPadProbeInfo* info, gpointer user) {
    const auto& sent = *static_cast<TsVideoPad*>(user);
    GstBuffer* buffer = GST_PAD_PROBE_INFO_BUFFER(info);
    if (!buffer || !GST_BUFFER_PTS_IS_VALID(buffer)) return GST_PAD_PROBE_OK;
    const TsTailLossWatch::SentFrame frame = sent.watch->watch.sent(sent.pid, GST_BUFFER_PTS(buffer));
    if (frame.after_lost_key_frame && sent.watch->lost_key_frames) sent.watch->lost_key_frames->add(GST_BUFFER_PTS(buffer));
    if (!frame.cut_short) return GST_PAD_PROBE_OK;
    buffer = gst_buffer_make_writable(buffer);
    GST_BUFFER_FLAG_SET(buffer, GST_BUFFER_FLAG_DISCONT);
    GST_PAD_PROBE_INFO_DATA(info) = buffer;
    return GST_PAD_PROBE_OK;
  }

  // An MJPEG camera's parts (multipartdemux's output) are stamped with their arrival before they reach
  // the decoder, so that its pictures carry those times and the compressed frames kept for a segment's
  // picture and clip (RecentFrames) are found by them: the segment's best frame, and a clip, as for a
  // camera over RTSP (they were stamped only as they left the decoder, so neither could be found).
  static void on_multipart_pad(GstElement*, GstPad* pad, gpointer user) {
    gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER, &stamp_arrival, user, nullptr);
  }
  static GstPadProbeReturn stamp_arrival(GstPad*, GstPadProbeInfo* info, gpointer user) {
    GstBuffer* buffer = GST_PAD_PROBE_INFO_BUFFER(info);
    if (!buffer || GST_BUFFER_PTS_IS_VALID(buffer)) return GST_PAD_PROBE_OK;
    buffer = gst_buffer_make_writable(buffer);
    GST_BUFFER_PTS(buffer) = static_cast<GstClockTime>(static_cast<Impl*>(user)->arrival_ns());
    GST_PAD_PROBE_INFO_DATA(info) = buffer;
    return GST_PAD_PROBE_OK;
  }

  // appsink streaming thread: number the frame, then queue it (blocks in archive mode).
  static GstFlowReturn on_new_sample(GstAppSink* sink, gpointer user) {
    auto* self = static_cast<Impl*>(user);
    SamplePtr sample(gst_app_sink_pull_sample(sink));
    if (!sample) return GST_FLOW_EOS;
    self->decoded.fetch_add(1);
    if (self->seek_overshot.load()) return GST_FLOW_OK;  // until run() has sought back to the start
    if (const int64_t through = self->drop_through_pts.load(); through >= 0) {
      GstBuffer* b = gst_sample_get_buffer(sample.get());
      const bool timed = b && GST_BUFFER_PTS_IS_VALID(b);
      if (timed && static_cast<int64_t>(GST_BUFFER_PTS(b)) <= through) {
        self->dropped_by_pts = true;
        return GST_FLOW_OK;  // has its result from the earlier run
      }
      if (!self->dropped_by_pts.load() || !timed) {
        self->seek_overshot = true;
        return GST_FLOW_OK;
      }
      self->drop_through_pts = -1;  // the first frame after them: numbered skip_frames
    }
    if (const int64_t upto = self->drop_up_to_pts.load(); upto >= 0) {
      GstBuffer* b = gst_sample_get_buffer(sample.get());
      if (b && GST_BUFFER_PTS_IS_VALID(b) && static_cast<int64_t>(GST_BUFFER_PTS(b)) <= upto) return GST_FLOW_OK;
    }
    // streams[].from and to: frames outside the part classified are dropped without a number; the
    // first at or after `to` ends the stream (frames come in presentation order: none after it is in).
    if (GstBuffer* b = gst_sample_get_buffer(sample.get());
        !self->stream.whole_file() && b && GST_BUFFER_PTS_IS_VALID(b)) {
      const auto pts = static_cast<int64_t>(GST_BUFFER_PTS(b));
      if (self->stream.to_ns >= 0 && pts >= self->stream.to_ns) {
        if (!self->part_ended.exchange(true)) self->queue.push(QueuedFrame{});
        return GST_FLOW_EOS;
      }
      if (pts < self->stream.from_ns) return GST_FLOW_OK;
    }
    const int64_t pts = self->frame_pts_ns(gst_sample_get_buffer(sample.get()));
    uint32_t generation = 0;
    Orientation turn = Orientation::kAsStored;
    if (!self->keep_by_max_fps(self->snapshot_mode.load() ? -1 : pts, &generation, &turn)) return GST_FLOW_OK;
    // A live job's file, or test source that is not live itself: at its own pace (a camera's), not as
    // fast as it decodes, which a live queue would only drop (a test source's 300 frames: 259 dropped).
    // So is an HLS or DASH stream: hlsdemux and dashdemux push each segment as fast as it downloads (a
    // recording's 108 frames: 72 dropped; a live playlist's backlog of segments at its start).
    // So is a video file served over HTTP (43 of its 100 frames were kept).
    const bool own_pace = self->stream.parsed.kind == UriKind::kFile ||
                          (self->options.live && names_a_video_file_over_http(self->stream.uri)) ||
                          (self->stream.parsed.kind == UriKind::kTest && !self->stream.parsed.test.live) ||
                          self->hls.load(std::memory_order_relaxed) || self->dash.load(std::memory_order_relaxed);
    if (self->options.live && own_pace && pts >= 0 && !self->pace(sink, pts)) {
      return GST_FLOW_FLUSHING;
    }
    QueuedFrame f{std::move(sample), self->next_seq.fetch_add(1), wall_clock_ns(), pts, generation, turn};
    if (self->queue.push(std::move(f)) != PushResult::kClosed) return GST_FLOW_OK;
    // Not taken (the stream ends or reconnects): its number goes to the next frame, so no gap. The
    // appsink has one streaming thread, the only writer.
    self->next_seq.fetch_sub(1);
    return GST_FLOW_FLUSHING;
  }
  static void on_eos(GstAppSink*, gpointer user) {
    static_cast<Impl*>(user)->queue.push(QueuedFrame{});
  }
  // streams[].tls_ca_file, tls_verify and tls_fingerprint on the source that speaks TLS: rtspsrc and
  // souphttpsrc check the camera's certificate against a GTlsDatabase of the file, or of the one
  // certificate pinned (tls_pin.h), or not at all (no validation flags, ssl-strict off). Said once per
  // stream when nothing is checked.
  static void apply_tls_trust(GstElement* source, Impl& self) {
    const SourceTls& tls = self.stream.tls;
    if (!uri_uses_tls(self.stream.uri) || (tls.verify && tls.ca_file.empty() && tls.fingerprint.empty())) return;
    const std::string type = G_OBJECT_TYPE_NAME(source);
    if (type != "GstRTSPSrc" && type != "GstSoupHTTPSrc") return;
    if (!tls.fingerprint.empty()) {
      GTlsDatabase* pinned = pinned_tls_database(tls.fingerprint);
      g_object_set(source, "tls-database", pinned, nullptr);
      g_object_unref(pinned);
    } else if (!tls.verify && type == "GstRTSPSrc") {
      g_object_set(source, "tls-validation-flags", static_cast<GTlsCertificateFlags>(0), nullptr);
    } else if (!tls.verify) {
      g_object_set(source, "ssl-strict", FALSE, nullptr);
    } else {
      // Both take a GTlsDatabase. (souphttpsrc's ssl-ca-file is not enough behind uridecodebin: the
      // session it opens is shared and made without it, and the camera's certificate was refused.)
      GError* error = nullptr;
      GTlsDatabase* database = g_tls_file_database_new(tls.ca_file.c_str(), &error);
      if (database) {
        g_object_set(source, "tls-database", database, nullptr);
        g_object_unref(database);
      } else {
        VAPIPE_LOG_ERROR("stream '{}': tls_ca_file {}: {}", self.stream.id, tls.ca_file,
                         error ? error->message : "cannot be read");
        g_clear_error(&error);
      }
    }
    if (!tls.verify && !self.tls_unchecked_logged) {
      self.tls_unchecked_logged = true;
      VAPIPE_LOG_WARN("stream '{}': its TLS certificate is not checked (tls_verify: false): the connection is "
                      "encrypted, but anyone on the network path could pose as the camera",
                      self.stream.id);
    }
  }
  // uridecodebin made its source: an RTSP one (rtspsrc) gets ingest.rtsp_latency_ms as its jitter
  // buffer (GStreamer's own 2 s is how long a lost UDP packet can hold a camera's frames back), and
  // puts the camera's clock on each frame once the camera's RTCP sender reports say it (a
  // timestamp/x-ntp reference timestamp, kept through the decoder). What the source then has is logged
  // once per stream, read back from it.
  static void on_source_setup(GstElement*, GstElement* source, gpointer user) {
    auto* self = static_cast<Impl*>(user);
    GObjectClass* klass = G_OBJECT_GET_CLASS(source);
    apply_tls_trust(source, *self);
    if (std::string(G_OBJECT_TYPE_NAME(source)) != "GstRTSPSrc" || !g_object_class_find_property(klass, "latency")) {
      return;
    }
    self->rtsp_answered_ns = 0;
    self->rtsp_asked_ns = std::chrono::steady_clock::now().time_since_epoch().count();
    // rtspsrc's own wait for an answer (tcp-timeout, 20 s) past ours: a camera that answers DESCRIBE in
    // 25 s is waited for (kRtspAnswerWait), and one that never does is said in our words.
    if (g_object_class_find_property(klass, "tcp-timeout")) {
      const double wait_s = std::max(self->ingest.stall_timeout_s, static_cast<double>(kRtspAnswerWait.count())) + 5;
      g_object_set(source, "tcp-timeout", static_cast<guint64>(wait_s * 1e6), nullptr);
    }
    if (g_signal_lookup("on-sdp", G_OBJECT_TYPE(source)) != 0) {
      g_signal_connect(source, "on-sdp", G_CALLBACK(+[](GstElement*, gpointer, gpointer user) {
                         auto* impl = static_cast<Impl*>(user);
                         impl->rtsp_answered_ns = std::chrono::steady_clock::now().time_since_epoch().count();
                         impl->rtsp_asked_ns = 0;
                       }),
                       self);
    }
    const uint32_t latency_ms = self->ingest.rtsp_latency_ms_for(self->stream);
    g_object_set(source, "latency", static_cast<guint>(latency_ms), nullptr);
    self->jitter_buffer_ms = static_cast<int32_t>(latency_ms);
    if (g_object_class_find_property(klass, "add-reference-timestamp-meta")) {
      g_object_set(source, "add-reference-timestamp-meta", TRUE, nullptr);
    }
    if (self->rtsp_logged) return;
    self->rtsp_logged = true;
    guint latency = 0;
    g_object_get(source, "latency", &latency, nullptr);
    // rtspt:// and rtspu:// pick the transport in the URL (rtspsrc honours it over its `protocols`).
    const std::string& uri = self->stream.uri;
    std::string transport = uri.rfind("rtspt://", 0) == 0   ? "TCP only (rtspt://)"
                            : uri.rfind("rtspu://", 0) == 0 ? "UDP only (rtspu://)"
                            : uri.rfind("rtsph://", 0) == 0 ? "an HTTP tunnel (rtsph://)"
                                                            : "";
    if (transport.empty()) {
      guint protocols = 0;
      g_object_get(source, "protocols", &protocols, nullptr);
      GParamSpec* spec = g_object_class_find_property(klass, "protocols");
      if (spec && G_IS_PARAM_SPEC_FLAGS(spec)) {
        for (guint i = 0; i < G_PARAM_SPEC_FLAGS(spec)->flags_class->n_values; ++i) {
          const GFlagsValue& v = G_PARAM_SPEC_FLAGS(spec)->flags_class->values[i];
          if (v.value == 0 || (protocols & v.value) != v.value) continue;
          transport += (transport.empty() ? "" : ", ") + std::string(v.value_nick);
        }
      }
      transport += " in that order (rtspt:// for TCP only)";
    }
    VAPIPE_LOG_INFO("stream '{}': RTSP over {}, with a {} ms jitter buffer ({}rtsp_latency_ms)", self->stream.id,
                    transport, latency, self->stream.rtsp_latency_ms ? "the stream's " : "ingest.");
  }
  // A video decoder appeared inside uridecodebin (any codec, CPU or NVDEC: they all derive from
  // GstVideoDecoder). What reaches it passes a DecoderInputGate (decoder_input_gate.h: nothing before
  // the first key frame; with ingest.keyframes_only, key frames only). libav's decoders also keep the
  // pictures they could not decode whole (a lost packet) instead of sending them (`output-corrupt`,
  // on by default there).
  //
  // An MJPEG camera over HTTP (multipart/x-mixed-replace): multipartdemux says it has no more pads only
  // when told its stream is single, and decodebin shows none of its pads until then or until its
  // queue overflows (2 MB: a 320x240 camera at 10 frames/s gave no frame in 10 s).
  static void on_deep_element_added(GstBin*, GstBin*, GstElement* element, gpointer user) {
    if (GstElementFactory* factory = gst_element_get_factory(element)) {
      const std::string name = GST_OBJECT_NAME(factory);
      if (name == "multipartdemux") {
        g_object_set(element, "single-stream", TRUE, nullptr);
        static_cast<Impl*>(user)->multipart = true;
        g_signal_connect(element, "pad-added", G_CALLBACK(&on_multipart_pad), user);
        return;
      }
      if (name == "jpegdec" || name == "pngdec") static_cast<Impl*>(user)->image_decoder = true;
      if (name == "rtpjitterbuffer") {
        restamp_from_rtp_clock(element);  // frame times from the camera's RTP clock (rtp_timeline.h)
        auto* self = static_cast<Impl*>(user);
        std::lock_guard<std::mutex> lock(self->jitter_mutex);
        self->jitter_buffers.emplace_back(GST_ELEMENT(gst_object_ref(element)));
        return;
      }
      if (name == "tsdemux") {
        watch_tsdemux(element, static_cast<Impl*>(user)->lost_key_frames);
        return;
      }
      if (name == "h264parse" || name == "h265parse") {
        count_parser_input(element, &static_cast<Impl*>(user)->parser_input);
        return;
      }
      if (name == "mpegpsdemux") {
        start_ps_segments_at_first_frame(element);  // its first frames, which it leaves out (ps_segment_start.h)
        return;
      }
      // (a file's, or one served whole over HTTP: its times as a player shows them there too, where they
      // were its media times, from 66.667 ms with B-frames)
      if (name == "qtdemux" && (static_cast<Impl*>(user)->stream.parsed.kind == UriKind::kFile ||
                                names_a_video_file_over_http(static_cast<Impl*>(user)->stream.uri))) {
        put_on_edit_list_timeline(element, static_cast<Impl*>(user)->edit_list);  // as players show it
        return;
      }
      if (name == "avdemux_gif" && static_cast<Impl*>(user)->stream.parsed.kind == UriKind::kFile) {
        end_gif_at_its_last_frame(element, static_cast<Impl*>(user));  // it never ends by itself (gif_timeline.h)
        return;
      }
      if (name == "hlsdemux" || name == "hlsdemux2") static_cast<Impl*>(user)->hls = true;
      if (name == "avidemux") static_cast<Impl*>(user)->avi = true;
      if (name == "dashdemux" || name == "dashdemux2") static_cast<Impl*>(user)->dash = true;
    }
    if (!GST_IS_VIDEO_DECODER(element)) return;
    auto* self = static_cast<Impl*>(user);
    if (g_object_class_find_property(G_OBJECT_GET_CLASS(element), "output-corrupt")) {
      g_object_set(element, "output-corrupt", FALSE, nullptr);
    }
    if (self->options.decoder_threads > 0) self->decoder_threads = set_decoder_threads(element, self->options.decoder_threads);
    GstPad* sink = gst_element_get_static_pad(element, "sink");
    if (!sink) return;
    GstPad* src = gst_element_get_static_pad(element, "src");
    // A file's parts joined end to end are put on one timeline first (joined_timeline.h): a camera's
    // timestamps are the pipeline's own, and a live MPEG-TS stream's are joined by tsdemux.
    if (self->stream.parsed.kind == UriKind::kFile) join_restarted_timelines(sink, &self->timeline_restarts, self->stream.id);
    // An MP4's frames before its edit list's start, decoded for those after them, are not shown: their
    // pictures go, before the gate counts pictures and before anything takes their times (edit_list_timeline.h).
    if (self->stream.parsed.kind == UriKind::kFile && src) leave_out_hidden_pictures(src);
    // (An RTSP camera's RTP timestamps jitter: its damage is followed in stretches, see decoder_input_gate.h.)
    const bool rtp = self->stream.uri.rfind("rtsp", 0) == 0;
    DecoderInputCounters* counters = &self->decoder_input;
    if (self->decoder_gated.exchange(true)) {
      std::lock_guard<std::mutex> lock(self->other_decoders_mutex);
      counters = &self->other_decoders_input.emplace_back();
    }
    gate_decoder_input(sink, src, &self->keyframes_only, counters, self->stream.id, !rtp, self->lost_key_frames);
    // avdec_gif gives every picture pts 0: each takes the slot of a packet that passed the gate above; an
    // AVI's MPEG-4 Part 2 decoder falls a frame behind with B-frames: times kept rising (picture_slots.h).
    const std::string decoder_name = GST_OBJECT_NAME(gst_element_get_factory(element));
    if (decoder_name == "avdec_gif") time_pictures_by_their_slots(element);
    if (self->avi.load() && decoder_name == "avdec_mpeg4") keep_picture_times_rising(element);
    // A file's pictures without timestamps (a raw .mjpeg): one frame after the one before (untimed_frames.h).
    if (self->stream.parsed.kind == UriKind::kFile && src) time_untimed_pictures(src, self->stream.id);
    // Pictures of frames already sent: what reaches the decoder past the gate, of one decoder a
    // connection (a file's second video stream, left out, may have its own).
    if (self->recent && !self->recent_attached.exchange(true)) keep_decoder_input(sink, self->recent.get());
    gst_object_unref(sink);
    if (src) gst_object_unref(src);
    if (!self->keyframes_only || self->keyframes_logged) return;
    self->keyframes_logged = true;
    VAPIPE_LOG_INFO("stream '{}': key frames only (ingest.keyframes_only): {} decodes no other frame", self->stream.id,
                    GST_OBJECT_NAME(gst_element_get_factory(element)));
  }
  // Counts the timed buffers reaching `parser` (see parser_input).
  static void count_parser_input(GstElement* parser, std::atomic<uint64_t>* frames) {
    GstPad* sink = gst_element_get_static_pad(parser, "sink");
    if (!sink) return;
    gst_pad_add_probe(sink, GST_PAD_PROBE_TYPE_BUFFER, [](GstPad*, GstPadProbeInfo* info, gpointer user) {
      GstBuffer* buffer = GST_PAD_PROBE_INFO_BUFFER(info);
      if (buffer && (GST_BUFFER_PTS_IS_VALID(buffer) || GST_BUFFER_DTS_IS_VALID(buffer))) {
        static_cast<std::atomic<uint64_t>*>(user)->fetch_add(1);
      }
      return GST_PAD_PROBE_OK;
    }, frames, nullptr);
    gst_object_unref(sink);
  }
  // A GIF's frames, counted and timed from the file, so that its demuxer's stream ends after the last
  // (gif_timeline.h); a file that cannot be read so is an error now (it would never end).
  static void end_gif_at_its_last_frame(GstElement* demuxer, Impl* self) {
    self->gif = true;
    gchar* path = g_filename_from_uri(self->stream.parsed.uri.c_str(), nullptr, nullptr);
    Result<GifTimeline> timeline = path ? read_gif_timeline(path) : Result<GifTimeline>(InvalidArgument("not a local file"));
    if (path) g_free(path);
    if (timeline.ok() && !timeline->whole && timeline->no_frame_because.empty()) {  // (ended after its last whole frame)
      VAPIPE_LOG_WARN("stream '{}': its GIF is cut short (it ends before its trailer): its {} whole frame(s) are read",
                      self->stream.id, timeline->pts_ns.size());
    }
    if (timeline.ok()) {
      VAPIPE_LOG_DEBUG("stream '{}': a GIF of {} frame(s), {:.3f} s", self->stream.id, timeline->pts_ns.size(),
                       timeline->pts_ns.empty()
                           ? 0.0
                           : static_cast<double>(timeline->last_pts_ns() + timeline->duration_ns.back()) / 1e9);
      const std::string no_frame = timeline->no_frame_because;
      end_gif_after_its_last_frame(demuxer, std::make_shared<const GifTimeline>(std::move(timeline).value()));
      if (!no_frame.empty()) {  // (its reader, given a trailer, ends; the end is an error then)
        std::lock_guard<std::mutex> lock(self->gif_mutex);
        self->gif_unreadable = no_frame;
      }
      return;
    }
    const std::string why = "its GIF cannot be read: " + timeline.status().message();
    GError* err = g_error_new_literal(GST_STREAM_ERROR, GST_STREAM_ERROR_DEMUX, why.c_str());
    gst_element_post_message(demuxer, gst_message_new_error(GST_OBJECT(demuxer), err, why.c_str()));
    g_error_free(err);
  }
  // Uncompressed RGB in an AVI (a frame grabber's, a screen capture's): avidemux gives its frames a
  // pixel aspect ratio of -1/1, which videoconvert cannot take ("Internal data stream error. (element
  // avidemux)", found 2026-12-07; raw YUV passes another way). One that is not a ratio is square.
  static GstPadProbeReturn square_pixels_when_unknown(GstPad*, GstPadProbeInfo* info, gpointer) {
    GstEvent* event = GST_PAD_PROBE_INFO_EVENT(info);
    if (!event || GST_EVENT_TYPE(event) != GST_EVENT_CAPS) return GST_PAD_PROBE_OK;
    GstCaps* caps = nullptr;
    gst_event_parse_caps(event, &caps);
    if (!caps || gst_caps_get_size(caps) == 0) return GST_PAD_PROBE_OK;
    gint n = 1, d = 1;
    if (!gst_structure_get_fraction(gst_caps_get_structure(caps, 0), "pixel-aspect-ratio", &n, &d) || (n > 0 && d > 0)) {
      return GST_PAD_PROBE_OK;
    }
    GstCaps* square = gst_caps_copy(caps);
    gst_structure_set(gst_caps_get_structure(square, 0), "pixel-aspect-ratio", GST_TYPE_FRACTION, 1, 1, nullptr);
    GstEvent* replacement = gst_event_new_caps(square);
    gst_caps_unref(square);
    gst_event_set_seqnum(replacement, gst_event_get_seqnum(event));
    gst_event_unref(event);
    GST_PAD_PROBE_INFO_DATA(info) = replacement;
    return GST_PAD_PROBE_OK;
  }
  // A stream of the file that no decoder here takes (uridecodebin leaves it out, and its demuxer then
  // fails with "Internal data stream error"): kept, to say so.
  static void on_unknown_type(GstElement*, GstPad*, GstCaps* caps, gpointer user) {
    auto* self = static_cast<Impl*>(user);
    if (!caps || gst_caps_get_size(caps) == 0) return;
    const GstStructure* st = gst_caps_get_structure(caps, 0);
    std::string what = gst_structure_get_name(st);
    if (const gchar* profile = gst_structure_get_string(st, "profile")) what += ", profile " + std::string(profile);
    // An AVI codec avidemux maps to nothing (Ut Video, MagicYUV, JPEG 2000 as 'mjp2'): its FourCC.
    if (gint fourcc = 0; what == "video/x-avi-unknown" && gst_structure_get_int(st, "fourcc", &fourcc)) {
      std::string code;
      for (int shift = 0; shift < 32; shift += 8) {
        const char c = static_cast<char>((static_cast<guint32>(fourcc) >> shift) & 0xff);
        code += (c >= 0x20 && c < 0x7f) ? c : '?';
      }
      what += ", FourCC '" + code + "'";
    }
    // A decoder the registry has for it whose plug-in did not load: said instead of "install it".
    std::string load_failure = what.rfind("video/", 0) == 0 ? decoder_plugin_load_failure(caps) : "";
    std::lock_guard<std::mutex> lock(self->pads_mutex);
    if (self->undecodable.find(what) == std::string::npos) {
      self->undecodable += (self->undecodable.empty() ? "" : "; ") + what;
    }
    if (self->decoder_load_failure.empty()) self->decoder_load_failure = std::move(load_failure);
  }
  // Caps reaching videoscale: a host frame's size and format (known once decoded, and again at any
  // change, a camera switched to 4K). A frame larger than a pool slot is scaled down to fit (preprocess
  // resizes it to its input size anyway; an `roi` then sees fewer pixels); others pass as they are.
  static GstPadProbeReturn on_scale_caps(GstPad*, GstPadProbeInfo* info, gpointer user) {
    auto* self = static_cast<Impl*>(user);
    GstEvent* event = GST_PAD_PROBE_INFO_EVENT(info);
    if (!event || GST_EVENT_TYPE(event) != GST_EVENT_CAPS) return GST_PAD_PROBE_OK;
    GstCaps* caps = nullptr;
    gst_event_parse_caps(event, &caps);
    GstVideoInfo vinfo;
    if (!caps || !gst_video_info_from_caps(&vinfo, caps)) return GST_PAD_PROBE_OK;
    const GstVideoFormat f = GST_VIDEO_INFO_FORMAT(&vinfo);
    // What reaches the appsink is I420, NV12 or RGB (the filter's formats): the largest unless named.
    const PixelFormat format = f == GST_VIDEO_FORMAT_I420   ? PixelFormat::kI420
                               : f == GST_VIDEO_FORMAT_NV12 ? PixelFormat::kNV12
                                                            : PixelFormat::kRGB;
    const uint32_t width = GST_VIDEO_INFO_WIDTH(&vinfo), height = GST_VIDEO_INFO_HEIGHT(&vinfo);
    FrameSize fit = fit_frame_within(format, width, height, self->options.max_frame_bytes);
    if (fit.width == width && fit.height == height) fit = FrameSize{};  // fits: no size asked
    if (fit.width == self->fit_applied.width && fit.height == self->fit_applied.height) return GST_PAD_PROBE_OK;
    self->fit_applied = fit;
    GstCaps* filter = gst_caps_from_string(self->fit_filter_caps.c_str());
    if (fit.width > 0) {
      for (guint i = 0; i < gst_caps_get_size(filter); ++i) {
        gst_structure_set(gst_caps_get_structure(filter, i), "width", G_TYPE_INT, static_cast<gint>(fit.width),
                          "height", G_TYPE_INT, static_cast<gint>(fit.height), nullptr);
      }
      std::lock_guard<std::mutex> lock(self->fit_mutex);
      if (self->fit_logged.insert({width, height}).second) {
        const size_t bytes = packed_frame_bytes(format, width, height);
        VAPIPE_LOG_WARN("stream '{}': its {}x{} {} frames ({} bytes) are larger than a frame slot "
                        "(transport.frame_slot_bytes: {}): scaled to {}x{} before preprocessing (an roi sees "
                        "fewer pixels); set transport.frame_slot_bytes to {} or more to keep every pixel",
                        self->stream.id, width, height, pixel_format_name(format), bytes,
                        self->options.max_frame_bytes, fit.width, fit.height, bytes);
      }
    }
    g_object_set(self->fit_filter, "caps", filter, nullptr);  // before the event reaches videoscale
    gst_caps_unref(filter);
    return GST_PAD_PROBE_OK;
  }
  // The tags of a probed tag event (the event's own: not to be freed), or nullptr for any other event.
  static GstTagList* tags_of(GstPadProbeInfo* info) {
    GstEvent* event = GST_PAD_PROBE_INFO_EVENT(info);
    if (!event || GST_EVENT_TYPE(event) != GST_EVENT_TAG) return nullptr;
    GstTagList* tags = nullptr;
    gst_event_parse_tag(event, &tags);
    return tags;
  }
  // A file's image-orientation tag (MP4/MOV: its track's rotation, "rotate-90" for a phone's portrait
  // video; a JPEG's EXIF) on the decoded pad, before its first frame: with ingest.orientation upright,
  // the stream's frames carry it from then on and preprocessing reads them turned, the CPU's and the
  // CUDA kernel's alike (NVDEC frames too; nothing is copied to turn them). Said once per stream and
  // orientation.
  static GstPadProbeReturn on_orientation_tag(GstPad*, GstPadProbeInfo* info, gpointer user) {
    GstTagList* tags = tags_of(info);
    gchar* orientation = nullptr;
    if (!tags || !gst_tag_list_get_string(tags, GST_TAG_IMAGE_ORIENTATION, &orientation)) return GST_PAD_PROBE_OK;
    const std::string what = orientation;
    g_free(orientation);
    auto* self = static_cast<Impl*>(user);
    const std::optional<Orientation> turn = orientation_from_tag(what);
    std::optional<Orientation> by_config;  // streams[].rotate / mirror win
    bool upright = true;
    {
      std::lock_guard<std::mutex> turning(self->turn_mutex);
      self->turn_by_file = turn;
      self->orientation = self->settled_orientation();
      by_config = self->turn_by_config;
      upright = self->upright_by_file;
    }
    const bool set_by_config = by_config.has_value();
    std::lock_guard<std::mutex> lock(self->fit_mutex);
    if (what == self->orientation_logged || (self->orientation_logged.empty() && what == "rotate-0")) {
      return GST_PAD_PROBE_OK;
    }
    self->orientation_logged = what;
    if (set_by_config) {
      VAPIPE_LOG_INFO("stream '{}': its file says to show its frames turned ({}); turned as its rotate and mirror say "
                      "instead ({})",
                      self->stream.id, what, orientation_name(*by_config));
    } else if (!turn) {
      VAPIPE_LOG_WARN("stream '{}': its file gives an image orientation GStreamer does not define ('{}'): classified "
                      "as stored", self->stream.id, what);
    } else if (upright) {
      VAPIPE_LOG_INFO("stream '{}': frames read upright as its file says ({}; ingest.orientation: upright)",
                      self->stream.id, what);
    } else {
      VAPIPE_LOG_INFO("stream '{}': its file says to show its frames turned ({}); classified as stored "
                      "(ingest.orientation: as_stored)",
                      self->stream.id, what);
    }
    return GST_PAD_PROBE_OK;
  }
  // streams[].recorded_at: container: the file's creation date and time (MP4/MOV's mvhd, Matroska's
  // DateUTC, as GStreamer's datetime tag), before its first frame. A date without a time of day, or
  // before 1971 (an MP4's unset 1904), says nothing.
  static GstPadProbeReturn on_creation_date_tag(GstPad*, GstPadProbeInfo* info, gpointer user) {
    GstTagList* tags = tags_of(info);
    GstDateTime* when = nullptr;
    if (!tags || !gst_tag_list_get_date_time(tags, GST_TAG_DATE_TIME, &when)) return GST_PAD_PROBE_OK;
    if (gst_date_time_has_time(when) && gst_date_time_get_year(when) >= 1971) {
      if (GDateTime* g = gst_date_time_to_g_date_time(when)) {
        static_cast<Impl*>(user)->container_recorded_ns =
            static_cast<int64_t>(g_date_time_to_unix(g)) * 1000000000 + int64_t{g_date_time_get_microsecond(g)} * 1000;
        g_date_time_unref(g);
      }
    }
    gst_date_time_unref(when);
    return GST_PAD_PROBE_OK;
  }
  // Every stream of the source has its pad (or was found undecodable): without a video pad among them
  // nothing will ever reach the appsink, not even an end of stream. The demuxer usually fails with
  // "Internal data stream error" when its pads turn out unlinked, but a short file can be pushed whole
  // into decodebin's queues before that shows, and then nothing fails: the stream waited for ever
  // (seen with 10 video frames no decoder took, beside audio). This error ends it either way.
  static void on_no_more_pads(GstElement* src, gpointer user) {
    auto* self = static_cast<Impl*>(user);
    if (self->video_pad.load()) return;
    GError* err = g_error_new_literal(GST_STREAM_ERROR, GST_STREAM_ERROR_DECODE, kNoVideoPad);
    gst_element_post_message(src, gst_message_new_error(GST_OBJECT(src), err, "no video pad after no-more-pads"));
    g_error_free(err);
  }
  static void on_pad_added(GstElement*, GstPad* pad, gpointer user) {
    auto* self = static_cast<Impl*>(user);
    GstCaps* caps = gst_pad_get_current_caps(pad);
    if (!caps) caps = gst_pad_query_caps(pad, nullptr);
    const gchar* name = gst_structure_get_name(gst_caps_get_structure(caps, 0));
    const bool video = g_str_has_prefix(name, "video/");
    if (!video) {
      // Audio and other streams stay unlinked; demuxers carry on without them. Kept, to say what a
      // file without video held (its demuxer then fails with "Internal data stream error").
      std::lock_guard<std::mutex> lock(self->pads_mutex);
      if (self->other_pads.find(name) == std::string::npos) {
        self->other_pads += (self->other_pads.empty() ? "" : ", ") + std::string(name);
      }
      gst_caps_unref(caps);
      return;
    }
    if (self->video_linked.exchange(true)) {
      // A file with two video tracks (a camera's two views, a second angle): the first is classified.
      // Its pad stays unlinked (its demuxer carries on with the linked one) and its tags turn nothing.
      if (!self->extra_video_logged.exchange(true)) {
        VAPIPE_LOG_INFO("stream '{}': its file has more than one video stream: the first is classified, the others "
                        "are left out",
                        self->stream.id);
      }
      gst_caps_unref(caps);
      return;
    }
    gst_caps_unref(caps);
    self->video_pad = true;
    gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM, &square_pixels_when_unknown, nullptr, nullptr);
    gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM, &Impl::on_orientation_tag, self, nullptr);
    if (self->stream.recorded.from == RecordingStart::From::kContainer) {
      gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM, &Impl::on_creation_date_tag, self, nullptr);
    }
    // A decoder that can write CUDA memory (NVDEC) links straight to the caps filter: videoconvert
    // would force the frames through system memory. Any other goes through videoconvert.
    GstElement* target = self->convert_sink;
    if (self->caps_sink && pad_can_carry_cuda(pad)) {
      target = self->caps_sink;
    } else if (self->caps_sink) {
      // nvdec mode, but a software decoder took the stream: put videoconvert (and videoscale) in front
      // of the caps filter now (it was left unlinked so that a CUDA pad could take its only input).
      GstPad* filter_in = gst_element_get_static_pad(self->caps_sink, "sink");
      const bool free_input = !gst_pad_is_linked(filter_in);
      gst_object_unref(filter_in);
      if (free_input && !gst_element_link(self->scale_out, self->caps_sink)) {
        VAPIPE_LOG_WARN("stream '{}': could not link videoconvert to the appsink", self->stream.id);
      }
    }
    GstPad* sink = gst_element_get_static_pad(target, "sink");
    if (!gst_pad_is_linked(sink) && gst_pad_link(pad, sink) != GST_PAD_LINK_OK) {
      VAPIPE_LOG_WARN("stream '{}': could not link the decoded video pad", self->stream.id);
    }
    gst_object_unref(sink);
  }
  static bool pad_can_carry_cuda(GstPad* pad) {
    GstCaps* caps = gst_pad_query_caps(pad, nullptr);
    bool cuda = false;
    for (guint i = 0; caps && i < gst_caps_get_size(caps) && !cuda; ++i) {
      GstCapsFeatures* f = gst_caps_get_features(caps, i);
      cuda = f && gst_caps_features_contains(f, "memory:CUDAMemory");
    }
    if (caps) gst_caps_unref(caps);
    return cuda;
  }
  // decoder: nvdec. An nvcodec decoder of another GPU is skipped (it would decode on that GPU, in a
  // context of its own, and the lane's copy would cross GPUs); so is NVDEC for a stream it would not
  // decode into NV12 (10-bit, 4:2:2, 4:4:4): a CPU decoder takes it, and says so once.
  static gint on_autoplug_select_nvdec(GstElement*, GstPad*, GstCaps* caps, GstElementFactory* factory,
                                       gpointer user) {
    auto* self = static_cast<Impl*>(user);
    const int gpu = nvcodec_decoder_gpu(factory);
    if (gpu == kNotNvcodec) return 0 /* TRY */;
    if (gpu >= 0 && gpu != self->options.gpu) return 2 /* GST_AUTOPLUG_SELECT_SKIP */;
    std::string why;
    if (!nvdec_decodes_to_nv12(caps, &why)) {
      if (!self->nvdec_refusal_logged.exchange(true)) {
        VAPIPE_LOG_INFO("stream '{}': {} is decoded on the CPU (NVDEC would not give NV12, the format "
                        "preprocessing reads on the GPU)", self->stream.id, why);
      }
      return 2 /* SKIP */;
    }
    return 0 /* TRY */;
  }
  // decoder: cpu keeps decodebin away from hardware (NVDEC) decoders.
  static gint on_autoplug_select(GstElement*, GstPad*, GstCaps*, GstElementFactory* factory, gpointer) {
    const gchar* klass = gst_element_factory_get_metadata(factory, GST_ELEMENT_METADATA_KLASS);
    const gchar* name = gst_plugin_feature_get_name(GST_PLUGIN_FEATURE(factory));
    const bool hardware = (klass && strstr(klass, "Hardware")) || g_str_has_prefix(name, "nv");
    return hardware ? 2 /* GST_AUTOPLUG_SELECT_SKIP */ : 0 /* TRY */;
  }
};

namespace {

GstElement* make(const char* factory, const std::string& stream_id, Status* status) {
  GstElement* e = gst_element_factory_make(factory, nullptr);
  if (!e && status->ok()) {
    *status = FailedPrecondition("stream '" + stream_id + "': GStreamer element '" + factory +
                                 "' is missing (install the GStreamer plugins; see tools/setup.sh)");
  }
  return e;
}

}  // namespace

// Builds the stream's GStreamer pipeline into `impl` (not started): at creation, and again for each
// reconnection (a new connection may bring another codec, so nothing of the old one is reused).
static Status build_pipeline(StreamReader::Impl& impl) {
  Status status;
  // A pipeline of an earlier connection goes first (its streaming threads stop in set_state NULL).
  impl.forget_jitter_buffers();  // its counts first: a stopped jitter buffer may start them again
  if (impl.pipeline) set_state_watched(impl.pipeline.get(), GST_STATE_NULL, impl.options.watchdog);
  impl.pipeline.reset();
  impl.drop_up_to_pts = -1;  // a new pipeline's timestamps may start over (a loop, a reconnection)
  ++impl.pipelines_built;
  impl.appsink = impl.convert_sink = impl.caps_sink = impl.scale_out = impl.fit_filter = nullptr;
  impl.fit_applied = FrameSize{};
  impl.video_linked = false;
  impl.hls = false;  // said again by this connection's hlsdemux
  impl.dash = false;
  if (impl.recent) {
    impl.recent->new_decoder();  // a new connection's timestamps start again
    impl.recent->forget_sent();
  }
  impl.recent_attached = false;
  impl.decoder_gated = false;
  impl.pipeline.reset(gst_pipeline_new(("vapipe-" + impl.stream.id).c_str()));
  gst_object_ref_sink(impl.pipeline.get());
  bool nvdec = impl.options.decoder == Decoder::kNvdec && impl.stream.parsed.kind != UriKind::kTest;
  if (nvdec) {
    std::string why;
    if (!share_cuda_context(impl.pipeline.get(), impl.options.gpu, &why)) {
      static std::once_flag warned;
      std::call_once(warned, [&] { VAPIPE_LOG_WARN("NVDEC unavailable ({}): decoding on the CPU", why); });
      nvdec = impl.options.nvdec_shape_without_cuda;
    }
  }
  GstElement* bin = impl.pipeline.get();
  GstElement* caps_filter = make("capsfilter", impl.stream.id, &status);
  GstElement* sink = make("appsink", impl.stream.id, &status);
  // Host frames pass videoscale on their way to the appsink: in passthrough, unless a frame is larger
  // than a pool slot (on_scale_caps).
  GstElement* scale = make("videoscale", impl.stream.id, &status);
  GstCaps* caps = nullptr;

  if (impl.stream.parsed.kind == UriKind::kTest) {
    const TestSourceSpec& t = impl.stream.parsed.test;
    GstElement* src = make("videotestsrc", impl.stream.id, &status);
    if (!status.ok()) return status;
    gst_util_set_object_arg(G_OBJECT(src), "pattern", t.pattern.c_str());
    if (t.frames > 0) g_object_set(src, "num-buffers", static_cast<gint>(t.frames), nullptr);
    g_object_set(src, "is-live", t.live ? TRUE : FALSE, "horizontal-speed", t.speed, nullptr);
    if (!t.motion.empty()) gst_util_set_object_arg(G_OBJECT(src), "motion", t.motion.c_str());
    GstElement* fit = make("capsfilter", impl.stream.id, &status);
    if (!status.ok()) return status;
    caps = gst_caps_new_simple("video/x-raw", "format", G_TYPE_STRING, t.format.c_str(), "width", G_TYPE_INT,
                               static_cast<gint>(t.width), "height", G_TYPE_INT, static_cast<gint>(t.height),
                               "framerate", GST_TYPE_FRACTION, static_cast<gint>(t.fps), 1, nullptr);
    impl.fit_filter_caps = "video/x-raw,format=(string)" + t.format;
    GstCaps* fit_caps = gst_caps_from_string(impl.fit_filter_caps.c_str());
    g_object_set(fit, "caps", fit_caps, nullptr);
    gst_caps_unref(fit_caps);
    gst_bin_add_many(GST_BIN(bin), src, caps_filter, scale, fit, sink, nullptr);
    if (!gst_element_link_many(src, caps_filter, scale, fit, sink, nullptr)) {
      status = Internal("stream '" + impl.stream.id + "': cannot link the test source");
    }
    impl.fit_filter = fit;
  } else {
    GstElement* src = make("uridecodebin", impl.stream.id, &status);
    GstElement* convert = make("videoconvert", impl.stream.id, &status);
    if (!status.ok()) return status;
    g_object_set(src, "uri", impl.stream.uri.c_str(), nullptr);
    // nvdec: NV12 in CUDA memory first; host formats for what a software decoder produces instead.
    impl.fit_filter_caps = nvdec ? "video/x-raw(memory:CUDAMemory),format=(string)NV12;"
                                   "video/x-raw,format=(string){I420,NV12,RGB}"
                                 : "video/x-raw,format=(string){I420,NV12,RGB}";
    caps = gst_caps_from_string(impl.fit_filter_caps.c_str());
    gst_bin_add_many(GST_BIN(bin), src, convert, scale, caps_filter, sink, nullptr);
    // nvdec: the caps filter's input stays free until the decoder's pad shows whether it can carry
    // CUDA memory (on_pad_added links it, or videoconvert and videoscale in front of it).
    if (!gst_element_link(caps_filter, sink) || !gst_element_link(convert, scale) ||
        (!nvdec && !gst_element_link(scale, caps_filter))) {
      status = Internal("stream '" + impl.stream.id + "': cannot link videoconvert to the appsink");
    }
    impl.convert_sink = convert;
    impl.scale_out = scale;
    impl.fit_filter = caps_filter;
    if (nvdec) impl.caps_sink = caps_filter;
    g_signal_connect(src, "pad-added", G_CALLBACK(&StreamReader::Impl::on_pad_added), &impl);
    g_signal_connect(src, "source-setup", G_CALLBACK(&StreamReader::Impl::on_source_setup), &impl);
    g_signal_connect(src, "unknown-type", G_CALLBACK(&StreamReader::Impl::on_unknown_type), &impl);
    g_signal_connect(src, "no-more-pads", G_CALLBACK(&StreamReader::Impl::on_no_more_pads), &impl);
    g_signal_connect(src, "deep-element-added", G_CALLBACK(&StreamReader::Impl::on_deep_element_added), &impl);
    if (!nvdec) {
      g_signal_connect(src, "autoplug-select", G_CALLBACK(&StreamReader::Impl::on_autoplug_select), nullptr);
    } else {
      g_signal_connect(src, "autoplug-select", G_CALLBACK(&StreamReader::Impl::on_autoplug_select_nvdec), &impl);
    }
  }
  if (!status.ok()) {
    if (caps) gst_caps_unref(caps);
    return status;
  }
  g_object_set(caps_filter, "caps", caps, nullptr);
  gst_caps_unref(caps);
  if (impl.options.max_frame_bytes > 0) {
    GstPad* scale_in = gst_element_get_static_pad(scale, "sink");
    gst_pad_add_probe(scale_in, GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM, &StreamReader::Impl::on_scale_caps, &impl,
                      nullptr);
    gst_object_unref(scale_in);
  }

  impl.appsink = sink;
  // Our own bounded queue holds the frames; the appsink keeps one at most, and does not sync to the
  // clock (archive files run as fast as the pipeline allows; live sources pace themselves).
  g_object_set(sink, "max-buffers", 1u, "drop", FALSE, "sync", FALSE, "emit-signals", FALSE, nullptr);
  GstAppSinkCallbacks callbacks{};
  callbacks.eos = &StreamReader::Impl::on_eos;
  callbacks.new_sample = &StreamReader::Impl::on_new_sample;
  gst_app_sink_set_callbacks(GST_APP_SINK(sink), &callbacks, &impl, nullptr);
  return Status::Ok();
}

std::string unreadable_uri_scheme(const std::string& uri) {
  const std::string scheme = uri_scheme(uri);
  if (scheme.empty() || !ensure_gstreamer()) return "";
  if (gst_uri_protocol_is_supported(GST_URI_SRC, scheme.c_str())) return "";
  // The nearest scheme a camera or server is read by: one letter off, or two swapped ("rstp").
  auto near = [](const std::string& a, const std::string& b) {
    if (a.size() == b.size()) {
      size_t diff = 0, first = a.size();
      for (size_t i = 0; i < a.size(); ++i) {
        if (a[i] != b[i]) {
          ++diff;
          first = std::min(first, i);
        }
      }
      return diff == 1 || (diff == 2 && first + 1 < a.size() && a[first] == b[first + 1] && a[first + 1] == b[first]);
    }
    const std::string& longer = a.size() > b.size() ? a : b;
    const std::string& shorter = a.size() > b.size() ? b : a;
    if (longer.size() != shorter.size() + 1) return false;
    for (size_t i = 0; i < longer.size(); ++i) {  // one letter more or less
      if (longer.substr(0, i) + longer.substr(i + 1) == shorter) return true;
    }
    return false;
  };
  std::string meant;
  for (const char* known : {"rtsp", "rtsps", "rtspt", "http", "https", "file", "udp", "srt", "rtmp"}) {
    if (near(scheme, known) && gst_uri_protocol_is_supported(GST_URI_SRC, known)) {
      meant = known;
      break;
    }
  }
  return "no GStreamer source here reads " + scheme + ":// URIs" +
         (meant.empty() ? std::string(" (a typing error, or a plug-in that is not installed)")
                        : " (did you mean " + meant + "://?)");
}

Result<std::unique_ptr<StreamReader>> StreamReader::create(const StreamConfig& stream, uint32_t stream_index,
                                                           const IngestConfig& ingest, ReaderOptions options) {
  if (!ensure_gstreamer()) return FailedPrecondition("GStreamer is not available");
  if (stream.parsed.kind == UriKind::kNetwork) {
    if (std::string why = unreadable_uri_scheme(stream.uri); !why.empty()) {
      return InvalidArgument(why);
    }
  }
  if (options.decoder == Decoder::kNvdec && options.gpu < 0) {
    return InvalidArgument("stream '" + stream.id + "': NVDEC decoding needs a GPU index");
  }
  if (stream.parsed.kind == UriKind::kFile) {
    const std::string path = file_uri_path(stream.uri);
    const std::string shown = escape_invalid_utf8(path);  // a Latin-1 name, in a message that becomes JSON
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      if (std::filesystem::is_directory(path, ec)) {
        return NotFound("file " + shown + " is a folder: a `glob:` stream takes its files ('" + shown + "/*.mp4')");
      }
      return NotFound("file " + shown + (std::filesystem::exists(path, ec) ? " is not a regular file" : " does not exist"));
    }
    // GStreamer says only "Could not open file for reading": the reason, and who may not.
    if (::access(path.c_str(), R_OK) != 0 && errno == EACCES) {
      const passwd* user = ::getpwuid(::geteuid());
      return FailedPrecondition("file " + shown + " cannot be read: permission denied (this job runs as user '" +
                                (user && user->pw_name ? std::string(user->pw_name) : std::to_string(::geteuid())) +
                                "'; give it read access to the file and its folders)");
    }
    if (std::filesystem::file_size(path, ec) == 0 && !ec) {
      return DataLoss("file " + shown + " is empty (0 bytes)");  // GStreamer: "Stream contains no data"
    }
    // An MP4 without its index: qtdemux's error is then dropped by decodebin more often than not (it
    // filters its children's errors while it links them), and the stream would wait for ever.
    if (const ContainerEnd end = check_container_end(path); end.missing_index) {
      return DataLoss("file " + shown + ": " + describe_container_end(end));
    }
    if (const std::string recording = unreadable_recording(path); !recording.empty()) {
      return InvalidArgument("file " + shown + ": " + recording);
    }
  }
  auto impl = std::make_unique<Impl>(stream, stream_index, ingest, options);
  VAPIPE_RETURN_IF_ERROR(build_pipeline(*impl));
  return std::unique_ptr<StreamReader>(new StreamReader(std::move(impl)));
}

StreamReader::StreamReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StreamReader::~StreamReader() {
  if (impl_ && impl_->pipeline_left_behind) {
    (void)impl_.release();  // see pipeline_left_behind
    return;
  }
  if (impl_ && impl_->pipeline) {
    impl_->queue.close();  // unblock a streaming thread waiting for room
    set_state_watched(impl_->pipeline.get(), GST_STATE_NULL, impl_->options.watchdog);
  }
}

const std::string& StreamReader::stream_id() const { return impl_->stream.id; }
uint64_t StreamReader::decoded() const { return impl_->decoded.load(); }
uint64_t StreamReader::device_frames() const { return impl_->device_frames; }
uint64_t StreamReader::host_frames() const { return impl_->host_frames; }
uint64_t StreamReader::dropped() const { return impl_->queue.dropped(); }
uint64_t StreamReader::left_out() const {
  const DecoderInputCounters& decoder = impl_->decoder_input;
  return impl_->sampled_out.load() + decoder.not_key_frames.load() + decoder.before_key_frame.load() +
         decoder.before_recovery.load();
}
uint64_t StreamReader::continuity_errors() const { return impl_->continuity_errors.load(); }
uint64_t StreamReader::undecoded_frames() const { return impl_->decoder_input.undecoded.load(); }
RtpPackets StreamReader::rtp_packets() const { return impl_->rtp_packets(); }
uint32_t StreamReader::decoder_threads() const { return impl_->decoder_threads.load(); }

int32_t StreamReader::jitter_buffer_ms() const { return impl_->jitter_buffer_ms.load(); }

namespace {

// The field an interlaced frame took first (the one to read alone), or kWholeFrame for a progressive
// one. Interleaved caps make every frame interlaced, mixed ones say so frame by frame (an H.264 stream
// may switch, PAFF/MBAFF); the order is the caps' field-order, else the frame's TFF flag (which also
// names the one field a frame holds when it holds only one).
FieldRead first_field(const GstVideoInfo& vinfo, GstBuffer* buffer) {
  const GstVideoInterlaceMode mode = GST_VIDEO_INFO_INTERLACE_MODE(&vinfo);
  const bool interlaced = mode == GST_VIDEO_INTERLACE_MODE_INTERLEAVED ||
                          (mode == GST_VIDEO_INTERLACE_MODE_MIXED &&
                           GST_BUFFER_FLAG_IS_SET(buffer, GST_VIDEO_BUFFER_FLAG_INTERLACED));
  if (!interlaced) return FieldRead::kWholeFrame;
  const GstVideoFieldOrder order = GST_VIDEO_INFO_FIELD_ORDER(&vinfo);
  const bool top_first = order == GST_VIDEO_FIELD_ORDER_UNKNOWN ? GST_BUFFER_FLAG_IS_SET(buffer, GST_VIDEO_BUFFER_FLAG_TFF)
                                                                 : order == GST_VIDEO_FIELD_ORDER_TOP_FIELD_FIRST;
  return top_first ? FieldRead::kTopField : FieldRead::kBottomField;
}

// streams[].recorded_at: a file's frame shows the recording's start plus its own timestamp, the time
// of day it was taken, given as the camera's clock (camera_unix_ms); said once per stream.
void record_time_of_day(StreamReader::Impl& s, Envelope* env) {
  const RecordingStart& recorded = s.stream.recorded;
  if (recorded.from == RecordingStart::From::kNone || env->camera_ns >= 0) return;
  const bool container = recorded.from == RecordingStart::From::kContainer;
  const int64_t start = container ? s.container_recorded_ns.load() : recorded.unix_ns;
  if (start >= 0 && env->pts_ns >= 0) env->camera_ns = start + env->pts_ns;
  if (s.recorded_logged) return;
  s.recorded_logged = true;
  if (start < 0) {
    // A file name without the time was said when the config was read; a container says so only now.
    if (!container) return;
    VAPIPE_LOG_WARN("stream '{}': its file gives no creation date and time (streams[].recorded_at: container): its "
                    "results' camera_unix_ms stay null; give the time, or name:FORMAT for its file name",
                    s.stream.id);
    return;
  }
  const char* how = container ? "its container's creation date"
                    : recorded.from == RecordingStart::From::kFileName ? "its file name"
                                                                       : "streams[].recorded_at";
  VAPIPE_LOG_INFO("stream '{}': recorded from {} ({}): each result's camera_unix_ms is that plus its frame's time",
                  s.stream.id, local_time_text(start), how);
}

// Copies a decoded frame into `payload`, planes packed tightly; fills `info`. Frames in CUDA memory
// (NVDEC) and payloads in GPU memory (device pools) are copied by the GPU on `*stream` (made on first
// use), which is drained before returning: the decoder's buffer goes back to GStreamer right after.
Status copy_frame(GstSample* sample, const std::string& stream_id, Emitter& out, int gpu, size_t max_bytes,
                  std::unique_ptr<CudaStream>* stream, FrameInfo* info, Payload* payload, bool* from_device) {
  GstCaps* caps = gst_sample_get_caps(sample);
  GstBuffer* buffer = gst_sample_get_buffer(sample);
  GstVideoInfo vinfo;
  if (!caps || !buffer || !gst_video_info_from_caps(&vinfo, caps)) {
    return DataLoss("stream '" + stream_id + "': decoded sample without usable video caps");
  }
  FrameInfo fi;
  switch (GST_VIDEO_INFO_FORMAT(&vinfo)) {
    case GST_VIDEO_FORMAT_I420: fi.format = PixelFormat::kI420; break;
    case GST_VIDEO_FORMAT_NV12: fi.format = PixelFormat::kNV12; break;
    case GST_VIDEO_FORMAT_RGB: fi.format = PixelFormat::kRGB; break;
    default:
      return DataLoss("stream '" + stream_id + "': unexpected pixel format " +
                      gst_video_format_to_string(GST_VIDEO_INFO_FORMAT(&vinfo)));
  }
  fi.width = GST_VIDEO_INFO_WIDTH(&vinfo);
  fi.height = GST_VIDEO_INFO_HEIGHT(&vinfo);
  fi.matrix = vinfo.colorimetry.matrix == GST_VIDEO_COLOR_MATRIX_BT709 ? ColorMatrix::kBT709 : ColorMatrix::kBT601;
  fi.full_range = vinfo.colorimetry.range == GST_VIDEO_COLOR_RANGE_0_255;
  fi.field = first_field(vinfo, buffer);
  // Anamorphic video's pixels are shown wider or narrower than tall: preprocessing's letterbox and
  // center_crop keep the shape shown. A ratio past 10:1 either way is no camera's: taken as square.
  if (const gint n = GST_VIDEO_INFO_PAR_N(&vinfo), d = GST_VIDEO_INFO_PAR_D(&vinfo);
      n > 0 && d > 0 && int64_t{n} <= int64_t{d} * 10 && int64_t{d} <= int64_t{n} * 10) {
    const gint divisor = std::gcd(n, d);
    int64_t pn = n / divisor, pd = d / divisor;
    if (const int64_t larger = std::max(pn, pd); larger > 65535) {  // kept small for exact products
      const int64_t scale = (larger + 65534) / 65535;
      pn = std::max<int64_t>(1, pn / scale);
      pd = std::max<int64_t>(1, pd / scale);
    }
    fi.par_n = static_cast<uint32_t>(pn);
    fi.par_d = static_cast<uint32_t>(pd);
  }
  const uint32_t cw = (fi.width + 1) / 2, ch = (fi.height + 1) / 2;
  std::array<uint32_t, 3> rows{};
  uint32_t planes = 0;
  if (fi.format == PixelFormat::kRGB) {
    fi.stride = {fi.width * 3, 0, 0};
    rows = {fi.height, 0, 0};
    planes = 1;
  } else if (fi.format == PixelFormat::kI420) {
    fi.stride = {fi.width, cw, cw};
    rows = {fi.height, ch, ch};
    planes = 3;
  } else {
    fi.stride = {fi.width, cw * 2, 0};
    rows = {fi.height, ch, 0};
    planes = 2;
  }
  uint32_t offset = 0;
  for (uint32_t p = 0; p < planes; ++p) {
    fi.offset[p] = offset;
    offset += fi.stride[p] * rows[p];
  }
  const bool cuda_src = is_cuda_buffer(buffer);
  if (max_bytes > 0 && offset > max_bytes) {
    // Host frames were scaled to fit (on_scale_caps); frames in GPU memory are not.
    return InvalidArgument("stream '" + stream_id + "': its " + std::to_string(fi.width) + "x" +
                           std::to_string(fi.height) + " " + pixel_format_name(fi.format) + " frames (" +
                           std::to_string(offset) + " bytes) do not fit a frame slot (transport.frame_slot_bytes: " +
                           std::to_string(max_bytes) + ")" + (cuda_src ? "; NVDEC frames are not scaled to fit" : "") +
                           ": set transport.frame_slot_bytes to " + std::to_string(offset) + " or more");
  }
  VAPIPE_ASSIGN_OR_RETURN(*payload, out.allocate(offset));
  // Maps the frame (as device pointers with GST_MAP_CUDA, else host memory) and copies its planes,
  // by the GPU when either side is GPU memory.
  auto copy_planes = [&](bool map_cuda) -> Status {
    const bool gpu_copy = map_cuda || payload->on_device();
    if (gpu_copy && !*stream) {
      const int device = payload->on_device() ? payload->device() : gpu;
      VAPIPE_ASSIGN_OR_RETURN(*stream, CudaStream::create(device < 0 ? 0 : device));
    }
    GstVideoFrame frame;
    const auto flags = static_cast<GstMapFlags>(GST_MAP_READ | (map_cuda ? kGstMapCuda : 0));
    if (!gst_video_frame_map(&frame, &vinfo, buffer, flags)) {
      return DataLoss(std::string("cannot map a decoded frame") + (map_cuda ? " (CUDA memory)" : ""));
    }
    Status copied;
    for (uint32_t p = 0; p < planes && copied.ok(); ++p) {
      const auto* src = static_cast<const uint8_t*>(GST_VIDEO_FRAME_PLANE_DATA(&frame, p));
      const uint32_t src_stride = GST_VIDEO_FRAME_PLANE_STRIDE(&frame, p);
      auto* dst = reinterpret_cast<uint8_t*>(payload->data()) + fi.offset[p];
      if (gpu_copy) {
        copied = cuda_copy_2d(dst, fi.stride[p], src, src_stride, fi.stride[p], rows[p], (*stream)->get());
      } else if (src_stride == fi.stride[p]) {
        std::memcpy(dst, src, size_t{fi.stride[p]} * rows[p]);
      } else {
        for (uint32_t r = 0; r < rows[p]; ++r) std::memcpy(dst + size_t{r} * fi.stride[p], src + size_t{r} * src_stride, fi.stride[p]);
      }
    }
    if (gpu_copy) {
      if (copied.ok()) copied = payload->record_ready((*stream)->get());
      // Drain before unmapping, whatever failed (a plane copied before another failed is still queued):
      // the source is the decoder's (or GStreamer's) buffer, the destination a slot that may be reused.
      Status drained = cuda_stream_synchronize((*stream)->get());
      if (copied.ok()) copied = drained;
    }
    gst_video_frame_unmap(&frame);
    return copied;
  };
  if (cuda_src) sync_cuda_buffer(buffer);  // GStreamer 1.24 on: the decoder's writes may still be queued
  Status copied = copy_planes(cuda_src);
  *from_device = cuda_src;  // NVDEC decoded it, whichever way the copy then went
  if (!copied.ok() && cuda_src) {
    // The decoder's CUDA memory could not be read by our context (e.g. GStreamer made its own
    // context): let GStreamer download the frame instead. Slower, but no frame is lost.
    static std::once_flag warned;
    std::call_once(warned, [&] {
      VAPIPE_LOG_WARN("stream '{}': device-to-device copy of an NVDEC frame failed ({}); frames go through "
                      "host memory", stream_id, copied.message());
    });
    copied = copy_planes(false);
  }
  if (!copied.ok()) return DataLoss("stream '" + stream_id + "': copying a decoded frame: " + copied.message());
  *info = fi;
  return Status::Ok();
}

}  // namespace

void StreamReader::preroll() {
  // ASYNC for files (the streaming threads preroll), NO_PREROLL for live sources, FAILURE with the
  // reason on the bus: run() reads the bus, so nothing is lost by not looking here.
  set_state_watched(impl_->pipeline.get(), GST_STATE_PAUSED, impl_->options.watchdog);
}

bool StreamReader::wait_prerolled(std::chrono::milliseconds timeout) {
  GstState state = GST_STATE_VOID_PENDING;
  const GstStateChangeReturn r = gst_element_get_state(
      impl_->pipeline.get(), &state, nullptr, static_cast<GstClockTime>(timeout.count()) * GST_MSECOND);
  return (r == GST_STATE_CHANGE_SUCCESS || r == GST_STATE_CHANGE_NO_PREROLL) && state == GST_STATE_PAUSED;
}

namespace {

// The seek the three below share: a prerolled file sought to a keyframe at least 2 s before `point_ns`
// (not an ACCURATE seek: qtdemux then clipped the frame after the target in a file with B-frames, a frame
// lost; and its keyframe seek to just before a point landed on the keyframe 67 ms after it), then
// prerolled at the new place. The callers drop the frames before their point by timestamp
// (on_new_sample).
//
// A file whose duration its demuxer cannot tell is not sought in: tsdemux could not read its clock
// (PCR), and such an MPEG-TS file's timestamps may start over part way (files joined end to end,
// joined_timeline.h): a seek by time there landed in another part, or at the end (found 2026-12-06: a
// resume failed, "none of its 4 compressed frames could be decoded", and a `from` classified nothing).
//
// Nor is a GIF: libav's GIF reader, after a seek by time, gave its packets again from the file's start
// with times from the seek on, every picture twice (a `from: 3` of a 10 s GIF gave 40 frames of 70, at
// 3000, 3000, 3100, 3100, ...; a `from: 5` none; found 2026-12-07). It is decoded from its start.
enum class KeyframeSeek { kNotPrerolled, kNoDuration, kGif, kRefused, kSought };
const char* why_not_sought(KeyframeSeek sought) {
  switch (sought) {
    case KeyframeSeek::kNotPrerolled: return "not prerolled, so not sought";
    case KeyframeSeek::kNoDuration: return "its duration is not known (its clock cannot be read), so not sought";
    case KeyframeSeek::kGif: return "a GIF, which GStreamer's GIF reader does not seek in right, so not sought";
    default: return "the seek was refused";
  }
}
KeyframeSeek seek_to_keyframe_before(StreamReader::Impl& s, int64_t point_ns) {
  GstState state = GST_STATE_VOID_PENDING;
  if (gst_element_get_state(s.pipeline.get(), &state, nullptr, 30 * GST_SECOND) != GST_STATE_CHANGE_SUCCESS ||
      state != GST_STATE_PAUSED) {
    return KeyframeSeek::kNotPrerolled;
  }
  if (gint64 duration = -1;
      !gst_element_query_duration(s.pipeline.get(), GST_FORMAT_TIME, &duration) || duration <= 0) {
    return KeyframeSeek::kNoDuration;
  }
  if (s.gif.load()) return KeyframeSeek::kGif;
  if (!gst_element_seek_simple(
          s.pipeline.get(), GST_FORMAT_TIME,
          static_cast<GstSeekFlags>(GST_SEEK_FLAG_FLUSH | GST_SEEK_FLAG_KEY_UNIT | GST_SEEK_FLAG_SNAP_BEFORE),
          std::max<int64_t>(0, point_ns - 2 * static_cast<int64_t>(GST_SECOND)))) {
    return KeyframeSeek::kRefused;
  }
  s.sought_by_time = true;
  gst_element_get_state(s.pipeline.get(), nullptr, nullptr, 30 * GST_SECOND);  // prerolled at the new place
  return KeyframeSeek::kSought;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// --resume of a file: sought near the last frame that has a result instead of decoding every frame up
// to it; frames up to it are dropped by timestamp. Half a millisecond of slack covers the timestamp's
// round trip through pts_ms. If the pipeline will not preroll or seek, or went too far, frames are
// decoded from the start and dropped by count instead (emit_frame).
void seek_past_earlier_results(StreamReader::Impl& s) {
  const auto started = std::chrono::steady_clock::now();
  s.next_seq = s.options.skip_frames;
  const KeyframeSeek sought = seek_to_keyframe_before(s, s.options.resume_after_pts_ns);
  // Prerolled now: an MP4's edit list is known (its media times, in results of earlier versions, are
  // this much later than its frames' times), and no frame has reached the appsink yet.
  const int64_t after = s.options.resume_after_pts_ns - (s.options.resume_pts_media_times ? s.edit_list->video_ns.load() : 0);
  s.drop_through_pts = after + 500000;
  s.kept_up_to(after);  // ingest.max_fps goes on where the earlier run was
  if (sought != KeyframeSeek::kSought) {
    s.next_seq = 0;
    s.drop_through_pts = -1;
    s.kept_up_to(-1);
    VAPIPE_LOG_WARN("stream '{}': {}: decoding its first {} frames again", s.stream.id, why_not_sought(sought),
                    s.options.skip_frames);
    return;
  }
  VAPIPE_LOG_INFO("stream '{}': sought to a keyframe before {:.3f} s (its frame {}, the last with a result) in "
                  "{:.2f} s", s.stream.id, static_cast<double>(after) / 1e9,
                  s.options.skip_frames - 1, seconds_since(started));
}

// streams[].from: sought near it instead of decoding the file up to it; the frames before it are dropped
// by timestamp. If the pipeline will not preroll or seek, or went too far, the file is decoded from its
// start, dropping them.
void seek_to_part(StreamReader::Impl& s) {
  const auto started = std::chrono::steady_clock::now();
  s.drop_through_pts = s.stream.from_ns - 1;
  const KeyframeSeek sought = seek_to_keyframe_before(s, s.stream.from_ns);
  if (sought != KeyframeSeek::kSought) {
    s.drop_through_pts = -1;
    VAPIPE_LOG_WARN("stream '{}': {}: decoding it from its start up to its from ({})", s.stream.id,
                    why_not_sought(sought), media_time_text(s.stream.from_ns));
    return;
  }
  VAPIPE_LOG_INFO("stream '{}': sought to a keyframe before its from ({}) in {:.2f} s", s.stream.id,
                  media_time_text(s.stream.from_ns), seconds_since(started));
}

// A live job's file whose lane restarted while it was read: sought near the last frame the crashed
// instance sent, and frames up to it dropped by timestamp, so that no result repeats. Numbering goes on
// from first_seq. If the pipeline will not preroll or seek, or went too far, the file is decoded from its
// start, those frames still dropped by timestamp.
void seek_past_frames_sent(StreamReader::Impl& s) {
  const auto started = std::chrono::steady_clock::now();
  const int64_t sent = s.options.resume_after_sent_pts_ns;
  s.drop_through_pts = std::max<int64_t>(sent, s.stream.from_ns - 1);
  s.kept_up_to(sent);  // ingest.max_fps goes on where the crashed instance was
  const KeyframeSeek sought = seek_to_keyframe_before(s, sent);
  if (sought != KeyframeSeek::kSought) {
    VAPIPE_LOG_WARN("stream '{}': {}: decoding it from its start up to {}, its last frame sent before its lane "
                    "restarted", s.stream.id, why_not_sought(sought), media_time_text(sent));
    return;
  }
  VAPIPE_LOG_INFO("stream '{}': sought to a keyframe before {}, its last frame sent before its lane restarted, in "
                  "{:.2f} s", s.stream.id, media_time_text(sent), seconds_since(started));
}

}  // namespace

Status StreamReader::run(Emitter& out, const ShutdownFlags& flags) {
  Impl& s = *impl_;
  // (All four follow the stream's settings: a reload may change them, reconfigure().)
  std::string uri = redact_uri(s.stream.uri);
  // Live network streams are watched for stalls and reconnected; files and test sources are not.
  bool network_live = s.options.live && s.stream.parsed.kind == UriKind::kNetwork;
  bool reconnects = network_live && s.ingest.reconnect;
  auto stall_after = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(network_live ? s.ingest.stall_timeout_s : 0.0));
  GstBusPtr bus(gst_element_get_bus(s.pipeline.get()));
  uint64_t emitted = s.options.skip_frames;  // counted as emitted: their results are in the record
  // A file its lane's crashed instance was reading: on after its last frame sent (seek_past_frames_sent).
  const bool resumes_after_sent = !s.options.restart_reason.empty() && s.options.resume_after_sent_pts_ns >= 0 &&
                                  s.stream.parsed.kind == UriKind::kFile;
  bool started = false;
  uint32_t attempt = 0;          // reconnection attempts since the last frame
  // A camera gone for good logged the same warning at every attempt, 120 an hour at the default back-off
  // (found 2026-12-07): the first 10 attempts are each said, then one line every 10 minutes.
  std::chrono::steady_clock::time_point attempt_said{};
  bool awaiting_resume = false;  // reconnected; the next frame is the first of the new connection
  auto last_frame = std::chrono::steady_clock::now();  // or the last (re)start
  uint64_t decoded_at_connection = 0;                   // s.decoded when this connection began
  auto connected_at = std::chrono::steady_clock::now();
  auto bus_drained = std::chrono::steady_clock::now();  // drain_bus_up_to_error, once a second while frames come
  uint64_t continuity_said = 0;                          // s.continuity_errors when last said (live)
  auto continuity_said_at = std::chrono::steady_clock::now();
  uint64_t undecoded_said = 0;  // s.decoder_input.undecoded when last said (live)
  auto undecoded_said_at = std::chrono::steady_clock::now();
  RtpPackets rtp_said;  // s.rtp_packets() when last looked at (live: each minute)
  uint64_t damaged_said = 0;  // s.decoder_input.damaged_pictures then
  auto rtp_said_at = std::chrono::steady_clock::now();
  std::string resumed_note;  // said with the next resumption: the settings a reload changed
  // The job's reloaded reconnection settings (set_ingest()), taken as they come.
  // A reload's retune taken and not said yet (take_retune, below): its generation, what changed.
  std::optional<std::pair<uint32_t, std::string>> retune_unsaid;
  auto take_ingest_reload = [&] {
    if (!s.take_waiting_ingest()) return;
    reconnects = network_live && s.ingest.reconnect;
    stall_after = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(network_live ? s.ingest.stall_timeout_s : 0.0));
    if (const std::optional<uint32_t> generation = std::exchange(s.orientation_reloaded, std::nullopt)) {
      // A file whose tag turns its frames, and no rotate/mirror of its own: said as a retune is, before
      // the first frame kept with it (emit_frame).
      const std::string what = std::string("image orientation (ingest.orientation: ") +
                               (s.ingest.upright ? "upright" : "as_stored") + ")";
      VAPIPE_LOG_INFO("stream '{}': a reload changed ingest.orientation: its frames read {} from now on{}",
                      s.stream.id, orientation_name(s.orientation.load()),
                      s.ingest.upright ? " (as its file says)" : " (as stored)");
      retune_unsaid = retune_unsaid ? std::make_pair(retune_unsaid->first, retune_unsaid->second + ", " + what)
                                    : std::make_pair(*generation, what);
    }
  };
  // A reload's settings (reconfigure()), taken between connections (no streaming thread runs): what
  // changed (with a retune not said yet), or nullopt.
  auto take_reload_settings = [&]() -> std::optional<std::string> {
    take_ingest_reload();
    std::optional<std::string> what = s.take_waiting_settings();
    if (!what) return std::nullopt;
    if (retune_unsaid) *what = std::exchange(retune_unsaid, std::nullopt)->second + ", " + *what;
    uri = redact_uri(s.stream.uri);
    network_live = s.options.live && s.stream.parsed.kind == UriKind::kNetwork;
    reconnects = network_live && s.ingest.reconnect;
    stall_after = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(network_live ? s.ingest.stall_timeout_s : 0.0));
    resumed_note = ", with the settings a reload changed (" + *what + ")";
    return what;
  };
  // Said once a reload's settings are taken, before anything of the new ones (the fan-out gives each
  // stream of the group its own region): whoever shows the stream's frames learns how they are cut
  // and turned from its events alone.
  // How its frames are turned, as its started and changed events say: its own rotate/mirror; else ""
  // while a file's tag decides (ingest.orientation: upright), and as stored while none does.
  auto turn_said = [&]() -> std::string {
    return s.stream.turn ? orientation_name(*s.stream.turn) : s.ingest.upright ? "" : orientation_name(Orientation::kAsStored);
  };
  auto say_changed = [&](const std::string& what) -> Status {
    StreamEvent ev{uri, what, emitted, s.queue.dropped()};
    ev.roi = s.stream.roi;
    ev.turn = turn_said();
    return out.emit(Message::stream_event(MessageKind::kStreamChanged, s.envelope(), std::move(ev)));
  };
  // A reload's retune (retune()), taken while the connection goes on (or while the stream waits to
  // reconnect). Said before the first frame sampled with it (emit_frame), or at once when no frame
  // waits (`say_now`; an idle moment; the stream's end): frames kept before it go out first.
  auto say_retune = [&]() -> Status {
    if (!retune_unsaid) return Status::Ok();
    const std::string what = std::move(retune_unsaid->second);
    retune_unsaid.reset();
    return say_changed("a reload changed its " + what);
  };
  auto take_retune = [&](bool say_now) -> Status {
    const std::optional<Orientation> turn_before = s.stream.turn;
    std::optional<std::pair<uint32_t, std::string>> taken = s.take_waiting_retune();
    if (!taken) return Status::Ok();
    const int64_t period_ns = s.sample_period_ns.load();
    const std::string rate = period_ns > 0 ? fmt::format("at most {:.3g} frames/s", 1e9 / static_cast<double>(period_ns))
                                           : std::string("every frame");
    const int32_t jitter_ms = s.jitter_buffer_ms.load();
    std::string turned;  // said when the reload changed its rotate/mirror
    if (s.stream.turn != turn_before) {
      const Orientation now = s.orientation.load();
      turned = fmt::format(", its frames read {}", orientation_name(now));
      if (!s.stream.turn) turned += now == Orientation::kAsStored ? " (as stored)" : " (as its file says)";
    }
    VAPIPE_LOG_INFO("stream '{}': a reload changed its {}: taken without a new connection ({}{}{}{})", s.stream.id,
                    taken->second, rate, s.keyframes_only.load() ? ", key frames only" : "",
                    jitter_ms >= 0 ? fmt::format(", a {} ms jitter buffer", jitter_ms) : std::string(), turned);
    if (retune_unsaid) {  // two reloads before a frame: said as one, before the first frame of either
      taken->first = retune_unsaid->first;
      taken->second = retune_unsaid->second + ", " + taken->second;
    }
    retune_unsaid = std::move(taken);
    return say_now ? say_retune() : Status::Ok();
  };
  // The job stops (flags) or this stream alone (stop()); how its end event says so.
  auto stopping = [&] { return flags.stop.load() || s.stop_requested.load(); };
  auto stopped = [&] {
    std::lock_guard<std::mutex> lock(s.stop_mutex);
    return s.stop_requested.load() && !s.stop_reason.empty() ? s.stop_reason : std::string(kStoppedReason);
  };
  // A picture's event: of the frame in `frame_env` (the reader's numbering), for the stream that asked.
  auto picture_event = [&](const Envelope& frame_env, PictureOrder& order, const Status& written,
                           double took_ms) -> Message {
    StreamEvent ev{uri, written.ok() ? "" : written.message(), emitted, s.queue.dropped()};
    ev.picture = written.ok() ? order.path : "";
    ev.label = std::move(order.label);
    ev.segment_start_seq = order.segment_start_seq;
    if (written.ok()) {
      VAPIPE_LOG_DEBUG("stream '{}': picture of frame {} for its '{}' segment in {:.1f} ms: {}", order.stream_id,
                       frame_env.seq, ev.label, took_ms, order.path);
    } else {
      VAPIPE_LOG_WARN("stream '{}': no picture for its '{}' segment: {}", order.stream_id, ev.label, written.message());
    }
    Envelope env = frame_env;
    env.stream_id = order.stream_id;
    env.stream_index = order.stream_index;
    return Message::stream_event(MessageKind::kStreamPicture, env, std::move(ev));
  };
  // The clips written (or given up) since: a kStreamClip event each, for the stream that asked.
  auto say_clips_done = [&]() -> Status {
    if (!s.clips || !s.clips->has_done()) return Status::Ok();
    for (ClipDone& d : s.clips->take_done()) {
      StreamEvent ev{uri, d.message, emitted, s.queue.dropped()};
      ev.clip = d.written ? d.order.path : "";
      ev.label = d.order.label;
      ev.segment_start_seq = d.order.segment_start_seq;
      ev.duration_ns = d.written ? d.duration_ns : -1;
      ev.attempt = d.part;
      ev.continues = d.written && d.continues;
      if (d.written) ev.turn = orientation_name(d.order.turn);
      if (d.written) {
        VAPIPE_LOG_DEBUG("stream '{}': clip of its '{}' segment, {} frames, {:.1f} s{}: {}", d.order.stream_id,
                         d.order.label, d.frames, static_cast<double>(d.duration_ns) / 1e9,
                         d.message.empty() ? "" : " (" + d.message + ")", d.order.path);
      } else {
        VAPIPE_LOG_WARN("stream '{}': no clip of its '{}' segment: {}", d.order.stream_id, d.order.label, d.message);
      }
      Envelope env;
      env.stream_id = d.order.stream_id;
      env.stream_index = d.order.stream_index;
      env.pts_ns = d.start_pts_ns;
      VAPIPE_RETURN_IF_ERROR(out.emit(Message::stream_event(MessageKind::kStreamClip, env, std::move(ev))));
    }
    return Status::Ok();
  };
  // The pictures of kept frames that the picture thread has written since, in the order written.
  auto say_pictures_done = [&]() -> Status {
    if (!s.pictures_done_waiting.load(std::memory_order_acquire)) return say_clips_done();
    std::vector<StreamReader::Impl::PictureDone> done;
    {
      std::lock_guard<std::mutex> lock(s.jobs_mutex);
      done.swap(s.pictures_done);
      s.pictures_done_waiting = false;
    }
    for (auto& d : done) VAPIPE_RETURN_IF_ERROR(out.emit(picture_event(d.env, d.order, d.written, d.took_ms)));
    return say_clips_done();
  };

  // The last two frames sent's timestamps (skip_damage), and where reading went on after damage.
  int64_t last_sent_pts = -1, sent_pts_before = -1;
  bool awaiting_after_skip = false;
  std::string damage_said;  // for the end's warning
  std::string first_stop;   // where the demuxer first stopped early (skip_damage), for an end with nothing after
  uint64_t avi_missing = 0, avi_gaps = 0;  // an AVI's frames missing between those sent, and where
  int64_t avi_step = -1;                   // its frames' spacing
  int64_t avi_rate_step = -1;              // as its caps' frame rate says (-1: none said)
  // The caps it was read from (held: a pointer compared alone could be a new caps at a freed one's place).
  std::unique_ptr<GstCaps, void (*)(GstCaps*)> avi_rate_caps{nullptr, [](GstCaps* c) { gst_caps_unref(c); }};
  std::pair<int64_t, int64_t> avi_first_gap{-1, -1};
  auto finish = [&](MessageKind kind, std::string message) -> Status {
    s.queue.close();
    // The warnings left on the bus, before the pipeline's stop flushes it (a file read without a pause
    // never went through them). Not pop_bus_error: an error's text is not wanted here, and for a camera
    // it costs a connection to its host.
    if (bus) drain_bus_up_to_error(bus.get(), &s.continuity_errors);
    // Pictures of kept frames being decoded are said before the end (a stream removed, a job stopped).
    s.close_picture_jobs(std::chrono::milliseconds(flags.abort.load() ? 0 : 5000));
    if (s.clips) s.clips->close(std::chrono::milliseconds(flags.abort.load() ? 0 : 5000), "the stream ended");
    if (Status said = say_pictures_done(); !said.ok()) {
      VAPIPE_LOG_WARN("stream '{}': pictures not said before its end: {}", s.stream.id, said.message());
    }
    {
      std::lock_guard<std::mutex> lock(s.picture_mutex);
      for (const PictureOrder& order : s.pictures_wanted) {
        VAPIPE_LOG_WARN("stream '{}': no picture for its '{}' segment: the stream ended before its next frame",
                        order.stream_id, order.label);
      }
      s.pictures_wanted.clear();
      s.pictures_waiting = false;
    }
    if (s.stream.parsed.kind == UriKind::kFile && stopping() && s.pipeline) {
      // A stop while the file's read has not returned (a share that does not answer): the stream ends
      // now at its last frame sent, not when the read returns (--resume goes on from there).
      constexpr auto kFileStopWait = std::chrono::seconds(2);
      if (!stop_pipeline_within(s.pipeline.release(), kFileStopWait)) {
        s.pipeline_left_behind = true;
        VAPIPE_LOG_WARN("stream '{}' ({}): its file's read has not returned {} s after the stop (a share that does "
                        "not answer?): the stream ends at frame {} without it", s.stream.id, uri,
                        kFileStopWait.count(), emitted);
      }
    } else {
      set_state_watched(s.pipeline.get(), GST_STATE_NULL, s.options.watchdog);
    }
    // A reload's retune that no frame came under is said before the end all the same.
    if (Status said = say_retune(); !said.ok()) {
      VAPIPE_LOG_WARN("stream '{}': a reload's change not said before its end: {}", s.stream.id, said.message());
    }
    StreamEvent ev{uri, std::move(message), emitted, s.queue.dropped()};
    if (s.stream.parsed.kind == UriKind::kFile && kind == MessageKind::kStreamEnd && s.stream.from_ns > 0 &&
        s.next_seq.load() == 0 && !s.part_ended.load() && !stopping()) {
      ev.warning = "nothing of it was classified: its streams[].from (" + media_time_text(s.stream.from_ns) +
                   ") is at or past its end";
      VAPIPE_LOG_WARN("stream '{}' ({}): {}", s.stream.id, uri, ev.warning);
    } else if (s.stream.parsed.kind == UriKind::kFile && !stopping() && !s.part_ended.load()) {
      // A file whose container ends early (a recording that did not finish, a copy cut short) ends in
      // an ordinary end of stream or in the demuxer's error: what the container says is the cause.
      ContainerEnd end = check_container_end(file_uri_path(s.stream.uri));
      // Emptied or cut while it was read (`: > file`, an export that starts by emptying its file): what
      // is left of it says nothing of what it was (found 2026-12-07: 270 of 1500 frames, "done", no word).
      std::error_code size_error;
      const auto now_bytes = std::filesystem::file_size(file_uri_path(s.stream.uri), size_error);
      const int64_t opened_bytes = s.opened_file_bytes.load();
      std::string shrank;
      if (end.cut_short.empty() && opened_bytes > 0 && !size_error && static_cast<int64_t>(now_bytes) < opened_bytes) {
        shrank = "the file was cut while it was read (" + std::to_string(opened_bytes) + " bytes when it was opened, " +
                 std::to_string(now_bytes) + " now: emptied or rewritten by another program?): its results end where "
                 "its reading did";
      }
      if (!shrank.empty()) {
        if (kind == MessageKind::kStreamEnd) {
          ev.warning = shrank;
          VAPIPE_LOG_WARN("stream '{}' ({}): {}", s.stream.id, uri, ev.warning);
        } else {
          ev.message += " (" + shrank + ")";
        }
      } else if (!end.cut_short.empty()) {
        end.missing_index = false;  // it had one when it opened
        if (kind == MessageKind::kStreamEnd) {
          ev.warning = describe_container_end(end);
          VAPIPE_LOG_WARN("stream '{}' ({}): {}", s.stream.id, uri, ev.warning);
        } else {
          ev.message += " (" + describe_container_end(end) + ")";
        }
      }
      // Frames its decoder took and gave no picture for (a damaged stretch of the file: libav drops a
      // frame it cannot decode whole, as output-corrupt is off) were lost without a word before
      // 2026-12-06, their neighbours' seq numbers contiguous.
      if (kind == MessageKind::kStreamEnd) {
        std::string lost = frames_without_pictures(s.decoder_input);
        // An MPEG-TS file's lost or damaged packets: the frames in them never reached the decoder to
        // be counted above.
        if (const uint64_t gaps = s.continuity_errors.load(); gaps > 0) {
          lost += std::string(lost.empty() ? "" : "; ") + "its MPEG-TS video has " + std::to_string(gaps) +
                  (gaps == 1 ? " gap" : " gaps") + " where packets were lost or damaged (continuity errors): "
                  "frames there are missing";
        }
        if (std::string restarts = timeline_restarts_warning(s.timeline_restarts); !restarts.empty()) {
          lost += (lost.empty() ? "" : "; ") + restarts;
        }
        if (avi_missing > 0) {
          lost += std::string(lost.empty() ? "" : "; ") + "its AVI video has " + std::to_string(avi_missing) +
                  (avi_missing == 1 ? " frame" : " frames") + " missing in " + std::to_string(avi_gaps) +
                  (avi_gaps == 1 ? " place" : " places") + " (the first between " + media_time_text(avi_first_gap.first) +
                  " and " + media_time_text(avi_first_gap.second) + "): damaged data in the file, or frames its writer "
                  "dropped; they have no results";
        }
        if (damage_said.empty() && !first_stop.empty()) {
          // Read again past it, and nothing came: a file without an index (a live recording's), or damage
          // to its end; or a header whose duration is more than the file holds.
          lost += std::string(lost.empty() ? "" : "; ") + "the file is damaged, or its header's duration is wrong: " +
                  first_stop + ", and nothing after it could be read";
        }
        if (!damage_said.empty()) {
          lost += std::string(lost.empty() ? "" : "; ") +
                  "the file is damaged (its demuxer stopped short of its end, at data that is not what its structure "
                  "says; it was read again from the next key frame after): " + damage_said;
        }
        if (!lost.empty()) {
          VAPIPE_LOG_WARN("stream '{}' ({}): {}", s.stream.id, uri, lost);
          ev.warning = ev.warning.empty() ? lost : ev.warning + "; " + lost;
        }
      }
    }
    // Also at a part's end or a stop: `vapipe segments` reads what it can find again by it.
    if (kind == MessageKind::kStreamEnd && s.timeline_restarts.count.load() > 0) {
      ev.timeline_restarts = static_cast<uint32_t>(s.timeline_restarts.count.load());
      ev.timeline_restart_ns = s.timeline_restarts.first_joined_at_ns.load();
    }
    if (kind == MessageKind::kStreamError) {
      VAPIPE_LOG_ERROR("stream '{}' ({}): {}", s.stream.id, uri, ev.message);
    } else {
      std::string left_out;
      if (s.keyframes_only.load() || s.decoder_input.not_key_frames.load() > 0) {
        left_out += ", " + std::to_string(s.decoder_input.not_key_frames.load()) + " not decoded: not key frames";
      }
      if (const uint64_t early = s.decoder_input.before_key_frame.load(); early > 0) {
        left_out += ", " + std::to_string(early) + " not decoded: before a key frame";
      }
      if (const uint64_t partial = s.decoder_input.before_recovery.load(); partial > 0) {
        left_out += ", " + std::to_string(partial) + " decoded and left out: not whole yet after a recovery point";
      }
      // (A stop or a part's end leaves frames in the decoder: only an end of stream drains it.)
      if (const uint64_t expected = s.decoder_input.expected_pictures.load(), pictures = s.decoder_input.pictures.load();
          expected > pictures && !s.decoder_input.field_coded.load() && kind == MessageKind::kStreamEnd &&
          !stopping() && !s.part_ended.load()) {
        left_out += ", " + std::to_string(expected - pictures) + " of the " + std::to_string(expected) +
                    " passed to its decoder gave no picture";
      }
      if (s.sample_period_ns.load() > 0 || s.sampled_out.load() > 0) {
        left_out += ", " + std::to_string(s.sampled_out.load()) + " more decoded and left out by max_fps";
      }
      if (const uint64_t damaged = s.decoder_input.damaged_pictures.load(); damaged > 0) {
        left_out += ", " + std::to_string(damaged) + " decoded from damaged data (damaged: true)";
      }
      VAPIPE_LOG_INFO("stream '{}': {} after {} frames ({} dropped{})", s.stream.id, ev.message, emitted, ev.dropped,
                      left_out);
    }
    // A live job's file read to its end: a restart of its lane later ends it again instead of reading it
    // again from its start (its results would repeat). Marked before its end goes out.
    if (kind == MessageKind::kStreamEnd && s.options.live && s.options.seq_reservations &&
        s.stream.parsed.kind == UriKind::kFile && !stopping()) {
      if (Status st = s.options.seq_reservations->mark_ended(s.stream.id); !st.ok()) {
        VAPIPE_LOG_WARN("stream '{}': {} (a restart of its lane would read the file again)", s.stream.id, st.message());
      }
    }
    return out.emit(Message::stream_event(kind, s.envelope(), std::move(ev)));
  };

  // Device copies run on the lane's GPU.
  std::optional<DeviceGuard> device;
  if (s.options.gpu >= 0) device.emplace(s.options.gpu);

  // Copies one decoded frame into a payload buffer and emits it. kCancelled: shutdown while waiting
  // for a free buffer.
  bool reservation_failed = false;  // logged once
  bool position_failed = false;     // logged once
  std::optional<std::pair<uint64_t, int64_t>> camera_offset;  // (connection, camera_ns - pts_ns) of its last frame
  auto emit_frame = [&](QueuedFrame& f) -> Status {
    if (f.seq < s.options.skip_frames) return Status::Ok();  // its result is in the record already
    if (f.pts_ns >= 0) {
      if (awaiting_after_skip) {
        awaiting_after_skip = false;
        damage_said += std::string(damage_said.empty() ? "" : "; ") + "the frames between " +
                       media_time_text(last_sent_pts) + " and " + media_time_text(f.pts_ns) + " are missing";
      }
      // An AVI's frames are one a chunk at its frame rate: a step of more than one frame's time is frames
      // missing (a damaged chunk its parser dropped, or the writer's dropped frames), which nothing
      // else says: they never reached the decoder.
      // (Not of a stream sampled by max_fps or keyframes_only: the frames it leaves out are no loss; they
      // were said to be missing, found 2026-12-07.)
      if (s.avi.load() && last_sent_pts >= 0 && s.sample_period_ns.load() <= 0 && !s.keyframes_only.load()) {
        const int64_t gap = f.pts_ns - last_sent_pts;
        // The step is the file's frame rate where its caps say one: learnt from the timestamps alone, an
        // Xvid file with B-frames (packed bitstream: frames whose times come a few ns apart) made it a
        // nanosecond, and 309,833,295 frames "missing" (found 2026-12-07).
        if (GstCaps* caps = gst_sample_get_caps(f.sample.get()); caps && caps != avi_rate_caps.get()) {
          avi_rate_caps.reset(gst_caps_ref(caps));  // (looked at once per caps, not per frame)
          gint num = 0, den = 0;
          if (gst_caps_get_size(caps) > 0 &&
              gst_structure_get_fraction(gst_caps_get_structure(caps, 0), "framerate", &num, &den) && num > 0 && den > 0) {
            avi_rate_step = static_cast<int64_t>(1e9 * den / num);
          }
        }
        if (avi_rate_step > 0) avi_step = avi_rate_step;
        if (avi_step > 0 && gap > avi_step + avi_step / 2) {
          if (avi_missing == 0) avi_first_gap = {last_sent_pts, f.pts_ns};
          avi_missing += static_cast<uint64_t>((gap + avi_step / 2) / avi_step - 1);
          ++avi_gaps;
        } else if (gap > 0 && avi_rate_step <= 0) {
          avi_step = gap;
        }
      }
      sent_pts_before = last_sent_pts;
      last_sent_pts = f.pts_ns;
    }
    if (retune_unsaid && f.generation >= retune_unsaid->first) VAPIPE_RETURN_IF_ERROR(say_retune());
    if (s.options.seq_reservations) {
      // Before the number can reach anyone: a restarted lane must start past it.
      if (Status st = s.options.seq_reservations->ensure(s.stream.id, f.seq); !st.ok() && !reservation_failed) {
        reservation_failed = true;
        VAPIPE_LOG_ERROR("stream '{}': {} (after a restart of its lane, sequence numbers could repeat)", s.stream.id,
                         st.message());
      }
      // A live job's file: where a restarted lane goes on reading it (seek_past_frames_sent).
      if (s.options.live && s.stream.parsed.kind == UriKind::kFile && f.pts_ns >= 0) {
        if (Status st = s.options.seq_reservations->note_sent(s.stream.id, s.stream.uri, f.pts_ns);
            !st.ok() && !position_failed) {
          position_failed = true;
          VAPIPE_LOG_ERROR("stream '{}': {} (after a restart of its lane, its file would be read again from its "
                           "start)", s.stream.id, st.message());
        }
      }
    }
    if (!started || awaiting_resume) {
      s.start_counting_rtp_losses();
      const MessageKind kind = started ? MessageKind::kStreamResumed : MessageKind::kStreamStart;
      StreamEvent ev{uri, started ? "" : s.options.start_message, emitted, s.queue.dropped()};
      ev.attempt = started ? attempt : 0;
      if (!started) {
        ev.turn = turn_said();
        // A file knows its duration once it plays (archive progress, in publish); a camera does not.
        gint64 duration = -1;
        // (Not the guess GStreamer makes of a Matroska file that says none: container_end.h.)
        const bool says_none = s.stream.parsed.kind == UriKind::kFile &&
                               check_container_end(file_uri_path(s.stream.uri)).duration_unknown;
        if (!s.options.live && !says_none &&
            gst_element_query_duration(s.pipeline.get(), GST_FORMAT_TIME, &duration) && duration > 0) {
          // streams[].to: the part ends there (publish counts its progress from streams[].from).
          ev.duration_ns = s.stream.to_ns >= 0 ? std::min<int64_t>(duration, s.stream.to_ns) : duration;
        }
        if (s.stream.parsed.kind == UriKind::kFile) {
          // Its size as read: a later --resume says so if the file has changed since (a recorder still
          // writing it).
          std::error_code ec;
          const std::string path = file_uri_path(s.stream.uri);
          const auto bytes = std::filesystem::file_size(path, ec);
          if (!ec) ev.file_bytes = static_cast<int64_t>(bytes);
          if (!ec) s.opened_file_bytes = static_cast<int64_t>(bytes);
          // And its beginning's hash: one replaced by another recording of any size is told (--resume).
          if (!ec) ev.file_head = file_head_hash(path, head_bytes_then(ev.file_bytes));
          ev.edit_list_ns = s.edit_list->video_ns.load();  // (said: its pts_ms are on the edit list's timeline)
        }
      }
      if (started && attempt > 0) {
        VAPIPE_LOG_INFO("stream '{}': resumed after reconnection attempt {}{}", s.stream.id, attempt,
                        std::exchange(resumed_note, std::string()));
      } else if (started) {
        VAPIPE_LOG_INFO("stream '{}': resumed after the restart of its lane, from seq {}{}", s.stream.id, f.seq,
                        resumes_after_sent ? " at " + media_time_text(f.pts_ns) + " of its file" : std::string());
      }
      started = true;
      awaiting_resume = false;
      attempt = 0;
      VAPIPE_RETURN_IF_ERROR(out.emit(Message::stream_event(kind, s.envelope(), std::move(ev))));
    }
    Message m;
    m.kind = MessageKind::kFrame;
    m.env = s.envelope();
    m.env.seq = f.seq;
    m.env.capture_ns = f.capture_ns;
    GstBuffer* b = gst_sample_get_buffer(f.sample.get());
    m.env.pts_ns = f.pts_ns;
    m.env.camera_ns = b ? camera_clock_ns(b) : -1;
    // A frame the depayloader left without the camera's clock (rtph265depay, on some frames: every
    // 10th of a camera's, long after its first sender report): the camera's time is its RTP time's
    // (pts_ns, from its RTP clock: rtp_timeline.h) plus the offset its last frame of this connection
    // had, which only a new sender report moves (by the clocks' drift).
    if (m.env.camera_ns >= 0 && f.pts_ns >= 0) {
      camera_offset = {s.pipelines_built, m.env.camera_ns - f.pts_ns};
    } else if (m.env.camera_ns < 0 && f.pts_ns >= 0 && camera_offset && camera_offset->first == s.pipelines_built) {
      m.env.camera_ns = f.pts_ns + camera_offset->second;
    }
    // Decoded from incomplete data (a packet lost on the camera's network): the decoder input gate's
    // mark, or the decoder's own (decoder_input_gate.h).
    m.env.damaged = b && GST_BUFFER_FLAG_IS_SET(b, GST_BUFFER_FLAG_CORRUPTED);
    if (m.env.camera_ns >= 0 && !s.camera_clock_checked) {
      s.camera_clock_checked = true;
      if (auto note = camera_clock_offset_note(m.env.capture_ns - m.env.camera_ns)) {
        VAPIPE_LOG_WARN("stream '{}': {}", s.stream.id, *note);
      }
    }
    record_time_of_day(s, &m.env);
    bool from_device = false;
    if (s.options.watchdog) s.options.watchdog->working("copying a decoded frame");  // its slot wait is not
    Status copied = copy_frame(f.sample.get(), s.stream.id, out, s.options.gpu, s.options.max_frame_bytes,
                               &s.cuda_stream, &m.frame, &m.payload,
                               &from_device);
    if (s.options.watchdog) s.options.watchdog->waiting();
    VAPIPE_RETURN_IF_ERROR(copied);
    m.frame.orientation = f.turn;
    if (m.frame.field != FieldRead::kWholeFrame && !s.interlace_logged) {
      s.interlace_logged = true;
      if (s.ingest.first_field) {
        VAPIPE_LOG_INFO("stream '{}': its frames are interlaced ({} first): each is classified from that field "
                        "alone, one moment (ingest.deinterlace: first_field)",
                        s.stream.id, m.frame.field == FieldRead::kTopField ? "top field" : "bottom field");
      } else {
        VAPIPE_LOG_INFO("stream '{}': its frames are interlaced: classified as decoded, both fields woven "
                        "(ingest.deinterlace: off)", s.stream.id);
      }
    }
    if (!s.ingest.first_field) m.frame.field = FieldRead::kWholeFrame;
    crop_to_region(s.stream.roi, &m.frame);  // a region of the upright picture
    std::vector<PictureOrder> pictures;
    if (s.pictures_waiting.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> lock(s.picture_mutex);
      pictures.swap(s.pictures_wanted);
      s.pictures_waiting = false;
    }
    // Kept for its pictures, written once the frame has gone on (it waits in no queue meanwhile).
    SamplePtr pictured(pictures.empty() ? nullptr : gst_sample_ref(f.sample.get()));
    const Envelope frame_env = m.env;
    const Orientation frame_turn = m.frame.orientation;
    if (s.recent) s.recent->add_sent(frame_env, frame_turn);
    f.sample.reset();  // give the decoded buffer back to GStreamer before blocking on send
    ++(from_device ? s.device_frames : s.host_frames);
    if (!from_device && s.options.decoder == Decoder::kNvdec && s.stream.parsed.kind != UriKind::kTest &&
        !s.fallback_logged) {
      s.fallback_logged = true;
      VAPIPE_LOG_INFO("stream '{}': decoding on the CPU (no NVDEC decoder took this stream's codec)", s.stream.id);
    }
    m.env.mark_entry(StageKind::kIngest, wall_clock_ns());
    VAPIPE_RETURN_IF_ERROR(out.emit(std::move(m)));
    ++emitted;
    for (PictureOrder& order : pictures) {
      if (s.options.watchdog) s.options.watchdog->working("writing a picture of a frame");
      const auto writing = std::chrono::steady_clock::now();
      const Status written = write_frame_picture(pictured.get(), frame_turn, order.roi, order.path);
      const double took_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - writing).count();
      if (s.options.watchdog) s.options.watchdog->waiting();
      VAPIPE_RETURN_IF_ERROR(out.emit(picture_event(frame_env, order, written, took_ms)));
    }
    return say_pictures_done();
  };

  // Starts the current pipeline; the reason if it cannot (it is then on the bus, e.g. "Resource not found").
  auto play = [&]() -> std::optional<std::string> {
    last_frame = std::chrono::steady_clock::now();
    if (set_state_watched(s.pipeline.get(), GST_STATE_PLAYING, s.options.watchdog) != GST_STATE_CHANGE_FAILURE) return std::nullopt;
    return pop_bus_error(bus.get(), s.stream).value_or("cannot start the pipeline");
  };

  // The stream failed, ended or stalled for `reason`. Without reconnection it ends here (an end of
  // stream as kStreamEnd, anything else as kStreamError). With it: the frames already decoded go out,
  // then a new pipeline is tried after each delay until one plays; returns nullopt when one does.
  // The connection's pipeline stopped, and the frames it had queued sent. Closed first: a streaming
  // thread waiting for room (queue_policy block) lets go, so that the pipeline can stop; then what it
  // had queued goes out, and the queue takes the next pipeline's. Set: the stream ended meanwhile.
  auto end_connection = [&]() -> std::optional<Status> {
    s.queue.close();
    set_state_watched(s.pipeline.get(), GST_STATE_NULL, s.options.watchdog);  // its streaming threads have stopped
    while (auto f = s.queue.pop(std::chrono::milliseconds(0))) {
      if (!f->sample || flags.abort.load()) continue;  // an end-of-stream marker
      Status st = emit_frame(*f);
      if (st.code() == StatusCode::kCancelled) return finish(MessageKind::kStreamEnd, stopped());
      if (!st.ok()) return finish(MessageKind::kStreamError, st.message());
    }
    s.queue.reopen();
    return std::nullopt;
  };
  auto seconds_of = [](double s) {
    return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
  };
  // Waits until `until` (a reconnection's back-off, a snapshot's next poll), giving the emitter its
  // idle calls. Set: the stream was stopped (or its emitter failed) meanwhile.
  // `on_ingest_reload`: the job's reloaded reconnection settings end the wait too (a back-off);
  // `on_retune`: so does a retune, once taken (a snapshot's next poll, whose period is max_fps).
  auto wait_until = [&](std::chrono::steady_clock::time_point until, bool on_ingest_reload = false,
                        bool on_retune = false) -> std::optional<Status> {
    while (std::chrono::steady_clock::now() < until) {
      if (stopping()) return finish(MessageKind::kStreamEnd, stopped());
      if (s.settings_waiting.load()) break;  // a reload's settings are tried now, not after the back-off
      if (on_ingest_reload && s.ingest_waiting.load()) break;
      const bool retuning = s.retune_waiting.load();
      if (Status st = take_retune(/*say_now=*/true); !st.ok()) {
        return finish(MessageKind::kStreamError, st.message());
      }
      if (on_retune && retuning) break;
      if (Status st = out.idle(); !st.ok()) return finish(MessageKind::kStreamError, st.message());
      if (Status st = say_pictures_done(); !st.ok()) return finish(MessageKind::kStreamError, st.message());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (stopping()) return finish(MessageKind::kStreamEnd, stopped());
    return std::nullopt;
  };
  // `at_once`: a reload changed the stream's settings (taken already): the first attempt is made now
  // with them, said as attempt 1 whatever the stream's kind; a stream that does not reconnect (a test
  // source, `reconnect: false`) ends if that one fails.
  auto recover = [&](MessageKind kind, std::string reason, bool at_once = false) -> std::optional<Status> {
    take_ingest_reload();
    if (!reconnects && !at_once) return finish(kind, reason);
    if (auto done = end_connection()) return done;
    // An HLS playlist, as it is when the stream stopped: reconnected to only once it changed (a new
    // segment), since hlsdemux would play the stale playlist's last segments again (hls_playlist.h).
    const std::string stopped_because = reason;
    auto playlist_state = [&] {
      return hls_playlist_state(s.stream.uri, [&](GstElement* source) { Impl::apply_tls_trust(source, s); },
                                std::chrono::seconds(3));
    };
    std::optional<std::string> stale_playlist;
    if (s.hls.load() && !at_once) stale_playlist = playlist_state();
    // A recording's playlist never changes (#EXT-X-PLAYLIST-TYPE:VOD): read whole, it ends as a file does,
    // in a live job too, rather than wait for a segment that cannot come.
    if (kind == MessageKind::kStreamEnd && stale_playlist && hls_playlist_is_recording(*stale_playlist)) {
      VAPIPE_LOG_INFO("stream '{}': its HLS playlist is a recording (#EXT-X-PLAYLIST-TYPE:VOD), read to its end: the "
                      "stream ends, as a file does", s.stream.id);
      return finish(MessageKind::kStreamEnd, reason);
    }
    // So does a DASH presentation that is not live (MPD@type "static"): reconnected, dashdemux would read
    // it again from its start, as new results, at each end.
    if (kind == MessageKind::kStreamEnd && s.dash.load() && !at_once) {
      if (Result<std::string> mpd = fetch_http_body(s.stream.uri, [&](GstElement* source) { Impl::apply_tls_trust(source, s); },
                                                    std::chrono::seconds(3));
          mpd.ok() && dash_manifest_is_static(*mpd)) {
        VAPIPE_LOG_INFO("stream '{}': its DASH manifest is a recording (MPD type \"static\"), read to its end: the "
                        "stream ends, as a file does", s.stream.id);
        return finish(MessageKind::kStreamEnd, reason);
      }
    }
    while (true) {
      take_ingest_reload();  // a reload's attempts and delays count from the next attempt
      if (!reconnects && !at_once) return finish(MessageKind::kStreamError, reason);
      ++attempt;
      auto attempts_run_out = [&] { return s.ingest.reconnect_attempts > 0 && attempt > s.ingest.reconnect_attempts; };
      auto give_up = [&] {
        return finish(MessageKind::kStreamError, "gave up after " + std::to_string(s.ingest.reconnect_attempts) +
                                                     " reconnection attempts: " + reason);
      };
      if (attempts_run_out()) return give_up();
      const double delay = at_once ? 0.0 : reconnect_delay_s(s.ingest, attempt);
      if (at_once) {
        VAPIPE_LOG_INFO("stream '{}': {}: connecting now ({})", s.stream.id, reason, uri);
      } else if (const auto now = std::chrono::steady_clock::now();
                 attempt <= kAttemptsEachSaid || now - attempt_said >= kAttemptsSaidEvery) {
        attempt_said = now;
        VAPIPE_LOG_WARN("stream '{}' ({}): {}; reconnecting in {:.1f} s (attempt {}{})", s.stream.id, uri, reason, delay,
                        attempt,
                        attempt == kAttemptsEachSaid ? "; from here on said once every 10 minutes, each on the bus"
                        : attempt > kAttemptsEachSaid ? "; still down"
                                                       : "");
      } else {
        VAPIPE_LOG_DEBUG("stream '{}' ({}): {}; reconnecting in {:.1f} s (attempt {})", s.stream.id, uri, reason, delay,
                         attempt);
      }
      at_once = false;
      StreamEvent ev{uri, reason, emitted, s.queue.dropped()};
      ev.attempt = attempt;
      if (Status st = out.emit(Message::stream_event(MessageKind::kStreamReconnecting, s.envelope(), std::move(ev)));
          !st.ok()) {
        return finish(MessageKind::kStreamError, st.message());
      }
      const auto waiting_from = std::chrono::steady_clock::now();
      auto until = waiting_from + seconds_of(delay);
      while (true) {
        if (auto done = wait_until(until, true)) return done;
        if (!s.ingest_waiting.load()) break;
        // The job's reconnection settings changed while it waited (a reload): the wait is the new delay,
        // counted from its start (shorter: it may end now; longer: it goes on); the new attempts or
        // `reconnect: false` end it now.
        take_ingest_reload();
        if (!reconnects) return finish(MessageKind::kStreamError, reason);
        if (attempts_run_out()) return give_up();
        if (delay > 0) until = waiting_from + seconds_of(reconnect_delay_s(s.ingest, attempt));
      }
      if (std::optional<std::string> what = take_reload_settings()) {
        // Settings a reload changed while the stream waited: its attempts start over with them, now.
        reason = "a reload changed its " + *what;
        if (Status st = say_changed(reason); !st.ok()) return finish(MessageKind::kStreamError, st.message());
        attempt = 0;
        at_once = true;
        stale_playlist.reset();
        continue;
      }
      if (stale_playlist) {
        if (std::optional<std::string> now = playlist_state(); now && *now == *stale_playlist) {
          reason = stopped_because + (hls_playlist_ended(*now)
                                          ? "; its HLS playlist says it has ended (#EXT-X-ENDLIST) and has not "
                                            "changed since: it is read again once it changes"
                                          : "; its HLS playlist has had no new segment since (its encoder, or what "
                                            "writes the playlist, has stopped?): it is read again once it changes");
          continue;
        }
        stale_playlist.reset();
      }
      Status built = build_pipeline(s);
      // The old pipeline's streaming threads are gone; glibc would keep what their arenas held
      // (ingest grew ~2 MB a minute over a soak with reconnections, docs/benchmarks.md).
      release_freed_heap_memory();
      if (!built.ok()) {
        reason = built.message();
        continue;
      }
      bus.reset(gst_element_get_bus(s.pipeline.get()));
      if (auto failed = play()) {
        reason = *failed;
        set_state_watched(s.pipeline.get(), GST_STATE_NULL, s.options.watchdog);
        continue;
      }
      awaiting_resume = true;
      decoded_at_connection = s.decoded.load();
      connected_at = std::chrono::steady_clock::now();
      return std::nullopt;
    }
  };
  // streams[].loop: the file read to its end (or to) is read again from its start (or from) by a new
  // pipeline, as a new connection with no reconnection said: numbering goes on, its timestamps start
  // over (as after a reconnection: clips and kept frames follow a new decoder), and a `changed` event
  // says so first, so that publish ends a segment there and a label's run starts over.
  uint64_t loops = 0;
  // Whether the stream's server said how long it is (an HTTP Content-Length: a file served whole; a
  // camera's stream, live fragmented MP4, FLV, Matroska, has none): its end is the file's, not a
  // connection that dropped (the source reads on, or fails, short of the length). A demuxer's duration
  // does not tell: Matroska's says one at the end of a live stream too.
  auto read_to_its_known_end = [&]() {
    GstElement* source = gst_bin_get_by_name(GST_BIN(s.pipeline.get()), "source");  // (uridecodebin's)
    if (!source) return false;
    gint64 length = -1;
    const bool known = gst_element_query_duration(source, GST_FORMAT_BYTES, &length) && length > 0;
    gst_object_unref(source);
    return known;
  };
  auto loop_to_start = [&]() -> std::optional<Status> {
    if (auto done = end_connection()) return done;
    ++loops;
    const std::string what = "looped: read again from its " +
                             (s.stream.from_ns > 0 ? "from (" + media_time_text(s.stream.from_ns) + ")" : std::string("start")) +
                             " (streams[].loop; time " + std::to_string(loops + 1) + ")";
    if (Status st = say_changed(what); !st.ok()) return finish(MessageKind::kStreamError, st.message());
    // The first loop at info, the rest at debug: each loop is a `changed` event already, and a short
    // clip loops several times a second (a 0.5 s clip wrote 38 kB of log a minute).
    if (loops == 1) {
      VAPIPE_LOG_INFO("stream '{}': {}, after {} frames (further loops: a `changed` event each, logged at debug level)",
                      s.stream.id, what, emitted);
    } else {
      VAPIPE_LOG_DEBUG("stream '{}': {}, after {} frames", s.stream.id, what, emitted);
    }
    s.part_ended = false;
    Status built = build_pipeline(s);
    release_freed_heap_memory();  // (as after a reconnection: the old pipeline's threads are gone)
    if (!built.ok()) return finish(MessageKind::kStreamError, "cannot read it again: " + built.message());
    bus.reset(gst_element_get_bus(s.pipeline.get()));
    if (s.stream.from_ns > 0) {
      set_state_watched(s.pipeline.get(), GST_STATE_PAUSED, s.options.watchdog);
      seek_to_part(s);
    }
    if (auto failed = play()) return finish(MessageKind::kStreamError, *failed);
    decoded_at_connection = s.decoded.load();
    connected_at = std::chrono::steady_clock::now();
    return std::nullopt;
  };
  // A Matroska or WebM file damaged part way (bytes overwritten, a bad sector, a copy with a hole):
  // GStreamer's demuxer meets data that is not what the file's structure says and ends the stream
  // there, without an error: the rest of the file was lost without a word (measured: 147 of 267
  // frames, a clean end). Where the demuxer stopped well before the file's end, it is read again
  // from the next key frame after the place it stopped (its index, the Cues, leads past the damage;
  // frames at or before the last one sent are dropped), and the end says which frames are missing.
  // A try that brought no frame (the index's next key frame was in the damage too) is followed by one
  // further on; at most kMaxDamageSkips tries, kMaxFruitlessSkips of them in a row without a frame.
  constexpr int kMaxDamageSkips = 32, kMaxFruitlessSkips = 4;
  int damage_skips = 0, fruitless_skips = 0;
  uint64_t emitted_at_skip = 0;
  int64_t skip_target = -1;
  auto skip_damage = [&](bool* going_on) -> std::optional<Status> {
    *going_on = false;
    if (s.stream.parsed.kind != UriKind::kFile || !s.pipeline || last_sent_pts < 0 || damage_skips >= kMaxDamageSkips ||
        stopping()) {
      return std::nullopt;
    }
    const bool fruitless = damage_skips > 0 && emitted == emitted_at_skip;
    fruitless_skips = fruitless ? fruitless_skips + 1 : 0;
    if (fruitless_skips > kMaxFruitlessSkips) return std::nullopt;
    gint64 duration = -1;
    if (!gst_element_query_duration(s.pipeline.get(), GST_FORMAT_TIME, &duration) || duration <= 0) return std::nullopt;
    if (s.stream.to_ns >= 0) duration = std::min<gint64>(duration, s.stream.to_ns);
    const int64_t spacing = sent_pts_before >= 0 && last_sent_pts > sent_pts_before &&
                                    last_sent_pts - sent_pts_before < static_cast<int64_t>(GST_SECOND)
                                ? last_sent_pts - sent_pts_before
                                : 40 * static_cast<int64_t>(GST_MSECOND);
    const int64_t short_by = std::max<int64_t>(2 * spacing, 500 * static_cast<int64_t>(GST_MSECOND));
    if (last_sent_pts + short_by >= duration) return std::nullopt;  // its video went to the end
    // The demuxer itself stopped early: not a file whose audio goes on past its video.
    GstElement* demuxer = nullptr;
    if (GstIterator* it = gst_bin_iterate_recurse(GST_BIN(s.pipeline.get()))) {
      GValue item = G_VALUE_INIT;
      while (!demuxer && gst_iterator_next(it, &item) == GST_ITERATOR_OK) {
        auto* e = GST_ELEMENT(g_value_get_object(&item));
        GstElementFactory* factory = gst_element_get_factory(e);
        if (factory && g_str_equal(GST_OBJECT_NAME(factory), "matroskademux")) demuxer = GST_ELEMENT(gst_object_ref(e));
        g_value_reset(&item);
      }
      g_value_unset(&item);
      gst_iterator_free(it);
    }
    if (!demuxer) return std::nullopt;
    gint64 stopped_at = -1;
    const bool placed = gst_element_query_position(demuxer, GST_FORMAT_TIME, &stopped_at);
    gst_object_unref(demuxer);
    if (!placed || stopped_at < 0 || stopped_at + short_by >= duration) return std::nullopt;
    // A file cut short ends where it does: nothing past its end to read (its end says so).
    if (damage_skips == 0 && !check_container_end(file_uri_path(s.stream.uri)).cut_short.empty()) return std::nullopt;
    const int64_t target =
        std::max({last_sent_pts, static_cast<int64_t>(stopped_at), skip_target}) + (fruitless ? short_by : spacing);
    if (target >= duration) return std::nullopt;
    if (damage_skips == 0) {
      first_stop = "its demuxer stopped at " + media_time_text(stopped_at) + ", " +
                   media_time_text(duration - std::max<int64_t>(last_sent_pts, stopped_at)) +
                   " before the end its header gives (" + media_time_text(duration) + ")";
    }
    skip_target = target;
    ++damage_skips;
    emitted_at_skip = emitted;
    // (The first time at warning level, further tries at debug: the end says what came of them.)
    spdlog::log(damage_skips == 1 ? spdlog::level::warn : spdlog::level::debug,
                "stream '{}' ({}): its demuxer stopped at {}, {} before its end of {} (damaged data?): read again from "
                "the next key frame after {}", s.stream.id, uri, media_time_text(stopped_at),
                media_time_text(duration - last_sent_pts), media_time_text(duration), media_time_text(target));
    if (auto done = end_connection()) return done;
    Status built = build_pipeline(s);
    release_freed_heap_memory();
    if (!built.ok()) return finish(MessageKind::kStreamError, "cannot read it again past its damage: " + built.message());
    bus.reset(gst_element_get_bus(s.pipeline.get()));
    set_state_watched(s.pipeline.get(), GST_STATE_PAUSED, s.options.watchdog);
    gst_element_get_state(s.pipeline.get(), nullptr, nullptr, 30 * GST_SECOND);
    s.drop_up_to_pts = last_sent_pts;
    const auto flags = static_cast<GstSeekFlags>(GST_SEEK_FLAG_FLUSH | GST_SEEK_FLAG_KEY_UNIT | GST_SEEK_FLAG_SNAP_AFTER);
    if (!gst_element_seek_simple(s.pipeline.get(), GST_FORMAT_TIME, flags, target)) {
      VAPIPE_LOG_WARN("stream '{}': its file cannot be sought past its damage", s.stream.id);
      return std::nullopt;  // it ends as it did
    }
    gst_element_get_state(s.pipeline.get(), nullptr, nullptr, 30 * GST_SECOND);
    if (auto failed = play()) return finish(MessageKind::kStreamError, *failed);
    awaiting_after_skip = true;
    connected_at = std::chrono::steady_clock::now();
    decoded_at_connection = s.decoded.load();
    *going_on = true;
    return std::nullopt;
  };
  // A snapshot URL (http://cam/snapshot.jpg: one picture, then the end) in a live job: fetched again
  // once its period is up (max_fps, or once a second), as a new connection with no reconnection said
  // (each end was a warning and a reconnecting and resumed event, every second). Empty: polled again.
  auto poll_snapshot = [&]() -> std::optional<Status> {
    if (auto done = end_connection()) return done;
    s.snapshot_mode = true;
    // Its period counted from the last fetch; a reload's max_fps during the wait sets a new one.
    for (bool waited = false; !waited;) {
      const int64_t period_ns = s.sample_period_ns.load();
      const double period_s = period_ns > 0 ? static_cast<double>(period_ns) / 1e9 : 1.0;
      if (!s.snapshot_logged) {
        s.snapshot_logged = true;
        VAPIPE_LOG_INFO("stream '{}': its uri gives one picture per request (a snapshot URL): it is fetched again "
                        "every {:.3g} s (the stream's max_fps sets how often)",
                        s.stream.id, period_s);
      }
      const auto next_fetch = connected_at + seconds_of(period_s);
      if (auto done = wait_until(next_fetch, false, /*on_retune=*/true)) return done;
      waited = std::chrono::steady_clock::now() >= next_fetch || s.settings_waiting.load();
    }
    s.image_decoder = false;
    s.multipart = false;
    connected_at = std::chrono::steady_clock::now();
    decoded_at_connection = s.decoded.load();
    Status built = build_pipeline(s);
    release_freed_heap_memory();
    if (!built.ok()) return recover(MessageKind::kStreamError, built.message());
    bus.reset(gst_element_get_bus(s.pipeline.get()));
    if (auto failed = play()) return recover(MessageKind::kStreamError, *failed);
    last_frame = connected_at;
    return std::nullopt;
  };

  if (!s.options.restart_reason.empty() && !s.stop_requested.load()) {
    // It was running before its lane restarted: subscribers see it reconnect, not start again. First,
    // even if the job is stopping: its end then counts from here (a stream removed earlier says nothing).
    started = true;
    awaiting_resume = true;
    StreamEvent ev{uri, s.options.restart_reason, emitted, 0};
    ev.attempt = 0;
    VAPIPE_RETURN_IF_ERROR(out.emit(Message::stream_event(MessageKind::kStreamReconnecting, s.envelope(), std::move(ev))));
  }
  // Stopped before it played (e.g. a stage downstream failed to open): not a frame leaves, not even
  // the one prerolled.
  if (stopping()) return finish(MessageKind::kStreamEnd, stopped());
  if (s.options.skip_frames > 0 && s.options.resume_after_pts_ns >= 0 && s.stream.parsed.kind == UriKind::kFile) {
    seek_past_earlier_results(s);
  } else if (resumes_after_sent) {
    seek_past_frames_sent(s);
  } else if (s.stream.from_ns > 0 && s.stream.parsed.kind == UriKind::kFile) {
    seek_to_part(s);
  }
  if (auto failed = play()) {
    if (auto done = recover(MessageKind::kStreamError, *failed)) return *done;
  }
  // An archive file whose reader waits three times stall_timeout_s for its next frame (slot waits and
  // sending are not waiting: they happen in emit) is said once: a read of a share that does not answer
  // blocks in the kernel, and nothing else would say why the job's progress stopped. Not ended: it goes
  // on if the read returns (a server back after its reboot), and a thread blocked so cannot be ended.
  const auto file_quiet_said_after = seconds_of(3 * s.ingest.stall_timeout_s);
  const bool archive_file = !s.options.live && s.stream.parsed.kind == UriKind::kFile && s.ingest.stall_timeout_s > 0;
  auto last_progress = std::chrono::steady_clock::now();  // the last frame sent (or the start)
  bool said_quiet = false;

  while (true) {
    if (stopping()) {
      // Shutdown (or this stream removed): emit what was already decoded, then end the stream.
      s.queue.close();
      while (auto f = s.queue.pop(std::chrono::milliseconds(0))) {
        if (!f->sample || flags.abort.load() || !emit_frame(*f).ok()) break;
      }
      return finish(MessageKind::kStreamEnd, stopped());
    }
    take_ingest_reload();
    if (Status st = take_retune(/*say_now=*/false); !st.ok()) {
      return finish(MessageKind::kStreamError, st.message());
    }
    if (s.settings_waiting.load()) {
      // A reload changed its settings: what this connection decoded goes out, and the next connection
      // is made now, with them.
      if (auto done = end_connection()) return *done;
      const std::string old_uri = uri;
      const std::optional<std::string> taken = take_reload_settings();
      const std::string what = taken.value_or("settings");
      if (Status st = taken ? say_changed("a reload changed its " + what) : Status::Ok(); !st.ok()) {
        return finish(MessageKind::kStreamError, st.message());
      }
      if (uri != old_uri) VAPIPE_LOG_INFO("stream '{}': its uri was {}", s.stream.id, old_uri);
      attempt = 0;
      if (auto done = recover(MessageKind::kStreamError, "a reload changed its " + what, true)) return *done;
      continue;
    }
    auto frame = s.queue.pop(std::chrono::milliseconds(50));
    if (const auto now = std::chrono::steady_clock::now(); frame && bus && now - bus_drained >= std::chrono::seconds(1)) {
      drain_bus_up_to_error(bus.get(), &s.continuity_errors);
      bus_drained = now;
      // A live MPEG-TS stream (udp://, srt://) that loses packets on its way: said at most once a
      // minute, with how many gaps since it was last said (a file's are said at its end).
      if (const uint64_t gaps = s.continuity_errors.load();
          network_live && gaps > continuity_said && now - continuity_said_at >= std::chrono::minutes(1)) {
        VAPIPE_LOG_WARN("stream '{}' ({}): its MPEG-TS video lost or damaged packets {} time{} in the last {:.0f} s "
                        "(continuity errors; the frames there are missing or smeared): a network that drops "
                        "packets, or a sender that cannot keep up",
                        s.stream.id, uri, gaps - continuity_said, gaps - continuity_said == 1 ? "" : "s",
                        std::chrono::duration<double>(now - continuity_said_at).count());
        continuity_said = gaps;
        continuity_said_at = now;
      }
      // A camera whose frames reach the decoder damaged or incomplete (packets lost on its network):
      // libav drops such a frame (output-corrupt off), so its neighbours' seq numbers are contiguous.
      if (const uint64_t undecoded = s.decoder_input.undecoded.load();
          network_live && undecoded > undecoded_said && now - undecoded_said_at >= std::chrono::minutes(1)) {
        VAPIPE_LOG_WARN("stream '{}' ({}): its decoder gave no picture for {} of the frames it took in the last {:.0f} s "
                        "(damaged or incomplete frames: packets lost on the network, or a camera that sends broken "
                        "ones): those frames have no results",
                        s.stream.id, uri, undecoded - undecoded_said,
                        std::chrono::duration<double>(now - undecoded_said_at).count());
        undecoded_said = undecoded;
        undecoded_said_at = now;
      }
      // An RTSP camera whose RTP packets are lost on the network: libav conceals what is missing, so
      // its frames keep coming, smeared, and are classified; only the jitter buffer knows. Looked at
      // each minute, said when that minute lost some.
      if (network_live && now - rtp_said_at >= std::chrono::minutes(1)) {
        const RtpPackets rtp = s.rtp_packets();
        const uint64_t damaged = s.decoder_input.damaged_pictures.load();
        if (rtp.lost > rtp_said.lost) {
          const uint64_t lost = rtp.lost - rtp_said.lost, received = rtp.received - std::min(rtp.received, rtp_said.received);
          VAPIPE_LOG_WARN("stream '{}' ({}): {} of its RTP packets were lost on the network in the last {:.0f} s ({:.1f}% "
                          "of {}): pictures where they were are smeared, and so are those after them until the next key "
                          "frame ({} pictures decoded so, their results marked damaged: true); over rtspt:// (RTSP over "
                          "TCP) none is lost",
                          s.stream.id, uri, lost, std::chrono::duration<double>(now - rtp_said_at).count(),
                          100.0 * static_cast<double>(lost) / static_cast<double>(std::max<uint64_t>(1, lost + received)),
                          lost + received, damaged - std::min(damaged, damaged_said));
        }
        rtp_said = rtp;
        damaged_said = damaged;
        rtp_said_at = now;
      }
    }
    // (Its end may come first: a short file's frames after the seek are all dropped within 50 ms.)
    if ((!frame || !frame->sample) && s.seek_overshot.load()) {
      // The seek went past the frames with results (or past streams[].from): from the start, dropping
      // them by count (and those before `from` by timestamp).
      if (s.seek_found_nothing) {
        VAPIPE_LOG_WARN("stream '{}': nothing could be decoded where the seek landed (a file whose timestamps "
                        "start over part way, files joined end to end, cannot be sought in by time): decoding it "
                        "from its start", s.stream.id);
      } else if (s.options.skip_frames > 0) {
        VAPIPE_LOG_WARN("stream '{}': the resume seek went too far: decoding its first {} frames again",
                        s.stream.id, s.options.skip_frames);
      } else if (resumes_after_sent) {
        VAPIPE_LOG_WARN("stream '{}': the seek past its last frame sent before its lane restarted ({}) went too "
                        "far: decoding it from its start", s.stream.id,
                        media_time_text(s.options.resume_after_sent_pts_ns));
      } else {
        VAPIPE_LOG_WARN("stream '{}': the seek to its from ({}) went too far: decoding it from its start",
                        s.stream.id, media_time_text(s.stream.from_ns));
      }
      // Paused first: a paused sink hands out no sample, so none is numbered before the flags change.
      set_state_watched(s.pipeline.get(), GST_STATE_PAUSED, s.options.watchdog);
      gst_element_get_state(s.pipeline.get(), nullptr, nullptr, 30 * GST_SECOND);
      gst_element_seek_simple(s.pipeline.get(), GST_FORMAT_TIME, GST_SEEK_FLAG_FLUSH, 0);
      gst_element_get_state(s.pipeline.get(), nullptr, nullptr, 30 * GST_SECOND);
      if (resumes_after_sent) {
        // Dropped by timestamp from the start; numbering stays past the crashed instance's.
        s.drop_through_pts = std::max<int64_t>(s.options.resume_after_sent_pts_ns, s.stream.from_ns - 1);
      } else {
        s.drop_through_pts = -1;
        s.next_seq = 0;
        s.kept_up_to(-1);
      }
      s.seek_overshot = false;
      s.seek_found_nothing = false;
      s.sought_by_time = false;
      if (auto failed = play()) {
        if (auto done = recover(MessageKind::kStreamError, *failed)) return *done;
      }
      continue;
    }
    if (!frame) {
      // Nothing kept before a reload's retune waits: said now, whenever the next frame comes.
      if (Status st = say_retune(); !st.ok()) return finish(MessageKind::kStreamError, st.message());
      if (Status st = out.idle(); !st.ok()) return finish(MessageKind::kStreamError, st.message());
      if (Status st = say_pictures_done(); !st.ok()) return finish(MessageKind::kStreamError, st.message());
      // Idle: look for an error on the bus (errors stop the streaming thread, so the queue is empty).
      // Frames decoded before the error were already emitted and get their results.
      std::optional<std::string> reason = pop_bus_error(bus.get(), s.stream, &s.continuity_errors);
      // A file cut after its only key frame, in a container that keeps no parameter sets (MPEG-TS; x264
      // repeats them at IDR frames only): the parser drops every frame, and at the end says so in its own
      // words (found 2026-12-07: "No valid frames found before end of stream (element h264parse0)", where
      // README promises the words below).
      if (reason && s.stream.parsed.kind == UriKind::kFile && s.decoded.load() == 0 &&
          s.decoder_input.arrived.load() == 0 && is_video_parser_without_frames(*reason)) {
        reason = no_key_frame_to_start_from(s.parser_input.load());
      }
      if (reason && !s.video_pad && s.decoded.load() == 0 && s.stream.parsed.kind != UriKind::kTest) {
        std::lock_guard<std::mutex> lock(s.pads_mutex);
        // What the file holds says more than GStreamer's error, or than on_no_more_pads' own.
        const std::string before = reason->rfind(kNoVideoPad, 0) == 0 ? "" : *reason + ": ";
        if (s.undecodable.find("video/x-avi-unknown") != std::string::npos) {
          // libav may well be installed: GStreamer's AVI reader does not pass these codecs on to it.
          // (Not GStreamer's own "missing a plug-in": the plug-in is there.)
          *reason = "its video's codec is one GStreamer's AVI reader does not know (" + s.undecodable +
                    "; Ut Video, MagicYUV, JPEG 2000 and others), whatever decoders are installed: convert the file "
                    "(ffmpeg -i FILE -c:v libx264 -crf 16 OUT.mp4)";
        } else if (!s.decoder_load_failure.empty()) {
          const bool out_of_memory = s.decoder_load_failure.find("failed to map segment") != std::string::npos ||
                                     s.decoder_load_failure.find("Cannot allocate memory") != std::string::npos;
          *reason = "its video (" + s.undecodable + ") has a decoder here, but " + s.decoder_load_failure +
                    (out_of_memory ? " (out of address space: is the job's memory limited by `ulimit -v` or "
                                     "prlimit --as? Raise the limit; a cgroup's memory.max does not do this)"
                                   : "");
        } else if (s.undecodable.find("video/") != std::string::npos) {
          *reason = before + "no decoder here takes its video (" + s.undecodable + "): install the GStreamer "
                    "plug-in for it (gstreamer1.0-libav decodes most), or re-encode it";
        } else if (!s.other_pads.empty()) {
          *reason = before + "it has no video stream (only " + s.other_pads + ")";
        } else if (!s.undecodable.empty()) {
          // Identified, and not a video (a PDF, a text file a glob took): GStreamer says "missing a plug-in".
          *reason = "it is not a video: GStreamer finds it to be " + s.undecodable + ", with no video in it";
        } else if (s.stream.parsed.kind == UriKind::kFile && reason->find("(element typefind)") != std::string::npos) {
          // "Could not determine type of stream": what it starts with (a recorder's own format, a PDF).
          if (const std::string what = describe_unidentified_file(file_uri_path(s.stream.uri)); !what.empty()) {
            *reason += ": " + what;
          }
        }
      }
      if (!reason && s.stream.parsed.kind == UriKind::kFile && !s.video_pad.load() &&
          std::chrono::steady_clock::now() - last_frame > s.options.file_open_timeout) {
        // Nothing found in the file and nothing said: decodebin drops a demuxer's error that comes while
        // it links the demuxer (seen with an MP4 without its index), and nothing else would end it.
        std::ostringstream os;
        os << "no video stream found in it after " << std::chrono::duration<double>(s.options.file_open_timeout).count()
           << " s, and GStreamer reported no error: the file is damaged, or of a kind GStreamer here does not read";
        reason = os.str();
      }
      if (!reason && stall_after.count() > 0) {
        // Stalled: nothing arrived for stall_timeout_s. Compressed frames that arrive and are left out
        // before decoding (key frames only; before the first key frame) count as arriving, up to ten
        // times as long without a decoded frame (a stream that never gives one is stalled too).
        const auto now = std::chrono::steady_clock::now();
        const std::chrono::steady_clock::time_point last_input{
            std::chrono::steady_clock::duration(s.decoder_input.last_input_ns.load())};
        const std::chrono::steady_clock::time_point answered{std::chrono::steady_clock::duration(s.rtsp_answered_ns.load())};
        const auto quiet = now - std::max({last_frame, last_input, answered});
        // Before the server's answer to DESCRIBE, its own time (at least kRtspAnswerWait); then the stall clock.
        const int64_t asked_ns = s.rtsp_asked_ns.load();
        const auto answer_wait = std::max<std::chrono::steady_clock::duration>(stall_after, kRtspAnswerWait);
        std::ostringstream os;
        if (asked_ns != 0 && s.stream.parsed.kind == UriKind::kNetwork) {
          const auto asking = now - std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(asked_ns));
          if (asking > answer_wait) {
            os << "stalled: its server took the connection but has not answered the RTSP request (DESCRIBE) in "
               << std::chrono::duration<double>(answer_wait).count() << " s (a hung camera, or another kind of server "
               << "on that port?)";
          }
        } else if (quiet > stall_after) {
          os << "stalled: no frame for " << std::chrono::duration<double>(stall_after).count() << " s";
          // Nothing at all since it connected: a server that takes the connection and never answers (a
          // hung camera, another kind of server on that port), not a stream that stopped.
          if (s.decoded.load() == decoded_at_connection && last_input < connected_at && !s.stream.is_member() &&
              s.stream.parsed.kind == UriKind::kNetwork) {
            os << " (none since it connected: its server takes the connection but sends no stream)";
          }
        } else if (now - last_frame > 10 * stall_after) {
          os << "stalled: frames arrive but none decoded for " << std::chrono::duration<double>(10 * stall_after).count()
             << " s";
        }
        if (!os.str().empty()) reason = os.str();
      }
      if (!reason && archive_file && !said_quiet &&
          std::chrono::steady_clock::now() - last_progress > file_quiet_said_after) {
        said_quiet = true;
        VAPIPE_LOG_WARN("stream '{}' ({}): no frame from its file for {:.0f} s after frame {} (reading it has not "
                        "returned: a network share that does not answer?); the stream waits for it, the others "
                        "go on", s.stream.id, uri, 3 * s.ingest.stall_timeout_s, emitted);
      }
      if (reason) {
        if (auto done = recover(MessageKind::kStreamError, *reason)) return *done;
      }
      continue;
    }
    if (said_quiet) {
      said_quiet = false;
      VAPIPE_LOG_INFO("stream '{}': frames from its file again, after {:.0f} s without", s.stream.id,
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - last_progress).count());
    }
    last_frame = std::chrono::steady_clock::now();
    if (!frame->sample) {
      // Compressed frames went in and no picture came out, ever: a file cut from a longer recording
      // (no key frame to start from), say. An error, not an end with no results and nothing said.
      // A seek by time after which nothing was decoded: at the end of files joined end to end, whose
      // clock starts over (tsdemux cannot place a time in them), or past the end. A resume's or a lane
      // restart's point has a frame, and so has a `from` within the file's known duration: decoded
      // from the start instead. (A `from` past a known end is said as such at the end.)
      // A `from` at or past the known end: the few frames a seek there gives (MPEG-TS, MPEG-PS, a
      // fragmented MP4: the last GOP's, cut at the seek) are no damage; the end says so (found 2026-12-07:
      // it failed, "none of its 3 compressed frames could be decoded", where MP4 and Matroska said it).
      bool from_past_end = false;
      if (s.sought_by_time && s.decoded.load() == 0 && !stopping()) {
        gint64 duration = -1;
        const bool known_end = gst_element_query_duration(s.pipeline.get(), GST_FORMAT_TIME, &duration) && duration > 0;
        if (s.options.skip_frames > 0 || resumes_after_sent || !known_end || s.stream.from_ns < duration) {
          s.seek_found_nothing = true;
          s.seek_overshot = true;
          continue;
        }
        from_past_end = s.stream.from_ns > 0;
      }
      // (None reaches the decoder where its parser dropped them all, finding no parameter sets: counted there.)
      const uint64_t decoder_arrived = s.decoder_input.arrived.load();
      const uint64_t arrived = decoder_arrived > 0 ? decoder_arrived : s.parser_input.load();
      if (arrived > 0 && s.decoded.load() == 0 && !from_past_end) {
        // An MP4 whose frames are all outside the part its edit list shows: a trim cut short before the
        // part shown, or an edit list that points past its frames. (GStreamer 1.22's qtdemux read long-GOP
        // trims short so; mp4_movie_duration.h reads them whole since.)
        if (const uint64_t hidden = s.edit_list->hidden_frames.load(); hidden >= arrived) {
          if (auto done = recover(MessageKind::kStreamError,
                                  "none of its " + std::to_string(hidden) + " frame(s) is in the part its edit list "
                                  "shows: the file is cut short before that part (a copy or download that stopped?), "
                                  "or its edit list points past its frames")) {
            return *done;
          }
          continue;
        }
        if (auto done = recover(MessageKind::kStreamError, no_key_frame_to_start_from(arrived))) {
          return *done;
        }
        continue;
      }
      // One picture, then the end, from a still-image decoder: a snapshot URL, polled.
      const bool snapshot = reconnects && s.image_decoder.load() && !s.multipart.load() && is_http_uri(s.stream.uri) &&
                            s.decoded.load() - decoded_at_connection == 1;
      if (snapshot) {
        if (auto done = poll_snapshot()) return *done;
        continue;
      }
      if (!s.part_ended.load()) {
        bool going_on = false;
        if (auto done = skip_damage(&going_on)) return *done;
        if (going_on) continue;
      }
      // streams[].loop: a live job's file goes on from its start (or from) again, as an endless camera.
      // Not one that gave no frame this time round (it would only spin).
      // A stop that came as it reached its end ends it as stopped (it would have gone on).
      if (s.options.live && s.stream.loop && s.stream.parsed.kind == UriKind::kFile) {
        if (stopping()) return finish(MessageKind::kStreamEnd, stopped());
        if (s.decoded.load() > decoded_at_connection) {
          if (auto done = loop_to_start()) return *done;
          continue;
        }
      }
      if (s.part_ended.load()) {
        return finish(MessageKind::kStreamEnd, "end of its part (streams[].to: " + media_time_text(s.stream.to_ns) + ")");
      }
      // A GIF cut before its first frame ended: its reader ended at the trailer it was given; it is an
      // error (decodebin drops one posted while it links the demuxer).
      if (std::string gif = s.gif_unreadable_because(); !gif.empty() && s.decoded.load() == 0) {
        return finish(MessageKind::kStreamError, "its GIF cannot be read: " + gif);
      }
      // A video file served whole over HTTP ends, as a file does, in a live job too (it was connected
      // to again and read from its start for ever, as a camera that dropped): one of known duration read
      // to its end. A live stream over HTTP (fragmented MP4, FLV) has none, and is connected to again.
      if (network_live && is_http_uri(s.stream.uri) && !s.hls.load() && !s.dash.load() && read_to_its_known_end()) {
        return finish(MessageKind::kStreamEnd, "end of stream");
      }
      if (auto done = recover(MessageKind::kStreamEnd, "end of stream")) return *done;
      continue;
    }
    Status st = emit_frame(*frame);
    if (st.code() == StatusCode::kCancelled) return finish(MessageKind::kStreamEnd, stopped());
    if (!st.ok()) return finish(MessageKind::kStreamError, st.message());
    last_progress = std::chrono::steady_clock::now();
  }
}

void StreamReader::take_picture(PictureOrder order) {
  if (order.frame_pts_ns >= 0 && impl_->recent) {
    if (std::optional<RecentFrames::Kept> kept = impl_->recent->find(order.frame_pts_ns)) {
      impl_->submit_picture(std::move(*kept), std::move(order));
      return;
    }
    // Said once a stream at info (an untimed stream says it for every picture), then at debug.
    const bool first = !impl_->picture_fallback_logged.exchange(true);
    const std::string why =
        impl_->recent->compressed_frames() == 0
            ? "none of its compressed frames is kept (a test:// source has none, an untimed stream's cannot be "
              "found by their timestamps, or it has just connected)"
            : fmt::format("the frame asked for (at {:.3f} s) is no longer kept",
                          static_cast<double>(order.frame_pts_ns) / 1e9);
    if (first) {
      VAPIPE_LOG_INFO("stream '{}': its '{}' segment gets a picture of its next frame: {}", order.stream_id, order.label, why);
    } else {
      VAPIPE_LOG_DEBUG("stream '{}': its '{}' segment gets a picture of its next frame: {}", order.stream_id, order.label, why);
    }
  }
  impl_->want_next_frame_picture(std::move(order));
}

void StreamReader::start_clip(ClipOrder order) {
  if (impl_->clips) {
    // As its segment's first frame was turned; one no longer remembered, as the stream's are now.
    order.turn = impl_->recent->turn_sent(order.first_pts_ns).value_or(impl_->orientation.load());
    impl_->clips->start(std::move(order));
  } else {
    VAPIPE_LOG_WARN("stream '{}': no clip of its '{}' segment: its reader keeps no frames for clips", order.stream_id,
                    order.label);
  }
}

void StreamReader::end_clip(const std::string& stream_id, const std::string& label, uint64_t segment_start_seq,
                            int64_t last_pts_ns) {
  if (impl_->clips) impl_->clips->end(stream_id, label, segment_start_seq, last_pts_ns);
}

void StreamReader::go_on_clip(const std::string& stream_id, const std::string& label, uint64_t segment_start_seq,
                              int64_t pts_ns) {
  if (impl_->clips) impl_->clips->go_on_after_restart(stream_id, label, segment_start_seq, pts_ns);
}

void StreamReader::hold_clips_across_reconnections(bool hold) {
  if (impl_->clips) impl_->clips->set_hold_across_reconnections(hold);
}

void StreamReader::end_clips_before(int64_t before_unix_ns) {
  if (impl_->clips) impl_->clips->end_clips_before(before_unix_ns);
}

namespace {

void append_what(std::string& list, const std::string& what) {
  if (what.empty()) return;
  list += (list.empty() ? "" : ", ") + what;
}

}  // namespace

void StreamReader::reconfigure(StreamConfig settings, std::string what) {
  {
    std::lock_guard<std::mutex> lock(impl_->stop_mutex);
    // A retune() not taken yet is older, and these settings are whole: what it changed is said with them.
    if (impl_->next_retune) {
      impl_->next_retune.reset();
      append_what(impl_->next_settings_what, std::exchange(impl_->next_retune_what, std::string()));
    }
    impl_->next_settings = std::move(settings);
    append_what(impl_->next_settings_what, what);
  }
  impl_->settings_waiting = true;
}

void StreamReader::retune(const StreamConfig& settings, const IngestConfig& ingest, std::string what) {
  {
    std::lock_guard<std::mutex> lock(impl_->stop_mutex);
    if (impl_->next_settings) {
      // A new connection is coming anyway: it takes these with the rest.
      impl_->next_settings->max_fps = settings.max_fps;
      impl_->next_settings->keyframes_only = settings.keyframes_only;
      impl_->next_settings->rtsp_latency_ms = settings.rtsp_latency_ms;
      impl_->next_settings->turn = settings.turn;
      append_what(impl_->next_settings_what, what);
      return;
    }
    impl_->next_retune = Impl::Retune{settings.max_fps,
                                      settings.keyframes_only,
                                      settings.rtsp_latency_ms,
                                      settings.turn,
                                      settings.max_fps >= 0 ? settings.max_fps : ingest.max_fps,
                                      ingest.keyframes_only_for(settings),
                                      ingest.rtsp_latency_ms_for(settings)};
    append_what(impl_->next_retune_what, what);
  }
  impl_->retune_waiting = true;
}

void StreamReader::set_ingest(const IngestConfig& ingest) {
  {
    std::lock_guard<std::mutex> lock(impl_->stop_mutex);
    impl_->next_ingest = ingest;
  }
  impl_->ingest_waiting = true;
}

void StreamReader::stop(std::string reason) {
  {
    std::lock_guard<std::mutex> lock(impl_->stop_mutex);
    impl_->stop_reason = std::move(reason);
  }
  impl_->stop_requested = true;
}

void release_freed_heap_memory() {
#ifdef __GLIBC__
  malloc_trim(0);  // every arena: the free pages inside their heaps go back to the system
#endif
}

std::optional<std::string> camera_clock_offset_note(int64_t capture_minus_camera_ns) {
  const double seconds = static_cast<double>(capture_minus_camera_ns) / 1e9;
  const double off = std::abs(seconds);
  if (off < 5) return std::nullopt;
  char amount[64];
  if (off < 120) {
    std::snprintf(amount, sizeof amount, "%.0f s", off);
  } else if (off < 2 * 3600) {
    std::snprintf(amount, sizeof amount, "%.0f min", off / 60);
  } else if (off < 2 * 86400) {
    std::snprintf(amount, sizeof amount, "%.1f h", off / 3600);
  } else {
    std::snprintf(amount, sizeof amount, "%.0f days", off / 86400);
  }
  return std::string("the camera's clock is ") + amount + (seconds > 0 ? " behind" : " ahead of") +
         " this machine's (from its RTCP sender reports): set an NTP server on the camera; until then its results' "
         "camera_unix_ms are off by as much";
}

double reconnect_delay_s(const IngestConfig& ingest, uint32_t attempt) {
  double delay = ingest.reconnect_delay_s;
  for (uint32_t i = 1; i < attempt && delay < ingest.reconnect_max_delay_s; ++i) delay *= 2;
  return std::min(delay, ingest.reconnect_max_delay_s);
}

}  // namespace vapipe
