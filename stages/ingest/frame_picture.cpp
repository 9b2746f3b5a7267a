#include "stages/ingest/frame_picture.h"

#include <cstdint>
#include <gst/video/video.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

#include "pipeline/atomic_file.h"
#include "stages/ingest/stream_fan_out.h"

namespace vapipe {

namespace {

constexpr GstClockTime kConvertTimeout = 10 * GST_SECOND;

// `frame` converted to `caps` (taken) by GStreamer's converters; `failure` says which step failed.
Result<GstSample*> convert_sample(GstSample* frame, GstCaps* caps, const std::string& failure) {
  GError* err = nullptr;
  GstSample* converted = gst_video_convert_sample(frame, caps, kConvertTimeout, &err);
  gst_caps_unref(caps);
  if (!converted) {
    const std::string why = err ? err->message : "unknown error";
    if (err) g_error_free(err);
    return Internal(failure + ": " + why);
  }
  return converted;
}

// An I420 sample of `info`'s size whose planes `fill` writes; a new reference.
template <typename Fill>
Result<GstSample*> new_i420(uint32_t width, uint32_t height, Fill fill) {
  GstVideoInfo out;
  gst_video_info_set_format(&out, GST_VIDEO_FORMAT_I420, width, height);
  GstBuffer* buffer = gst_buffer_new_allocate(nullptr, GST_VIDEO_INFO_SIZE(&out), nullptr);
  GstVideoFrame to;
  if (!buffer || !gst_video_frame_map(&to, &out, buffer, GST_MAP_WRITE)) {
    if (buffer) gst_buffer_unref(buffer);
    return Internal("cannot write a picture of " + std::to_string(width) + "x" + std::to_string(height));
  }
  fill(to);
  gst_video_frame_unmap(&to);
  GstCaps* caps = gst_video_info_to_caps(&out);
  GstSample* sample = gst_sample_new(buffer, caps, nullptr, nullptr);
  gst_caps_unref(caps);
  gst_buffer_unref(buffer);
  return sample;
}

// Maps an I420 sample for reading.
Status map_i420(GstSample* frame, GstVideoInfo* info, GstVideoFrame* mapped) {
  GstBuffer* buffer = gst_sample_get_buffer(frame);
  if (!buffer || !gst_video_info_from_caps(info, gst_sample_get_caps(frame)) ||
      GST_VIDEO_INFO_FORMAT(info) != GST_VIDEO_FORMAT_I420) {
    return Internal("the decoded frame is not I420");
  }
  if (!gst_video_frame_map(mapped, info, buffer, GST_MAP_READ)) return Internal("cannot read the decoded frame");
  return Status::Ok();
}

}  // namespace

Result<GstSample*> crop_i420_to_roi(GstSample* frame, const std::array<double, 4>& roi) {
  GstVideoInfo in;
  GstVideoFrame from;
  VAPIPE_RETURN_IF_ERROR(map_i420(frame, &in, &from));
  FrameInfo f;
  f.width = GST_VIDEO_INFO_WIDTH(&in);
  f.height = GST_VIDEO_INFO_HEIGHT(&in);
  crop_to_region(roi, &f);
  const FrameInfo::Region r = f.region();
  auto cropped = new_i420(r.width, r.height, [&](GstVideoFrame& to) {
    for (guint plane = 0; plane < 3; ++plane) {
      const bool chroma = plane > 0;
      const uint32_t x = chroma ? r.x / 2 : r.x, y = chroma ? r.y / 2 : r.y;
      const auto in_w = static_cast<uint32_t>(GST_VIDEO_FRAME_COMP_WIDTH(&from, plane));
      const auto in_h = static_cast<uint32_t>(GST_VIDEO_FRAME_COMP_HEIGHT(&from, plane));
      const uint32_t w = std::min<uint32_t>(GST_VIDEO_FRAME_COMP_WIDTH(&to, plane), in_w - x);
      const uint32_t h = std::min<uint32_t>(GST_VIDEO_FRAME_COMP_HEIGHT(&to, plane), in_h - y);
      const auto* src = static_cast<const guint8*>(GST_VIDEO_FRAME_PLANE_DATA(&from, plane));
      auto* dst = static_cast<guint8*>(GST_VIDEO_FRAME_PLANE_DATA(&to, plane));
      const int src_stride = GST_VIDEO_FRAME_PLANE_STRIDE(&from, plane);
      const int dst_stride = GST_VIDEO_FRAME_PLANE_STRIDE(&to, plane);
      for (uint32_t row = 0; row < h; ++row) std::memcpy(dst + row * dst_stride, src + (y + row) * src_stride + x, w);
    }
  });
  gst_video_frame_unmap(&from);
  if (!cropped.ok()) return cropped.status().with_context("the region's picture");
  return cropped;
}

Result<GstSample*> turn_i420(GstSample* frame, Orientation turn) {
  if (turn == Orientation::kAsStored) return gst_sample_ref(frame);
  GstVideoInfo in;
  GstVideoFrame from;
  VAPIPE_RETURN_IF_ERROR(map_i420(frame, &in, &from));
  const OrientationMap map = orientation_map(turn);
  const auto width = static_cast<uint32_t>(GST_VIDEO_INFO_WIDTH(&in));
  const auto height = static_cast<uint32_t>(GST_VIDEO_INFO_HEIGHT(&in));
  auto turned = new_i420(map.transpose ? height : width, map.transpose ? width : height, [&](GstVideoFrame& to) {
    for (guint plane = 0; plane < 3; ++plane) {
      // Each plane turns on its own: a chroma plane of the upright picture is the stored one's turned.
      const auto stored_w = static_cast<uint32_t>(GST_VIDEO_FRAME_COMP_WIDTH(&from, plane));
      const auto stored_h = static_cast<uint32_t>(GST_VIDEO_FRAME_COMP_HEIGHT(&from, plane));
      const auto up_w = std::min<uint32_t>(GST_VIDEO_FRAME_COMP_WIDTH(&to, plane), map.transpose ? stored_h : stored_w);
      const auto up_h = std::min<uint32_t>(GST_VIDEO_FRAME_COMP_HEIGHT(&to, plane), map.transpose ? stored_w : stored_h);
      const auto* src = static_cast<const guint8*>(GST_VIDEO_FRAME_PLANE_DATA(&from, plane));
      auto* dst = static_cast<guint8*>(GST_VIDEO_FRAME_PLANE_DATA(&to, plane));
      const int src_stride = GST_VIDEO_FRAME_PLANE_STRIDE(&from, plane);
      const int dst_stride = GST_VIDEO_FRAME_PLANE_STRIDE(&to, plane);
      for (uint32_t uy = 0; uy < up_h; ++uy) {
        guint8* out = dst + static_cast<size_t>(uy) * dst_stride;
        for (uint32_t ux = 0; ux < up_w; ++ux) {
          uint32_t x = map.transpose ? uy : ux, y = map.transpose ? ux : uy;
          if (map.mirror_x) x = stored_w - 1 - x;
          if (map.mirror_y) y = stored_h - 1 - y;
          out[ux] = src[static_cast<size_t>(y) * src_stride + x];
        }
      }
    }
  });
  gst_video_frame_unmap(&from);
  if (!turned.ok()) return turned.status().with_context(std::string("the picture turned ") + orientation_name(turn));
  return turned;
}

Result<GstSample*> host_i420(GstSample* frame) {
  GstBuffer* buffer = gst_sample_get_buffer(frame);
  GstCaps* caps = gst_sample_get_caps(frame);
  GstVideoInfo info;
  if (!buffer || !caps || !gst_video_info_from_caps(&info, caps)) return Internal("the decoded frame has no video caps");
  GstCapsFeatures* features = gst_caps_get_features(caps, 0);
  const bool system = !features || gst_caps_features_is_equal(features, GST_CAPS_FEATURES_MEMORY_SYSTEM_MEMORY);
  GstSample* host = nullptr;
  if (system) {
    host = gst_sample_ref(frame);
  } else {
    // NVDEC's CUDA memory: read through a map without GST_MAP_CUDA, which GStreamer downloads to the
    // host, into a frame of plain system-memory caps (the converters take no CUDA memory).
    GstVideoFrame from;
    if (!gst_video_frame_map(&from, &info, buffer, GST_MAP_READ)) return Internal("cannot read the decoded frame");
    GstBuffer* copy = gst_buffer_new_allocate(nullptr, GST_VIDEO_INFO_SIZE(&info), nullptr);
    GstVideoFrame to;
    if (!copy || !gst_video_frame_map(&to, &info, copy, GST_MAP_WRITE)) {
      gst_video_frame_unmap(&from);
      if (copy) gst_buffer_unref(copy);
      return Internal("cannot copy the decoded frame to the host");
    }
    const bool copied = gst_video_frame_copy(&to, &from);
    gst_video_frame_unmap(&to);
    gst_video_frame_unmap(&from);
    if (!copied) {
      gst_buffer_unref(copy);
      return Internal("cannot copy the decoded frame to the host");
    }
    GstCaps* plain = gst_caps_copy(caps);
    gst_caps_set_features(plain, 0, gst_caps_features_new(GST_CAPS_FEATURE_MEMORY_SYSTEM_MEMORY, nullptr));
    host = gst_sample_new(copy, plain, nullptr, nullptr);
    gst_caps_unref(plain);
    gst_buffer_unref(copy);
  }
  if (GST_VIDEO_INFO_FORMAT(&info) == GST_VIDEO_FORMAT_I420) return host;
  auto converted = convert_sample(host, gst_caps_new_simple("video/x-raw", "format", G_TYPE_STRING, "I420", nullptr),
                                  "cannot convert the decoded frame to I420");
  gst_sample_unref(host);
  return converted;
}

Result<std::string> encode_jpeg(GstSample* frame) {
  VAPIPE_ASSIGN_OR_RETURN(GstSample * jpeg, convert_sample(frame, gst_caps_new_empty_simple("image/jpeg"),
                                                            "cannot encode the frame as JPEG"));
  GstBuffer* buffer = gst_sample_get_buffer(jpeg);
  GstMapInfo map;
  std::string bytes;
  if (buffer && gst_buffer_map(buffer, &map, GST_MAP_READ)) {
    bytes.assign(reinterpret_cast<const char*>(map.data), map.size);
    gst_buffer_unmap(buffer, &map);
  }
  gst_sample_unref(jpeg);
  if (bytes.empty()) return Internal("the JPEG encoder gave nothing");
  return bytes;
}

std::pair<int, int> pixel_aspect_of(GstSample* frame) {
  GstVideoInfo info;
  if (gst_video_info_from_caps(&info, gst_sample_get_caps(frame)) && GST_VIDEO_INFO_PAR_N(&info) > 0 &&
      GST_VIDEO_INFO_PAR_D(&info) > 0) {
    return {GST_VIDEO_INFO_PAR_N(&info), GST_VIDEO_INFO_PAR_D(&info)};
  }
  return {1, 1};
}

Result<GstSample*> square_pixels_i420(GstSample* frame, int par_n, int par_d) {
  GstVideoInfo info;
  if (!gst_video_info_from_caps(&info, gst_sample_get_caps(frame))) return Internal("the picture has no video caps");
  const int64_t w = GST_VIDEO_INFO_WIDTH(&info), h = GST_VIDEO_INFO_HEIGHT(&info);
  // Widened or made taller, whichever keeps every stored pixel (rounded to the nearest even size).
  const int64_t width = par_n > par_d ? std::max<int64_t>(2, (w * par_n / par_d + 1) & ~int64_t{1}) : w;
  const int64_t height = par_n < par_d ? std::max<int64_t>(2, (h * par_d / par_n + 1) & ~int64_t{1}) : h;
  if (width == w && height == h) return gst_sample_ref(frame);
  return convert_sample(frame,
                        gst_caps_new_simple("video/x-raw", "format", G_TYPE_STRING, "I420", "width", G_TYPE_INT,
                                            static_cast<gint>(width), "height", G_TYPE_INT, static_cast<gint>(height),
                                            "pixel-aspect-ratio", GST_TYPE_FRACTION, 1, 1, nullptr),
                        "cannot scale the picture to square pixels");
}

Status write_frame_picture(GstSample* decoded, Orientation turn, const std::array<double, 4>& roi,
                           const std::string& path) {
  // An anamorphic frame's pixels are shown wider or narrower than tall: its picture is scaled to the
  // shape it is shown in (a picture viewer takes every pixel square), after its turn and region.
  auto [par_n, par_d] = pixel_aspect_of(decoded);
  if (orientation_map(turn).transpose) std::swap(par_n, par_d);
  VAPIPE_ASSIGN_OR_RETURN(GstSample * picture, host_i420(decoded));
  for (int step = 0; step < 3; ++step) {
    if (step == 1 && roi == std::array<double, 4>{0, 0, 1, 1}) continue;
    if (step == 2 && par_n == par_d) break;
    auto next = step == 0   ? turn_i420(picture, turn)
                : step == 1 ? crop_i420_to_roi(picture, roi)
                            : square_pixels_i420(picture, par_n, par_d);
    gst_sample_unref(picture);
    if (!next.ok()) return next.status();
    picture = next.value();
  }
  auto bytes = encode_jpeg(picture);
  gst_sample_unref(picture);
  if (!bytes.ok()) return bytes.status();
  return write_picture_file(path, *bytes);
}

Status write_picture_file(const std::string& path, const std::string& jpeg) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) return Unavailable("cannot make the folder of " + path + ": " + ec.message());
  return write_file_atomically(path, jpeg, 0644);
}

}  // namespace vapipe
