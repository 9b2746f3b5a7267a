// The messages that travel between stages. One type for all edges, so that one transport and one
// stage runner serve every stage. Stream events (start, end, error, reconnecting, resumed) travel in the same ordered
// channel as the frames of their stream, so "end" always arrives after that stream's last frame.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/envelope.h"
#include "pipeline/payload.h"

namespace vapipe {

enum class MessageKind : uint8_t {
  kFrame = 1,         // a decoded frame (ingest -> preprocess)
  kTensor = 2,        // a preprocessed CHW tensor (preprocess -> batch)
  kBatch = 3,         // tensors grouped for one forward pass (batch -> infer)
  kResult = 4,        // one frame's classification (infer -> publish)
  kStreamStart = 10,  // a stream began decoding
  kStreamEnd = 11,    // a stream reached end-of-stream (or was stopped)
  kStreamError = 12,  // a stream failed; no more frames from it
  kStreamReconnecting = 13,  // a live network stream failed, ended or stalled; it is being reconnected
  kStreamResumed = 14,       // its first frame after a reconnection
  kStreamPicture = 15,       // a picture of a live stream's frame was written (publish.segments_pictures_dir)
  kStreamClip = 16,          // a clip of a live stream's segment was written (publish.segments_clips)
  kStreamChanged = 17,       // a reload changed the stream's settings (roi, uri, ...): its next frame has them
};
const char* message_kind_name(MessageKind kind);
inline bool is_stream_event(MessageKind k) {
  return k == MessageKind::kStreamStart || k == MessageKind::kStreamEnd || k == MessageKind::kStreamError ||
         k == MessageKind::kStreamReconnecting || k == MessageKind::kStreamResumed || k == MessageKind::kStreamPicture ||
         k == MessageKind::kStreamClip || k == MessageKind::kStreamChanged;
}
inline bool ends_stream(MessageKind k) { return k == MessageKind::kStreamEnd || k == MessageKind::kStreamError; }

enum class PixelFormat : uint8_t { kI420 = 0, kNV12 = 1, kRGB = 2 };
enum class ColorMatrix : uint8_t { kBT601 = 0, kBT709 = 1 };
const char* pixel_format_name(PixelFormat f);

// How a stored picture is turned to be shown upright (a file's image-orientation tag: a phone's
// portrait video is stored sideways with "rotate-90"), as GStreamer's videoflip turns it.
enum class Orientation : uint8_t {
  kAsStored = 0,
  kRotate90 = 1,        // clockwise ("rotate-90")
  kRotate180 = 2,       // "rotate-180"
  kRotate270 = 3,       // 90 degrees counter-clockwise ("rotate-270")
  kFlipHorizontal = 4,  // mirrored left to right ("flip-rotate-0")
  kFlipVertical = 5,    // upside down, mirrored ("flip-rotate-180")
  kTranspose = 6,       // across the upper-left/lower-right diagonal ("flip-rotate-270")
  kTransverse = 7,      // across the upper-right/lower-left diagonal ("flip-rotate-90")
};
constexpr uint8_t kMaxOrientation = 7;
const char* orientation_name(Orientation o);  // the tag's words: "rotate-90", ...
// The orientation an image-orientation tag names; nullopt for words that are not one.
std::optional<Orientation> orientation_from_tag(const std::string& tag);

// Where the upright picture's pixel (ux, uy) is in the stored one (width W, height H): with
// `transpose`, x comes from uy and y from ux; then x is W-1-x with `mirror_x`, y is H-1-y with
// `mirror_y`. Taps of a resize in upright coordinates are mapped this way, one axis at a time.
struct OrientationMap {
  bool transpose = false, mirror_x = false, mirror_y = false;
};
OrientationMap orientation_map(Orientation o);

// Which rows of a frame preprocessing reads (ingest.deinterlace). An interlaced frame (broadcast TV,
// an analogue camera's DVR) weaves two fields taken 1/50 or 1/60 s apart, so whatever moves shows
// twice, combed, row by row; one field alone (every other row) is one moment.
enum class FieldRead : uint8_t {
  kWholeFrame = 0,
  kTopField = 1,     // rows 0, 2, 4, ... (the first field in time of a top-field-first frame)
  kBottomField = 2,  // rows 1, 3, 5, ...
};
constexpr uint8_t kMaxFieldRead = 2;
const char* field_read_name(FieldRead f);  // "whole frame", "top field", "bottom field"

struct FrameInfo {
  PixelFormat format = PixelFormat::kI420;
  ColorMatrix matrix = ColorMatrix::kBT601;
  bool full_range = false;  // YUV only: 0-255 instead of 16-235
  uint32_t width = 0;
  uint32_t height = 0;
  std::array<uint32_t, 3> stride{};  // bytes per row of each plane
  std::array<uint32_t, 3> offset{};  // byte offset of each plane in the payload
  // How to turn the stored pixels (width x height, as decoded) to show them upright; preprocessing
  // reads them turned (ingest.orientation). Copies and pools deal in stored frames.
  Orientation orientation = Orientation::kAsStored;
  // The rows preprocessing reads: the whole frame, or one field of an interlaced one (field_picture).
  FieldRead field = FieldRead::kWholeFrame;
  // The region preprocessing reads (streams[].roi), in pixels of the upright picture: x, y, width,
  // height; width or height 0: the whole picture.
  std::array<uint32_t, 4> crop{};
  // The stored pixels' aspect ratio, width:height (GStreamer's pixel-aspect-ratio): 1:1 but for
  // anamorphic video, whose pixels are shown wider or narrower than tall (HDV's 1440x1080 shown
  // 16:9 has 4:3; PAL DV widescreen's 720x576, 64:45). Ingest keeps it within 1:10 to 10:1.
  uint32_t par_n = 1, par_d = 1;
  struct Region {
    uint32_t x, y, width, height;
  };
  // The region's shape as shown: its width and height with the pixels' aspect ratio applied (turned
  // with the picture), in units whose ratio alone counts; the same whichever field is read.
  struct Shape {
    uint64_t width, height;
  };
  uint32_t upright_width() const { return orientation_map(orientation).transpose ? height : width; }
  uint32_t upright_height() const { return orientation_map(orientation).transpose ? width : height; }
  Region region() const {
    return crop[2] && crop[3] ? Region{crop[0], crop[1], crop[2], crop[3]}
                              : Region{0, 0, upright_width(), upright_height()};
  }
  Shape shown_shape() const {
    const Region r = region();
    const bool turned = orientation_map(orientation).transpose;
    return {uint64_t{r.width} * (turned ? par_d : par_n), uint64_t{r.height} * (turned ? par_n : par_d)};
  }
  // Bytes of payload this layout needs; 0 if the layout is inconsistent.
  size_t required_bytes() const;
};

// The picture preprocessing reads of `frame`: the frame itself, or, when it says to read one field,
// that field alone as a picture of its own: the same bytes, every other row of each plane (chroma
// rows of 4:2:0 interlaced video alternate between the fields as luma rows do), so its offsets move
// down a row for the bottom field, its strides double and its height halves (kept even); its crop,
// given in the frame's pixels, halves along the stored rows. Nothing is copied. A frame under 4 rows,
// or one whose layout says nothing of field (kWholeFrame), comes back as it is.
FrameInfo field_picture(const FrameInfo& frame);

// Bytes of a width x height frame of `format` with its planes packed tightly (as ingest copies it).
size_t packed_frame_bytes(PixelFormat format, uint32_t width, uint32_t height);

// A frame size that fits a pool slot of `max_bytes`: (width, height) itself when it fits, else the
// largest size of the same shape (aspect ratio kept within rounding, width and height even) that does.
struct FrameSize {
  uint32_t width = 0;
  uint32_t height = 0;
};
FrameSize fit_frame_within(PixelFormat format, uint32_t width, uint32_t height, size_t max_bytes);

enum class DType : uint8_t { kFloat32 = 0, kFloat16 = 1 };
inline size_t dtype_size(DType t) { return t == DType::kFloat16 ? 2 : 4; }
const char* dtype_name(DType t);

struct TensorInfo {
  DType dtype = DType::kFloat32;
  uint32_t channels = 3;
  uint32_t height = 0;
  uint32_t width = 0;
  size_t elements() const { return size_t{channels} * height * width; }
  size_t bytes() const { return elements() * dtype_size(dtype); }
  bool operator==(const TensorInfo& o) const {
    return dtype == o.dtype && channels == o.channels && height == o.height && width == o.width;
  }
  bool operator!=(const TensorInfo& o) const { return !(*this == o); }
};

struct ClassScore {
  int32_t class_id = -1;
  float score = 0.f;
  std::string label;
};

struct Prediction {
  std::vector<ClassScore> top_k;  // best first
  std::string model;
  std::string error;  // non-empty: this frame could not be classified (the rest of its batch was)
};

// A kStreamEnd's message (its end reason) when the stream was taken out of the job's config: by a
// live job's reload, or found gone by an archive job's --resume. Readers of the results match it.
inline constexpr const char* kRemovedFromConfig = "removed from the config";
// ... when the job was stopped (Ctrl-C, SIGTERM) before the stream ended.
inline constexpr const char* kStoppedReason = "stopped";
// ... when the job was stopped before the stream opened (an archive job's file still waiting its turn,
// ingest.max_open_streams): the stages downstream count it as ended, publish publishes nothing of it
// (it has no results, and --resume reads it from its start).
inline constexpr const char* kNotOpenedReason = "stopped before it opened";

struct StreamEvent {
  std::string uri;      // redacted: credentials never leave ingest
  std::string message;  // error text or end reason
  uint64_t frames = 0;  // frames emitted by ingest for the stream (on end/error)
  uint64_t dropped = 0; // frames dropped by a live-mode queue (on end/error)
  uint32_t attempt = 0; // kStreamReconnecting / kStreamResumed: the reconnection attempt (from 1)
  int64_t duration_ns = -1;  // kStreamStart: the media's duration (a file's), -1 when unknown or endless
  int64_t file_bytes = -1;   // kStreamStart of a file: its size when it was opened (--resume: has it changed since?)
  std::string file_head{};   // and file_head_hash() of it then (--resume: is it still that recording?)
  // kStreamStart of a file: how far into its media its edit list starts its video (MP4/MOV; 0 for others),
  // which its frames' times are moved by (edit_list_timeline.h). kNotSaid: not a file, or an earlier
  // version's event, whose pts_ms were media times.
  static constexpr int64_t kNotSaid = INT64_MIN;
  int64_t edit_list_ns = kNotSaid;
  std::string warning{};     // kStreamEnd: what is not whole about the end ("the file is cut short: ..."), or empty
  // kStreamEnd of a file whose timestamps started over part way (files joined end to end): how many
  // times, and where the first restart is on the one timeline its pts_ms go on along (-1: never).
  uint32_t timeline_restarts = 0;
  int64_t timeline_restart_ns = -1;
  // kStreamPicture: the JPEG written of the frame in the event's envelope (its message says why not,
  // when it could not be), for the segment of `label` that began at frame `segment_start_seq`.
  std::string picture{};
  std::string label{};
  uint64_t segment_start_seq = 0;
  // kStreamClip: the MP4 written for the segment of `label` that began at `segment_start_seq` ("" and
  // `message` why, when none could be; `message` says why it ends early when it was cut short), its
  // envelope's pts_ns its first frame's, duration_ns its length; `attempt` its part (1, then 2, 3, ...
  // past publish.segments_clip_max_s), and `continues` when the segment goes on in its next part;
  // `turn` how its frames (as stored) are turned to show what the segment's picture showed
  // (orientation_name(): "rotate-0" as stored).
  std::string clip{};
  bool continues = false;
  // kStreamChanged: `message` says what changed ("a reload changed its uri, rotate"); the stream's region and how its
  // frames are turned from now on (orientation_name(), "" when its file's own tag decides), all of them
  // whatever changed, so that whoever shows its frames needs no other source. (`turn`: kStreamClip's and
  // kStreamStart's too; a started event's from ingest, "" where it was not said.)
  std::array<double, 4> roi{0, 0, 1, 1};
  std::string turn{};
};

struct Message {
  MessageKind kind = MessageKind::kFrame;
  Envelope env;
  FrameInfo frame;              // kFrame
  TensorInfo tensor;            // kTensor
  Payload payload;              // kFrame, kTensor
  std::vector<Message> items;   // kBatch: kTensor messages in order
  Prediction prediction;        // kResult
  StreamEvent event;            // stream events
  // A per-frame failure (undecodable payload, bad layout): the frame travels on without a payload
  // and becomes an error result, so every decoded frame still yields exactly one result.
  std::string error;

  static Message stream_event(MessageKind kind, const Envelope& env, StreamEvent event) {
    Message m;
    m.kind = kind;
    m.env = env;
    m.event = std::move(event);
    return m;
  }
};

}  // namespace vapipe
