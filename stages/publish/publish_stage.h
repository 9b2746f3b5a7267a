#pragma once

#include <array>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/config_copy.h"
#include "pipeline/file_lock.h"
#include "pipeline/picture_requests.h"
#include "pipeline/publish_reload.h"
#include "pipeline/resume.h"
#include "pipeline/stage.h"
#include "stages/publish/bus_publisher.h"
#include "stages/publish/metrics.h"
#include "stages/publish/metrics_server.h"
#include "stages/publish/results_file.h"
#include "stages/publish/wall_clock_steps.h"
#include "stages/publish/mqtt_publisher.h"
#include "stages/publish/kafka_publisher.h"
#include "stages/publish/redis_streams.h"
#include "stages/publish/webhook.h"

namespace vapipe {

using BusFactory = std::function<Result<std::unique_ptr<BusPublisher>>(const StageContext&)>;

// Exit status of the publish process (and of `vapipe run`) when the job finished but some stream
// failed.
inline constexpr int kExitSomeStreamsFailed = 3;
// ... when an archive job ended before some of its streams did (stopped by a signal): its results are
// whole up to there, and `vapipe run --resume` goes on (supervisor.h: kExitStreamsUnfinished).
inline constexpr int kExitArchiveUnfinished = 4;
// ... when an archive job's results file could not be written (a full disk): a restart would fail the
// same way, so the job is not restarted (supervisor.h: kExitResultsUnwritable). A live job goes on.

inline constexpr int kExitJsonlUnwritable = 5;
// ... when job.summary_path could not be written at the job's end (either mode): the results file is
// whole, with its summary; not restarted (supervisor.h: kExitSummaryUnwritable).
inline constexpr int kExitSummaryFileUnwritable = 6;
// ... when an archive job ended and messages did not reach a webhook, MQTT broker, Redis server or Kafka
// cluster by publish's end (their receiver down, refusing, too slow): the results file has them all
// (supervisor.h: kExitSinksUndelivered). A batch system saw 0 while Redis held nothing of the job.
inline constexpr int kExitMessagesUndelivered = 7;

// POST /-/reload on the metrics address: SIGHUP to the `vapipe run` that started this process (the
// same as `kill -HUP`), 409 when there is none. With `wait`, its answer once the job has said what
// became of it (pipeline/running_job.h reload_and_wait, from `run_dir`): 200 taken (and a new model
// taken by every lane), 422 refused (nothing changed), 500 taken but a lane could not use the new model
// (its old one goes on), 504 no answer within `wait`, 503 the job stops meanwhile. Without: 202 at once.
MetricsServer::ReloadReply request_stream_reload(const std::string& run_dir,
                                                 std::optional<std::chrono::milliseconds> wait,
                                                 const std::atomic<bool>& stopping);

// Cuts a JSON-lines file back to its last whole line (a publish that was killed may have written
// part of one); logs what it cut.
void cut_partial_last_line(const std::string& path);

// Results and stream events out to the bus (topics results/<id>, events/<id>), optionally to a
// JSON-lines file; checks per-stream order; writes the job summary when every stream has ended.
class PublishStage final : public Stage {
 public:
  explicit PublishStage(BusFactory factory = nullptr) : factory_(std::move(factory)) {}
  // `vapipe run --resume` of an archive job already complete in its results file: its sinks get the
  // file's lines after their delivery marks (what a receiver down at the job's end did not take), with
  // the long wait of a job's end; the number of messages its block sinks still did not take. Nothing
  // is published on the bus, nothing written to the file.
  static Result<uint64_t> deliver_what_sinks_missed(const Config& config, const std::atomic<bool>* stop);
  ~PublishStage() override;
  StageKind kind() const override { return StageKind::kPublish; }
  Status open(const StageContext& ctx) override;
  Status process(Message&& in, Emitter& out) override;
  Status close(Emitter& out) override;
  // With publish.metrics_address: the served snapshot is renewed every second.
  Status on_deadline(Emitter& out) override;
  std::optional<SteadyTime> next_deadline() const override;
  // Where a picture request goes (publish.segments_pictures_dir): by default a PUB socket to ingest
  // (pipeline/picture_requests.h), made in open() for a live job that has a run folder; tests set
  // their own before open().
  using PictureRequester = std::function<void(const PictureRequest&)>;
  void set_picture_requester(PictureRequester requester) { picture_requester_ = std::move(requester); }
  // A picture ingest has not answered for in this long is said to be missing (a `picture` message with
  // its error); one that comes later is still published. Tests shorten it.
  static constexpr std::chrono::seconds kPictureAnswerTimeout{60};
  void set_picture_answer_timeout(std::chrono::milliseconds timeout) { picture_answer_timeout_ = timeout; }
  // A live job's results file that refuses its lines (a full disk) is tried again this often; at most
  // this much of them is kept for it meanwhile, the oldest dropped beyond. Tests shorten the period.
  static constexpr std::chrono::seconds kJsonlRetryPeriod{5};
  static constexpr size_t kJsonlBacklogBytes = size_t{64} << 20;
  // A job that watches folders lists a file's stream on /metrics and /healthz until this long after it
  // ended (its last figures scraped); the job's own figures count it for ever (JobMetrics::listed).
  static constexpr double kEndedStreamsListedForS = 600;
  void set_jsonl_retry_period(std::chrono::milliseconds period) { jsonl_retry_period_ = period; }
  // publish.webhooks and publish.mqtt: when publish closes, what still waits for a receiver has this
  // long to be delivered (at most half of job.drain_timeout_s, within which a stopped job's stages must
  // exit).
  static constexpr std::chrono::seconds kSinkGrace{10};
  // At an archive job's end: a receiver retrying for a few seconds (a webhook's 500s, a broker's restart)
  // lost all the job's messages at 5 s. Within the watchdog's patience (half of job.stage_timeout_s).
  static constexpr std::chrono::seconds kArchiveEndSinkGrace{60};
  // The webhooks and MQTT brokers, in config order (tests shorten their back-off).
  const std::vector<std::unique_ptr<WebhookSender>>& webhooks() const { return webhooks_; }
  const std::vector<std::unique_ptr<MqttPublisher>>& mqtt() const { return mqtt_; }
  const std::vector<std::unique_ptr<RedisStreamsPublisher>>& redis() const { return redis_; }
  const std::vector<std::unique_ptr<KafkaPublisher>>& kafka() const { return kafka_; }
  void set_jsonl_backlog_bytes(size_t bytes) { jsonl_backlog_bytes_ = bytes; }
  // publish.segments_pictures_keep_days is applied at start and then this often (an hour; tests shorten it).
  void set_pictures_prune_period(std::chrono::milliseconds period) { pictures_prune_period_ = period; }
  // A live job's reload of publish's outputs and segments' settings (pipeline/publish_reload.h): the
  // job's copy of its config (kConfigAsStartedEnv, which `vapipe run` rewrites when a reload changes
  // them) is looked at this often, and at each stream event; its new webhooks, brokers, Redis servers and settings are taken
  // here, while the bus, its subscribers and each stream's state go on. Tests name the copy.
  static constexpr std::chrono::milliseconds kConfigCheckPeriod{250};  // (a stat() of the copy)
  void set_config_copy(std::string path) { config_copy_.set_path(std::move(path)); }
  // The config in force (the reloaded outputs and settings once a reload was taken).
  const Config& config() const { return *config_; }
  // Where /metrics and /healthz are served (null without publish.metrics_address).
  const MetricsServer* metrics_server() const { return metrics_server_.get(); }
  // The job as metrics now.
  JobMetrics metrics() const;
  int exit_code() const;
  // Archive jobs: streams that did not reach their end (stopped, or never started); 0 for a live job,
  // whose streams end when it is stopped.
  size_t unfinished_streams() const;
  const nlohmann::json& summary() const { return summary_; }

 private:
  struct StreamState {
    std::string id;
    std::string status = "pending";  // pending | running | reconnecting | done | failed | stopped | removed
    std::string message;
    uint64_t results = 0;
    uint64_t frame_errors = 0;
    uint64_t damaged = 0;  // results of pictures decoded from damaged data (Envelope::damaged)
    uint64_t pictures = 0, pictures_failed = 0;  // of its segments (publish.segments_pictures_dir)
    uint64_t clips = 0, clips_failed = 0;        // (publish.segments_clips)
    uint64_t next_seq = 0;
    uint64_t gaps = 0;        // frames missing (live drops)
    uint64_t out_of_order = 0;
    uint64_t dropped = 0;
    // Its MPEG-TS video's continuity errors (ingest's statistics file), on top of continuity_base: the
    // count before its lane last restarted, or before it came back.
    uint64_t continuity_errors = 0, continuity_base = 0;
    uint64_t undecoded = 0, undecoded_base = 0;  // frames its decoder gave no picture for (the same way)
    uint64_t rtp_lost = 0, rtp_lost_base = 0;          // an RTSP camera's RTP packets (the same way)
    uint64_t rtp_received = 0, rtp_received_base = 0;
    // Its lane restarted, or it came back: its new ingest counts from 0, on top of what it had.
    void rebase_ingest_counts() {
      results_base = results;
      dropped_base = dropped;
      continuity_base = continuity_errors;
      undecoded_base = undecoded;
      rtp_lost_base = rtp_lost;
      rtp_received_base = rtp_received;
    }
    uint64_t reconnects = 0;  // times it resumed after a reconnection
    uint64_t earlier_results = 0;  // --resume: results kept from earlier runs (counted in `results`)
    bool started_earlier = false;  // --resume: its "started" was published by an earlier run
    std::string earlier_uri;       // --resume: the uri that "started" said
    bool ended_earlier = false;    // --resume: its end was published by an earlier run
    bool ended = false;            // its end (eos or error) was published by this process
    int64_t ended_ns = 0;          // when (the wall clock)
    uint64_t restarts = 0;         // times its lane restarted after a crash (live jobs)
    uint64_t comebacks = 0;        // times it started again after it had ended (a reload; live jobs)
    // After a restart (of its lane, or of publish): the next result's seq is where numbering goes on,
    // not a gap; and ingest's counts in its events cover only what came after results_base/dropped_base.
    bool seq_jumps = false;
    bool counts_known = true;  // false in a publish that restarted: it did not see the earlier results
    uint64_t results_base = 0, dropped_base = 0;
    // Archive progress: the media's duration (from its start event; -1: unknown), the timestamp of its
    // latest result, and that of the latest result an earlier run kept (--resume).
    int64_t media_ns = -1, position_ns = 0, earlier_position_ns = 0;
    int64_t part_from_ns = 0;  // streams[].from: where its part starts; media and position count from it
    // streams[].roi and rotate/mirror, which its started event says (what `vapipe segments --frames` shows).
    std::array<double, 4> roi{0, 0, 1, 1};
    std::string turn;  // orientation_name(); "": its file's own tag decides
    std::string uri;   // as its latest started or changed event said it (redacted); "": not seen yet
    int64_t first_ns = 0, last_ns = 0;
    // The same on the monotonic clock (the first frame's capture as publish's clock puts it): a stream's
    // wall_s, fps and the job's steady_s, which a wall clock stepped by 2 days made 48 hours.
    int64_t first_monotonic_ns = 0, last_monotonic_ns = 0;
    double latency_sum_ms = 0, latency_max_ms = 0;
    std::map<std::string, uint64_t> labels;  // results by top-1 label (error results not counted)
    // publish.segments_min_frames: the current run of one label (consecutive frames), and the
    // segment announced ("began") and not yet ended.
    struct LabelRun {
      std::string label;
      uint64_t start_seq = 0, end_seq = 0, frames = 0;
      double start_ms = -1, end_ms = -1, score_sum = 0;
      // Its first and last frame's capture_unix_ms and camera_unix_ms (-1: the camera's not known).
      double start_capture_ms = -1, end_capture_ms = -1, start_camera_ms = -1, end_camera_ms = -1;
      // Its best frame so far: the highest top-1 score (the first of equals), for a snapshot; of its
      // whole pictures, where it has one (a damaged one, decoded after a lost packet, may be smeared).
      uint64_t best_seq = 0;
      double best_ms = -1, best_score = -1, best_capture_ms = -1;
      bool best_damaged = false;
      uint64_t damaged_frames = 0;  // of its frames, those decoded from damaged data (Envelope::damaged)
      std::string picture_url_path = "";  // where /pictures/ serves its picture, once ingest has written it
      // The lost connections it went on across (segments_reconnect_grace_s), and whether it is held open
      // across one now (counted when its label's next frame comes).
      uint32_t reconnections = 0;
      bool held = false;
      // The frames' own timestamps, for ingest to find them by (a picture's, a clip's first and last).
      int64_t start_pts_ns = -1, best_pts_ns = -1, end_pts_ns = -1;
      void add(uint64_t seq, double pts_ms, double capture_ms, double camera_ms, double score, int64_t pts_ns,
               bool damaged) {
        if (frames == 0) start_pts_ns = pts_ns;
        if (std::exchange(held, false)) ++reconnections;
        end_pts_ns = pts_ns;
        end_seq = seq;
        end_ms = pts_ms;
        end_capture_ms = capture_ms;
        end_camera_ms = camera_ms;
        if (frames == 0 || (best_damaged && !damaged) || (damaged == best_damaged && score > best_score)) {
          best_seq = seq;
          best_ms = pts_ms;
          best_score = score;
          best_capture_ms = capture_ms;
          best_pts_ns = pts_ns;
          best_damaged = damaged;
        }
        if (damaged) ++damaged_frames;
        ++frames;
        score_sum += score;
      }
    };
    LabelRun run, segment;
    // publish.segments_labels: each: by label, its run, its segment, and the results in a row without it.
    struct LabelTrack {
      LabelRun run, segment;
      uint32_t absent = 0;
    };
    std::map<std::string, LabelTrack> tracks;
    // A live camera lost mid-segment, with segments_reconnect_grace_s: its segments (and tracks' segments)
    // are kept open until then, ended by on_deadline if no result has come by then.
    std::optional<SteadyTime> segments_held_until;
    // Pictures asked of ingest and not yet said, by (label, segment's start_seq): the frame asked for
    // (its seq, and "best" or "first"), so that the picture message says whether it is that frame;
    // when; and whether it was said to be missing (kPictureAnswerTimeout).
    struct PictureAsked {
      int64_t seq = -1;
      std::string frame;
      std::chrono::steady_clock::time_point at;
      bool said_missing = false;
      int64_t at_unix_ns = 0;  // `at` by the wall clock, for a restarted publish (save_picture_asks)
    };
    std::map<std::pair<std::string, uint64_t>, PictureAsked> pictures_asked;
    // Clips asked of ingest (publish.segments_clips) and not yet said, by (label, start_seq): when the
    // clip is due (its segment's end plus the post-roll, or its start plus segments_clip_max_s, plus
    // the answer timeout), and whether it was said to be missing.
    struct ClipAsked {
      SteadyTime due;
      bool ended = false;
      bool said_missing = false;
    };
    std::map<std::pair<std::string, uint64_t>, ClipAsked> clips_asked;
  };
  // Follows a stream's label runs (publish.segments_min_frames); publishes "began" and "ended".
  Status follow_segments(StreamState& st, const Message& result);
  // --resume: the label runs of the results kept in the file, followed again without publishing.
  Status replay_earlier_segments(const ResumePlan& plan);
  bool replaying_ = false;  // while it runs: began and ended change the state only
  Status follow_each_label(StreamState& st, const Message& result);
  // Ends the stream's segment (or, segments_labels: each, all of them, in label order).
  Status end_segment(StreamState& st);
  // A segment held across a lost connection goes on: its clip goes on in a next part.
  void ask_clip_to_go_on(const StreamState& st, const StreamState::LabelRun& segment);
  // Publishes `segment` as ended and clears it.
  Status publish_ended(StreamState& st, StreamState::LabelRun* segment);
  // Publishes `segment` as begun, and asks for its picture (publish.segments_pictures_dir).
  Status publish_began(StreamState& st, const StreamState::LabelRun& segment);
  // A kStreamPicture from ingest: the "picture" message of the segment it names.
  Status publish_picture(StreamState& st, const Message& event);
  // A kStreamClip from ingest: the "clip" message of the segment it names.
  Status publish_clip(StreamState& st, const Message& event);
  // "/pictures/<its path under segments_pictures_dir>"; null for a path outside that folder.
  nlohmann::json picture_url_path(const std::string& picture) const;
  static nlohmann::json picture_json(const std::string& stream_id, const std::string& label, uint64_t start_seq);
  PictureRequester picture_requester_;
  std::chrono::milliseconds picture_answer_timeout_ = kPictureAnswerTimeout;
  // A live job's picture asks outlive a publish that crashes: written to the run folder as they change
  // (picture-asks.json), read back by the publish started again, so that a picture that comes after the
  // restart still says which frame it is, and one that never comes is still said to be missing.
  void save_picture_asks() const;
  void load_picture_asks();
  // The pictures ingest did not answer for in time: their `picture` messages with an error.
  Status say_missing_pictures();
  std::optional<SteadyTime> next_missing_picture() const;
  // A clip ingest has not said by its due time: its `clip` message says it is missing.
  Status say_missing_clips();
  std::optional<SteadyTime> next_missing_clip() const;
  std::unique_ptr<PictureRequestSender> picture_sender_;
  // publish.segments_pictures_keep_days: the older days go at start and then once an hour.
  void prune_pictures();
  std::time_t pictures_pruned_at_ = 0;
  SteadyTime next_pictures_prune_{};
  std::chrono::milliseconds pictures_prune_period_{std::chrono::hours(1)};
  static nlohmann::json segment_json(const std::string& stream_id, const char* event, const StreamState::LabelRun& s);
  Status publish(const std::string& topic, const nlohmann::json& payload);
  // publish.webhooks, publish.mqtt, publish.redis and publish.kafka: they get kSinkGrace together to deliver what
  // waits, then stop; at an archive job's end (`job_end`), up to kArchiveEndSinkGrace, and what they
  // could not deliver fails the job (kExitMessagesUndelivered).
  void finish_sinks(bool job_end = false);
  // An archive job with a results file: messages go to the sinks once their lines are in it (flushed).
  bool sinks_after_flush() const;
  // `file_line`: the message's line in the results file (0: none). `only_after`: the sinks' delivery
  // marks of a restart's replay: the message goes to the sinks whose mark is before its line, no other.
  void send_to_sinks(const std::string& topic, const nlohmann::json& payload, const std::string& text,
                     uint64_t file_line = 0, const std::map<std::string, uint64_t>* only_after = nullptr);
  void send_waiting_to_sinks();
  struct WaitingForFile {
    std::string topic;
    nlohmann::json payload;
    uint64_t file_line = 0;
  };
  std::vector<WaitingForFile> sinks_waiting_for_file_;
  // An archive job's sinks' delivery marks (stages/publish/sink_marks.h): "" for none (a live job, no
  // results file, a timed one, or lines of it lost).
  std::string sink_marks_path_;
  uint64_t jsonl_lines_ = 0;  // the results file's lines, those kept for it included (its last's number)
  std::string sink_marks_written_;  // their text as last written
  std::string sink_marks_run_id_;   // SinkMarks::run_id
  SteadyTime next_sink_marks_write_{};
  // Each sink's delivery mark to start from; a restart's (crash, --resume) sinks get the file's lines
  // after their marks first.
  Status send_sinks_what_they_missed();
  void write_sink_marks();
  std::map<std::string, uint64_t> sinks_settled_through() const;
  static std::string message_identity(const std::string& topic, const nlohmann::json& payload);
  // By sink name: the messages (message_identity) of lines --resume cut that the sink took; this run's
  // messages of them are not sent to it again.
  std::map<std::string, std::multiset<std::string>> sinks_took_before_cut_;
  bool sink_marks_unwritable_said_ = false;
  uint64_t sinks_undelivered_ = 0;
  WallClockSteps wall_clock_steps_;  // capture times from before a step of the wall clock, put on it
  std::vector<std::unique_ptr<WebhookSender>> webhooks_;
  std::vector<std::unique_ptr<MqttPublisher>> mqtt_;
  std::vector<std::unique_ptr<RedisStreamsPublisher>> redis_;
  std::vector<std::unique_ptr<KafkaPublisher>> kafka_;
  const std::atomic<bool>* stop_requested_ = nullptr;
  void write_summary();
  void update_metrics_snapshot();
  // Once a second: a stage that has stalled (stalled_stages(), stages/publish/metrics.h) is said in the
  // log, and again when it moves: /healthz said it, the log did not (a post-mortem found nothing).
  void watch_stalls();
  void say_stalls(const std::vector<StalledStage>& now_stalled);
  SteadyTime next_stall_check_{};
  std::map<std::pair<std::string, uint32_t>, SteadyTime> stalled_said_;  // (stage, lane): since

  BusFactory factory_;
  const Config* config_ = nullptr;
  const JobLayout* layout_ = nullptr;  // null for a stage driven without a job (tests)
  std::unique_ptr<BusPublisher> bus_;
  ResultsFile jsonl_;
  // Writes the buffered lines out. When the file refuses them (a full disk, an I/O error), an archive
  // job stops (Aborted: it must not go on as if its results were recorded), naming the file and the
  // system's error; a live job goes on publishing on the bus, keeps the lines for the file, and tries
  // again every kJsonlRetryPeriod (jsonl_refused).
  Status flush_jsonl();
  Status jsonl_refused(const Status& why);
  // While refused: drops the oldest kept lines beyond jsonl_backlog_bytes_, and counts them.
  void keep_jsonl_backlog();
  struct JsonlRefusal {
    std::string error;
    int64_t since_ns = 0;  // wall clock
    uint64_t lost_before = 0;  // jsonl_lines_lost_ when it began
  };
  std::optional<JsonlRefusal> jsonl_refusal_;
  uint64_t jsonl_lines_lost_ = 0;  // a live job's lines dropped from what was kept for a refusing file
  SteadyTime next_jsonl_retry_{};
  std::chrono::milliseconds jsonl_retry_period_ = kJsonlRetryPeriod;
  size_t jsonl_backlog_bytes_ = kJsonlBacklogBytes;
  FileLock jsonl_lock_;  // when no `vapipe run` holds it for the job
  // publish.jsonl_path named by the time (pipeline/results_path.h): the file written now, and the
  // second its name was last worked out (checked once a second at most). Moves on as the clock turns.
  std::string jsonl_file_;
  bool jsonl_timed_ = false;
  int64_t jsonl_named_at_s_ = -1;
  Status follow_results_clock();
  // publish.jsonl_keep: the oldest files the timed path named are deleted, the newest kept.
  void prune_results_files();
  // Lines written since the last flush are flushed by this time: a reader tailing the file (or a
  // test) sees an event within a fraction of a second even when nothing follows it, and a crash
  // loses at most that much, while a busy archive job still writes in large blocks.
  std::optional<SteadyTime> jsonl_flush_due_;
  // Streams a reload added to the running job (pipeline/stream_table.h) get their state here.
  void learn_added_streams();
  std::vector<StreamState> streams_;  // by the stream table's index
  // --resume: streams the results file has and the config no longer has (ResumePlan::departed): in
  // the summary and the metrics, with what earlier runs published; they get no messages.
  std::vector<StreamState> departed_;
  // The job's streams, then the departed ones: what the summary and the metrics list.
  std::vector<std::reference_wrapper<const StreamState>> all_streams() const {
    std::vector<std::reference_wrapper<const StreamState>> all(streams_.begin(), streams_.end());
    all.insert(all.end(), departed_.begin(), departed_.end());
    return all;
  }
  // The earlier runs' progress of a stream, from the resume plan.
  void take_earlier_progress(StreamState& st, const StreamProgress& p);
  int64_t job_start_ns_ = 0;
  int64_t job_start_monotonic_ns_ = 0;  // the same on the host's monotonic clock (durations)
  int failed_streams_ = 0;
  bool jsonl_unwritable_ = false;  // an archive job's file refused its lines: exit_code() says so
  bool summary_unwritable_ = false;  // job.summary_path could not be written at the end: exit_code() says so
  bool resumed_ = false;
  bool restarted_ = false;
  uint32_t job_restarts_ = 0;  // an archive job's restarts whole so far (kJobRestartsEnv)
  void note_lines_waiting(bool now);
  std::chrono::steady_clock::time_point next_lines_waiting_note_{};
  // A restarted publish (segments_clips) asks ingest to end the clips of the segments it no longer
  // follows, begun before it started: again at each deadline until this time (a request sent before
  // ingest's subscription reached the new socket is lost).
  int64_t started_unix_ns_ = 0;
  std::optional<SteadyTime> end_old_clips_until_;
  void end_old_clips();
  StageWatchdog* watchdog_ = nullptr;  // this process was started again after publish crashed (live jobs)
  nlohmann::json summary_;
  std::unique_ptr<MetricsServer> metrics_server_;
  SteadyTime next_snapshot_{};
  SteadyTime next_progress_log_{};  // archive jobs: a progress line every kProgressLogPeriod
  std::string last_progress_line_;  // a job that watches folders says it again only when it changed
  void log_progress();
  // Live drops as they happen: each stream's count from its ingest's statistics file (once a second).
  void refresh_live_drops();
  // publish.curve_authorized_keys is looked at every 2 s: a changed file takes effect for the next
  // subscribers without a restart (an unreadable one is logged, and the list in force stays).
  void check_authorized_keys();
  std::optional<std::string> authorized_keys_identity_;  // pipeline/file_identity.h
  void check_metrics_token();
  // publish.webhooks[].token_file and publish.mqtt[].password_file, looked at every 2 s: a rewritten
  // one's token from the next request on, its password from the next connection on.
  void check_sink_secrets();
  std::vector<std::optional<std::string>> sink_secret_identities_;  // by webhook, then by broker
  SteadyTime next_sink_secrets_check_{};
  bool sink_secrets_ = false;  // some webhook has a token_file, or some broker a password_file
  std::optional<std::string> metrics_token_identity_;
  SteadyTime next_keys_check_{};
  // A reload (set_config_copy): the copy's text as taken, its identity when last looked at, and the
  // config in force once a reload was taken (config_ points to it; the stage's own stays as loaded).
  void check_config_copy();
  void apply_publish_reload(const Config& reloaded, const PublishReload& change);
  ConfigCopy config_copy_{kConfigCheckPeriod};
  std::unique_ptr<Config> reloaded_config_;
  // Outputs a reload removed (or changed: the old one goes, a new one comes): each has kSinkGrace to
  // deliver what waits for it, on a thread of its own, and then sets `stopped` (a new one of the same
  // receiver waits for that: QueuedSink::wait_for_predecessors).
  struct RetiringSink {
    std::string kind, receiver;  // "webhooks", its URL's origin
    std::shared_ptr<std::atomic<bool>> stopped;
    std::thread finishing;
    std::function<void(SteadyTime)> finish_by;  // publish closing: an earlier deadline (QueuedSink::finish_by)
  };
  std::vector<RetiringSink> retiring_sinks_;
  std::unique_ptr<WebhookSender> make_webhook(const WebhookConfig& hook, size_t index, SinkPredecessors predecessors);
  std::unique_ptr<MqttPublisher> make_mqtt(const MqttConfig& broker, size_t index, SinkPredecessors predecessors);
  std::unique_ptr<RedisStreamsPublisher> make_redis(const RedisConfig& server, size_t index,
                                                    SinkPredecessors predecessors);
  std::unique_ptr<KafkaPublisher> make_kafka(const KafkaConfig& cluster, size_t index, SinkPredecessors predecessors);
  template <typename Sink>
  void retire(std::unique_ptr<Sink> sink, const char* kind, std::string receiver);
  SinkPredecessors predecessors_of(const char* kind, const std::string& receiver) const;
  // Joins the retiring outputs that have stopped; with `wait`, waits for all of them first.
  void reap_retired_sinks(bool wait);
};

}  // namespace vapipe
