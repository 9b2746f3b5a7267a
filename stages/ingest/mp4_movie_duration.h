// An MP4 trimmed without re-encoding from a long-GOP recording (`ffmpeg -ss 2 -t 3 -c copy` of a
// camera's 4 s GOPs) was read short by GStreamer 1.22's qtdemux, in silence: 51 of its 75 frames,
// or only the hidden key frame when the trim starts further into its GOP. qtdemux ends its read at
// the first key frame whose media time (a time in the track, before the edit list) reaches the movie's
// duration (a time on the edit list's timeline): the two differ by the edit's start, and a trim's
// movie duration is the part shown. The movie's duration (mvhd) is read as that end time plus the
// edit's start, as the comparison needs, so that the part shown is read whole; qtdemux's own per-track
// edit segments still end the read where the edit list does. The duration downstream asks for stays
// the file's (a query answered from the bytes as they were).
#pragma once

#include <gst/gst.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace vapipe {

// Where a moov box's movie duration is, and the value it is read as.
struct MovieDurationPatch {
  size_t duration_at = 0;  // offset of mvhd's duration field in the moov box's bytes
  int duration_size = 4;   // 4 (version 0) or 8 (version 1)
  uint32_t timescale = 0;  // the movie's
  uint64_t duration = 0;   // as written: the part the edit lists show
  uint64_t read_as = 0;    // each edit's end on the timeline plus its start in its media, at the most
};

// For `moov` (a whole moov box, header included): the patch its edit lists need; nothing for a movie
// whose edits start at its media's start (or close enough: within its duration), a fragmented one
// (mvex), or bytes that do not parse.
std::optional<MovieDurationPatch> movie_duration_past_edit_lists(std::string_view moov);

// On a qtdemux reading a file (pull mode): its moov read is patched as above, and the duration queries
// its source pads answer are the file's own.
void read_trimmed_mp4s_whole(GstElement* qtdemux);

}  // namespace vapipe
