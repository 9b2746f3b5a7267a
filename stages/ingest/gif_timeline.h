// Animated (and still) GIFs. GStreamer 1.22 reads GIF only through libav (avdemux_gif, avdec_gif),
// and both go wrong (found 2026-12-07): the demuxer never ends a file (at its end the reads return 0
// bytes, which libav's GIF demuxer reads again for ever, a core at 100%: an archive job with a GIF
// never ended, and the log blamed a network share), and the decoder gives every picture pts 0 (the
// demuxer's packets are timed right: 0, 100 ms, 200 ms, ...).
//
// So the file's frames are counted and timed here, as libav's demuxer times them (each frame lasts
// its Graphic Control Extension's delay; under 2 hundredths of a second, 10, as browsers do): the
// packet of the last frame is followed by an end of stream; each decoded picture takes the time of the
// packet it was decoded from (picture_slots.h).
#pragma once

#include <gst/gst.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/status.h"

namespace vapipe {

struct GifTimeline {
  std::vector<int64_t> pts_ns;       // each frame's, from 0
  std::vector<int64_t> duration_ns;  // each frame's delay
  bool loops = false;                // a NETSCAPE2.0 loop extension (played again by browsers; once here)
  // Its trailer (';') was read: the file ends as a GIF ends (a file cut short is said, and ends after
  // its last whole frame, where libav's reader gives it).
  bool whole = false;
  size_t frames_end = 0;  // the byte after the last whole frame's
  // A file cut short, as its reader is given it (read_gif_timeline): its bytes up to its last whole
  // frame's end and a trailer. libav's GIF reader never ends a file without its trailer (it looks for
  // the next block for ever: a core at 100%, no frame given when the file is small).
  std::shared_ptr<const std::string> mended;
  // A file cut before its first frame ended (read_gif_timeline): no frame, and why ("" otherwise).
  std::string no_frame_because;
  int64_t last_pts_ns() const { return pts_ns.empty() ? -1 : pts_ns.back(); }
};

// The frames of a GIF's bytes; an error says what is wrong where ("not a GIF", "cut short at byte N
// in frame K": the frames before still count). A file cut short inside a frame keeps the frames
// before it.
Result<GifTimeline> parse_gif_timeline(std::string_view bytes);
Result<GifTimeline> read_gif_timeline(const std::string& path);

// On decodebin's avdemux_gif: its source pads end the stream after the last frame's packet (and drop
// anything after it); a file cut short is read as `mended` (its sink pad's pulls at and after the last
// whole frame's end are answered from it).
void end_gif_after_its_last_frame(GstElement* demuxer, std::shared_ptr<const GifTimeline> timeline);

}  // namespace vapipe
