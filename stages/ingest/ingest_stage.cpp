#include "stages/ingest/ingest_stage.h"

#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "pipeline/logging.h"
#include "pipeline/resume.h"
#include "pipeline/stage_runner.h"
#include "pipeline/transport.h"
#include "stages/ingest/nvdec_support.h"
#include "stages/ingest/stream_reader.h"

namespace vapipe {

Status run_ingest(const Config& config, const JobLayout& layout, const Lane& lane, ShutdownFlags& flags) {
  if (!ensure_gstreamer()) return FailedPrecondition("GStreamer is not available");
  std::unique_ptr<PayloadAllocator> allocator = std::make_unique<HeapAllocator>();
  std::shared_ptr<ShmPool> pool;
  // Frames stay on the GPU when preprocessing runs there: the frame pool is GPU memory shared with the
  // lane's preprocess through CUDA IPC. Otherwise host shared memory.
  const int pool_device = layout.by_reference ? lane.frame_pool_gpu : -1;
  if (lane.decoder == Decoder::kNvdec) {
    const std::string decoders = prefer_nvdec_decoders();
    VAPIPE_LOG_INFO("ingest lane {}: NVDEC on GPU {} ({})", lane.index, lane.gpu,
                    decoders.empty() ? "no nvcodec decoder is registered: every stream decodes on the CPU" : decoders);
  }
  if (layout.by_reference) {
    VAPIPE_ASSIGN_OR_RETURN(pool, ShmPool::create(layout.frame_pool, config.transport.effective_frame_slots(lane.streams.size()),
                                                  config.transport.frame_slot_bytes, pool_device));
    allocator = std::make_unique<ShmAllocator>(pool, &flags.abort);
  }
  const std::string& endpoint = layout.input_endpoint.at(StageKind::kPreprocess);
  VAPIPE_LOG_INFO("ingest lane {}: {} of {} streams, {} mode, queue {} x {}, output {}", lane.index,
                  lane.streams.size(), config.streams.size(),
                  config.job.mode == JobMode::kArchive ? "archive" : "live",
                  queue_policy_name(config.ingest.queue_policy), config.ingest.queue_capacity, endpoint);

  // --resume: streams that ended in an earlier run only end again (for the stages), and the others
  // skip the frames that have results.
  VAPIPE_ASSIGN_OR_RETURN(std::optional<ResumePlan> plan, resume_plan_from_environment());

  // Each stream's pipeline is built and prerolled while the stages downstream open; it plays once
  // they have.
  std::promise<void> downstream_open;
  std::shared_future<void> gate = downstream_open.get_future().share();
  std::vector<std::thread> threads;
  std::vector<Status> results(config.streams.size());
  // Per stream: seconds blocked sending (preprocess's queue full) and waiting for a free frame slot
  // (downstream still holds them). Much of either: decode is not what limits the job.
  std::vector<double> send_s(config.streams.size(), 0), slot_s(config.streams.size(), 0);
  // Per stream: whether its decoder had started and its first frame was ready when the gate opened.
  std::vector<char> prerolled(config.streams.size(), 0);
  for (uint32_t i : lane.streams) {
    threads.emplace_back([&, i] {
      const StreamConfig& stream = config.streams[i];
      // One socket per stream: the preprocess input fair-queues between them, and one stream's
      // messages stay in order.
      auto sender = MessageSender::connect(endpoint, layout.by_reference, kEdgeHighWaterMark,
                                           config.transport.curve_keys);
      if (!sender.ok()) {
        results[i] = sender.status();
        return;
      }
      SenderEmitter emitter(sender->get(), allocator.get(), &flags.abort);
      // Ends a stream that gets no reader: downstream still has to see its end.
      auto end_without_reader = [&](MessageKind kind, std::string message, uint64_t frames) {
        Envelope env;
        env.stream_id = stream.id;
        env.stream_index = i;
        results[i] = emitter.emit(
            Message::stream_event(kind, env, StreamEvent{redact_uri(stream.uri), std::move(message), frames, 0}));
      };
      const StreamProgress* earlier = plan && plan->streams.count(stream.id) ? &plan->streams.at(stream.id) : nullptr;
      if (earlier && !earlier->ended.empty()) {
        end_without_reader(MessageKind::kStreamEnd, "ended in an earlier run", earlier->results);
        return;
      }
      ReaderOptions reader_options;
      reader_options.decoder = lane.decoder;
      reader_options.gpu = lane.gpu;
      reader_options.live = config.job.mode == JobMode::kLive;
      reader_options.skip_frames = earlier ? earlier->results : 0;
      auto reader = StreamReader::create(stream, i, config.ingest, reader_options);
      if (!reader.ok()) {
        // An error that names the stream.
        VAPIPE_LOG_ERROR("stream '{}': {}", stream.id, reader.status().message());
        end_without_reader(MessageKind::kStreamError, reader.status().message(), 0);
        return;
      }
      // Decoders start (NVDEC: seconds) and RTSP sessions are set up while the gate is closed.
      (*reader)->preroll();
      gate.wait();
      prerolled[i] = (*reader)->wait_prerolled(std::chrono::milliseconds(0));
      results[i] = (*reader)->run(emitter, flags);
      send_s[i] = emitter.send_seconds();
      slot_s[i] = emitter.allocate_seconds();
      if (flags.abort.load()) (*sender)->discard_unsent();
    });
  }
  const DownstreamOpenWait wait = wait_for_downstream_open(layout, flags);
  if (!wait.last.empty()) {
    VAPIPE_LOG_INFO("ingest lane {}: {} {:.2f} s for the stages downstream to open ({}: {})", lane.index,
                    wait.opened ? "streams start after waiting" : "stop requested after waiting", wait.seconds,
                    wait.opened ? "the last" : "still opening", wait.last);
  }
  downstream_open.set_value();  // on a stop too: each stream then ends as stopped, downstream sees it
  const auto started = std::chrono::steady_clock::now();
  for (auto& t : threads) t.join();
  if (!lane.streams.empty()) {
    double send_total = 0, slot_total = 0;
    for (uint32_t i : lane.streams) send_total += send_s[i], slot_total += slot_s[i];
    const double n = static_cast<double>(lane.streams.size());
    size_t ready = 0;
    for (uint32_t i : lane.streams) ready += prerolled[i] ? 1 : 0;
    VAPIPE_LOG_INFO("ingest lane {}: {} streams in {:.2f} s ({} prerolled when they started); each stream on "
                    "average blocked sending {:.2f} s and waiting for frame slots {:.2f} s", lane.index,
                    lane.streams.size(), std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
                    ready, send_total / n, slot_total / n);
  }
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].ok()) VAPIPE_LOG_ERROR("stream '{}': {}", config.streams[i].id, results[i].message());
  }
  const auto drain = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(config.job.drain_timeout_s));
  if (pool) wait_for_pool_drained(*pool, flags, drain);
  // The streams' last messages (their ends) may still wait in preprocess's queue.
  wait_for_downstream_closed(endpoint, flags, drain);
  return Status::Ok();
}

}  // namespace vapipe
