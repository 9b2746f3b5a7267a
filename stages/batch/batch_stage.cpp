#include "stages/batch/batch_stage.h"

#include "pipeline/logging.h"
#include "stages/infer/auto_batch.h"

namespace vapipe {

Status BatchStage::open(const StageContext& ctx) {
  BatcherOptions options;
  options.max_batch_size = ctx.config.batch.max_batch_size;
  if (ctx.config.batch.auto_size) {
    // Infer (started before us) measures its model and writes its choice to the run folder.
    if (!ctx.layout) return FailedPrecondition("batch.max_batch_size: auto needs the job's run folder");
    const std::string path = auto_batch_file(ctx.layout->run_dir, ctx.layout->lane);
    VAPIPE_LOG_INFO("batch: waiting for infer's automatic batch size ({})", path);
    VAPIPE_ASSIGN_OR_RETURN(options.max_batch_size, wait_for_auto_batch_size(path, 600, ctx.stop_requested));
  }
  options.max_delay = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double, std::milli>(ctx.config.batch.max_delay_ms));
  batcher_ = std::make_unique<Batcher>(options);
  VAPIPE_LOG_INFO("batch: max_batch_size {}{}, max_delay {} ms", options.max_batch_size,
                  ctx.config.batch.auto_size ? " (auto)" : "", ctx.config.batch.max_delay_ms);
  return Status::Ok();
}

Status BatchStage::process(Message&& in, Emitter& out) {
  if (in.kind == MessageKind::kTensor) {
    batcher_->add(std::move(in), std::chrono::steady_clock::now());
    while (auto batch = batcher_->take_full()) VAPIPE_RETURN_IF_ERROR(send(std::move(*batch), out, true));
    return Status::Ok();
  }
  if (!is_stream_event(in.kind)) {
    return InvalidArgument(std::string("batch got a ") + message_kind_name(in.kind) + " message");
  }
  for (Message& batch : batcher_->flush_stream(in.env.stream_index)) {
    VAPIPE_RETURN_IF_ERROR(send(std::move(batch), out, false));
  }
  return out.emit(std::move(in));
}

Status BatchStage::on_deadline(Emitter& out) {
  while (auto batch = batcher_->take_due(std::chrono::steady_clock::now())) {
    VAPIPE_RETURN_IF_ERROR(send(std::move(*batch), out, false));
  }
  return Status::Ok();
}

std::optional<SteadyTime> BatchStage::next_deadline() const { return batcher_ ? batcher_->deadline() : std::nullopt; }

Status BatchStage::close(Emitter& out) {
  for (Message& batch : batcher_->flush_all()) VAPIPE_RETURN_IF_ERROR(send(std::move(batch), out, false));
  return Status::Ok();
}

Status BatchStage::send(Message&& batch, Emitter& out, bool full) {
  ++batches_;
  frames_ += batch.items.size();
  full_batches_ += full;
  return out.emit(std::move(batch));
}

}  // namespace vapipe
