// The classifier behind the infer stage. LibTorch stays behind this interface (torch_classifier.cpp is
// the only file of the stage that includes it), so the rest of the project compiles without its
// headers and tests can use a fake.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/message.h"
#include "pipeline/status.h"

namespace vapipe {

struct ClassifierOptions {
  std::string model_path;
  std::string device = "auto";  // auto | cpu | cuda | cuda:N
  uint32_t threads = 0;         // intra-op threads; 0 = every CPU of the machine
  TensorInfo input;             // one item, as preprocess writes it
  size_t warmup_batch_size = 1;
  uint32_t warmup_batches = 3;
  bool optimize = true;  // freeze and optimise for inference (torch.jit.optimize_for_inference)
  DType precision = DType::kFloat32;  // fp16: weights and inputs in half precision (CUDA only; CPU stays fp32)
  bool channels_last = true;          // NHWC on CUDA
  bool jit_optimize = false;          // TorchScript's run-time re-optimisation (process-wide)
  bool cpu_fallback = false;          // CUDA asked for by `auto` (the lane's GPU): the CPU if LibTorch has no CUDA
  // infer.cuda_graphs, applied by use_batch_sizes: auto | on | off.
  std::string cuda_graphs = "auto";
  // infer.output: what the model's rows are. logits: scores are their softmax. probabilities (a model
  // exported with its softmax, or a multi-label one with its sigmoid): scores are the rows as they are.
  // multi_label_logits: scores are each value's sigmoid. auto: probabilities when the model's output
  // is a sigmoid's (its graph says so) or every row of the warm-up batch's output is a distribution
  // (values in [0, 1] summing to 1), else logits.
  std::string output = "auto";
};

// One frame's top-k: class ids and probabilities (softmax of the model's logits, or its rows as they
// are when they are probabilities already), best first.
struct TopK {
  std::vector<int32_t> class_ids;
  std::vector<float> scores;
};

class Classifier {
 public:
  virtual ~Classifier() = default;
  // `batch` holds n items of `input` layout back to back, in host memory.
  virtual Result<std::vector<TopK>> classify(const std::byte* batch, size_t n, size_t top_k) = 0;
  // Items of `input` layout each, in GPU memory of `device` (device pool slots): the batch is formed
  // in device memory, with no trip through the host. Classifiers without CUDA refuse.
  virtual Result<std::vector<TopK>> classify_device(const std::vector<const std::byte*>& items, int device,
                                                    size_t top_k) {
    (void)items, (void)device, (void)top_k;
    return FailedPrecondition("this classifier cannot read tensors in GPU memory");
  }
  // Seconds for one forward pass at batch size n on zeros (the median of `rounds`, after one untimed
  // pass), results back on the host. kUnavailable when the batch does not fit in memory.
  virtual Result<double> time_forward(size_t n, uint32_t rounds) {
    (void)n, (void)rounds;
    return FailedPrecondition("this classifier cannot be timed");
  }
  // infer.batch_shapes: padded. From now on every batch runs padded with zeros to the smallest of
  // `sizes` (ascending) that holds it, and each of them has run once before this returns: the model
  // meets no new input shape while frames wait. kUnavailable names a size that does not fit in memory.
  // With options.cuda_graphs (auto or on) and a model on CUDA, each size's pass is also recorded as a
  // CUDA graph; under auto a failed recording is logged and batches run without graphs.
  virtual Status use_batch_sizes(const std::vector<size_t>& sizes) {
    (void)sizes;
    return FailedPrecondition("this classifier runs each batch at its own size");
  }
  // The batch size a batch of n runs at (n, unless use_batch_sizes said otherwise).
  virtual size_t run_size(size_t n) const { return n; }
  // Whether use_batch_sizes recorded each size's forward pass as a CUDA graph that batches replay, and
  // whether a batch that runs at `rows` rows (run_size) replays one.
  virtual bool replays_cuda_graphs() const { return false; }
  virtual bool replays_cuda_graph_at(size_t rows) const {
    (void)rows;
    return false;
  }
  virtual int64_t num_classes() const = 0;
  // Whether scores are the model's rows as they are (infer.output: probabilities, or auto and the model's
  // rows are probabilities) rather than their softmax.
  virtual bool outputs_probabilities() const { return false; }
  virtual std::string device() const = 0;
};

// Loads a TorchScript model, runs the warm-up batches and learns its number of classes. A model that
// does not load or does not map [N, C, H, W] to [N, classes] is an error naming the file.
Result<std::unique_ptr<Classifier>> load_torchscript_classifier(const ClassifierOptions& options);


}  // namespace vapipe
