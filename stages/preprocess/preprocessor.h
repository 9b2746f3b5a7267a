// Preprocessing: a decoded frame (I420, NV12 or RGB, any resolution) becomes an RGB tensor of the
// configured size (bilinear, half-pixel centres: the same as torch's interpolate with
// align_corners=False), normalised with mean/std, CHW float32 or float16. The CPU implementation is
// here; the CUDA one implements the same interface (DALI's shape: host header, .cu kernel, CPU
// reference, parity test).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "pipeline/message.h"
#include "pipeline/status.h"

namespace vapipe {

struct FrameView {
  FrameInfo info;
  const std::byte* data = nullptr;  // start of the payload; planes at info.offset[i]
  size_t size = 0;
  int device = -1;                  // >= 0: `data` is GPU memory of that device
  const uint8_t* plane(int i) const { return reinterpret_cast<const uint8_t*>(data) + info.offset[i]; }
};

// Where one frame's tensor goes.
struct TensorOut {
  std::byte* data = nullptr;  // spec().output_info().bytes() bytes
  int device = -1;            // >= 0: GPU memory of that device
};

struct PreprocessSpec {
  uint32_t out_width = 224;
  uint32_t out_height = 224;
  std::array<float, 3> mean{0.485f, 0.456f, 0.406f};  // of each output channel in [0, 1]
  std::array<float, 3> std{0.229f, 0.224f, 0.225f};
  DType dtype = DType::kFloat32;
  // Channels in the order B, G, R (a model trained on OpenCV's images, Caffe's): mean and std are
  // then B's, G's and R's too.
  bool bgr = false;
  // preprocess.resize: letterbox: each frame (or its region) is scaled to fit whole inside the tensor,
  // its shape kept and centred (letterbox_rect), and the rest of the tensor is `pad_rgb` (R, G, B in
  // 0..255), normalised as the frame's pixels are.
  bool letterbox = false;
  std::array<float, 3> pad_rgb{0.f, 0.f, 0.f};
  TensorInfo output_info() const { return TensorInfo{dtype, 3, out_height, out_width}; }
};

class Preprocessor {
 public:
  virtual ~Preprocessor() = default;
  // Writes spec.output_info().bytes() bytes to `out` (host memory). A frame whose layout does not
  // match its payload is kInvalidArgument (that frame only).
  virtual Status run(const FrameView& frame, std::byte* out) = 0;
  // Several frames at once (the CUDA implementation: one kernel launch). Frames and outputs may be
  // host or GPU memory where the implementation supports it. One status per frame; when this returns,
  // the frames have been read and the outputs written (GPU work included).
  virtual std::vector<Status> run_batch(const std::vector<FrameView>& frames, const std::vector<TensorOut>& outs);
  // The CUDA stream the GPU work runs on (GPU implementations), for callers that order around it.
  virtual void* stream() const { return nullptr; }
  // The GPU it runs on; -1: the CPU.
  virtual int device() const { return -1; }
  virtual const PreprocessSpec& spec() const = 0;
};

// `threads`: how many frames of a batch are converted at once (0: one per CPU this process may use).
std::unique_ptr<Preprocessor> make_cpu_preprocessor(const PreprocessSpec& spec, unsigned threads = 1);

// The largest region of `out_width`:`out_height` shape centred in `region` (preprocess.resize:
// center_crop): what torchvision's Resize + CenterCrop keep of a frame, at its full shorter side.
// (The shape's two sides count only by their ratio.)
FrameInfo::Region centered_region(const FrameInfo::Region& region, uint64_t out_width, uint64_t out_height);
// The same for a frame: the crop of its region that is shown in the tensor's shape, its pixels'
// aspect ratio applied (an anamorphic frame's region is cropped as shown, not as stored).
FrameInfo::Region centered_region(const FrameInfo& frame, uint32_t out_width, uint32_t out_height);

// Where a region of `region_width` x `region_height` (or of that shape) lands in an `out_width` x
// `out_height` tensor (preprocess.resize: letterbox): as large as fits with its shape kept (the other
// side rounded to the nearest pixel, at least 1), centred (the odd pixel of the margin after it). An
// empty region or tensor gives the whole tensor.
FrameInfo::Region letterbox_rect(uint64_t region_width, uint64_t region_height, uint32_t out_width,
                                 uint32_t out_height);
// Where `spec` writes a frame whose region is `region` (square pixels): letterbox_rect, or the whole tensor.
FrameInfo::Region output_rect(const PreprocessSpec& spec, const FrameInfo::Region& region);
// Where `spec` writes `frame` (as decoded, before a field of it is taken): letterboxed by the shape its
// region is shown in (FrameInfo::shown_shape: its pixels' aspect ratio applied, and a field read as
// the frame it is of), or the whole tensor.
FrameInfo::Region output_rect(const PreprocessSpec& spec, const FrameInfo& frame);

// Checks that a frame's layout is consistent and fits its payload.
Status validate_frame(const FrameView& frame);

// IEEE 754 binary16 from float, round to nearest even.
uint16_t float_to_half(float f);
float half_to_float(uint16_t h);

}  // namespace vapipe
