// The CUDA preprocessing kernel run on the CPU, for machines without a GPU: the same host code makes
// the same parameters (preprocess_kernel::frame_params), and every thread of the launch (each output
// pixel of each frame; grid.z is the frame) runs the kernel's own code (preprocess_kernel::output_pixel).
// The parity tests run it against the CPU reference, so the kernel's indexing and arithmetic are
// checked everywhere; what only a GPU does (the launch, the copies, device memory) is not.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "stages/preprocess/cuda/preprocess_kernel.h"
#include "stages/preprocess/preprocessor.h"

namespace vapipe {

class KernelOnHost final : public Preprocessor {
 public:
  explicit KernelOnHost(const PreprocessSpec& spec) : spec_(spec), out_(preprocess_kernel::output_params(spec)) {}

  const PreprocessSpec& spec() const override { return spec_; }

  Status run(const FrameView& frame, std::byte* out) override {
    return run_batch({frame}, {TensorOut{out, -1}}).front();
  }

  // As CudaPreprocessor::run_batch: a frame that fails validation fails alone.
  std::vector<Status> run_batch(const std::vector<FrameView>& frames, const std::vector<TensorOut>& outs) override {
    std::vector<Status> statuses(frames.size());
    std::vector<preprocess_kernel::KernelParams> launch;  // one per frame the kernel gets
    for (size_t k = 0; k < frames.size(); ++k) {
      statuses[k] = validate_frame(frames[k]);
      if (statuses[k].ok() && (frames[k].device >= 0 || outs[k].device >= 0)) {
        statuses[k] = FailedPrecondition("the kernel on the host reads and writes host memory only");
      }
      if (!statuses[k].ok()) continue;
      preprocess_kernel::KernelParams p = preprocess_kernel::frame_params(spec_, frames[k].info);
      p.src = reinterpret_cast<const uint8_t*>(frames[k].data);
      p.dst = outs[k].data;
      launch.push_back(p);
    }
    for (const preprocess_kernel::KernelParams& p : launch) {  // blockIdx.z
      for (int oy = 0; oy < out_.out_h; ++oy) {
        for (int ox = 0; ox < out_.out_w; ++ox) {
          float value[3];
          preprocess_kernel::output_pixel(p, out_, ox, oy, value);
          for (int c = 0; c < 3; ++c) {
            const size_t i = preprocess_kernel::output_index(out_, c, ox, oy);
            if (out_.half) static_cast<uint16_t*>(p.dst)[i] = float_to_half(value[c]);
            else static_cast<float*>(p.dst)[i] = value[c];
          }
        }
      }
    }
    return statuses;
  }

 private:
  PreprocessSpec spec_;
  preprocess_kernel::OutputParams out_;
};

inline Result<std::unique_ptr<Preprocessor>> make_kernel_on_host(const PreprocessSpec& spec) {
  return std::unique_ptr<Preprocessor>(std::make_unique<KernelOnHost>(spec));
}

}  // namespace vapipe
