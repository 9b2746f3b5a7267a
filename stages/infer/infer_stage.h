#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/stage.h"
#include "stages/infer/classifier.h"

namespace vapipe {

using ClassifierFactory = std::function<Result<std::unique_ptr<Classifier>>(const ClassifierOptions&)>;

// Batches in, one result per frame out. A frame that arrives with an error, or whose tensor does not
// match the model input, gets an error result; the rest of its batch is classified (Triton's
// per-request errors). A model that fails to load, or whose classes do not match its labels, fails
// open(): a start-up error.
class InferStage final : public Stage {
 public:
  explicit InferStage(ClassifierFactory factory = load_torchscript_classifier) : factory_(std::move(factory)) {}
  StageKind kind() const override { return StageKind::kInfer; }
  Status open(const StageContext& ctx) override;
  Status process(Message&& in, Emitter& out) override;

 private:
  ClassifierFactory factory_;
  std::unique_ptr<Classifier> classifier_;
  std::vector<std::string> labels_;
  std::string model_name_;
  TensorInfo input_;
  uint32_t top_k_ = 3;
  bool classifier_on_gpu_ = false;  // tensors in GPU memory are batched there; else copied to the host
  std::vector<std::byte> staging_;  // the batch, contiguous
};

}  // namespace vapipe
