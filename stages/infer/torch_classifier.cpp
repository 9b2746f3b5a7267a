// One of the two translation units that include LibTorch, with torch_runtime_info.cpp (its headers
// are slow to compile: keep it that way).
#include <cstdint>
#include <torch/script.h>
#include <torch/cuda.h>
#include <torch/version.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <ATen/Parallel.h>
#ifdef VAPIPE_TORCH_CUDA  // LibTorch built with CUDA (the GPU machine's); Debian's is CPU-only
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <thread>
#include <utility>

#include "pipeline/log_text.h"  // not logging.h: spdlog and LibTorch 2.x carry different fmt versions
#include "stages/infer/auto_batch.h"
#include "stages/infer/classifier.h"
#include "stages/infer/torch_plugin.h"

namespace vapipe {

std::string libtorch::version() { return TORCH_VERSION; }

namespace {

// TorchScript interpreter errors carry a whole traceback; a log line wants its gist.
std::string first_line(const std::string& text) {
  // The interpreter's message ends with the original error after the traceback.
  auto last = text.find_last_not_of("\n ");
  if (last == std::string::npos) return text;
  auto start = text.rfind('\n', last);
  return text.substr(start == std::string::npos ? 0 : start + 1, last + 1 - (start == std::string::npos ? 0 : start + 1));
}

// Whether what the model returns (the tensor output_tensor takes: itself, a tuple's or list's first
// element, a dict's "logits") is computed by a sigmoid: a multi-label model exported with its sigmoid,
// whose rows are each label's own probability. Read from the model's graph as loaded (before freezing
// fuses or re-lays it), with its submodules' calls inlined; through ops that change only shape, dtype
// or layout. False when the graph cannot be read.
bool output_comes_from_sigmoid(const torch::jit::script::Module& module) {
  try {
    std::shared_ptr<torch::jit::Graph> graph = module.get_method("forward").graph()->copy();
    torch::jit::Inline(*graph);
    if (graph->outputs().empty()) return false;
    torch::jit::Value* v = graph->outputs()[0];
    for (int hops = 0; hops < 16; ++hops) {
      torch::jit::Node* n = v->node();
      const c10::Symbol kind = n->kind();
      if (kind == c10::aten::sigmoid || kind == c10::aten::sigmoid_) return true;
      if ((kind == c10::prim::TupleConstruct || kind == c10::prim::ListConstruct) && !n->inputs().empty()) {
        v = n->inputs()[0];
      } else if (kind == c10::prim::DictConstruct) {  // inputs: key, value, key, value, ...
        torch::jit::Value* logits = nullptr;
        for (size_t i = 0; i + 1 < n->inputs().size(); i += 2) {
          const c10::optional<c10::IValue> key = torch::jit::toIValue(n->inputs()[i]);
          if (key && key->isString() && key->toStringRef() == "logits") logits = n->inputs()[i + 1];
        }
        if (!logits) return false;
        v = logits;
      } else if ((kind == c10::aten::to || kind == c10::aten::contiguous || kind == c10::aten::view ||
                  kind == c10::aten::reshape || kind == c10::aten::flatten || kind == c10::aten::squeeze ||
                  kind == c10::aten::clone || kind == c10::aten::detach || kind == c10::aten::type_as) &&
                 !n->inputs().empty()) {
        v = n->inputs()[0];
      } else {
        return false;
      }
    }
  } catch (const std::exception&) {
  }
  return false;
}

class TorchClassifier final : public Classifier {
 public:
  TorchClassifier(torch::jit::script::Module module, torch::Device device, TensorInfo input,
                  torch::ScalarType model_dtype, bool channels_last, bool jit_optimize, std::string cuda_graphs,
                  std::string output, bool output_is_sigmoid)
      : module_(std::move(module)), device_(device), input_(input), model_dtype_(model_dtype),
        channels_last_(channels_last), jit_optimize_(jit_optimize), cuda_graphs_(std::move(cuda_graphs)),
        output_(std::move(output)),
        scores_(output_ == "probabilities" || (output_ == "auto" && output_is_sigmoid) ? Scores::kAsTheyAre
                : output_ == "multi_label_logits"                                      ? Scores::kSigmoid
                                                                                       : Scores::kSoftmax),
        output_is_sigmoid_(output_is_sigmoid) {}

  Result<std::vector<TopK>> classify(const std::byte* batch, size_t n, size_t top_k) override {
    if (n == 0) return std::vector<TopK>{};
    return guarded([&] {
      torch::Tensor x = torch::from_blob(const_cast<std::byte*>(batch), batch_shape(n),
                                         torch::TensorOptions().dtype(input_dtype()));
      return forward_top_k(x, n, top_k);
    });
  }

  Result<std::vector<TopK>> classify_device(const std::vector<const std::byte*>& items, int device,
                                            size_t top_k) override {
    const size_t n = items.size();
    if (n == 0) return std::vector<TopK>{};
    if (!torch::cuda::is_available()) return FailedPrecondition("LibTorch " TORCH_VERSION " has no CUDA");
    return guarded([&] {
      // Views of the slots, stacked into one batch by one kernel on the source GPU; then moved to the
      // model's GPU (a peer copy when they differ) in the model's dtype.
      const auto options = torch::TensorOptions().dtype(input_dtype()).device(torch::kCUDA, device);
      const std::vector<int64_t> shape = {input_.channels, input_.height, input_.width};
      std::vector<torch::Tensor> views;
      views.reserve(n);
      for (const std::byte* item : items) views.push_back(torch::from_blob(const_cast<std::byte*>(item), shape, options));
      return forward_top_k(torch::stack(views), n, top_k);
    });
  }

  Result<double> time_forward(size_t n, uint32_t rounds) override {
    try {
      torch::NoGradGuard no_grad;
      torch::Tensor x = to_model_input(model_zeros(n));
      std::vector<double> times;
      for (uint32_t i = 0; i <= std::max<uint32_t>(1, rounds); ++i) {  // the first pass is not timed
        const auto start = std::chrono::steady_clock::now();
        forward(x).to(torch::kCPU);  // the copy to the host waits for the GPU
        if (i > 0) times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
      std::sort(times.begin(), times.end());
      return times[times.size() / 2];
    } catch (const std::exception& e) {
      const std::string what = first_line(e.what());
      if (what.find("out of memory") != std::string::npos) {
        return Unavailable("batch " + std::to_string(n) + " does not fit in memory: " + what);
      }
      return Internal("timing batch " + std::to_string(n) + ": " + what);
    }
  }

  Status use_batch_sizes(const std::vector<size_t>& sizes) override {
    for (size_t n : sizes) {
      // One pass each: cuDNN's execution plans and TorchScript's specialisations for this shape.
      Status s = warm_up_inner(n, 1);
      if (!s.ok()) {
        return s.message().find("out of memory") != std::string::npos ? Unavailable(s.message()) : s;
      }
    }
    run_sizes_ = sizes;
    if (cuda_graphs_ == "on" && !device_.is_cuda()) {
      return FailedPrecondition("infer.cuda_graphs: on, but the model runs on " + device_.str() +
                                " (CUDA graphs need it on CUDA)");
    }
    if (cuda_graphs_ != "off" && device_.is_cuda() && !sizes.empty()) {
      Status recorded = record_graphs(sizes);
      if (!recorded.ok()) {
        graphs_.clear();
        if (cuda_graphs_ == "on") return recorded.with_context("infer.cuda_graphs: on");
        log_warn_text("infer: batches run without CUDA graphs (infer.cuda_graphs: auto): " + recorded.message());
      }
    }
    return Status::Ok();
  }
  size_t run_size(size_t n) const override { return padded_size_for(run_sizes_, n); }
  bool replays_cuda_graphs() const override { return !graphs_.empty(); }
  bool replays_cuda_graph_at(size_t rows) const override { return graphs_.count(rows) > 0; }

  int64_t num_classes() const override { return num_classes_; }
  bool outputs_probabilities() const override { return scores_ == Scores::kAsTheyAre; }
  // Whether every row of the first warm-up pass's output was a probability distribution.
  bool warm_up_rows_were_probabilities() const { return warm_up_rows_were_probabilities_; }
  // Whether every value of it lay in [0, 1] (a distribution's, or a multi-label model's sigmoid's).
  bool warm_up_values_were_in_0_1() const { return warm_up_values_were_in_0_1_; }
  // Which part of what the model returns is its output (output_tensor); empty: the tensor it returns.
  const std::string& output_taken() const { return output_taken_; }
  std::string device() const override { return device_.str(); }

  // Runs `rounds` forward passes on zeros and checks the output is [n, classes].
  Status warm_up(size_t n, uint32_t rounds) { return warm_up_inner(n, rounds); }

 private:
  torch::ScalarType input_dtype() const { return input_.dtype == DType::kFloat16 ? torch::kHalf : torch::kFloat; }
  std::vector<int64_t> batch_shape(size_t n) const {
    return {static_cast<int64_t>(n), input_.channels, input_.height, input_.width};
  }

  // The model's device, dtype and memory format (zero rows appended up to the batch size it runs at),
  // then forward, softmax (unless the rows are probabilities already) and top-k of the n real rows on
  // the host.
  Result<std::vector<TopK>> forward_top_k(torch::Tensor x, size_t n, size_t top_k) {
    torch::NoGradGuard no_grad;
    const size_t rows = run_size(n);
    torch::Tensor logits;
    if (auto graph = graphs_.find(rows); graph != graphs_.end()) {
      // Into the rows the graph reads (dtype, device and layout converted by the copy); the rows past n
      // hold an earlier batch's frames, whose results are dropped like padding's.
      graph_input_.narrow(0, 0, static_cast<int64_t>(n)).copy_(x);
      logits = graph->second.replay();
    } else {
      x = to_model_input(x, rows);
      logits = forward(x);
    }
    if (logits.dim() != 2 || logits.size(0) != static_cast<int64_t>(rows)) {
      return Internal("model output has shape " + shape_text(logits) + ", expected [" + std::to_string(rows) +
                      ", classes]");
    }
    if (rows > n) logits = logits.narrow(0, 0, static_cast<int64_t>(n));
    const int64_t k = std::min<int64_t>(static_cast<int64_t>(top_k), logits.size(1));
    const torch::Tensor rows_as_float = logits.to(torch::kFloat);
    const torch::Tensor all_scores = scores_ == Scores::kSoftmax   ? torch::softmax(rows_as_float, 1)
                                     : scores_ == Scores::kSigmoid ? torch::sigmoid(rows_as_float)
                                                                   : rows_as_float;
    auto [scores, ids] = all_scores.topk(k, 1);
    scores = scores.to(torch::kCPU).contiguous();
    ids = ids.to(torch::kCPU).to(torch::kInt).contiguous();
    std::vector<TopK> out(n);
    const float* s = scores.data_ptr<float>();
    const int32_t* c = ids.data_ptr<int32_t>();
    for (size_t i = 0; i < n; ++i) {
      out[i].class_ids.assign(c + i * k, c + (i + 1) * k);
      out[i].scores.assign(s + i * k, s + (i + 1) * k);
    }
    return out;
  }

  // TorchScript's executor re-profiles and re-optimises the graph for each new input shape it meets,
  // and the batcher's batches vary in size (whatever arrived within max_delay_ms). A frozen model was
  // optimised once at load: it runs as it is, unless infer.jit_optimize. (A model that is not frozen
  // needs the executor's passes: its submodule calls are only inlined by them.) Per thread.
  torch::Tensor forward(const torch::Tensor& x) {
    torch::jit::GraphOptimizerEnabledGuard optimizer(jit_optimize_);
    return output_tensor(module_.forward({x}));
  }

  // The model's output as one tensor: a tensor as it is; the first element of a tuple or list
  // (torchvision's GoogLeNet and Inception return their logits first, many models (logits, features));
  // a dict's "logits" (Hugging Face's style). Anything else throws, saying what the model returned.
  // `taken`: which of those it was ("" for a tensor).
  static torch::Tensor output_tensor(const torch::jit::IValue& out, std::string* taken = nullptr) {
    if (out.isTensor()) return out.toTensor();
    const std::string kind = out.tagKind();
    if (out.isTuple() || out.isList()) {
      const size_t size = out.isTuple() ? out.toTuple()->elements().size() : out.toList().size();
      const torch::jit::IValue first = size == 0 ? torch::jit::IValue() : out.isTuple() ? out.toTuple()->elements()[0]
                                                                                        : out.toList().get(0);
      if (first.isTensor()) {
        if (taken) *taken = "the first element of the " + std::string(out.isTuple() ? "tuple" : "list") + " of " +
                            std::to_string(size) + " it returns";
        return first.toTensor();
      }
    } else if (out.isGenericDict()) {
      const auto dict = out.toGenericDict();
      const auto logits = dict.find(torch::jit::IValue(std::string("logits")));
      if (logits != dict.end() && logits->value().isTensor()) {
        if (taken) *taken = "the \"logits\" of the dict it returns";
        return logits->value().toTensor();
      }
    }
    throw std::runtime_error("it returns a value of kind '" + kind + "', expected a tensor [N, classes], or a tuple or list whose "
                             "first element is one, or a dict with one under \"logits\"");
  }

  // A batch of n zero images made where the model runs (no host batch of up to hundreds of MB to copy).
  torch::Tensor model_zeros(size_t n) const {
    return torch::zeros(batch_shape(n), torch::TensorOptions().dtype(model_dtype_).device(device_));
  }

  torch::Tensor to_model_input(torch::Tensor x, size_t rows = 0) const {
    x = x.to(device_, model_dtype_, /*non_blocking=*/false, /*copy=*/false);
    if (static_cast<int64_t>(rows) > x.size(0)) {
      x = torch::cat({x, torch::zeros({static_cast<int64_t>(rows) - x.size(0), x.size(1), x.size(2), x.size(3)},
                                      x.options())});
    }
    if (channels_last_) x = x.contiguous(torch::MemoryFormat::ChannelsLast);
    return x;
  }

#ifdef VAPIPE_TORCH_CUDA
  // One batch size's recorded forward pass: replay() runs its kernels on the current stream, reading
  // graph_input_'s first rows and writing `output`.
  struct RecordedPass {
    std::shared_ptr<at::cuda::CUDAGraph> graph;
    torch::Tensor output;
    torch::Tensor replay() {
      c10::cuda::CUDAGuard device_guard(output.device().index());  // that GPU's current stream
      graph->replay();
      return output;
    }
  };

  // Records the forward pass at each size (largest first, so that the smaller ones fit in the memory
  // pool the graphs share; they never run at once) on a side stream, as CUDA requires, after warm-up
  // passes there; then checks that replays give the plain run's answers.
  Status record_graphs(const std::vector<size_t>& sizes) {
    try {
      torch::NoGradGuard no_grad;
      c10::cuda::CUDAGuard device_guard(device_.index());
      graph_input_ = to_model_input(model_zeros(sizes.back()));
      torch::cuda::synchronize(device_.index());
      c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, device_.index());
      std::map<size_t, RecordedPass> graphs;
      {
        c10::cuda::CUDAStreamGuard stream_guard(side);
        // The pool's id type moved between namespaces across LibTorch versions; it is a pair in all.
        decltype(std::declval<at::cuda::CUDAGraph&>().pool()) pool{0, 0};
        for (auto it = sizes.rbegin(); it != sizes.rend(); ++it) {
          torch::Tensor x = graph_input_.narrow(0, 0, static_cast<int64_t>(*it));
          for (int i = 0; i < 2; ++i) forward(x);  // this stream's cuBLAS workspace, the executor's plan
          side.synchronize();
          auto graph = std::make_shared<at::cuda::CUDAGraph>();
#if TORCH_VERSION_MAJOR >= 2
          // Only this thread is barred from unsafe CUDA calls while recording.
          graph->capture_begin(pool, cudaStreamCaptureModeThreadLocal);
#else
          graph->capture_begin(pool);
#endif
          torch::Tensor out;
          try {
            out = forward(x);
          } catch (...) {
            try {
              graph->capture_end();
            } catch (...) {
            }
            throw;
          }
          graph->capture_end();
          if (pool.first == 0 && pool.second == 0) pool = graph->pool();
          graphs.emplace(*it, RecordedPass{std::move(graph), std::move(out)});
        }
        side.synchronize();
      }
      graphs_ = std::move(graphs);
      // A replay must answer as the plain run does, at the largest size and the smallest.
      for (size_t rows : {sizes.back(), sizes.front()}) {
        torch::Tensor x = torch::randn(batch_shape(rows), torch::TensorOptions().dtype(torch::kFloat).device(device_));
        graph_input_.narrow(0, 0, static_cast<int64_t>(rows)).copy_(x);
        torch::Tensor replayed = graphs_.at(rows).replay().to(torch::kFloat);
        torch::Tensor plain = forward(to_model_input(x)).to(torch::kFloat);
        const double scale = std::max(1.0, plain.abs().max().item<double>());
        const double diff = (replayed - plain).abs().max().item<double>();
        if (!(diff <= 1e-2 * scale)) {  // NaN fails too
          graphs_.clear();
          return Internal("the CUDA graph at batch " + std::to_string(rows) + " answers differently from a plain " +
                          "run (largest difference " + std::to_string(diff) + " in logits up to " +
                          std::to_string(scale) + ")");
        }
      }
      return Status::Ok();
    } catch (const c10::Error& e) {
      graphs_.clear();
      return Internal(std::string("recording CUDA graphs failed: ") + e.what_without_backtrace());
    } catch (const std::exception& e) {
      graphs_.clear();
      return Internal("recording CUDA graphs failed: " + first_line(e.what()));
    }
  }
#else
  struct RecordedPass {
    torch::Tensor replay() { return {}; }
  };
  Status record_graphs(const std::vector<size_t>&) {
    return FailedPrecondition("LibTorch " TORCH_VERSION " was built without CUDA graphs");
  }
#endif

  template <typename Fn>
  Result<std::vector<TopK>> guarded(Fn&& fn) {
    try {
      return fn();
    } catch (const c10::Error& e) {
      return Internal(std::string("forward failed: ") + e.what_without_backtrace());
    } catch (const std::exception& e) {
      return Internal("forward failed: " + first_line(e.what()));
    }
  }

  Status warm_up_inner(size_t n, uint32_t rounds) {
    const std::string in_shape = "[" + std::to_string(n) + ", " + std::to_string(input_.channels) + ", " +
                                 std::to_string(input_.height) + ", " + std::to_string(input_.width) + "]";
    try {
      torch::NoGradGuard no_grad;
      torch::Tensor x = to_model_input(model_zeros(n));
      for (uint32_t i = 0; i < rounds; ++i) {
        torch::Tensor logits;
        {
          torch::jit::GraphOptimizerEnabledGuard optimizer(jit_optimize_);
          logits = output_tensor(module_.forward({x}), &output_taken_);
        }
        if (logits.dim() != 2 || logits.size(0) != static_cast<int64_t>(n)) {
          return InvalidArgument("forward on " + in_shape + " returns " + shape_text(logits) +
                                 ", expected [" + std::to_string(n) + ", classes]");
        }
        num_classes_ = logits.size(1);
        if (!rows_checked_) {
          rows_checked_ = true;
          warm_up_rows_were_probabilities_ = rows_are_probabilities(logits);
          warm_up_values_were_in_0_1_ = values_are_in_0_1(logits);
          if (output_ == "auto" && !output_is_sigmoid_) {
            scores_ = warm_up_rows_were_probabilities_ ? Scores::kAsTheyAre : Scores::kSoftmax;
          }
        }
      }
    } catch (const c10::Error& e) {
      return InvalidArgument("forward on " + in_shape + " fails: " + e.what_without_backtrace());
    } catch (const std::exception& e) {  // e.g. torch::jit::JITException from the interpreter
      return InvalidArgument("forward on " + in_shape + " fails: " + first_line(e.what()));
    }
    return Status::Ok();
  }

  // Each row in [0, 1] and summing to 1: a model that ends in its own softmax (on the warm-up batch of
  // zeros; a model of logits would need its logits on zeros to form such a row by chance).
  static bool rows_are_probabilities(const torch::Tensor& out) {
    const torch::Tensor rows = out.to(torch::kFloat).to(torch::kCPU);
    return values_are_in_0_1(out) && (rows.sum(1) - 1).abs().max().item<float>() <= tolerance_of(out);
  }
  static bool values_are_in_0_1(const torch::Tensor& out) {
    const torch::Tensor rows = out.to(torch::kFloat).to(torch::kCPU);
    const float tolerance = tolerance_of(out);
    return rows.numel() > 0 && rows.min().item<float>() >= -tolerance && rows.max().item<float>() <= 1 + tolerance;
  }
  static float tolerance_of(const torch::Tensor& out) { return out.scalar_type() == torch::kHalf ? 1e-2f : 1e-4f; }

  static std::string shape_text(const torch::Tensor& t) {
    std::string s = "[";
    for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
    return s + "]";
  }

  torch::jit::script::Module module_;
  torch::Device device_;
  TensorInfo input_;
  torch::ScalarType model_dtype_;
  bool channels_last_;
  bool jit_optimize_;
  int64_t num_classes_ = 0;
  std::vector<size_t> run_sizes_;  // infer.batch_shapes: padded; empty: each batch at its own size
  std::string cuda_graphs_;        // infer.cuda_graphs: auto | on | off
  std::string output_;  // infer.output: auto | logits | probabilities | multi_label_logits
  // What scores are: the rows' softmax (logits of one label per frame), the rows as they are
  // (probabilities: a softmax's, or a multi-label model's sigmoid's), or each row value's sigmoid
  // (a multi-label model's logits). For auto decided at load (a sigmoid at the output) or at the first
  // warm-up (rows that are distributions).
  enum class Scores { kSoftmax, kAsTheyAre, kSigmoid };
  Scores scores_;
  bool output_is_sigmoid_;  // the model's graph computes its output with a sigmoid
  bool rows_checked_ = false;
  bool warm_up_rows_were_probabilities_ = false;
  bool warm_up_values_were_in_0_1_ = false;
  std::string output_taken_;
  torch::Tensor graph_input_;      // the largest padded batch, in the model's dtype and layout
  std::map<size_t, RecordedPass> graphs_;  // by padded batch size; empty: plain runs
};

Result<torch::Device> choose_device(const std::string& requested, bool cpu_fallback) {
  const bool cuda = torch::cuda::is_available();
  if (requested == "auto") return cuda ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  if (requested == "cpu") return torch::Device(torch::kCPU);
  if (!cuda && cpu_fallback) {
    // A GPU machine with a CPU build of LibTorch (Debian's): decode and preprocess still use the GPU.
    log_warn_text("infer: LibTorch " TORCH_VERSION " sees no CUDA device (a CPU build?): the model runs on the "
                  "CPU instead of " + requested);
    return torch::Device(torch::kCPU);
  }
  if (!cuda) {
    return FailedPrecondition("infer.device is '" + requested +
                              "' but LibTorch sees no CUDA device (this LibTorch " TORCH_VERSION
                              " may be a CPU build); use device: auto or cpu");
  }
  try {
    return torch::Device(requested);
  } catch (const c10::Error& e) {
    return InvalidArgument("infer.device '" + requested + "': " + e.what_without_backtrace());
  }
}

// What a file LibTorch could not load as TorchScript most likely is, and what to do: the usual mistake
// is a file of torch.save (a state_dict, or a module pickled with its Python class), or a model of
// another framework. "" when nothing is recognised.
std::string not_torchscript_hint(const std::string& path, const std::string& error) {
  std::string head(4, '\0');
  std::ifstream(path, std::ios::binary).read(head.data(), 4);
  const std::string torchscript = "export it as TorchScript from PyTorch, in eval mode: "
                                  "torch.jit.script(model).save(path), or torch.jit.trace(model, example).save(path)";
  if (head.compare(0, 2, "PK") == 0 && error.find("constants.pkl") != std::string::npos) {
    return "it is a file of torch.save (a state_dict, or a module pickled with its Python class), which only "
           "Python with the model's code can read: " + torchscript;
  }
  if (static_cast<unsigned char>(head[0]) == 0x80) {
    return "it is a Python pickle (torch.save of PyTorch before 1.6, or another pickled object): " + torchscript;
  }
  if (head.compare(0, 2, "PK") != 0) {
    const std::string ext = std::filesystem::path(path).extension().string();
    const std::string what = ext == ".onnx" ? "an ONNX model"
                             : ext == ".engine" || ext == ".plan" || ext == ".trt" ? "a TensorRT engine"
                             : ext == ".pb" || ext == ".h5" || ext == ".keras" || ext == ".tflite" ? "a TensorFlow or Keras model"
                                                                                                     : "";
    return "TorchScript files are zip archives and this one is not" + (what.empty() ? "" : " (" + what + "?)") +
           ": vapipe runs TorchScript; " + torchscript;
  }
  return "";
}

}  // namespace

Result<std::unique_ptr<Classifier>> libtorch::load_classifier(const ClassifierOptions& options) {
  const std::string& path = options.model_path;
  if (!std::filesystem::exists(path)) return NotFound("model " + path + ": file not found");
  // LibTorch's own default was 1 thread on the 2-core development VMs (it counts physical cores):
  // half the machine for a CPU-bound forward pass. 0 means every CPU this process may use.
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  at::set_num_threads(static_cast<int>(options.threads > 0 ? options.threads : cpus));
  VAPIPE_ASSIGN_OR_RETURN(torch::Device device, choose_device(options.device, options.cpu_fallback));
  // fp16 and channels-last pay off on CUDA (tensor cores, cuDNN's NHWC kernels); on the CPU the model
  // stays fp32 and NCHW.
  const bool cuda = device.is_cuda();
  const torch::ScalarType model_dtype = cuda && options.precision == DType::kFloat16 ? torch::kHalf : torch::kFloat;
  const bool channels_last = cuda && options.channels_last;
  if (!cuda && options.precision == DType::kFloat16) {
    log_warn_text("model " + path + ": infer.precision fp16 applies on CUDA only; running fp32 on the CPU");
  }
  torch::jit::script::Module module;
  try {
    module = torch::jit::load(path, device);
    module.eval();
    if (model_dtype == torch::kHalf) module.to(torch::kHalf);
    if (channels_last) {
      // Before freezing: the 4-D weights become constants in the layout they have now.
      for (torch::Tensor p : module.parameters()) {
        if (p.dim() == 4) p.set_data(p.contiguous(torch::MemoryFormat::ChannelsLast));
      }
    }
  } catch (const c10::Error& e) {
    const std::string error = e.what_without_backtrace();
    const std::string hint = not_torchscript_hint(path, error);
    return InvalidArgument("model " + path + " is not a TorchScript model LibTorch " TORCH_VERSION " can load: " +
                           first_line(error) + (hint.empty() ? "" : ": " + hint));
  } catch (const std::exception& e) {
    return InvalidArgument("model " + path + " could not be loaded: " + e.what());
  }
  const bool output_is_sigmoid = output_comes_from_sigmoid(module);  // before freezing rewrites the graph
  bool frozen = false;
  if (options.optimize) {
    // Frozen for inference (torch.jit.optimize_for_inference): weights become constants, conv+BN
    // fold, and on the CPU convolutions run in oneDNN's layout. A model the pass cannot handle
    // still runs, unoptimised.
    try {
      module = torch::jit::optimize_for_inference(module);
      frozen = true;
    } catch (const std::exception& e) {
      log_warn_text("model " + path + ": optimize_for_inference failed, running it as loaded: " +
                    first_line(e.what()));
    }
  }
  auto classifier = std::make_unique<TorchClassifier>(std::move(module), device, options.input, model_dtype,
                                                      channels_last, options.jit_optimize || !frozen,
                                                      options.cuda_graphs, options.output, output_is_sigmoid);
  log_info_text("model " + path + ": " + (options.optimize ? "frozen" : "as loaded") + " on " + device.str() +
                (model_dtype == torch::kHalf ? ", fp16" : ", fp32") + (channels_last ? ", channels-last" : ""));

  // Warm-up at the batch size the pipeline will use; it also tells the number of classes.
  VAPIPE_RETURN_IF_ERROR(classifier->warm_up(std::max<size_t>(1, options.warmup_batch_size),
                                             std::max<uint32_t>(1, options.warmup_batches))
                             .with_context("model " + path));
  if (!classifier->output_taken().empty()) {
    log_info_text("model " + path + ": its output is " + classifier->output_taken());
  }
  const bool probabilities = classifier->warm_up_rows_were_probabilities();
  const bool in_0_1 = classifier->warm_up_values_were_in_0_1();
  const std::string multi_label = "a multi-label model: each score is its label's own probability, a frame may "
                                  "have several likely labels or none";
  if (options.output == "auto" && output_is_sigmoid) {
    log_info_text("model " + path + ": its output is a sigmoid's (" + multi_label +
                  "): scores are its rows as they are, top_k its most likely labels (infer.output: auto)");
  } else if (options.output == "auto" && probabilities) {
    log_info_text("model " + path + ": its outputs are probabilities already (each row in [0, 1], summing to 1): "
                  "scores are those rows, without a softmax (infer.output: auto)");
  } else if (options.output == "auto" && in_0_1) {
    log_warn_text("model " + path + ": its outputs on the warm-up batch all lie in [0, 1] without summing to 1, as "
                  "a multi-label model's sigmoid gives, but no sigmoid was found at its output: they are taken for "
                  "logits and softmaxed (if they are each label's own probability, set infer.output: "
                  "probabilities)");
  } else if (options.output == "logits" && (probabilities || output_is_sigmoid)) {
    log_warn_text("model " + path + ": infer.output is logits, but its outputs look like probabilities already (" +
                  (output_is_sigmoid ? "a sigmoid's" : "each row in [0, 1], summing to 1") +
                  "): a softmax of them flattens every score towards 1/" + std::to_string(classifier->num_classes()) +
                  " (set infer.output: auto or probabilities)");
  } else if (options.output == "multi_label_logits" && (probabilities || output_is_sigmoid)) {
    log_warn_text("model " + path + ": infer.output is multi_label_logits, but its outputs are probabilities already (" +
                  (output_is_sigmoid ? "a sigmoid's" : "each row in [0, 1], summing to 1") +
                  "): a sigmoid of them squeezes every score into [0.5, 0.73] (set infer.output: auto or "
                  "probabilities)");
  } else if (options.output == "probabilities" && !in_0_1) {
    log_warn_text("model " + path + ": infer.output is probabilities, but its outputs on the warm-up batch are not "
                  "(a value outside [0, 1]): scores are those values as they are, not probabilities (set "
                  "infer.output: auto, logits or multi_label_logits)");
  }
  return std::unique_ptr<Classifier>(std::move(classifier));
}

}  // namespace vapipe
