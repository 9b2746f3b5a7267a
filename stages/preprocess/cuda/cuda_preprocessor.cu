// Fused preprocessing kernel: I420 / NV12 / RGB -> bilinear resize -> RGB -> (v/255 - mean)/std ->
// CHW float32 or float16, one thread per output pixel, every frame of a batch in one launch (grid.z).
// Frames and tensors may be in GPU memory (device pool slots: no copies) or on the host (staged).
// The arithmetic follows cpu_preprocessor.cpp step for step, so the two agree to float rounding.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "stages/preprocess/cuda/cuda_preprocessor.h"

namespace vapipe {
namespace {

std::string cuda_text(cudaError_t e) { return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e); }

// One frame's work: where it is, how to read it, where its tensor goes.
struct KernelParams {
  const uint8_t* src;
  void* dst;
  int format;  // PixelFormat
  int in_w, in_h;    // the region read (streams[].roi; the whole frame by default), upright
  int in_x, in_y;    // its top left corner, in the upright picture
  int frame_w, frame_h;  // the frame as stored
  int dst_x, dst_y, dst_w, dst_h;  // the part of the tensor the region is resized to (output_rect)
  bool transpose, mirror_x, mirror_y;  // upright to stored (OrientationMap)
  int stride0, stride1, stride2;
  size_t offset0, offset1, offset2;
  float y_scale, y_offset, c_scale, cr_r, cb_g, cr_g, cb_b;
};

// What every frame of a launch shares: the output size and normalisation.
struct OutputParams {
  int out_w, out_h;
  float scale[3], bias[3];  // per output channel
  bool half;
  bool bgr;  // output channels B, G, R
  float pad[3];  // R, G, B (0..255) of the tensor outside a frame's rectangle (resize: letterbox)
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

// Where the upright picture's pixel (ux, uy) is stored (OrientationMap, pipeline/message.h).
__device__ inline void to_stored(const KernelParams& p, int ux, int uy, int* sx, int* sy) {
  const int x = p.transpose ? uy : ux, y = p.transpose ? ux : uy;
  *sx = p.mirror_x ? p.frame_w - 1 - x : x;
  *sy = p.mirror_y ? p.frame_h - 1 - y : y;
}

// The frame's RGB (0..255) at pixel (dx, dy) of its rectangle in the tensor (dst_w x dst_h: the whole
// tensor but with letterbox), bilinear over its region.
__device__ inline void sample(const KernelParams& p, int dx, int dy, float rgb[3]) {
  const uint8_t* src = p.src;
  int x0, x1, y0, y1;
  float wx, wy;
  tap(static_cast<float>(p.in_w) / static_cast<float>(p.dst_w), dx, p.in_w, &x0, &x1, &wx);
  tap(static_cast<float>(p.in_h) / static_cast<float>(p.dst_h), dy, p.in_h, &y0, &y1, &wy);
  x0 += p.in_x;  // taps within the region, as if it were the whole image; then where it is in the picture
  x1 += p.in_x;
  y0 += p.in_y;
  y1 += p.in_y;
  // The four neighbours, a (x0, y0), b (x1, y0), c (x0, y1), q (x1, y1), where they are stored.
  int ax, ay, bx, by, cx, cy, qx, qy;
  to_stored(p, x0, y0, &ax, &ay);
  to_stored(p, x1, y0, &bx, &by);
  to_stored(p, x0, y1, &cx, &cy);
  to_stored(p, x1, y1, &qx, &qy);
  if (p.format == static_cast<int>(PixelFormat::kRGB)) {
    const uint8_t* base = src + p.offset0;
    const uint8_t* pa = base + static_cast<size_t>(ay) * p.stride0 + ax * 3;
    const uint8_t* pb = base + static_cast<size_t>(by) * p.stride0 + bx * 3;
    const uint8_t* pc = base + static_cast<size_t>(cy) * p.stride0 + cx * 3;
    const uint8_t* pd = base + static_cast<size_t>(qy) * p.stride0 + qx * 3;
    for (int c = 0; c < 3; ++c) rgb[c] = lerp2(pa[c], pb[c], pc[c], pd[c], wx, wy);
  } else {
    const bool nv12 = p.format == static_cast<int>(PixelFormat::kNV12);
    const uint8_t* yp = src + p.offset0;
    const uint8_t* up = src + p.offset1;
    const uint8_t* vp = nv12 ? src + p.offset1 + 1 : src + p.offset2;
    const int ys = p.stride0, us = p.stride1, vs = nv12 ? p.stride1 : p.stride2, step = nv12 ? 2 : 1;
    auto chroma = [&](const uint8_t* plane, int stride, int x, int y) {
      return plane[static_cast<size_t>(y / 2) * stride + (x / 2) * step];
    };
    const float yy = (lerp2(yp[static_cast<size_t>(ay) * ys + ax], yp[static_cast<size_t>(by) * ys + bx],
                            yp[static_cast<size_t>(cy) * ys + cx], yp[static_cast<size_t>(qy) * ys + qx], wx, wy) -
                      p.y_offset) * p.y_scale;
    const float uu = (lerp2(chroma(up, us, ax, ay), chroma(up, us, bx, by), chroma(up, us, cx, cy),
                            chroma(up, us, qx, qy), wx, wy) - 128.f) * p.c_scale;
    const float vv = (lerp2(chroma(vp, vs, ax, ay), chroma(vp, vs, bx, by), chroma(vp, vs, cx, cy),
                            chroma(vp, vs, qx, qy), wx, wy) - 128.f) * p.c_scale;
    rgb[0] = fminf(fmaxf(yy + p.cr_r * vv, 0.f), 255.f);
    rgb[1] = fminf(fmaxf(yy + p.cb_g * uu + p.cr_g * vv, 0.f), 255.f);
    rgb[2] = fminf(fmaxf(yy + p.cb_b * uu, 0.f), 255.f);
  }
}

// grid.z = frame index: every frame of a batch in one launch (outputs share one size).
__global__ void preprocess_kernel(const KernelParams* __restrict__ frames, OutputParams o) {
  const KernelParams p = frames[blockIdx.z];
  const int ox = blockIdx.x * blockDim.x + threadIdx.x;
  const int oy = blockIdx.y * blockDim.y + threadIdx.y;
  if (ox >= o.out_w || oy >= o.out_h) return;
  float rgb[3];
  if (ox < p.dst_x || oy < p.dst_y || ox >= p.dst_x + p.dst_w || oy >= p.dst_y + p.dst_h) {
    for (int c = 0; c < 3; ++c) rgb[c] = o.pad[c];  // letterbox's margin
  } else {
    sample(p, ox - p.dst_x, oy - p.dst_y, rgb);
  }
  if (o.bgr) {
    const float red = rgb[0];
    rgb[0] = rgb[2];
    rgb[2] = red;
  }
  const size_t plane = static_cast<size_t>(o.out_w) * o.out_h, i = static_cast<size_t>(oy) * o.out_w + ox;
  for (int c = 0; c < 3; ++c) {
    const float v = rgb[c] * o.scale[c] + o.bias[c];
    if (o.half) static_cast<__half*>(p.dst)[c * plane + i] = __float2half_rn(v);
    else static_cast<float*>(p.dst)[c * plane + i] = v;
  }
}

// Device memory owned by RAII, grown on demand (staging for host frames and outputs, parameters).
struct Scratch {
  void* ptr = nullptr;
  size_t bytes = 0;
  ~Scratch() {
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
  std::byte* at(size_t offset) const { return static_cast<std::byte*>(ptr) + offset; }
};

KernelParams frame_params(const FrameInfo& i) {
  KernelParams p{};
  p.format = static_cast<int>(i.format);
  const FrameInfo::Region region = i.region();
  p.in_w = static_cast<int>(region.width);
  p.in_h = static_cast<int>(region.height);
  p.in_x = static_cast<int>(region.x);
  p.in_y = static_cast<int>(region.y);
  p.frame_w = static_cast<int>(i.width);
  p.frame_h = static_cast<int>(i.height);
  const OrientationMap map = orientation_map(i.orientation);
  p.transpose = map.transpose;
  p.mirror_x = map.mirror_x;
  p.mirror_y = map.mirror_y;
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
  return p;
}

size_t align_up(size_t v) { return (v + 255) / 256 * 256; }

class CudaPreprocessor final : public Preprocessor {
 public:
  CudaPreprocessor(const PreprocessSpec& spec, int device, cudaStream_t stream)
      : spec_(spec), device_(device), stream_(stream) {
    out_.out_w = static_cast<int>(spec_.out_width);
    out_.out_h = static_cast<int>(spec_.out_height);
    for (int c = 0; c < 3; ++c) {
      out_.scale[c] = 1.f / (255.f * spec_.std[c]);
      out_.bias[c] = -spec_.mean[c] / spec_.std[c];
    }
    out_.half = spec_.dtype == DType::kFloat16;
    out_.bgr = spec_.bgr;
    for (int c = 0; c < 3; ++c) out_.pad[c] = spec_.pad_rgb[c];
  }
  ~CudaPreprocessor() override {
    cudaSetDevice(device_);
    cudaStreamDestroy(stream_);
    if (host_params_) cudaFreeHost(host_params_);
  }

  const PreprocessSpec& spec() const override { return spec_; }
  void* stream() const override { return stream_; }
  int device() const override { return device_; }

  Status run(const FrameView& frame, std::byte* out) override {
    return run_batch({frame}, {TensorOut{out, -1}}).front();
  }

  std::vector<Status> run_batch(const std::vector<FrameView>& frames, const std::vector<TensorOut>& outs) override {
    std::vector<Status> statuses(frames.size());
    cudaSetDevice(device_);
    const size_t out_bytes = spec_.output_info().bytes();
    // Which frames go to the kernel, and where host frames and host outputs are staged on the device.
    std::vector<size_t> valid;
    size_t in_staging = 0, out_staging = 0;
    for (size_t k = 0; k < frames.size(); ++k) {
      (void)(statuses[k] = validate_frame(frames[k]));  // (void): nvcc flags the [[nodiscard]] Status& of operator=
      if (!statuses[k].ok()) continue;
      if (frames[k].device >= 0 && frames[k].device != device_ && !peer_ok(frames[k].device)) {
        (void)(statuses[k] = FailedPrecondition("frame is on GPU " + std::to_string(frames[k].device) +
                                                ", which GPU " + std::to_string(device_) + " cannot read"));
        continue;
      }
      valid.push_back(k);
      if (frames[k].device < 0) in_staging += align_up(frames[k].info.required_bytes());
      if (outs[k].device < 0) out_staging += align_up(out_bytes);
    }
    if (valid.empty()) return statuses;
    auto fail_all = [&](const Status& s) {
      for (size_t k : valid) (void)(statuses[k] = s);
      return statuses;
    };
    if (cudaError_t e = input_.reserve(in_staging); e != cudaSuccess) return fail_all(Unavailable("cudaMalloc: " + cuda_text(e)));
    if (cudaError_t e = output_.reserve(out_staging); e != cudaSuccess) return fail_all(Unavailable("cudaMalloc: " + cuda_text(e)));
    if (cudaError_t e = params_.reserve(valid.size() * sizeof(KernelParams)); e != cudaSuccess) {
      return fail_all(Unavailable("cudaMalloc: " + cuda_text(e)));
    }
    if (valid.size() > host_params_count_) {
      if (host_params_) cudaFreeHost(host_params_);
      host_params_ = nullptr;
      host_params_count_ = 0;
      if (cudaError_t e = cudaMallocHost(&host_params_, valid.size() * sizeof(KernelParams)); e != cudaSuccess) {
        return fail_all(Unavailable("cudaMallocHost: " + cuda_text(e)));
      }
      host_params_count_ = valid.size();
    }
    size_t in_off = 0, out_off = 0;
    std::vector<std::pair<size_t, std::byte*>> downloads;  // (frame, staged output) for host outputs
    for (size_t v = 0; v < valid.size(); ++v) {
      const size_t k = valid[v];
      const FrameInfo picture = field_picture(frames[k].info);  // one field of an interlaced frame
      KernelParams p = frame_params(picture);
      const FrameInfo::Region dst = output_rect(spec_, picture.region());  // the host code's rectangle
      p.dst_x = static_cast<int>(dst.x);
      p.dst_y = static_cast<int>(dst.y);
      p.dst_w = static_cast<int>(dst.width);
      p.dst_h = static_cast<int>(dst.height);
      if (frames[k].device >= 0) {
        p.src = reinterpret_cast<const uint8_t*>(frames[k].data);
      } else {
        const size_t n = frames[k].info.required_bytes();
        cudaMemcpyAsync(input_.at(in_off), frames[k].data, n, cudaMemcpyHostToDevice, stream_);
        p.src = reinterpret_cast<const uint8_t*>(input_.at(in_off));
        in_off += align_up(n);
      }
      if (outs[k].device >= 0) {
        p.dst = outs[k].data;
      } else {
        p.dst = output_.at(out_off);
        downloads.emplace_back(k, output_.at(out_off));
        out_off += align_up(out_bytes);
      }
      host_params_[v] = p;
    }
    cudaMemcpyAsync(params_.ptr, host_params_, valid.size() * sizeof(KernelParams), cudaMemcpyHostToDevice, stream_);
    dim3 block(32, 8), grid((out_.out_w + 31) / 32, (out_.out_h + 7) / 8, static_cast<unsigned>(valid.size()));
    preprocess_kernel<<<grid, block, 0, stream_>>>(static_cast<const KernelParams*>(params_.ptr), out_);
    cudaError_t launch = cudaGetLastError();
    for (auto& [k, staged] : downloads) cudaMemcpyAsync(outs[k].data, staged, out_bytes, cudaMemcpyDeviceToHost, stream_);
    cudaError_t done = cudaStreamSynchronize(stream_);
    if (launch != cudaSuccess) return fail_all(Internal("preprocess kernel launch: " + cuda_text(launch)));
    if (done != cudaSuccess) return fail_all(Internal("preprocess kernel: " + cuda_text(done)));
    return statuses;
  }

 private:
  bool peer_ok(int other) {
    int can = 0;
    return cudaDeviceCanAccessPeer(&can, device_, other) == cudaSuccess && can;
  }

  PreprocessSpec spec_;
  int device_;
  cudaStream_t stream_;
  OutputParams out_{};
  Scratch input_, output_, params_;
  KernelParams* host_params_ = nullptr;  // pinned, so the parameter upload is a true async copy
  size_t host_params_count_ = 0;
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
