#include "stages/preprocess/preprocess_stage.h"

#include "pipeline/logging.h"
#include "stages/preprocess/cuda/cuda_preprocessor.h"

namespace vapipe {

PreprocessSpec preprocess_spec_from(const PreprocessConfig& c) {
  PreprocessSpec spec;
  spec.out_width = c.width;
  spec.out_height = c.height;
  spec.mean = c.mean;
  spec.std = c.std;
  spec.dtype = c.dtype;
  return spec;
}

Status PreprocessStage::open(const StageContext& ctx) {
  if (preprocessor_) return Status::Ok();
  const PreprocessSpec spec = preprocess_spec_from(ctx.config.preprocess);
  // The lane decides (auto means CUDA when the lane has a GPU); without one (tests), the config does.
  const int gpu = ctx.lane ? ctx.lane->preprocess_gpu : (ctx.config.preprocess.device == "cuda" ? 0 : -1);
  std::string where = "cpu";
  if (gpu >= 0) {
    auto cuda = make_cuda_preprocessor(spec, gpu);
    if (!cuda.ok()) return cuda.status().with_context("preprocess.device: cuda:" + std::to_string(gpu));
    preprocessor_ = std::move(cuda).value();
    where = "cuda:" + std::to_string(gpu);
  } else {
    preprocessor_ = make_cpu_preprocessor(spec);
  }
  VAPIPE_LOG_INFO("preprocess: {}, {}x{} {}", where, ctx.config.preprocess.width, ctx.config.preprocess.height,
                  dtype_name(ctx.config.preprocess.dtype));
  return Status::Ok();
}

Status PreprocessStage::process(Message&& in, Emitter& out) {
  if (in.kind != MessageKind::kFrame) {
    if (!is_stream_event(in.kind)) {
      return InvalidArgument(std::string("preprocess got a ") + message_kind_name(in.kind) + " message");
    }
    return out.emit(std::move(in));
  }
  Message tensor;
  tensor.kind = MessageKind::kTensor;
  tensor.env = in.env;
  tensor.tensor = preprocessor_->spec().output_info();
  tensor.error = in.error;
  if (tensor.error.empty()) {
    VAPIPE_ASSIGN_OR_RETURN(tensor.payload, out.allocate(tensor.tensor.bytes()));
    FrameView view{in.frame, in.payload.data(), in.payload.size()};
    Status s = preprocessor_->run(view, tensor.payload.data());
    if (!s.ok()) {
      tensor.payload.reset();
      tensor.error = "preprocess: " + s.message();
      VAPIPE_LOG_WARN("stream '{}' frame {}: {}", in.env.stream_id, in.env.seq, tensor.error);
    }
  }
  in.payload.reset();  // the frame's slot goes back to ingest before we block on sending
  return out.emit(std::move(tensor));
}

}  // namespace vapipe
