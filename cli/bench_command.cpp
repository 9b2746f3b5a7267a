// `vapipe bench`: each stage alone, on the streams of a config, so the end-to-end figure of
// `vapipe run` can be set against what each stage reaches by itself (tools/bench.sh runs them all).
// Prints one JSON line per measurement. Figures, not assertions: see docs/benchmarks.md.
#include <cerrno>
#include <cstdint>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "cli/commands.h"
#include "pipeline/cuda/device_memory.h"
#include "pipeline/cuda/gpu_info.h"
#include "pipeline/logging.h"
#include "pipeline/placement.h"
#include "pipeline/supervisor.h"
#include "pipeline/transport.h"
#include "stages/infer/classifier.h"
#include "stages/infer/labels.h"
#include "stages/ingest/stream_reader.h"
#include "stages/preprocess/cuda/cuda_preprocessor.h"
#include "stages/preprocess/preprocess_stage.h"
#include "stages/publish/result_schema.h"

namespace vapipe::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void report(const std::string& bench, const Config& c, uint64_t items, double seconds, nlohmann::json extra = {}) {
  nlohmann::json j = {{"bench", bench}, {"config", c.source}, {"items", items}, {"seconds", seconds},
                      {"per_second", seconds > 0 ? items / seconds : 0.0}};
  for (auto& [k, v] : extra.items()) j[k] = v;
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

// Emits into a callback; payloads come from a real shared memory pool, as in the ingest process.
class CallbackEmitter final : public Emitter {
 public:
  CallbackEmitter(std::function<Status(Message&&)> fn, PayloadAllocator* alloc) : fn_(std::move(fn)), alloc_(alloc) {}
  Status emit(Message&& m) override { return fn_(std::move(m)); }
  Result<Payload> allocate(size_t bytes) override { return alloc_->allocate(bytes); }

 private:
  std::function<Status(Message&&)> fn_;
  PayloadAllocator* alloc_;
};

// The benchmarks measure one lane: the first of the job's placement (GPU 0 on a GPU machine, the CPU
// otherwise), with every stream of the config on it.
Result<Lane> bench_lane(const Config& c) {
  VAPIPE_ASSIGN_OR_RETURN(Placement p, plan_placement(c, visible_gpu_count()));
  return p.lanes.front();
}

Result<std::unique_ptr<Preprocessor>> lane_preprocessor(const Config& c, const Lane& lane) {
  if (lane.preprocess_gpu >= 0) return make_cuda_preprocessor(preprocess_spec_from(c.preprocess), lane.preprocess_gpu);
  return make_cpu_preprocessor(preprocess_spec_from(c.preprocess), c.preprocess.threads);
}

// How decode_all's streams started: their pipelines were built and files prerolled (decoders started,
// first frame decoded: NVDEC's take seconds, more the more there are) before any stream played, as
// ingest does behind its start-up gate, so that the rates measured leave that start-up out.
struct DecodeStart {
  double startup_s = 0;  // from the first pipeline's build to the gate
  size_t prerolled = 0;  // streams prerolled when the gate opened
};

// Decodes every stream of the config in parallel (one reader thread per stream, as ingest does);
// `on_frame` is called from the reader threads. Every pipeline is built, and a file's prerolled,
// before any plays (ingest builds and prerolls them while the stages downstream open); a network
// stream is set up after that gate, as in ingest. `*gate_opened` is set when the gate opens, so that
// rates leave out GStreamer's start-up (as the pipeline's steady-state figure, from the first frame's
// capture, does).
Result<uint64_t> decode_all(const Config& c, const std::function<Status(Message&&)>& on_frame, ShutdownFlags& flags,
                            Clock::time_point* gate_opened = nullptr, DecodeStart* start = nullptr) {
  VAPIPE_ASSIGN_OR_RETURN(Lane lane, bench_lane(c));
  // Into the pool the pipeline would use: GPU memory when preprocessing runs on the GPU.
  auto pool = ShmPool::create("/vapipe-bench-" + std::to_string(getpid()), c.transport.effective_frame_slots(c.streams.size()),
                              c.transport.effective_frame_slot_bytes(lane.frame_pool_gpu >= 0), lane.frame_pool_gpu);
  if (!pool.ok()) return pool.status();
  ShmAllocator alloc(*pool, &flags.abort);
  std::atomic<uint64_t> frames{0};
  std::vector<std::thread> threads;
  std::vector<Status> results(c.streams.size());
  const auto build_start = Clock::now();
  std::mutex gate_mutex;
  std::condition_variable gate_changed;
  size_t ready = 0, prerolled = 0;
  bool gate_open = false;
  for (uint32_t i = 0; i < c.streams.size(); ++i) {
    threads.emplace_back([&, i] {
      ReaderOptions options{lane.decoder, lane.gpu};
      options.max_frame_bytes = (*pool)->slot_bytes();  // as ingest: larger CPU-decoded frames shrink to fit
      auto reader = StreamReader::create(c.streams[i], i, c.ingest, options);
      const bool network = reader.ok() && c.streams[i].parsed.kind == UriKind::kNetwork;
      bool this_prerolled = false;
      if (reader.ok() && !network) {
        (*reader)->preroll();
        // A file that cannot preroll (broken, or no frame) says why when it runs.
        this_prerolled = (*reader)->wait_prerolled(std::chrono::seconds(120));
      }
      {
        std::unique_lock<std::mutex> lock(gate_mutex);
        ++ready;
        prerolled += this_prerolled;
        gate_changed.notify_all();
        gate_changed.wait(lock, [&] { return gate_open; });
      }
      if (!reader.ok()) {
        results[i] = reader.status();
        return;
      }
      if (network) (*reader)->preroll();
      CallbackEmitter out(
          [&](Message&& m) {
            if (m.kind == MessageKind::kStreamError) return Status(DataLoss(m.event.message));
            if (m.kind != MessageKind::kFrame) return Status::Ok();
            ++frames;
            return on_frame(std::move(m));
          },
          &alloc);
      results[i] = (*reader)->run(out, flags);
    });
  }
  {
    std::unique_lock<std::mutex> lock(gate_mutex);
    gate_changed.wait(lock, [&] { return ready == c.streams.size(); });
    gate_open = true;
    if (gate_opened) *gate_opened = Clock::now();
    if (start) *start = DecodeStart{seconds_since(build_start), prerolled};
    gate_changed.notify_all();
  }
  for (auto& t : threads) t.join();
  for (const Status& s : results) {
    if (!s.ok()) return s;
  }
  return frames.load();
}

ClassifierOptions classifier_options(const Config& c, const Lane& lane, size_t batch) {
  ClassifierOptions o;
  o.model_path = c.infer.model;
  o.device = device_name(lane.infer_gpu);
  o.precision = c.infer.precision;
  o.channels_last = c.infer.channels_last;
  o.threads = c.infer.threads;
  o.input = TensorInfo{c.preprocess.dtype, 3, c.preprocess.height, c.preprocess.width};
  o.warmup_batch_size = batch;
  o.warmup_batches = c.infer.warmup_batches;
  o.optimize = c.infer.optimize;
  o.jit_optimize = c.infer.jit_optimize;
  o.cuda_graphs = c.infer.cuda_graphs;  // used by bench infer's second phase only (use_batch_sizes)
  o.output = c.infer.output;
  return o;
}

int bench_decode(const Config& c, ShutdownFlags& flags) {
  auto start = Clock::now();
  DecodeStart started;
  auto frames = decode_all(c, [](Message&&) { return Status::Ok(); }, flags, &start, &started);
  if (!frames.ok()) return std::fprintf(stderr, "bench decode: %s\n", frames.status().message().c_str()), 2;
  auto lane = bench_lane(c);
  report("decode", c, *frames, seconds_since(start),
         {{"streams", c.streams.size()}, {"decoder", lane.ok() ? decoder_name(lane->decoder) : "?"},
          {"startup_s", started.startup_s}, {"prerolled", started.prerolled}});
  return 0;
}

int bench_preprocess(const Config& c, ShutdownFlags& flags, uint64_t max_frames) {
  auto lane = bench_lane(c);
  if (!lane.ok()) return std::fprintf(stderr, "bench preprocess: %s\n", lane.status().message().c_str()), 2;
  const bool gpu = lane->preprocess_gpu >= 0;
  // Decode first (kept in memory: GPU memory for the GPU preprocessor, as the pipeline's frame pool
  // is), then time preprocessing alone.
  std::mutex mutex;
  std::vector<Message> frames;
  std::vector<std::unique_ptr<DeviceBuffer>> device_frames;
  auto decoded = decode_all(c, [&](Message&& m) -> Status {
    std::lock_guard<std::mutex> lock(mutex);
    if (frames.size() >= max_frames) return Status::Ok();
    if (gpu) {
      VAPIPE_ASSIGN_OR_RETURN(auto buffer, DeviceBuffer::allocate(lane->preprocess_gpu, m.payload.size()));
      VAPIPE_RETURN_IF_ERROR(cuda_copy(buffer->data(), m.payload.data(), m.payload.size(), nullptr));
      device_frames.push_back(std::move(buffer));
    } else {
      Payload copy = Payload::heap(m.payload.size());
      VAPIPE_RETURN_IF_ERROR(m.payload.on_device() ? cuda_copy(copy.data(), m.payload.data(), m.payload.size(), nullptr)
                                                   : (std::memcpy(copy.data(), m.payload.data(), m.payload.size()), Status::Ok()));
      m.payload = copy;
    }
    frames.push_back(std::move(m));
    return Status::Ok();
  }, flags);
  if (!decoded.ok()) return std::fprintf(stderr, "bench preprocess: %s\n", decoded.status().message().c_str()), 2;
  auto pre = lane_preprocessor(c, *lane);
  if (!pre.ok()) return std::fprintf(stderr, "bench preprocess: %s\n", pre.status().message().c_str()), 2;
  const size_t out_bytes = (*pre)->spec().output_info().bytes();
  // As many frames at once as the stage takes (the batch size on the GPU, one per thread on the CPU).
  const size_t at_once = gpu ? std::max<size_t>(1, c.batch.max_batch_size)
                             : (c.preprocess.threads ? c.preprocess.threads : std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::byte> host_out(out_bytes * at_once);
  std::unique_ptr<DeviceBuffer> device_out;
  if (gpu) {
    auto buffer = DeviceBuffer::allocate(lane->preprocess_gpu, out_bytes * at_once);
    if (!buffer.ok()) return std::fprintf(stderr, "bench preprocess: %s\n", buffer.status().message().c_str()), 2;
    device_out = std::move(buffer).value();
  }
  uint64_t done = 0;
  auto start = Clock::now();
  while (seconds_since(start) < 3.0 || done < frames.size()) {
    for (size_t first = 0; first < frames.size(); first += at_once) {
      std::vector<FrameView> views;
      std::vector<TensorOut> outs;
      for (size_t k = first; k < std::min(frames.size(), first + at_once); ++k) {
        const Message& m = frames[k];
        const size_t slot = k - first;
        if (gpu) {
          views.push_back(FrameView{m.frame, device_frames[k]->data(), device_frames[k]->bytes(), lane->preprocess_gpu});
          outs.push_back(TensorOut{device_out->data() + slot * out_bytes, lane->preprocess_gpu});
        } else {
          views.push_back(FrameView{m.frame, m.payload.data(), m.payload.size()});
          outs.push_back(TensorOut{host_out.data() + slot * out_bytes});
        }
      }
      for (const Status& s : (*pre)->run_batch(views, outs)) {
        if (!s.ok()) return std::fprintf(stderr, "bench preprocess: %s\n", s.message().c_str()), 2;
      }
      done += views.size();
    }
  }
  report("preprocess", c, done, seconds_since(start),
         {{"distinct_frames", frames.size()}, {"device", device_name(lane->preprocess_gpu)},
          {"at_once", at_once}, {"dtype", dtype_name(c.preprocess.dtype)}});
  return 0;
}

int bench_infer(const Config& c, size_t batch) {
  auto lane = bench_lane(c);
  if (!lane.ok()) return std::fprintf(stderr, "bench infer: %s\n", lane.status().message().c_str()), 2;
  auto classifier = load_torchscript_classifier(classifier_options(c, *lane, batch));
  if (!classifier.ok()) return std::fprintf(stderr, "bench infer: %s\n", classifier.status().message().c_str()), 2;
  const TensorInfo item{c.preprocess.dtype, 3, c.preprocess.height, c.preprocess.width};
  std::vector<std::byte> input(batch * item.bytes());
  std::mt19937 rng(1);
  if (item.dtype == DType::kFloat32) {
    std::normal_distribution<float> n;
    for (size_t i = 0; i < batch * item.elements(); ++i) reinterpret_cast<float*>(input.data())[i] = n(rng);
  }
  // On a GPU, the batch comes from tensors in GPU memory, as the pipeline's tensor pool slots do.
  std::unique_ptr<DeviceBuffer> on_device;
  std::vector<const std::byte*> items;
  if (lane->infer_gpu >= 0) {
    auto buffer = DeviceBuffer::allocate(lane->infer_gpu, input.size());
    if (!buffer.ok()) return std::fprintf(stderr, "bench infer: %s\n", buffer.status().message().c_str()), 2;
    on_device = std::move(buffer).value();
    if (Status s = cuda_copy(on_device->data(), input.data(), input.size(), nullptr); !s.ok()) {
      return std::fprintf(stderr, "bench infer: %s\n", s.message().c_str()), 2;
    }
    for (size_t i = 0; i < batch; ++i) items.push_back(on_device->data() + i * item.bytes());
  }
  // Five seconds of batches: images and seconds; nullopt on an error (printed).
  auto measure = [&]() -> std::optional<std::pair<uint64_t, double>> {
    uint64_t images = 0;
    const auto start = Clock::now();
    while (seconds_since(start) < 5.0) {
      auto r = on_device ? (*classifier)->classify_device(items, lane->infer_gpu, c.infer.top_k)
                         : (*classifier)->classify(input.data(), batch, c.infer.top_k);
      if (!r.ok()) return std::fprintf(stderr, "bench infer: %s\n", r.status().message().c_str()), std::nullopt;
      images += batch;
    }
    return std::make_pair(images, seconds_since(start));
  };
  const auto plain = measure();
  if (!plain) return 2;
  nlohmann::json extra = {{"batch", batch}, {"device", (*classifier)->device()}, {"model", c.infer.model_name},
                          {"precision", c.infer.precision == DType::kFloat16 && lane->infer_gpu >= 0 ? "fp16" : "fp32"}};
  // Then the same batches replayed as a CUDA graph (infer.cuda_graphs), as the pipeline runs them on
  // a GPU: the difference is the per-layer launch cost a graph saves at this batch size.
  if (lane->infer_gpu >= 0 && c.infer.cuda_graphs != "off") {
    if (Status s = (*classifier)->use_batch_sizes({batch}); !s.ok() || !(*classifier)->replays_cuda_graphs()) {
      extra["cuda_graph"] = s.ok() ? "not recorded (see the log)" : s.message();
    } else {
      const auto replayed = measure();
      if (!replayed) return 2;
      extra["cuda_graph_per_second"] = static_cast<double>(replayed->first) / replayed->second;
    }
  }
  report("infer", c, plain->first, plain->second, extra);
  return 0;
}

// The per-frame approach in one process: decode, preprocess, one forward per frame, JSON on ZeroMQ.
int bench_per_frame(const Config& c, ShutdownFlags& flags) {
  auto lane = bench_lane(c);
  if (!lane.ok()) return std::fprintf(stderr, "bench per-frame: %s\n", lane.status().message().c_str()), 2;
  // TorchScript as a hand-written loop gets it: its profiling executor on (infer.jit_optimize, which
  // the pipeline leaves off), so that the baseline is not held back by a setting made for batches.
  ClassifierOptions options = classifier_options(c, *lane, 1);
  options.jit_optimize = true;
  auto classifier = load_torchscript_classifier(options);
  if (!classifier.ok()) return std::fprintf(stderr, "bench per-frame: %s\n", classifier.status().message().c_str()), 2;
  auto labels = load_labels(c.infer.labels);
  if (!labels.ok()) return std::fprintf(stderr, "bench per-frame: %s\n", labels.status().message().c_str()), 2;
  auto made = lane_preprocessor(c, *lane);
  if (!made.ok()) return std::fprintf(stderr, "bench per-frame: %s\n", made.status().message().c_str()), 2;
  std::unique_ptr<Preprocessor> pre = std::move(made).value();
  std::vector<std::byte> tensor(pre->spec().output_info().bytes());
  zmq::socket_t pub(zmq_context(), zmq::socket_type::pub);
  pub.bind(c.publish.endpoint);
  std::mutex mutex;  // one frame at a time through preprocess and the model
  auto start = Clock::now();
  auto frames = decode_all(c, [&](Message&& m) -> Status {
    std::lock_guard<std::mutex> lock(mutex);
    // Frame in the pool (GPU memory when preprocessing runs there), tensor to the host, one forward.
    VAPIPE_RETURN_IF_ERROR(m.payload.wait_ready(pre->stream()));
    VAPIPE_RETURN_IF_ERROR(pre->run_batch({FrameView{m.frame, m.payload.data(), m.payload.size(), m.payload.device()}},
                                          {TensorOut{tensor.data()}}).front());
    m.payload.reset();
    VAPIPE_ASSIGN_OR_RETURN(auto top, (*classifier)->classify(tensor.data(), 1, c.infer.top_k));
    Message r;
    r.kind = MessageKind::kResult;
    r.env = m.env;
    r.prediction.model = c.infer.model_name;
    for (size_t k = 0; k < top[0].class_ids.size(); ++k) {
      r.prediction.top_k.push_back({top[0].class_ids[k], top[0].scores[k], (*labels)[top[0].class_ids[k]]});
    }
    const std::string topic = result_topic(m.env.stream_id), payload = json_text(result_json(r, wall_clock_ns()));
    pub.send(zmq::buffer(topic), zmq::send_flags::sndmore);
    pub.send(zmq::buffer(payload), zmq::send_flags::none);
    return Status::Ok();
  }, flags, &start);
  if (!frames.ok()) return std::fprintf(stderr, "bench per-frame: %s\n", frames.status().message().c_str()), 2;
  report("per-frame", c, *frames, seconds_since(start), {{"model", c.infer.model_name}, {"jit_optimize", true}});
  return 0;
}

}  // namespace

int bench_command(const std::vector<std::string>& args) {
  const char* usage =
      "usage: vapipe bench decode|preprocess|infer|per-frame [CONFIG.yaml] [--batch N] [--frames N (preprocess)]\n"
      "  decode      decode every stream in parallel (GStreamer, copy into shared memory), frames/s\n"
      "  preprocess  the preprocessor alone (CUDA on a GPU lane, in batches) on decoded frames, frames/s\n"
      "  infer       the model alone on random batches of --batch (default batch.max_batch_size), images/s;\n"
      "              on a GPU also replayed as a CUDA graph (unless infer.cuda_graphs: off)\n"
      "  per-frame   one process: decode, preprocess, one forward per frame, JSON on ZeroMQ, frames/s\n";
  if (args.empty()) return std::fputs(usage, stderr), kExitUsage;
  const std::string what = args[0];
  std::string path;
  size_t batch = 0;
  uint64_t max_frames = 600;
  // A whole number from 1 for `flag` (std::stoul took "abc" as an uncaught exception, "-1" as 2^64 - 1).
  auto whole = [](const std::string& flag, const std::string& text, uint64_t* out) {
    errno = 0;
    const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
    if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || errno == ERANGE || v == 0) {
      std::fprintf(stderr, "vapipe bench: %s wants a whole number from 1, got '%s'\n", flag.c_str(), text.c_str());
      return false;
    }
    *out = v;
    return true;
  };
  for (size_t i = 1; i < args.size(); ++i) {
    uint64_t n = 0;
    if (args[i] == "--batch" && i + 1 < args.size()) {
      if (!whole("--batch", args[++i], &n) || n > 4096) {
        if (n > 4096) std::fprintf(stderr, "vapipe bench: --batch wants a batch size from 1 to 4096, got %s\n", args[i].c_str());
        return kExitUsage;
      }
      batch = static_cast<size_t>(n);
    } else if (args[i] == "--frames" && i + 1 < args.size()) {
      // (The other benchmarks run for a time of their own: a --frames taken without a word misled.)
      if (what != "preprocess") {
        std::fprintf(stderr, "vapipe bench: --frames is for `bench preprocess` (the frames it decodes first); `bench %s` "
                             "runs for its own time\n", what.c_str());
        return kExitUsage;
      }
      if (!whole("--frames", args[++i], &max_frames)) return kExitUsage;
    } else if (path.empty() && !args[i].empty() && args[i][0] != '-') {
      path = args[i];
    } else {
      std::fprintf(stderr, "vapipe bench: unexpected argument '%s'\n", args[i].c_str());
      return std::fputs(usage, stderr), kExitUsage;
    }
  }
  auto config = path.empty() ? load_demo_config() : load_config_file(path);
  if (!config.ok()) return std::fprintf(stderr, "vapipe: %s\n", config.status().message().c_str()), kExitUsage;
  init_logging("bench", "warn");
  ShutdownFlags& flags = install_shutdown_handlers();
  if (batch == 0) batch = config->batch.max_batch_size;
  if (what == "decode") return bench_decode(*config, flags);
  if (what == "preprocess") return bench_preprocess(*config, flags, max_frames);
  if (what == "infer") return bench_infer(*config, batch);
  if (what == "per-frame") return bench_per_frame(*config, flags);
  return std::fputs(usage, stderr), kExitUsage;
}

}  // namespace vapipe::cli
