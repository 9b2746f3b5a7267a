#include "stages/preprocess/preprocess_stage.h"

#include <algorithm>
#include <thread>

#include "pipeline/cuda/device_memory.h"
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
  spec.bgr = c.channel_order == "bgr";
  spec.letterbox = c.resize == "letterbox";
  for (int i = 0; i < 3; ++i) spec.pad_rgb[i] = static_cast<float>(c.pad_color[i]);
  return spec;
}

PreprocessStage::PreprocessStage(std::unique_ptr<Preprocessor> preprocessor, GpuStatus gpu_status)
    : preprocessor_(std::move(preprocessor)),
      gpu_status_(gpu_status ? std::move(gpu_status) : GpuStatus(cuda_context_status)) {}

Status PreprocessStage::open(const StageContext& ctx) {
  center_crop_ = ctx.config.preprocess.resize == "center_crop";
  if (preprocessor_) {
    gpu_ = preprocessor_->device();
    return Status::Ok();
  }
  const PreprocessSpec spec = preprocess_spec_from(ctx.config.preprocess);
  // The lane decides (auto means CUDA when the lane has a GPU); without one (tests), the config does.
  const int gpu = ctx.lane ? ctx.lane->preprocess_gpu : (ctx.config.preprocess.device == "cuda" ? 0 : -1);
  if (gpu >= 0) {
    auto cuda = make_cuda_preprocessor(spec, gpu);
    if (!cuda.ok()) return cuda.status().with_context("preprocess.device: " + device_name(gpu));
    preprocessor_ = std::move(cuda).value();
    gpu_ = gpu;
    max_at_once_ = std::max<size_t>(1, ctx.config.batch.max_batch_size);
  } else {
    preprocessor_ = make_cpu_preprocessor(spec, ctx.config.preprocess.threads);
    cpu_at_once_ = ctx.config.preprocess.threads ? ctx.config.preprocess.threads
                                                 : std::max(1u, std::thread::hardware_concurrency());
  }
  const PreprocessConfig& p = ctx.config.preprocess;
  VAPIPE_LOG_INFO("preprocess: {}{}, {}x{} {}, resize {}{}", device_name(gpu),
                  gpu >= 0 ? std::string() : ", " + std::to_string(p.threads) + " thread(s) (0: every CPU)", p.width,
                  p.height, dtype_name(p.dtype), p.resize,
                  p.resize == "letterbox" ? " (margins " + std::to_string(p.pad_color[0]) + ", " +
                                                std::to_string(p.pad_color[1]) + ", " + std::to_string(p.pad_color[2]) + ")"
                                          : std::string());
  return Status::Ok();
}

Status PreprocessStage::process(Message&& in, Emitter& out) {
  std::vector<Message> one;
  one.push_back(std::move(in));
  return process_many(std::move(one), out);
}

Status PreprocessStage::process_many(std::vector<Message>&& in, Emitter& out) {
  std::vector<Message> frames;
  for (Message& m : in) {
    if (m.kind == MessageKind::kFrame) {
      frames.push_back(std::move(m));
      continue;
    }
    // A stream event follows its stream's frames: flush those first, to keep the order.
    VAPIPE_RETURN_IF_ERROR(flush(frames, out));
    if (!is_stream_event(m.kind)) {
      VAPIPE_LOG_ERROR("preprocess got a {} message (stream '{}'); dropped", message_kind_name(m.kind), m.env.stream_id);
      continue;
    }
    VAPIPE_RETURN_IF_ERROR(out.emit(std::move(m)));
  }
  return flush(frames, out);
}

Status PreprocessStage::flush(std::vector<Message>& frames, Emitter& out) {
  if (frames.empty()) return Status::Ok();
  void* stream = preprocessor_->stream();
  std::vector<Message> tensors(frames.size());
  std::vector<FrameView> views;
  std::vector<TensorOut> outs;
  std::vector<size_t> which;  // frames that go to the preprocessor
  for (size_t i = 0; i < frames.size(); ++i) {
    Message& in = frames[i];
    Message& t = tensors[i];
    t.kind = MessageKind::kTensor;
    t.env = in.env;
    t.tensor = preprocessor_->spec().output_info();
    t.error = in.error;
    if (!t.error.empty()) continue;
    // May block while infer holds every tensor slot: back-pressure.
    VAPIPE_ASSIGN_OR_RETURN(t.payload, out.allocate(t.tensor.bytes()));
    if (in.payload.on_device()) {
      if (!stream) {
        t.error = "preprocess: frame is in GPU memory but preprocessing runs on the CPU";
        t.payload.reset();
        continue;
      }
      Status ready = in.payload.wait_ready(stream);  // the decoder's copy into the slot comes first
      if (!ready.ok()) {
        t.error = "preprocess: " + ready.message();
        t.payload.reset();
        continue;
      }
    }
    FrameInfo info = in.frame;
    if (center_crop_) {
      const FrameInfo::Region r = centered_region(info, preprocessor_->spec().out_width,  // as shown
                                                  preprocessor_->spec().out_height);
      info.crop = {r.x, r.y, r.width, r.height};
    }
    views.push_back(FrameView{info, in.payload.data(), in.payload.size(), in.payload.device()});
    outs.push_back(TensorOut{t.payload.data(), t.payload.device()});
    which.push_back(i);
  }
  const std::vector<Status> statuses = preprocessor_->run_batch(views, outs);
  const bool any_failed = std::any_of(statuses.begin(), statuses.end(), [](const Status& st) { return !st.ok(); });
  if (any_failed && gpu_ >= 0) {
    // A CUDA context that no longer works fails every frame after these: exit, and the lane restarts
    // with a new one (an archive job then preprocesses these frames again; a live one loses them).
    if (Status gpu = gpu_status_(gpu_); !gpu.ok()) {
      const auto failed = std::find_if(statuses.begin(), statuses.end(), [](const Status& st) { return !st.ok(); });
      return Aborted("preprocess: " + failed->message() + "; " + gpu.message() + ": preprocess exits so that its lane restarts");
    }
  }
  for (size_t v = 0; v < which.size(); ++v) {
    Message& t = tensors[which[v]];
    if (!statuses[v].ok()) {
      t.payload.reset();
      t.error = "preprocess: " + statuses[v].message();
      VAPIPE_LOG_WARN("stream '{}' frame {}: {}", t.env.stream_id, t.env.seq, t.error);
    } else if (t.payload.on_device()) {
      VAPIPE_RETURN_IF_ERROR(t.payload.record_ready(stream));
    }
  }
  // run_batch has finished reading the frames: their slots go back to ingest before we block on sending.
  for (Message& in : frames) in.payload.reset();
  frames.clear();
  for (Message& t : tensors) VAPIPE_RETURN_IF_ERROR(out.emit(std::move(t)));
  return Status::Ok();
}

}  // namespace vapipe
