// Fused preprocessing kernel: I420 / NV12 / RGB -> bilinear resize -> RGB -> (v/255 - mean)/std ->
// CHW float32 or float16, one thread per output pixel. The arithmetic follows cpu_preprocessor.cpp
// step for step, so the two agree to float rounding.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "stages/preprocess/cuda/cuda_preprocessor.h"

namespace vapipe {
namespace {

std::string cuda_text(cudaError_t e) { return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e); }

struct KernelParams {
  int format;  // PixelFormat
  int in_w, in_h;
  int stride0, stride1, stride2;
  size_t offset0, offset1, offset2;
  float y_scale, y_offset, c_scale, cr_r, cb_g, cr_g, cb_b;
  int out_w, out_h;
  float scale[3], bias[3];
  bool half;
};

__device__ inline void tap(float scale, int d, int in, int* i0, int* i1, float* w1) {
  float src = fmaxf(__fmul_rn(scale, __fadd_rn(static_cast<float>(d), 0.5f)) - 0.5f, 0.0f);
  int i = static_cast<int>(src);
  *i0 = i;
  *i1 = i + (i < in - 1 ? 1 : 0);
  *w1 = src - static_cast<float>(i);
}

__device__ inline float lerp2(float a, float b, float c, float d, float wx, float wy) {
  const float top = a + (b - a) * wx;
  const float bottom = c + (d - c) * wx;
  return top + (bottom - top) * wy;
}

__global__ void preprocess_kernel(const uint8_t* __restrict__ src, void* __restrict__ dst, KernelParams p) {
  const int ox = blockIdx.x * blockDim.x + threadIdx.x;
  const int oy = blockIdx.y * blockDim.y + threadIdx.y;
  if (ox >= p.out_w || oy >= p.out_h) return;
  int x0, x1, y0, y1;
  float wx, wy;
  tap(static_cast<float>(p.in_w) / static_cast<float>(p.out_w), ox, p.in_w, &x0, &x1, &wx);
  tap(static_cast<float>(p.in_h) / static_cast<float>(p.out_h), oy, p.in_h, &y0, &y1, &wy);
  float rgb[3];
  if (p.format == static_cast<int>(PixelFormat::kRGB)) {
    const uint8_t* r0 = src + p.offset0 + static_cast<size_t>(y0) * p.stride0;
    const uint8_t* r1 = src + p.offset0 + static_cast<size_t>(y1) * p.stride0;
    for (int c = 0; c < 3; ++c) rgb[c] = lerp2(r0[x0 * 3 + c], r0[x1 * 3 + c], r1[x0 * 3 + c], r1[x1 * 3 + c], wx, wy);
  } else {
    const bool nv12 = p.format == static_cast<int>(PixelFormat::kNV12);
    const uint8_t* yp = src + p.offset0;
    const uint8_t* up = src + p.offset1;
    const uint8_t* vp = nv12 ? src + p.offset1 + 1 : src + p.offset2;
    const int us = p.stride1, vs = nv12 ? p.stride1 : p.stride2, step = nv12 ? 2 : 1;
    const int c0 = (x0 / 2) * step, c1 = (x1 / 2) * step;
    const float yy = (lerp2(yp[y0 * p.stride0 + x0], yp[y0 * p.stride0 + x1], yp[y1 * p.stride0 + x0],
                            yp[y1 * p.stride0 + x1], wx, wy) - p.y_offset) * p.y_scale;
    const float uu = (lerp2(up[(y0 / 2) * us + c0], up[(y0 / 2) * us + c1], up[(y1 / 2) * us + c0],
                            up[(y1 / 2) * us + c1], wx, wy) - 128.f) * p.c_scale;
    const float vv = (lerp2(vp[(y0 / 2) * vs + c0], vp[(y0 / 2) * vs + c1], vp[(y1 / 2) * vs + c0],
                            vp[(y1 / 2) * vs + c1], wx, wy) - 128.f) * p.c_scale;
    rgb[0] = fminf(fmaxf(yy + p.cr_r * vv, 0.f), 255.f);
    rgb[1] = fminf(fmaxf(yy + p.cb_g * uu + p.cr_g * vv, 0.f), 255.f);
    rgb[2] = fminf(fmaxf(yy + p.cb_b * uu, 0.f), 255.f);
  }
  const size_t plane = static_cast<size_t>(p.out_w) * p.out_h, o = static_cast<size_t>(oy) * p.out_w + ox;
  for (int c = 0; c < 3; ++c) {
    const float v = rgb[c] * p.scale[c] + p.bias[c];
    if (p.half) static_cast<__half*>(dst)[c * plane + o] = __float2half_rn(v);
    else static_cast<float*>(dst)[c * plane + o] = v;
  }
}

// Device memory owned by RAII.
struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
  cudaError_t reserve(size_t n) {
    if (n <= bytes) return cudaSuccess;
    if (ptr) cudaFree(ptr);
    ptr = nullptr;
    bytes = 0;
    cudaError_t e = cudaMalloc(&ptr, n);
    if (e == cudaSuccess) bytes = n;
    return e;
  }
};

class CudaPreprocessor final : public Preprocessor {
 public:
  CudaPreprocessor(const PreprocessSpec& spec, int device, cudaStream_t stream)
      : spec_(spec), device_(device), stream_(stream) {}
  ~CudaPreprocessor() override { cudaStreamDestroy(stream_); }

  const PreprocessSpec& spec() const override { return spec_; }

  Status run(const FrameView& frame, std::byte* out) override {
    VAPIPE_RETURN_IF_ERROR(validate_frame(frame));
    const FrameInfo& i = frame.info;
    const size_t in_bytes = i.required_bytes(), out_bytes = spec_.output_info().bytes();
    cudaSetDevice(device_);
    if (cudaError_t e = input_.reserve(in_bytes); e != cudaSuccess) return Unavailable("cudaMalloc: " + cuda_text(e));
    if (cudaError_t e = output_.reserve(out_bytes); e != cudaSuccess) return Unavailable("cudaMalloc: " + cuda_text(e));
    KernelParams p{};
    p.format = static_cast<int>(i.format);
    p.in_w = static_cast<int>(i.width);
    p.in_h = static_cast<int>(i.height);
    p.stride0 = static_cast<int>(i.stride[0]);
    p.stride1 = static_cast<int>(i.stride[1]);
    p.stride2 = static_cast<int>(i.stride[2]);
    p.offset0 = i.offset[0];
    p.offset1 = i.offset[1];
    p.offset2 = i.offset[2];
    const float kr = i.matrix == ColorMatrix::kBT709 ? 0.2126f : 0.299f;
    const float kb = i.matrix == ColorMatrix::kBT709 ? 0.0722f : 0.114f;
    const float kg = 1.f - kr - kb;
    p.y_scale = i.full_range ? 1.f : 255.f / 219.f;
    p.y_offset = i.full_range ? 0.f : 16.f;
    p.c_scale = i.full_range ? 1.f : 255.f / 224.f;
    p.cr_r = 2.f * (1.f - kr);
    p.cb_b = 2.f * (1.f - kb);
    p.cb_g = -2.f * kb * (1.f - kb) / kg;
    p.cr_g = -2.f * kr * (1.f - kr) / kg;
    p.out_w = static_cast<int>(spec_.out_width);
    p.out_h = static_cast<int>(spec_.out_height);
    for (int c = 0; c < 3; ++c) {
      p.scale[c] = 1.f / (255.f * spec_.std[c]);
      p.bias[c] = -spec_.mean[c] / spec_.std[c];
    }
    p.half = spec_.dtype == DType::kFloat16;
    cudaMemcpyAsync(input_.ptr, frame.data, in_bytes, cudaMemcpyHostToDevice, stream_);
    dim3 block(32, 8), grid((p.out_w + 31) / 32, (p.out_h + 7) / 8);
    preprocess_kernel<<<grid, block, 0, stream_>>>(static_cast<const uint8_t*>(input_.ptr), output_.ptr, p);
    cudaMemcpyAsync(out, output_.ptr, out_bytes, cudaMemcpyDeviceToHost, stream_);
    if (cudaError_t e = cudaStreamSynchronize(stream_); e != cudaSuccess) return Internal("preprocess kernel: " + cuda_text(e));
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return Internal("preprocess kernel: " + cuda_text(e));
    return Status::Ok();
  }

 private:
  PreprocessSpec spec_;
  int device_;
  cudaStream_t stream_;
  DeviceBuffer input_, output_;
};

}  // namespace

bool cuda_available(std::string* why) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    if (why) *why = e != cudaSuccess ? "no usable CUDA device (" + cuda_text(e) + ")" : "no CUDA device";
    return false;
  }
  return true;
}

Result<std::unique_ptr<Preprocessor>> make_cuda_preprocessor(const PreprocessSpec& spec, int device) {
  std::string why;
  if (!cuda_available(&why)) return FailedPrecondition(why);
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
    return FailedPrecondition("CUDA device " + std::to_string(device) + ": " + cuda_text(e));
  }
  cudaStream_t stream = nullptr;  // the stage's own stream
  if (cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); e != cudaSuccess) {
    return Unavailable("cudaStreamCreate: " + cuda_text(e));
  }
  return std::unique_ptr<Preprocessor>(std::make_unique<CudaPreprocessor>(spec, device, stream));
}

}  // namespace vapipe
