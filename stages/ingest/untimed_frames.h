// Frames of a file that carry no timestamp. A raw .mjpeg (JPEG pictures one after another, as cameras
// and `ffmpeg -f mjpeg` write them) has no clock: jpegparse times its first picture 0 and none after,
// so 49 of 50 results had pts_ms null, and streams[].from, to and max_fps could not pick frames (found
// 2026-12-07). Each untimed picture is timed one frame after the one before it, by the frame rate its
// caps say, or 25 frames a second when they say none (as ffmpeg and players do: a raw MJPEG stream has
// no rate of its own); said once in the stream's log. A picture that has a timestamp keeps it (an
// MPEG-TS frame without one, among timed ones, is put one frame after the one before it too).
#pragma once

#include <gst/gst.h>

#include <string>

namespace vapipe {

inline constexpr int kUntimedFramesPerSecond = 25;

// The timestamp for a picture without one: one frame after `previous` (GST_CLOCK_TIME_NONE: the
// first of its segment, at `segment_start`). `previous_duration` (NONE: not known) counts before
// `frame_ns` (from the caps; 0: not known, then 1/25 s).
GstClockTime untimed_picture_pts(GstClockTime previous, GstClockTime previous_duration, GstClockTime frame_ns,
                                 GstClockTime segment_start);

// One frame's time by a caps event's frame rate, rounded to the ns; 0 when it is not a caps event or
// says no rate (0/1: a still or a variable rate).
GstClockTime frame_ns_of_caps_event(GstEvent* event);

// On a file's decoder's source pad: times its untimed pictures so.
void time_untimed_pictures(GstPad* decoder_src, const std::string& stream_id);

}  // namespace vapipe
