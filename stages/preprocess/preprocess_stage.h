#pragma once

#include <memory>

#include "pipeline/stage.h"
#include "stages/preprocess/preprocessor.h"

namespace vapipe {

// Frames in, normalised tensors out. A frame that cannot be preprocessed passes on as an error
// (without payload), so that it still yields exactly one result.
class PreprocessStage final : public Stage {
 public:
  // `preprocessor` overrides the one chosen from the config (tests).
  explicit PreprocessStage(std::unique_ptr<Preprocessor> preprocessor = nullptr)
      : preprocessor_(std::move(preprocessor)) {}
  StageKind kind() const override { return StageKind::kPreprocess; }
  Status open(const StageContext& ctx) override;
  Status process(Message&& in, Emitter& out) override;

 private:
  std::unique_ptr<Preprocessor> preprocessor_;
};

PreprocessSpec preprocess_spec_from(const PreprocessConfig& config);

}  // namespace vapipe
