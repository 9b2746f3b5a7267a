#include "stages/infer/infer_stage.h"

#include <cstdint>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "pipeline/cuda/device_memory.h"
#include "pipeline/file_identity.h"
#include "pipeline/infer_reload.h"
#include "pipeline/logging.h"
#include "stages/infer/auto_batch.h"
#include "stages/infer/labels.h"

namespace vapipe {

namespace {

// Times the model at batch 1, 2, 4, ... until throughput stops growing, `limit` is reached, or (on a
// GPU) doubling the batch would not leave a tenth of the GPU's memory free; picks the smallest batch
// within 5% of the best throughput.
Result<size_t> search_batch_size(Classifier& classifier, size_t limit, int gpu) {
  std::vector<BatchCost> costs;
  uint64_t free_start = 0, free_now = 0, total = 0;
  const bool watch_memory = gpu >= 0 && gpu_memory_info(gpu, &free_start, &total).ok();
  for (size_t batch = 1;; batch = std::min(limit, batch * 2)) {
    auto seconds = classifier.time_forward(batch, 3);
    if (!seconds.ok()) {
      if (seconds.status().code() == StatusCode::kUnavailable && !costs.empty()) break;  // out of memory
      return seconds.status().with_context("batch.max_batch_size: auto");
    }
    costs.push_back(BatchCost{batch, *seconds});
    if (batch_search_done(costs, limit)) break;
    if (watch_memory && gpu_memory_info(gpu, &free_now, &total).ok() &&
        !next_batch_fits(free_start, free_now, total / 10)) {
      break;
    }
  }
  const size_t chosen = choose_batch_size(costs);
  VAPIPE_LOG_INFO("infer: auto batch size {} (measured images/s at batch {})", chosen, describe_costs(costs));
  return chosen;
}

// When the file at `path` was last written, by the wall clock in UTC ("2026-12-05T15:02:54Z"); "" when
// it cannot be stat'ed. Said beside the running model's file: a model copied over the old one (the same
// path, often the same name) shows as its new time.
std::string modified_utc(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  std::tm tm{};
  gmtime_r(&st.st_mtim.tv_sec, &tm);
  char out[32];
  return std::strftime(out, sizeof out, "%Y-%m-%dT%H:%M:%SZ", &tm) ? std::string(out) : std::string();
}

}  // namespace

InferStage::InferStage(ClassifierFactory factory, GpuStatus gpu_status)
    : factory_(std::move(factory)), gpu_status_(gpu_status ? std::move(gpu_status) : GpuStatus(cuda_context_status)) {}

ClassifierOptions options_for(const InferConfig& c, ClassifierOptions options) {
  options.model_path = c.model;
  options.precision = c.precision;
  options.channels_last = c.channels_last;
  options.output = c.output;
  options.warmup_batches = c.warmup_batches;
  options.optimize = c.optimize;
  return options;
}

Status InferStage::load_model(const Config& config, const InferConfig& infer, std::unique_ptr<Classifier>* classifier,
                              std::vector<std::string>* labels) const {
  // A file not there is named by its key and line, as the config's other errors are (a README
  // example's path kept, a typo).
  auto at_key = [&config](int line, const std::string& key, const Status& status) {
    const std::string where = line > 0 ? config.source + ":" + std::to_string(line) + ": " : "";
    return Status(status.code(), where + key + ": " + status.message());
  };
  Result<std::vector<std::string>> loaded = load_labels(infer.labels);
  if (!loaded.ok()) return at_key(infer.labels_line, "infer.labels", loaded.status());
  *labels = std::move(loaded).value();
  VAPIPE_RETURN_IF_ERROR(check_labels_the_config_names(config, *labels));
  Result<std::unique_ptr<Classifier>> made = factory_(options_for(infer, options_));
  if (!made.ok() && made.status().code() == StatusCode::kNotFound) return at_key(infer.model_line, "infer.model", made.status());
  VAPIPE_ASSIGN_OR_RETURN(*classifier, std::move(made));
  if ((*classifier)->num_classes() != static_cast<int64_t>(labels->size())) {
    return InvalidArgument("model " + infer.model + " has " + std::to_string((*classifier)->num_classes()) +
                           " outputs but labels file " + infer.labels + " has " + std::to_string(labels->size()) +
                           " labels");
  }
  return Status::Ok();
}

Status InferStage::open(const StageContext& ctx) {
  const auto opening = std::chrono::steady_clock::now();
  // A live job's reloads of the model come through its copy of the config (vapipe run's): read here, and
  // the model's settings taken from it, so that they are those of the text this process compares later
  // reloads with (one taken between the stage's load of the copy and this read is not missed).
  InferConfig c = ctx.config.infer;
  config_source_ = ctx.config.source;
  if (std::optional<Result<Config>> copy = config_copy_.start(ctx.config)) {
    if (copy->ok()) {
      take_reloadable_infer_settings((*copy)->infer, c);
    } else {
      VAPIPE_LOG_WARN("infer: {}: reloads of the model will not be taken", copy->status().message());
    }
  }
  if (ctx.config.batch.auto_size && ctx.layout) {
    std::error_code ec;  // a choice left by an earlier run of this job must not reach batch
    std::filesystem::remove(auto_batch_file(ctx.layout->run_dir, ctx.layout->lane), ec);
  }
  input_ = TensorInfo{ctx.config.preprocess.dtype, 3, ctx.config.preprocess.height, ctx.config.preprocess.width};
  // The lane decides (auto means CUDA when the lane has a GPU); without one (tests), the config does.
  options_.device = ctx.lane ? device_name(ctx.lane->infer_gpu) : c.device;
  options_.cpu_fallback = c.device == "auto";
  options_.jit_optimize = c.jit_optimize;
  options_.cuda_graphs = c.cuda_graphs;
  options_.threads = c.threads;
  options_.input = input_;
  // With an automatic batch size the search below runs every size; warm up small.
  options_.warmup_batch_size = ctx.config.batch.auto_size ? 1 : ctx.config.batch.max_batch_size;
  // The files' identities before they are read: one replaced meanwhile is loaded again at a reload.
  running_identities_ = {file_identity(c.model), file_identity(c.labels)};
  running_modified_ = modified_utc(c.model);
  VAPIPE_RETURN_IF_ERROR(load_model(ctx.config, c, &classifier_, &labels_));
  running_ = c;
  model_name_ = c.model_name;
  top_k_ = c.top_k;
  classifier_on_gpu_ = classifier_->device().rfind("cuda", 0) == 0;
  if (classifier_on_gpu_) {
    const std::string& d = classifier_->device();
    classifier_gpu_ = d.size() > 5 && d[4] == ':' ? std::atoi(d.c_str() + 5) : 0;  // "cuda:N" or "cuda"
  }
  merge_limit_ = std::max<size_t>(1, ctx.config.batch.max_batch_size);
  if (ctx.config.batch.auto_size) {
    const int gpu = ctx.lane ? ctx.lane->infer_gpu : -1;
    VAPIPE_ASSIGN_OR_RETURN(size_t chosen, search_batch_size(*classifier_, ctx.config.batch.auto_limit, gpu));
    if (!ctx.layout) return FailedPrecondition("batch.max_batch_size: auto needs the job's run folder");
    const std::string path = auto_batch_file(ctx.layout->run_dir, ctx.layout->lane);
    VAPIPE_RETURN_IF_ERROR(write_auto_batch_size(path, chosen));
    merge_limit_ = chosen;
    options_.warmup_batch_size = chosen;  // (a reloaded model warms up at the chosen size)
  }
  VAPIPE_LOG_INFO("infer: model {} ({} classes) on {}, {} warm-up batches of {}", c.model, labels_.size(),
                  classifier_->device(), c.warmup_batches, ctx.config.batch.auto_size ? 1 : options_.warmup_batch_size);
  padded_ = c.batch_shapes == "padded" || (c.batch_shapes == "auto" && classifier_on_gpu_);
  if (c.cuda_graphs == "on" && !(padded_ && classifier_on_gpu_)) {
    return FailedPrecondition(std::string("infer.cuda_graphs is 'on' but ") +
                              (classifier_on_gpu_ ? "batch shapes are exact" : "the model runs on " + classifier_->device()) +
                              ": CUDA graphs need a model on CUDA and padded batch shapes");
  }
  if (padded_) {
    const std::vector<size_t> sizes = padded_batch_sizes(merge_limit_);
    const auto start = std::chrono::steady_clock::now();
    VAPIPE_RETURN_IF_ERROR(classifier_->use_batch_sizes(sizes).with_context(
        "infer.batch_shapes: padded (model " + c.model + ")"));
    std::string list;
    for (size_t n : sizes) list += (list.empty() ? "" : ", ") + std::to_string(n);
    VAPIPE_LOG_INFO("infer: batches padded to one of {} sizes ({}); each ran once at start{}, in {:.2f} s",
                    sizes.size(), list,
                    classifier_->replays_cuda_graphs() ? " and was recorded as a CUDA graph that batches replay" : "",
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  // One batch never takes longer than loading the model and its warm-up passes at the full batch size
  // did, ten times over: a big model on a CPU must not look stuck to the watchdog.
  watchdog_floor_s_ = 10.0 * std::chrono::duration<double>(std::chrono::steady_clock::now() - opening).count();
  return Status::Ok();
}

std::optional<SteadyTime> InferStage::next_deadline() const {
  std::optional<SteadyTime> next;
  if (config_copy_.followed()) next = config_copy_.next_look();
  std::lock_guard<std::mutex> lock(loaded_mutex_);
  if (loaded_) next = SteadyTime{};  // ready: taken now, with no batch to wait for
  return next;
}

Status InferStage::on_deadline(Emitter& /*out*/) {
  take_loaded_model();
  if (config_copy_.due(std::chrono::steady_clock::now())) {
    check_config_copy();
    retry_failed_reload();
  }
  return Status::Ok();
}

void InferStage::retry_failed_reload() {
  if (!failed_reload_ || loader_.joinable()) return;
  const InferConfig& infer = failed_reload_->config.infer;
  if (file_identity(infer.model) == failed_reload_->model_identity &&
      file_identity(infer.labels) == failed_reload_->labels_identity) {
    return;
  }
  Config again = std::move(failed_reload_->config);
  failed_reload_.reset();
  VAPIPE_LOG_INFO("infer: {} changed since its model could not be used: trying it again", again.infer.model);
  start_model_load(std::move(again));
}

void InferStage::check_config_copy() {
  bool rewritten = false;
  auto text = config_copy_.look(&rewritten);
  if (!text.ok()) {
    VAPIPE_LOG_ERROR("infer: reload: {}; the model stays as it is", text.status().message());
    return;
  }
  if (!*text) {
    if (rewritten) reload_replaced_files();  // (the same text: the supervisor found a file replaced)
    return;
  }
  // The supervisor took this reload after the same comparison: an error here is a copy rewritten by
  // hand, or a reload this process missed; said, nothing changes.
  auto change = compare_infer_sections(config_copy_.running_text(), **text, config_source_);
  if (!change.ok()) {
    VAPIPE_LOG_ERROR("infer: reload: {}; the model stays as it is", change.status().message());
    return;
  }
  auto reloaded = config_copy_.load(**text);
  if (!reloaded.ok()) {
    VAPIPE_LOG_ERROR("infer: reload: {}; the model stays as it is", reloaded.status().message());
    return;
  }
  config_copy_.take(std::move(**text));
  failed_reload_.reset();  // (a newer reload: that one is tried)
  if (loader_.joinable()) {
    next_reload_ = std::move(reloaded).value();  // after the one loading (the latest reload wins)
    recheck_files_ = true;
    return;
  }
  const std::vector<std::string> keys = changed_infer_settings(running_, reloaded->infer);
  if (!infer_change_needs_new_model(keys)) {
    // The config names the model that runs (back to it after one that could not be used): nothing of
    // it is unused any more (`vapipe reload` says a model error while one is left).
    last_reload_error_.clear();
    if (!keys.empty()) take_settings(reloaded->infer);
    reload_replaced_files();
    return;
  }
  start_model_load(std::move(reloaded).value());
}

void InferStage::reload_replaced_files() {
  if (loader_.joinable()) {
    recheck_files_ = true;  // (after the model loading now: it may have read the new file already)
    return;
  }
  const std::pair<std::string, std::string> now{file_identity(running_.model), file_identity(running_.labels)};
  if (now == running_identities_) return;
  // One that could not be used is tried again when its files change (retry_failed_reload), not before.
  if (failed_reload_ && failed_reload_->config.infer.model == running_.model &&
      failed_reload_->config.infer.labels == running_.labels && now.first == failed_reload_->model_identity &&
      now.second == failed_reload_->labels_identity) {
    return;
  }
  auto reloaded = config_copy_.load(config_copy_.running_text());
  if (!reloaded.ok()) {
    VAPIPE_LOG_ERROR("infer: reload: {}; the model stays as it is", reloaded.status().message());
    return;
  }
  VAPIPE_LOG_INFO("infer: {} was replaced under the same path since its model was loaded",
                  now.first != running_identities_.first ? running_.model : running_.labels);
  failed_reload_.reset();
  start_model_load(std::move(reloaded).value());
}

void InferStage::take_settings(const InferConfig& infer) {
  const std::vector<std::string> keys = changed_infer_settings(running_, infer);
  std::string what;
  for (const std::string& k : keys) what += (what.empty() ? "infer." : ", infer.") + k;
  take_reloadable_infer_settings(infer, running_);
  model_name_ = running_.model_name;
  top_k_ = running_.top_k;
  if (!what.empty()) {
    VAPIPE_LOG_INFO("infer: a reload changed {}: from the next batch on (model '{}', top {})", what, model_name_, top_k_);
  }
}

void InferStage::start_model_load(Config reloaded) {
  if (reloaded.infer.model == running_.model) {
    VAPIPE_LOG_INFO("infer: loading model {} again beside the running one ('{}'), which classifies meanwhile",
                    reloaded.infer.model, model_name_);
  } else {
    VAPIPE_LOG_INFO("infer: loading model {} beside the running {} ('{}'), which classifies meanwhile",
                    reloaded.infer.model, running_.model, model_name_);
  }
  loading_file_ = reloaded.infer.model;
  loader_ = std::thread([this, reloaded = std::move(reloaded)]() {
    const auto start = std::chrono::steady_clock::now();
    LoadedModel loaded;
    loaded.infer = reloaded.infer;
    // The files as they were read: a change after it is a fix to try.
    loaded.identities = {file_identity(reloaded.infer.model), file_identity(reloaded.infer.labels)};
    loaded.modified = modified_utc(reloaded.infer.model);
    loaded.status = load_model(reloaded, reloaded.infer, &loaded.classifier, &loaded.labels);
    if (!loaded.status.ok()) loaded.config = reloaded;
    if (loaded.status.ok() && padded_) {
      loaded.status = loaded.classifier->use_batch_sizes(padded_batch_sizes(merge_limit_))
                          .with_context("infer.batch_shapes: padded (model " + reloaded.infer.model + ")");
    }
    loaded.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::lock_guard<std::mutex> lock(loaded_mutex_);
    loaded_ = std::move(loaded);
  });
}

void InferStage::take_loaded_model() {
  std::optional<LoadedModel> loaded;
  {
    std::lock_guard<std::mutex> lock(loaded_mutex_);
    loaded.swap(loaded_);
  }
  if (!loaded) return;
  loader_.join();
  if (loaded->status.ok()) {
    classifier_ = std::move(loaded->classifier);  // (the running one goes)
    labels_ = std::move(loaded->labels);
    const std::string before = model_name_;
    take_reloadable_infer_settings(loaded->infer, running_);
    model_name_ = running_.model_name;
    top_k_ = running_.top_k;
    running_identities_ = loaded->identities;
    running_modified_ = loaded->modified;
    ++model_reloads_;
    last_reload_error_.clear();
    failed_reload_.reset();
    VAPIPE_LOG_INFO("infer: model {} ({} classes, '{}') classifies from now on, in place of '{}' (loaded and warmed up "
                    "in {:.2f} s while it classified)",
                    running_.model, labels_.size(), model_name_, before, loaded->seconds);
  } else {
    ++model_reload_failures_;
    last_reload_error_ = loaded->status.message();
    // Tried again when its files change (the user fixes the file under the same path: the config,
    // unchanged, makes no reload of its own).
    failed_reload_ = FailedReload{std::move(*loaded->config), loaded->identities.first, loaded->identities.second};
    VAPIPE_LOG_ERROR("infer: reload: {}; model {} ('{}') goes on classifying", loaded->status.message(),
                     running_.model, model_name_);
  }
  if (next_reload_) {
    Config next = std::move(*next_reload_);
    next_reload_.reset();
    failed_reload_.reset();  // (a newer reload: that one is tried)
    const std::vector<std::string> keys = changed_infer_settings(running_, next.infer);
    if (infer_change_needs_new_model(keys)) {
      start_model_load(std::move(next));
      return;
    }
    if (!keys.empty()) take_settings(next.infer);
  }
  if (recheck_files_) {
    recheck_files_ = false;
    reload_replaced_files();
  }
}

StageFacts InferStage::facts() const {
  StageFacts f{{"model", model_name_}, {"model_file", running_.model}, {"labels_file", running_.labels}};
  if (!running_modified_.empty()) f.emplace_back("model_file_modified", running_modified_);
  if (config_copy_.followed()) f.emplace_back("config_copy", config_copy_.identity());  // (for `vapipe reload`)
  if (loader_.joinable()) f.emplace_back("loading", loading_file_);
  if (!last_reload_error_.empty()) f.emplace_back("last_reload_error", last_reload_error_);
  return f;
}

InferStage::~InferStage() {
  if (loader_.joinable()) loader_.join();
}

Status InferStage::process(Message&& in, Emitter& out) {
  if (is_stream_event(in.kind)) return out.emit(std::move(in));
  if (in.kind != MessageKind::kBatch) {
    return InvalidArgument(std::string("infer got a ") + message_kind_name(in.kind) + " message");
  }
  take_loaded_model();  // a reloaded model, once ready: from this batch on
  const auto process_start = std::chrono::steady_clock::now();
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
  // (A model on the CPU, e.g. LibTorch without CUDA on a GPU machine, gets device tensors copied down.)
  int device = valid.empty() || !classifier_on_gpu_ ? -1 : in.items[valid.front()].payload.device();
  for (size_t i : valid) {
    if (in.items[i].payload.device() != device) device = -1;
  }
  Result<std::vector<TopK>> r = std::vector<TopK>{};
  const auto classify_start = std::chrono::steady_clock::now();
  if (!valid.empty() && device >= 0) {
    std::vector<const std::byte*> items;
    Status ready;
    for (size_t i : valid) {
      if (ready.ok()) ready = in.items[i].payload.wait_ready(nullptr);  // after preprocess's kernel
      items.push_back(in.items[i].payload.data());
    }
    r = ready.ok() ? classifier_->classify_device(items, device, top_k_) : Result<std::vector<TopK>>(ready);
    if (!r.ok()) {
      // A failure may leave work queued that still reads the slots (torch::stack's copy): it ends before
      // they go back to preprocess, whose next kernel writes them. (Its error, if any, is the batch's.)
      DeviceGuard on(device);
      (void)cuda_stream_synchronize(nullptr);
    }
    for (size_t i : valid) in.items[i].payload.reset();  // classify_device has read them (results are on the host)
  } else if (!valid.empty()) {
    staging_.resize(valid.size() * item_bytes);
    Status copied;
    for (size_t v = 0; v < valid.size(); ++v) {
      Message& item = in.items[valid[v]];
      if (item.payload.on_device()) {
        if (copied.ok()) copied = item.payload.wait_ready(nullptr);  // after preprocess's writes (payload.h)
        if (copied.ok()) copied = cuda_copy(staging_.data() + v * item_bytes, item.payload.data(), item_bytes, nullptr);
      } else {
        std::memcpy(staging_.data() + v * item_bytes, item.payload.data(), item_bytes);
      }
      item.payload.reset();  // the tensor slot goes back to preprocess now
    }
    r = copied.ok() ? classifier_->classify(staging_.data(), valid.size(), top_k_) : Result<std::vector<TopK>>(copied);
  }
  if (!valid.empty()) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - classify_start).count();
    classify_s_ += seconds;
    ++batches_;
    frames_ += valid.size();
    largest_batch_ = std::max<uint64_t>(largest_batch_, valid.size());
    const size_t rows = classifier_->run_size(valid.size());
    rows_ += rows;
    graph_batches_ += classifier_->replays_cuda_graph_at(rows) ? 1 : 0;
    by_run_size_[rows].add(seconds);
  }
  std::vector<TopK> predictions;
  if (!valid.empty()) {
    if (r.ok()) {
      predictions = std::move(r).value();
    } else if (Status gpu = classifier_on_gpu_ ? gpu_status_(classifier_gpu_) : Status::Ok(); !gpu.ok()) {
      // Every batch after it would fail too: exit, and the lane restarts with a new context. An
      // archive job then classifies these frames again (they have no result); a live one loses them.
      return Aborted("infer: batch of " + std::to_string(valid.size()) + " failed: " + r.status().message() + "; " +
                     gpu.message() + ": infer exits so that its lane restarts");
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
  process_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - process_start).count();
  return Status::Ok();
}

Status InferStage::process_many(std::vector<Message>&& in, Emitter& out) {
  Status first;
  Message group;
  group.kind = MessageKind::kBatch;
  auto run = [&](Message&& m) {
    Status s = process(std::move(m), out);
    if (!s.ok() && (first.ok() || s.code() == StatusCode::kAborted)) first = s;
    // Aborted: nothing after it may go on (an event past frames without results would end a stream short).
    return s.code() != StatusCode::kCancelled && s.code() != StatusCode::kAborted;
  };
  auto flush = [&] {
    if (group.items.empty()) return true;
    Message full = std::move(group);
    group = Message{};
    group.kind = MessageKind::kBatch;
    return run(std::move(full));
  };
  for (Message& m : in) {
    if (m.kind == MessageKind::kBatch) {
      if (!group.items.empty() && group.items.size() + m.items.size() > merge_limit_ && !flush()) return first;
      for (Message& item : m.items) group.items.push_back(std::move(item));
      continue;
    }
    if (!flush() || !run(std::move(m))) return first;  // an event after the frames before it
  }
  flush();
  return first;
}

Status InferStage::close(Emitter& /*out*/) {
  if (batches_ == 0) return Status::Ok();
  const double per_batch_ms = 1000.0 * classify_s_ / static_cast<double>(batches_);
  VAPIPE_LOG_INFO("infer: {} batches, {:.1f} frames each on average (largest {}); classify {:.2f} ms a batch "
                  "({:.0f} frames/s while classifying), the rest of processing {:.2f} ms a batch",
                  batches_, static_cast<double>(frames_) / static_cast<double>(batches_), largest_batch_,
                  per_batch_ms, classify_s_ > 0 ? static_cast<double>(frames_) / classify_s_ : 0.0,
                  1000.0 * (process_s_ - classify_s_) / static_cast<double>(batches_));
  // What new input shapes cost: the first pass at each batch size against the later ones at it.
  double excess_s = 0;
  uint64_t sizes_once = 0;
  for (const auto& [rows, t] : by_run_size_) {
    if (t.passes > 1) {
      excess_s += t.first_s - t.later_s / static_cast<double>(t.passes - 1);
    } else {
      ++sizes_once;
    }
  }
  VAPIPE_LOG_INFO("infer: batches ran at {} sizes ({:.1f} rows a batch on average, padding included); the first "
                  "pass at each size took {:.3f} s longer in all than the later passes at that size (sizes that "
                  "ran once, not counted: {})",
                  by_run_size_.size(), static_cast<double>(rows_) / static_cast<double>(batches_), excess_s,
                  sizes_once);
  return Status::Ok();
}

}  // namespace vapipe
