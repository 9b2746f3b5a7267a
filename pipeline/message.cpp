#include "pipeline/message.h"

#include <algorithm>

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

}  // namespace vapipe
