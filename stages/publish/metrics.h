// What publish knows about the job, as Prometheus metrics and a health document. Publish sees every
// result and stream event of every lane, so it is where per-stream state lives; a snapshot is taken on
// the stage's thread and served by MetricsServer from its own.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/folder_watch.h"
#include "pipeline/running_job.h"
#include "pipeline/stage_stats.h"

namespace vapipe {

struct StreamMetrics {
  std::string id;
  std::string state;  // pending | running | reconnecting | done | failed | stopped | removed
  uint64_t results = 0;
  uint64_t frame_errors = 0;
  uint64_t damaged = 0;  // results of pictures decoded from damaged data
  uint64_t gaps = 0;
  uint64_t dropped = 0;  // from the stream's latest event
  uint64_t continuity_errors = 0;  // its MPEG-TS video's (ingest's statistics)
  uint64_t undecoded = 0;          // frames its decoder gave no picture for (ingest's statistics)
  uint64_t rtp_lost = 0, rtp_received = 0;  // an RTSP camera's RTP packets (ingest's statistics)
  uint64_t reconnects = 0;
  uint64_t restarts = 0;  // its lane's processes restarted after a crash
  uint64_t comebacks = 0;  // it began again after it had ended (a reload brought it back)
  double latency_sum_s = 0;
  uint64_t latency_count = 0;  // results whose latency is in latency_sum_s (a resumed job's earlier ones are not)
  double latency_max_s = 0;
  double last_result_unix_s = 0;  // 0: none yet
  // Archive progress: the media's duration (from the stream's start event; < 0: unknown, e.g. a camera),
  // the timestamp of its latest result, and of the latest one an earlier run had (--resume).
  double media_s = -1;
  double position_s = 0;
  double earlier_position_s = 0;
  bool ended = false;  // done, failed, stopped or removed: nothing more will come
  double ended_unix_s = 0;  // when this process saw it end (0: not, or in an earlier run)
  // Its segments that began and have not ended (publish.segments_min_frames): the label, and when it
  // began by this machine's clock (its first frame's capture time, seconds since the Unix epoch).
  struct OpenSegment {
    std::string label;
    double since_unix_s = 0;
    std::string picture_url_path = "";  // its picture on this server (publish.segments_pictures_dir), or none yet
  };
  std::vector<OpenSegment> open_segments;
  // Pictures of its segments (publish.segments_pictures_dir) written, and those that could not be.
  uint64_t pictures = 0;
  uint64_t pictures_failed = 0;
  // Clips of its segments (publish.segments_clips) written, and those that could not be.
  uint64_t clips = 0;
  uint64_t clips_failed = 0;
};

// How far an archive job is: the media of the streams whose duration is known, and how much of it
// has results. A stream that ended counts as wholly done.
struct JobProgress {
  size_t streams_timed = 0;  // streams with a known duration (the others are not counted)
  size_t streams_ended = 0;  // of all streams
  // Archive jobs: files waiting their turn (ingest.max_open_streams), whose length is not known yet:
  // counted at the average length of the timed ones, so that the time left is not that of the open ones.
  size_t streams_estimated = 0;
  double media_s = 0;        // their duration, in all (the estimated ones' included)
  double done_s = 0;         // of which has results
  double ratio = -1;         // done_s / media_s; -1: no duration known yet
  double media_per_s = 0;    // media seconds done per wall second in this run (x real time)
  double eta_s = -1;         // at that pace, seconds until done_s reaches media_s; -1: unknown
  // Running streams whose last result is kQuietStreamS old or more, the longest quiet first: a file
  // whose read has not returned (a share that does not answer), which the pace above does not show.
  static constexpr double kQuietStreamS = 30;
  std::vector<std::pair<std::string, double>> quiet;  // (stream id, seconds since its last result)
};

// publish.jsonl_path: whether it takes lines now. A live job's file that refuses them (a full disk)
// does not stop the job: its lines are kept for it, and the oldest dropped past a bound.
struct ResultsFileHealth {
  std::string path;                // the file written now
  bool writable = true;
  std::string error;               // why not ("... cannot be written (No space left on device)")
  double refused_since_unix_s = 0;
  uint64_t lines_waiting = 0;      // kept for it, written once it takes lines again
  uint64_t lines_lost = 0;         // dropped from those kept (never recorded), in this process
};

// publish.webhooks: what became of each receiver's messages (stages/publish/webhook.h).
struct WebhookStats {
  size_t index = 0;            // in publish.webhooks
  std::string origin;          // "https://host:8123": its url without path, query or credentials
  std::string name;            // "publish.webhooks[0] (https://host:8123)"
  uint64_t delivered = 0;      // answered 2xx
  uint64_t refused = 0;        // answered 4xx (but 408, 429) or 3xx: dropped, not tried again
  uint64_t dropped = 0;        // pushed out of a full queue (drop_oldest)
  uint64_t undelivered = 0;    // still waiting when publish stopped
  uint64_t cooled_down = 0;    // segment messages held back by its cooldown_s
  uint64_t retries = 0;        // tries that failed and were made again
  uint64_t queued = 0;         // waiting now (the one being tried included)
  bool failing = false;        // its latest try failed and will be made again
  double failing_since_unix_s = 0;
  double last_delivered_unix_s = 0;  // 0: none yet
  std::string last_error;      // of the latest failed or refused try
};

// publish.mqtt: what became of each broker's messages (stages/publish/mqtt_publisher.h).
struct MqttStats {
  size_t index = 0;            // in publish.mqtt
  std::string broker;          // "mqtts://host:8883": its url without credentials
  std::string name;            // "publish.mqtt[0] (mqtts://host:8883)"
  // qos 1 and 2: acknowledged by the broker; qos 0: written to the connection.
  uint64_t delivered = 0;
  uint64_t refused = 0;        // too large for the broker, or for MQTT: dropped
  uint64_t dropped = 0;        // pushed out of a full queue (drop_oldest)
  uint64_t undelivered = 0;    // still waiting (or unacknowledged) when publish stopped
  uint64_t lost = 0;           // qos 0: handed to a connection that broke before it was written
  uint64_t cooled_down = 0;    // segment messages held back by its cooldown_s
  uint64_t connections = 0;    // connections the broker accepted
  uint64_t queued = 0;         // waiting now, those sent and not yet acknowledged included
  bool connected = false;
  double disconnected_since_unix_s = 0;  // while not connected (0: connected)
  double last_delivered_unix_s = 0;      // 0: none yet
  std::string last_error;      // why the latest connection failed or ended
  // Of the latest connection: the MQTT version spoken (5, or 4 for 3.1.1; 0 before one), and the
  // largest packet the broker said it takes (MQTT 5's Maximum Packet Size; 0: no limit said).
  int protocol = 0;
  uint32_t broker_max_packet = 0;
};

// publish.redis: what became of each server's messages (stages/publish/redis_streams.h).
struct RedisStats {
  size_t index = 0;            // in publish.redis
  std::string server;          // "redis://host:6379": its url without credentials or database
  std::string node;            // "host:port" of the latest connection (a cluster's node, Sentinel's master)
  std::string name;            // "publish.redis[0] (redis://host:6379)"
  uint64_t delivered = 0;      // added to their stream (the server answered with the entry's id)
  uint64_t found_added = 0;    // of those, left unanswered by a broken connection and found in the stream
  uint64_t refused = 0;        // answered with an error that would not pass (WRONGTYPE: a key of another type)
  uint64_t dropped = 0;        // pushed out of a full queue (drop_oldest)
  uint64_t undelivered = 0;    // still waiting (or unanswered) when publish stopped
  uint64_t cooled_down = 0;    // segment messages held back by its cooldown_s
  uint64_t connections = 0;    // connections made (and, with a password, authenticated)
  uint64_t queued = 0;         // waiting now, those sent and not yet answered included
  bool connected = false;
  double disconnected_since_unix_s = 0;  // while not connected (0: connected)
  double last_delivered_unix_s = 0;      // 0: none yet
  std::string last_error;      // why the latest connection failed or ended, or the latest refusal
  // redis+sentinel: the sentinel whose failover events are followed ("host:port"), or why none is
  // (then a failover is found only when the old master stops taking messages).
  std::string sentinel_watched, sentinel_watch_error;
};

// publish.kafka: what became of each cluster's messages (stages/publish/kafka_publisher.h).
struct KafkaStats {
  size_t index = 0;            // in publish.kafka
  std::string cluster;         // "kafka://k1:9092,k2:9092": its url without credentials
  std::string name;            // "publish.kafka[0] (kafka://k1:9092,k2:9092)"
  uint64_t delivered = 0;      // acknowledged by the partition's leader (acks: all: once every in-sync replica has it)
  uint64_t refused = 0;        // refused for good (too large, a topic the user may not write): dropped
  uint64_t dropped = 0;        // pushed out of a full queue (drop_oldest)
  uint64_t undelivered = 0;    // still waiting (or unacknowledged) when publish stopped
  uint64_t cooled_down = 0;    // segment messages held back by its cooldown_s
  uint64_t producers = 0;      // producers made: more than one is a producer made again after a fatal error
  uint64_t queued = 0;         // waiting now, those handed to the producer and not yet acknowledged included
  bool connected = false;      // the cluster answered (a delivery, or its metadata) since it last could not be reached
  double disconnected_since_unix_s = 0;  // while not connected (0: connected)
  double last_delivered_unix_s = 0;      // 0: none yet
  std::string last_error;      // why the cluster could not be reached, or the latest refusal
};

struct JobMetrics {
  std::string job;
  std::string mode;  // archive | live
  double start_unix_s = 0;
  double now_unix_s = 0;
  // The host's monotonic clock now, and at the job's start (0: not known): what has lasted how long is
  // counted on it where it can be (a wall clock stepped by 2 days made every stage "stalled").
  double now_monotonic_s = 0;
  double start_monotonic_s = 0;
  uint32_t job_restarts = 0;  // an archive job's restarts whole after a crash (a live job restarts lanes)
  std::vector<StreamMetrics> streams;
  std::vector<StageStatsSnapshot> stages;  // every stage process's latest totals (pipeline/stage_stats.h)
  bool segments = false;  // publish.segments_min_frames is set: open segments are a metric
  bool segment_pictures = false;  // publish.segments_pictures_dir is set: pictures are counted
  bool segment_clips = false;     // publish.segments_clips: clips are counted
  std::optional<ResultsFileHealth> results_file;  // with publish.jsonl_path
  std::vector<WebhookStats> webhooks;              // publish.webhooks, in order
  std::vector<MqttStats> mqtt;                     // publish.mqtt, in order
  std::vector<RedisStats> redis;                   // publish.redis, in order
  std::vector<KafkaStats> kafka;                   // publish.kafka, in order
  // Archive folders the job watches (streams[].watch_s), as `vapipe run` last wrote them.
  bool watches_folders = false;
  std::vector<FolderWatchStatus> watched_folders;
  // A live job's SIGHUP re-read of its config under way since then (0: none; pipeline/job_layout.h).
  double reload_running_since_unix_s = 0;
  // A live job's last reload, taken or refused (none yet: nullopt; pipeline/running_job.h).
  std::optional<ReloadOutcome> last_reload;
  // A job that watches folders gains a stream with every file, for as long as it runs: the streams
  // that ended longer ago than this are counted in the job's figures but not listed one by one
  // (a series per file for ever would grow Prometheus's without bound). < 0: every stream is listed.
  double ended_streams_listed_for_s = -1;
  // A stream a reload removed, in any job: listed this long after (a live job whose cameras come and go
  // kept a series of each for its life). One that failed stays listed: someone has to see it.
  double removed_streams_listed_for_s = 600;
  bool listed(const StreamMetrics& s) const {
    if (s.state == "removed" && s.ended_unix_s > 0 && now_unix_s - s.ended_unix_s > removed_streams_listed_for_s) {
      return false;
    }
    return ended_streams_listed_for_s < 0 || !s.ended ||
           (s.ended_unix_s > 0 && now_unix_s - s.ended_unix_s <= ended_streams_listed_for_s);
  }
};

JobProgress job_progress(const JobMetrics& m);

// "1 h 05 min", "4 min 10 s", "12.5 s": a duration for a log line.
std::string human_duration(double seconds);

// Seconds covered by at least one of `spans` (each a stream's [first frame's capture, last result],
// in ns; empty or reversed ones count nothing): the job summary's steady time, without the gaps when no
// stream had a frame under way (a watched folder waiting for its next file, a live job between a
// reload that removed its last camera and one that added the next).
double busy_seconds(std::vector<std::pair<int64_t, int64_t>> spans);

// The states a stream can be in, in the order vapipe_stream_state lists them.
const std::vector<std::string>& stream_states();

// A stage process whose work does not move: stopped (SIGSTOP, a debugger, a frozen host disk: it has
// written no figures for kStageSilentS, though it writes them every second, waits included), or in one
// stretch of its own work for over half the time its watchdog allows (job.stage_timeout_s: the
// watchdog aborts it at that time; 60 s without one). Stages that wait on a stalled one are not
// stalled themselves. Publish's own stall is said by its HTTP server (MetricsServer), which serves
// these figures.
inline constexpr double kStageSilentS = 15.0;
struct StalledStage {
  std::string stage;
  uint32_t lane = 0;
  double for_s = 0;  // silent, or working, that long
  std::string why;   // "no figures for 21 s (the process is stopped or frozen)", "in its own work (...) for 75 s"
};
std::vector<StalledStage> stalled_stages(const JobMetrics& m);

// Prometheus text exposition format 0.0.4.
std::string prometheus_text(const JobMetrics& m);

// GET /healthz's body: the job, and each stream's state, results and seconds since its last result.
// Its status is "stalled" (with `stalled`, each stage and why) when stalled_stages() has any, else "ok".
nlohmann::json health_json(const JobMetrics& m);

}  // namespace vapipe
