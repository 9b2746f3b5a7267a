#pragma once

#include <cstdint>
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
  // batches sent, frames in them, and how many left full (the rest left at max_delay_ms, on a stream
  // event or at the end): frames / batches is the batch size infer gets.
  StageCounters counters() const override {
    return {{"batches", static_cast<double>(batches_)},
            {"frames", static_cast<double>(frames_)},
            {"full_batches", static_cast<double>(full_batches_)}};
  }

 private:
  Status send(Message&& batch, Emitter& out, bool full);
  std::unique_ptr<Batcher> batcher_;
  uint64_t batches_ = 0, frames_ = 0, full_batches_ = 0;
};

}  // namespace vapipe
