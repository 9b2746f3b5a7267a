#include "pipeline/stage_runner.h"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>

#include "pipeline/logging.h"
#include "pipeline/orphan_guard.h"
#include "pipeline/stage_stats.h"
#include "pipeline/stream_table.h"
#include "pipeline/transport.h"
#include "pipeline/trusted_dir.h"

namespace vapipe {

StageKind next_stage(StageKind kind) {
  return static_cast<StageKind>(std::min(static_cast<int>(kind) + 1, static_cast<int>(StageKind::kPublish)));
}

namespace {

void stamp_entry(Message& m, StageKind kind, int64_t now) {
  m.env.mark_entry(kind, now);
  for (Message& item : m.items) item.env.mark_entry(kind, now);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

namespace {
int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

double SenderEmitter::so_far(const std::atomic<int64_t>& since_ns) {
  const int64_t since = since_ns.load(std::memory_order_relaxed);
  return since == 0 ? 0.0 : static_cast<double>(std::max<int64_t>(0, steady_ns() - since)) / 1e9;
}

Status SenderEmitter::emit(Message&& msg) {
  if (!sender_) return FailedPrecondition("this stage has no output");
  const auto start = std::chrono::steady_clock::now();
  WatchdogWait wait(watchdog_);
  send_since_ns_.store(steady_ns(), std::memory_order_relaxed);
  Status s = sender_->send(msg, cancel_);
  send_since_ns_.store(0, std::memory_order_relaxed);
  send_s_.store(send_s_.load(std::memory_order_relaxed) + seconds_since(start), std::memory_order_relaxed);
  if (s.ok()) sent_.store(sent_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  return s;
}

Result<Payload> SenderEmitter::allocate(size_t bytes) {
  const auto start = std::chrono::steady_clock::now();
  WatchdogWait wait(watchdog_);
  allocate_since_ns_.store(steady_ns(), std::memory_order_relaxed);
  Result<Payload> p = allocator_->allocate(bytes);
  allocate_since_ns_.store(0, std::memory_order_relaxed);
  allocate_s_.store(allocate_s_.load(std::memory_order_relaxed) + seconds_since(start), std::memory_order_relaxed);
  return p;
}

void wait_for_pool_drained(const ShmPool& pool, const ShutdownFlags& flags,
                           std::chrono::steady_clock::duration timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (pool.free_slots() < pool.slot_count() && !flags.abort.load() &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (pool.free_slots() < pool.slot_count()) {
    VAPIPE_LOG_WARN("pool {}: {} slots still held downstream at exit", pool.name(),
                    pool.slot_count() - pool.free_slots());
  }
}

bool wait_for_downstream_closed(const std::string& endpoint, const ShutdownFlags& flags,
                                std::chrono::steady_clock::duration drain) {
  std::optional<std::chrono::steady_clock::time_point> stop_seen;
  while (!input_closed(endpoint)) {
    if (flags.abort.load()) return false;
    const auto now = std::chrono::steady_clock::now();
    if (flags.stop.load() && !stop_seen) stop_seen = now;
    if (stop_seen && now - *stop_seen > drain) {
      VAPIPE_LOG_WARN("{} did not say it had read everything; exiting anyway (what it had not read may be lost)",
                      endpoint);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

DownstreamOpenWait wait_for_downstream_open(const JobLayout& layout, const ShutdownFlags& flags) {
  DownstreamOpenWait wait;
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    std::string opening;
    for (StageKind k : {StageKind::kPreprocess, StageKind::kBatch, StageKind::kInfer, StageKind::kPublish}) {
      std::error_code ec;
      if (std::filesystem::exists(opening_mark(layout, k), ec)) opening = stage_kind_name(k);
    }
    if (opening.empty()) break;
    wait.last = opening;
    if (flags.stop.load() || flags.abort.load()) {
      wait.opened = false;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  wait.seconds = seconds_since(start);
  return wait;
}

Status run_stage(Stage& stage, const Config& config, const JobLayout& layout, const Lane* lane,
                 ShutdownFlags& flags, StageRunStats* stats_out) {
  const StageKind kind = stage.kind();
  StageRunStats stats;
  if (layout.by_reference) VAPIPE_RETURN_IF_ERROR(make_trusted_dir(layout.run_dir, "the job's run folder"));

  if (config.transport.curve_keys.empty() && open_to_other_hosts(layout.input_endpoint.at(kind))) {
    VAPIPE_LOG_WARN("{}: its input {} takes messages from any host that can reach this one, unauthenticated, and frames "
                    "cross the network unencrypted: transport.curve_secret_key (a `vapipe keygen` file, the same on "
                    "every host) encrypts the stage edges and admits only the job's own stages",
                    stage_kind_name(kind), layout.input_endpoint.at(kind));
  }
  VAPIPE_ASSIGN_OR_RETURN(auto receiver, MessageReceiver::bind(layout.input_endpoint.at(kind), kEdgeHighWaterMark,
                                                                   config.transport.curve_keys,
                                                                   pools_accepted_by_stages(layout)));
  std::unique_ptr<MessageSender> sender;
  if (kind != StageKind::kPublish) {
    VAPIPE_ASSIGN_OR_RETURN(sender, MessageSender::connect(layout.input_endpoint.at(next_stage(kind)),
                                                           layout.by_reference, kEdgeHighWaterMark,
                                                           config.transport.curve_keys));
  }
  // Preprocess writes tensors: into its own shared memory pool on one host.
  std::unique_ptr<PayloadAllocator> allocator = std::make_unique<HeapAllocator>();
  if (kind == StageKind::kPreprocess && layout.by_reference) {
    const size_t tensor_bytes = size_t{3} * config.preprocess.width * config.preprocess.height *
                                dtype_size(config.preprocess.dtype);
    // Tensors stay on the GPU when both preprocess and infer run on one: a device pool (CUDA IPC).
    const int device = lane ? lane->tensor_pool_gpu : -1;
    VAPIPE_ASSIGN_OR_RETURN(auto pool, ShmPool::create(layout.tensor_pool,
                                                       config.transport.effective_tensor_slots(config.batch),
                                                       tensor_bytes, device));
    allocator = std::make_unique<ShmAllocator>(std::move(pool), &flags.abort);
  }
  // open() is not watched: loading a model, warming it up or choosing a batch size may take minutes.
  StageWatchdog watchdog(stage_kind_name(kind), config.job.stage_timeout_s);
  SenderEmitter emitter(sender.get(), allocator.get(), &flags.abort, &watchdog);

  StageContext ctx{config, &flags.stop, lane, &layout, &watchdog};
  VAPIPE_RETURN_IF_ERROR(stage.open(ctx).with_context(std::string(stage_kind_name(kind)) + " failed to start"));
  if (const double floor = stage.watchdog_floor_s(); config.job.stage_timeout_s > 0 && floor > watchdog.timeout_s()) {
    watchdog.raise_timeout(floor);
    VAPIPE_LOG_INFO("{}: stuck after {:.0f} s of one piece of work (longer than job.stage_timeout_s: this stage's "
                    "own measure of its slowest work)", stage_kind_name(kind), floor);
  }
  std::error_code removed;
  std::filesystem::remove(opening_mark(layout, kind), removed);  // the start-up gate: this stage can take input
  VAPIPE_LOG_INFO("{} ready: input {}{}", stage_kind_name(kind), layout.input_endpoint.at(kind),
                  sender ? ", output " + sender->endpoint() : std::string());

  const auto ready_at = std::chrono::steady_clock::now();
  StreamTracker tracker = lane ? StreamTracker(config.streams.size(), lane->streams)
                                : StreamTracker(config.streams.size());
  std::optional<SteadyTime> stop_seen;
  const auto drain = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(config.job.drain_timeout_s));
  // Streams added while the job runs (a reload, pipeline/stream_table.h): the table is written before
  // ingest starts them or ends removed ones, so looking at it before exiting misses none.
  // Read again only when the file changed: a job that watches folders looks each time it is idle.
  std::optional<std::filesystem::file_time_type> table_seen;
  auto expect_added_streams = [&] {
    std::error_code no_table;
    const auto mtime = std::filesystem::last_write_time(stream_table_path(layout), no_table);
    if (no_table || mtime == table_seen) return;
    table_seen = mtime;
    auto table = read_job_stream_table(stream_table_path(layout));
    if (!table.ok()) {
      VAPIPE_LOG_ERROR("{}: {}", stage_kind_name(kind), table.status().message());
      return;
    }
    if (!table->has_value()) return;
    for (const StreamTableEntry& e : (*table)->entries) {
      if (!lane || e.lane == lane->index) tracker.expect(e.index);
    }
  };
  // Once a second, for publish's metrics (pipeline/stage_stats.h); not where there is no run folder
  // (stages on several hosts).
  std::error_code no_dir;
  const bool share_stats = std::filesystem::is_directory(layout.run_dir, no_dir);
  const std::string stats_path = stage_stats_path(layout, kind);
  auto next_stats = std::chrono::steady_clock::now();
  // While the loop is held up in the stage's work (waiting for a pool slot or for room downstream,
  // behind a stage that stopped), a thread of its own writes the last figures again once a second with
  // what moves meanwhile: the time up, and the waits under way. They froze (found 2026-12-07).
  struct StatsKeeper {
    std::mutex mutex;
    std::condition_variable wake;
    bool done = false;
    std::optional<StageStatsSnapshot> last;
    std::chrono::steady_clock::time_point written{};
  } keeper;
  auto write_stats = [&](bool ended) {
    StageStatsSnapshot snap;
    snap.stage = stage_kind_name(kind);
    snap.lane = layout.lane;
    snap.up_s = seconds_since(ready_at);
    snap.messages_in = stats.messages_in;
    snap.errors = stats.malformed + stats.stage_errors;
    snap.busy_s = stats.busy_s;
    snap.send_blocked_s = emitter.send_seconds();
    snap.slot_wait_s = emitter.allocate_seconds();
    snap.input_wait_s = stats.input_wait_s;
    snap.counters = stage.counters();
    snap.facts = stage.facts();
    snap.stuck_after_s = watchdog.timeout_s();
    snap.ended = ended;
    {
      std::lock_guard<std::mutex> lock(keeper.mutex);
      if (Status s = write_stage_stats(snap, stats_path); !s.ok()) VAPIPE_LOG_DEBUG("{}", s.message());
      keeper.last = snap;
      keeper.written = std::chrono::steady_clock::now();
    }
    next_stats = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  };
  std::thread keeping;
  if (share_stats) {
    keeping = std::thread([&] {
      std::unique_lock<std::mutex> lock(keeper.mutex);
      while (!keeper.wake.wait_for(lock, std::chrono::seconds(1), [&] { return keeper.done; })) {
        if (!keeper.last || std::chrono::steady_clock::now() - keeper.written < std::chrono::milliseconds(1500)) continue;
        StageStatsSnapshot snap = *keeper.last;
        snap.up_s = seconds_since(ready_at);
        snap.send_blocked_s = emitter.send_seconds();
        snap.slot_wait_s = emitter.allocate_seconds();
        // A stretch of own work that goes on (a wait inside it is not counted: it restarts the clock).
        snap.working_s = watchdog.working_for_s();
        snap.working_on = snap.working_s > 0 ? watchdog.what() : "";
        if (Status s = write_stage_stats(snap, stats_path); !s.ok()) VAPIPE_LOG_DEBUG("{}", s.message());
      }
    });
  }
  struct StopKeeping {
    StatsKeeper& keeper;
    std::thread& thread;
    ~StopKeeping() {
      {
        std::lock_guard<std::mutex> lock(keeper.mutex);
        keeper.done = true;
      }
      keeper.wake.notify_all();
      if (thread.joinable()) thread.join();
    }
  } stop_keeping{keeper, keeping};
  const OrphanGuard orphan_guard(flags, layout, drain, stage_kind_name(kind));  // (its vapipe run killed)
  // A reload's log.level (pipeline/logging.h): a live job's copy of its config, which a reload rewrites.
  const char* copy = std::getenv(kConfigAsStartedEnv);
  LogLevelFollower log_level(config.job.mode == JobMode::kLive && copy && *copy ? copy : "");
  while (!flags.abort.load()) {
    if (share_stats && std::chrono::steady_clock::now() >= next_stats) write_stats(false);
    log_level.check(std::chrono::steady_clock::now());
    if (tracker.all_ended()) {
      // A job that watches folders waits for their next files until it is stopped (its mark is looked
      // at before the table: files the table got before the stop are then expected, and ended by ingest).
      std::error_code no_mark;
      const bool job_stopping = config.watches_folders() && std::filesystem::exists(stopping_mark(layout), no_mark);
      expect_added_streams();
      if (tracker.all_ended() && (!config.watches_folders() || flags.stop.load() || job_stopping)) break;
    }
    auto now = std::chrono::steady_clock::now();
    if (flags.stop.load() && !stop_seen) {
      stop_seen = now;
      VAPIPE_LOG_INFO("{}: stop requested, draining ({} of {} streams ended)", stage_kind_name(kind),
                      tracker.ended_count(), tracker.expected_count());
    }
    if (stop_seen && now - *stop_seen > drain) {
      VAPIPE_LOG_WARN("{}: drain timeout; {} of {} streams did not end", stage_kind_name(kind),
                      tracker.expected_count() - tracker.ended_count(), tracker.expected_count());
      break;
    }
    auto timeout = std::chrono::milliseconds(100);
    if (auto deadline = stage.next_deadline()) {
      auto until = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - now);
      timeout = std::clamp(until, std::chrono::milliseconds(0), timeout);
    }
    const auto wait_start = std::chrono::steady_clock::now();
    auto received = receiver->receive(timeout);
    stats.input_wait_s += seconds_since(wait_start);
    if (!received.ok()) {
      ++stats.malformed;
      VAPIPE_LOG_ERROR("{}: {}", stage_kind_name(kind), received.status().message());
      continue;
    }
    if (received->has_value()) {
      Message msg = std::move(**received);
      stamp_entry(msg, kind, wall_clock_ns());
      tracker.observe(msg);
      ++stats.messages_in;
      Status s;
      const auto busy_start = std::chrono::steady_clock::now();
      if (const size_t at_once = stage.max_inputs_at_once(); at_once > 1) {
        // Take what has already arrived, up to the stage's limit, without waiting.
        std::vector<Message> inputs;
        inputs.push_back(std::move(msg));
        while (inputs.size() < at_once && !tracker.all_ended()) {
          auto more = receiver->receive(std::chrono::milliseconds(0));
          if (!more.ok()) {
            ++stats.malformed;
            VAPIPE_LOG_ERROR("{}: {}", stage_kind_name(kind), more.status().message());
            continue;
          }
          if (!more->has_value()) break;
          Message next = std::move(**more);
          stamp_entry(next, kind, wall_clock_ns());
          tracker.observe(next);
          ++stats.messages_in;
          inputs.push_back(std::move(next));
        }
        watchdog.working("processing messages");
        s = stage.process_many(std::move(inputs), emitter);
      } else {
        watchdog.working("processing a message");
        s = stage.process(std::move(msg), emitter);
      }
      watchdog.waiting();
      stats.busy_s += seconds_since(busy_start);
      if (!s.ok()) {
        if (s.code() == StatusCode::kCancelled) break;
        if (s.code() == StatusCode::kAborted) return s;  // the process fails: the supervisor says why
        ++stats.stage_errors;
        VAPIPE_LOG_ERROR("{}: {}", stage_kind_name(kind), s.message());
      }
    }
    if (auto deadline = stage.next_deadline(); deadline && std::chrono::steady_clock::now() >= *deadline) {
      const auto busy_start = std::chrono::steady_clock::now();
      watchdog.working("a deadline (e.g. the batcher's max delay)");
      Status s = stage.on_deadline(emitter);
      watchdog.waiting();
      stats.busy_s += seconds_since(busy_start);
      if (s.code() == StatusCode::kAborted) return s;
      if (!s.ok()) VAPIPE_LOG_ERROR("{}: {}", stage_kind_name(kind), s.message());
    }
  }
  // Upstream may exit now: everything it sent has been read.
  mark_input_closed(layout.input_endpoint.at(kind));
  const auto close_start = std::chrono::steady_clock::now();
  watchdog.working("closing");
  Status closed = stage.close(emitter);
  watchdog.waiting();
  stats.busy_s += seconds_since(close_start);
  if (closed.code() == StatusCode::kAborted) return closed;
  if (!closed.ok()) VAPIPE_LOG_ERROR("{}: close: {}", stage_kind_name(kind), closed.message());
  // Downstream stages map our pool by name when they see its first descriptor: keep it (and its
  // name) until every slot has come back, so a late consumer never finds it gone.
  if (auto* shm = dynamic_cast<ShmAllocator*>(allocator.get())) {
    wait_for_pool_drained(*shm->pool(), flags, drain);
  }
  if (sender) wait_for_downstream_closed(sender->endpoint(), flags, drain);
  if (sender && flags.abort.load()) sender->discard_unsent();
  if (share_stats) write_stats(true);  // the final totals
  stats.wall_s = seconds_since(ready_at);
  stats.send_blocked_s = emitter.send_seconds();
  stats.slot_wait_s = emitter.allocate_seconds();
  VAPIPE_LOG_INFO("{} done: {} messages, {} malformed, {} errors; of {:.2f} s: busy {:.2f} s (its own work "
                  "{:.2f} s, blocked sending {:.2f} s, waiting for pool slots {:.2f} s), waiting for input {:.2f} s",
                  stage_kind_name(kind), stats.messages_in, stats.malformed, stats.stage_errors, stats.wall_s,
                  stats.busy_s, std::max(0.0, stats.busy_s - stats.send_blocked_s - stats.slot_wait_s),
                  stats.send_blocked_s, stats.slot_wait_s, stats.input_wait_s);
  if (stats_out) *stats_out = stats;
  return Status::Ok();
}

}  // namespace vapipe
