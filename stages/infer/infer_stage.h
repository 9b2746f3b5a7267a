#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/config_copy.h"
#include "pipeline/stage.h"
#include "stages/infer/classifier.h"

namespace vapipe {

using ClassifierFactory = std::function<Result<std::unique_ptr<Classifier>>(const ClassifierOptions&)>;

// Batches in, one result per frame out. A frame that arrives with an error, or whose tensor does not
// match the model input, gets an error result; the rest of its batch is classified (Triton's
// per-request errors). A model that fails to load, or whose classes do not match its labels, fails
// open(): a start-up error.
//
// In a live job, a reload that changes the model (pipeline/infer_reload.h) is taken from the job's copy
// of its config, looked at once a second: the new model is loaded and warmed up on a thread of its own
// while this one goes on classifying with the old, and every batch after it is ready goes through it;
// one that cannot be used is said, and the old one goes on.
class InferStage final : public Stage {
 public:
  // gpu_status: whether a GPU's CUDA context still works (pipeline/cuda/device_memory.h), asked after
  // a batch on the GPU failed; tests pass their own.
  using GpuStatus = std::function<Status(int gpu)>;
  explicit InferStage(ClassifierFactory factory = load_torchscript_classifier, GpuStatus gpu_status = nullptr);
  StageKind kind() const override { return StageKind::kInfer; }
  Status open(const StageContext& ctx) override;
  Status process(Message&& in, Emitter& out) override;
  // Batches that queued while the model was busy go through it together, up to the batch size it was
  // warmed up (or timed) for: fewer, larger forward passes exactly when infer is the bottleneck. (One
  // result per frame leaves infer, so how frames were grouped is not seen downstream.) Stream events
  // keep their place between the results.
  size_t max_inputs_at_once() const override { return 64; }
  Status process_many(std::vector<Message>&& in, Emitter& out) override;
  // A live job's copy of its config, looked at once a second; and a reloaded model, taken once ready.
  std::optional<SteadyTime> next_deadline() const override;
  Status on_deadline(Emitter& out) override;
  // Logs how the batches went: their sizes, and the model's share of the stage's time.
  Status close(Emitter& out) override;
  // batches (forward passes), frames classified, rows run (padding included), classify_seconds.
  double watchdog_floor_s() const override { return watchdog_floor_s_; }
  StageCounters counters() const override {
    return {{"batches", static_cast<double>(batches_)},
            {"frames", static_cast<double>(frames_)},
            {"rows", static_cast<double>(rows_)},
            {"cuda_graph_batches", static_cast<double>(graph_batches_)},
            {"classify_seconds", classify_s_},
            {"model_reloads", static_cast<double>(model_reloads_)},
            {"model_reload_failures", static_cast<double>(model_reload_failures_)}};
  }
  // model (its model_name), model_file, labels_file, model_file_modified (when the file was written, as
  // read: a model copied over the old one shows); while a reloaded model loads, loading (its file);
  // after a reload's model could not be used, last_reload_error (until one is taken).
  StageFacts facts() const override;
  ~InferStage() override;
  // Tests: the file a live job's reloads rewrite (else $VAPIPE_CONFIG_AS_STARTED, in a live job).
  void set_config_copy(std::string path) { config_copy_.set_path(std::move(path)); }
  // Tests: whether a reloaded model is being loaded (taken by the next batch or deadline once ready).
  bool loading_model() const { return loader_.joinable(); }

 private:
  static constexpr std::chrono::seconds kConfigCheckPeriod{1};
  // The model of `infer` (its reloadable settings as reloaded), with its labels: loaded and warmed up.
  Status load_model(const Config& config, const InferConfig& infer, std::unique_ptr<Classifier>* classifier,
                    std::vector<std::string>* labels) const;
  // A look at the job's copy of its config: a reload's name or top_k taken, or its model started loading.
  void check_config_copy();
  // Loads `reloaded`'s model on loader_; the stage thread goes on with the running one meanwhile.
  void start_model_load(Config reloaded);
  // On the stage thread, between batches: the loaded model in use from now on (or its error said).
  void take_loaded_model();
  // The running model's settings taken from a reload that needs no new model (model_name, top_k).
  void take_settings(const InferConfig& infer);

  ClassifierFactory factory_;
  ClassifierOptions options_;  // as the running model was made: a reloaded one is made alike
  bool padded_ = false;        // batches run at padded sizes (use_batch_sizes at load)
  InferConfig running_;        // the settings the running model was made with
  ConfigCopy config_copy_{kConfigCheckPeriod};
  std::string config_source_;
  struct LoadedModel {
    Status status;
    std::unique_ptr<Classifier> classifier;
    std::vector<std::string> labels;
    InferConfig infer;
    double seconds = 0;
    std::optional<Config> config;  // when it could not be used: the reload's, to try again
    std::pair<std::string, std::string> identities;  // its model's and labels' files, as read
    std::string modified;                            // its model file's time, as read (facts)
  };
  // A reload whose model could not be used, and its files' identities then: tried again, once, when one
  // of them changes (retry_failed_reload, at each look at the copy).
  struct FailedReload {
    Config config;
    std::string model_identity, labels_identity;
  };
  void retry_failed_reload();
  // At a reload (the copy rewritten): the running model's or labels' file replaced under the same path
  // since it was read (a new model copied over the old) is loaded again, as a reload's new model is.
  void reload_replaced_files();
  std::pair<std::string, std::string> running_identities_;  // the running model's files, as read
  std::string running_modified_;  // when the running model's file was written, UTC (facts)
  bool recheck_files_ = false;  // a reload came while a model loaded: its files looked at once taken
  std::thread loader_;                  // loading a reloaded model
  mutable std::mutex loaded_mutex_;
  std::optional<LoadedModel> loaded_;   // under loaded_mutex_: what loader_ made, once done
  std::optional<Config> next_reload_;   // a reload that came while one loaded: loaded next
  std::string loading_file_;            // the model loader_ loads
  std::string last_reload_error_;       // why the last reload's model could not be used ("": taken)
  std::optional<FailedReload> failed_reload_;
  uint64_t model_reloads_ = 0, model_reload_failures_ = 0;
  std::unique_ptr<Classifier> classifier_;
  std::vector<std::string> labels_;
  std::string model_name_;
  TensorInfo input_;
  uint32_t top_k_ = 3;
  bool classifier_on_gpu_ = false;  // tensors in GPU memory are batched there; else copied to the host
  int classifier_gpu_ = -1;         // its GPU, when on one
  GpuStatus gpu_status_;
  std::vector<std::byte> staging_;  // the batch, contiguous
  // Batches classified, their frames, the largest, and seconds in classify (the model, with its
  // copies and waits) against the whole of process (results sent included).
  size_t merge_limit_ = 1;  // frames in one forward pass when queued batches are merged
  uint64_t batches_ = 0, frames_ = 0, largest_batch_ = 0, rows_ = 0;
  uint64_t graph_batches_ = 0;  // of them, replayed as a CUDA graph (infer.cuda_graphs)
  // Per batch size the model ran at: its first pass apart, since a new input shape costs extra.
  struct PassTimes {
    uint64_t passes = 0;
    double first_s = 0, later_s = 0;
    void add(double s) { (passes++ == 0 ? first_s : later_s) += s; }
  };
  std::map<size_t, PassTimes> by_run_size_;
  double classify_s_ = 0, process_s_ = 0;
  double watchdog_floor_s_ = 0;  // 10x open(): model load and warm-up (pipeline/stage_watchdog.h)
};

}  // namespace vapipe
