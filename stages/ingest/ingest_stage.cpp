#include "stages/ingest/ingest_stage.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "pipeline/atomic_file.h"
#include "pipeline/cgroup.h"
#include "pipeline/crashed_streams.h"
#include "pipeline/file_identity.h"
#include "pipeline/ingest_reload.h"
#include "pipeline/logging.h"
#include "pipeline/open_files.h"
#include "pipeline/orphan_guard.h"
#include "pipeline/picture_requests.h"
#include "pipeline/resume.h"
#include "pipeline/seq_reservation.h"
#include "pipeline/stage_runner.h"
#include "pipeline/stage_stats.h"
#include "pipeline/stream_table.h"
#include "pipeline/stream_uri.h"
#include "pipeline/utf8.h"
#include "pipeline/transport.h"
#include "stages/ingest/nvdec_support.h"
#include "stages/ingest/stream_fan_out.h"
#include "stages/ingest/stream_reader.h"

namespace vapipe {

namespace {

// How many files an archive lane could have open at once within its open-file limit (the budget below
// holds it to that): the frame pool need not be larger.
size_t files_fit_open_file_limit() {
  const uint64_t allowed = open_file_limit().soft;
  return allowed > kOpenFilesPerProcess ? std::max<size_t>(1, (allowed - kOpenFilesPerProcess) / kOpenFilesPerOtherStream)
                                        : 1;
}

}  // namespace

Status run_ingest(const Config& config, const JobLayout& layout, const Lane& lane, size_t lanes, ShutdownFlags& flags) {
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
    VAPIPE_ASSIGN_OR_RETURN(pool, ShmPool::create(layout.frame_pool, config.transport.effective_frame_slots(streams_open_at_once(config, lane, files_fit_open_file_limit())),
                                                  config.transport.effective_frame_slot_bytes(pool_device >= 0), pool_device));
    allocator = std::make_unique<ShmAllocator>(pool, &flags.abort);
  }
  const std::string& endpoint = layout.input_endpoint.at(StageKind::kPreprocess);
  // The streams' sockets to preprocess: a stream that ends gives its socket back for the next one,
  // instead of closing it while frames may still wait in it (SenderPool, pipeline/transport.h).
  SenderPool senders(endpoint, layout.by_reference, kEdgeHighWaterMark, config.transport.curve_keys);
  size_t decoded = 0;  // the others are members (streams[].source): their frames are these streams'
  for (uint32_t i : lane.streams) decoded += !config.streams[i].is_member();
  VAPIPE_LOG_INFO("ingest lane {}: {} of {} streams{}, {} mode, queue {} x {}, output {}", lane.index,
                  lane.streams.size(), config.streams.size(),
                  decoded < lane.streams.size() ? " (" + std::to_string(decoded) + " decoded)" : std::string(),
                  config.job.mode == JobMode::kArchive ? "archive" : "live",
                  queue_policy_name(config.ingest.queue_policy), config.ingest.queue_capacity, endpoint);

  // publish.segments_clips: what an earlier ingest of these streams left half written (it crashed) goes.
  if (config.publish.segments_clips && config.job.mode == JobMode::kLive) {
    for (uint32_t i : lane.streams) {
      const std::vector<std::string> removed =
          remove_unfinished_clips(config.publish.segments_pictures_dir, config.streams[i].id);
      if (!removed.empty()) {
        VAPIPE_LOG_WARN("stream '{}': {} clip(s) left unwritten by an earlier ingest (it stopped while writing "
                        "them) removed, the first {}", config.streams[i].id, removed.size(), removed.front());
      }
    }
  }
  // --resume: streams that ended in an earlier run only end again (for the stages), and the others
  // skip the frames that have results.
  VAPIPE_ASSIGN_OR_RETURN(std::optional<ResumePlan> plan, resume_plan_from_environment());

  // Live jobs reserve sequence numbers in the run folder (pipeline/seq_reservation.h), so that after a
  // restart of this lane each stream's numbering goes on past what the crashed instance sent.
  std::unique_ptr<SeqReservations> reservations;
  std::error_code no_run_dir;
  if (config.job.mode == JobMode::kLive && std::filesystem::is_directory(layout.run_dir, no_run_dir)) {
    auto opened = SeqReservations::open(seq_reservation_path(layout));
    if (opened.ok()) {
      reservations = std::move(*opened);
    } else {
      VAPIPE_LOG_ERROR("ingest lane {}: {}; streams start from seq 0", lane.index, opened.status().message());
    }
  }
  // An archive job's: the streams this lane reads, for `vapipe run` to tell which file crashed it, and
  // those that did crash it earlier, left out (pipeline/crashed_streams.h).
  const bool archive_under_run = config.job.mode == JobMode::kArchive && std::getenv(kStreamsFromTableEnv) &&
                                 std::filesystem::is_directory(layout.run_dir, no_run_dir);
  StreamsBeingRead being_read = archive_under_run ? StreamsBeingRead(streams_being_read_path(layout)) : StreamsBeingRead();
  const std::map<std::string, std::string> crashed = archive_under_run ? crashed_streams(layout)
                                                                       : std::map<std::string, std::string>();
  const bool one_at_a_time = archive_under_run && std::filesystem::exists(one_at_a_time_mark(layout), no_run_dir);
  if (one_at_a_time) {
    VAPIPE_LOG_WARN("ingest lane {}: it crashed reading several files at once: one at a time now, so that the next "
                    "crash names its file", lane.index);
  }
  const char* restart_env = std::getenv(kRestartReasonEnv);
  const std::string restart_reason = restart_env && reservations ? restart_env : "";
  if (!restart_reason.empty()) {
    VAPIPE_LOG_WARN("ingest lane {}: restarted ({}): its streams reconnect and go on", lane.index, restart_reason);
  }

  // Each stream's pipeline is built (and a file's prerolled) while the stages downstream open; it plays
  // once they have. Streams added while the job runs (a reload) start at once; removed ones end.
  std::promise<void> downstream_open;
  // A stream that ends wakes the loop below (a waiting stream opens in its place at once).
  std::mutex wake_mutex;
  std::condition_variable wake;
  bool woken = false;
  auto wake_loop = [&] {
    {
      std::lock_guard<std::mutex> lock(wake_mutex);
      woken = true;
    }
    wake.notify_one();
  };
  std::shared_future<void> gate = downstream_open.get_future().share();
  // One run per decoded stream: its reader, and a fan-out (stages/ingest/stream_fan_out.h) that sends
  // its frames on as itself and as each of its members (streams[].source).
  struct StreamRun {
    StreamConfig stream;
    std::unique_ptr<StreamFanOut> fan_out;  // null: a member that cannot join its source (it only ends)
    std::string orphan_reason;              // why not
    std::thread thread;
    std::atomic<bool> done{false};
    Status result;
    // Seconds blocked sending (preprocess's queue full) and waiting for a free frame slot (downstream
    // still holds them). Much of either: decode is not what limits the job.
    double send_s = 0, slot_s = 0;
    bool prerolled = false;  // its decoder had started and its first frame was ready at the gate
    std::mutex mutex;        // guards reader, emitter and removed
    StreamReader* reader = nullptr;
    const SenderEmitter* emitter = nullptr;  // while the stream runs: its live totals
    uint64_t sent = 0;                       // messages sent, once it has ended
    uint64_t dropped = 0;                    // frames its queue dropped, once it has ended
    uint64_t left_out = 0;                   // StreamReader::left_out(), once it has ended
    bool removed = false;
    // Settings a reload changed before its reader was made (given to it once it is), what changed, and
    // whether its connection was made with some of them (else it takes them as it goes); the
    // job's ingest settings likewise.
    std::optional<StreamConfig> waiting_settings;
    std::string waiting_what;
    bool waiting_connects = false;
    std::optional<IngestConfig> waiting_ingest;
    std::optional<UriKind> kind;  // its uri's (worked out once: a reload's streams are not in `config`)
    // A stream that had ended and starts again under its id (a reload): where its numbering goes on,
    // and what its `started` event says.
    struct Comeback {
      uint64_t first_seq = 0;
      std::string message;
    };
    std::optional<Comeback> comeback;
  };
  // The totals of runs that a comeback replaced (their counters go on).
  struct {
    uint64_t sent = 0, left_out = 0, runs = 0;
    double send_s = 0, slot_s = 0;
  } replaced;
  std::map<uint32_t, std::unique_ptr<StreamRun>> runs;  // by the decoded stream's index
  std::map<uint32_t, uint32_t> source_of_member;       // member index -> its run's index
  // Each running stream's settings as the lane last applied them (sources and members, by index): a
  // reload that changes them (pipeline/stream_table.h) reaches the reader (a new connection) or the
  // fan-out (a region).
  std::map<uint32_t, StreamTableEntry> applied;
  // Decoded streams that had ended and start again once their run is done (a reload): why, as their
  // `started` event says.
  std::map<uint32_t, std::string> comebacks;
  // Where the members of a group that a comeback replaced number on, if they come back later.
  std::map<uint32_t, uint64_t> next_seq_of_left;
  // A stream of a group, as its fan-out sees it: what an earlier run recorded, where a restarted lane
  // numbers on.
  auto fan_out_target = [&](uint32_t index, const StreamConfig& s) {
    FanOutTarget t;
    t.index = index;
    t.id = s.id;
    t.roi = s.roi;
    t.turn = s.turn ? orientation_name(*s.turn) : "";
    if (plan && plan->streams.count(s.id)) {
      const StreamProgress& earlier = plan->streams.at(s.id);
      t.earlier_results = earlier.results;
      t.ended_earlier = !earlier.ended.empty();
    }
    if (!restart_reason.empty() && reservations) t.first_seq = reservations->reserved(s.id);
    return t;
  };
  // Streams the lane decodes at once (set below, before the first starts): a CPU decoder's share of the
  // lane's CPUs (ingest.decoder_threads) is worked out from it.
  const unsigned cpus = usable_cpus();
  size_t decoding_at_once = 1;
  auto decoder_threads_among = [&](size_t streams) {
    return decoder_threads_per_stream(config.ingest.decoder_threads, cpus, lanes, streams);
  };
  // The job's ingest settings as the lane runs them: the config's, then as reloads left them (a live
  // job: reload_ingest_settings below). A stream starts with them.
  IngestConfig ingest_now = config.ingest;
  // Whether a clip cut by a reconnection waits for publish to say if its segment went on across it
  // (publish.segments_reconnect_grace_s above 0), as reloads leave it: read as each stream starts.
  std::atomic<bool> clips_held_across_reconnections{config.publish.segments_reconnect_grace_s > 0};
  IngestConfig ingest_before_table = config.ingest;  // as the streams' settings were last applied
  // `members`: the streams that take this one's frames too, and whether each was removed already.
  auto start_stream = [&](uint32_t i, StreamConfig stream_config, bool removed,
                          std::vector<std::pair<uint32_t, bool>> members, std::string orphan_reason = "",
                          std::optional<StreamRun::Comeback> comeback = std::nullopt) {
    // A live job's reload can add streams past the first count.
    if (config.job.mode == JobMode::kLive && !stream_config.is_member()) {
      size_t running = 1;
      for (const auto& [index, r] : runs) running += r->fan_out && !r->done.load();
      decoding_at_once = std::max(decoding_at_once, running);
    }
    const uint32_t decoder_threads = decoder_threads_among(decoding_at_once);
    auto run = std::make_unique<StreamRun>();
    run->stream = std::move(stream_config);
    run->removed = removed;
    run->orphan_reason = std::move(orphan_reason);
    run->comeback = std::move(comeback);
    if (!run->stream.is_member()) {
      std::vector<FanOutTarget> targets{fan_out_target(i, run->stream)};
      if (run->comeback) targets.front().first_seq = run->comeback->first_seq;
      for (const auto& [m, m_removed] : members) targets.push_back(fan_out_target(m, config.streams[m]));
      run->fan_out = std::make_unique<StreamFanOut>(i, redact_uri(run->stream.uri), std::move(targets),
                                                    reservations.get());
      for (const auto& [m, m_removed] : members) {
        source_of_member[m] = i;
        if (m_removed) run->fan_out->remove(m, kRemovedFromConfig);
      }
    }
    applied[i] = table_entry_of(run->stream, i, lane.index);
    for (const auto& [m, m_removed] : members) applied[m] = table_entry_of(config.streams[m], m, lane.index);
    StreamRun* r = run.get();
    runs[i] = std::move(run);
    auto stream_thread = [&, i, r, decoder_threads, ingest = ingest_now]() mutable {
      const StreamConfig& stream = r->stream;
      // One socket per stream at a time: the preprocess input fair-queues between them, and one
      // stream's messages stay in order. It goes back to the pool when the stream ends (last, after
      // everything below that uses it), or is closed on an abort, dropping what it still holds.
      auto acquired = senders.acquire();
      if (!acquired.ok()) {
        if (r->fan_out) r->fan_out->close();  // a member added later ends as one whose source is not running
        r->result = acquired.status();
        r->done = true;
        wake_loop();
        return;
      }
      struct Lease {
        SenderPool& pool;
        std::unique_ptr<MessageSender> sender;
        bool give_back = true;
        ~Lease() {
          if (give_back) pool.release(std::move(sender));
        }
      } lease{senders, std::move(*acquired)};
      MessageSender* sender = lease.sender.get();
      // This stream's own work, watched: its GStreamer state changes and each decoded frame's copy (a
      // state change that never returns, a decoder thread that never stops, a CUDA copy that never
      // ends) becomes a crash after job.stage_timeout_s, and the lane restarts. The emitter's waits
      // for a frame slot or for room downstream (back-pressure) are not watched.
      StageWatchdog watchdog("ingest: stream '" + stream.id + "'", config.job.stage_timeout_s);
      SenderEmitter emitter(sender, allocator.get(), &flags.abort, &watchdog);
      if (r->fan_out) r->fan_out->attach(&emitter, &watchdog);
      Emitter& out = r->fan_out ? static_cast<Emitter&>(*r->fan_out) : emitter;
      {
        std::lock_guard<std::mutex> lock(r->mutex);
        r->emitter = &emitter;
      }
      // Its totals stay when the emitter goes (every way out of this thread).
      struct KeepTotals {
        StreamRun* r;
        const SenderEmitter* e;
        ~KeepTotals() {
          std::lock_guard<std::mutex> lock(r->mutex);
          r->send_s = e->send_seconds();
          r->slot_s = e->allocate_seconds();
          r->sent = e->messages_sent();
          r->emitter = nullptr;
        }
      } keep_totals{r, &emitter};
      // Ends a stream that gets no reader: downstream still has to see its end.
      auto end_without_reader = [&](MessageKind kind, std::string message, uint64_t frames) {
        Envelope env;
        env.stream_id = stream.id;
        env.stream_index = i;
        r->result = out.emit(
            Message::stream_event(kind, env, StreamEvent{redact_uri(stream.uri), std::move(message), frames, 0}));
        r->done = true;
        wake_loop();
      };
      if (!r->fan_out) {
        return end_without_reader(MessageKind::kStreamError,
                                  !r->orphan_reason.empty() ? r->orphan_reason
                                                            : "its source '" + stream.source + "' is not running", 0);
      }
      // --resume: the group goes on from the least of its streams' results; each of them takes frames
      // past its own (StreamFanOut). One that ended earlier only ends again.
      const std::optional<uint64_t> resume_from = r->fan_out->resume_from();
      if (!resume_from) return end_without_reader(MessageKind::kStreamEnd, "ended in an earlier run", 0);
      // A live job's file that the lane's ingest before its restart read to its end: ended again (publish,
      // which saw its end, says nothing more), not read again from its start.
      if (!restart_reason.empty() && reservations && reservations->ended(stream.id)) {
        VAPIPE_LOG_INFO("stream '{}': read to its end before its lane restarted: not read again", stream.id);
        return end_without_reader(MessageKind::kStreamEnd, "read to its end before its lane restarted", 0);
      }
      const StreamProgress* earlier = nullptr;
      if (plan) {
        for (const std::string& id : r->fan_out->ids()) {
          auto p = plan->streams.find(id);
          if (p != plan->streams.end() && p->second.ended.empty() && p->second.results == *resume_from) earlier = &p->second;
        }
      }
      // A file it had not finished: still the recording its results are of? Another one put under its
      // name would go on after them as if it were the same.
      if (earlier && earlier->results > 0 && stream.parsed.kind == UriKind::kFile) {
        std::string note;
        const std::string path = file_uri_path(stream.uri);
        const Status same = check_resumed_file(path, escape_invalid_utf8(path), *earlier, &note);
        if (!same.ok()) {
          VAPIPE_LOG_ERROR("stream '{}': --resume: {}", stream.id, same.message());
          return end_without_reader(MessageKind::kStreamError, "--resume: " + same.message(), earlier->results);
        }
        if (!note.empty()) VAPIPE_LOG_WARN("stream '{}': --resume: {}", stream.id, note);
      }
      ReaderOptions reader_options;
      reader_options.watchdog = &watchdog;
      reader_options.decoder = lane.decoder;
      reader_options.gpu = lane.gpu;
      reader_options.decoder_threads = decoder_threads;
      reader_options.max_frame_bytes = pool ? pool->slot_bytes() : 0;
      reader_options.live = config.job.mode == JobMode::kLive;
      // A segment's picture is of a frame among the segments_min_frames it began with (publish asks).
      if (reader_options.live && !config.publish.segments_pictures_dir.empty()) {
        reader_options.picture_frames_back = config.publish.segments_min_frames;
        reader_options.clips = config.publish.segments_clips;
        auto ns = [](double s) { return std::chrono::nanoseconds(static_cast<int64_t>(s * 1e9)); };
        reader_options.clip_options = {ns(config.publish.segments_clip_pre_s), ns(config.publish.segments_clip_post_s),
                                       ns(config.publish.segments_clip_max_s), clips_held_across_reconnections.load()};
      }
      reader_options.file_open_timeout =
          std::chrono::milliseconds(static_cast<int64_t>(config.ingest.file_open_timeout_s * 1000));
      reader_options.skip_frames = earlier ? earlier->results : 0;
      reader_options.resume_after_pts_ns =
          earlier && earlier->last_pts_ms >= 0 ? static_cast<int64_t>(earlier->last_pts_ms * 1e6 + 0.5) : -1;
      reader_options.resume_pts_media_times = earlier && earlier->pts_media_times;
      reader_options.seq_reservations = reservations.get();
      if (r->comeback) {
        // It had ended and a reload brought it back: a `started` again, its numbering going on.
        reader_options.first_seq = r->comeback->first_seq;
        reader_options.start_message = r->comeback->message;
      } else if (!restart_reason.empty() && reservations->reserved(stream.id) > 0) {
        // It sent frames before the restart (a stream that never did starts as usual).
        reader_options.first_seq = reservations->reserved(stream.id);
        reader_options.restart_reason = "its lane restarted: " + restart_reason;
        // A file it was reading goes on after its last frame sent, instead of from its start.
        if (stream.parsed.kind == UriKind::kFile) {
          reader_options.resume_after_sent_pts_ns = reservations->last_sent(stream.id, stream.uri).value_or(-1);
        }
      }
      {
        std::lock_guard<std::mutex> lock(r->mutex);  // a reload's, since the stream was started
        if (r->waiting_ingest) ingest = *std::exchange(r->waiting_ingest, std::nullopt);
      }
      if (const auto crash = crashed.find(stream.id); crash != crashed.end()) {
        const std::string message = crashed_stream_message(crash->second);
        VAPIPE_LOG_ERROR("stream '{}': {}", stream.id, message);
        return end_without_reader(MessageKind::kStreamError, message, earlier ? earlier->results : 0);
      }
      // Listed from before its pipeline is made until after it is gone: a crash in between is its.
      being_read.add(stream.id);
      struct Unlisted {
        StreamsBeingRead& list;
        const std::string& id;
        ~Unlisted() { list.remove(id); }
      } unlisted{being_read, stream.id};
      auto reader = StreamReader::create(stream, i, ingest, reader_options);
      if (reader.ok() && reader_options.skip_frames > 0 && r->fan_out->ids().size() > 1) {
        VAPIPE_LOG_INFO("stream '{}': resumed from frame {}, the least of its group's results ({})", stream.id,
                        reader_options.skip_frames, r->fan_out->ids().size());
      }
      if (!reader.ok()) {
        // An error that names the stream.
        VAPIPE_LOG_ERROR("stream '{}': {}", stream.id, reader.status().message());
        return end_without_reader(MessageKind::kStreamError, reader.status().message(), 0);
      }
      {
        std::lock_guard<std::mutex> lock(r->mutex);
        if (r->removed) (*reader)->stop(kRemovedFromConfig);  // removed before it began: it ends without a frame
        if (r->waiting_ingest) {
          ingest = *std::exchange(r->waiting_ingest, std::nullopt);
          (*reader)->set_ingest(ingest);
        }
        if (r->waiting_settings) {
          if (r->waiting_connects) {
            (*reader)->reconfigure(std::move(*r->waiting_settings), std::move(r->waiting_what));
          } else {
            (*reader)->retune(*r->waiting_settings, ingest, std::move(r->waiting_what));
          }
          r->waiting_settings.reset();
          r->waiting_connects = false;
        }
        r->reader = reader->get();
      }
      // A file's decoder starts (NVDEC: seconds) while the gate is closed. A network stream's session
      // is set up once it is open, and played at once: a server that goes on making frames between
      // SETUP and PLAY (the test server; a camera with a GOP cache) sends them as a burst at PLAY,
      // which rtspsrc's jitter buffer stamps with compressed, repeated or no times for a second or so
      // (pictures of those frames not found, clips showing them crowded), and a session set up long
      // before its PLAY (a slow downstream start) may have expired by then.
      const bool network = stream.parsed.kind == UriKind::kNetwork;
      if (!network) (*reader)->preroll();
      gate.wait();
      if (network) (*reader)->preroll();
      r->prerolled = (*reader)->wait_prerolled(std::chrono::milliseconds(0));
      r->result = (*reader)->run(out, flags);
      if (flags.abort.load()) {
        sender->discard_unsent();
        lease.give_back = false;  // closed as the thread ends, not given back
      }
      {
        std::lock_guard<std::mutex> lock(r->mutex);
        r->dropped = (*reader)->dropped();
        r->left_out = (*reader)->left_out();
        r->reader = nullptr;
      }
      reader->reset();  // its pipeline goes before the stream counts as done (release_freed_heap_memory)
      r->done = true;
      wake_loop();
    };
    try {
      r->thread = std::thread(stream_thread);
    } catch (const std::system_error& e) {
      // Nothing of the lane can go on without it (its stream would never end downstream): the lane
      // crashes, and the log says why first.
      const TaskLimit tasks = task_limit();
      VAPIPE_LOG_ERROR("ingest lane {}: stream '{}': its thread could not start ({}){}", lane.index, r->stream.id,
                       e.what(),
                       tasks.max > 0 ? fmt::format(": {} threads may start here ({}), {} in use; raise the limit "
                                                   "(`docker run --pids-limit`, podPidsLimit, TasksMax=)",
                                                   tasks.max, tasks.where, tasks.in_use)
                                     : std::string());
      throw;
    }
  };
  auto remove_stream = [&](StreamRun& r) {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (r.removed) return;
    r.removed = true;
    if (r.reader) r.reader->stop(kRemovedFromConfig);
  };
  // A member leaves its group (the group's reader sends its end); an orphan ends by itself anyway.
  std::set<uint32_t> removed_members;  // members a reload removed (listed again, they come back)
  auto remove_member = [&](uint32_t m) {
    auto group = source_of_member.find(m);
    if (group == source_of_member.end()) return;
    runs.at(group->second)->fan_out->remove(m, kRemovedFromConfig);
    removed_members.insert(m);
  };
  // A group's reader takes `settings` (a reload changed `what`): it connects again with them
  // (`connects`: its connection was made with some of what changed), or takes their rotate/mirror,
  // max_fps, keyframes_only and rtsp_latency_ms as it goes. A reader not made yet takes them once it is.
  auto retune_group = [&](StreamRun& group, StreamConfig settings, const std::string& what, bool connects) {
    std::lock_guard<std::mutex> lock(group.mutex);
    if (group.reader) {
      if (connects) {
        group.reader->reconfigure(std::move(settings), what);
      } else {
        group.reader->retune(settings, ingest_now, what);
      }
    } else {
      group.waiting_settings = std::move(settings);
      group.waiting_what = group.waiting_what.empty() ? what : group.waiting_what + ", " + what;
      group.waiting_connects = group.waiting_connects || connects;
    }
  };
  // A running stream whose settings a reload changed: its reader connects again with those its
  // connection was made with (uri, TLS), takes a new rotate/mirror, max_fps, keyframes_only or
  // rtsp_latency_ms as it goes, and its fan-out classifies its new region from the next frame (roi).
  auto retune_stream = [&](const StreamTableEntry& e) {
    auto known = applied.find(e.index);
    if (known == applied.end()) return;
    StreamTableEntry before = std::exchange(known->second, e);
    // As the stream decodes: its own settings, and the job's ingest settings it takes.
    const IngestConfig& was = ingest_before_table;
    const std::string what = changed_settings(before, e, was, ingest_now);
    if (what.empty()) return;  // (a member's copy of its source's settings)
    const bool reconnect = settings_need_new_connection(before, e, was, ingest_now);
    StreamTableEntry same_region = e;
    same_region.roi = before.roi;
    const std::string decoding = changed_settings(before, same_region, was, ingest_now);
    StreamRun* group = nullptr;
    if (auto run = runs.find(e.index); run != runs.end()) {
      group = run->second.get();
    } else if (auto member = source_of_member.find(e.index); member != source_of_member.end()) {
      group = runs.at(member->second).get();
    }
    if (!group) return;
    const auto member_of = source_of_member.find(e.index);
    if (comebacks.count(member_of != source_of_member.end() ? member_of->second : e.index)) {
      return;  // its group starts again, with the settings of the latest table
    }
    if (group->done.load()) {
      // A stream that ended by itself (a test source's last frame): it does not start again. (A camera
      // that gave up, or one that failed, starts again at a reload: comebacks.)
      VAPIPE_LOG_WARN("ingest lane {}: stream '{}': a reload changed its {}, but the stream has ended by itself: it "
                      "does not start again", lane.index, e.id, what);
      return;
    }
    if (before.roi != e.roi && group->fan_out) {
      group->fan_out->set_region(e.index, e.roi);
      VAPIPE_LOG_INFO("ingest lane {}: stream '{}': its roi changed (reload) to [{}, {}, {}, {}]: classified from "
                      "its next frame", lane.index, e.id, e.roi[0], e.roi[1], e.roi[2], e.roi[3]);
    }
    if (decoding.empty()) return;
    auto settings = stream_config_of(e);
    if (!settings.ok()) {
      VAPIPE_LOG_ERROR("stream '{}': {}: its settings are left as they were", e.id, settings.status().message());
      return;
    }
    if (reconnect) {
      VAPIPE_LOG_INFO("ingest lane {}: stream '{}': a reload changed its {}: it connects again with them ({})",
                      lane.index, e.id, decoding, redact_uri(e.uri));
    }
    retune_group(*group, std::move(*settings), decoding, reconnect);
  };
  // The job's ingest settings that a reload changed (pipeline/ingest_reload.h), from the job's copy of
  // its config, which the supervisor rewrites before the table: looked at when the table's version
  // rises, and at the lane's first table (a lane started as a reload rewrote the copy). Every running
  // stream takes the new reconnection settings now, and one that samples or buffers with a new
  // max_fps, keyframes_only or rtsp_latency_ms takes it as it goes (retune_stream, which compares the
  // streams as they decode: with ingest_before_table, then ingest_now).
  const char* copy_env = std::getenv(kConfigAsStartedEnv);
  const std::string config_copy = config.job.mode == JobMode::kLive && copy_env ? copy_env : "";
  std::string config_copy_identity;
  auto reload_ingest_settings = [&] {
    if (config_copy.empty()) return;
    const std::string identity = file_identity(config_copy);
    if (identity == config_copy_identity) return;
    config_copy_identity = identity;
    auto text = read_file_bytes(config_copy);
    ConfigLoadOptions options;
    options.expand_globs = false;
    if (text.ok()) options.file_text = &text.value();
    auto reloaded = text.ok() ? load_config_file(config.source, nullptr, options) : Result<Config>(text.status());
    if (!reloaded.ok()) {
      VAPIPE_LOG_ERROR("ingest lane {}: reload: {}; its ingest settings stay as they are", lane.index,
                       reloaded.status().message());
      return;
    }
    if (const bool hold = reloaded->publish.segments_reconnect_grace_s > 0; hold != clips_held_across_reconnections) {
      clips_held_across_reconnections = hold;  // publish takes the grace from the same reload
      for (auto& [index, run] : runs) {
        std::lock_guard<std::mutex> lock(run->mutex);
        if (run->reader && !run->done.load()) run->reader->hold_clips_across_reconnections(hold);
      }
    }
    IngestConfig next = ingest_now;
    take_reloadable_ingest_settings(reloaded->ingest, next);
    const std::vector<std::string> keys = changed_ingest_settings(ingest_now, next);
    if (keys.empty()) return;
    ingest_now = next;
    std::string names;
    for (const std::string& k : keys) names += (names.empty() ? "ingest." : ", ingest.") + k;
    VAPIPE_LOG_INFO("ingest lane {}: a reload changed {}: the lane's streams take it now", lane.index, names);
    for (auto& [index, run] : runs) {
      if (run->done.load() || !run->fan_out) continue;
      std::lock_guard<std::mutex> lock(run->mutex);
      if (run->reader) {
        run->reader->set_ingest(ingest_now);
      } else {
        run->waiting_ingest = ingest_now;
      }
    }
  };
  // Streams removed from a running job stay in its table (their indices are stable). A lane that
  // restarts ends them again without a frame, for the stages that start with it; publish, which saw
  // their end, ignores this one.
  std::vector<bool> removed_earlier(config.streams.size(), false);
  if (auto table = read_job_stream_table(stream_table_path(layout)); table.ok() && table->has_value()) {
    for (const StreamTableEntry& e : (*table)->entries) {
      if (e.index < removed_earlier.size()) removed_earlier[e.index] = e.removed;
    }
  }
  // Decoded streams with their members; a member whose source is not on this lane (there is none such)
  // only ends.
  std::map<std::string, std::vector<std::pair<uint32_t, bool>>> members_of;
  for (uint32_t i : lane.streams) {
    if (config.streams[i].is_member()) members_of[config.streams[i].source].emplace_back(i, removed_earlier[i]);
  }
  // An archive job reads at most ingest.max_open_streams of the lane's groups at once, and no more than
  // its open-file limit holds (GStreamer aborts or hangs a stream that cannot get a descriptor): the
  // others wait their turn, in config order, and open as those end. A folder of thousands of files
  // would otherwise hold thousands of decoders, their threads and open files at once, and a frame
  // pool sized for them.
  struct Waiting {
    uint32_t index;
    std::vector<std::pair<uint32_t, bool>> members;
    StreamConfig stream;  // the config's, or (a watched folder's new file) the stream table's
  };
  std::deque<Waiting> waiting;
  const bool archive = config.job.mode == JobMode::kArchive;
  const size_t open_limit = archive ? (one_at_a_time ? 1 : config.ingest.max_open_streams) : 0;
  const uint64_t open_files_allowed = open_file_limit().soft;
  // Threads that may still start here (a container's pids limit): the stages that started before this
  // one hold theirs already, this process's own may grow, and some are left to the other stages, which
  // start more as they run (LibTorch's pool at the first batch).
  const uint64_t threads_for_others = 16 + 2 * uint64_t{cpus};
  TaskLimit tasks_at_start = task_limit();
  tasks_at_start.in_use -= std::min(tasks_at_start.in_use, own_thread_count());
  const uint64_t threads_allowed = tasks_at_start.max == 0 ? UINT64_MAX
                                   : tasks_at_start.room() > threads_for_others ? tasks_at_start.room() - threads_for_others
                                                                                : 0;
  auto kind_of = [&](const StreamConfig& stream) {
    auto uri = parse_stream_uri(stream.uri, "");
    return uri.ok() ? uri->kind : UriKind::kFile;
  };
  // What open streams are expected to hold: open files, and threads (a decoder's as `decoder_threads`).
  struct Held {
    size_t groups = 0;
    uint64_t files = kOpenFilesPerProcess;
    uint64_t threads = kThreadsPerIngestProcess;
  };
  auto add_stream = [&](Held& held, UriKind kind, uint32_t decoder_threads) {
    held.groups += 1;
    held.files += kind == UriKind::kNetwork ? kOpenFilesPerNetworkStream : kOpenFilesPerOtherStream;
    held.threads += threads_needed(kind == UriKind::kNetwork, kind != UriKind::kNetwork && kind != UriKind::kTest,
                                   kind == UriKind::kTest, decoder_threads, 0);
  };
  // A group whose every stream ended in an earlier run (--resume) only ends again: it opens nothing.
  auto ended_earlier = [&](uint32_t i, const std::vector<std::pair<uint32_t, bool>>& members) {
    auto ended = [&](uint32_t index) {
      if (!plan) return false;
      auto p = plan->streams.find(config.streams[index].id);
      return p != plan->streams.end() && !p->second.ended.empty();
    };
    return ended(i) && std::all_of(members.begin(), members.end(), [&](const auto& m) { return ended(m.first); });
  };
  // Open groups, and what they are expected to hold.
  auto open_groups = [&] {
    Held open;
    const uint32_t each = decoder_threads_among(decoding_at_once);
    for (const auto& [i, r] : runs) {
      if (!r->fan_out || r->done.load()) continue;
      if (!r->kind) r->kind = kind_of(r->stream);
      add_stream(open, *r->kind, each);
    }
    return open;
  };
  // What, besides max_open_streams, kept some waiting: "" (nothing), "open files", "threads".
  std::string held_by;
  auto may_open = [&](const StreamConfig& stream, const Held& open) {
    if (!archive) return true;
    if (open_limit > 0 && open.groups >= open_limit) return false;
    if (open.groups == 0) return true;  // one at least, whatever the limits say
    Held with = open;
    add_stream(with, kind_of(stream), decoder_threads_among(open.groups + 1));
    if (with.files > open_files_allowed) {
      held_by = "open files";
      return false;
    }
    if (with.threads > threads_allowed) {
      held_by = "threads";
      return false;
    }
    return true;
  };
  // Which groups open now and which wait, then (their count known: the decoders' threads) open them.
  Held opened;
  std::vector<Waiting> open_now;
  for (uint32_t i : lane.streams) {
    const StreamConfig& s = config.streams[i];
    if (s.is_member()) continue;
    std::vector<std::pair<uint32_t, bool>> members = std::move(members_of[s.id]);
    members_of.erase(s.id);
    const bool opens_nothing = ended_earlier(i, members);
    if (!opens_nothing && (!waiting.empty() || !may_open(s, opened))) {  // in order: none overtakes
      waiting.push_back(Waiting{i, std::move(members), s});
      continue;
    }
    if (!opens_nothing) add_stream(opened, kind_of(s), decoder_threads_among(opened.groups + 1));
    open_now.push_back(Waiting{i, std::move(members), s});
  }
  decoding_at_once = std::max<size_t>(1, opened.groups);
  if (lane.decoder == Decoder::kCpu && opened.groups > 0) {
    const uint32_t threads = decoder_threads_among(decoding_at_once);
    VAPIPE_LOG_INFO("ingest lane {}: CPU decoders get {} thread{} each (ingest.decoder_threads{})", lane.index, threads,
                    threads == 1 ? "" : "s",
                    config.ingest.decoder_threads > 0
                        ? std::string()
                        : fmt::format(": auto, {} CPU{}{} for {} stream{} decoded at once", cpus, cpus == 1 ? "" : "s",
                                      lanes > 1 ? fmt::format(" shared by {} lanes", lanes) : std::string(),
                                      decoding_at_once, decoding_at_once == 1 ? "" : "s"));
  }
  for (Waiting& w : open_now) start_stream(w.index, std::move(w.stream), removed_earlier[w.index], std::move(w.members));
  for (const auto& [source, members] : members_of) {
    for (const auto& [m, m_removed] : members) start_stream(m, config.streams[m], m_removed, {});
  }
  if (!waiting.empty()) {
    VAPIPE_LOG_INFO("ingest lane {}: {} streams open at once ({}), {} wait their turn", lane.index, opened.groups,
                    held_by == "open files"
                        ? fmt::format("as many as this process's {} open files allow (RLIMIT_NOFILE; raise it to read "
                                      "more at once)", open_files_allowed)
                    : held_by == "threads"
                        ? fmt::format("as many as the {} threads that may start here allow ({}: {}, {} in use, {} "
                                      "left to the other stages; raise it to read more at once)", threads_allowed,
                                      tasks_at_start.where, tasks_at_start.max, tasks_at_start.in_use, threads_for_others)
                        : std::string("ingest.max_open_streams"),
                    waiting.size());
  }
  // Past its open-file limit GStreamer aborts the process or hangs a stream: say so before, naming the
  // limit (a live job opens every camera; an archive job's files wait instead).
  auto check_open_files = [&](const char* when) {
    size_t network = 0, other = 0, test = 0;
    for (const auto& [i, r] : runs) {
      if (!r->fan_out || r->done.load()) continue;
      if (!r->kind) r->kind = kind_of(r->stream);
      (*r->kind == UriKind::kNetwork ? network : other) += 1;
      test += *r->kind == UriKind::kTest;
    }
    const std::string streams =
        fmt::format("ingest lane {}: {} {} streams ({} from the network)", lane.index, when, network + other, network);
    const std::string shortfall = open_file_shortfall(open_files_needed(network, other), open_file_limit(), streams);
    if (!shortfall.empty()) VAPIPE_LOG_WARN("{}", shortfall);
    // Threads too (a container's pids limit): this process's own count is what its streams may grow into.
    TaskLimit tasks = task_limit();
    tasks.in_use -= std::min(tasks.in_use, own_thread_count());
    const std::string too_few_threads = task_shortfall(
        threads_needed(network, other - test, test, decoder_threads_among(decoding_at_once),
                       kThreadsPerIngestProcess + threads_for_others),
        tasks, streams);
    if (!too_few_threads.empty()) VAPIPE_LOG_WARN("{}", too_few_threads);
  };
  check_open_files("its");
  const bool some_wait = !waiting.empty();
  size_t most_open = open_groups().groups;  // for the last log line: the limit held
  // A watched folder's files (streams[].watch_s) come while the lane runs: few or many at a time.
  const bool watching = config.watches_folders();
  // Opens the next waiting streams as open ones end.
  auto open_waiting = [&] {
    if (waiting.empty() || flags.stop.load()) return;
    Held open = open_groups();
    if (watching && may_open(waiting.front().stream, open)) {
      // Decoders opening now share the CPUs with those open and those waiting (up to the limit): one
      // new file alone gets them all, a folder's worth each a share.
      const size_t at_once = open.groups + waiting.size();
      decoding_at_once = std::max<size_t>(1, open_limit > 0 ? std::min(at_once, open_limit) : at_once);
    }
    while (!waiting.empty() && may_open(waiting.front().stream, open)) {
      Waiting w = std::move(waiting.front());
      waiting.pop_front();
      add_stream(open, kind_of(w.stream), decoder_threads_among(decoding_at_once));
      const bool removed = w.index < removed_earlier.size() && removed_earlier[w.index];
      start_stream(w.index, std::move(w.stream), removed, std::move(w.members));
    }
    most_open = std::max(most_open, open.groups);
  };
  const size_t initial_streams = runs.size();

  const DownstreamOpenWait wait = wait_for_downstream_open(layout, flags);
  if (!wait.last.empty()) {
    VAPIPE_LOG_INFO("ingest lane {}: {} {:.2f} s for the stages downstream to open ({}: {})", lane.index,
                    wait.opened ? "streams start after waiting" : "stop requested after waiting", wait.seconds,
                    wait.opened ? "the last" : "still opening", wait.last);
  }
  downstream_open.set_value();  // on a stop too: each stream then ends as stopped, downstream sees it
  const auto started = std::chrono::steady_clock::now();

  // Streams that had ended and start again under their ids (pipeline/stream_table.h): a stream a
  // reload removed and lists again, and, at every reload, a camera that gave up (ingest.reconnect_attempts)
  // or failed. Each starts once its old run is done: its group's reader anew, numbered on from its last
  // frame, with the group's members still listed; a member listed again joins its running group.
  std::optional<StreamTable> latest_table;     // the table the lane last applied
  const bool downstream_marks_closed = !input_closed_marker(endpoint).empty();
  auto wants_comeback = [&](StreamRun& r) -> std::optional<std::string> {
    if (!r.fan_out || archive) return std::nullopt;
    std::lock_guard<std::mutex> lock(r.mutex);
    if (r.removed) return std::string("back: a reload listed it again");
    const bool file = r.stream.parsed.kind == UriKind::kFile;
    if (!file && r.fan_out->ended_as() == MessageKind::kStreamError) {
      return std::string("started again by a reload, after it had failed");
    }
    return std::nullopt;
  };
  auto entry_in = [](const StreamTable& table, uint32_t index) -> const StreamTableEntry* {
    return index < table.entries.size() ? &table.entries[index] : nullptr;
  };
  auto start_comebacks = [&] {
    if (comebacks.empty() || flags.stop.load() || !latest_table) return;
    for (auto it = comebacks.begin(); it != comebacks.end();) {
      const uint32_t i = it->first;
      StreamRun& old = *runs.at(i);
      if (!old.done.load()) {
        ++it;
        continue;
      }
      const std::string why = it->second;
      it = comebacks.erase(it);
      const StreamTableEntry* e = entry_in(*latest_table, i);
      if (!e || e->removed) continue;  // removed again meanwhile
      if (downstream_marks_closed && input_closed(endpoint)) {
        // Its lane's stages have finished (every stream of the lane had ended): the lane ends, and
        // `vapipe run` starts it again for a stream listed again.
        VAPIPE_LOG_WARN("ingest lane {}: stream '{}' does not start again here: the lane's stages have finished "
                        "(every stream of the lane had ended)", lane.index, e->id);
        continue;
      }
      auto settings = stream_config_of(*e);
      if (!settings.ok()) {
        VAPIPE_LOG_ERROR("stream '{}': {}: it does not start again", e->id, settings.status().message());
        continue;
      }
      if (old.thread.joinable()) old.thread.join();
      // Where each stream of the group goes on: its next frame's number in the run that ended.
      const uint64_t first_seq = old.fan_out->next_seq_of(i).value_or(0);
      std::vector<std::pair<uint32_t, uint64_t>> members;
      for (const auto& [m, group] : source_of_member) {
        if (group != i) continue;
        const uint64_t next = std::max(old.fan_out->next_seq_of(m).value_or(0), next_seq_of_left[m]);
        const StreamTableEntry* me = entry_in(*latest_table, m);
        if (me && !me->removed) {
          members.emplace_back(m, next);
        } else {
          next_seq_of_left[m] = next;  // not in the new group: listed again later, it numbers on from here
        }
      }
      // Region streams a reload added while it had ended (each ended at once, "its source ... is not
      // running"): they join it now, from their first frame.
      for (const StreamTableEntry& me : latest_table->entries) {
        if (me.removed || me.source != e->id || me.lane != lane.index || source_of_member.count(me.index)) continue;
        auto orphan = runs.find(me.index);
        if (orphan == runs.end() || orphan->second->fan_out || !orphan->second->done.load()) continue;
        if (orphan->second->thread.joinable()) orphan->second->thread.join();
        {
          std::lock_guard<std::mutex> lock(orphan->second->mutex);
          replaced.sent += orphan->second->sent;
        }
        ++replaced.runs;
        runs.erase(orphan);
        source_of_member[me.index] = i;
        members.emplace_back(me.index, 0);
      }
      {
        std::lock_guard<std::mutex> lock(old.mutex);
        replaced.sent += old.sent;
        replaced.left_out += old.left_out;
        replaced.send_s += old.send_s;
        replaced.slot_s += old.slot_s;
        ++replaced.runs;
      }
      VAPIPE_LOG_INFO("ingest lane {}: stream '{}' starts again ({}), its seq going on from {}{}", lane.index, e->id,
                      why, first_seq,
                      members.empty() ? std::string() : fmt::format(", with {} stream(s) of its frames", members.size()));
      start_stream(i, std::move(*settings), false, {}, "", StreamRun::Comeback{first_seq, why});
      StreamRun& back = *runs.at(i);
      for (const auto& [m, seq] : members) {
        auto member = stream_config_of(*entry_in(*latest_table, m));
        if (!member.ok()) continue;
        FanOutTarget t = fan_out_target(m, *member);
        t.first_seq = seq;
        t.start_message = why;
        back.fan_out->add(std::move(t));
        applied[m] = *entry_in(*latest_table, m);
        removed_members.erase(m);
      }
    }
  };
  // A member listed again whose group runs joins it; one whose group has ended comes back with it.
  auto member_comes_back = [&](const StreamTableEntry& e) {
    if (!removed_members.count(e.index)) return false;
    auto group = source_of_member.find(e.index);
    if (group == source_of_member.end()) return false;
    auto settings = stream_config_of(e);
    if (!settings.ok()) return false;
    FanOutTarget t = fan_out_target(e.index, *settings);
    t.start_message = "back: a reload listed it again";
    if (auto left = next_seq_of_left.find(e.index); left != next_seq_of_left.end()) {
      t.first_seq = std::max(t.first_seq, left->second);  // it left a group that has started again since
    }
    if (!runs.at(group->second)->fan_out->add(std::move(t))) return false;
    removed_members.erase(e.index);
    applied[e.index] = e;
    VAPIPE_LOG_INFO("ingest lane {}: stream '{}' is back (frames of '{}'), its seq going on", lane.index, e.id,
                    e.source);
    return true;
  };

  // The stream table (pipeline/stream_table.h): the supervisor rewrites it on a reload.
  const std::string table_path = stream_table_path(layout);
  uint64_t table_version = 0;
  // The table is written at every job start and rewritten only by a reload (whole, then renamed): it
  // is parsed again only when its modification time moved, not on each of the 10 looks a second.
  std::optional<std::filesystem::file_time_type> table_time;
  auto apply_stream_table = [&] {
    std::error_code no_table;
    const auto mtime = std::filesystem::last_write_time(table_path, no_table);
    if (no_table || mtime == table_time) return;
    table_time = mtime;
    auto table = read_job_stream_table(table_path);
    if (!table.ok()) {
      VAPIPE_LOG_ERROR("ingest lane {}: {}", lane.index, table.status().message());
      return;
    }
    if (!table->has_value() || (*table)->version <= table_version) return;
    table_version = (*table)->version;
    latest_table = **table;
    ingest_before_table = ingest_now;
    reload_ingest_settings();  // before the streams it adds start, and before the others are compared
    // Decoded streams first: a member added with its source joins it.
    const size_t runs_before = runs.size();
    for (const bool members : {false, true}) {
      for (const StreamTableEntry& e : (*table)->entries) {
        if (e.lane != lane.index || e.source.empty() != !members) continue;
        auto it = runs.find(e.index);
        if (it != runs.end() || source_of_member.count(e.index)) {
          if (!e.removed) {
            if (!members && it != runs.end()) {
              if (std::optional<std::string> why = wants_comeback(*it->second)) {
                comebacks.emplace(e.index, *why);
                applied[e.index] = e;  // its settings are the ones it starts with
                continue;
              }
            }
            if (members && member_comes_back(e)) continue;
            retune_stream(e);
            continue;
          }
          comebacks.erase(e.index);
          if (it != runs.end()) {
            remove_stream(*it->second);
          } else {
            remove_member(e.index);
          }
          continue;
        }
        auto stream_config = stream_config_of(e);
        if (!stream_config.ok()) {
          VAPIPE_LOG_ERROR("stream '{}': {}", e.id, stream_config.status().message());
          continue;
        }
        // A stream added and removed again before we saw it still gets its one end, downstream.
        if (!members) {
          VAPIPE_LOG_INFO("ingest lane {}: stream '{}' added ({})", lane.index, e.id, redact_uri(e.uri));
          if (archive && !e.removed) {
            // A watched folder's new file: it opens in its turn, as the job's first files do.
            waiting.push_back(Waiting{e.index, {}, std::move(*stream_config)});
            continue;
          }
          start_stream(e.index, std::move(*stream_config), e.removed || flags.stop.load(), {});
          continue;
        }
        VAPIPE_LOG_INFO("ingest lane {}: stream '{}' added (frames of '{}')", lane.index, e.id, e.source);
        auto group = runs.end();
        for (const StreamTableEntry& s : (*table)->entries) {
          if (s.id == e.source && s.source.empty()) group = runs.find(s.index);
        }
        // A stream with members holds its frame while it waits for a slot for each copy: as many such
        // streams as the lane's pool has slots could each hold one and wait for ever.
        size_t with_members = 0;
        for (const auto& [index, run] : runs) with_members += run->fan_out && run->fan_out->ids().size() > 1;
        const bool new_group = group != runs.end() && group->second->fan_out && group->second->fan_out->ids().size() == 1;
        if (pool && new_group && with_members + 1 >= pool->slot_count()) {
          const std::string why = "not added: the lane's frame pool has " + std::to_string(pool->slot_count()) +
                                  " slots, too few for another stream with members (transport.frame_slots)";
          VAPIPE_LOG_ERROR("stream '{}': {}", e.id, why);
          start_stream(e.index, std::move(*stream_config), true, {}, why);
        } else if (group != runs.end() && group->second->fan_out &&
                   group->second->fan_out->add(fan_out_target(e.index, *stream_config))) {
          source_of_member[e.index] = group->first;
          applied[e.index] = e;
          if (e.removed) group->second->fan_out->remove(e.index, kRemovedFromConfig);
        } else {
          start_stream(e.index, std::move(*stream_config), true, {},
                       "its source '" + e.source + "' is not running (it ended before this stream was added)");
        }
      }
    }
    if (runs.size() > runs_before) check_open_files("with the added ones,");
    start_comebacks();
  };
  auto all_done = [&] {
    if (!comebacks.empty() && !flags.stop.load()) return false;  // a stream starts again once its run is done
    for (const auto& [i, r] : runs) {
      if (!r->done.load()) return false;
    }
    return true;
  };
  // Once a second, for publish's metrics (pipeline/stage_stats.h): the lane's waits and totals.
  std::error_code no_dir;
  const bool share_stats = std::filesystem::is_directory(layout.run_dir, no_dir);
  auto next_stats = std::chrono::steady_clock::now();
  auto write_stats = [&](bool ended) {
    StageStatsSnapshot snap;
    snap.ended = ended;
    snap.stage = stage_kind_name(StageKind::kIngest);
    snap.lane = lane.index;
    snap.has_input = false;
    snap.up_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    double sent = 0, left_out = 0;
    for (const auto& [i, r] : runs) {
      std::lock_guard<std::mutex> lock(r->mutex);
      left_out += static_cast<double>(r->reader ? r->reader->left_out() : r->left_out);
      snap.send_blocked_s += r->emitter ? r->emitter->send_seconds() : r->send_s;
      snap.slot_wait_s += r->emitter ? r->emitter->allocate_seconds() : r->slot_s;
      sent += static_cast<double>(r->emitter ? r->emitter->messages_sent() : r->sent);
      // Only the streams still running: an ended one's count went out with its end event, and a job
      // that watches folders would otherwise write every file it ever had, every second.
      if (r->done.load()) continue;
      const uint64_t dropped = r->reader ? r->reader->dropped() : r->dropped;
      const uint64_t continuity = r->reader ? r->reader->continuity_errors() : 0;
      const uint64_t undecoded = r->reader ? r->reader->undecoded_frames() : 0;
      const RtpPackets rtp = r->reader ? r->reader->rtp_packets() : RtpPackets{};
      // A source group's streams share one queue and one reader.
      const std::vector<std::string> ids = r->fan_out ? r->fan_out->ids() : std::vector<std::string>{r->stream.id};
      for (const std::string& id : ids) {
        snap.stream_dropped.emplace_back(id, dropped);
        if (continuity > 0) snap.stream_continuity_errors.emplace_back(id, continuity);
        if (undecoded > 0) snap.stream_undecoded.emplace_back(id, undecoded);
        if (rtp.received + rtp.lost > 0) {
          snap.stream_rtp_lost.emplace_back(id, rtp.lost);
          snap.stream_rtp_received.emplace_back(id, rtp.received);
        }
      }
    }
    sent += static_cast<double>(replaced.sent);
    left_out += static_cast<double>(replaced.left_out);
    snap.send_blocked_s += replaced.send_s;
    snap.slot_wait_s += replaced.slot_s;
    snap.counters = {{"messages_sent", sent},
                     {"streams_started", static_cast<double>(runs.size() + replaced.runs)},
                     {"frames_left_out", left_out}};
    if (Status st = write_stage_stats(snap, stage_stats_path(layout, StageKind::kIngest)); !st.ok()) {
      VAPIPE_LOG_DEBUG("{}", st.message());
    }
    next_stats = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  };
  // Pictures of segments (publish.segments_pictures_dir): publish asks every lane; the lane that has the
  // stream has its reader write the next frame's picture.
  std::unique_ptr<PictureRequestReceiver> picture_requests;
  if (!config.publish.segments_pictures_dir.empty() && config.job.mode == JobMode::kLive) {
    auto receiver = PictureRequestReceiver::connect(picture_requests_endpoint(layout));
    if (receiver.ok()) {
      picture_requests = std::move(receiver).value();
    } else {
      VAPIPE_LOG_WARN("ingest lane {}: no pictures of segments: {}", lane.index, receiver.status().message());
    }
  }
  auto take_pictures = [&] {
    if (!picture_requests) return;
    for (PictureRequest& q : picture_requests->poll()) {
      if (q.kind == PictureRequest::Kind::kClipsBefore) {  // every stream's
        for (const auto& [i, r] : runs) {
          std::lock_guard<std::mutex> lock(r->mutex);
          if (r->reader && !r->done.load()) r->reader->end_clips_before(q.before_unix_ns);
        }
        continue;
      }
      for (const auto& [i, r] : runs) {
        std::optional<FanOutTarget> target = r->fan_out ? r->fan_out->target_named(q.stream_id) : std::nullopt;
        if (!target) continue;
        std::lock_guard<std::mutex> lock(r->mutex);
        if (r->reader && !r->done.load()) {
          if (q.kind == PictureRequest::Kind::kClipStart) {
            r->reader->start_clip(ClipOrder{target->index, target->id, std::move(q.label), q.segment_start_seq,
                                            std::move(q.path), q.frame_pts_ns});
          } else if (q.kind == PictureRequest::Kind::kClipEnd) {
            r->reader->end_clip(target->id, q.label, q.segment_start_seq, q.frame_pts_ns);
          } else if (q.kind == PictureRequest::Kind::kClipGoesOn) {
            r->reader->go_on_clip(target->id, q.label, q.segment_start_seq, q.frame_pts_ns);
          } else {
            r->reader->take_picture(PictureOrder{target->index, target->id, target->roi, std::move(q.label),
                                                 q.segment_start_seq, std::move(q.path), q.frame_pts_ns});
          }
        } else if (q.kind != PictureRequest::Kind::kClipEnd && q.kind != PictureRequest::Kind::kClipGoesOn) {
          // (a clip ends with its stream's decoding)
          VAPIPE_LOG_WARN("stream '{}': no {} for its '{}' segment: its decoding is not running", q.stream_id,
                          q.kind == PictureRequest::Kind::kPicture ? "picture" : "clip", q.label);
        }
        break;
      }  // a stream of another lane: that lane's
    }
  };
  // A stop leaves the streams still waiting their turn unopened (they have no results: --resume reads
  // them), but each is ended, without a frame, for the stages downstream: they would otherwise wait
  // for it until their drain timeout (20 s of a Ctrl-C, and a warning, before this was done).
  auto end_unopened_streams = [&] {
    if (waiting.empty()) return;
    auto acquired = senders.acquire();
    if (!acquired.ok()) {
      VAPIPE_LOG_ERROR("ingest lane {}: the {} streams not opened yet cannot be ended: {}", lane.index, waiting.size(),
                       acquired.status().message());
      waiting.clear();
      return;
    }
    SenderEmitter emitter(acquired->get(), allocator.get(), &flags.abort);
    Status sent = Status::Ok();
    for (const Waiting& w : waiting) {
      std::vector<std::pair<uint32_t, const StreamConfig*>> ends{{w.index, &w.stream}};
      for (const auto& [m, m_removed] : w.members) ends.emplace_back(m, &config.streams[m]);
      for (const auto& [index, stream] : ends) {
        Envelope env;
        env.stream_id = stream->id;
        env.stream_index = index;
        if (sent.ok()) {
          sent = emitter.emit(Message::stream_event(MessageKind::kStreamEnd, env,
                                                    StreamEvent{redact_uri(stream->uri), kNotOpenedReason, 0, 0}));
        }
      }
    }
    if (!sent.ok()) VAPIPE_LOG_ERROR("ingest lane {}: ending the streams not opened yet: {}", lane.index, sent.message());
    VAPIPE_LOG_INFO("ingest lane {}: stopped with {} stream{} not opened yet: {} no results, and --resume reads {}",
                    lane.index, waiting.size(), waiting.size() == 1 ? "" : "s", waiting.size() == 1 ? "it has" : "they have",
                    waiting.size() == 1 ? "it" : "them");
    senders.release(std::move(*acquired));
    waiting.clear();
  };
  size_t ended_streams = 0;
  bool table_read_at_stop = false;
  const OrphanGuard orphan_guard(flags, layout,
                                 std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                     std::chrono::duration<double>(config.job.drain_timeout_s)),
                                 "ingest lane " + std::to_string(lane.index));  // (its vapipe run killed)
  // A reload's log.level (pipeline/logging.h): a live job's copy of its config, which a reload rewrites.
  LogLevelFollower log_level(config_copy);
  while (!flags.abort.load()) {
    log_level.check(std::chrono::steady_clock::now());
    if (flags.stop.load()) {
      // The files a watched folder's last look added before the stop end with the rest of those waiting.
      if (watching && !table_read_at_stop) apply_stream_table();
      table_read_at_stop = true;
      end_unopened_streams();
    }
    take_pictures();
    if (share_stats && std::chrono::steady_clock::now() >= next_stats) write_stats(false);
    if (!flags.stop.load()) apply_stream_table();
    start_comebacks();
    open_waiting();
    size_t ended_now = 0;
    for (const auto& [i, r] : runs) {
      if (!r->done.load()) continue;
      ++ended_now;
      // A stream that ended has its thread joined now, not at the lane's end: its stack (some 300 KB
      // touched) would stay for the lane's life, one for each file a watched folder ever had.
      if (r->thread.joinable()) r->thread.join();
    }
    if (ended_now > ended_streams && !flags.stop.load()) release_freed_heap_memory();  // a stream removed
    ended_streams = ended_now;
    if (all_done() && (waiting.empty() || flags.stop.load())) {
      // A stop leaves the streams still waiting unopened: they have no results, and --resume reads them.
      if (flags.stop.load()) break;
      // A job that watches folders waits for their next files until it is stopped.
      if (!watching) {
        apply_stream_table();  // a stream added just now must not be missed
        if (all_done() && waiting.empty()) break;
      }
    }
    std::unique_lock<std::mutex> lock(wake_mutex);
    wake.wait_for(lock, std::chrono::milliseconds(100), [&] { return woken; });
    woken = false;
  }
  for (auto& [i, r] : runs) {
    if (r->thread.joinable()) r->thread.join();
  }
  if (share_stats) write_stats(true);  // the final totals
  if (!runs.empty()) {
    double send_total = 0, slot_total = 0;
    size_t ready = 0;
    for (const auto& [i, r] : runs) {
      send_total += r->send_s, slot_total += r->slot_s;
      ready += r->prerolled ? 1 : 0;
    }
    const double n = static_cast<double>(runs.size());
    VAPIPE_LOG_INFO("ingest lane {}: {} streams{} in {:.2f} s ({} prerolled when they started); each stream on "
                    "average blocked sending {:.2f} s and waiting for frame slots {:.2f} s", lane.index,
                    runs.size(),
                    some_wait ? fmt::format(" (at most {} read at once, {})", most_open,
                                            held_by == "open files" ? "as the open-file limit allows"
                                            : held_by == "threads" ? "as the limit on threads allows"
                                                                   : "ingest.max_open_streams")
                    : runs.size() > initial_streams ? " (" + std::to_string(runs.size() - initial_streams) + " added while running)" : std::string(),
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
                    ready, send_total / n, slot_total / n);
  }
  for (const auto& [i, r] : runs) {
    if (!r->result.ok()) VAPIPE_LOG_ERROR("stream '{}': {}", r->stream.id, r->result.message());
  }
  const auto drain = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(config.job.drain_timeout_s));
  if (pool) wait_for_pool_drained(*pool, flags, drain);
  // The streams' last messages (their ends) may still wait in preprocess's queue.
  wait_for_downstream_closed(endpoint, flags, drain);
  return Status::Ok();
}

}  // namespace vapipe
