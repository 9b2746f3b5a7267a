#pragma once

#include <functional>
#include <memory>

#include "pipeline/stage.h"
#include "stages/preprocess/preprocessor.h"

namespace vapipe {

// Frames in, normalised tensors out. A frame that cannot be preprocessed passes on as an error
// (without payload), so that it still yields exactly one result. Frames and tensors may live in GPU
// memory (device pools): the CUDA preprocessor reads and writes them in place, ordered by the slots'
// events, and releases a frame only once the kernel that read it has finished.
class PreprocessStage final : public Stage {
 public:
  // Whether GPU N's CUDA context still works (cuda_context_status, pipeline/cuda/device_memory.h),
  // asked after a batch failed there.
  using GpuStatus = std::function<Status(int gpu)>;
  // `preprocessor` overrides the one chosen from the config, and `gpu_status` the check (tests).
  explicit PreprocessStage(std::unique_ptr<Preprocessor> preprocessor = nullptr, GpuStatus gpu_status = nullptr);
  StageKind kind() const override { return StageKind::kPreprocess; }
  Status open(const StageContext& ctx) override;
  Status process(Message&& in, Emitter& out) override;
  // GPU preprocessing takes the frames that have arrived in one kernel launch; CPU preprocessing one
  // per thread (preprocess.threads).
  size_t max_inputs_at_once() const override {
    return preprocessor_ && preprocessor_->stream() ? max_at_once_ : cpu_at_once_;
  }
  Status process_many(std::vector<Message>&& in, Emitter& out) override;

 private:
  // Preprocesses `frames` (kFrame messages) together and emits their tensors in order.
  Status flush(std::vector<Message>& frames, Emitter& out);

  std::unique_ptr<Preprocessor> preprocessor_;
  GpuStatus gpu_status_;
  size_t max_at_once_ = 32;
  size_t cpu_at_once_ = 1;
  int gpu_ = -1;  // the CUDA preprocessor's GPU
  bool center_crop_ = false;  // preprocess.resize: center_crop (each frame's region cut to the tensor's shape)
};

PreprocessSpec preprocess_spec_from(const PreprocessConfig& config);

}  // namespace vapipe
