// run, stage and validate: the commands that start the pipeline.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/open_streams.h"
#include "pipeline/cuda/gpu_info.h"
#include "pipeline/envelope.h"
#include "pipeline/file_identity.h"
#include "pipeline/http_url.h"
#include "pipeline/job_layout.h"
#include "pipeline/logging.h"
#include "pipeline/placement.h"
#include "pipeline/results_path.h"
#include "pipeline/running_job.h"
#include "pipeline/stage_runner.h"
#include "pipeline/stream_table.h"
#include "pipeline/supervisor.h"
#include "stages/batch/batch_stage.h"
#include "stages/infer/infer_stage.h"
#include "stages/infer/labels.h"
#include "stages/infer/torch_plugin.h"
#include "stages/ingest/ingest_stage.h"
#include "stages/ingest/stream_reader.h"
#include "stages/ingest/network_reachability.h"
#include "stages/preprocess/preprocess_stage.h"
#include "stages/publish/publish_stage.h"

namespace vapipe::cli {

// Publish's exit statuses are `vapipe run`'s (publish_stage.h and supervisor.h name them each).
static_assert(kExitSomeStreamsFailed == kExitStreamsFailed && kExitArchiveUnfinished == kExitStreamsUnfinished &&
              kExitJsonlUnwritable == kExitResultsUnwritable && kExitSummaryFileUnwritable == kExitSummaryUnwritable &&
              kExitMessagesUndelivered == kExitSinksUndelivered);
namespace {

struct ConfigChoice {
  std::string path;  // empty: the embedded demo
  std::vector<std::string> stage_args;
};

Result<Config> load(const ConfigChoice& c, const ConfigLoadOptions& options = {}) {
  return c.path.empty() ? load_demo_config(options) : load_config_file(c.path, nullptr, options);
}

// GPUs as the supervisor saw them (VAPIPE_VISIBLE_GPUS, set for every stage it starts), else probed.
int stage_gpu_count() {
  if (const char* n = std::getenv("VAPIPE_VISIBLE_GPUS"); n && *n) return std::atoi(n);
  return visible_gpu_count();
}

int config_error(const Status& s) {
  std::fprintf(stderr, "vapipe: %s\n", s.message().c_str());
  return kExitUsage;
}

}  // namespace

// --job-id names the job's sockets, shared memory and run folder, as job.name does: the same rules
// (a '/' or 120 characters made every stage fail to start, exit 2, instead of a usage error).
bool valid_job_id(const std::string& id, const char* command) {
  if (validate_stream_id(id).ok()) return true;
  std::fprintf(stderr, "vapipe %s: --job-id '%s' must be 1 to 64 letters, digits, '_', '-' or '.', and not '.' or '..' "
                       "(as job.name)\n", command, id.c_str());
  return false;
}

// What the config alone cannot know: whether GStreamer here reads each network stream's scheme.
static Status streams_readable_here(const Config& c) {
  for (const auto& s : c.streams) {
    if (s.parsed.kind != UriKind::kNetwork || s.is_member()) continue;
    if (const std::string why = unreadable_uri_scheme(s.uri); !why.empty()) {
      // (At its uri's line, as a bad value is said: `FILE:LINE: key.path: what`.)
      const std::string at = s.uri_line > 0 ? std::to_string(s.uri_line) + ": " + s.uri_key
                                            : std::to_string(s.line) + ": stream '" + s.id + "'";
      return InvalidArgument(c.source + ":" + at + ": " + why);
    }
  }
  return Status::Ok();
}

int run_command(const std::vector<std::string>& args, const std::string& self_exe) {
  // SIGHUP first: its default kills the process, and one sent while the config loads (a script that
  // edits the file as the job starts, `systemctl reload` racing a start) is a reload the job makes
  // once it runs, of the file as it is then.
  install_reload_handler();
  ConfigChoice choice;
  SupervisorOptions options;
  options.self_exe = self_exe;
  options.check_streams = &streams_readable_here;
  options.deliver_what_sinks_missed = &PublishStage::deliver_what_sinks_missed;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--job-id" && i + 1 < args.size()) {
      options.job_id = args[++i];
      if (!valid_job_id(options.job_id, "run")) return kExitUsage;
    } else if (args[i] == "--resume") {
      options.resume = true;
    } else if (!args[i].empty() && args[i][0] != '-' && choice.path.empty()) {
      choice.path = args[i];
    } else {
      std::fprintf(stderr, "vapipe run: unexpected argument '%s'\nusage: vapipe run [CONFIG.yaml] [--job-id ID] [--resume]\n",
                   args[i].c_str());
      return kExitUsage;
    }
  }
  auto config = choice.path.empty() ? load_demo_config() : load_config_file(choice.path, &options.config_text);
  if (!config.ok()) return config_error(config.status());
  options.config_path = choice.path;
  if (options.resume && config->publish.jsonl_path.empty()) {
    return config_error(InvalidArgument(config->source + ": --resume needs publish.jsonl_path: the job's results so far "
                                        "are read from that file, and the rest appended to it"));
  }
  if (options.resume && config->job.mode != JobMode::kArchive) {
    return config_error(InvalidArgument(config->source + ": --resume is for archive jobs (job.mode is live: a live "
                                        "job simply starts again)"));
  }
  options.config_args = choice.path.empty() ? std::vector<std::string>{"--demo"}
                                            : std::vector<std::string>{"--config", choice.path};
  // What this machine cannot run (a GPU it lacks, nvdec or cuda without one) is a config error, said as
  // one (`vapipe: FILE:LINE: key: ...`, exit 1), not a log line of the supervisor's.
  options.visible_gpus = visible_gpu_count();
  if (auto placed = plan_placement(*config, options.visible_gpus); !placed.ok()) return config_error(placed.status());
  init_logging("run", config->log.level);
  if (choice.path.empty()) VAPIPE_LOG_INFO("no config given: running the demo (configs/demo.yaml)");
  // (After the config: a Ctrl-C while it loads ends the process at once, by its default, and a handler
  // would have interrupted the reading of a config that is a pipe, said as a config error.)
  ShutdownFlags& flags = install_shutdown_handlers();
  const int code = run_supervisor(*config, options, flags);
  if (code == kExitStreamsUnfinished) die_by_stop_signal(flags);
  return code;
}

int stage_command(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::fprintf(stderr, "usage: vapipe stage NAME [--config CONFIG.yaml | --demo] [--job-id ID] [--lane N]\n");
    return kExitUsage;
  }
  auto kind = parse_stage_kind(args[0]);
  if (!kind) {
    std::fprintf(stderr, "vapipe stage: unknown stage '%s' (ingest, preprocess, batch, infer, publish)\n",
                 args[0].c_str());
    return kExitUsage;
  }
  ConfigChoice choice;
  std::string job_id;
  bool demo = false;
  uint32_t lane_index = 0;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--config" && i + 1 < args.size()) {
      choice.path = args[++i];
    } else if (args[i] == "--demo") {
      demo = true;
    } else if (args[i] == "--job-id" && i + 1 < args.size()) {
      job_id = args[++i];
      if (!valid_job_id(job_id, "stage")) return kExitUsage;
    } else if (args[i] == "--lane" && i + 1 < args.size()) {
      const std::string& given = args[++i];
      char* end = nullptr;
      errno = 0;
      const unsigned long lane = std::strtoul(given.c_str(), &end, 10);
      if (given.empty() || given.find_first_not_of("0123456789") != std::string::npos || errno == ERANGE || lane > 1023) {
        std::fprintf(stderr, "vapipe stage: --lane wants a lane number from 0 (the job's first), got '%s'\n", given.c_str());
        return kExitUsage;
      }
      lane_index = static_cast<uint32_t>(lane);
    } else {
      std::fprintf(stderr, "vapipe stage: unexpected argument '%s'\n", args[i].c_str());
      return kExitUsage;
    }
  }
  if (choice.path.empty() && !demo) {
    std::fprintf(stderr, "vapipe stage: give --config CONFIG.yaml (or --demo)\n");
    return kExitUsage;
  }
  // Started by `vapipe run`: the streams are its table's (read below), not a glob's files found again.
  const char* from_table = std::getenv(kStreamsFromTableEnv);
  ConfigLoadOptions load_options;
  load_options.expand_globs = !(from_table && *from_table);
  // Started by `vapipe run` from a file: the config the job started with (its copy in the run folder),
  // not the file as it is now.
  std::string as_started;
  if (const char* copy = std::getenv(kConfigAsStartedEnv); copy && *copy && !choice.path.empty()) {
    std::ifstream in(copy);
    if (!in) {
      return config_error(NotFound(std::string("the job's copy of its config, ") + copy + " (" + kConfigAsStartedEnv +
                                   " is set: started by vapipe run?), cannot be read"));
    }
    std::stringstream text;
    text << in.rdbuf();
    as_started = text.str();
    load_options.file_text = &as_started;
  }
  auto config = load(choice, load_options);
  if (!config.ok()) return config_error(config.status());
  if (job_id.empty()) job_id = config->job.name;  // stages started by hand agree on this
  init_logging(stage_kind_name(*kind), config->log.level);
  configure_zmq_io_threads(static_cast<int>(config->transport.effective_io_threads(std::thread::hardware_concurrency())));
  ShutdownFlags& flags = install_shutdown_handlers();
  if (const char* stopping = std::getenv(kStopRequestedEnv); stopping && *stopping) flags.stop = true;
  // Under `vapipe run`, the job's streams are the supervisor's table: the list it planned with (a
  // glob expanded once), and what reloads changed since.
  std::optional<StreamTable> stream_table;
  {
    const JobLayout layout = make_job_layout(*config, job_id);
    auto table = read_job_stream_table(stream_table_path(layout));
    if (!table.ok()) return config_error(table.status());
    stream_table = std::move(*table);
    if (!stream_table && !load_options.expand_globs) {
      return config_error(NotFound("the job's stream table " + stream_table_path(layout) +
                                   " is missing (" + kStreamsFromTableEnv + " is set: started by vapipe run?)"));
    }
    if (stream_table) {
      std::vector<StreamConfig> streams;
      for (const StreamTableEntry& e : stream_table->entries) {
        auto s = stream_config_of(e);
        if (!s.ok()) return config_error(s.status().with_context("stream '" + e.id + "'"));
        streams.push_back(std::move(*s));
      }
      config->streams = std::move(streams);
    }
  }
  // The same plan as the supervisor's: it passes its GPU count down, so both see the same machine.
  auto placement = plan_placement(*config, stage_gpu_count());
  if (!placement.ok()) return config_error(placement.status());
  if (stream_table) {
    // Streams added by a reload went to the lane with the fewest streams, not round-robin: a stage
    // started again after a crash takes its lane's streams from the table, as ingest does.
    for (Lane& lane : placement->lanes) lane.streams.clear();
    for (const StreamTableEntry& e : stream_table->entries) {
      if (e.lane < placement->lanes.size()) placement->lanes[e.lane].streams.push_back(e.index);
    }
  }
  if (lane_index >= placement->lanes.size()) {
    std::fprintf(stderr, "vapipe stage: --lane %u, but the job has %zu lane%s (from 0)\n", lane_index, placement->lanes.size(),
                 placement->lanes.size() == 1 ? "" : "s");
    return kExitUsage;
  }
  const Lane& lane = placement->lanes[lane_index];
  JobLayout layout = make_job_layout(*config, job_id, lane_index);

  Status status;
  int code = 0;
  switch (*kind) {
    case StageKind::kIngest:
      status = run_ingest(*config, layout, lane, placement->lanes.size(), flags);
      break;
    case StageKind::kPreprocess: {
      PreprocessStage stage;
      status = run_stage(stage, *config, layout, &lane, flags);
      break;
    }
    case StageKind::kBatch: {
      BatchStage stage;
      status = run_stage(stage, *config, layout, &lane, flags);
      break;
    }
    case StageKind::kInfer: {
      // LibTorch loads here, before the stage opens, so that open's time (the watchdog's measure of the
      // model's slowest work, 10 x the load and warm-up) is the model's and not the library's (0.5 to 1 s
      // more, which made a 2 s job.stage_timeout_s 10 s). A plugin that does not load fails open, naming why.
      if (auto torch = load_torch_plugin(); torch.ok()) VAPIPE_LOG_INFO("infer: {}", *torch);
      InferStage stage;
      status = run_stage(stage, *config, layout, &lane, flags);
      break;
    }
    case StageKind::kPublish: {
      PublishStage stage;
      status = run_stage(stage, *config, layout, nullptr, flags);
      code = stage.exit_code();
      break;
    }
  }
  if (!status.ok()) {
    VAPIPE_LOG_ERROR("{}", status.message());
    return code == kExitResultsUnwritable ? code : kExitUsage;  // the supervisor does not restart that
  }
  return code;
}

// The `test` event `vapipe validate --send-test` sends, of the config's first stream.
static nlohmann::json test_event(const Config& c) {
  const std::string stream = c.streams.empty() ? "-" : c.streams.front().id;
  return {{"schema", "vapipe.event"}, {"schema_version", 1}, {"stream_id", stream}, {"event", "test"}, {"uri", ""},
          {"message", "a test message from vapipe validate --send-test: this receiver gets job '" + c.job.name +
                          "''s messages"},
          {"frames", 0}, {"dropped", 0}, {"warning", nullptr},
          {"time_unix_ms", static_cast<double>(wall_clock_ns()) / 1e6}};
}

// vapipe validate --send-test: a `test` event POSTed to webhook `index` of the config, one try within
// `timeout`; empty when the receiver took it (2xx), else why not.
static std::string send_test_message(const Config& c, size_t index, std::chrono::seconds timeout) {
  WebhookConfig hook = c.publish.webhooks[index];
  hook.timeout_s = std::min(hook.timeout_s, static_cast<double>(timeout.count()));
  WebhookSender sender(hook, index);
  const nlohmann::json event = test_event(c);
  const std::string stream = event["stream_id"].get<std::string>();
  const std::string topic = "events/" + stream;
  sender.post(topic, webhook_request_body(hook.format, topic, event, event.dump()));
  // One try: until it is answered, refused or failed once (a failure would be tried again in 1 s).
  const auto deadline = std::chrono::steady_clock::now() + timeout + std::chrono::seconds(1);
  WebhookStats s = sender.stats();
  while (s.delivered + s.refused + s.retries == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    s = sender.stats();
  }
  sender.finish(std::chrono::milliseconds(0));
  if (s.delivered > 0) return "";
  if (s.last_error.empty()) return "no answer within " + std::to_string(timeout.count()) + " s";
  return (s.refused > 0 ? "refused it: " : "") + s.last_error;
}

// A broker of the config as validate uses it: it says no status (a job's "online" would be untrue).
static MqttConfig broker_for_validate(const Config& c, size_t index, std::chrono::seconds timeout) {
  MqttConfig m = c.publish.mqtt[index];
  m.timeout_s = std::min(m.timeout_s, static_cast<double>(timeout.count()));
  m.status_topic.clear();
  return m;
}

// What a broker said of itself when it accepted validate's connection: the MQTT version, and the largest
// packet it takes (MQTT 5's CONNACK; AWS IoT Core's 128 KB, Mosquitto's max_packet_size). With
// pictures published, one over that is left out: `*warning` says so beforehand, with the setting that
// would say it in the config.
static std::string broker_terms(const MqttConfig& m, const MqttStats& s, std::string* warning) {
  std::string terms = s.protocol == 4 ? "MQTT 3.1.1" : "MQTT 5";
  if (s.broker_max_packet == 0) return terms;
  const double kb = static_cast<double>(s.broker_max_packet) / 1000;
  terms += fmt::format(", takes messages of up to {:.0f} KB", kb);
  // A picture's packet is its JPEG plus its topic and MQTT's header: 1 KB is room enough for those.
  constexpr uint32_t kRoomForTopic = 1000;
  if (m.pictures && uint64_t{m.pictures_max_kb} * 1000 + kRoomForTopic > s.broker_max_packet) {
    const uint32_t fits_kb = s.broker_max_packet > 2 * kRoomForTopic ? (s.broker_max_packet - kRoomForTopic) / 1000 : 1;
    *warning = fmt::format("segment pictures over {:.0f} KB will not be published to it, though pictures_max_kb "
                           "allows {} KB (set it to {} to match the broker)",
                           kb, m.pictures_max_kb, fits_kb);
  }
  return terms;
}

// vapipe validate --open: an MQTT connection to broker `index` of the config; empty when it accepted
// (then `*terms`: what it said of itself, and `*warning`, what that means for the config).
static std::string mqtt_connect_failure(const Config& c, size_t index, std::chrono::seconds timeout,
                                        std::string* terms, std::string* warning) {
  MqttPublisher publisher(broker_for_validate(c, index, timeout), index, c.job.name);
  const Status connected = publisher.wait_connected(timeout + std::chrono::seconds(1));
  publisher.finish(std::chrono::milliseconds(0));
  if (!connected.ok()) return connected.message();
  *terms = broker_terms(c.publish.mqtt[index], publisher.stats(), warning);
  return "";
}

// validate --send-test: the config's `test` event published by `sink` (an MqttPublisher, a
// RedisStreamsPublisher, of `format`) on its events/<first stream> topic, waited for until the sink says
// it was delivered or refused, or `timeout` passed. Empty when it was delivered; else why not (`refused`:
// what to say of a refusal, "" for the sink's last error). `*topic`: the bus topic it went on.
template <typename Sink>
static std::string send_test_through(Sink& sink, const Config& c, const std::string& format,
                                     std::chrono::seconds timeout, const std::string& refused, std::string* topic) {
  const nlohmann::json event = test_event(c);
  *topic = "events/" + event["stream_id"].get<std::string>();
  sink.publish(*topic, format == "text" ? webhook_text(*topic, event) : event.dump());
  const Status connected = sink.wait_connected(timeout + std::chrono::seconds(1));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (connected.ok() && sink.stats().delivered == 0 && sink.stats().refused == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  sink.finish(std::chrono::milliseconds(0));
  const auto s = sink.stats();
  if (s.delivered > 0) return "";
  if (!connected.ok()) return connected.message();
  if (s.refused > 0) return refused.empty() ? s.last_error : refused;
  return "no answer within " + std::to_string(timeout.count()) + " s";
}

// vapipe validate --send-test: a `test` event published to broker `index` (on `*topic`), acknowledged
// within `timeout` (qos 0: written); empty when it was, else why not.
static std::string send_mqtt_test_message(const Config& c, size_t index, std::chrono::seconds timeout,
                                           std::string* topic) {
  MqttPublisher publisher(broker_for_validate(c, index, timeout), index, c.job.name);
  std::string bus_topic;
  std::string why = send_test_through(publisher, c, c.publish.mqtt[index].format, timeout,
                                      "it refused the message (too large?)", &bus_topic);
  *topic = publisher.mqtt_topic(bus_topic);
  return why;
}

// A Redis server of the config as validate uses it: its timeout at most validate's.
static RedisConfig server_for_validate(const Config& c, size_t index, std::chrono::seconds timeout) {
  RedisConfig r = c.publish.redis[index];
  r.timeout_s = std::min(r.timeout_s, static_cast<double>(timeout.count()));
  return r;
}

// vapipe validate --open: a connection to Redis server `index` of the config (AUTH, SELECT, PING);
// empty when it took it.
// `*node`: the server connected to (Sentinel's master).
static std::string redis_connect_failure(const Config& c, size_t index, std::chrono::seconds timeout, std::string* node) {
  RedisStreamsPublisher publisher(server_for_validate(c, index, timeout), index);
  const Status connected = publisher.wait_connected(timeout + std::chrono::seconds(1));
  *node = publisher.stats().node;
  publisher.finish(std::chrono::milliseconds(0));
  return connected.ok() ? "" : connected.message();
}

// vapipe validate --send-test: a `test` event added to server `index`'s stream of its topic (`*key`),
// answered with its id within `timeout`; empty when it was, else why not.
static std::string send_redis_test_message(const Config& c, size_t index, std::chrono::seconds timeout,
                                           std::string* key, std::string* node) {
  RedisStreamsPublisher publisher(server_for_validate(c, index, timeout), index);
  std::string bus_topic;
  std::string why = send_test_through(publisher, c, c.publish.redis[index].format, timeout, "", &bus_topic);
  *key = publisher.stream_key(bus_topic);
  *node = publisher.stats().node;
  return why;
}

// A Kafka cluster of the config as validate uses it: its timeout at most validate's.
static KafkaConfig cluster_for_validate(const Config& c, size_t index, std::chrono::seconds timeout) {
  KafkaConfig k = c.publish.kafka[index];
  k.timeout_s = std::min(k.timeout_s, static_cast<double>(timeout.count()));
  return k;
}

// vapipe validate --open: cluster `index` of the config asked for its metadata (its brokers, its
// sign-in, its TLS); empty when it answered.
static std::string kafka_connect_failure(const Config& c, size_t index, std::chrono::seconds timeout) {
  KafkaPublisher publisher(cluster_for_validate(c, index, timeout), index);
  const Status connected = publisher.wait_connected(timeout + std::chrono::seconds(1));
  publisher.finish(std::chrono::milliseconds(0));
  return connected.ok() ? "" : connected.message();
}

// vapipe validate --send-test: a `test` event produced to cluster `index` (its topic `*topic`),
// acknowledged within `timeout`; empty when it was, else why not.
static std::string send_kafka_test_message(const Config& c, size_t index, std::chrono::seconds timeout,
                                           std::string* topic) {
  KafkaPublisher publisher(cluster_for_validate(c, index, timeout), index);
  std::string bus_topic;
  std::string why = send_test_through(publisher, c, c.publish.kafka[index].format, timeout, "", &bus_topic);
  *topic = publisher.kafka_topic(bus_topic) + " (key " + kafka_key_of(bus_topic) + ")";
  return why;
}

// --reload: what a reload now would do to each job running with the config file at `path` (its text and
// config as just read), as that job would do it. 0, or kExitUsage when no job runs with it or a job
// would refuse the reload (a script then sends no SIGHUP).
// The jobs running on this host with the config file at `path`; none is said on stderr, as `command`.
std::vector<RunningJob> jobs_to_reload(const std::string& path, const char* command) {
  std::vector<RunningJob> jobs = running_jobs_of(path);
  if (jobs.empty()) {
    std::fprintf(stderr, "%s: no job started with %s (`vapipe run %s`) is running on this host: there is nothing to "
                 "reload\n", command, path.c_str(), path.c_str());
  }
  return jobs;
}

int say_what_a_reload_would_do(const std::string& path, const std::string& text, const Config& config) {
  const std::vector<RunningJob> jobs = jobs_to_reload(path, "vapipe validate --reload");
  if (jobs.empty()) return kExitUsage;
  int outcome = 0;
  for (const RunningJob& job : jobs) {
    if (!job.unreadable.empty()) {
      std::printf("  a job started with it runs in %s, but %s\n", job.run_dir.c_str(), job.unreadable.c_str());
      outcome = kExitUsage;
      continue;
    }
    const std::string which = "the job running with it (vapipe run, pid " + std::to_string(job.pid) + ")";
    auto preview = preview_reload(job, text, config);
    if (!preview.ok()) {
      std::printf("  a reload of %s would be refused, and change nothing: %s\n", which.c_str(),
                  preview.status().message().c_str());
      outcome = kExitUsage;
    } else if (!preview->change.changed() && !settings_changed(preview->change)) {
      std::printf("  a reload of %s would change no stream: its streams are these (a camera that has ended, "
                  "given up or failed, would start again)\n", which.c_str());
    } else if (!preview->change.changed()) {
      std::printf("  a reload of %s would change no stream, and: %s\n", which.c_str(),
                  describe_settings_reload(preview->change).c_str());
    } else {
      std::printf("  a reload of %s would: %s; %zu streams then\n", which.c_str(),
                  describe_reload(preview->change, preview->lanes).c_str(), preview->streams_then);
    }
  }
  return outcome;
}

int reload_command(const std::vector<std::string>& args) {
  std::string path;
  double timeout_s = 60;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--timeout" && i + 1 < args.size()) {
      char* end = nullptr;
      timeout_s = std::strtod(args[++i].c_str(), &end);
      if (args[i].empty() || !end || *end || !(timeout_s > 0 && timeout_s <= 3600)) {
        std::fprintf(stderr, "vapipe reload: --timeout wants seconds above 0, up to 3600, got '%s'\n", args[i].c_str());
        return kExitUsage;
      }
    } else if (path.empty() && args[i].rfind("--", 0) != 0) {
      path = args[i];
    } else {
      std::fprintf(stderr, "usage: vapipe reload CONFIG.yaml [--timeout S]\n");
      return kExitUsage;
    }
  }
  if (path.empty()) {
    std::fprintf(stderr, "usage: vapipe reload CONFIG.yaml [--timeout S]\n");
    return kExitUsage;
  }
  const std::vector<RunningJob> jobs = jobs_to_reload(path, "vapipe reload");
  if (jobs.empty()) return kExitUsage;
  int outcome = 0;
  for (const RunningJob& job : jobs) {
    const std::string which = "the job running with " + path + " (vapipe run, pid " + std::to_string(job.pid) + ")";
    if (!job.unreadable.empty()) {
      std::printf("%s: %s\n", which.c_str(), job.unreadable.c_str());
      outcome = std::max(outcome, kExitUsage);
      continue;
    }
    auto answer = reload_and_wait(job.run_dir, job.pid,
                                  std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
    if (!answer.ok()) {
      std::printf("%s: %s\n", which.c_str(), answer.status().message().c_str());
      outcome = std::max(outcome, kExitUsage);
      continue;
    }
    std::printf("%s %s\n%s", which.c_str(), answer->said.c_str(), answer->lanes.c_str());
    switch (answer->verdict) {
      case ReloadAnswer::Verdict::kTaken:
        break;
      case ReloadAnswer::Verdict::kRefused:
      case ReloadAnswer::Verdict::kModelNotUsed:
        outcome = std::max(outcome, kExitUsage);
        break;
      case ReloadAnswer::Verdict::kNoAnswer:
      case ReloadAnswer::Verdict::kModelNotYetTaken:
        outcome = std::max(outcome, 2);
        break;
    }
  }
  return outcome;
}

int validate_command(const std::vector<std::string>& all_args) {
  std::vector<std::string> args;
  bool open = false;
  bool reload = false;  // --reload: what a reload of the job running with this file would do
  bool send_test = false;  // --send-test: a test message POSTed to each webhook
  // --open: how long each stream may take to its first frame, and how many open at once (a site's slow
  // NVR, or a link that many cameras at once would fill).
  long long open_timeout_s = 15, open_at_once = 8;
  std::string unexpected;
  auto whole_number = [](const std::string& text, long long low, long long high, long long* out) {
    char* end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || !end || *end || v < low || v > high) return false;
    *out = v;
    return true;
  };
  for (size_t i = 0; i < all_args.size(); ++i) {
    const std::string& a = all_args[i];
    if (a == "--open") {
      open = true;
    } else if (a == "--reload") {
      reload = true;
    } else if (a == "--send-test") {
      send_test = true;
    } else if ((a == "--timeout" || a == "--at-once") && i + 1 < all_args.size()) {
      const bool timeout = a == "--timeout";
      if (!whole_number(all_args[++i], 1, timeout ? 3600 : 256, timeout ? &open_timeout_s : &open_at_once)) {
        std::fprintf(stderr, "vapipe validate: %s wants a whole number from 1 to %d, got '%s'\n", a.c_str(),
                     timeout ? 3600 : 256, all_args[i].c_str());
        return kExitUsage;
      }
    } else if (!args.empty() || (a.size() > 1 && a[0] == '-')) {
      unexpected = a;  // a mistyped flag, or a second file: named, not only the usage printed
    } else {
      args.push_back(a);
    }
  }
  if (args.size() != 1 || !unexpected.empty()) {
    if (!unexpected.empty()) std::fprintf(stderr, "vapipe validate: unexpected argument '%s'\n", unexpected.c_str());
    std::fprintf(stderr,
                 "usage: vapipe validate CONFIG.yaml [--reload] [--open] [--send-test] [--timeout S] [--at-once N]\n");
    return kExitUsage;
  }
  std::string config_text;
  auto config = load_config_file(args[0], &config_text);
  if (!config.ok()) return config_error(config.status());
  const Config& c = *config;
  if (Status readable = streams_readable_here(c); !readable.ok()) return config_error(readable);
  // Labels the config names by themselves must be the labels file's (infer checks the same at start).
  const bool names_labels = !c.publish.segments_min_score_by_label.empty() ||
                            std::any_of(c.publish.webhooks.begin(), c.publish.webhooks.end(),
                                        [](const WebhookConfig& w) { return !w.labels.empty(); }) ||
                            std::any_of(c.publish.mqtt.begin(), c.publish.mqtt.end(),
                                        [](const MqttConfig& m) { return !m.labels.empty(); });
  if (names_labels) {
    auto labels = load_labels(c.infer.labels);
    if (!labels.ok()) return config_error(labels.status());
    if (Status named = check_labels_the_config_names(c, *labels); !named.ok()) return config_error(named);
  }
  std::printf("%s: OK\n  job '%s', %s mode, %zu streams\n", c.source.c_str(), c.job.name.c_str(),
              c.job.mode == JobMode::kArchive ? "archive" : "live", c.streams.size());
  // The config may be meant for another machine (a GPU server, checked on a laptop): what this one
  // cannot run (gpus, a cuda device, nvdec) is said, not refused, as `vapipe run` here would refuse it.
  if (auto placed = plan_placement(c, visible_gpu_count()); !placed.ok()) {
    std::printf("  NOT ON THIS MACHINE: `vapipe run` here refuses it: %s\n", placed.status().message().c_str());
  }
  // So are the files it names that this machine lacks or may not read (a README example's path kept,
  // a typo): `vapipe run` here would fail at start (the model, the labels) or fail those streams.
  auto missing_here = [&c](int line, const std::string& key, const std::string& path) {
    std::error_code ec;
    const char* why = !std::filesystem::exists(path, ec)           ? "no such file"
                      : std::filesystem::is_directory(path, ec)    ? "a folder, not a file"
                      : ::access(path.c_str(), R_OK) != 0          ? "this user may not read it"
                                                                   : nullptr;
    if (!why) return;
    std::printf("  MISSING HERE: %s%s: %s: %s (`vapipe run` here fails %s)\n",
                line > 0 ? (c.source + ":" + std::to_string(line) + ": ").c_str() : "", key.c_str(), path.c_str(), why,
                key.rfind("infer.", 0) == 0 ? "at start" : "that stream");
  };
  missing_here(c.infer.model_line, "infer.model", c.infer.model);
  missing_here(c.infer.labels_line, "infer.labels", c.infer.labels);
  for (const auto& s : c.streams) {
    if (s.parsed.kind == UriKind::kFile && !s.is_member()) {
      missing_here(s.uri_line, s.uri_key.empty() ? "stream '" + s.id + "'" : s.uri_key, file_uri_path(s.uri));
    }
  }
  for (const auto& s : c.streams) {
    const double max_fps = s.max_fps >= 0 ? s.max_fps : c.ingest.max_fps;
    char rate[48] = "", region[96] = "";
    if (max_fps > 0) std::snprintf(rate, sizeof rate, " (at most %g frames/s)", max_fps);
    if (!s.whole_frame()) {
      std::snprintf(region, sizeof region, " (region x %g, y %g, width %g, height %g of the frame)", s.roi[0], s.roi[1],
                    s.roi[2], s.roi[3]);
    }
    char jitter[48] = "";
    if (s.rtsp_latency_ms) std::snprintf(jitter, sizeof jitter, " (RTSP jitter buffer %u ms)", *s.rtsp_latency_ms);
    const std::string turned = s.turn ? std::string(" (turned ") + orientation_name(*s.turn) + ")" : std::string();
    const std::string trust = !s.tls.fingerprint.empty() ? " (TLS certificate pinned: SHA-256 " + s.tls.fingerprint + ")"
                              : !s.tls.verify             ? " (TLS certificate not checked)"
                              : !s.tls.ca_file.empty() ? " (TLS certificate checked against " + s.tls.ca_file + ")"
                                                       : std::string();
    std::string part;
    if (!s.whole_file()) {
      part = " (from " + media_time_text(s.from_ns) + (s.to_ns >= 0 ? " to " + media_time_text(s.to_ns) : " on") + ")";
    }
    std::string recorded;
    if (s.recorded.from == RecordingStart::From::kContainer) {
      recorded = " (recorded at: its container's creation date)";
    } else if (s.recorded.known()) {
      recorded = " (recorded from " + local_time_text(s.recorded.unix_ns) +
                 (s.recorded.from == RecordingStart::From::kFileName ? ", its file name)" : ")");
    }
    if (s.is_member()) {
      // Its frames are its source's: only what it classifies of them is its own.
      std::printf("    %-20s frames of '%s'%s%s\n", s.id.c_str(), s.source.c_str(), region, turned.c_str());
      continue;
    }
    // A live job's file comes at its own pace, as a camera sends (stop 55): said, as it was not so before.
    const char* paced = c.job.mode != JobMode::kLive || s.parsed.kind != UriKind::kFile ? ""
                        : s.loop ? " (read at its own pace, as a camera sends, again from its start at each end)"
                                 : " (read at its own pace, as a camera sends)";
    std::printf("    %-20s %s%s%s%s%s%s%s%s%s%s\n", s.id.c_str(), redact_uri(s.uri).c_str(), part.c_str(),
                c.ingest.keyframes_only_for(s) ? " (key frames only)" : "", rate, region, jitter, turned.c_str(),
                trust.c_str(), recorded.c_str(), paced);
  }
  std::vector<std::pair<std::string, std::string>> sources;
  for (const auto& s : c.streams) {
    if (!s.is_member()) sources.emplace_back(s.id, s.uri);
  }
  for (const SharedSource& shared : shared_network_sources(sources)) std::printf("  note: %s\n", describe(shared).c_str());
  for (const std::string& note : c.notes) std::printf("  note: %s\n", note.c_str());
  std::printf("  model %s\n  labels %s\n  results on %s\n", c.infer.model.c_str(), c.infer.labels.c_str(),
              c.publish.endpoint.c_str());
  if (results_path_is_timed(c.publish.jsonl_path)) {
    const int64_t now_s = static_cast<int64_t>(std::time(nullptr));
    std::printf("  results file %s, one by the date (now %s)\n", c.publish.jsonl_path.c_str(),
                results_file_at(c.publish.jsonl_path, now_s).c_str());
  } else if (!c.publish.jsonl_path.empty()) {
    std::printf("  results file %s\n", c.publish.jsonl_path.c_str());
  }
  // Public keys only: subscribers need the bus's; secret keys never reach the output.
  if (!c.publish.curve_keys.empty()) {
    std::printf("  bus CURVE public key %s (give it to subscribers: vapipe sub --server-key)\n",
                c.publish.curve_keys.public_key.c_str());
    if (!c.publish.curve_clients.empty()) {
      std::printf("  %zu authorized subscriber key(s) from %s\n", c.publish.curve_clients.size(),
                  c.publish.curve_authorized_keys.c_str());
    }
  }
  if (!c.transport.curve_keys.empty()) {
    std::printf("  stage edges: CURVE with the job key %s\n", c.transport.curve_keys.public_key.c_str());
  }
  if (!c.publish.metrics_address.empty()) {
    const PublishConfig& p = c.publish;
    const bool tls = !p.metrics_tls_cert_file.empty();
    const std::string auth = !p.metrics_token.empty()          ? " (bearer token from " + p.metrics_token_file + ")"
                             : p.metrics_tls_client_ca_file.empty() ? " (no authentication)"
                                                                    : "";
    const std::string tls_text =
        !tls ? ""
             : " (TLS certificate " + p.metrics_tls_cert_file +
                   (p.metrics_tls_client_ca_file.empty()
                        ? std::string()
                        : "; clients need a certificate signed by a CA in " + p.metrics_tls_client_ca_file) +
                   ")";
    std::printf("  metrics on %s://%s/metrics%s%s\n", tls ? "https" : "http", p.metrics_address.c_str(), auth.c_str(),
                tls_text.c_str());
  }
  if (c.publish.segments_min_frames > 0) {
    const PublishConfig& p = c.publish;
    char text[64] = "";
    if (p.segments_min_score > 0) std::snprintf(text, sizeof text, " at a score of %g or more", p.segments_min_score);
    std::string minimums = text, own;
    for (const auto& [label, by_label] : p.segments_min_score_by_label) {  // labels with a minimum of their own
      std::snprintf(text, sizeof text, " %g", by_label.min_score);
      own += (own.empty() ? "" : ", ") + label + text;
    }
    if (!own.empty()) minimums += " (labels' own minimums: " + own + ")";
    if (p.segments_skip_damaged) minimums += "; frames decoded after lost packets count for none (segments_skip_damaged)";
    if (p.segments_reconnect_grace_s > 0 && c.job.mode == JobMode::kLive) {
      std::snprintf(text, sizeof text, "; held open %g s across a lost camera", p.segments_reconnect_grace_s);
      minimums += text + std::string(" (segments_reconnect_grace_s)");
    }
    std::printf("  segments on segments/<id>: %s, begun after %u frames in a row with it%s\n",
                p.segments_labels == "each" ? "each label of a frame's top_k on its own" : "the top-1 label",
                p.segments_min_frames, minimums.c_str());
    if (!p.segments_pictures_dir.empty()) {
      std::printf("  segment pictures: a JPEG of each segment's %s frame as it begins, under %s%s\n",
                  p.segments_picture_frame == "first" ? "first" : "best-scoring",
                  p.segments_pictures_dir.c_str(),
                  p.segments_pictures_keep_days
                      ? (" (the last " + std::to_string(p.segments_pictures_keep_days) + " days kept)").c_str()
                      : "");
    }
    if (p.segments_clips) {
      std::printf("  segment clips: an MP4 beside each picture (a .mov for a Motion JPEG camera), from %g s before a "
                  "segment's first frame to %g s after its last (in parts of %g s), the camera's own frames\n",
                  p.segments_clip_pre_s, p.segments_clip_post_s, p.segments_clip_max_s);
    }
  }
  // What a webhook or a broker takes, past its topics: "; segments and results of truck only; ...".
  auto sink_extras = [](const MessageSinkConfig& w) {
    std::string extras;
    if (!w.labels.empty()) {
      std::string labels;
      for (const std::string& l : w.labels) labels += (labels.empty() ? "" : ", ") + l;
      extras += "; segments and results of " + labels + " only";
    }
    if (w.cooldown_s > 0) {
      char cooldown[64];
      std::snprintf(cooldown, sizeof cooldown, "; a label's segments at least %g s apart", w.cooldown_s);
      extras += cooldown;
    }
    if (w.format != "json") extras += "; as a line of text (format: " + w.format + ")";
    if (!w.ca_file.empty()) extras += "; TLS authorities from " + w.ca_file;
    if (!w.tls_verify) extras += "; its TLS certificate is not checked (tls_verify: false)";
    return extras;
  };
  auto topic_list = [](const MessageSinkConfig& w) {
    std::string topics;
    for (const std::string& t : w.topics) topics += (topics.empty() ? "" : ", ") + t;
    return topics;
  };
  // The receiver by its origin only: a webhook's path or query is often its secret.
  for (size_t i = 0; i < c.publish.webhooks.size(); ++i) {
    const WebhookConfig& w = c.publish.webhooks[i];
    std::string extras = sink_extras(w);
    if (!w.token_file.empty()) extras += "; bearer token from " + w.token_file;
    if (!w.headers.empty()) extras += "; " + std::to_string(w.headers.size()) + " header(s) of its own";
    if (w.attach_pictures) extras += "; segment pictures attached";
    std::printf("  webhook %zu: the messages on %s are POSTed to %s/... (%s past %u waiting%s)\n", i,
                topic_list(w).c_str(), parse_http_url(w.url).value().origin().c_str(),
                w.queue_policy == QueuePolicy::kBlock ? "publish waits" : "the oldest dropped", w.max_queued,
                extras.c_str());
  }
  for (size_t i = 0; i < c.publish.mqtt.size(); ++i) {
    const MqttConfig& m = c.publish.mqtt[i];
    std::string extras = sink_extras(m);
    if (m.retain) extras += "; retained";
    if (!m.username.empty()) extras += "; as user '" + m.username + "'";
    if (!m.cert_file.empty()) extras += "; client certificate " + m.cert_file;
    extras += m.status_topic.empty() ? "; no status topic" : "; online/offline on " + m.status_topic;
    if (m.home_assistant) extras += "; Home Assistant's discovery under " + m.discovery_prefix + "/";
    if (m.pictures) extras += "; segment pictures on " + m.topic_prefix + "picture/<stream>/<label>";
    std::printf("  mqtt %zu: the messages on %s are published to %s as %s<topic> (qos %u; %s past %u waiting%s)\n", i,
                topic_list(m).c_str(), parse_mqtt_url(m.url).value().origin().c_str(), m.topic_prefix.c_str(), m.qos,
                m.queue_policy == QueuePolicy::kBlock ? "publish waits" : "the oldest dropped", m.max_queued,
                extras.c_str());
  }
  for (size_t i = 0; i < c.publish.redis.size(); ++i) {
    const RedisConfig& r = c.publish.redis[i];
    std::string extras = sink_extras(r);
    if (!r.username.empty()) extras += "; as user '" + r.username + "'";
    if (r.db != 0) extras += "; database " + std::to_string(r.db);
    extras += r.maxlen ? "; each stream trimmed to about " + std::to_string(r.maxlen) + " entries" : "; never trimmed";
    std::printf("  redis %zu: the messages on %s are added to the streams %s<topic> at %s (%s past %u waiting%s)\n", i,
                topic_list(r).c_str(), r.key_prefix.c_str(), parse_redis_url(r.url).value().origin().c_str(),
                r.queue_policy == QueuePolicy::kBlock ? "publish waits" : "the oldest dropped", r.max_queued,
                extras.c_str());
  }
  for (size_t i = 0; i < c.publish.kafka.size(); ++i) {
    const KafkaConfig& k = c.publish.kafka[i];
    std::string extras = sink_extras(k);
    if (!k.username.empty()) extras += "; as user '" + k.username + "' (" + k.sasl_mechanism + ")";
    extras += "; acks " + k.acks + (k.idempotence ? ", idempotent" : "") + "; " + k.compression;
    std::printf("  kafka %zu: the messages on %s are produced to %s as %s<kind> keyed by stream (%s past %u waiting%s)\n",
                i, topic_list(k).c_str(), parse_kafka_url(k.url).value().origin().c_str(), k.topic_prefix.c_str(),
                k.queue_policy == QueuePolicy::kBlock ? "publish waits" : "the oldest dropped", k.max_queued,
                extras.c_str());
  }
  if (reload) {
    if (int refused = say_what_a_reload_would_do(args[0], config_text, c); refused != 0) return refused;
  }
  if (!open && !send_test) return 0;
  const auto timeout = std::chrono::seconds(open_timeout_s);
  const auto at_once = static_cast<size_t>(open_at_once);
  init_logging("validate", "off");  // the readers' own lines would repeat the table's
  size_t failed = 0;
  if (open) {
    // Each camera and file opened for real: the mistakes a config cannot show (a wrong password, path or
    // port, a camera that is off, a certificate, a file GStreamer cannot read) found before the job.
    std::printf("  opening each stream until its first frame (at most %lld s each, %zu at once):\n",
                static_cast<long long>(timeout.count()), at_once);
    std::fflush(stdout);
    for (const OpenedStream& o : open_each_stream(c.streams, c.ingest, timeout, at_once)) {
      failed += !o.ok;
      std::printf("    %-20s %s %s\n", o.id.c_str(), o.ok ? "ok:    " : "FAILED:", o.what.c_str());
    }
  }
  // Each webhook's receiver: --open connects to it and sends nothing (a request would be an alert);
  // --send-test POSTs a test message, in its format, and says what the receiver answered.
  size_t unreachable = 0;
  if (!c.publish.webhooks.empty()) {
    std::printf(send_test ? "  sending a test message to each webhook (at most %lld s each):\n"
                          : "  connecting to each webhook's receiver (at most %lld s each):\n",
                static_cast<long long>(timeout.count()));
    std::fflush(stdout);
  }
  for (size_t i = 0; i < c.publish.webhooks.size(); ++i) {
    const HttpUrl url = parse_http_url(c.publish.webhooks[i].url).value();
    const std::string why = send_test ? send_test_message(c, i, timeout)
                                      : tcp_connect_failure(url.origin(),
                                                            std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
    unreachable += !why.empty();
    const std::string ok = send_test ? "took a test message at " + url.origin() + "/..."
                                     : "connects to " + url.origin() + " (nothing was sent)";
    std::printf("    webhook %-12zu %s %s\n", i, why.empty() ? "ok:    " : "FAILED:", why.empty() ? ok.c_str() : why.c_str());
  }
  size_t unreachable_brokers = 0;
  // Each broker: --open makes an MQTT connection (its user and password, its TLS) and publishes
  // nothing; --send-test publishes a test message and waits for the broker's acknowledgement.
  if (!c.publish.mqtt.empty()) {
    std::printf(send_test ? "  publishing a test message to each MQTT broker (at most %lld s each):\n"
                          : "  connecting to each MQTT broker (at most %lld s each):\n",
                static_cast<long long>(timeout.count()));
    std::fflush(stdout);
  }
  for (size_t i = 0; i < c.publish.mqtt.size(); ++i) {
    const MqttConfig& m = c.publish.mqtt[i];
    std::string topic, terms, warning;
    const std::string why = send_test ? send_mqtt_test_message(c, i, timeout, &topic)
                                      : mqtt_connect_failure(c, i, timeout, &terms, &warning);
    unreachable_brokers += !why.empty();
    const std::string where = parse_mqtt_url(m.url).value().origin();
    const std::string ok = send_test ? where + " took a test message on " + topic
                                     : "connects to " + where + (m.username.empty() ? "" : " as '" + m.username + "'") +
                                           " (" + terms + "; nothing was published)";
    std::printf("    mqtt %-15zu %s %s\n", i, why.empty() ? "ok:    " : "FAILED:", why.empty() ? ok.c_str() : why.c_str());
    if (!warning.empty()) std::printf("    mqtt %-15zu WARN:   %s\n", i, warning.c_str());
  }
  size_t unreachable_servers = 0;
  // Each Redis server: --open connects (its password, its database, a PING) and adds nothing;
  // --send-test adds a test message to its stream of events/<first stream> and waits for its id.
  if (!c.publish.redis.empty()) {
    std::printf(send_test ? "  adding a test message to each Redis server's stream (at most %lld s each):\n"
                          : "  connecting to each Redis server (at most %lld s each):\n",
                static_cast<long long>(timeout.count()));
    std::fflush(stdout);
  }
  for (size_t i = 0; i < c.publish.redis.size(); ++i) {
    const RedisConfig& r = c.publish.redis[i];
    std::string key, node;
    const std::string why = send_test ? send_redis_test_message(c, i, timeout, &key, &node)
                                      : redis_connect_failure(c, i, timeout, &node);
    unreachable_servers += !why.empty();
    const RedisUrl url = parse_redis_url(r.url).value();
    const std::string where = url.origin() + (url.sentinel() ? " (its master now at " + node + ")" : std::string());
    const std::string ok = send_test ? where + " added a test message to the stream " + key
                                     : "connects to " + where + (r.username.empty() ? "" : " as '" + r.username + "'") +
                                           (r.db ? ", database " + std::to_string(r.db) : std::string()) +
                                           " (nothing was added)";
    std::printf("    redis %-14zu %s %s\n", i, why.empty() ? "ok:    " : "FAILED:", why.empty() ? ok.c_str() : why.c_str());
  }
  size_t unreachable_clusters = 0;
  // Each Kafka cluster: --open asks it for its metadata (its brokers, sign-in and TLS) and produces
  // nothing; --send-test produces a test message to its events topic and waits for the acknowledgement.
  if (!c.publish.kafka.empty()) {
    std::printf(send_test ? "  producing a test message to each Kafka cluster (at most %lld s each):\n"
                          : "  connecting to each Kafka cluster (at most %lld s each):\n",
                static_cast<long long>(timeout.count()));
    std::fflush(stdout);
  }
  for (size_t i = 0; i < c.publish.kafka.size(); ++i) {
    const KafkaConfig& k = c.publish.kafka[i];
    std::string topic;
    const std::string why = send_test ? send_kafka_test_message(c, i, timeout, &topic) : kafka_connect_failure(c, i, timeout);
    unreachable_clusters += !why.empty();
    const std::string where = parse_kafka_url(k.url).value().origin();
    const std::string ok = send_test ? where + " took a test message on " + topic
                                     : "connects to " + where + (k.username.empty() ? "" : " as '" + k.username + "'") +
                                           " (nothing was produced)";
    std::printf("    kafka %-14zu %s %s\n", i, why.empty() ? "ok:    " : "FAILED:", why.empty() ? ok.c_str() : why.c_str());
  }
  if (failed > 0 || unreachable > 0 || unreachable_brokers > 0 || unreachable_servers > 0 || unreachable_clusters > 0) {
    if (failed > 0) std::printf("  %zu stream(s) could not be opened\n", failed);
    if (unreachable > 0) std::printf("  %zu webhook receiver(s) could not be reached\n", unreachable);
    if (unreachable_brokers > 0) std::printf("  %zu MQTT broker(s) could not be reached\n", unreachable_brokers);
    if (unreachable_servers > 0) std::printf("  %zu Redis server(s) could not be reached\n", unreachable_servers);
    if (unreachable_clusters > 0) std::printf("  %zu Kafka cluster(s) could not be reached\n", unreachable_clusters);
    return kExitUsage;
  }
  return 0;
}

}  // namespace vapipe::cli
