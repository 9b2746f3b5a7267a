// `vapipe segments --frames DIR`: the picture each segment began with, decoded again from its file
// and written as a JPEG, so that an analyst sees the truck at the gate without opening the video at
// 1:12.400 (and sees at once a segment the classifier got wrong).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <utility>

#include "cli/segments.h"
#include "pipeline/status.h"

namespace vapipe::cli {

// Where the picture of `s` goes under `dir`: <dir>/<stream_id>/<HH-MM-SS.mmm>_<label>.jpg (sorted by
// time within a stream's folder, the time first so that no name is hidden or ".."); a label's characters
// that a file name cannot hold, or that a shell trips on ('/', spaces, quotes, ...), are written as '_'
// (UTF-8 letters are kept).
std::string segment_frame_path(const std::string& dir, const Segment& s);

class SegmentFrames {
 public:
  explicit SegmentFrames(std::string dir);
  ~SegmentFrames();
  SegmentFrames(const SegmentFrames&) = delete;
  SegmentFrames& operator=(const SegmentFrames&) = delete;

  // Writes the first frame of `s` (the one at s.start_ms in the file s.uri names), turned upright as
  // the file says, and returns the picture's path; or why there is none (a camera's stream, whose
  // frames are gone; a file that is missing or no longer reads; no frame with that timestamp).
  Result<std::string> save(const Segment& s);

 private:
  class FileDecoder;
  std::string dir_;
  // The last few files' decoders, most recently used first: a file's segments come one after another
  // without opening it again, and a results file of many streams does not hold them all open.
  std::list<std::pair<std::string, std::unique_ptr<FileDecoder>>> decoders_;
};

}  // namespace vapipe::cli
