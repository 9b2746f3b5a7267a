// `vapipe segments --clips DIR`: a video clip of each segment of a file, cut from the file as it is
// (its compressed frames put in an MP4, not decoded or encoded again: the recording's own quality, at
// the speed of reading it), from the key frame at or before `pre` ahead of the segment's first frame
// to `post` after its last, so that an analyst watches the truck come and go without the 24-hour
// recording around it. A live job makes its own as the segments happen (publish.segments_clips).
#pragma once

#include <string>
#include <vector>

#include "cli/segment_frames.h"
#include "cli/segments.h"
#include "pipeline/status.h"

namespace vapipe::cli {

// <dir>/<stream_id>/<HH-MM-SS.mmm>_<label>.mp4, at the segment's first frame (as --frames names a
// picture). (SegmentClips::save gives a Matroska or WebM file's clip of a codec other than H.264 and
// H.265 the extension .mkv: it keeps its container.)
std::string segment_clip_file(const std::string& dir, const Segment& s);

class SegmentClips {
 public:
  SegmentClips(std::string dir, double pre_s, double post_s, std::vector<MovedFolder> moved = {})
      : dir_(std::move(dir)), pre_s_(pre_s), post_s_(post_s), moved_(std::move(moved)) {}

  // Writes the clip of `s` (of the file s.uri names, or where --moved says it is now) and returns its
  // path; or why there is none: FailedPrecondition for a stream whose frames cannot be read again (a
  // camera's), NotFound for a missing file or a segment without timestamps, others for a file that does
  // not read or a codec an MP4 does not hold as it is. A --join's segment is cut from the file of its
  // first frame, up to that file's end at most.
  Result<std::string> save(const Segment& s) const;

 private:
  std::string dir_;
  double pre_s_, post_s_;
  std::vector<MovedFolder> moved_;
};

}  // namespace vapipe::cli
