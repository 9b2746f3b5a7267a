// Pictures of live streams when their segments begin (publish.segments_pictures_dir). Publish decides
// that a segment began, long after the frames it began with left ingest's pool; so it asks ingest, the
// one stage that still has a stream's frames (compressed, for a few seconds: recent_frames.h in
// stages/ingest), for a picture of the segment's best or first frame, or else of the next one. The request
// crosses a ZeroMQ PUB socket that publish binds (picture_requests_endpoint, pipeline/job_layout.h) to
// the SUB socket of each lane's ingest; the lane that has the stream writes the JPEG and says so with
// a kStreamPicture event (its envelope the pictured frame's), which travels the pipeline to publish
// like any stream event.
// A request is never waited for: when no ingest listens (one restarting), it is lost, and publish says
// the picture missing once its answer is overdue (PublishStage::kPictureAnswerTimeout); ingest says
// each picture it could not take.
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "pipeline/status.h"

namespace vapipe {

struct PictureRequest {
  std::string stream_id;
  std::string label;               // the segment's
  uint64_t segment_start_seq = 0;  // the segment's first frame
  std::string path;                // where the JPEG (the clip's MP4) goes; clip_end: none
  // The frame to picture (the segment's best or first, publish.segments_picture_frame): its seq, as
  // the stream numbers it, and timestamp; -1: the next frame ingest decodes.
  int64_t frame_seq = -1;
  int64_t frame_pts_ns = -1;
  // picture: a JPEG of that frame. clip_start: a clip of the segment (publish.segments_clips), from
  // before frame_pts_ns (its first frame) on; clip_end: that clip ends after frame_pts_ns (its last).
  // clip_goes_on: the segment went on across a reconnection (publish.segments_reconnect_grace_s) with
  // its frame at frame_pts_ns: its clip, cut when the stream's decoder started over, goes on in a next
  // part from before it.
  // clips_before: a publish started again after a crash ends, at their next frame, every clip begun
  // before `before_unix_ns` (the segments it no longer follows), of every stream (stream_id "").
  enum class Kind { kPicture, kClipStart, kClipEnd, kClipsBefore, kClipGoesOn };
  Kind kind = Kind::kPicture;
  int64_t before_unix_ns = 0;
};

std::string encode_picture_request(const PictureRequest& request);
Result<PictureRequest> decode_picture_request(const std::string& text);

// A label as a file name's part: letters (UTF-8 ones too), digits, '-', '.', '_' kept, the rest '_'.
std::string label_for_file_name(const std::string& label);
// A stream id as a folder's name: as it is when it is one (validate_stream_id); else as a label's, and
// never "." or ".." (an id read from a results file of elsewhere: "../../x" wrote outside the folder
// asked for; found 2026-12-07).
std::string stream_for_file_name(const std::string& stream_id);

// DIR/<stream>/<YYYY-MM-DD>/<HH-MM-SS.mmm>_<label>.jpg, the date and time the local ones of
// `unix_ms` (when the segment's first frame was captured): a day's pictures in a folder, named in order.
std::string segment_picture_path(const std::string& dir, const std::string& stream_id, const std::string& label,
                                 double unix_ms);
// The segment's clip (publish.segments_clips): its picture's path with .mp4 for .jpg.
std::string segment_clip_path(const std::string& picture_path);

// A segment's file, by its name: a clip (.mp4; .mov for a Motion JPEG camera's), or a picture.
inline bool is_clip_file(const std::string& path) {
  return path.size() > 4 &&
         (path.compare(path.size() - 4, 4, ".mp4") == 0 || path.compare(path.size() - 4, 4, ".mov") == 0);
}
// Its media type, as publish serves and attaches it: video/mp4, video/quicktime or image/jpeg.
inline const char* attachment_content_type(const std::string& path) {
  if (!is_clip_file(path)) return "image/jpeg";
  return path.compare(path.size() - 4, 4, ".mov") == 0 ? "video/quicktime" : "video/mp4";
}

// publish.segments_pictures_keep_days: removes the day folders DIR/<stream>/<YYYY-MM-DD> older than the
// `keep_days` latest days by `now`'s local date (today counts as one); folders and files of any other
// name are never touched. The folders removed, for the log.
std::vector<std::string> prune_segment_pictures(const std::string& dir, uint32_t keep_days, std::time_t now);

// Publish's end: binds; send() never blocks (a request nobody receives is dropped).
class PictureRequestSender {
 public:
  static Result<std::unique_ptr<PictureRequestSender>> bind(const std::string& endpoint);
  Status send(const PictureRequest& request);

 private:
  explicit PictureRequestSender(zmq::socket_t socket) : socket_(std::move(socket)) {}
  zmq::socket_t socket_;
};

// Ingest's end: connects (before or after publish binds); poll() takes what arrived, without waiting.
class PictureRequestReceiver {
 public:
  static Result<std::unique_ptr<PictureRequestReceiver>> connect(const std::string& endpoint);
  // Malformed requests are logged and skipped.
  std::vector<PictureRequest> poll();

 private:
  explicit PictureRequestReceiver(zmq::socket_t socket) : socket_(std::move(socket)) {}
  zmq::socket_t socket_;
};

}  // namespace vapipe
