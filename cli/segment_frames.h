// `vapipe segments --frames DIR`: a picture of each segment (its best frame, or the one it began
// with), decoded again from its file and written as a JPEG, so that an analyst sees the truck at the
// gate without opening the video at 1:12.400 (and sees at once a segment the classifier got wrong).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cli/segments.h"
#include "pipeline/status.h"

namespace vapipe::cli {

// Where the picture of `s`'s frame at `ms` goes under `dir`: <dir>/<stream_id>/<HH-MM-SS.mmm>_<label>.jpg
// (sorted by time within a stream's folder, the time first so that no name is hidden or ".."); a label's characters
// that a file name cannot hold, or that a shell trips on ('/', spaces, quotes, ...), are written as '_'
// (UTF-8 letters are kept).
std::string segment_frame_path(const std::string& dir, const Segment& s, double ms);

// `vapipe segments --moved FROM TO`: the files the results name under folder FROM are read under
// folder TO (an archive moved to a NAS, or mounted elsewhere on the analyst's machine).
struct MovedFolder {
  std::string from, to;  // absolute paths, without a trailing '/'
};
// Where the file at `path` is now: its path with the longest FROM that it lies under (the folder
// itself or below it, never "/mnt/dvr2" under "/mnt/dvr") replaced by that FROM's TO; else `path`.
std::string path_now(const std::string& path, const std::vector<MovedFolder>& moved);

// Whether the file of a segment's results (s.uri, where `moved` says it is now) is still the one the
// job read: Ok when its size and beginning are what the job opened (s.file_bytes, s.file_head), or
// unknown (not said, or the file missing: save() says that); else FailedPrecondition saying both
// sizes, with `*still_usable` true when it was appended to or cut since (its beginning the same; or,
// for results that do not say it, larger: the frames classified are where they were) and false when
// it is another recording (its beginning differs; or, not said, it is smaller).
Status file_unchanged_since_classified(const Segment& s, const std::vector<MovedFolder>& moved, bool* still_usable);

class SegmentFrames {
 public:
  SegmentFrames(std::string dir, SegmentPicture which, std::vector<MovedFolder> moved = {});
  ~SegmentFrames();
  SegmentFrames(const SegmentFrames&) = delete;
  SegmentFrames& operator=(const SegmentFrames&) = delete;

  // Writes the frame of `s` that stands for it (picture_ms: its first or its best, in the file s.uri
  // names), turned upright as the file (or s.turn) says, cropped to s.roi as its stream was
  // classified, and returns the picture's path; or why there is none (a
  // camera's stream, whose frames are gone; a file that is missing or no longer reads; no frame with
  // that timestamp). A file whose timestamps start over (s.timeline_restart_ms: files joined end to
  // end) is read on the one timeline ingest put its parts on: listed through once, then decoded from
  // its start, frames before the key frame needed left undecoded.
  Result<std::string> save(const Segment& s);
  // The timestamp of the frame that stands for `s` (its pts_ms; -1: the decoder gave none).
  double picture_ms(const Segment& s) const { return which_ == SegmentPicture::kBest ? s.best_ms : s.start_ms; }

 private:
  class FileDecoder;
  std::string dir_;
  SegmentPicture which_;
  std::vector<MovedFolder> moved_;
  // The last few files' decoders, most recently used first: a file's segments come one after another
  // without opening it again, and a results file of many streams does not hold them all open.
  std::list<std::pair<std::string, std::unique_ptr<FileDecoder>>> decoders_;
};

}  // namespace vapipe::cli
