#pragma once

#include <memory>

#include "pipeline/stage.h"
#include "stages/batch/batcher.h"

namespace vapipe {

// Tensors in, batches out. A stream event first flushes every waiting frame of its stream, so that
// "end of stream" never overtakes that stream's last frames. Payloads are not touched: only their
// descriptors move.
class BatchStage final : public Stage {
 public:
  StageKind kind() const override { return StageKind::kBatch; }
  Status open(const StageContext& ctx) override;
  Status process(Message&& in, Emitter& out) override;
  Status on_deadline(Emitter& out) override;
  std::optional<SteadyTime> next_deadline() const override;
  Status close(Emitter& out) override;

 private:
  std::unique_ptr<Batcher> batcher_;
};

}  // namespace vapipe
