#include "pipeline/message.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace vapipe {

const char* message_kind_name(MessageKind kind) {
  switch (kind) {
    case MessageKind::kFrame: return "frame";
    case MessageKind::kTensor: return "tensor";
    case MessageKind::kBatch: return "batch";
    case MessageKind::kResult: return "result";
    case MessageKind::kStreamStart: return "stream-start";
    case MessageKind::kStreamEnd: return "stream-end";
    case MessageKind::kStreamError: return "stream-error";
    case MessageKind::kStreamReconnecting: return "stream-reconnecting";
    case MessageKind::kStreamResumed: return "stream-resumed";
    case MessageKind::kStreamPicture: return "stream-picture";
    case MessageKind::kStreamClip: return "stream-clip";
    case MessageKind::kStreamChanged: return "stream-changed";
  }
  return "unknown";
}

const char* pixel_format_name(PixelFormat f) {
  switch (f) {
    case PixelFormat::kI420: return "I420";
    case PixelFormat::kNV12: return "NV12";
    case PixelFormat::kRGB: return "RGB";
  }
  return "unknown";
}

const char* orientation_name(Orientation o) {
  switch (o) {
    case Orientation::kAsStored: return "rotate-0";
    case Orientation::kRotate90: return "rotate-90";
    case Orientation::kRotate180: return "rotate-180";
    case Orientation::kRotate270: return "rotate-270";
    case Orientation::kFlipHorizontal: return "flip-rotate-0";
    case Orientation::kFlipVertical: return "flip-rotate-180";
    case Orientation::kTranspose: return "flip-rotate-270";  // mirrored, then turned 270 degrees clockwise
    case Orientation::kTransverse: return "flip-rotate-90";
  }
  return "unknown";
}

std::optional<Orientation> orientation_from_tag(const std::string& tag) {
  for (uint8_t i = 0; i <= kMaxOrientation; ++i) {
    if (tag == orientation_name(static_cast<Orientation>(i))) return static_cast<Orientation>(i);
  }
  return std::nullopt;
}

OrientationMap orientation_map(Orientation o) {
  // videoflip's turns: 90R shows stored (uy, H-1-ux) at upright (ux, uy); 90L (W-1-uy, ux); UL_LR
  // (uy, ux); UR_LL (W-1-uy, H-1-ux).
  switch (o) {
    case Orientation::kAsStored: return {false, false, false};
    case Orientation::kRotate90: return {true, false, true};
    case Orientation::kRotate180: return {false, true, true};
    case Orientation::kRotate270: return {true, true, false};
    case Orientation::kFlipHorizontal: return {false, true, false};
    case Orientation::kFlipVertical: return {false, false, true};
    case Orientation::kTranspose: return {true, false, false};
    case Orientation::kTransverse: return {true, true, true};
  }
  return {};
}

const char* field_read_name(FieldRead f) {
  switch (f) {
    case FieldRead::kWholeFrame: return "whole frame";
    case FieldRead::kTopField: return "top field";
    case FieldRead::kBottomField: return "bottom field";
  }
  return "unknown";
}

FrameInfo field_picture(const FrameInfo& frame) {
  if (frame.field == FieldRead::kWholeFrame || frame.height < 4) return frame;
  FrameInfo f = frame;
  f.field = FieldRead::kWholeFrame;
  const bool bottom = frame.field == FieldRead::kBottomField;
  // Even, so that the field's chroma rows (half its rows, rounded up) are all there for either field
  // of a frame whose height is not a multiple of 4 (486-row NTSC: 242 rows a field, the last left out).
  f.height = (frame.height / 2) & ~1u;
  const int planes = frame.format == PixelFormat::kRGB ? 1 : frame.format == PixelFormat::kNV12 ? 2 : 3;
  for (int p = 0; p < planes; ++p) {
    if (bottom) f.offset[p] += frame.stride[p];
    f.stride[p] *= 2;
  }
  // The crop along the stored rows: its upright y axis, or x when the picture is turned a quarter.
  if (frame.crop[2] && frame.crop[3]) {
    const int start = orientation_map(frame.orientation).transpose ? 0 : 1, length = start + 2;
    const uint32_t first = std::min(frame.crop[start] / 2, f.height - 1);
    f.crop[start] = first;
    f.crop[length] = std::clamp<uint32_t>(frame.crop[length] / 2, 1, f.height - first);
  }
  return f;
}

const char* dtype_name(DType t) { return t == DType::kFloat16 ? "float16" : "float32"; }

size_t FrameInfo::required_bytes() const {
  if (width == 0 || height == 0) return 0;
  const size_t h = height, ch = (height + 1) / 2, w = width, cw = (width + 1) / 2;
  switch (format) {
    case PixelFormat::kRGB:
      if (stride[0] < w * 3) return 0;
      return offset[0] + stride[0] * h;
    case PixelFormat::kI420:
      if (stride[0] < w || stride[1] < cw || stride[2] < cw) return 0;
      return std::max({offset[0] + stride[0] * h, offset[1] + stride[1] * ch, offset[2] + stride[2] * ch});
    case PixelFormat::kNV12:
      if (stride[0] < w || stride[1] < cw * 2) return 0;
      return std::max(offset[0] + stride[0] * h, offset[1] + stride[1] * ch);
  }
  return 0;
}

size_t packed_frame_bytes(PixelFormat format, uint32_t width, uint32_t height) {
  const size_t w = width, h = height, chroma = size_t{(width + 1) / 2} * ((height + 1) / 2);
  return format == PixelFormat::kRGB ? w * h * 3 : w * h + 2 * chroma;
}

FrameSize fit_frame_within(PixelFormat format, uint32_t width, uint32_t height, size_t max_bytes) {
  if (width == 0 || height == 0 || packed_frame_bytes(format, width, height) <= max_bytes) return {width, height};
  // Bytes grow with the area: start a little above width x sqrt(max / bytes) and step the width down,
  // the height following it (the nearest even number of the frame's shape), until the frame fits.
  const double scale = std::sqrt(static_cast<double>(max_bytes) / packed_frame_bytes(format, width, height));
  const double aspect = static_cast<double>(height) / width;
  auto even_near = [](double v) { return std::max<uint32_t>(2, static_cast<uint32_t>(std::lround(v / 2)) * 2); };
  for (uint32_t w = std::min(width & ~1u, even_near(width * scale) + 2); w >= 2; w -= 2) {
    const FrameSize fit{w, even_near(w * aspect)};
    if (packed_frame_bytes(format, fit.width, fit.height) <= max_bytes) return fit;
  }
  return {2, 2};
}

}  // namespace vapipe
