// How an MP4's video is shown: the transformation matrix of its video track's header (tkhd), which a
// phone writes for a portrait video (stored sideways, shown upright) and players apply (browsers,
// VLC, ffmpeg's; GStreamer's qtdemux says it as the image-orientation tag). mp4mux writes none from a
// tag, so a clip of a turned stream (streams[].rotate, a file's own turn) is given it afterwards, in
// place: the same 36 bytes, nothing else of the file moves.
#pragma once

#include <string>

#include "pipeline/message.h"
#include "pipeline/status.h"

namespace vapipe {

// Sets the matrix of the first video track (a track with a picture size) of the MP4 at `path` to show
// its frames as `turn` says (with the translation a phone writes, so the picture lands at the origin).
// Errors name the file: not an MP4 (no 'ftyp' first), no index (no 'moov'), no video track, a box that
// runs past what holds it (a file cut short).
Status set_mp4_orientation(const std::string& path, Orientation turn);

// The turn the first video track's matrix says; an error for a matrix that is none of the eight
// (a scale, a shear) or a file as above.
Result<Orientation> mp4_orientation(const std::string& path);

}  // namespace vapipe
