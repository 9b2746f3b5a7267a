// A decoded frame as a picture a person looks at: a JPEG of what the model sees of it, upright (the
// frame's orientation: a file's tag, streams[].rotate/mirror) and of the stream's region (streams[].roi),
// at the frame's own resolution. For live pictures of segments (publish.segments_pictures_dir) and
// `vapipe segments --frames`. GStreamer's own converters and its jpegenc do the pixels' work.
#pragma once

#include <gst/gst.h>

#include <array>
#include <string>
#include <utility>

#include "pipeline/message.h"
#include "pipeline/status.h"

namespace vapipe {

// The region `roi` (fractions of the upright picture, streams[].roi) of an upright I420 frame, in the
// pixels ingest crops for preprocessing (crop_to_region), as an I420 sample of its own (its chroma
// from the nearest even row and column: a picture, not a tensor). Kept in I420, as whole pictures
// are, so that a region's picture has the levels of its frame's. A new reference.
Result<GstSample*> crop_i420_to_roi(GstSample* frame, const std::array<double, 4>& roi);

// An I420 frame turned as `turn` says (stored -> upright, as preprocessing reads it). A new reference.
Result<GstSample*> turn_i420(GstSample* frame, Orientation turn);

// A decoded frame's pixel aspect ratio (width, height) from its caps; 1:1 when they say none.
std::pair<int, int> pixel_aspect_of(GstSample* frame);

// An I420 frame whose pixels are `par_n`:`par_d` wide:tall, scaled to square pixels (widened, or
// made taller, so that no stored pixel is lost); a new reference (to `frame` itself when square).
Result<GstSample*> square_pixels_i420(GstSample* frame, int par_n, int par_d);

// `frame` (any format ingest decodes to, in host or CUDA memory) as an I420 frame in host memory.
Result<GstSample*> host_i420(GstSample* frame);

// The JPEG bytes of a frame.
Result<std::string> encode_jpeg(GstSample* frame);

// JPEG bytes written at `path`, its folders made; written whole, then renamed, so that a reader never
// sees half a picture.
Status write_picture_file(const std::string& path, const std::string& jpeg);

// A decoded frame turned, cropped and written as a JPEG at `path` (its folders made; written whole, then
// renamed, so a reader never sees half a picture).
Status write_frame_picture(GstSample* decoded, Orientation turn, const std::array<double, 4>& roi,
                           const std::string& path);

}  // namespace vapipe
