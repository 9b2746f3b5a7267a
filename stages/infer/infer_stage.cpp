#include "stages/infer/infer_stage.h"

#include <cstring>

#include "pipeline/cuda/device_memory.h"
#include "pipeline/logging.h"
#include "stages/infer/labels.h"

namespace vapipe {

Status InferStage::open(const StageContext& ctx) {
  const InferConfig& c = ctx.config.infer;
  VAPIPE_ASSIGN_OR_RETURN(labels_, load_labels(c.labels));
  input_ = TensorInfo{ctx.config.preprocess.dtype, 3, ctx.config.preprocess.height, ctx.config.preprocess.width};
  ClassifierOptions options;
  options.model_path = c.model;
  // The lane decides (auto means CUDA when the lane has a GPU); without one (tests), the config does.
  options.device = ctx.lane ? (ctx.lane->infer_gpu >= 0 ? "cuda:" + std::to_string(ctx.lane->infer_gpu) : "cpu")
                            : c.device;
  options.precision = c.precision;
  options.channels_last = c.channels_last;
  options.threads = c.threads;
  options.input = input_;
  options.warmup_batch_size = ctx.config.batch.max_batch_size;
  options.warmup_batches = c.warmup_batches;
  options.optimize = c.optimize;
  VAPIPE_ASSIGN_OR_RETURN(classifier_, factory_(options));
  if (classifier_->num_classes() != static_cast<int64_t>(labels_.size())) {
    return InvalidArgument("model " + c.model + " has " + std::to_string(classifier_->num_classes()) +
                           " outputs but labels file " + c.labels + " has " + std::to_string(labels_.size()) +
                           " labels");
  }
  model_name_ = c.model_name;
  top_k_ = c.top_k;
  VAPIPE_LOG_INFO("infer: model {} ({} classes) on {}, {} warm-up batches of {}", c.model, labels_.size(),
                  classifier_->device(), c.warmup_batches, options.warmup_batch_size);
  return Status::Ok();
}

Status InferStage::process(Message&& in, Emitter& out) {
  if (is_stream_event(in.kind)) return out.emit(std::move(in));
  if (in.kind != MessageKind::kBatch) {
    return InvalidArgument(std::string("infer got a ") + message_kind_name(in.kind) + " message");
  }
  const size_t n = in.items.size();
  std::vector<std::string> errors(n);
  std::vector<size_t> valid;  // indices of items that go to the model
  valid.reserve(n);
  const size_t item_bytes = input_.bytes();
  for (size_t i = 0; i < n; ++i) {
    const Message& item = in.items[i];
    if (!item.error.empty()) {
      errors[i] = item.error;
    } else if (item.kind != MessageKind::kTensor || item.payload.empty()) {
      errors[i] = "no tensor to classify";
    } else if (item.tensor != input_ || item.payload.size() < item_bytes) {
      errors[i] = "tensor " + std::string(dtype_name(item.tensor.dtype)) + " [" + std::to_string(item.tensor.channels) +
                  ", " + std::to_string(item.tensor.height) + ", " + std::to_string(item.tensor.width) +
                  "] does not match the model input";
    } else {
      valid.push_back(i);
    }
  }
  // Tensors in GPU memory (a device pool shared with preprocess) are batched on the GPU; host tensors
  // are gathered into one contiguous host batch (a device tensor among host ones is copied down).
  int device = valid.empty() ? -1 : in.items[valid.front()].payload.device();
  for (size_t i : valid) {
    if (in.items[i].payload.device() != device) device = -1;
  }
  Result<std::vector<TopK>> r = std::vector<TopK>{};
  if (!valid.empty() && device >= 0) {
    std::vector<const std::byte*> items;
    Status ready;
    for (size_t i : valid) {
      if (ready.ok()) ready = in.items[i].payload.wait_ready(nullptr);  // after preprocess's kernel
      items.push_back(in.items[i].payload.data());
    }
    r = ready.ok() ? classifier_->classify_device(items, device, top_k_) : Result<std::vector<TopK>>(ready);
    for (size_t i : valid) in.items[i].payload.reset();  // classify_device has read them (results are on the host)
  } else if (!valid.empty()) {
    staging_.resize(valid.size() * item_bytes);
    Status copied;
    for (size_t v = 0; v < valid.size(); ++v) {
      Message& item = in.items[valid[v]];
      if (item.payload.on_device()) {
        if (copied.ok()) copied = cuda_copy(staging_.data() + v * item_bytes, item.payload.data(), item_bytes, nullptr);
      } else {
        std::memcpy(staging_.data() + v * item_bytes, item.payload.data(), item_bytes);
      }
      item.payload.reset();  // the tensor slot goes back to preprocess now
    }
    r = copied.ok() ? classifier_->classify(staging_.data(), valid.size(), top_k_) : Result<std::vector<TopK>>(copied);
  }
  std::vector<TopK> predictions;
  if (!valid.empty()) {
    if (r.ok()) {
      predictions = std::move(r).value();
    } else {
      VAPIPE_LOG_ERROR("infer: batch of {} failed: {}", valid.size(), r.status().message());
      for (size_t i : valid) errors[i] = "inference failed: " + r.status().message();
      valid.clear();
    }
  }
  size_t next_valid = 0;
  for (size_t i = 0; i < n; ++i) {
    Message result;
    result.kind = MessageKind::kResult;
    result.env = in.items[i].env;
    result.prediction.model = model_name_;
    if (next_valid < valid.size() && valid[next_valid] == i) {
      const TopK& p = predictions[next_valid++];
      for (size_t k = 0; k < p.class_ids.size(); ++k) {
        const int32_t id = p.class_ids[k];
        result.prediction.top_k.push_back(
            ClassScore{id, p.scores[k], id >= 0 && static_cast<size_t>(id) < labels_.size() ? labels_[id] : ""});
      }
    } else {
      result.prediction.error = errors[i];
      result.error = errors[i];
    }
    VAPIPE_RETURN_IF_ERROR(out.emit(std::move(result)));
  }
  return Status::Ok();
}

}  // namespace vapipe
