// Fused preprocessing kernel: I420 / NV12 / RGB -> bilinear resize -> RGB -> (v/255 - mean)/std ->
// CHW float32 or float16, one thread per output pixel, every frame of a batch in one launch (grid.z).
// Frames and tensors may be in GPU memory (device pool slots: no copies) or on the host (staged).
// What each thread computes is in preprocess_kernel.h (the CPU reference's arithmetic step for step,
// so the two agree to float rounding); this file launches it and moves the memory.
#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "stages/preprocess/cuda/cuda_preprocessor.h"
#include "stages/preprocess/cuda/preprocess_kernel.h"

namespace vapipe {
namespace {

using preprocess_kernel::KernelParams;
using preprocess_kernel::OutputParams;

std::string cuda_text(cudaError_t e) { return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e); }

// grid.z = frame index: every frame of a batch in one launch (outputs share one size). Each thread
// computes one output pixel (preprocess_kernel.h, which tests also run on the CPU).
__global__ void preprocess_frames(const KernelParams* __restrict__ frames, OutputParams o) {
  const KernelParams p = frames[blockIdx.z];
  const int ox = blockIdx.x * blockDim.x + threadIdx.x;
  const int oy = blockIdx.y * blockDim.y + threadIdx.y;
  if (ox >= o.out_w || oy >= o.out_h) return;
  float value[3];
  preprocess_kernel::output_pixel(p, o, ox, oy, value);
  for (int c = 0; c < 3; ++c) {
    const size_t i = preprocess_kernel::output_index(o, c, ox, oy);
    if (o.half) static_cast<__half*>(p.dst)[i] = __float2half_rn(value[c]);
    else static_cast<float*>(p.dst)[i] = value[c];
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

size_t align_up(size_t v) { return (v + 255) / 256 * 256; }

class CudaPreprocessor final : public Preprocessor {
 public:
  CudaPreprocessor(const PreprocessSpec& spec, int device, cudaStream_t stream)
      : spec_(spec), device_(device), stream_(stream), out_(preprocess_kernel::output_params(spec)) {}
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
      // Another GPU's frame would need peer access enabled and its IPC mapping opened on this GPU (an
      // illegal address otherwise, which ends the process): placement keeps a lane's frames on its
      // preprocess's GPU, so such a frame is refused rather than read.
      if (frames[k].device >= 0 && frames[k].device != device_) {
        (void)(statuses[k] = FailedPrecondition("frame is on GPU " + std::to_string(frames[k].device) +
                                                ", not on GPU " + std::to_string(device_) + " where preprocess runs"));
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
    // The first failed enqueue: the kernel must not run on stale parameters or unstaged frames (it would
    // read the slots of an earlier batch's frames, which may hold other frames by now).
    cudaError_t enqueued = cudaSuccess;
    auto note = [&](cudaError_t e) {
      if (enqueued == cudaSuccess) enqueued = e;
    };
    for (size_t v = 0; v < valid.size(); ++v) {
      const size_t k = valid[v];
      KernelParams p = preprocess_kernel::frame_params(spec_, frames[k].info);
      if (frames[k].device >= 0) {
        p.src = reinterpret_cast<const uint8_t*>(frames[k].data);
      } else {
        const size_t n = frames[k].info.required_bytes();
        note(cudaMemcpyAsync(input_.at(in_off), frames[k].data, n, cudaMemcpyHostToDevice, stream_));
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
    note(cudaMemcpyAsync(params_.ptr, host_params_, valid.size() * sizeof(KernelParams), cudaMemcpyHostToDevice,
                         stream_));
    cudaError_t launch = cudaSuccess;
    if (enqueued == cudaSuccess) {
      dim3 block(32, 8), grid((out_.out_w + 31) / 32, (out_.out_h + 7) / 8, static_cast<unsigned>(valid.size()));
      preprocess_frames<<<grid, block, 0, stream_>>>(static_cast<const KernelParams*>(params_.ptr), out_);
      launch = cudaGetLastError();
      if (launch == cudaSuccess) {
        for (auto& [k, staged] : downloads) {
          note(cudaMemcpyAsync(outs[k].data, staged, out_bytes, cudaMemcpyDeviceToHost, stream_));
        }
      }
    }
    cudaError_t done = cudaStreamSynchronize(stream_);  // whatever failed: nothing of this batch is left queued
    if (enqueued != cudaSuccess) {
      cudaGetLastError();  // (a failed enqueue is not sticky: the next batch starts clean)
      return fail_all(Internal("preprocess copy: " + cuda_text(enqueued)));
    }
    if (launch != cudaSuccess) return fail_all(Internal("preprocess kernel launch: " + cuda_text(launch)));
    if (done != cudaSuccess) return fail_all(Internal("preprocess kernel: " + cuda_text(done)));
    return statuses;
  }

 private:
  PreprocessSpec spec_;
  int device_;
  cudaStream_t stream_;
  OutputParams out_;
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
