#include "stages/publish/publish_stage.h"

#include <cstdint>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <random>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>
#include <unordered_map>
#include <utility>

#include "pipeline/stable_hash.h"
#include "pipeline/atomic_file.h"
#include "pipeline/file_identity.h"
#include "pipeline/job_layout.h"
#include "pipeline/json_fields.h"
#include "pipeline/logging.h"
#include "pipeline/resume.h"
#include "stages/publish/sink_marks.h"
#include "pipeline/results_path.h"
#include "pipeline/running_job.h"
#include "pipeline/stage_watchdog.h"
#include "pipeline/stream_table.h"
#include "pipeline/token_file.h"
#include "pipeline/transport.h"
#include "pipeline/utf8.h"
#include "stages/publish/result_schema.h"

namespace vapipe {

namespace {
// In the run folder: how many lines a live job's results file refused and publish holds (jsonl_refused).
constexpr const char* kLinesWaitingFile = "results-file-lines-waiting";
}  // namespace
namespace {
// Archive jobs log how far they are this often (publish.metrics_address serves it at any time).
constexpr auto kProgressLogPeriod = std::chrono::seconds(30);
constexpr auto kJsonlFlushDelay = std::chrono::milliseconds(200);  // see jsonl_flush_due_
constexpr auto kSinkMarksPeriod = std::chrono::milliseconds(250);  // the sinks' delivery marks written
constexpr size_t kJsonlBlockBytes = 64 * 1024;  // lines are written out in blocks of about this size
}  // namespace

namespace {

// Whether some output has a secret in a file of its own (looked at for changes: check_sink_secrets).
bool has_sink_secrets(const PublishConfig& p) {
  return std::any_of(p.webhooks.begin(), p.webhooks.end(), [](const WebhookConfig& w) { return !w.token_file.empty(); }) ||
         std::any_of(p.mqtt.begin(), p.mqtt.end(), [](const MqttConfig& m) { return !m.password_file.empty(); }) ||
         std::any_of(p.redis.begin(), p.redis.end(), [](const RedisConfig& r) {
           return !r.password_file.empty() || !r.sentinel_password_file.empty();
         }) ||
         std::any_of(p.kafka.begin(), p.kafka.end(), [](const KafkaConfig& k) { return !k.password_file.empty(); });
}

std::string joined_topics(const MessageSinkConfig& sink) {
  std::string topics;
  for (const std::string& t : sink.topics) topics += (topics.empty() ? "" : ", ") + t;
  return topics;
}

// The receiver an output sends to (its URL's origin): a new output for the same receiver as a removed
// one waits for the removed one to stop (QueuedSink::wait_for_predecessors).
std::string receiver_of(const WebhookConfig& c) {
  auto url = parse_http_url(c.url);
  return url.ok() ? url->origin() : c.url;
}
std::string receiver_of(const MqttConfig& c) {
  auto url = parse_mqtt_url(c.url);
  return url.ok() ? url->origin() : c.url;
}
std::string receiver_of(const RedisConfig& c) {
  auto url = parse_redis_url(c.url);
  return url.ok() ? url->origin() : c.url;
}
std::string receiver_of(const KafkaConfig& c) {
  auto url = parse_kafka_url(c.url);
  return url.ok() ? url->origin() : c.url;
}

}  // namespace

std::unique_ptr<WebhookSender> PublishStage::make_webhook(const WebhookConfig& hook, size_t index,
                                                          SinkPredecessors predecessors) {
  auto sender = std::make_unique<WebhookSender>(hook, index, std::move(predecessors));
  std::string attached;  // what goes with the messages, and up to what size (attach_max_mb)
  if (hook.attach_pictures || hook.attach_clips) {
    attached = fmt::format("; with their {} attached, up to {:g} MB{}",
                           hook.attach_pictures && hook.attach_clips ? "pictures and clips"
                           : hook.attach_pictures                    ? "pictures"
                                                                     : "clips",
                           static_cast<double>(attachment_limit_bytes(hook, hook.attach_clips)) / 1e6,
                           hook.attach_max_mb > 0 ? "" : " (the format's receiver's)");
  }
  VAPIPE_LOG_INFO("publish: {} receives the messages on {} ({}, at most {} waiting){}", sender->name(),
                  joined_topics(hook), queue_policy_name(hook.queue_policy), hook.max_queued, attached);
  return sender;
}

std::unique_ptr<MqttPublisher> PublishStage::make_mqtt(const MqttConfig& broker, size_t index,
                                                       SinkPredecessors predecessors) {
  auto publisher = std::make_unique<MqttPublisher>(broker, index, config_->job.name, std::move(predecessors));
  VAPIPE_LOG_INFO("publish: {} takes the messages on {} as {}<topic> ({}, at most {} waiting)", publisher->name(),
                  joined_topics(broker), broker.topic_prefix, queue_policy_name(broker.queue_policy), broker.max_queued);
  return publisher;
}

std::unique_ptr<RedisStreamsPublisher> PublishStage::make_redis(const RedisConfig& server, size_t index,
                                                                SinkPredecessors predecessors) {
  auto publisher = std::make_unique<RedisStreamsPublisher>(server, index, std::move(predecessors));
  VAPIPE_LOG_INFO("publish: {} adds the messages on {} to the streams {}<topic> ({}, at most {} waiting)",
                  publisher->name(), joined_topics(server), server.key_prefix, queue_policy_name(server.queue_policy),
                  server.max_queued);
  return publisher;
}

std::unique_ptr<KafkaPublisher> PublishStage::make_kafka(const KafkaConfig& cluster, size_t index,
                                                         SinkPredecessors predecessors) {
  auto publisher = std::make_unique<KafkaPublisher>(cluster, index, std::move(predecessors));
  VAPIPE_LOG_INFO("publish: {} produces the messages on {} to the topics {}<kind> keyed by stream ({}, at most {} "
                  "waiting)", publisher->name(), joined_topics(cluster), cluster.topic_prefix,
                  queue_policy_name(cluster.queue_policy), cluster.max_queued);
  return publisher;
}

Status PublishStage::open(const StageContext& ctx) {
  config_ = &ctx.config;
  layout_ = ctx.layout;
  watchdog_ = ctx.watchdog;
  job_start_ns_ = wall_clock_ns();
  next_progress_log_ = std::chrono::steady_clock::now() + kProgressLogPeriod;
  // The supervisor passes the job's start, so that the wall time covers start-up too.
  if (const char* s = std::getenv("VAPIPE_JOB_START_NS"); s && *s) job_start_ns_ = std::atoll(s);
  job_start_monotonic_ns_ = monotonic_clock_ns();
  if (const char* s = std::getenv("VAPIPE_JOB_START_MONOTONIC_NS"); s && *s) job_start_monotonic_ns_ = std::atoll(s);
  // A live job's reloads of publish's outputs come through its copy of the config (vapipe run's): read
  // here, and its outputs and segments' settings taken from it, so that they are those of the text
  // this process compares later reloads with (one taken as it started, between the stage's load of
  // the copy and this read, is not missed).
  if (std::optional<Result<Config>> copy = config_copy_.start(ctx.config)) {
    if (copy->ok()) {
      reloaded_config_ = std::make_unique<Config>(ctx.config);
      take_reloadable_publish_settings((*copy)->publish, reloaded_config_->publish);
      config_ = reloaded_config_.get();
    } else {
      VAPIPE_LOG_WARN("publish: {}: reloads of publish's outputs will not be taken", copy->status().message());
    }
  }
  // --resume: the results an earlier run published (kept in the JSON-lines file) count as published.
  VAPIPE_ASSIGN_OR_RETURN(std::optional<ResumePlan> plan, resume_plan_from_environment());
  resumed_ = plan.has_value();
  // Started again after it crashed, in a live job that goes on (pipeline/supervisor.h).
  const char* restart = std::getenv(kRestartReasonEnv);
  restarted_ = restart && *restart;
  if (const char* restarts = std::getenv(kJobRestartsEnv); restarts && ctx.config.job.mode == JobMode::kArchive) {
    job_restarts_ = static_cast<uint32_t>(std::strtoul(restarts, nullptr, 10));
  }
  if (restarted_) VAPIPE_LOG_WARN("publish: restarted ({}): stream counts start over", restart);
  // The publish before this one crashed while the results file refused lines: those it held are lost.
  if (restarted_ && layout_) {
    const std::string waiting_file = layout_->run_dir + "/" + kLinesWaitingFile;
    if (auto waiting = read_file_bytes(waiting_file); waiting.ok()) {
      const uint64_t lost = std::strtoull(waiting->c_str(), nullptr, 10);
      if (lost > 0) {
        jsonl_lines_lost_ += lost;
        VAPIPE_LOG_ERROR("publish: the publish before this one crashed holding about {} lines that publish.jsonl_path had "
                         "refused (a full disk?): they are not in the file (each stream's seq shows where; the bus had "
                         "them); vapipe_results_file_lines_lost_total counts them", lost);
      }
      std::error_code ec;
      std::filesystem::remove(waiting_file, ec);
    }
  }
  for (const StreamConfig& s : ctx.config.streams) {
    StreamState st;
    st.id = s.id;
    st.part_from_ns = s.from_ns;
    st.roi = s.roi;
    st.turn = s.turn ? orientation_name(*s.turn) : "";
    if (restarted_) {
      st.seq_jumps = true;
      st.counts_known = false;
    }
    if (plan && plan->streams.count(s.id)) take_earlier_progress(st, plan->streams.at(s.id));
    streams_.push_back(st);
  }
  if (plan) VAPIPE_RETURN_IF_ERROR(replay_earlier_segments(*plan));
  if (restarted_ && layout_) {
    // A reload may have changed a stream's roi or turn since the job started (its changed event went
    // out before this publish was restarted): its table entry has them, for a started event yet to come.
    if (auto table = read_job_stream_table(stream_table_path(*layout_)); table.ok() && table->has_value()) {
      for (const StreamTableEntry& e : (*table)->entries) {
        if (e.index >= streams_.size() || streams_[e.index].id != e.id) continue;
        streams_[e.index].roi = e.roi;
        streams_[e.index].turn = e.turn ? orientation_name(*e.turn) : "";
      }
    }
  }
  if (plan) {
    for (const auto& [id, p] : plan->departed) {
      StreamState st;
      st.id = id;
      take_earlier_progress(st, p);
      departed_.push_back(st);
    }
  }
  if (!ctx.config.publish.segments_pictures_dir.empty() && ctx.config.job.mode == JobMode::kLive && layout_ &&
      !picture_requester_) {
    std::error_code ec;
    std::filesystem::create_directories(layout_->run_dir, ec);
    const std::string endpoint = picture_requests_endpoint(*layout_);
    auto sender = PictureRequestSender::bind(endpoint);
    if (!sender.ok()) return sender.status().with_context("publish.segments_pictures_dir");
    picture_sender_ = std::move(sender).value();
    picture_requester_ = [this](const PictureRequest& request) {
      if (Status st = picture_sender_->send(request); !st.ok()) {
        VAPIPE_LOG_WARN("stream '{}': no picture for its '{}' segment: {}", request.stream_id, request.label, st.message());
      }
    };
    VAPIPE_LOG_INFO("publish: pictures of segments under {}", ctx.config.publish.segments_pictures_dir);
  }
  if (!ctx.config.publish.segments_pictures_dir.empty()) {
    prune_pictures();
    if (restarted_) load_picture_asks();
    if (restarted_ && ctx.config.publish.segments_clips && picture_requester_) {
      started_unix_ns_ = wall_clock_ns();
      end_old_clips_until_ = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      end_old_clips();
    }
  }
  if (!ctx.config.publish.jsonl_path.empty()) {
    // Named by the time: today's (this hour's) file, appended to, never emptied (a restarted job goes
    // on in it); the lock is on one file beside them all.
    const bool timed = jsonl_timed_ = results_path_is_timed(ctx.config.publish.jsonl_path);
    jsonl_named_at_s_ = wall_clock_ns() / 1000000000;
    jsonl_file_ = timed ? results_file_at(ctx.config.publish.jsonl_path, jsonl_named_at_s_) : ctx.config.publish.jsonl_path;
    std::filesystem::path p(jsonl_file_);
    if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
    if (timed) std::filesystem::create_directories(std::filesystem::path(results_lock_path(ctx.config.publish.jsonl_path)).parent_path());
    // Resuming appends after what the supervisor kept (it cut the rest). A restarted publish appends
    // too, after the last whole line: the crashed one may have been cut off in the middle of a line.
    // Started by hand (not by `vapipe run`, which holds it for the job): this process holds the
    // file's lock, so that no second job writes it too (pipeline/file_lock.h).
    if (!std::getenv("VAPIPE_SUPERVISOR_PID") && !jsonl_lock_.held()) {
      VAPIPE_ASSIGN_OR_RETURN(jsonl_lock_,
                              FileLock::acquire(results_lock_path(ctx.config.publish.jsonl_path), "publish.jsonl_path",
                                                ctx.config.publish.jsonl_path));
      if (!jsonl_lock_.held()) VAPIPE_LOG_WARN("publish: {}", jsonl_lock_.why_not_held());
    }
    // An archive job's fresh run empties the file first: its record is that run's (`--resume` goes on
    // in it instead). A live job's file is appended to across its starts, as a log is: a camera
    // service restarted (a deploy, a reboot) must not wipe what it recorded. What a killed job or a
    // crashed publish left of a line is cut first. Every run then appends (O_APPEND), so that a file
    // emptied under a running job (logrotate's copytruncate, `: > results.jsonl`) is written on from
    // its start, not at the old offset after a hole of zero bytes that no JSON reader takes.
    const bool live = ctx.config.job.mode == JobMode::kLive;
    if (!resumed_ && !restarted_ && !timed && !live) {
      std::ofstream(p, std::ios::out | std::ios::trunc).close();
    } else if (!resumed_) {
      cut_partial_last_line(p.string());
    }
    std::error_code size_ec;
    if (const auto earlier = std::filesystem::file_size(p, size_ec); live && !restarted_ && !size_ec && earlier > 0) {
      VAPIPE_LOG_INFO("publish: results go on after the {} bytes earlier runs wrote to {} (a live job's file is kept "
                      "across its starts)", earlier, p.string());
    }
    auto file = ResultsFile::open(p.string());
    if (!file.ok()) return file.status().with_context("publish.jsonl_path");
    jsonl_ = std::move(file).value();
    if (timed) prune_results_files();
    if (!live && !timed) {
      // The sinks' delivery marks: a fresh run's start over with its file.
      sink_marks_path_ = sink_marks_path(p.string());
      if (resumed_) {
        auto lines = count_file_lines(p.string());
        if (!lines.ok()) return lines.status().with_context("publish.jsonl_path");
        jsonl_lines_ = *lines;
      } else {
        std::error_code ec;
        std::filesystem::remove(sink_marks_path_, ec);
      }
    }
  }
  if (factory_) {
    VAPIPE_ASSIGN_OR_RETURN(bus_, factory_(ctx));
  } else {
    ZmqBusOptions o;
    o.endpoint = ctx.config.publish.endpoint;
    o.lossless = ctx.config.job.mode == JobMode::kArchive;
    // The wait is for the job's start; a restarted publish's subscribers reconnect by themselves.
    o.wait_for_subscribers = restarted_ ? 0 : ctx.config.publish.wait_for_subscribers;
    o.wait_timeout_s = ctx.config.publish.wait_timeout_s;
    o.curve = ctx.config.publish.curve_keys;
    o.curve_clients = ctx.config.publish.curve_clients;
    o.curve_clients_source = ctx.config.publish.curve_authorized_keys;
    VAPIPE_ASSIGN_OR_RETURN(bus_, make_zmq_bus_publisher(o, ctx.stop_requested));
  }
  stop_requested_ = ctx.stop_requested;
  for (size_t i = 0; i < config_->publish.webhooks.size(); ++i) {
    webhooks_.push_back(make_webhook(config_->publish.webhooks[i], i, {}));
  }
  for (size_t i = 0; i < config_->publish.mqtt.size(); ++i) {
    mqtt_.push_back(make_mqtt(config_->publish.mqtt[i], i, {}));
  }
  for (size_t i = 0; i < config_->publish.redis.size(); ++i) {
    redis_.push_back(make_redis(config_->publish.redis[i], i, {}));
  }
  for (size_t i = 0; i < config_->publish.kafka.size(); ++i) {
    kafka_.push_back(make_kafka(config_->publish.kafka[i], i, {}));
  }
  sink_secrets_ = has_sink_secrets(config_->publish);
  if (sink_secrets_) check_sink_secrets();  // their files as the config read them
  if (!sink_marks_path_.empty()) VAPIPE_RETURN_IF_ERROR(send_sinks_what_they_missed());
  // A departed stream that had not ended cannot go on (its source is no longer in the config): its
  // end says so once, so that the file's record of it is whole.
  for (StreamState& st : departed_) {
    if (st.ended_earlier) continue;
    Message end;
    end.kind = MessageKind::kStreamEnd;
    end.env.stream_id = st.id;
    end.event.message = kRemovedFromConfig;
    end.event.uri = st.earlier_uri;
    end.event.frames = st.results;  // as an end that ingest says: every frame it emitted, each with its result
    st.status = "removed";
    st.ended = true;
    st.ended_ns = wall_clock_ns();  // (listed on /metrics for a while from now, as one a reload removed)
    VAPIPE_RETURN_IF_ERROR(publish(event_topic(st.id), event_json(end, wall_clock_ns())));
  }
  if (!ctx.config.publish.curve_authorized_keys.empty()) check_authorized_keys();  // its time at start
  const PublishConfig& pc = ctx.config.publish;
  // A bus open beyond this host without CURVE is often meant (a LAN's subscribers): said, not warned.
  const std::string security =
      pc.curve_keys.empty()
          ? (open_to_other_hosts(pc.endpoint) ? " (open to every host that can reach this one, unencrypted: "
                                                "publish.curve_secret_key and curve_authorized_keys encrypt it and "
                                                "admit only listed subscribers)"
                                              : std::string())
      : pc.curve_clients.empty()
          ? " (CURVE, server public key " + pc.curve_keys.public_key + ")"
          : " (CURVE, server public key " + pc.curve_keys.public_key + ", " + std::to_string(pc.curve_clients.size()) +
                " authorized subscriber key(s))";
  VAPIPE_LOG_INFO("publish: results on {}{}{}", pc.endpoint, security,
                  jsonl_.active() ? " and " + pc.jsonl_path : std::string());
  if (!ctx.config.publish.metrics_address.empty()) {
    VAPIPE_ASSIGN_OR_RETURN(metrics_server_,
                            MetricsServer::start(ctx.config.publish.metrics_address,
                                                 [run_dir = layout_ ? layout_->run_dir : std::string()](
                                                     std::optional<std::chrono::milliseconds> wait,
                                                     const std::atomic<bool>& stopping) {
                                                   return request_stream_reload(run_dir, wait, stopping);
                                                 },
                                                 ctx.config.publish.metrics_token,
                                                 MetricsTls{ctx.config.publish.metrics_tls_cert_file,
                                                            ctx.config.publish.metrics_tls_key_file,
                                                            ctx.config.publish.metrics_tls_client_ca_file},
                                                 ctx.config.publish.segments_pictures_dir));
    update_metrics_snapshot();
    VAPIPE_LOG_INFO("publish: metrics on {}://{}:{}/metrics, health on /healthz{}", metrics_server_->scheme(),
                    metrics_server_->host(), metrics_server_->port(),
                    !ctx.config.publish.metrics_token.empty()
                        ? " (bearer token from " + ctx.config.publish.metrics_token_file + ")"
                    : ctx.config.publish.metrics_tls_client_ca_file.empty() &&
                            open_to_other_hosts("tcp://" + ctx.config.publish.metrics_address)
                        ? " (open to every host that can reach this one, without a token: anyone there can read "
                          "/metrics and the streams on /healthz, and POST /-/reload; publish.metrics_token_file "
                          "asks for one)"
                        : std::string());
  }
  return Status::Ok();
}

void cut_partial_last_line(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size == 0) return;
  std::ifstream in(path, std::ios::binary);
  // The last newline, looking back from the end a block at a time.
  uint64_t end = size;
  std::string block;
  while (end > 0) {
    const uint64_t begin = end > 65536 ? end - 65536 : 0;
    block.resize(end - begin);
    in.seekg(static_cast<std::streamoff>(begin));
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    if (!in) return;
    const auto newline = block.rfind('\n');
    if (newline != std::string::npos) {
      end = begin + newline + 1;
      break;
    }
    end = begin;
  }
  if (end == size) return;
  std::filesystem::resize_file(path, end, ec);
  if (ec) {
    VAPIPE_LOG_ERROR("publish: {}: cannot cut its partial last line: {}", path, ec.message());
  } else {
    VAPIPE_LOG_WARN("publish: {}: cut its partial last line ({} bytes, left by a publish killed as it wrote them)",
                    path, size - end);
  }
}

MetricsServer::ReloadReply request_stream_reload(const std::string& run_dir,
                                                 std::optional<std::chrono::milliseconds> wait,
                                                 const std::atomic<bool>& stopping) {
  using Reply = MetricsServer::ReloadReply;
  // The supervisor that started this stage reloads; it is our parent, and says so in our environment.
  const char* supervisor = std::getenv("VAPIPE_SUPERVISOR_PID");
  const pid_t parent = ::getppid();
  if (!supervisor || std::atoll(supervisor) != static_cast<long long>(parent)) {
    return Reply{409, "this publish stage was not started by `vapipe run`: nothing to reload\n"};
  }
  VAPIPE_LOG_INFO("publish: reload requested over HTTP (POST /-/reload)");
  if (!wait || run_dir.empty()) {
    if (::kill(parent, SIGHUP) != 0) {
      return Reply{500, std::string("cannot signal vapipe run: ") + std::strerror(errno) + "\n"};
    }
    return Reply{202, "reload requested: the job's log, /healthz and /metrics say what became of it\n"};
  }
  auto answer = reload_and_wait(run_dir, parent, *wait, &stopping);
  if (!answer.ok()) return Reply{500, answer.status().message() + "\n"};
  const std::string text = "the job " + answer->said + "\n" + answer->lanes;
  switch (answer->verdict) {
    case ReloadAnswer::Verdict::kTaken:
      return Reply{200, text};
    case ReloadAnswer::Verdict::kRefused:
      return Reply{422, text};
    case ReloadAnswer::Verdict::kModelNotUsed:
      return Reply{500, text};
    case ReloadAnswer::Verdict::kNoAnswer:
    case ReloadAnswer::Verdict::kModelNotYetTaken:
      if (stopping.load()) return Reply{503, "the job is stopping: " + text};
      return Reply{504, text};
  }
  return Reply{500, text};
}

void PublishStage::take_earlier_progress(StreamState& st, const StreamProgress& p) {
  st.results = st.earlier_results = st.next_seq = p.results;
  st.frame_errors = p.frame_errors;
  st.damaged = p.damaged;
  st.labels = p.labels;
  st.status = !p.ended.empty() ? p.ended : p.started ? "running" : "pending";
  st.message = p.message;
  st.started_earlier = p.started;
  st.earlier_uri = p.uri;
  // Its media's length, as its started event said (the summary's media_s of a stream that an earlier
  // run finished: null before 2026-12-07).
  if (const auto duration_ns = static_cast<int64_t>(p.duration_ms * 1e6); p.duration_ms > 0 && duration_ns > st.part_from_ns) {
    st.media_ns = duration_ns - st.part_from_ns;
  }
  st.ended_earlier = !p.ended.empty();
  if (p.last_pts_ms >= 0) {
    st.position_ns = st.earlier_position_ns =
        std::max<int64_t>(0, static_cast<int64_t>(p.last_pts_ms * 1e6) - st.part_from_ns);
  }
  if (p.ended == "failed") ++failed_streams_;
}

// --resume: each stream's label runs as the kept results leave them, read again from the file through
// the same rules (nothing published: their `began` and `ended` are in the file). A segment open where the
// earlier run stopped goes on (its `ended`, which the stop published, was cut with the stop): before
// 2026-12-07 the resumed run began it again after segments_min_frames new frames, and the file said
// "ended" and "began" of a label that never changed, or "began" twice.
Status PublishStage::replay_earlier_segments(const ResumePlan& plan) {
  if (config_->publish.segments_min_frames == 0 || config_->publish.jsonl_path.empty() || plan.keep_bytes == 0) {
    return Status::Ok();
  }
  std::ifstream in(config_->publish.jsonl_path, std::ios::binary);
  if (!in) return Status::Ok();  // (the plan was read from it: gone since, nothing kept to follow)
  std::unordered_map<std::string, StreamState*> by_id;
  for (StreamState& st : streams_) {
    if (!st.ended_earlier) by_id[st.id] = &st;  // (an ended stream's segments ended with it)
  }
  replaying_ = true;
  uint64_t offset = 0, replayed = 0;
  std::string line;
  while (offset < plan.keep_bytes && std::getline(in, line)) {
    offset += line.size() + 1;
    if (line.find("\"results/") == std::string::npos) continue;  // (most lines are results; no parse for others)
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("payload") || !j["payload"].is_object()) continue;
    const std::string topic = text_field(j, "topic");
    if (topic.rfind("results/", 0) != 0) continue;
    auto st = by_id.find(topic.substr(8));
    if (st == by_id.end()) continue;
    const nlohmann::json& r = j["payload"];
    Message m;
    m.kind = MessageKind::kResult;
    m.env.stream_id = st->first;
    m.env.seq = count_field(r, "seq").value_or(0);
    auto ns = [&](const char* key) {
      return r.contains(key) && r[key].is_number() ? static_cast<int64_t>(std::llround(r[key].get<double>() * 1e6)) : -1;
    };
    m.env.pts_ns = ns("pts_ms");
    m.env.capture_ns = std::max<int64_t>(0, ns("capture_unix_ms"));
    m.env.camera_ns = ns("camera_unix_ms");
    m.env.damaged = r.contains("damaged") && r["damaged"].is_boolean() && r["damaged"].get<bool>();
    if (r.contains("error") && r["error"].is_string()) m.error = r["error"].get<std::string>();
    if (r.contains("top_k") && r["top_k"].is_array()) {
      for (const nlohmann::json& c : r["top_k"]) {
        if (!c.is_object() || !c.contains("score") || !c["score"].is_number()) continue;
        ClassScore score;
        score.label = text_field(c, "label");
        score.score = c["score"].get<float>();
        m.prediction.top_k.push_back(std::move(score));
      }
    }
    VAPIPE_RETURN_IF_ERROR(follow_segments(*st->second, m));
    ++replayed;
  }
  replaying_ = false;
  VAPIPE_LOG_INFO("publish: the label runs of {} earlier results read again, so that segments open at the cut go on",
                  replayed);
  return Status::Ok();
}

JobMetrics PublishStage::metrics() const {
  JobMetrics m;
  m.job = config_ ? config_->job.name : "";
  m.mode = config_ && config_->job.mode == JobMode::kLive ? "live" : "archive";
  m.start_unix_s = static_cast<double>(job_start_ns_) / 1e9;
  m.job_restarts = job_restarts_;
  m.now_unix_s = static_cast<double>(wall_clock_ns()) / 1e9;
  m.now_monotonic_s = static_cast<double>(monotonic_clock_ns()) / 1e9;
  m.start_monotonic_s = static_cast<double>(job_start_monotonic_ns_) / 1e9;
  m.segments = config_ && config_->publish.segments_min_frames > 0;
  m.segment_pictures = config_ && !config_->publish.segments_pictures_dir.empty();
  m.segment_clips = config_ && config_->publish.segments_clips;
  for (const StreamState& st : all_streams()) {
    StreamMetrics s;
    s.id = st.id;
    s.state = st.status;
    s.results = st.results;
    s.frame_errors = st.frame_errors;
    s.damaged = st.damaged;
    s.pictures = st.pictures;
    s.pictures_failed = st.pictures_failed;
    s.clips = st.clips;
    s.clips_failed = st.clips_failed;
    s.gaps = st.gaps;
    s.dropped = st.dropped;
    s.continuity_errors = st.continuity_errors;
    s.undecoded = st.undecoded;
    s.rtp_lost = st.rtp_lost;
    s.rtp_received = st.rtp_received;
    s.reconnects = st.reconnects;
    s.restarts = st.restarts;
    s.comebacks = st.comebacks;
    s.media_s = st.media_ns > 0 ? static_cast<double>(st.media_ns) / 1e9 : -1.0;
    s.position_s = static_cast<double>(st.position_ns) / 1e9;
    s.earlier_position_s = static_cast<double>(st.earlier_position_ns) / 1e9;
    s.ended = st.ended || st.ended_earlier;
    s.ended_unix_s = static_cast<double>(st.ended_ns) / 1e9;
    s.latency_sum_s = st.latency_sum_ms / 1000.0;
    s.latency_count = st.results - st.earlier_results;
    s.latency_max_s = st.latency_max_ms / 1000.0;
    s.last_result_unix_s = static_cast<double>(st.last_ns) / 1e9;
    auto open_segment = [&s](const StreamState::LabelRun& g) {
      if (g.frames > 0) s.open_segments.push_back({g.label, g.start_capture_ms / 1000.0, g.picture_url_path});
    };
    open_segment(st.segment);
    for (const auto& [label, track] : st.tracks) open_segment(track.segment);
    m.streams.push_back(std::move(s));
  }
  if (layout_) m.stages = read_stage_stats(layout_->run_dir);
  m.watches_folders = config_ && config_->watches_folders();
  if (m.watches_folders) m.ended_streams_listed_for_s = kEndedStreamsListedForS;
  if (layout_ && m.watches_folders) m.watched_folders = read_folder_watch_status(folder_watch_status_path(layout_->run_dir));
  if (layout_ && config_ && config_->job.mode == JobMode::kLive) {
    m.reload_running_since_unix_s = read_reload_mark(*layout_);
    m.last_reload = read_reload_outcome(layout_->run_dir);
  }
  if (jsonl_.active()) {
    ResultsFileHealth f;
    f.path = jsonl_.path();
    f.writable = !jsonl_refusal_;
    if (jsonl_refusal_) {
      f.error = jsonl_refusal_->error;
      f.refused_since_unix_s = static_cast<double>(jsonl_refusal_->since_ns) / 1e9;
      f.lines_waiting = jsonl_.buffered_lines();
    }
    f.lines_lost = jsonl_lines_lost_;
    m.results_file = std::move(f);
  }
  for (const auto& hook : webhooks_) m.webhooks.push_back(hook->stats());
  for (const auto& broker : mqtt_) m.mqtt.push_back(broker->stats());
  for (const auto& server : redis_) m.redis.push_back(server->stats());
  for (const auto& cluster : kafka_) m.kafka.push_back(cluster->stats());
  return m;
}

void PublishStage::refresh_live_drops() {
  if (!layout_) return;
  std::unordered_map<std::string, StreamState*> by_id;
  for (StreamState& st : streams_) by_id[st.id] = &st;
  // Counts from each stream's current ingest process, on top of its base (rebase_ingest_counts), never
  // lower than what its events said. Not for a stream that ended: ingest's count is then its next
  // run's (a reload listed it again), which its `started` event, behind the frames still on their way,
  // has not rebased yet: taken on the old base, then the new one, its drops were counted twice (145
  // for 90 frames that never came).
  auto take = [&](const std::vector<std::pair<std::string, uint64_t>>& counts, uint64_t StreamState::*total,
                  uint64_t StreamState::*base) {
    for (const auto& [id, n] : counts) {
      if (auto it = by_id.find(id); it != by_id.end()) {
        StreamState& st = *it->second;
        if (st.ended) continue;
        st.*total = std::max(st.*total, st.*base + n);
      }
    }
  };
  for (const StageStatsSnapshot& snap : read_stage_stats(layout_->run_dir)) {
    take(snap.stream_dropped, &StreamState::dropped, &StreamState::dropped_base);
    take(snap.stream_continuity_errors, &StreamState::continuity_errors, &StreamState::continuity_base);
    take(snap.stream_undecoded, &StreamState::undecoded, &StreamState::undecoded_base);
    take(snap.stream_rtp_lost, &StreamState::rtp_lost, &StreamState::rtp_lost_base);
    take(snap.stream_rtp_received, &StreamState::rtp_received, &StreamState::rtp_received_base);
  }
}

void PublishStage::watch_stalls() {
  JobMetrics m;
  m.now_unix_s = static_cast<double>(wall_clock_ns()) / 1e9;
  m.now_monotonic_s = static_cast<double>(monotonic_clock_ns()) / 1e9;
  m.stages = read_stage_stats(layout_->run_dir);
  say_stalls(stalled_stages(m));
}

// (From the snapshot /healthz serves, where there is one: a stall it says is in the log first.)
void PublishStage::say_stalls(const std::vector<StalledStage>& now_stalled) {
  const SteadyTime now = std::chrono::steady_clock::now();
  next_stall_check_ = now + std::chrono::seconds(1);
  std::map<std::pair<std::string, uint32_t>, SteadyTime> stalled;
  for (const StalledStage& s : now_stalled) {
    const auto key = std::make_pair(s.stage, s.lane);
    if (auto said = stalled_said_.find(key); said != stalled_said_.end()) {
      stalled[key] = said->second;
      continue;
    }
    stalled[key] = now;
    VAPIPE_LOG_WARN("stage {} (lane {}) has stalled: {}; /healthz answers 503 until it moves again", s.stage, s.lane,
                    s.why);
  }
  for (const auto& [key, since] : stalled_said_) {
    if (stalled.count(key)) continue;
    VAPIPE_LOG_INFO("stage {} (lane {}) is no longer stalled, {:.0f} s after it was said to be (it moves again, or "
                    "was restarted)", key.first, key.second, std::chrono::duration<double>(now - since).count());
  }
  stalled_said_ = std::move(stalled);
}

void PublishStage::update_metrics_snapshot() {
  if (!metrics_server_) return;
  check_metrics_token();
  refresh_live_drops();
  const JobMetrics m = metrics();
  if (layout_) say_stalls(stalled_stages(m));
  const nlohmann::json health = health_json(m);
  metrics_server_->update(prometheus_text(m), json_text(health), health.value("status", "") == "stalled");
  next_snapshot_ = std::chrono::steady_clock::now() + std::chrono::seconds(1);
}

// publish.metrics_token_file, rewritten while the job runs (a rotated Secret): the new token from the
// next request on. A file that no longer holds a valid token keeps the one in force (logged).
void PublishStage::check_metrics_token() {
  const std::string& path = config_->publish.metrics_token_file;
  if (path.empty()) return;
  const std::string identity = file_identity(path);
  if (identity == metrics_token_identity_) return;
  const bool first = !metrics_token_identity_.has_value();
  metrics_token_identity_ = identity;
  if (first) return;  // the token the config was loaded with
  auto token = read_metrics_token_file(path);
  if (!token.ok()) {
    VAPIPE_LOG_ERROR("publish: {}; the metrics token in force stays", token.status().message());
    return;
  }
  metrics_server_->set_bearer_token(*token);
  VAPIPE_LOG_INFO("publish: the metrics token from {} changed: requests need the new one from now on", path);
}

void PublishStage::check_sink_secrets() {
  next_sink_secrets_check_ = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  sink_secret_identities_.resize(webhooks_.size() + mqtt_.size() + 2 * redis_.size() + kafka_.size());
  // Whether the file at `path` (slot i of the identities) was rewritten since it was last looked at.
  auto rewritten = [&](size_t i, const std::string& path) {
    if (path.empty()) return false;
    const std::string identity = file_identity(path);
    if (identity == sink_secret_identities_[i]) return false;
    const bool first = !sink_secret_identities_[i].has_value();
    sink_secret_identities_[i] = identity;
    return !first;  // (the first look: the secret the config was loaded with)
  };
  for (size_t i = 0; i < webhooks_.size(); ++i) {
    const std::string& path = config_->publish.webhooks[i].token_file;
    if (!rewritten(i, path)) continue;
    auto token = read_webhook_token_file(path);
    if (!token.ok()) {
      VAPIPE_LOG_ERROR("publish: {}: {}; the token in force stays", webhooks_[i]->name(), token.status().message());
      continue;
    }
    webhooks_[i]->set_token(*token);
    VAPIPE_LOG_INFO("publish: {}: the token in {} changed: requests carry the new one from now on",
                    webhooks_[i]->name(), path);
  }
  for (size_t i = 0; i < mqtt_.size(); ++i) {
    const std::string& path = config_->publish.mqtt[i].password_file;
    if (!rewritten(webhooks_.size() + i, path)) continue;
    auto password = read_password_file(path);
    if (!password.ok()) {
      VAPIPE_LOG_ERROR("publish: {}: {}; the password in force stays", mqtt_[i]->name(), password.status().message());
      continue;
    }
    mqtt_[i]->set_password(*password);
    VAPIPE_LOG_INFO("publish: {}: the password in {} changed: the next connection uses the new one",
                    mqtt_[i]->name(), path);
  }
  for (size_t i = 0; i < redis_.size(); ++i) {
    const std::string& path = config_->publish.redis[i].password_file;
    if (!rewritten(webhooks_.size() + mqtt_.size() + i, path)) continue;
    auto password = read_password_file(path);
    if (!password.ok()) {
      VAPIPE_LOG_ERROR("publish: {}: {}; the password in force stays", redis_[i]->name(), password.status().message());
      continue;
    }
    redis_[i]->set_password(*password);
    VAPIPE_LOG_INFO("publish: {}: the password in {} changed: the next connection uses the new one",
                    redis_[i]->name(), path);
  }
  for (size_t i = 0; i < redis_.size(); ++i) {
    const std::string& path = config_->publish.redis[i].sentinel_password_file;
    if (!rewritten(webhooks_.size() + mqtt_.size() + redis_.size() + i, path)) continue;
    auto password = read_password_file(path);
    if (!password.ok()) {
      VAPIPE_LOG_ERROR("publish: {}: {}; the sentinels' password in force stays", redis_[i]->name(),
                       password.status().message());
      continue;
    }
    redis_[i]->set_sentinel_password(*password);
    VAPIPE_LOG_INFO("publish: {}: the sentinels' password in {} changed: the next question to a sentinel uses the "
                    "new one", redis_[i]->name(), path);
  }
  for (size_t i = 0; i < kafka_.size(); ++i) {
    const std::string& path = config_->publish.kafka[i].password_file;
    if (!rewritten(webhooks_.size() + mqtt_.size() + 2 * redis_.size() + i, path)) continue;
    auto password = read_password_file(path);
    if (!password.ok()) {
      VAPIPE_LOG_ERROR("publish: {}: {}; the password in force stays", kafka_[i]->name(), password.status().message());
      continue;
    }
    kafka_[i]->set_password(*password);
    VAPIPE_LOG_INFO("publish: {}: the password in {} changed: the next sign-in uses the new one", kafka_[i]->name(),
                    path);
  }
}

void PublishStage::check_authorized_keys() {
  next_keys_check_ = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  const std::string& path = config_->publish.curve_authorized_keys;
  const std::string identity = file_identity(path);
  if (identity == authorized_keys_identity_) return;
  const bool first = !authorized_keys_identity_.has_value();
  authorized_keys_identity_ = identity;
  if (first) return;  // the list the bus started with
  auto keys = read_curve_public_key_file(path);
  if (!keys.ok()) {
    VAPIPE_LOG_ERROR("publish: {}; the subscriber keys in force stay", keys.status().message());
    return;
  }
  if (Status s = bus_->set_authorized_subscribers(*keys); !s.ok()) {
    VAPIPE_LOG_ERROR("publish: {}", s.message());
    return;
  }
  VAPIPE_LOG_INFO("publish: {} authorized subscriber key(s) from {}, changed (new subscribers only)", keys->size(),
                  path);
}

void PublishStage::log_progress() {
  next_progress_log_ = std::chrono::steady_clock::now() + kProgressLogPeriod;
  const JobMetrics m = metrics();
  const JobProgress p = job_progress(m);
  if (p.ratio < 0) return;
  std::string untimed;
  if (p.streams_estimated > 0) {
    untimed = "; " + std::to_string(p.streams_estimated) + " streams not opened yet counted at the average length";
  }
  if (p.streams_timed + p.streams_estimated < m.streams.size()) {
    untimed += "; " + std::to_string(m.streams.size() - p.streams_timed - p.streams_estimated) +
               " streams of unknown length not counted";
  }
  const std::string eta = p.eta_s >= 0 ? "; about " + human_duration(p.eta_s) + " left at " +
                                             fmt::format("{:.1f}", p.media_per_s) + "x real time"
                                       : std::string();
  std::string quiet;  // streams stuck (a file's read that has not returned): the pace does not show them
  for (size_t k = 0; k < p.quiet.size() && k < 3; ++k) {
    const auto& [id, for_s] = p.quiet[k];
    quiet += fmt::format("{}'{}' for {}", k ? ", " : "; no result from ", id, human_duration(for_s));
  }
  if (p.quiet.size() > 3) quiet += fmt::format(" and {} more", p.quiet.size() - 3);
  const std::string line = fmt::format("progress: {:.1f}% of {} of media, {} of {} streams ended{}{}{}", 100.0 * p.ratio,
                                       human_duration(p.media_s), p.streams_ended, m.streams.size(), eta, untimed, quiet);
  // An idle job that watches folders (every file so far classified) would say the same line for hours.
  if (config_->watches_folders() && line == last_progress_line_) return;
  last_progress_line_ = line;
  VAPIPE_LOG_INFO("{}", line);
}

Status PublishStage::on_deadline(Emitter& /*out*/) {
  const SteadyTime now = std::chrono::steady_clock::now();
  if ((jsonl_flush_due_ && now >= *jsonl_flush_due_) || (jsonl_refusal_ && now >= next_jsonl_retry_)) {
    VAPIPE_RETURN_IF_ERROR(flush_jsonl());
  }
  update_metrics_snapshot();  // (without a metrics server: nothing)
  if (!sink_marks_path_.empty() && now >= next_sink_marks_write_) write_sink_marks();
  if (!metrics_server_ && layout_ && now >= next_stall_check_) watch_stalls();  // (else with the snapshot)
  if (config_->job.mode == JobMode::kArchive && std::chrono::steady_clock::now() >= next_progress_log_) log_progress();
  if (!config_->publish.curve_authorized_keys.empty() && std::chrono::steady_clock::now() >= next_keys_check_) {
    check_authorized_keys();
  }
  if (sink_secrets_ && std::chrono::steady_clock::now() >= next_sink_secrets_check_) check_sink_secrets();
  if (config_copy_.due(std::chrono::steady_clock::now())) check_config_copy();
  if (!retiring_sinks_.empty()) reap_retired_sinks(false);
  for (StreamState& st : streams_) {  // lost cameras not back within segments_reconnect_grace_s
    if (st.segments_held_until && now >= *st.segments_held_until) {
      VAPIPE_LOG_INFO("stream '{}': not back within publish.segments_reconnect_grace_s ({} s): its segments end",
                      st.id, config_->publish.segments_reconnect_grace_s);
      VAPIPE_RETURN_IF_ERROR(end_segment(st));
    }
  }
  if (!config_->publish.segments_pictures_dir.empty()) {
    VAPIPE_RETURN_IF_ERROR(say_missing_pictures());
    if (config_->publish.segments_clips) {
      VAPIPE_RETURN_IF_ERROR(say_missing_clips());
      end_old_clips();
    }
    // Kept days are a retention rule (camera pictures of people): older ones go on time, whether or not
    // new pictures come.
    if (now >= next_pictures_prune_) prune_pictures();
  }
  return Status::Ok();
}

std::optional<SteadyTime> PublishStage::next_deadline() const {
  std::optional<SteadyTime> next;
  if (metrics_server_) next = next_snapshot_;
  if (layout_ && !metrics_server_) next = next ? std::min(*next, next_stall_check_) : next_stall_check_;
  if (config_ && config_->job.mode == JobMode::kArchive) next = next ? std::min(*next, next_progress_log_) : next_progress_log_;
  if (config_ && !config_->publish.curve_authorized_keys.empty()) {
    next = next ? std::min(*next, next_keys_check_) : next_keys_check_;
  }
  if (sink_secrets_) next = next ? std::min(*next, next_sink_secrets_check_) : next_sink_secrets_check_;
  if (config_copy_.followed()) next = next ? std::min(*next, config_copy_.next_look()) : config_copy_.next_look();
  if (!retiring_sinks_.empty()) {  // joined soon after they stop
    const SteadyTime again = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    next = next ? std::min(*next, again) : again;
  }
  if (jsonl_flush_due_) next = next ? std::min(*next, *jsonl_flush_due_) : *jsonl_flush_due_;
  if (!sink_marks_path_.empty() && (!webhooks_.empty() || !mqtt_.empty() || !redis_.empty() || !kafka_.empty())) {
    next = next ? std::min(*next, next_sink_marks_write_) : next_sink_marks_write_;
  }
  if (jsonl_refusal_) next = next ? std::min(*next, next_jsonl_retry_) : next_jsonl_retry_;
  for (const StreamState& st : streams_) {
    if (st.segments_held_until) next = next ? std::min(*next, *st.segments_held_until) : *st.segments_held_until;
  }
  if (config_ && !config_->publish.segments_pictures_dir.empty()) {
    if (const std::optional<SteadyTime> picture = next_missing_picture()) next = next ? std::min(*next, *picture) : *picture;
    if (const std::optional<SteadyTime> clip = next_missing_clip()) next = next ? std::min(*next, *clip) : *clip;
    if (end_old_clips_until_) {  // once a second meanwhile
      const SteadyTime again = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      next = next ? std::min(*next, again) : again;
    }
    if (config_->publish.segments_pictures_keep_days > 0) {
      next = next ? std::min(*next, next_pictures_prune_) : next_pictures_prune_;
    }
  }
  return next;
}

Status PublishStage::flush_jsonl() {
  jsonl_flush_due_.reset();
  // The file deleted or moved under the job: written again, or followed (results_file.h).
  if (const std::string moved = jsonl_.follow_path(config_->job.mode == JobMode::kLive); !moved.empty()) {
    VAPIPE_LOG_WARN("publish: publish.jsonl_path {}", moved);
  }
  const Status written = jsonl_.flush();
  if (!written.ok()) return jsonl_refused(written);
  if (jsonl_.buffered_lines() == 0) send_waiting_to_sinks();
  if (jsonl_refusal_) {
    const double for_s = static_cast<double>(wall_clock_ns() - jsonl_refusal_->since_ns) / 1e9;
    const uint64_t lost = jsonl_lines_lost_ - jsonl_refusal_->lost_before;
    VAPIPE_LOG_WARN("publish: publish.jsonl_path {} takes lines again after {}; the lines kept for it meanwhile are "
                    "written{}", jsonl_.path(), human_duration(for_s),
                    lost == 0 ? std::string(": none was lost")
                              : ", and the " + std::to_string(lost) + " oldest of them were not recorded (each stream's " +
                                    "seq shows where; the bus had them all)");
    jsonl_refusal_.reset();
    if (layout_) {
      std::error_code ec;
      std::filesystem::remove(layout_->run_dir + "/" + kLinesWaitingFile, ec);
    }
  }
  return Status::Ok();
}

Status PublishStage::jsonl_refused(const Status& why) {
  if (config_->job.mode == JobMode::kArchive) {
    jsonl_unwritable_ = true;
    // The stage fails without its close(): the messages of the lines the file took reach the sinks
    // first, within a stop's grace (a --resume sends the sinks what comes after the file's last line
    // only; they were dropped with the process, found 2026-12-07).
    const uint64_t in_file = jsonl_lines_ - std::min<uint64_t>(jsonl_lines_, jsonl_.buffered_lines());
    std::vector<WaitingForFile> waiting;
    waiting.swap(sinks_waiting_for_file_);
    for (const WaitingForFile& w : waiting) {
      if (w.file_line <= in_file) send_to_sinks(w.topic, w.payload, json_text(w.payload), w.file_line);
    }
    finish_sinks();
    write_sink_marks();
    if (jsonl_.lost_with_deleted_file()) {
      return Aborted("publish.jsonl_path " + why.message() + ": the results from here on would not be recorded, so "
                     "the job stops; those so far went with the deleted file: make its folder writable, then run the "
                     "job again (`--resume` starts it from its first frame, the file being gone)");
    }
    return Aborted("publish.jsonl_path " + why.message() + ": the results from here on would not be recorded, so the " +
                   "job stops; free some space (or fix the file's disk), then `vapipe run --resume` goes on from its " +
                   "last complete line");
  }
  // A live job: the cameras' results go on to the bus (the alerts matter more than their record); the
  // file gets what it missed once it takes lines again, up to kJsonlBacklogBytes of it.
  next_jsonl_retry_ = std::chrono::steady_clock::now() + jsonl_retry_period_;
  if (!jsonl_refusal_) {
    jsonl_refusal_ = JsonlRefusal{why.message(), wall_clock_ns(), jsonl_lines_lost_};
    VAPIPE_LOG_ERROR("publish: publish.jsonl_path {}: results go on to the bus, and the file's lines are kept for it "
                     "(up to {} MB, then the oldest are dropped and counted) and written once it takes them again "
                     "(tried every {}); free some space (or fix the file's disk)",
                     why.message(), fmt::format("{:.1f}", jsonl_backlog_bytes_ / 1048576.0),
                     human_duration(jsonl_retry_period_.count() / 1000.0));
  } else if (jsonl_refusal_->error != why.message()) {
    VAPIPE_LOG_ERROR("publish: publish.jsonl_path {}: its lines are still kept for it", why.message());
    jsonl_refusal_->error = why.message();
  }
  keep_jsonl_backlog();
  note_lines_waiting(true);
  return Status::Ok();
}

// How many wait, where a publish started again after this one crashed finds it: they are lost with this
// process, and that one must not say "none was lost" of its own wait (found 2026-12-07). At most once a
// second as lines come, and at each try of the file.
void PublishStage::note_lines_waiting(bool now) {
  if (!layout_) return;
  const auto at = std::chrono::steady_clock::now();
  if (!now && at < next_lines_waiting_note_) return;
  next_lines_waiting_note_ = at + std::chrono::seconds(1);
  (void)write_file_atomically(layout_->run_dir + "/" + kLinesWaitingFile, std::to_string(jsonl_.buffered_lines()), 0644);
}

void PublishStage::keep_jsonl_backlog() {
  if (jsonl_.buffered_bytes() <= jsonl_backlog_bytes_) return;
  // An eighth more than the excess at a time: the kept lines move in memory once per 8 MB, not per line.
  const uint64_t dropped = jsonl_.drop_oldest(jsonl_backlog_bytes_ - jsonl_backlog_bytes_ / 8);
  if (jsonl_lines_lost_ == jsonl_refusal_->lost_before) {
    VAPIPE_LOG_ERROR("publish: publish.jsonl_path {} has refused lines for {}: {} MB of them are kept, and the oldest "
                     "are now dropped (vapipe_results_file_lines_lost_total counts them)", jsonl_.path(),
                     human_duration(static_cast<double>(wall_clock_ns() - jsonl_refusal_->since_ns) / 1e9),
                     fmt::format("{:.1f}", jsonl_backlog_bytes_ / 1048576.0));
  }
  jsonl_lines_lost_ += dropped;
}

// publish.jsonl_path named by the time: when the local clock enters a new period (a new day), what was
// written goes out to the old file and the lines from here on to the new one.
Status PublishStage::follow_results_clock() {
  if (!jsonl_timed_) return Status::Ok();  // a plain path: nothing read per line
  const int64_t now_s = wall_clock_ns() / 1000000000;
  if (now_s == jsonl_named_at_s_) return Status::Ok();
  jsonl_named_at_s_ = now_s;
  const std::string file = results_file_at(config_->publish.jsonl_path, now_s);
  if (file == jsonl_file_) return Status::Ok();
  // The old period's lines to its file (those it refuses, a full disk, go on to the next one's).
  VAPIPE_RETURN_IF_ERROR(flush_jsonl());
  const std::string previous = std::exchange(jsonl_file_, file);
  if (Status opened = jsonl_.switch_to(file); !opened.ok()) return jsonl_refused(opened);
  VAPIPE_LOG_INFO("publish: results from here on go to {} (publish.jsonl_path: {}); {} is complete", file,
                  config_->publish.jsonl_path, previous);
  prune_results_files();
  return Status::Ok();
}

void PublishStage::prune_results_files() {
  const uint32_t keep = config_->publish.jsonl_keep;
  if (keep == 0) return;
  std::vector<TimedResultsFile> files = timed_results_files(config_->publish.jsonl_path);
  // The file written now is kept whatever its name's time says (a clock set back).
  files.erase(std::remove_if(files.begin(), files.end(), [&](const TimedResultsFile& f) { return f.path == jsonl_file_; }),
              files.end());
  const size_t drop = files.size() + 1 > keep ? files.size() + 1 - keep : 0;
  const std::filesystem::path top = std::filesystem::path(results_lock_path(config_->publish.jsonl_path)).parent_path();
  for (size_t i = 0; i < drop && i < files.size(); ++i) {
    std::error_code ec;
    std::filesystem::remove(files[i].path, ec);
    if (ec) {
      VAPIPE_LOG_WARN("publish: cannot delete old results file {} (publish.jsonl_keep: {}): {}", files[i].path, keep,
                      ec.message());
      continue;
    }
    VAPIPE_LOG_INFO("publish: deleted old results file {} (publish.jsonl_keep: {})", files[i].path, keep);
    // Its folders too, once empty ("2026/11/" after November), up to the pattern's fixed folder.
    for (std::filesystem::path dir = std::filesystem::path(files[i].path).parent_path();
         !dir.empty() && dir != top && dir.string().size() > top.string().size(); dir = dir.parent_path()) {
      if (!std::filesystem::remove(dir, ec) || ec) break;  // not empty (or not ours): stop
    }
  }
}

Status PublishStage::publish(const std::string& topic, const nlohmann::json& payload) {
  const std::string text = json_text(payload);
  if (jsonl_.active() && !jsonl_unwritable_) {  // (an archive job's file that failed: the job is stopping)
    VAPIPE_RETURN_IF_ERROR(follow_results_clock());
    jsonl_.append("{\"topic\":" + json_text(nlohmann::json(topic)) + ",\"payload\":" + text + "}");
    ++jsonl_lines_;
    if (jsonl_refusal_) {
      keep_jsonl_backlog();  // written when the next try succeeds
      note_lines_waiting(false);
    } else if (jsonl_.buffered_bytes() >= kJsonlBlockBytes) {
      VAPIPE_RETURN_IF_ERROR(flush_jsonl());
    } else if (!jsonl_flush_due_) {
      jsonl_flush_due_ = std::chrono::steady_clock::now() + kJsonlFlushDelay;
    }
  }
  // An archive job's bus waits for a slow subscriber (lossless): a wait, not publish stuck.
  WatchdogWait subscriber_wait(watchdog_);
  Status sent = bus_->send(topic, text);
  if (sinks_after_flush()) {
    // An archive job's sinks get a message once its line is in the results file: a restart after a
    // crash classifies again the frames whose lines had not reached it, and sent before, their results
    // reached Redis twice, its seq going back (2026-12-07).
    if (!webhooks_.empty() || !mqtt_.empty() || !redis_.empty() || !kafka_.empty()) {
      sinks_waiting_for_file_.push_back({topic, payload, jsonl_lines_});
    }
    return sent;
  }
  if (!sinks_waiting_for_file_.empty()) send_waiting_to_sinks();  // (the file failed since: in order first)
  send_to_sinks(topic, payload, text);
  return sent;
}

bool PublishStage::sinks_after_flush() const {
  return config_->job.mode == JobMode::kArchive && jsonl_.active() && !jsonl_unwritable_;
}

void PublishStage::send_waiting_to_sinks() {
  // A `block` sink that is down holds this until it has room (from a flush on publish's deadline): a
  // wait, not publish stuck (the watchdog aborted publish after job.stage_timeout_s).
  WatchdogWait sink_wait(watchdog_);
  std::vector<WaitingForFile> waiting;
  waiting.swap(sinks_waiting_for_file_);
  for (const WaitingForFile& w : waiting) send_to_sinks(w.topic, w.payload, json_text(w.payload), w.file_line);
}

void PublishStage::send_to_sinks(const std::string& topic, const nlohmann::json& payload, const std::string& text,
                                 uint64_t file_line, const std::map<std::string, uint64_t>* only_after) {
  // A sink that takes this message: offered its line first (its delivery mark passes the lines it does
  // not want, and those it does once delivered).
  std::optional<std::string> identity;  // (message_identity, once, where a sink took lines --resume cut)
  const auto takes = [&](auto& sink) {
    if (only_after) {
      const auto mark = only_after->find(sink.delivery_key());
      if (mark == only_after->end() || mark->second >= file_line) return false;
    }
    if (file_line > 0) sink.offer_line(file_line);
    if (!sinks_took_before_cut_.empty()) {
      if (auto took = sinks_took_before_cut_.find(sink.delivery_key()); took != sinks_took_before_cut_.end()) {
        if (!identity) identity = message_identity(topic, payload);
        if (auto it = took->second.find(*identity); it != took->second.end()) {
          took->second.erase(it);  // it has this one: dealt with
          if (took->second.empty()) sinks_took_before_cut_.erase(took);
          return false;
        }
      }
    }
    return true;
  };
  // Webhooks take their copy from their own queues (a queue_policy: block one may wait here for room).
  std::map<std::string, WebhookRequestBody> bodies;  // by format: made once for all webhooks of it
  for (const auto& hook : webhooks_) {
    if (!takes(*hook)) continue;
    if (!hook->wants(topic, payload) || hook->cooled_down(payload)) continue;
    auto it = bodies.find(hook->format());
    if (it == bodies.end()) {
      it = bodies.emplace(hook->format(), webhook_request_body(hook->format(), topic, payload, text)).first;
    }
    hook->post(topic,
               hook->attaches_pictures() || hook->attaches_clips()
                   ? webhook_attachment_body(hook->format(), hook->attaches_pictures(), hook->attaches_clips(), payload,
                                             it->second)
                   : it->second,
               stop_requested_);
  }
  // MQTT brokers likewise: the payload as on the bus (json), or the line a person reads (text).
  std::optional<std::string> line;
  for (const auto& broker : mqtt_) {
    if (!takes(*broker)) continue;
    broker->follow(payload);  // (home_assistant, pictures: what the broker keeps, whatever its topics)
    if (!broker->wants(topic, payload) || broker->cooled_down(payload)) continue;
    if (broker->format() == "text" && !line) line = webhook_text(topic, payload);
    broker->publish(topic, broker->format() == "text" ? *line : text, stop_requested_);
  }
  // Redis streams likewise.
  for (const auto& server : redis_) {
    if (!takes(*server)) continue;
    if (!server->wants(topic, payload) || server->cooled_down(payload)) continue;
    if (server->format() == "text" && !line) line = webhook_text(topic, payload);
    server->publish(topic, server->format() == "text" ? *line : text, stop_requested_);
  }
  // Kafka clusters likewise.
  for (const auto& cluster : kafka_) {
    if (!takes(*cluster)) continue;
    if (!cluster->wants(topic, payload) || cluster->cooled_down(payload)) continue;
    if (cluster->format() == "text" && !line) line = webhook_text(topic, payload);
    cluster->publish(topic, cluster->format() == "text" ? *line : text, stop_requested_);
  }
}

Result<uint64_t> PublishStage::deliver_what_sinks_missed(const Config& config, const std::atomic<bool>* stop) {
  if (config.job.mode != JobMode::kArchive || config.publish.jsonl_path.empty() ||
      results_path_is_timed(config.publish.jsonl_path)) {
    return uint64_t{0};
  }
  const std::string marks_path = sink_marks_path(config.publish.jsonl_path);
  VAPIPE_ASSIGN_OR_RETURN(SinkMarks marks, read_sink_marks(marks_path));
  VAPIPE_ASSIGN_OR_RETURN(const uint64_t lines, count_file_lines(config.publish.jsonl_path));
  if (std::none_of(marks.settled.begin(), marks.settled.end(), [&](const auto& m) { return m.second < lines; })) {
    return uint64_t{0};  // (no sink behind: none is connected to)
  }
  PublishStage stage;
  stage.config_ = &config;
  stage.stop_requested_ = stop;  // (a block sink's wait for room, and the end's wait, end at a signal)
  stage.resumed_ = true;
  stage.jsonl_file_ = config.publish.jsonl_path;
  stage.sink_marks_path_ = marks_path;
  stage.jsonl_lines_ = lines;
  for (size_t i = 0; i < config.publish.webhooks.size(); ++i) {
    stage.webhooks_.push_back(stage.make_webhook(config.publish.webhooks[i], i, {}));
  }
  for (size_t i = 0; i < config.publish.mqtt.size(); ++i) stage.mqtt_.push_back(stage.make_mqtt(config.publish.mqtt[i], i, {}));
  for (size_t i = 0; i < config.publish.redis.size(); ++i) {
    stage.redis_.push_back(stage.make_redis(config.publish.redis[i], i, {}));
  }
  for (size_t i = 0; i < config.publish.kafka.size(); ++i) {
    stage.kafka_.push_back(stage.make_kafka(config.publish.kafka[i], i, {}));
  }
  VAPIPE_RETURN_IF_ERROR(stage.send_sinks_what_they_missed());
  stage.finish_sinks(true);
  stage.write_sink_marks();
  return stage.sinks_undelivered_;
}

// What makes a message the same one when a run redoes it: a result's stream and seq, a segment's event,
// label and first frame, an event's kind and words (the topic names the stream). "" for the summary and
// what has none: always sent.
std::string PublishStage::message_identity(const std::string& topic, const nlohmann::json& payload) {
  if (!payload.is_object()) return "";
  if (topic.rfind("results/", 0) == 0) {
    const auto seq = count_field(payload, "seq");
    return seq ? topic + "|" + std::to_string(*seq) : "";
  }
  if (topic.rfind("segments/", 0) == 0) {
    const auto start = count_field(payload, "start_seq");
    return start ? topic + "|" + text_field(payload, "event") + "|" + text_field(payload, "label") + "|" +
                       std::to_string(*start)
                 : "";
  }
  if (topic.rfind("events/", 0) == 0) return topic + "|" + text_field(payload, "event") + "|" + text_field(payload, "message");
  return "";
}

// Each sink's name, and the last line of the results file it has dealt with.
std::map<std::string, uint64_t> PublishStage::sinks_settled_through() const {
  std::map<std::string, uint64_t> settled;
  for (const auto& hook : webhooks_) settled[hook->delivery_key()] = hook->settled_through();
  for (const auto& broker : mqtt_) settled[broker->delivery_key()] = broker->settled_through();
  for (const auto& server : redis_) settled[server->delivery_key()] = server->settled_through();
  for (const auto& cluster : kafka_) settled[cluster->delivery_key()] = cluster->settled_through();
  return settled;
}

void PublishStage::write_sink_marks() {
  next_sink_marks_write_ = std::chrono::steady_clock::now() + kSinkMarksPeriod;
  if (sink_marks_path_.empty() || (webhooks_.empty() && mqtt_.empty() && redis_.empty() && kafka_.empty())) return;
  if (jsonl_lines_lost_ > 0) {
    // Lines the file refused were lost: its lines are no longer numbered as the sinks' messages were.
    std::error_code ec;
    std::filesystem::remove(sink_marks_path_, ec);
    sink_marks_path_.clear();
    return;
  }
  SinkMarks marks;
  marks.results_file = jsonl_file_;
  marks.run_id = sink_marks_run_id_;
  marks.settled = sinks_settled_through();
  std::string text = sink_marks_text(marks);
  if (text == sink_marks_written_) return;
  if (Status st = vapipe::write_sink_marks(sink_marks_path_, marks); !st.ok()) {
    if (!sink_marks_unwritable_said_) {
      sink_marks_unwritable_said_ = true;
      VAPIPE_LOG_WARN("publish: the sinks' delivery marks cannot be written ({}): a restart after a crash may not "
                      "send the sinks what they had not taken", st.message());
    }
    return;
  }
  sink_marks_written_ = std::move(text);
}

Status PublishStage::send_sinks_what_they_missed() {
  SinkMarks read;
  if (resumed_) {
    auto marks = read_sink_marks(sink_marks_path_);
    if (marks.ok()) {
      read = std::move(marks).value();
    } else {
      VAPIPE_LOG_WARN("publish: {}: the sinks get what comes from here on only", marks.status().message());
    }
  }
  sink_marks_run_id_ = read.run_id;
  if (sink_marks_run_id_.empty()) {
    std::random_device random;
    sink_marks_run_id_ = fmt::format("{:08x}{:08x}", random(), random());
  }
  // Each sink known by where it delivers, not by its place in the list (a webhook added before another
  // got that one's backlog; found 2026-12-07).
  const auto fnv = [](const std::string& text) { return fmt::format("{:08x}", fnv1a32(text)); };
  // Two sinks alike in all of that (the same url, headers, chat, topics) are told apart by their order.
  std::map<std::string, int> seen;
  const auto unique = [&](std::string key) {
    const int n = ++seen[key];
    return n == 1 ? key : key + "." + std::to_string(n);
  };
  const auto joined = [](const std::vector<std::string>& items) {
    std::string text;
    for (const std::string& item : items) text += item + ",";
    return text;
  };
  for (const auto& hook : webhooks_) {
    const WebhookConfig& w = config_->publish.webhooks[hook->stats().index];
    std::string headers;
    for (const auto& [name, value] : w.headers) headers += name + "=" + value + ";";
    // (two bots' chats, two API keys at one url: two receivers)
    const std::string where = unique(fnv(w.url + "|" + w.format + "|" + w.telegram_chat_id + "|" + headers + "|" +
                                         w.token + "|" + joined(w.topics) + "|" + joined(w.labels)));
    hook->set_delivery_key("webhook " + where);
    hook->key_by_file_line(sink_marks_run_id_ + "-" + where + "-");
  }
  for (const auto& broker : mqtt_) {
    const MqttConfig& m = config_->publish.mqtt[broker->stats().index];
    broker->set_delivery_key(
        "mqtt " + unique(fnv(m.url + "|" + m.username + "|" + m.topic_prefix + "|" + joined(m.topics) + "|" + joined(m.labels))));
  }
  for (const auto& server : redis_) {
    const RedisConfig& r = config_->publish.redis[server->stats().index];
    server->set_delivery_key(
        "redis " + unique(fnv(r.url + "|" + r.key_prefix + "|" + joined(r.topics) + "|" + joined(r.labels))));
  }
  for (const auto& cluster : kafka_) {
    const KafkaConfig& k = config_->publish.kafka[cluster->stats().index];
    cluster->set_delivery_key(
        "kafka " + unique(fnv(k.url + "|" + k.topic_prefix + "|" + joined(k.topics) + "|" + joined(k.labels))));
  }
  // Each sink's mark to start from: the one it had, or the file's end (a sink new to the job gets what
  // comes from here on). A mark past the file's end is of lines --resume cut (a stopped run's last
  // events and summary), which this run publishes again.
  std::map<std::string, uint64_t> missed;  // of the sinks whose mark is before the file's end
  uint64_t first = jsonl_lines_;
  std::map<std::string, std::string> names;  // by delivery key, for the log
  const auto start_from_mark = [&](auto& sink) {
    names[sink.delivery_key()] = sink.name();
    const auto mark = read.settled.find(sink.delivery_key());
    const uint64_t from = mark == read.settled.end() ? jsonl_lines_ : std::min(mark->second, jsonl_lines_);
    sink.offer_line(from);
    if (from < jsonl_lines_) {
      missed[sink.delivery_key()] = from;
      first = std::min(first, from);
    }
  };
  for (const auto& hook : webhooks_) start_from_mark(*hook);
  for (const auto& broker : mqtt_) start_from_mark(*broker);
  for (const auto& server : redis_) start_from_mark(*server);
  for (const auto& cluster : kafka_) start_from_mark(*cluster);
  // A mark of no sink of this config (its url, headers, topics or labels changed since): what it had not
  // taken is not sent anywhere, which is said (it went unsaid; found 2026-12-07).
  for (const auto& [key, line] : read.settled) {
    if (names.count(key) || line >= jsonl_lines_) continue;
    VAPIPE_LOG_WARN("publish: the delivery marks of {} name a sink ({}) that this config has no more (its url, "
                    "headers, topics or labels changed?): lines {}..{}, which it had not taken, are sent to no sink; "
                    "a sink new to the job gets what comes from now on", jsonl_file_, key, line + 1, jsonl_lines_);
  }
  // A mark past the file's end: the sink took lines --resume cut, whose messages this run publishes again
  // (a stop's last results, redone): those it took are not sent to it twice (seq went back at Redis,
  // found 2026-12-07). The run folder keeps what was cut (resume.h's kResumeCutFile).
  if (layout_) {
    std::ifstream cut(layout_->run_dir + "/" + kResumeCutFile, std::ios::binary);
    std::vector<std::pair<std::string, uint64_t>> past;  // (sink, lines of the cut it took)
    uint64_t most = 0;
    for (const auto& [name, mark] : read.settled) {
      if (mark > jsonl_lines_) past.emplace_back(name, mark - jsonl_lines_), most = std::max(most, mark - jsonl_lines_);
    }
    std::string text;
    for (uint64_t n = 1; cut && n <= most && std::getline(cut, text); ++n) {
      const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (!j.is_object() || !j.contains("topic") || !j["topic"].is_string() || !j.contains("payload")) break;
      const std::string identity = message_identity(j["topic"].get<std::string>(), j["payload"]);
      if (identity.empty()) continue;
      for (const auto& [name, lines] : past) {
        if (n <= lines) sinks_took_before_cut_[name].insert(identity);
      }
    }
  }
  if (missed.empty()) return Status::Ok();
  for (const auto& [key, line] : missed) {
    VAPIPE_LOG_WARN("publish: {} had not taken lines {}..{} of {} when the job stopped (a crash, a stop, or "
                    "its end with the receiver down): their messages go to it again first", names[key], line + 1, jsonl_lines_, jsonl_file_);
  }
  std::ifstream in(jsonl_file_, std::ios::binary);
  if (!in) return Unavailable(jsonl_file_ + ": cannot be read again: " + std::strerror(errno));
  WatchdogWait sink_wait(watchdog_);  // (a block sink that is down holds it, as any message)
  std::string text;
  for (uint64_t line = 1; line <= jsonl_lines_ && std::getline(in, text); ++line) {
    if (line <= first) continue;
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("topic") || !j.contains("payload") || !j["topic"].is_string()) {
      return InvalidArgument(jsonl_file_ + ":" + std::to_string(line) + ": not a line vapipe wrote: the sinks' "
                             "delivery marks cannot be followed");
    }
    const nlohmann::json& payload = j["payload"];
    send_to_sinks(j["topic"].get<std::string>(), payload, json_text(payload), line, &missed);
    if (stop_requested_ && stop_requested_->load()) break;
  }
  return Status::Ok();
}

void PublishStage::finish_sinks(bool job_end) {
  // Within the supervisor's patience (job.drain_timeout_s after a stop), all of them at once, those a
  // reload removed too; and within the watchdog's (close() is watched: half of job.stage_timeout_s).
  auto grace = std::min<std::chrono::milliseconds>(
      kSinkGrace, std::chrono::milliseconds(static_cast<int64_t>(config_->job.drain_timeout_s * 500)));
  if (config_->job.stage_timeout_s > 0) {
    grace = std::min(grace, std::chrono::milliseconds(static_cast<int64_t>(config_->job.stage_timeout_s * 500)));
  }
  // An archive job that reached its end is not being stopped (no drain timeout runs): its
  // `queue_policy: block` sinks, which the job waits for while they are down, are waited for longer (a
  // receiver retrying for a few seconds lost all the job's last messages at 5 s), within the watchdog's
  // patience. A drop_oldest sink's messages are lossy by its choice: its grace is a stop's.
  // (A stop of `vapipe run` reaches publish as its mark in the run folder: the supervisor signals only
  // ingest, and the rest drain.)
  const auto stopped = [this] {
    std::error_code ec;
    return (stop_requested_ && stop_requested_->load()) ||
           (layout_ && std::filesystem::exists(stopping_mark(*layout_), ec));
  };
  const bool archive_end = job_end && config_->job.mode == JobMode::kArchive && !stopped() && unfinished_streams() == 0;
  auto block_grace = grace;
  bool wait_stopped = false;  // the job was stopped during the end's wait
  if (archive_end) {
    auto longest = std::chrono::milliseconds(kArchiveEndSinkGrace);
    if (config_->job.stage_timeout_s > 0) {
      longest = std::min(longest, std::chrono::milliseconds(static_cast<int64_t>(config_->job.stage_timeout_s * 500)));
    }
    block_grace = std::max(grace, longest);
  }
  const auto now = std::chrono::steady_clock::now();
  const auto deadline = now + grace;
  auto grace_of = [&](const auto& sink) { return sink->queue_policy() == QueuePolicy::kBlock ? block_grace : grace; };
  for (RetiringSink& r : retiring_sinks_) r.finish_by(deadline);
  if (webhooks_.empty() && mqtt_.empty() && redis_.empty() && kafka_.empty()) {
    reap_retired_sinks(true);
    return;
  }
  for (const auto& hook : webhooks_) hook->begin_finish(now + grace_of(hook));
  for (const auto& broker : mqtt_) broker->begin_finish(now + grace_of(broker));
  for (const auto& server : redis_) server->begin_finish(now + grace_of(server));
  for (const auto& cluster : kafka_) cluster->begin_finish(now + grace_of(cluster));
  auto waiting = [&](bool block_only) {  // (what the sinks still hold)
    uint64_t n = 0;
    auto add = [&](const auto& sink, uint64_t queued) {
      if (!block_only || sink->queue_policy() == QueuePolicy::kBlock) n += queued;
    };
    for (const auto& hook : webhooks_) add(hook, hook->stats().queued);
    for (const auto& broker : mqtt_) add(broker, broker->stats().queued);
    for (const auto& server : redis_) add(server, server->stats().queued);
    for (const auto& cluster : kafka_) add(cluster, cluster->stats().queued);
    return n;
  };
  // Meanwhile the delivery marks follow what the sinks deliver: a publish killed in its grace (the
  // supervisor's after a crash) leaves a restart what they had not taken, and no more.
  WatchdogWait sinks_wait(watchdog_);
  while (block_grace <= grace && waiting(false) > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    write_sink_marks();
  }
  if (block_grace > grace) {
    // The long wait, given up for a stop's grace when the job is stopped meanwhile (Ctrl-C, systemctl
    // stop: it was waited out, then publish killed).
    while (waiting(true) > 0 && std::chrono::steady_clock::now() < now + block_grace) {
      if (stopped()) {
        wait_stopped = true;
        const auto by = std::chrono::steady_clock::now() + grace;
        for (const auto& hook : webhooks_) hook->finish_by(by);
        for (const auto& broker : mqtt_) broker->finish_by(by);
        for (const auto& server : redis_) server->finish_by(by);
        for (const auto& cluster : kafka_) cluster->finish_by(by);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      write_sink_marks();
    }
  }
  for (const auto& hook : webhooks_) hook->finish(grace_of(hook));
  for (const auto& broker : mqtt_) broker->finish(grace_of(broker));
  for (const auto& server : redis_) server->finish(grace_of(server));
  for (const auto& cluster : kafka_) cluster->finish(grace_of(cluster));
  reap_retired_sinks(true);
  update_metrics_snapshot();
  if (!job_end || config_->job.mode != JobMode::kArchive) return;
  // What an archive job's `block` sinks did not deliver: the job waited for them while they were down,
  // and its record there is not whole (each sink's own line above says why); the results file has
  // every message.
  std::string missed;
  auto count = [&](const auto& sink, uint64_t undelivered) {
    if (undelivered == 0 || sink->queue_policy() != QueuePolicy::kBlock) return;
    sinks_undelivered_ += undelivered;
    missed += (missed.empty() ? "" : ", ") + sink->name() + " " + std::to_string(undelivered);
  };
  for (const auto& hook : webhooks_) count(hook, hook->stats().undelivered);
  for (const auto& broker : mqtt_) count(broker, broker->stats().undelivered);
  for (const auto& server : redis_) count(server, server->stats().undelivered);
  for (const auto& cluster : kafka_) count(cluster, cluster->stats().undelivered);
  if (sinks_undelivered_ > 0) {
    VAPIPE_LOG_ERROR("publish: {} message(s) of this archive job did not reach its queue_policy: block sinks ({}){}; "
                     "{}: the job exits {}", sinks_undelivered_, missed,
                     wait_stopped  ? " by its end (a stop cut the wait short)"
                     : archive_end ? " in the " + std::to_string(std::chrono::duration_cast<std::chrono::seconds>(block_grace).count()) +
                                         " s given at its end"
                                   : "",
                     config_->publish.jsonl_path.empty() ? "the bus had them all" : "the results file has them all",
                     kExitMessagesUndelivered);
  }
}

PublishStage::~PublishStage() {
  for (RetiringSink& r : retiring_sinks_) {
    if (r.finishing.joinable()) r.finishing.join();
  }
}

void PublishStage::check_config_copy() {
  auto text = config_copy_.look();
  if (!text.ok()) {
    VAPIPE_LOG_ERROR("publish: reload: {}; publish's outputs and settings stay as they are", text.status().message());
    return;
  }
  if (!*text) return;
  // The supervisor took this reload after the same comparison: an error here is a copy rewritten by
  // hand, or a reload this process missed (the copy changed as it started); said, nothing changes.
  auto change = compare_publish_sections(config_copy_.running_text(), **text, config_->source);
  if (!change.ok()) {
    VAPIPE_LOG_ERROR("publish: reload: {}; publish's outputs and settings stay as they are", change.status().message());
    return;
  }
  auto reloaded = config_copy_.load(**text);
  if (!reloaded.ok()) {
    VAPIPE_LOG_ERROR("publish: reload: {}; publish's outputs and settings stay as they are", reloaded.status().message());
    return;
  }
  config_copy_.take(std::move(**text));
  if (change->changed()) apply_publish_reload(*reloaded, *change);
}

template <typename Sink>
void PublishStage::retire(std::unique_ptr<Sink> sink, const char* kind, std::string receiver) {
  VAPIPE_LOG_INFO("publish: {} was removed by a reload: what waits for it has {} s to be delivered", sink->name(),
                  std::chrono::duration_cast<std::chrono::seconds>(kSinkGrace).count());
  sink->removed_by_reload();
  sink->begin_finish(std::chrono::steady_clock::now() + kSinkGrace);
  auto stopped = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<Sink> owned(std::move(sink));
  std::weak_ptr<Sink> weak = owned;
  std::thread finishing([owned = std::move(owned), stopped]() mutable {
    owned->finish(kSinkGrace);  // (the deadline above stays)
    owned.reset();              // disconnected: a new client of its id may connect
    stopped->store(true);
  });
  retiring_sinks_.push_back(RetiringSink{kind, std::move(receiver), std::move(stopped), std::move(finishing),
                                         [weak](SteadyTime by) {
                                           if (auto sink = weak.lock()) sink->finish_by(by);
                                         }});
}

SinkPredecessors PublishStage::predecessors_of(const char* kind, const std::string& receiver) const {
  SinkPredecessors predecessors;
  for (const RetiringSink& r : retiring_sinks_) {
    if (r.kind == kind && r.receiver == receiver && !r.stopped->load()) predecessors.push_back(r.stopped);
  }
  return predecessors;
}

void PublishStage::reap_retired_sinks(bool wait) {
  for (auto it = retiring_sinks_.begin(); it != retiring_sinks_.end();) {
    if (!wait && !it->stopped->load()) {
      ++it;
      continue;
    }
    if (it->finishing.joinable()) it->finishing.join();
    it = retiring_sinks_.erase(it);
  }
}

namespace {

// A list of outputs after a reload: the running ones it keeps (renumbered where their place moved),
// new ones made, the others retired.
template <typename Sink, typename SinkConfig, typename Make, typename Retire>
std::vector<std::unique_ptr<Sink>> reloaded_outputs(std::vector<std::unique_ptr<Sink>>& running,
                                                    const std::vector<SinkConfig>& configs,
                                                    const PublishReload::Outputs& change, Make make, Retire retire) {
  std::vector<std::unique_ptr<Sink>> next(configs.size());
  for (size_t j = 0; j < configs.size(); ++j) {
    if (const std::optional<size_t> from = j < change.kept_from.size() ? change.kept_from[j] : std::nullopt;
        from && *from < running.size() && running[*from]) {
      next[j] = std::move(running[*from]);
      if (*from != j) {
        const std::string was = next[j]->name();
        next[j]->renumber(j);
        VAPIPE_LOG_INFO("publish: {} is {} now (a reload changed the list before it)", was, next[j]->name());
      }
    }
  }
  for (size_t i = 0; i < running.size(); ++i) {  // first: a new one for the same receiver waits for it
    if (running[i]) retire(std::move(running[i]), i);
  }
  for (size_t j = 0; j < configs.size(); ++j) {
    if (!next[j]) next[j] = make(configs[j], j);
  }
  return next;
}

}  // namespace

void PublishStage::apply_publish_reload(const Config& reloaded, const PublishReload& change) {
  auto next = std::make_unique<Config>(*config_);
  PublishConfig& p = next->publish;
  take_reloadable_publish_settings(reloaded.publish, p);
  // Segments followed another way from now on (each label, or none): the open ones end now, as they
  // would at the stream's end; new thresholds alone take the runs from the next frame.
  const PublishConfig& was = config_->publish;
  if (was.segments_min_frames > 0 && (p.segments_min_frames == 0 || p.segments_labels != was.segments_labels)) {
    for (StreamState& st : streams_) {
      if (Status ended = end_segment(st); !ended.ok()) VAPIPE_LOG_ERROR("publish: {}", ended.message());
      st.run = StreamState::LabelRun{};
      st.tracks.clear();
    }
  }
  // The running outputs' configs are the old config's, by their index.
  webhooks_ = reloaded_outputs(
      webhooks_, p.webhooks, change.webhooks,
      [&](const WebhookConfig& c, size_t i) { return make_webhook(c, i, predecessors_of("webhooks", receiver_of(c))); },
      [&](std::unique_ptr<WebhookSender> s, size_t i) { retire(std::move(s), "webhooks", receiver_of(was.webhooks[i])); });
  mqtt_ = reloaded_outputs(
      mqtt_, p.mqtt, change.mqtt,
      [&](const MqttConfig& c, size_t i) { return make_mqtt(c, i, predecessors_of("mqtt", receiver_of(c))); },
      [&](std::unique_ptr<MqttPublisher> s, size_t i) { retire(std::move(s), "mqtt", receiver_of(was.mqtt[i])); });
  redis_ = reloaded_outputs(
      redis_, p.redis, change.redis,
      [&](const RedisConfig& c, size_t i) { return make_redis(c, i, predecessors_of("redis", receiver_of(c))); },
      [&](std::unique_ptr<RedisStreamsPublisher> s, size_t i) { retire(std::move(s), "redis", receiver_of(was.redis[i])); });
  kafka_ = reloaded_outputs(
      kafka_, p.kafka, change.kafka,
      [&](const KafkaConfig& c, size_t i) { return make_kafka(c, i, predecessors_of("kafka", receiver_of(c))); },
      [&](std::unique_ptr<KafkaPublisher> s, size_t i) { retire(std::move(s), "kafka", receiver_of(was.kafka[i])); });
  // Their secrets' files as this config read them (a kept output's too: its place may have moved).
  sink_secret_identities_.clear();
  sink_secrets_ = has_sink_secrets(p);
  reloaded_config_ = std::move(next);  // (`was` may go with the one before)
  config_ = reloaded_config_.get();
  if (sink_secrets_) check_sink_secrets();
  VAPIPE_LOG_INFO("publish: reload taken: {}", describe_publish_reload(change));
  update_metrics_snapshot();
}

void PublishStage::learn_added_streams() {
  if (!layout_) return;
  auto table = read_job_stream_table(stream_table_path(*layout_));
  if (!table.ok()) {
    VAPIPE_LOG_ERROR("publish: {}", table.status().message());
    return;
  }
  if (!table->has_value()) return;
  for (const StreamTableEntry& e : (*table)->entries) {
    if (e.index < streams_.size()) continue;
    StreamState st;
    st.id = e.id;
    st.part_from_ns = e.from_ns;
    st.roi = e.roi;
    st.turn = e.turn ? orientation_name(*e.turn) : "";
    if (restarted_) {
      st.seq_jumps = true;
      st.counts_known = false;
    }
    streams_.push_back(std::move(st));
    VAPIPE_LOG_INFO("publish: stream '{}' was added to the running job", e.id);
  }
}

// How a changed event of a reload's retune begins (stream_reader.cpp's say_retune, a reload's new uri
// too); a looping file's read again says "looped: ...".
constexpr const char* kReloadChangedPrefix = "a reload changed its ";

Status PublishStage::process(Message&& in, Emitter& /*out*/) {
  // A stream's event may come of a reload (a stream added, changed, back): the supervisor rewrote the
  // copy of the config before the stream table, so the outputs that reload names take its messages.
  if (config_copy_.followed() && in.kind != MessageKind::kResult) check_config_copy();
  if (in.env.stream_index >= streams_.size()) learn_added_streams();  // added by a reload
  if (in.env.stream_index >= streams_.size() || streams_[in.env.stream_index].id != in.env.stream_id) {
    return InvalidArgument("message for unknown stream '" + in.env.stream_id + "'");
  }
  StreamState& st = streams_[in.env.stream_index];
  const int64_t now = wall_clock_ns();
  if (in.kind == MessageKind::kResult) {
    // Per-stream order is a contract: check it rather than trust it.
    if (st.seq_jumps) {
      // The first result after a restart: numbering goes on past what the crashed processes sent.
      if (st.counts_known && in.env.seq > st.next_seq) {
        VAPIPE_LOG_INFO("stream '{}': goes on from seq {} after the restart (frames {}..{} were lost in the "
                        "crash or never numbered)", st.id, in.env.seq, st.next_seq, in.env.seq - 1);
      }
      st.seq_jumps = false;
      st.next_seq = in.env.seq;
    }
    if (st.status == "pending") st.status = "running";  // a restarted publish learns it from results
    if (in.env.seq > st.next_seq) {
      st.gaps += in.env.seq - st.next_seq;
      if (config_->job.mode == JobMode::kArchive) {
        VAPIPE_LOG_ERROR("stream '{}': frames {}..{} missing", st.id, st.next_seq, in.env.seq - 1);
      }
    } else if (in.env.seq < st.next_seq) {
      ++st.out_of_order;
      VAPIPE_LOG_ERROR("stream '{}': frame {} arrived after frame {}", st.id, in.env.seq, st.next_seq - 1);
    }
    st.next_seq = std::max(st.next_seq, in.env.seq + 1);
    if (in.env.pts_ns >= 0) st.position_ns = std::max(st.position_ns, in.env.pts_ns - st.part_from_ns);
    ++st.results;
    if (in.env.damaged) ++st.damaged;
    if (!in.prediction.error.empty() || !in.error.empty()) {
      ++st.frame_errors;
    } else if (!in.prediction.top_k.empty()) {
      ++st.labels[in.prediction.top_k.front().label];
    }
    if (st.first_ns == 0) st.first_ns = in.env.capture_ns;
    st.last_ns = now;
    const int64_t monotonic_now = monotonic_clock_ns();
    wall_clock_steps_.look(now, monotonic_now);
    const int64_t capture_ns = wall_clock_steps_.now_clock(in.env.capture_ns);
    if (st.first_monotonic_ns == 0) st.first_monotonic_ns = capture_ns > 0 ? monotonic_now - (now - capture_ns) : monotonic_now;
    st.last_monotonic_ns = monotonic_now;
    const double latency = capture_ns > 0 ? static_cast<double>(std::max<int64_t>(0, now - capture_ns)) / 1e6 : 0.0;
    st.latency_sum_ms += latency;
    st.latency_max_ms = std::max(st.latency_max_ms, latency);
    VAPIPE_RETURN_IF_ERROR(publish(result_topic(st.id), result_json(in, now)));
    return follow_segments(st, in);
  }
  if (!is_stream_event(in.kind)) {
    return InvalidArgument(std::string("publish got a ") + message_kind_name(in.kind) + " message");
  }
  if (in.kind == MessageKind::kStreamPicture) return publish_picture(st, in);
  if (in.kind == MessageKind::kStreamClip) return publish_clip(st, in);
  if (in.kind == MessageKind::kStreamChanged) {
    // A reload changed its settings: its next frames are cut and turned so, and a started event yet to
    // come says so too. (Ingest's log says what changed.)
    if (st.ended) return Status::Ok();
    // Frames of another camera, region or turn from here on: a segment does not run across the change
    // (its picture and clip show one), and a run of a label starts over. A change of how often or which
    // frames are sampled (max_fps, keyframes_only) or of the jitter buffer leaves what they show as it
    // was: its segments go on (a nightly `max_fps: 1` ended and began every camera's open segment
    // again, each an alert; found 2026-12-07).
    // (A uri not known yet, a restarted publish's, counts as another: it follows no segment anyway. A
    // changed event that is no reload's, a looping file read again, starts a new timeline: it ends them.)
    const bool reframed = in.event.message.rfind(kReloadChangedPrefix, 0) != 0 || st.roi != in.event.roi ||
                          st.turn != in.event.turn || st.uri.empty() || st.uri != in.event.uri;
    st.roi = in.event.roi;
    st.turn = in.event.turn;
    if (!in.event.uri.empty()) st.uri = in.event.uri;
    if (reframed) {
      VAPIPE_RETURN_IF_ERROR(end_segment(st));
      st.run = StreamState::LabelRun{};
    }
    return publish(event_topic(st.id), event_json(in, wall_clock_ns()));
  }
  // A file's duration, for archive progress (a resumed stream's start is not published again).
  if (in.kind == MessageKind::kStreamStart && in.event.duration_ns > st.part_from_ns) {
    st.media_ns = in.event.duration_ns - st.part_from_ns;
  }
  // --resume: what an earlier run published is not published twice (ingest still ends such a stream,
  // for the stages' sake, and starts a resumed one).
  if ((st.ended_earlier && ends_stream(in.kind)) || (st.started_earlier && in.kind == MessageKind::kStreamStart)) {
    return Status::Ok();
  }
  // A restarted lane ends a stream that was removed earlier once more, for its own stages.
  if (st.ended && ends_stream(in.kind)) return Status::Ok();
  if (st.ended && (in.kind == MessageKind::kStreamStart || in.kind == MessageKind::kStreamReconnecting)) {
    // It had ended and starts again under its id (a reload listed it again, or started again a camera
    // that had given up; or its lane restarted): running again, ingest's counts from here.
    VAPIPE_LOG_INFO("stream '{}' starts again after it {}{}", st.id,
                    st.status == "failed" ? "failed" : st.status == "removed" ? "was removed" : "ended",
                    in.event.message.empty() ? std::string() : ": " + in.event.message);
    if (st.status == "failed") --failed_streams_;
    st.ended = false;
    st.ended_ns = 0;
    st.message.clear();
    ++st.comebacks;
    st.seq_jumps = true;
    st.rebase_ingest_counts();
    st.run = StreamState::LabelRun{};  // its segments begin anew: its numbering goes on, but time has passed
    // It may come back with another region or turn (listed again with them): its `started` says so.
    if (layout_) {
      if (auto table = read_job_stream_table(stream_table_path(*layout_)); table.ok() && table->has_value() &&
                                                                           in.env.stream_index < (*table)->entries.size()) {
        const StreamTableEntry& e = (*table)->entries[in.env.stream_index];
        st.roi = e.roi;
        st.turn = e.turn ? orientation_name(*e.turn) : "";
      }
    }
  }
  // A stop came before the stream opened: nothing of it is published, and it stays unfinished.
  if (in.kind == MessageKind::kStreamEnd && in.event.message == kNotOpenedReason) return Status::Ok();
  if (ends_stream(in.kind)) {
    st.ended = true;
    st.ended_ns = wall_clock_ns();
  }
  const bool lane_restart = in.event.attempt == 0 && (in.kind == MessageKind::kStreamReconnecting ||
                                                      in.kind == MessageKind::kStreamResumed);
  if (lane_restart && in.kind == MessageKind::kStreamReconnecting) {
    // Its lane's processes started again after a crash (attempt 0): ingest's counts start over.
    ++st.restarts;
    st.seq_jumps = true;
    st.rebase_ingest_counts();
    VAPIPE_LOG_WARN("stream '{}': {}", st.id, in.event.message);
  }
  const uint64_t dropped = st.dropped_base + in.event.dropped;
  if (in.kind == MessageKind::kStreamStart) {
    st.status = "running";
    // A camera that was down when the job started reconnects before its first frame: why it was
    // reconnecting is over (the summary said it of a camera that then ran for hours).
    st.message.clear();
    st.uri = in.event.uri;
    VAPIPE_LOG_INFO("stream '{}' started: {}", st.id, in.event.uri);
  } else if (in.kind == MessageKind::kStreamReconnecting) {
    st.status = "reconnecting";
    st.message = escape_invalid_utf8(in.event.message);
    st.dropped = std::max(st.dropped, dropped);
  } else if (in.kind == MessageKind::kStreamResumed) {
    st.status = "running";
    st.message.clear();
    st.dropped = std::max(st.dropped, dropped);
    if (lane_restart) {
      VAPIPE_LOG_INFO("stream '{}' resumed after the restart of its lane", st.id);
    } else {
      ++st.reconnects;
      VAPIPE_LOG_INFO("stream '{}' resumed after reconnection attempt {}", st.id, in.event.attempt);
    }
  } else if (in.kind == MessageKind::kStreamEnd) {
    st.status = in.event.message == kStoppedReason       ? "stopped"
                : in.event.message == kRemovedFromConfig ? "removed"
                                                         : "done";
    st.dropped = std::max(st.dropped, dropped);
    if (!in.event.warning.empty()) {
      st.message = escape_invalid_utf8(in.event.warning);  // done, but not whole: the summary says why
      VAPIPE_LOG_WARN("stream '{}' ended: {}", st.id, in.event.warning);
    }
    // Ingest's count covers its own process: since the last restart of the stream's lane.
    if (st.counts_known && in.event.frames != st.results - st.results_base) {
      VAPIPE_LOG_ERROR("stream '{}': ingest emitted {} frames but {} results were published", st.id,
                       in.event.frames, st.results - st.results_base);
    }
  } else {
    st.status = "failed";
    st.message = escape_invalid_utf8(in.event.message);
    st.dropped = std::max(st.dropped, dropped);
    ++failed_streams_;
    VAPIPE_LOG_ERROR("stream '{}' failed: {}", st.id, in.event.message);
  }
  // The stream's end (or failure) ends its segment, before the event says so. So does a live stream's
  // lost connection (reconnecting, or its lane restarted): what happens until it resumes is not seen,
  // and its next frames come on a new timeline (pts_ms starts over), so a segment does not run across
  // the outage (its times, picture and clip are of one connection) and the label's run starts over.
  // An archive job's stream goes on from its next frame, as if nothing had happened.
  // With segments_reconnect_grace_s, a lost connection holds the segments open instead (see
  // PublishConfig): its label runs start over, and the segments end if the camera is not back in time.
  const bool connection_lost = in.kind == MessageKind::kStreamReconnecting && config_->job.mode == JobMode::kLive;
  const double grace_s = config_->publish.segments_reconnect_grace_s;
  const bool open_segment = st.segment.frames > 0 || std::any_of(st.tracks.begin(), st.tracks.end(), [](const auto& t) {
                              return t.second.segment.frames > 0;
                            });
  if (connection_lost && grace_s > 0 && open_segment) {
    if (!st.segments_held_until) {  // (from the first of its attempts)
      const auto grace = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(grace_s));
      st.segments_held_until = std::chrono::steady_clock::now() + grace;
      if (st.segment.frames > 0) st.segment.held = true;
      for (auto& [label, track] : st.tracks) {
        if (track.segment.frames > 0) track.segment.held = true;
      }
      // Their clips' parts before the outage are said once the camera is back, or the grace is over.
      for (auto& [key, asked] : st.clips_asked) {
        asked.due = std::max(asked.due, *st.segments_held_until + picture_answer_timeout_);
      }
    }
    st.run = StreamState::LabelRun{};
    for (auto& [label, track] : st.tracks) {
      track.run = StreamState::LabelRun{};
      track.absent = 0;
    }
  } else if (in.kind == MessageKind::kStreamEnd || in.kind == MessageKind::kStreamError || connection_lost) {
    VAPIPE_RETURN_IF_ERROR(end_segment(st));
    if (connection_lost) st.run = StreamState::LabelRun{};
  }
  nlohmann::json event = event_json(in, now);
  if (in.kind == MessageKind::kStreamStart) {
    // Ingest's word on its turn, where it said one: with ingest.orientation as_stored, "rotate-0" for a
    // stream without its own (no tag decides).
    if (!in.event.turn.empty()) st.turn = in.event.turn;
    // What the stream classifies of its frames, for a picture of what the model saw.
    if (st.roi != std::array<double, 4>{0, 0, 1, 1}) event["roi"] = st.roi;
    if (!st.turn.empty()) event["turn"] = st.turn;
  }
  return publish(event_topic(st.id), event);
}

nlohmann::json PublishStage::segment_json(const std::string& stream_id, const char* event, const StreamState::LabelRun& s) {
  auto ms = [](double v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(); };
  return {{"schema", "vapipe.segment"}, {"schema_version", kSchemaVersion}, {"stream_id", stream_id},
          {"event", event}, {"label", s.label}, {"start_seq", s.start_seq}, {"start_ms", ms(s.start_ms)},
          {"end_seq", s.end_seq}, {"end_ms", ms(s.end_ms)}, {"frames", s.frames},
          {"score_mean", s.frames ? s.score_sum / static_cast<double>(s.frames) : 0.0},
          {"start_capture_unix_ms", ms(s.start_capture_ms)}, {"end_capture_unix_ms", ms(s.end_capture_ms)},
          {"start_camera_unix_ms", ms(s.start_camera_ms)}, {"end_camera_unix_ms", ms(s.end_camera_ms)},
          {"best_seq", s.best_seq}, {"best_ms", ms(s.best_ms)}, {"best_score", s.best_score},
          {"best_capture_unix_ms", ms(s.best_capture_ms)}, {"damaged_frames", s.damaged_frames},
          {"reconnections", s.reconnections}, {"time_unix_ms", static_cast<double>(wall_clock_ns()) / 1e6}};
}

// A label "begins" once it has been the top-1 label of min_frames frames in a row (a flicker shorter
// than that neither begins a segment nor ends one); the segment then goes on through errors, drops and
// flickers until another label has begun, min_frames frames in a row were unsure (top-1 score below
// its label's minimum score: segments_min_score_by_label's, or segments_min_score), or the stream ends.
Status PublishStage::follow_segments(StreamState& st, const Message& r) {
  const uint32_t min_frames = config_->publish.segments_min_frames;
  if (min_frames == 0) return Status::Ok();
  st.segments_held_until.reset();  // (a lost camera is back in time: its segments go on as its labels do)
  if (config_->publish.segments_labels == "each") return follow_each_label(st, r);
  const bool failed = !r.prediction.error.empty() || !r.error.empty() || r.prediction.top_k.empty() ||
                      (r.env.damaged && config_->publish.segments_skip_damaged);
  StreamState::LabelRun& run = st.run;
  if (failed) {  // an error result (or a damaged picture's, segments_skip_damaged) breaks a run
    run = StreamState::LabelRun{};
    return Status::Ok();
  }
  const double score = r.prediction.top_k.front().score;
  // Below segments_min_score a frame is unsure: its run of "" ends a segment after min_frames in a row
  // as another label's would, and begins none.
  static const std::string kUnsure;
  const std::string& top = r.prediction.top_k.front().label;
  const std::string& label = score >= config_->publish.segment_min_score(top) ? top : kUnsure;
  const double pts_ms = r.env.pts_ns >= 0 ? static_cast<double>(r.env.pts_ns) / 1e6 : -1;
  const double capture_ms = static_cast<double>(r.env.capture_ns) / 1e6;
  const double camera_ms = r.env.camera_ns >= 0 ? static_cast<double>(r.env.camera_ns) / 1e6 : -1;
  if (run.frames == 0 || run.label != label || r.env.seq != run.end_seq + 1) {
    run = StreamState::LabelRun{label, r.env.seq, r.env.seq, 0, pts_ms, pts_ms, 0, capture_ms, capture_ms, camera_ms,
                                camera_ms};
  }
  run.add(r.env.seq, pts_ms, capture_ms, camera_ms, score, r.env.pts_ns, r.env.damaged);
  StreamState::LabelRun& seg = st.segment;
  if (seg.frames > 0 && seg.label == label) {  // the segment goes on
    const bool across_reconnection = seg.held;
    seg.add(r.env.seq, pts_ms, capture_ms, camera_ms, score, r.env.pts_ns, r.env.damaged);
    if (across_reconnection) ask_clip_to_go_on(st, seg);
    return Status::Ok();
  }
  if (run.frames < min_frames) return Status::Ok();
  VAPIPE_RETURN_IF_ERROR(end_segment(st));
  if (label.empty()) return Status::Ok();  // unsure for min_frames frames: no segment until a label is sure
  seg = run;
  return publish_began(st, seg);
}

// segments_labels: each. A label is on a frame when it is in its top_k with a score of at least its
// minimum (segments_min_score_by_label's, or segments_min_score). Its segment begins once it was on
// min_frames frames in a row, and ends once it was not on min_frames results in a row (fewer: a
// flicker); error results and dropped frames neither begin nor end one. Segments of different labels overlap; on one frame, ends come before begins.
Status PublishStage::follow_each_label(StreamState& st, const Message& r) {
  const uint32_t min_frames = config_->publish.segments_min_frames;
  if (!r.prediction.error.empty() || !r.error.empty() || r.prediction.top_k.empty() ||
      (r.env.damaged && config_->publish.segments_skip_damaged)) {
    for (auto& [label, track] : st.tracks) track.run = StreamState::LabelRun{};  // an error result breaks runs
    return Status::Ok();
  }
  const PublishConfig& p = config_->publish;
  auto on_frame = [&](const std::string& label) {
    return std::any_of(r.prediction.top_k.begin(), r.prediction.top_k.end(),
                       [&](const ClassScore& c) { return c.label == label && c.score >= p.segment_min_score(label); });
  };
  const double pts_ms = r.env.pts_ns >= 0 ? static_cast<double>(r.env.pts_ns) / 1e6 : -1;
  const double capture_ms = static_cast<double>(r.env.capture_ns) / 1e6;
  const double camera_ms = r.env.camera_ns >= 0 ? static_cast<double>(r.env.camera_ns) / 1e6 : -1;
  for (auto it = st.tracks.begin(); it != st.tracks.end();) {  // the labels not on this frame
    StreamState::LabelTrack& track = it->second;
    if (on_frame(it->first)) {
      ++it;
      continue;
    }
    track.run = StreamState::LabelRun{};
    if (track.segment.frames > 0 && ++track.absent >= min_frames) {
      VAPIPE_RETURN_IF_ERROR(publish_ended(st, &track.segment));
    }
    it = track.segment.frames > 0 ? std::next(it) : st.tracks.erase(it);
  }
  for (const ClassScore& c : r.prediction.top_k) {
    if (c.score < p.segment_min_score(c.label)) continue;
    StreamState::LabelTrack& track = st.tracks[c.label];
    StreamState::LabelRun& run = track.run;
    if (run.frames > 0 && run.end_seq == r.env.seq) continue;  // a label named twice in the labels file
    track.absent = 0;
    if (run.frames == 0 || r.env.seq != run.end_seq + 1) {
      run = StreamState::LabelRun{c.label, r.env.seq, r.env.seq, 0, pts_ms, pts_ms, 0, capture_ms, capture_ms,
                                  camera_ms, camera_ms};
    }
    run.add(r.env.seq, pts_ms, capture_ms, camera_ms, c.score, r.env.pts_ns, r.env.damaged);
    if (track.segment.frames > 0) {
      const bool across_reconnection = track.segment.held;
      track.segment.add(r.env.seq, pts_ms, capture_ms, camera_ms, c.score, r.env.pts_ns, r.env.damaged);
      if (across_reconnection) ask_clip_to_go_on(st, track.segment);
    } else if (run.frames >= min_frames) {
      track.segment = run;
      VAPIPE_RETURN_IF_ERROR(publish_began(st, track.segment));
    }
  }
  return Status::Ok();
}

Status PublishStage::publish_began(StreamState& st, const StreamState::LabelRun& segment) {
  if (replaying_) return Status::Ok();  // (its `began` is in the file already)
  VAPIPE_RETURN_IF_ERROR(publish(segment_topic(st.id), segment_json(st.id, "began", segment)));
  if (config_->publish.segments_pictures_dir.empty() || !picture_requester_) return Status::Ok();
  // Named by when the segment's first frame was captured; of its best or first frame, which ingest
  // decodes again from the compressed frames it keeps (or, when it no longer has it, of its next frame).
  const bool first = config_->publish.segments_picture_frame == "first";
  PictureRequest request{st.id, segment.label, segment.start_seq,
                         segment_picture_path(config_->publish.segments_pictures_dir, st.id, segment.label,
                                              segment.start_capture_ms)};
  request.frame_seq = static_cast<int64_t>(first ? segment.start_seq : segment.best_seq);
  request.frame_pts_ns = first ? segment.start_pts_ns : segment.best_pts_ns;
  if (st.pictures_asked.size() >= 256) st.pictures_asked.erase(st.pictures_asked.begin());  // never said
  st.pictures_asked[{segment.label, segment.start_seq}] = {request.frame_seq, first ? "first" : "best",
                                                           std::chrono::steady_clock::now(), false, wall_clock_ns()};
  save_picture_asks();
  picture_requester_(request);
  if (config_->publish.segments_clips) {
    // Beside its picture; from before its first frame (ingest keeps segments_clip_pre_s more for it).
    PictureRequest clip{st.id, segment.label, segment.start_seq, segment_clip_path(request.path),
                        static_cast<int64_t>(segment.start_seq), segment.start_pts_ns,
                        PictureRequest::Kind::kClipStart};
    picture_requester_(clip);
    // Said by then at the latest: cut at its longest while the segment goes on (its end moves it).
    if (st.clips_asked.size() >= 256) st.clips_asked.erase(st.clips_asked.begin());  // never said
    st.clips_asked[{segment.label, segment.start_seq}] = {
        std::chrono::steady_clock::now() +
            std::chrono::duration_cast<std::chrono::nanoseconds>(
                std::chrono::duration<double>(config_->publish.segments_clip_max_s)) +
            picture_answer_timeout_};
  }
  return Status::Ok();
}

namespace {
std::string picture_asks_path(const JobLayout& layout) { return layout.run_dir + "/picture-asks.json"; }
}  // namespace

void PublishStage::save_picture_asks() const {
  if (!layout_ || config_->job.mode != JobMode::kLive) return;
  nlohmann::json all = nlohmann::json::object();
  for (const StreamState& st : streams_) {
    if (st.pictures_asked.empty()) continue;
    nlohmann::json asks = nlohmann::json::array();
    for (const auto& [key, asked] : st.pictures_asked) {
      asks.push_back({{"label", key.first}, {"start_seq", key.second}, {"seq", asked.seq}, {"frame", asked.frame},
                      {"at_unix_ns", asked.at_unix_ns}, {"said_missing", asked.said_missing}});
    }
    all[st.id] = std::move(asks);
  }
  if (Status s = write_file_atomically(picture_asks_path(*layout_), all.dump() + "\n", 0600); !s.ok()) {
    VAPIPE_LOG_WARN("publish: {} (a restarted publish would not know the pictures asked for)", s.message());
  }
}

void PublishStage::load_picture_asks() {
  if (!layout_ || config_->job.mode != JobMode::kLive) return;
  const std::string path = picture_asks_path(*layout_);
  std::ifstream in(path);
  if (!in) return;
  const nlohmann::json all = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!all.is_object()) {
    VAPIPE_LOG_WARN("publish: {} is not the JSON publish writes: the pictures asked before the restart are forgotten", path);
    return;
  }
  const SteadyTime now = std::chrono::steady_clock::now();
  const int64_t now_unix_ns = wall_clock_ns();
  size_t restored = 0;
  for (StreamState& st : streams_) {
    if (!all.contains(st.id) || !all[st.id].is_array()) continue;
    for (const nlohmann::json& a : all[st.id]) {
      if (!a.is_object() || !a.contains("label") || !a["label"].is_string() || !a.contains("start_seq") ||
          !a["start_seq"].is_number_unsigned()) {
        continue;
      }
      StreamState::PictureAsked asked;
      asked.seq = a.value("seq", int64_t{-1});
      asked.frame = a.value("frame", std::string("best"));
      asked.said_missing = a.value("said_missing", false);
      asked.at_unix_ns = a.value("at_unix_ns", now_unix_ns);
      asked.at = now - std::chrono::nanoseconds(std::max<int64_t>(0, now_unix_ns - asked.at_unix_ns));
      st.pictures_asked[{a["label"].get<std::string>(), a["start_seq"].get<uint64_t>()}] = asked;
      ++restored;
    }
  }
  if (restored > 0) {
    VAPIPE_LOG_INFO("publish: {} picture(s) asked for before the restart are still awaited (from {})", restored, path);
  }
}

// A request ingest did not answer (no ingest subscribed when it was sent: its lane restarting; ingest
// on another host than publish; a picture decoder that hangs): its segment's `picture` message says so,
// with no frame, so that a subscriber waiting for it is not left waiting.
Status PublishStage::say_missing_pictures() {
  const auto now = std::chrono::steady_clock::now();
  const auto timeout_s = std::chrono::duration<double>(picture_answer_timeout_).count();
  for (std::vector<StreamState>* states : {&streams_, &departed_}) {
    for (StreamState& st : *states) {
      for (auto& [key, asked] : st.pictures_asked) {
        if (asked.said_missing || now - asked.at < picture_answer_timeout_) continue;
        asked.said_missing = true;
        ++st.pictures_failed;
        const std::string why = fmt::format(
            "ingest gave no picture in {:g} s: its lane may have been restarting when publish asked, or ingest runs "
            "on another host than publish (the request crosses an ipc:// socket in the job's run folder)", timeout_s);
        VAPIPE_LOG_WARN("stream '{}': no picture for its '{}' segment: {}", st.id, key.first, why);
        nlohmann::json j = picture_json(st.id, key.first, key.second);
        j["error"] = why;
        VAPIPE_RETURN_IF_ERROR(publish(segment_topic(st.id), j));
        save_picture_asks();
      }
    }
  }
  return Status::Ok();
}

void PublishStage::end_old_clips() {
  if (!end_old_clips_until_) return;
  if (std::chrono::steady_clock::now() >= *end_old_clips_until_) {
    end_old_clips_until_.reset();
    return;
  }
  PictureRequest request;
  request.kind = PictureRequest::Kind::kClipsBefore;
  request.before_unix_ns = started_unix_ns_;
  picture_requester_(request);
}

// A clip ingest did not say by its due time (its lane restarted while it was open: the clip died with
// it; a request lost): its segment's `clip` message says so, so that a subscriber waiting for it is not
// left waiting.
Status PublishStage::say_missing_clips() {
  const auto now = std::chrono::steady_clock::now();
  for (std::vector<StreamState>* states : {&streams_, &departed_}) {
    for (StreamState& st : *states) {
      for (auto& [key, asked] : st.clips_asked) {
        if (asked.said_missing || now < asked.due) continue;
        asked.said_missing = true;
        ++st.clips_failed;
        const std::string why = fmt::format(
            "ingest gave no clip {:g} s after it was due: its lane may have restarted while the clip was being "
            "written, or been restarting when publish asked",
            std::chrono::duration<double>(picture_answer_timeout_).count());
        VAPIPE_LOG_WARN("stream '{}': no clip of its '{}' segment: {}", st.id, key.first, why);
        nlohmann::json j{{"schema", "vapipe.segment"}, {"schema_version", kSchemaVersion}, {"stream_id", st.id},
                         {"event", "clip"}, {"label", escape_invalid_utf8(key.first)}, {"start_seq", key.second},
                         {"part", nullptr}, {"continues", false},
                         {"clip", nullptr}, {"clip_url_path", nullptr}, {"pts_ms", nullptr}, {"duration_s", nullptr},
                         {"cut_short", nullptr}, {"error", why},
                         {"time_unix_ms", static_cast<double>(wall_clock_ns()) / 1e6}};
        VAPIPE_RETURN_IF_ERROR(publish(segment_topic(st.id), j));
      }
    }
  }
  return Status::Ok();
}

std::optional<SteadyTime> PublishStage::next_missing_clip() const {
  std::optional<SteadyTime> next;
  for (const std::vector<StreamState>* states : {&streams_, &departed_}) {
    for (const StreamState& st : *states) {
      for (const auto& [key, asked] : st.clips_asked) {
        if (!asked.said_missing && (!next || asked.due < *next)) next = asked.due;
      }
    }
  }
  return next;
}

std::optional<SteadyTime> PublishStage::next_missing_picture() const {
  std::optional<SteadyTime> next;
  for (const std::vector<StreamState>* states : {&streams_, &departed_}) {
    for (const StreamState& st : *states) {
      for (const auto& [key, asked] : st.pictures_asked) {
        if (asked.said_missing) continue;
        const SteadyTime due = asked.at + picture_answer_timeout_;
        if (!next || due < *next) next = due;
      }
    }
  }
  return next;
}

// Where the metrics server serves a picture (GET /pictures/...): its path under the pictures folder,
// percent-escaped; null for a path outside it.
nlohmann::json PublishStage::picture_url_path(const std::string& picture) const {
  const std::filesystem::path relative = std::filesystem::path(picture).lexically_normal().lexically_relative(
      std::filesystem::path(config_->publish.segments_pictures_dir).lexically_normal());
  if (relative.empty() || relative == "." || *relative.begin() == "..") return nlohmann::json();
  return "/pictures/" + percent_encode_path(relative.generic_string());
}

// A `picture` message of a stream's segment, every field of the frame and picture null (schema in
// docs/result-schema.md).
nlohmann::json PublishStage::picture_json(const std::string& stream_id, const std::string& label, uint64_t start_seq) {
  return {{"schema", "vapipe.segment"},
          {"schema_version", kSchemaVersion},
          {"stream_id", stream_id},
          {"event", "picture"},
          {"label", escape_invalid_utf8(label)},
          {"start_seq", start_seq},
          {"seq", nullptr},
          {"frame", nullptr},
          {"pts_ms", nullptr},
          {"capture_unix_ms", nullptr},
          {"camera_unix_ms", nullptr},
          {"picture", nullptr},
          {"picture_url_path", nullptr},
          {"error", nullptr},
          {"time_unix_ms", static_cast<double>(wall_clock_ns()) / 1e6}};
}

Status PublishStage::publish_picture(StreamState& st, const Message& event) {
  auto ms = [](int64_t ns) { return ns >= 0 ? nlohmann::json(static_cast<double>(ns) / 1e6) : nlohmann::json(); };
  bool taken = !event.event.picture.empty();
  std::string error = event.event.message;
  if (taken && picture_url_path(event.event.picture).is_null()) {
    // Only a file of the pictures' folder is the job's picture: a path from elsewhere (a message on a
    // stage input from another program) is never sent, served nor read by the webhooks and brokers.
    VAPIPE_LOG_WARN("stream '{}': a picture answer names {}, which is not under publish.segments_pictures_dir ({}): "
                    "refused", st.id, event.event.picture, config_->publish.segments_pictures_dir);
    taken = false;
    error = "the picture's path is not under publish.segments_pictures_dir";
  }
  // Which frame it is: the one asked for, or the next one ingest decoded (it no longer had that one).
  std::string frame = "next";
  if (auto asked = st.pictures_asked.find({event.event.label, event.event.segment_start_seq});
      asked != st.pictures_asked.end()) {
    if (asked->second.seq == static_cast<int64_t>(event.env.seq)) frame = asked->second.frame;
    // It came after all: not a failure (one said missing before a restart was not counted by this process).
    if (asked->second.said_missing && st.pictures_failed > 0) --st.pictures_failed;
    st.pictures_asked.erase(asked);
    save_picture_asks();
  }
  nlohmann::json j = picture_json(st.id, event.event.label, event.event.segment_start_seq);
  j["seq"] = event.env.seq;
  j["frame"] = frame;
  j["pts_ms"] = ms(event.env.pts_ns);
  j["capture_unix_ms"] = ms(event.env.capture_ns);
  j["camera_unix_ms"] = ms(event.env.camera_ns);
  if (taken) {
    j["picture"] = escape_invalid_utf8(event.event.picture);
    if (metrics_server_) j["picture_url_path"] = picture_url_path(event.event.picture);
  } else {
    j["error"] = escape_invalid_utf8(error);
  }
  ++(taken ? st.pictures : st.pictures_failed);
  // The open segment it is of keeps where it is served, for /healthz (a dashboard shows the truck).
  if (j["picture_url_path"].is_string()) {
    auto tracked = st.tracks.find(event.event.label);
    StreamState::LabelRun* open = tracked != st.tracks.end() ? &tracked->second.segment : &st.segment;
    if (open->frames > 0 && open->label == event.event.label && open->start_seq == event.event.segment_start_seq) {
      open->picture_url_path = j["picture_url_path"].get<std::string>();
    }
  }
  return publish(segment_topic(st.id), j);
}

// A `clip` message (schema in docs/result-schema.md): the segment's MP4 once ingest wrote it, or why not.
Status PublishStage::publish_clip(StreamState& st, const Message& event) {
  std::string error = event.event.clip.empty() ? event.event.message : "";
  nlohmann::json url = event.event.clip.empty() ? nlohmann::json() : picture_url_path(event.event.clip);
  if (!event.event.clip.empty() && url.is_null()) {
    VAPIPE_LOG_WARN("stream '{}': a clip answer names {}, which is not under publish.segments_pictures_dir ({}): "
                    "refused", st.id, event.event.clip, config_->publish.segments_pictures_dir);
    error = "the clip's path is not under publish.segments_pictures_dir";
  }
  const bool written = error.empty();
  if (auto asked = st.clips_asked.find({event.event.label, event.event.segment_start_seq});
      asked != st.clips_asked.end()) {
    // It came after all: not a failure.
    if (asked->second.said_missing && written && st.clips_failed > 0) --st.clips_failed;
    if (written && event.event.continues && !asked->second.ended) {
      // Its next part is due at its longest, or once the segment ends.
      asked->second.due = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::duration<double>(config_->publish.segments_clip_max_s)) +
                          picture_answer_timeout_;
      asked->second.said_missing = false;
    } else if (!(written && event.event.continues)) {
      st.clips_asked.erase(asked);
    }
  }
  nlohmann::json j{{"schema", "vapipe.segment"},
                   {"schema_version", kSchemaVersion},
                   {"stream_id", st.id},
                   {"event", "clip"},
                   {"label", escape_invalid_utf8(event.event.label)},
                   {"start_seq", event.event.segment_start_seq},
                   {"part", std::max<uint32_t>(1, event.event.attempt)},
                   {"continues", written && event.event.continues},
                   {"clip", written ? nlohmann::json(escape_invalid_utf8(event.event.clip)) : nlohmann::json()},
                   {"clip_url_path", written && metrics_server_ ? url : nlohmann::json()},
                   {"pts_ms", written && event.env.pts_ns >= 0 ? nlohmann::json(static_cast<double>(event.env.pts_ns) / 1e6)
                                                               : nlohmann::json()},
                   {"duration_s", written ? nlohmann::json(static_cast<double>(event.event.duration_ns) / 1e9)
                                          : nlohmann::json()},
                   {"turn", written && !event.event.turn.empty() ? nlohmann::json(event.event.turn) : nlohmann::json()},
                   {"cut_short", written && !event.event.message.empty() ? nlohmann::json(escape_invalid_utf8(event.event.message))
                                                                         : nlohmann::json()},
                   {"error", written ? nlohmann::json() : nlohmann::json(escape_invalid_utf8(error))},
                   {"time_unix_ms", static_cast<double>(wall_clock_ns()) / 1e6}};
  ++(written ? st.clips : st.clips_failed);
  return publish(segment_topic(st.id), j);
}

void PublishStage::prune_pictures() {
  const PublishConfig& p = config_->publish;
  pictures_pruned_at_ = std::time(nullptr);
  next_pictures_prune_ = std::chrono::steady_clock::now() + pictures_prune_period_;
  if (p.segments_pictures_keep_days == 0) return;
  const std::vector<std::string> removed =
      prune_segment_pictures(p.segments_pictures_dir, p.segments_pictures_keep_days, pictures_pruned_at_);
  if (removed.empty()) return;
  for (const auto& broker : mqtt_) broker->forget_deleted_pictures();
  VAPIPE_LOG_INFO("publish: removed {} day folder(s) of segment pictures older than {} days "
                  "(publish.segments_pictures_keep_days), the first {}",
                  removed.size(), p.segments_pictures_keep_days, removed.front());
}

// A segment held open across a lost connection (segments_reconnect_grace_s) goes on with its frame at
// segment.end_pts_ns: ingest cut its clip when the stream's decoder started over; it goes on in a next
// part, from before that frame.
void PublishStage::ask_clip_to_go_on(const StreamState& st, const StreamState::LabelRun& segment) {
  if (!config_->publish.segments_clips || !picture_requester_) return;
  picture_requester_(PictureRequest{st.id, segment.label, segment.start_seq, "", static_cast<int64_t>(segment.end_seq),
                                    segment.end_pts_ns, PictureRequest::Kind::kClipGoesOn});
}

Status PublishStage::publish_ended(StreamState& st, StreamState::LabelRun* segment) {
  const StreamState::LabelRun ended = *segment;
  *segment = StreamState::LabelRun{};
  if (replaying_) return Status::Ok();  // (its `ended` is in the file already)
  if (config_->publish.segments_clips && picture_requester_) {
    picture_requester_(PictureRequest{st.id, ended.label, ended.start_seq, "", static_cast<int64_t>(ended.end_seq),
                                      ended.end_pts_ns, PictureRequest::Kind::kClipEnd});
    if (auto asked = st.clips_asked.find({ended.label, ended.start_seq}); asked != st.clips_asked.end()) {
      // Written once the post-roll has come (by the stream's time; a live stream's is the wall clock's).
      asked->second.ended = true;
      asked->second.due = std::min(asked->second.due, std::chrono::steady_clock::now() +
                                                          std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                              std::chrono::duration<double>(
                                                                  config_->publish.segments_clip_post_s)) +
                                                          picture_answer_timeout_);
    }
  }
  return publish(segment_topic(st.id), segment_json(st.id, "ended", ended));
}

Status PublishStage::end_segment(StreamState& st) {
  st.segments_held_until.reset();
  for (auto& [label, track] : st.tracks) {
    if (track.segment.frames > 0) VAPIPE_RETURN_IF_ERROR(publish_ended(st, &track.segment));
  }
  st.tracks.clear();
  if (st.segment.frames == 0) return Status::Ok();
  return publish_ended(st, &st.segment);
}

Status PublishStage::close(Emitter& /*out*/) {
  update_metrics_snapshot();  // the final states, for a scrape before the process exits
  std::error_code ec;
  if (layout_ && std::filesystem::exists(restart_mark(*layout_), ec)) {
    // A stage crashed and the job restarts: this is not its end. Subscribers that wait for the job
    // summary keep waiting; an archive job's file goes on from here.
    VAPIPE_LOG_WARN("publish: the job restarts after a crash: no job summary from this run");
    // The lines in the file are not published again by the restarted job: their messages go to the
    // sinks now, before they stop.
    Status flushed = flush_jsonl();
    send_waiting_to_sinks();
    finish_sinks();
    write_sink_marks();
    return flushed;
  }
  // An archive job's file that refuses its lines fails the stage, once its summary is out on the bus.
  // A live job's: what was kept for it is lost with this process, and the summary counts it.
  Status flushed = flush_jsonl();
  if (jsonl_refusal_ && jsonl_.buffered_lines() > 0) {
    VAPIPE_LOG_ERROR("publish: publish.jsonl_path {} still refuses lines as the job ends ({}): the {} kept for it are "
                     "not recorded", jsonl_.path(), jsonl_refusal_->error, jsonl_.buffered_lines());
    jsonl_lines_lost_ += jsonl_.drop_oldest(0);
  }
  write_summary();
  Status s = bus_ ? publish(kJobSummaryTopic, summary_) : Status::Ok();
  if (flushed.ok()) flushed = flush_jsonl();
  if (jsonl_refusal_) jsonl_lines_lost_ += jsonl_.drop_oldest(0);  // (the summary's own line)
  send_waiting_to_sinks();  // (those of lines the file refused at the end too: the sinks may still take them)
  finish_sinks(true);
  write_sink_marks();
  VAPIPE_RETURN_IF_ERROR(flushed);
  return s;
}

size_t PublishStage::unfinished_streams() const {
  if (!config_ || config_->job.mode != JobMode::kArchive) return 0;
  size_t n = 0;
  for (const StreamState& st : streams_) {
    n += st.status != "done" && st.status != "failed" && st.status != "removed";
  }
  return n;
}

int PublishStage::exit_code() const {
  if (jsonl_unwritable_) return kExitJsonlUnwritable;
  if (summary_unwritable_) return kExitSummaryFileUnwritable;
  if (unfinished_streams() > 0) return kExitArchiveUnfinished;  // not finished, whatever else failed
  if (failed_streams_ > 0) return kExitSomeStreamsFailed;  // (the sinks' loss said in the log too)
  if (sinks_undelivered_ > 0) return kExitMessagesUndelivered;
  return failed_streams_ > 0 ? kExitSomeStreamsFailed : 0;
}

void PublishStage::write_summary() {
  // (On the monotonic clock: a wall clock stepped by 2 days billed 48 hours for an 11 s job.)
  const double wall_s = static_cast<double>(monotonic_clock_ns() - job_start_monotonic_ns_) / 1e9;
  uint64_t total_frames = 0, run_frames = 0;
  // Steady-state throughput: from the first frame's capture to the last result, without start-up,
  // and without the time when no stream had a frame under way (idle: a watched folder waiting for
  // files; before 2026-12-02 counted in, so that such a job's steady_fps said little).
  int64_t first_capture = 0, last_publish = 0;
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const StreamState& st : streams_) {
    // (on the monotonic clock: a wall clock stepped while the job ran makes no span)
    if (st.first_monotonic_ns && (!first_capture || st.first_monotonic_ns < first_capture)) first_capture = st.first_monotonic_ns;
    last_publish = std::max(last_publish, st.last_monotonic_ns);
    if (st.first_monotonic_ns) spans.emplace_back(st.first_monotonic_ns, st.last_monotonic_ns);
  }
  const double span_s = first_capture && last_publish > first_capture ? (last_publish - first_capture) / 1e9 : 0.0;
  const double steady_s = std::min(span_s, busy_seconds(std::move(spans)));
  const double idle_s = std::max(0.0, span_s - steady_s);
  nlohmann::json streams = nlohmann::json::array();
  std::string table;
  char line[512];
  std::snprintf(line, sizeof line, "  %-24s %-8s %9s %8s %9s %10s %12s  %s\n", "stream", "status", "frames", "errors",
                "wall_s", "fps", "latency_ms", "top label");
  table += line;
  for (const StreamState& st : all_streams()) {
    const double stream_wall = st.first_monotonic_ns && st.last_monotonic_ns > st.first_monotonic_ns
                                   ? (st.last_monotonic_ns - st.first_monotonic_ns) / 1e9
                                   : 0.0;
    const uint64_t this_run = st.results - st.earlier_results;  // rates and latencies are this run's
    const double fps = stream_wall > 0 ? this_run / stream_wall : 0.0;
    const double mean_latency = this_run ? st.latency_sum_ms / this_run : 0.0;
    total_frames += st.results;
    run_frames += this_run;
    // What the stream is mostly about: its five commonest top-1 labels (most results first).
    std::vector<std::pair<std::string, uint64_t>> ranked(st.labels.begin(), st.labels.end());
    std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    nlohmann::json top_labels = nlohmann::json::array();
    const uint64_t classified = st.results - st.frame_errors;
    for (size_t k = 0; k < std::min<size_t>(5, ranked.size()); ++k) {
      top_labels.push_back({{"label", ranked[k].first},
                            {"frames", ranked[k].second},
                            {"share", classified ? static_cast<double>(ranked[k].second) / classified : 0.0}});
    }
    streams.push_back({{"stream_id", st.id}, {"status", st.status}, {"message", st.message},
                       {"frames", st.results}, {"frame_errors", st.frame_errors}, {"damaged", st.damaged}, {"gaps", st.gaps},
                       {"out_of_order", st.out_of_order}, {"dropped", st.dropped}, {"reconnects", st.reconnects},
                       {"restarts", st.restarts}, {"comebacks", st.comebacks},
                       {"media_s", st.media_ns > 0 ? nlohmann::json(static_cast<double>(st.media_ns) / 1e9) : nlohmann::json()},
                       {"wall_s", stream_wall},
                       {"fps", fps}, {"latency_ms_mean", mean_latency}, {"latency_ms_max", st.latency_max_ms},
                       {"top_labels", top_labels}});
    const std::string top = top_labels.empty() ? std::string("-")
                                               : top_labels[0]["label"].get<std::string>() + " (" +
                                                     std::to_string(static_cast<int>(
                                                         100 * top_labels[0]["share"].get<double>() + 0.5)) +
                                                     "%)";
    std::snprintf(line, sizeof line, "  %-24s %-8s %9llu %8llu %9.2f %10.1f %12.1f  %s\n", st.id.c_str(),
                  st.status.c_str(), static_cast<unsigned long long>(st.results),
                  static_cast<unsigned long long>(st.frame_errors), stream_wall, fps, mean_latency, top.c_str());
    table += line;
  }
  // What went wrong, or is not whole, under the table: a status alone does not say which file is cut.
  for (const StreamState& st : all_streams()) {
    // (And why a camera stopped while it reconnected had no frames: it was said in the JSON only.)
    if (!st.message.empty() && st.message != kStoppedReason) {
      table += "  " + st.id + " (" + st.status + "): " + st.message + "\n";
    }
    // Its results that may be of smears: a camera losing packets, a damaged MPEG-TS file.
    if (st.damaged > 0) {
      table += "  " + st.id + ": " + std::to_string(st.damaged) + " of its " + std::to_string(st.results) +
               " results are of pictures decoded from damaged data (packets lost on the way; smeared up to the next "
               "key frame): their results say \"damaged\": true\n";
    }
  }
  // Cost at the configured price: GPU-hours billed for the job's wall time. A CPU-only run is billed
  // as one unit (the machine), so the figure stays comparable.
  const int gpu_count = std::getenv("VAPIPE_GPU_COUNT") ? std::atoi(std::getenv("VAPIPE_GPU_COUNT")) : 0;
  const double billed_hours = wall_s / 3600.0 * std::max(1, gpu_count);
  const double cost = billed_hours * config_->job.price_per_gpu_hour;
  summary_ = {{"schema", "vapipe.job_summary"},
              {"schema_version", kSchemaVersion},
              {"job", config_->job.name},
              {"mode", config_->job.mode == JobMode::kArchive ? "archive" : "live"},
              {"streams", streams},
              {"frames", total_frames},
              {"failed_streams", failed_streams_},
              {"unfinished_streams", unfinished_streams()},
              {"wall_s", wall_s},
              {"fps", wall_s > 0 ? run_frames / wall_s : 0.0},
              {"steady_s", steady_s},
              {"steady_fps", steady_s > 0 ? run_frames / steady_s : 0.0},
              {"idle_s", idle_s},
              {"resumed", resumed_},
              {"publish_restarted", restarted_},
              {"job_restarts", job_restarts_},
              {"frames_this_run", run_frames},
              {"results_file_lines_lost", jsonl_lines_lost_},
              {"gpu_count", gpu_count},
              {"price_per_gpu_hour", config_->job.price_per_gpu_hour},
              {"billed_hours", billed_hours},
              {"cost", cost},
              {"cost_per_1k_frames", run_frames ? cost * 1000.0 / run_frames : 0.0}};
  const std::string earlier =
      resumed_ ? " (" + std::to_string(total_frames - run_frames) + " of them by earlier runs)" : std::string();
  // A job that waited for work (a watched folder) says its rate while it had some, too.
  char busy[160] = "";
  if (idle_s >= 1.0 && steady_s > 0) {
    std::snprintf(busy, sizeof busy, "; %.1f frames/s over the %.1f s frames were under way (idle %s)",
                  run_frames / steady_s, steady_s, human_duration(idle_s).c_str());
  }
  std::snprintf(line, sizeof line,
                "job '%s': %llu frames%s from %zu streams in %.2f s (%.1f frames/s%s), %d failed; "
                "cost %.4f at %.2f per GPU-hour (%d GPU%s)\n",
                config_->job.name.c_str(), static_cast<unsigned long long>(total_frames), earlier.c_str(),
                streams.size(), wall_s, wall_s > 0 ? run_frames / wall_s : 0.0, busy, failed_streams_, cost,
                config_->job.price_per_gpu_hour, gpu_count, gpu_count == 1 ? "" : "s; CPU runs count as 1");
  std::string unfinished;
  if (const size_t n = unfinished_streams(); n > 0) {
    unfinished = "job '" + config_->job.name + "' stopped before its end: " + std::to_string(n) + " of " +
                 std::to_string(streams_.size()) + " streams did not reach theirs" +
                 (config_->publish.jsonl_path.empty()
                      ? std::string(" (no publish.jsonl_path: a new run starts them over)\n")
                      : "; `vapipe run " + (config_->source.rfind('<', 0) == 0 ? "" : config_->source + " ") +
                            "--resume` goes on from where they were\n");
  }
  if (jsonl_lines_lost_ > 0) {
    unfinished += "publish.jsonl_path refused lines while the job ran (a full disk): " +
                  std::to_string(jsonl_lines_lost_) + " of them are not in it (the bus had them all)\n";
  }
  std::fputs(("\nJob summary\n" + table + line + unfinished).c_str(), stdout);
  std::fflush(stdout);
  if (!config_->job.summary_path.empty()) {
    std::error_code ec;
    std::filesystem::path parent = std::filesystem::path(config_->job.summary_path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    // Whole or not at all (a reader never sees half of one), and a full disk is said, not ignored.
    if (Status st = write_file_atomically(config_->job.summary_path, json_text(summary_, 2) + "\n", 0644); !st.ok()) {
      // (Not lost in a log line: the job's record is not whole, as with a results file that cannot be
      // written. Found 2026-12-07: exit 0.)
      VAPIPE_LOG_ERROR("job.summary_path: {}: the job's summary is in the results (job/summary) but not in this file",
                       st.message());
      summary_unwritable_ = true;
    }
  }
}

}  // namespace vapipe
