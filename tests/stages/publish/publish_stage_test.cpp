#include "stages/publish/publish_stage.h"

#include <cstdint>
#include <cstdlib>
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <tuple>

#include "pipeline/curve.h"
#include "pipeline/job_layout.h"
#include "pipeline/results_path.h"
#include "pipeline/resume.h"
#include "stages/publish/metrics_server.h"
#include "stages/publish/mqtt_publisher.h"
#include "stages/publish/sink_marks.h"
#include "pipeline/stage_stats.h"
#include "pipeline/stage_watchdog.h"
#include "pipeline/stream_table.h"
#include "tests/fakes/free_port.h"
#include "tests/fakes/http_receiver.h"
#include "tests/fakes/process_temp_dir.h"
#include "tests/fakes/live_yaml.h"
#include "tests/fakes/mqtt_broker.h"
#include "tests/fakes/kafka_test_cluster.h"
#include "tests/fakes/redis_server.h"
#include "tests/fakes/stage_harness.h"

namespace vapipe {
namespace {

using testing::CollectingEmitter;

class FakeBus final : public BusPublisher {
 public:
  Status send(const std::string& topic, const std::string& payload) override {
    sent.emplace_back(topic, nlohmann::json::parse(payload));
    return Status::Ok();
  }
  Status set_authorized_subscribers(const std::vector<std::string>& keys) override {
    authorized.push_back(keys);
    return Status::Ok();
  }
  std::vector<std::pair<std::string, nlohmann::json>> sent;
  std::vector<std::vector<std::string>> authorized;  // each list set after the start
};

class PublishStageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = testing::test_config(2);
    config_.job.price_per_gpu_hour = 3600.0;  // one unit per second: easy to check
    make_stage();
  }
  // A fresh stage (not yet opened), whose bus is bus_ once it opens.
  void make_stage() {
    bus_ = nullptr;
    stage_ = std::make_unique<PublishStage>([this](const StageContext&) -> Result<std::unique_ptr<BusPublisher>> {
      auto bus = std::make_unique<FakeBus>();
      bus_ = bus.get();
      return std::unique_ptr<BusPublisher>(std::move(bus));
    });
  }
  void open() { ASSERT_TRUE(stage_->open(StageContext{config_}).ok()); }
  // A webhook on events/ at a receiver on loopback.
  static WebhookConfig events_webhook(int port, QueuePolicy policy) {
    WebhookConfig hook;
    hook.url = "http://127.0.0.1:" + std::to_string(port) + "/hook";
    hook.topics = {"events/"};
    hook.queue_policy = policy;
    return hook;
  }
  // An archive job whose block webhook's receiver answers 503 to everything, opened (the end's wait for
  // it within half of job.stage_timeout_s: 1 s).
  void open_an_archive_job_with_a_block_webhook_refused_by(testing::Receiver& refusing) {
    refusing.answer([](const httplib::Request&, httplib::Response& res) { res.status = 503; });
    config_.publish.webhooks = {events_webhook(refusing.port(), QueuePolicy::kBlock)};
    config_.job.mode = JobMode::kArchive;
    config_.job.stage_timeout_s = 2;
    open();
  }
  // Stream 0 starts and ends, stream 1 ends; then publish closes (the job's end).
  void run_a_short_job_to_its_end() {
    ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamStart, testing::envelope(0, 0),
                                                      {"test://ball", "", 0, 0}), out_).ok());
    ASSERT_TRUE(stage_->process(testing::end_message(0, 0), out_).ok());
    ASSERT_TRUE(stage_->process(testing::end_message(1, 0), out_).ok());
    ASSERT_TRUE(stage_->close(out_).ok());
  }
  void check_a_rotated_redis_secret_takes_effect(RedisConfig c, const std::filesystem::path& path,
                                                 const std::string& old_secret, const std::string& new_secret);
  // A live job whose publish.jsonl_path is `pattern` (named by the time) below a fresh folder `name`;
  // the folder.
  std::filesystem::path use_timed_results(const std::string& name, const std::string& pattern) {
    const std::filesystem::path dir = ::testing::TempDir() + (name + "-" + std::to_string(getpid()));
    std::filesystem::remove_all(dir);
    config_.job.mode = JobMode::kLive;
    config_.publish.jsonl_path = (dir / pattern).string();
    return dir;
  }

  // Waits for publish's next try of a results file that refuses its lines; how the file is then.
  ResultsFileHealth try_results_file_again() {
    const std::optional<SteadyTime> due = stage_->next_deadline();
    EXPECT_TRUE(due.has_value());
    if (due) std::this_thread::sleep_until(*due);
    EXPECT_TRUE(stage_->on_deadline(out_).ok());
    return stage_->metrics().results_file.value_or(ResultsFileHealth{});
  }

  // n results of stream 0 from *seq on, each with `label` as its top-1 at `score`.
  void send_top1(uint64_t* seq, const std::string& label, double score, int n) {
    for (int i = 0; i < n; ++i, ++*seq) {
      Message m = result(0, *seq, label);
      m.prediction.top_k.front().score = static_cast<float>(score);
      ASSERT_TRUE(stage_->process(std::move(m), out_).ok());
    }
  }

  // What stream 0 got on the bus, in order: "began car 0..1" of its segments, the event's name of its events.
  std::vector<std::string> segments_and_events() const {
    std::vector<std::string> order;
    for (const auto& [topic, j] : bus_->sent) {
      if (topic == "segments/s0") {
        order.push_back(j["event"].get<std::string>() + " " + j["label"].get<std::string>() + " " +
                        std::to_string(j["start_seq"].get<int>()) + ".." + std::to_string(j["end_seq"].get<int>()));
      } else if (topic == "events/s0") {
        order.push_back(j["event"].get<std::string>());
      }
    }
    return order;
  }

  static Message result(uint32_t stream, uint64_t seq, const std::string& label) {
    Message m;
    m.kind = MessageKind::kResult;
    m.env = testing::envelope(stream, seq);
    m.env.pts_ns = 33000000 * static_cast<int64_t>(seq);
    m.env.mark_entry(StageKind::kPreprocess, m.env.capture_ns + 1000000);
    m.prediction.model = "cnn";
    m.prediction.top_k = {{4, 0.8f, label}, {1, 0.1f, "other"}};
    return m;
  }

  // A live job with segments of min_frames and pictures: the requests publish makes land in asked_.
  void ask_pictures(uint32_t min_frames) {
    config_.job.mode = JobMode::kLive;
    config_.publish.segments_min_frames = min_frames;
    config_.publish.segments_pictures_dir = "/pictures";
    stage_->set_picture_requester([this](const PictureRequest& r) { asked_.push_back(r); });
  }
  // Ingest's answer: a picture of frame `seq` written at `path` (empty: `error` says why not).
  static Message picture_answer(uint64_t seq, const std::string& label, uint64_t start_seq, const std::string& path,
                                const std::string& error = "") {
    Message m = Message::stream_event(MessageKind::kStreamPicture, result(0, seq, label).env, StreamEvent{});
    m.event.picture = path;
    m.event.message = error;
    m.event.label = label;
    m.event.segment_start_seq = start_seq;
    return m;
  }
  // The picture messages said on segments/s0 so far.
  std::vector<nlohmann::json> pictures_said() const {
    std::vector<nlohmann::json> out;
    for (const auto& [topic, j] : bus_->sent) {
      if (topic == "segments/s0" && j["event"] == "picture") out.push_back(j);
    }
    return out;
  }

  Config config_;
  std::vector<PictureRequest> asked_;
  std::unique_ptr<PublishStage> stage_;
  FakeBus* bus_ = nullptr;
  CollectingEmitter out_;
};

TEST_F(PublishStageTest, ResultJsonCarriesTheSchemaFields) {
  open();
  ASSERT_TRUE(stage_->process(result(1, 0, "ball"), out_).ok());
  ASSERT_EQ(bus_->sent.size(), 1u);
  const auto& [topic, j] = bus_->sent[0];
  EXPECT_EQ(topic, "results/s1");
  EXPECT_EQ(j["schema"], "vapipe.result");
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["stream_id"], "s1");
  EXPECT_EQ(j["seq"], 0);
  EXPECT_EQ(j["pts_ms"], 0.0);
  EXPECT_EQ(j["label"], "ball");
  EXPECT_EQ(j["class_id"], 4);
  EXPECT_NEAR(j["score"].get<double>(), 0.8, 1e-6);
  EXPECT_EQ(j["top_k"].size(), 2u);
  EXPECT_EQ(j["model"], "cnn");
  EXPECT_TRUE(j["error"].is_null());
  EXPECT_GE(j["latency_ms"]["total"].get<double>(), 0.0);
  EXPECT_NEAR(j["latency_ms"]["ingest"].get<double>(), 1.0, 1e-6);
}

TEST_F(PublishStageTest, ErrorResultHasNullLabelAndTheError) {
  open();
  Message m = result(0, 0, "x");
  m.prediction.top_k.clear();
  m.prediction.error = "preprocess: bad layout";
  ASSERT_TRUE(stage_->process(std::move(m), out_).ok());
  const auto& j = bus_->sent[0].second;
  EXPECT_TRUE(j["label"].is_null());
  EXPECT_EQ(j["error"], "preprocess: bad layout");
}

TEST_F(PublishStageTest, JsonLinesAreFlushedByTheirDeadlineWithoutWaitingForMore) {
  // A live camera that goes down leaves its `reconnecting` event as the last line for a while: a
  // reader tailing the file must see it then, not when later lines fill the buffer.
  config_.publish.jsonl_path = ::testing::TempDir() + "publish-flush-" + std::to_string(getpid()) + ".jsonl";
  open();
  auto lines_in_file = [&] {
    std::ifstream in(config_.publish.jsonl_path);
    std::string line;
    size_t n = 0;
    while (std::getline(in, line)) ++n;
    return n;
  };
  ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamStart, testing::envelope(0, 0), {"test://ball", "", 0, 0}), out_).ok());
  ASSERT_TRUE(stage_->process(result(0, 0, "ball"), out_).ok());
  EXPECT_EQ(lines_in_file(), 0u);  // written in blocks ...
  auto deadline = stage_->next_deadline();
  ASSERT_TRUE(deadline.has_value());
  EXPECT_LE(*deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(250));
  std::this_thread::sleep_until(*deadline);
  ASSERT_TRUE(stage_->on_deadline(out_).ok());
  EXPECT_EQ(lines_in_file(), 2u);  // ... and flushed by the deadline
  auto next = stage_->next_deadline();  // nothing left to flush: only an archive job's progress log, if any
  EXPECT_TRUE(!next || *next > std::chrono::steady_clock::now() + std::chrono::seconds(5));
  ASSERT_TRUE(stage_->close(out_).ok());
  std::filesystem::remove(config_.publish.jsonl_path);
}

// A stream's started event says what it classifies of its frames (streams[].roi, rotate/mirror), so
// that `vapipe segments --frames` shows the region the model saw; absent for a whole, unturned one.
TEST_F(PublishStageTest, AStartedEventSaysTheStreamsRegionAndTurn) {
  config_ = testing::test_config(2);
  config_.streams[0].roi = {0.5, 0, 0.5, 1};
  config_.streams[0].turn = Orientation::kRotate180;
  open();
  for (uint32_t stream = 0; stream < 2; ++stream) {
    ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamStart, testing::envelope(stream, 0),
                                                      {"test://ball", "", 0, 0}), out_).ok());
  }
  ASSERT_EQ(bus_->sent.size(), 2u);
  const nlohmann::json& turned = bus_->sent[0].second;
  EXPECT_EQ(turned["event"], "started");
  EXPECT_EQ(turned["roi"], nlohmann::json::array({0.5, 0, 0.5, 1}));
  EXPECT_EQ(turned["turn"], "rotate-180");
  EXPECT_FALSE(bus_->sent[1].second.contains("roi"));
  EXPECT_FALSE(bus_->sent[1].second.contains("turn"));
  // Ingest's word on the turn where it says one (ingest.orientation as_stored: "rotate-0"; a stream of
  // its own turn is said as its config has it).
  StreamEvent as_stored{"test://ball", "", 0, 0};
  as_stored.turn = "rotate-0";
  ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamStart, testing::envelope(1, 0), as_stored),
                              out_).ok());
  ASSERT_EQ(bus_->sent.size(), 3u);
  EXPECT_EQ(bus_->sent[2].second["turn"], "rotate-0");
}

// A reload changed a stream's settings: its changed event says its region and turn from then on (both,
// whatever changed), and a started event that comes after it (a stream that had no frame yet) says the
// new ones.
TEST_F(PublishStageTest, AChangedEventSaysTheNewRegionAndTurnAndALaterStartedEventToo) {
  config_ = testing::test_config(2);
  config_.job.mode = JobMode::kLive;
  config_.streams[0].roi = {0.5, 0, 0.5, 1};
  open();
  ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamStart, testing::envelope(0, 0),
                                                    {"rtsp://cam/a", "", 0, 0}), out_).ok());
  StreamEvent roi{"rtsp://cam/a", "a reload changed its roi", 0, 0};
  roi.roi = {0, 0, 1, 1};
  roi.turn = "rotate-90";
  ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamChanged, testing::envelope(0, 0), roi), out_).ok());
  StreamEvent turned{"rtsp://cam/b2", "a reload changed its uri, rotate", 0, 0};
  turned.roi = {0, 0.5, 1, 0.5};
  turned.turn = "rotate-180";
  ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamChanged, testing::envelope(1, 0), turned), out_).ok());
  ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamStart, testing::envelope(1, 0),
                                                    {"rtsp://cam/b2", "", 0, 0}), out_).ok());
  ASSERT_EQ(bus_->sent.size(), 4u);
  const nlohmann::json& a = bus_->sent[1].second;
  EXPECT_EQ(bus_->sent[1].first, "events/s0");
  EXPECT_EQ(a["event"], "changed");
  EXPECT_EQ(a["message"], "a reload changed its roi");
  EXPECT_EQ(a["roi"], nlohmann::json::array({0, 0, 1, 1}));
  EXPECT_EQ(a["turn"], "rotate-90");
  EXPECT_EQ(a["uri"], "rtsp://cam/a");
  const nlohmann::json& b = bus_->sent[2].second;
  EXPECT_EQ(b["event"], "changed");
  EXPECT_EQ(b["uri"], "rtsp://cam/b2");
  EXPECT_EQ(b["turn"], "rotate-180");
  const nlohmann::json& b_started = bus_->sent[3].second;
  EXPECT_EQ(b_started["event"], "started");
  EXPECT_EQ(b_started["roi"], nlohmann::json::array({0, 0.5, 1, 0.5}));
  EXPECT_EQ(b_started["turn"], "rotate-180");
}

// A reload gave the camera a new address (or the stream a new region): a segment does not run across
// the change, in either segments_labels mode; the label begins again after min_frames of the new frames.
TEST_F(PublishStageTest, AChangedEventEndsTheStreamsSegmentAndItsLabelBeginsAgain) {
  for (const char* labels : {"top1", "each"}) {
    config_ = testing::test_config(2);
    config_.job.mode = JobMode::kLive;
    config_.publish.segments_min_frames = 2;
    config_.publish.segments_labels = labels;
    config_.publish.segments_min_score = 0.5;  // "other" (0.1 on each frame) is no label
    make_stage();
    open();
    uint64_t seq = 0;
    send_top1(&seq, "car", 0.9, 3);  // car began at seq 0
    StreamEvent changed{"rtsp://cam/new", "a reload changed its uri", 3, 0};
    ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamChanged, testing::envelope(0, seq), changed), out_).ok());
    send_top1(&seq, "car", 0.9, 1);  // one frame of the new camera: not yet a segment
    send_top1(&seq, "car", 0.9, 1);  // car began again at seq 3
    ASSERT_TRUE(stage_->process(testing::end_message(0, seq), out_).ok());
    const std::vector<std::string> order = segments_and_events();
    EXPECT_EQ(order, (std::vector<std::string>{"began car 0..1", "ended car 0..2", "changed", "began car 3..4",
                                               "ended car 3..4", "eos"}))
        << labels;
  }
}

// A reload that changes only how often frames are sampled (max_fps at night, keyframes_only) leaves what
// they show as it was: the segment goes on, no `ended` and `began` again (each an alert; found
// 2026-12-07). Its frames' seq goes on.
TEST_F(PublishStageTest, AChangedEventOfTheSamplingOnlyLeavesTheSegmentOpen) {
  for (const char* labels : {"top1", "each"}) {
    config_ = testing::test_config(2);
    config_.job.mode = JobMode::kLive;
    config_.publish.segments_min_frames = 2;
    config_.publish.segments_labels = labels;
    config_.publish.segments_min_score = 0.5;
    make_stage();
    open();
    ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamStart, testing::envelope(0, 0),
                                                      {"rtsp://cam/1", "", 0, 0}), out_).ok());
    uint64_t seq = 0;
    send_top1(&seq, "car", 0.9, 3);  // car began at seq 0
    StreamEvent changed{"rtsp://cam/1", "a reload changed its max_fps", 3, 0};
    ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamChanged, testing::envelope(0, seq), changed), out_).ok());
    send_top1(&seq, "car", 0.9, 2);
    ASSERT_TRUE(stage_->process(testing::end_message(0, seq), out_).ok());
    const std::vector<std::string> order = segments_and_events();
    EXPECT_EQ(order, (std::vector<std::string>{"started", "began car 0..1", "changed", "ended car 0..4", "eos"}))
        << labels;
  }
}

// A camera lost mid-segment (reconnecting: its lane restarted, attempt 0, or the camera went away) ends
// the segment before the event says so: until 2026-12-06 a segment ran across the outage, its
// start_ms of one connection and end_ms of the next (pts_ms starts over), its picture of the first
// and no clip for the second. After it resumes, the label begins again after min_frames new frames.
// An archive job's stream goes on from its next frame on the same timeline: its segment goes on.
TEST_F(PublishStageTest, AReconnectionEndsALiveStreamsSegmentAndItsLabelBeginsAgain) {
  struct Case {
    const char* labels;
    uint32_t attempt;  // 0: its lane restarted
    JobMode mode;
  };
  std::vector<Case> cases;
  for (const char* labels : {"top1", "each"}) {
    for (uint32_t attempt : {0u, 1u}) {
      for (JobMode mode : {JobMode::kLive, JobMode::kArchive}) cases.push_back({labels, attempt, mode});
    }
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.labels) + ", attempt " + std::to_string(c.attempt) +
                 (c.mode == JobMode::kLive ? ", live" : ", archive"));
    config_ = testing::test_config(2);
    config_.job.mode = c.mode;
    config_.publish.segments_min_frames = 2;
    config_.publish.segments_labels = c.labels;
    config_.publish.segments_min_score = 0.5;
    make_stage();
    open();
    auto event = [&](MessageKind kind, uint64_t seq, std::string message) {
      StreamEvent ev{"rtsp://cam/1", std::move(message), seq, 0};
      ev.attempt = c.attempt;
      return Message::stream_event(kind, testing::envelope(0, seq), ev);
    };
    uint64_t seq = 0;
    send_top1(&seq, "car", 0.9, 3);  // car began at seq 0
    ASSERT_TRUE(stage_->process(event(MessageKind::kStreamReconnecting, seq, "end of stream"), out_).ok());
    ASSERT_TRUE(stage_->process(event(MessageKind::kStreamReconnecting, seq, "connection refused"), out_).ok());
    ASSERT_TRUE(stage_->process(event(MessageKind::kStreamResumed, seq, ""), out_).ok());
    send_top1(&seq, "car", 0.9, 1);  // live: one frame of the new connection, not yet a segment
    send_top1(&seq, "car", 0.9, 1);  // live: car began again at seq 3
    ASSERT_TRUE(stage_->process(testing::end_message(0, seq), out_).ok());
    const std::vector<std::string> order = segments_and_events();
    if (c.mode == JobMode::kLive) {
      EXPECT_EQ(order, (std::vector<std::string>{"began car 0..1", "ended car 0..2", "reconnecting", "reconnecting",
                                                 "resumed", "began car 3..4", "ended car 3..4", "eos"}));
    } else {
      EXPECT_EQ(order, (std::vector<std::string>{"began car 0..1", "reconnecting", "reconnecting", "resumed",
                                                 "ended car 0..4", "eos"}));
    }
  }
}

// publish.segments_reconnect_grace_s: a live camera lost mid-segment keeps its segment open. Back in
// time with the same label: the segment goes on across the outage (no second "began", a Home Assistant
// sensor no OFF and ON), and its "ended" counts the reconnection. Back with another label: the segment
// ends at its last frame before the loss once the other label has begun. Not back in time: it ends
// then (on_deadline), at that same frame. Either segments_labels mode, a lane's restart (attempt 0) too.
TEST_F(PublishStageTest, ALostCameraKeepsItsSegmentForTheReconnectGrace) {
  for (const char* labels : {"top1", "each"}) {
    for (uint32_t attempt : {0u, 1u}) {
      SCOPED_TRACE(std::string(labels) + ", attempt " + std::to_string(attempt));
      auto event = [&](MessageKind kind, uint64_t seq, std::string message) {
        StreamEvent ev{"rtsp://cam/1", std::move(message), seq, 0};
        ev.attempt = attempt;
        return Message::stream_event(kind, testing::envelope(0, seq), ev);
      };
      auto start = [&](double grace_s) {
        config_ = testing::test_config(2);
        config_.job.mode = JobMode::kLive;
        config_.publish.segments_min_frames = 2;
        config_.publish.segments_labels = labels;
        config_.publish.segments_min_score = 0.5;
        config_.publish.segments_reconnect_grace_s = grace_s;
        make_stage();
        open();
      };
      // Back in time, the same label.
      start(30);
      uint64_t seq = 0;
      send_top1(&seq, "car", 0.9, 3);  // car began at seq 0
      ASSERT_TRUE(stage_->process(event(MessageKind::kStreamReconnecting, seq, "end of stream"), out_).ok());
      ASSERT_TRUE(stage_->process(event(MessageKind::kStreamReconnecting, seq, "connection refused"), out_).ok());
      ASSERT_TRUE(stage_->process(event(MessageKind::kStreamResumed, seq, ""), out_).ok());
      seq += 5;  // (the frames the outage took)
      send_top1(&seq, "car", 0.9, 2);
      ASSERT_TRUE(stage_->process(testing::end_message(0, seq), out_).ok());
      EXPECT_EQ(segments_and_events(), (std::vector<std::string>{"began car 0..1", "reconnecting", "reconnecting",
                                                                 "resumed", "ended car 0..9", "eos"}));
      for (const auto& [topic, j] : bus_->sent) {
        if (topic == "segments/s0") {
          EXPECT_EQ(j["reconnections"], j["event"] == "ended" ? 1 : 0) << j.dump();
        }
      }
      // Back in time, another label: car ends at its last frame before the loss, once truck began.
      start(30);
      seq = 0;
      send_top1(&seq, "car", 0.9, 3);
      ASSERT_TRUE(stage_->process(event(MessageKind::kStreamReconnecting, seq, "end of stream"), out_).ok());
      ASSERT_TRUE(stage_->process(event(MessageKind::kStreamResumed, seq, ""), out_).ok());
      send_top1(&seq, "truck", 0.9, 2);
      ASSERT_TRUE(stage_->process(testing::end_message(0, seq), out_).ok());
      EXPECT_EQ(segments_and_events(), (std::vector<std::string>{"began car 0..1", "reconnecting", "resumed",
                                                                 "ended car 0..2", "began truck 3..4", "ended truck 3..4",
                                                                 "eos"}));
      // Not back in time: the segment ends when the grace is over, at its last frame before the loss.
      start(0.2);
      seq = 0;
      send_top1(&seq, "car", 0.9, 3);
      ASSERT_TRUE(stage_->process(event(MessageKind::kStreamReconnecting, seq, "end of stream"), out_).ok());
      const std::optional<SteadyTime> due = stage_->next_deadline();
      ASSERT_TRUE(due.has_value());
      EXPECT_LE(*due, std::chrono::steady_clock::now() + std::chrono::milliseconds(200));
      ASSERT_TRUE(stage_->on_deadline(out_).ok());  // (not yet)
      EXPECT_EQ(segments_and_events(), (std::vector<std::string>{"began car 0..1", "reconnecting"}));
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      ASSERT_TRUE(stage_->on_deadline(out_).ok());
      ASSERT_TRUE(stage_->process(event(MessageKind::kStreamReconnecting, seq, "connection refused"), out_).ok());
      ASSERT_TRUE(stage_->process(event(MessageKind::kStreamResumed, seq, ""), out_).ok());
      send_top1(&seq, "car", 0.9, 2);  // car begins again
      ASSERT_TRUE(stage_->process(testing::end_message(0, seq), out_).ok());
      EXPECT_EQ(segments_and_events(), (std::vector<std::string>{"began car 0..1", "reconnecting", "ended car 0..2",
                                                                 "reconnecting", "resumed", "began car 3..4",
                                                                 "ended car 3..4", "eos"}));
      for (const auto& [topic, j] : bus_->sent) {  // (held, not gone on across: no reconnection counted)
        if (topic == "segments/s0") {
          EXPECT_EQ(j["reconnections"], 0) << j.dump();
        }
      }
    }
  }
}

// With clips, a segment held across a camera's outage asks ingest to go on with its clip (cut when the
// camera's decoder started over) from the frame it goes on with; its clip is not said missing while
// the camera is away (within the grace). One that another label ends after the outage ends its clip.
TEST_F(PublishStageTest, ASegmentThatGoesOnAcrossAReconnectionAsksForItsClipToGoOn) {
  for (const char* labels : {"top1", "each"}) {
    SCOPED_TRACE(labels);
    auto event = [&](MessageKind kind, uint64_t seq) {
      return Message::stream_event(kind, testing::envelope(0, seq), StreamEvent{"rtsp://cam/1", "", seq, 0});
    };
    auto kinds = [&] {
      std::vector<std::string> out;
      for (const PictureRequest& r : asked_) {
        if (r.kind == PictureRequest::Kind::kPicture) continue;
        out.push_back(r.label + (r.kind == PictureRequest::Kind::kClipStart ? " clip_start"
                                 : r.kind == PictureRequest::Kind::kClipEnd ? " clip_end"
                                 : r.kind == PictureRequest::Kind::kClipGoesOn ? " clip_goes_on"
                                                                                : " other"));
      }
      return out;
    };
    auto start = [&] {
      config_ = testing::test_config(2);
      asked_.clear();
      make_stage();
      ask_pictures(2);
      config_.publish.segments_labels = labels;
      config_.publish.segments_min_score = 0.5;
      config_.publish.segments_clips = true;
      config_.publish.segments_clip_max_s = 1;
      config_.publish.segments_reconnect_grace_s = 30;
      stage_->set_picture_answer_timeout(std::chrono::seconds(1));
      open();
    };
    start();
    uint64_t seq = 0;
    send_top1(&seq, "car", 0.9, 3);
    ASSERT_EQ(asked_.front().kind, PictureRequest::Kind::kPicture);  // (answered)
    ASSERT_TRUE(stage_->process(picture_answer(static_cast<uint64_t>(asked_.front().frame_seq), "car", 0, asked_.front().path), out_).ok());
    ASSERT_TRUE(stage_->process(event(MessageKind::kStreamReconnecting, seq), out_).ok());
    // Its clip is due in about 2 s (segments_clip_max_s and the answer's timeout), its part before the
    // outage said once the camera is back: not said missing until the grace is over.
    const std::optional<SteadyTime> due = stage_->next_deadline();
    ASSERT_TRUE(due.has_value());
    EXPECT_GE(*due, std::chrono::steady_clock::now() + std::chrono::seconds(25));
    ASSERT_TRUE(stage_->process(event(MessageKind::kStreamResumed, seq), out_).ok());
    seq += 5;
    send_top1(&seq, "car", 0.9, 2);
    EXPECT_EQ(kinds(), (std::vector<std::string>{"car clip_start", "car clip_goes_on"}));
    ASSERT_EQ(asked_.back().kind, PictureRequest::Kind::kClipGoesOn);
    EXPECT_EQ(asked_.back().segment_start_seq, 0u);
    EXPECT_EQ(asked_.back().frame_seq, 8);
    EXPECT_EQ(asked_.back().frame_pts_ns, 8 * 33000000);  // the first frame it went on with
    ASSERT_TRUE(stage_->process(testing::end_message(0, seq), out_).ok());
    EXPECT_EQ(kinds(), (std::vector<std::string>{"car clip_start", "car clip_goes_on", "car clip_end"}));

    // Back with another label: the held segment ends, and with it its clip; nothing goes on.
    start();
    seq = 0;
    send_top1(&seq, "car", 0.9, 3);
    ASSERT_TRUE(stage_->process(event(MessageKind::kStreamReconnecting, seq), out_).ok());
    ASSERT_TRUE(stage_->process(event(MessageKind::kStreamResumed, seq), out_).ok());
    send_top1(&seq, "truck", 0.9, 2);
    EXPECT_EQ(kinds(), (std::vector<std::string>{"car clip_start", "car clip_end", "truck clip_start"}));
  }
}

// A live job runs for months; its results file is rotated by logrotate's copytruncate (copied, then
// emptied in place while the job writes on). The lines after that start at the file's start: before,
// they went on at the old offset, after a hole of zero bytes as long as the file had been.
TEST_F(PublishStageTest, AResultsFileEmptiedUnderTheJobIsWrittenOnFromItsStart) {
  config_.publish.jsonl_path = ::testing::TempDir() + "publish-rotated-" + std::to_string(getpid()) + ".jsonl";
  open();
  auto flush = [&] {
    auto deadline = stage_->next_deadline();
    ASSERT_TRUE(deadline.has_value());
    std::this_thread::sleep_until(*deadline);
    ASSERT_TRUE(stage_->on_deadline(out_).ok());
  };
  ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamStart, testing::envelope(0, 0), {"test://ball", "", 0, 0}), out_).ok());
  for (uint64_t seq = 0; seq < 20; ++seq) ASSERT_TRUE(stage_->process(result(0, seq, "ball"), out_).ok());
  flush();
  ASSERT_GT(std::filesystem::file_size(config_.publish.jsonl_path), 1000u);
  std::filesystem::resize_file(config_.publish.jsonl_path, 0);  // copytruncate's second step
  for (uint64_t seq = 20; seq < 23; ++seq) ASSERT_TRUE(stage_->process(result(0, seq, "ball"), out_).ok());
  flush();
  std::ifstream in(config_.publish.jsonl_path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes.find('\0'), std::string::npos) << "a hole of zero bytes before the new lines";
  std::istringstream lines(bytes);
  std::string line;
  std::vector<uint64_t> seqs;
  while (std::getline(lines, line)) seqs.push_back(nlohmann::json::parse(line)["payload"]["seq"].get<uint64_t>());
  EXPECT_EQ(seqs, (std::vector<uint64_t>{20, 21, 22}));
  ASSERT_TRUE(stage_->close(out_).ok());
  std::filesystem::remove(config_.publish.jsonl_path);
}

// The seq of each result of s0 in a JSON-lines results file, in the file's order.
std::vector<uint64_t> recorded_seqs(const std::filesystem::path& path) {
  std::vector<uint64_t> seqs;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j["topic"] == "results/s0") seqs.push_back(j["payload"]["seq"]);
  }
  return seqs;
}

// A live job's results file is kept across the job's starts (a camera service restarted by a deploy
// or a reboot must not wipe what it recorded): the new run's lines go on after the earlier run's,
// once the part of a line a killed job left is cut. An archive job's fresh run empties it: its
// record is that run's (`--resume` goes on in it instead).
TEST_F(PublishStageTest, ALiveJobsResultsFileIsKeptAcrossItsStartsAndAnArchiveJobsFreshRunEmptiesIt) {
  config_.publish.jsonl_path = ::testing::TempDir() + "publish-kept-" + std::to_string(getpid()) + ".jsonl";
  const std::string earlier = "{\"topic\":\"results/s0\",\"payload\":{\"seq\":7}}\n";
  { std::ofstream(config_.publish.jsonl_path) << earlier << "{\"topic\":\"results/s0\",\"payl"; }  // killed mid-line
  config_.job.mode = JobMode::kLive;
  open();
  ASSERT_TRUE(stage_->process(result(0, 0, "ball"), out_).ok());
  ASSERT_TRUE(stage_->process(result(0, 1, "ball"), out_).ok());
  ASSERT_TRUE(stage_->close(out_).ok());
  EXPECT_EQ(recorded_seqs(config_.publish.jsonl_path), (std::vector<uint64_t>{7, 0, 1}));  // every line whole

  SetUp();  // the same file in an archive job's fresh run
  config_.publish.jsonl_path = ::testing::TempDir() + "publish-kept-" + std::to_string(getpid()) + ".jsonl";
  open();
  ASSERT_TRUE(stage_->process(result(0, 0, "ball"), out_).ok());
  ASSERT_TRUE(stage_->close(out_).ok());
  EXPECT_EQ(recorded_seqs(config_.publish.jsonl_path), (std::vector<uint64_t>{0}));
  std::filesystem::remove(config_.publish.jsonl_path);
}

// Sleeps until `ms` milliseconds into Unix second `second` (a results file named by the second moves
// on at its start); returns `second`.
int64_t sleep_into_second(int64_t second, int ms) {
  std::this_thread::sleep_until(std::chrono::system_clock::time_point(std::chrono::seconds(second)) +
                                std::chrono::milliseconds(ms));
  return second;
}

// publish.jsonl_path named by the time: lines go to the file of the moment they are written, and to
// the next one when the clock turns (here by the second, which the config refuses, so that the test
// sees a turn within a second); the file of the moment is appended to, not emptied, and the lock is
// one file beside them.
TEST_F(PublishStageTest, AResultsFileNamedByTheTimeMovesOnAsTheClockTurns) {
  const std::filesystem::path dir = use_timed_results("publish-timed", "%Y/results-%H%M%S.jsonl");
  // At the start of a second, so that opening and the first result fall within it.
  const int64_t first_s = sleep_into_second(wall_clock_ns() / 1000000000 + 1, 20);
  const std::filesystem::path first = results_file_at(config_.publish.jsonl_path, first_s);
  std::filesystem::create_directories(first.parent_path());
  { std::ofstream(first) << "{\"topic\":\"earlier\",\"payload\":{}}\n"; }  // a restarted job's, this second
  open();
  ASSERT_TRUE(stage_->process(result(0, 0, "ball"), out_).ok());
  // Into the next second (a whole second after the first file's, so that it cannot be the same).
  sleep_into_second(first_s + 1, 50);
  ASSERT_TRUE(stage_->process(result(0, 1, "ball"), out_).ok());
  ASSERT_TRUE(stage_->close(out_).ok());
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_EQ(files.size(), 3u);  // the lock, and two results files
  EXPECT_EQ(files[0].filename(), "._Y_results-_H_M_S.jsonl.lock") << files[0];
  EXPECT_EQ(files[1], first);
  auto lines_of = [](const std::filesystem::path& p) {
    std::ifstream in(p);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  };
  const auto before = lines_of(files[1]), after = lines_of(files[2]);
  ASSERT_EQ(before.size(), 2u);  // the earlier line kept, then seq 0
  EXPECT_EQ(nlohmann::json::parse(before[1])["payload"]["seq"], 0);
  ASSERT_EQ(after.size(), 2u);  // seq 1, then the job's summary as it closed
  EXPECT_EQ(nlohmann::json::parse(after[0])["payload"]["seq"], 1);
  EXPECT_EQ(nlohmann::json::parse(after[1])["topic"], "job/summary");
  std::filesystem::remove_all(dir);
}

// publish.jsonl_keep: as the job starts and as each new file starts, the oldest files the pattern named
// go, the newest `keep` stay (the one written now among them); a file it did not name stays too.
TEST_F(PublishStageTest, OnlyTheNewestResultsFilesNamedByTheTimeAreKept) {
  const std::filesystem::path dir = use_timed_results("publish-keep", "r-%H%M%S.jsonl");
  config_.publish.jsonl_keep = 2;
  const int64_t first_s = sleep_into_second(wall_clock_ns() / 1000000000 + 1, 20);
  std::filesystem::create_directories(dir);
  for (int64_t earlier : {3, 2}) std::ofstream(results_file_at(config_.publish.jsonl_path, first_s - earlier)) << "x\n";
  std::ofstream(dir / "notes.txt") << "mine\n";
  open();  // keeps the newest earlier file and the one of now
  EXPECT_FALSE(std::filesystem::exists(results_file_at(config_.publish.jsonl_path, first_s - 3)));
  EXPECT_TRUE(std::filesystem::exists(results_file_at(config_.publish.jsonl_path, first_s - 2)));
  ASSERT_TRUE(stage_->process(result(0, 0, "ball"), out_).ok());
  sleep_into_second(first_s + 1, 50);
  ASSERT_TRUE(stage_->process(result(0, 1, "ball"), out_).ok());  // a new file: the earlier one goes
  ASSERT_TRUE(stage_->close(out_).ok());
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  const std::string now = std::filesystem::path(results_file_at(config_.publish.jsonl_path, first_s)).filename().string();
  const std::string next =
      std::filesystem::path(results_file_at(config_.publish.jsonl_path, first_s + 1)).filename().string();
  EXPECT_EQ(names, (std::vector<std::string>{".r-_H_M_S.jsonl.lock", "notes.txt", now, next}));
  std::filesystem::remove_all(dir);
}

// The next period's file cannot be opened (here a plain file stands where its folder would be; a
// full or read-only disk alike). A live job goes on: its results go on to the bus, the lines wait,
// and each try opens the file again; once it can be made, they are written to it, in order.
TEST_F(PublishStageTest, AResultsFileNamedByTheTimeThatCannotBeOpenedYetGetsItsLinesOnceItCanBe) {
  const std::filesystem::path dir = use_timed_results("publish-timed-bad", "%H%M%S/results.jsonl");
  stage_->set_jsonl_retry_period(std::chrono::milliseconds(100));
  const int64_t first_s = sleep_into_second(wall_clock_ns() / 1000000000 + 1, 20);
  const std::filesystem::path blocked = results_file_at(config_.publish.jsonl_path, first_s + 1);
  std::filesystem::create_directories(dir);
  { std::ofstream(blocked.parent_path()) << "not a folder"; }
  open();
  ASSERT_TRUE(stage_->process(result(0, 0, "ball"), out_).ok());
  sleep_into_second(first_s + 1, 50);
  ASSERT_TRUE(stage_->process(result(0, 1, "ball"), out_).ok());
  ASSERT_TRUE(stage_->process(result(0, 2, "ball"), out_).ok());
  EXPECT_EQ(bus_->sent.size(), 3u);  // the bus has them all
  const std::optional<ResultsFileHealth> refused = stage_->metrics().results_file;
  ASSERT_TRUE(refused.has_value());
  EXPECT_FALSE(refused->writable);
  EXPECT_EQ(refused->path, blocked.string());
  EXPECT_EQ(refused->error.rfind(blocked.string() + ": cannot be opened (", 0), 0u) << refused->error;
  EXPECT_EQ(refused->lines_waiting, 2u);
  EXPECT_EQ(stage_->exit_code(), 0);
  // Still refused at the next try; then its folder can be made.
  EXPECT_FALSE(try_results_file_again().writable);
  std::filesystem::remove(blocked.parent_path());
  const ResultsFileHealth taken = try_results_file_again();
  EXPECT_TRUE(taken.writable);
  EXPECT_EQ(taken.lines_waiting, 0u);
  EXPECT_EQ(taken.lines_lost, 0u);
  EXPECT_EQ(recorded_seqs(blocked), (std::vector<uint64_t>{1, 2}));
  std::filesystem::remove_all(dir);
}

// A live job's results file refuses its lines (the disk is full; here the process's file-size limit,
// which the kernel enforces the same way, with a short write and then an error): the results go on
// to the bus, the lines wait (the oldest dropped beyond kJsonlBacklogBytes, counted), and once the
// file takes lines again they are written, whole and in order: the file has each line once, and no
// part of one.
TEST_F(PublishStageTest, ALiveJobsResultsGoOnToTheBusWhileItsFileRefusesThemAndReachItOnceItTakesThemAgain) {
  config_.job.mode = JobMode::kLive;
  config_.publish.jsonl_path = ::testing::TempDir() + ("publish-refused-" + std::to_string(getpid()) + ".jsonl");
  stage_->set_jsonl_retry_period(std::chrono::milliseconds(100));
  open();
  std::signal(SIGXFSZ, SIG_IGN);  // as the stage processes do (pipeline/signals.cpp)
  struct SavedLimit {
    rlimit limit{};
    SavedLimit() { getrlimit(RLIMIT_FSIZE, &limit); }
    ~SavedLimit() { setrlimit(RLIMIT_FSIZE, &limit); }  // also when an assertion ends the test early
  } saved_limit;
  const rlimit saved = saved_limit.limit;
  ASSERT_TRUE(stage_->process(result(0, 0, "ball"), out_).ok());
  std::this_thread::sleep_until(*stage_->next_deadline());
  ASSERT_TRUE(stage_->on_deadline(out_).ok());  // the first line written
  const uintmax_t first_line = std::filesystem::file_size(config_.publish.jsonl_path);
  rlimit full = saved;
  full.rlim_cur = first_line + 100;  // room for part of the next line only
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &full), 0);
  // Enough results for several blocks: the first block is refused right away, and no process() fails.
  uint64_t seq = 1;
  for (; seq < 2000; ++seq) ASSERT_TRUE(stage_->process(result(0, seq, "ball"), out_).ok());
  ResultsFileHealth refused = *stage_->metrics().results_file;
  EXPECT_FALSE(refused.writable);
  EXPECT_NE(refused.error.find(": cannot be written (File too large)"), std::string::npos) << refused.error;
  EXPECT_EQ(refused.lines_waiting, 1999u);
  EXPECT_EQ(std::filesystem::file_size(config_.publish.jsonl_path), first_line);  // no part of a line
  EXPECT_EQ(bus_->sent.size(), 2000u);
  // A try while it still refuses changes nothing; once it takes lines, what waited is written.
  EXPECT_FALSE(try_results_file_again().writable);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &saved), 0);
  ASSERT_TRUE(stage_->process(result(0, seq++, "ball"), out_).ok());  // kept for the next try, in order
  const ResultsFileHealth taken = try_results_file_again();
  EXPECT_TRUE(taken.writable);
  EXPECT_EQ(taken.lines_waiting, 0u);
  EXPECT_EQ(taken.lines_lost, 0u);
  const nlohmann::json health = health_json(stage_->metrics());
  EXPECT_EQ(health["results_file"]["writable"], true);
  EXPECT_TRUE(health["results_file"]["error"].is_null());
  ASSERT_TRUE(stage_->close(out_).ok());
  EXPECT_EQ(stage_->summary()["results_file_lines_lost"], 0);
  const std::vector<uint64_t> seqs = recorded_seqs(config_.publish.jsonl_path);
  ASSERT_EQ(seqs.size(), seq);
  for (uint64_t i = 0; i < seq; ++i) ASSERT_EQ(seqs[i], i);
  std::filesystem::remove(config_.publish.jsonl_path);
}

// ... and past kJsonlBacklogBytes of waiting lines (here 1 MB), the oldest are dropped and counted: in the
// metrics, the health document and the summary; the file then has the newest ones after its gap.
TEST_F(PublishStageTest, ALiveJobsFileThatRefusesLinesForLongLosesTheOldestAndSaysHowMany) {
  config_.job.mode = JobMode::kLive;
  config_.publish.jsonl_path = "/dev/full";  // refuses every write (ENOSPC)
  stage_->set_jsonl_backlog_bytes(1 << 20);      // 1 MB kept, not 64: results of about 500 bytes
  open();
  uint64_t seq = 0;
  while (stage_->metrics().results_file->lines_lost == 0 && seq < 20000) {
    ASSERT_TRUE(stage_->process(result(0, seq++, "ball"), out_).ok());
  }
  const ResultsFileHealth f = *stage_->metrics().results_file;
  EXPECT_FALSE(f.writable);
  EXPECT_EQ(f.error, "/dev/full: cannot be written (No space left on device)");
  EXPECT_GT(f.lines_lost, 0u);
  EXPECT_EQ(f.lines_waiting + f.lines_lost, seq);
  EXPECT_LE(f.lines_waiting * 300, 1u << 20);
  EXPECT_GE(f.lines_waiting * 600, 7u << 17);  // an eighth under the bound, at least
  EXPECT_EQ(bus_->sent.size(), seq);
  const nlohmann::json health = health_json(stage_->metrics());
  EXPECT_EQ(health["results_file"]["writable"], false);
  EXPECT_EQ(health["results_file"]["lines_lost"], f.lines_lost);
  EXPECT_NE(prometheus_text(stage_->metrics()).find("vapipe_results_file_writable 0\n"), std::string::npos);
  // The job ends with the file still refusing: what waited is lost too, and the summary says so.
  ASSERT_TRUE(stage_->close(out_).ok());
  EXPECT_EQ(stage_->summary()["results_file_lines_lost"], seq);
  EXPECT_EQ(stage_->exit_code(), 0);
}

// The record cannot be written (a full disk; /dev/full fails every write with ENOSPC): publish does
// not go on as if it were recorded. Its stage stops with Aborted, naming the file and the error, and
// the job fails (before, it ended with status 0 and a results file cut short: the e2e checks that).
TEST_F(PublishStageTest, AResultsFileThatCannotBeWrittenStopsTheStageNamingIt) {
  config_.publish.jsonl_path = "/dev/full";
  open();
  ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamStart, testing::envelope(0, 0),
                                                    {"test://ball", "", 0, 0}), out_).ok());
  Status failed;
  for (uint64_t seq = 0; seq < 100000 && failed.ok(); ++seq) failed = stage_->process(result(0, seq, "ball"), out_);
  if (failed.ok()) {  // fewer results than a write buffer: the flush fails
    auto deadline = stage_->next_deadline();
    ASSERT_TRUE(deadline.has_value());
    std::this_thread::sleep_until(*deadline);
    failed = stage_->on_deadline(out_);
  }
  EXPECT_EQ(failed.code(), StatusCode::kAborted);
  EXPECT_NE(failed.message().find("publish.jsonl_path /dev/full: cannot be written (No space left on device)"),
            std::string::npos) << failed.message();
  EXPECT_NE(failed.message().find("vapipe run --resume"), std::string::npos);
}

// An archive job whose file refuses only its last lines (those written when it ends): the stage fails
// naming the file, once the job summary is out on the bus (a subscriber waiting for it gets it).
TEST_F(PublishStageTest, AnArchiveJobsFileThatRefusesItsLastLinesFailsTheStageAfterItsSummaryIsOnTheBus) {
  config_.publish.jsonl_path = "/dev/full";
  open();
  ASSERT_TRUE(stage_->process(result(0, 0, "ball"), out_).ok());  // buffered: not written yet
  const Status closed = stage_->close(out_);
  EXPECT_EQ(closed.code(), StatusCode::kAborted);
  EXPECT_NE(closed.message().find("publish.jsonl_path /dev/full: cannot be written"), std::string::npos)
      << closed.message();
  ASSERT_FALSE(bus_->sent.empty());
  EXPECT_EQ(bus_->sent.back().first, "job/summary");
  EXPECT_EQ(stage_->exit_code(), kExitJsonlUnwritable);
}

// job.summary_path that cannot be written at the job's end (its disk full; here its folder's place taken
// by a file): the stage's exit says so, as for a results file (before: an error line, and exit 0).
TEST_F(PublishStageTest, ASummaryFileThatCannotBeWrittenFailsTheExitStatus) {
  const std::filesystem::path not_a_folder =
      std::filesystem::temp_directory_path() / ("vapipe-summary-" + std::to_string(getpid()));
  { std::ofstream(not_a_folder.string()) << "a file"; }
  config_.job.summary_path = (not_a_folder / "summary.json").string();
  open();
  ASSERT_TRUE(stage_->process(result(0, 0, "ball"), out_).ok());
  ASSERT_TRUE(stage_->close(out_).ok());
  ASSERT_FALSE(bus_->sent.empty());
  EXPECT_EQ(bus_->sent.back().first, "job/summary");  // (on the bus all the same)
  EXPECT_EQ(stage_->exit_code(), kExitSummaryFileUnwritable);
  std::filesystem::remove(not_a_folder);
}

TEST_F(PublishStageTest, EventsSummaryAndExitStatusReflectAFailedStream) {
  config_.publish.jsonl_path = (std::filesystem::temp_directory_path() / ("vapipe-publish-" + std::to_string(getpid()) + ".jsonl")).string();
  open();
  ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamStart, testing::envelope(0, 0), {"test://ball", "", 0, 0}), out_).ok());
  for (uint64_t i = 0; i < 3; ++i) {
    Message r = result(0, i, "ball");
    r.env.damaged = i == 1;  // decoded after a lost packet
    ASSERT_TRUE(stage_->process(std::move(r), out_).ok());
  }
  ASSERT_TRUE(stage_->process(testing::end_message(0, 3), out_).ok());
  ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamError, testing::envelope(1, 0),
                                                    {"file:///bad.mp4", "file /bad.mp4 does not exist", 0, 0}), out_).ok());
  ::testing::internal::CaptureStdout();  // the summary's table, as `vapipe run` prints it
  ASSERT_TRUE(stage_->close(out_).ok());
  const std::string printed = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(stage_->exit_code(), kExitSomeStreamsFailed);
  EXPECT_NE(printed.find("  s0: 1 of its 3 results are of pictures decoded from damaged data"), std::string::npos)
      << printed;

  std::vector<std::string> topics;
  for (const auto& [t, j] : bus_->sent) topics.push_back(t);
  EXPECT_EQ(topics, (std::vector<std::string>{"events/s0", "results/s0", "results/s0", "results/s0", "events/s0",
                                              "events/s1", "job/summary"}));
  EXPECT_EQ(bus_->sent[0].second["event"], "started");
  EXPECT_EQ(bus_->sent[1].second["damaged"], false);
  EXPECT_EQ(bus_->sent[2].second["damaged"], true);
  EXPECT_EQ(bus_->sent[4].second["event"], "eos");
  EXPECT_EQ(bus_->sent[4].second["frames"], 3);
  EXPECT_EQ(bus_->sent[5].second["event"], "error");
  EXPECT_EQ(bus_->sent[5].second["message"], "file /bad.mp4 does not exist");

  const nlohmann::json& s = stage_->summary();
  EXPECT_EQ(s["frames"], 3);
  EXPECT_EQ(s["failed_streams"], 1);
  EXPECT_EQ(s["streams"][0]["status"], "done");
  EXPECT_EQ(s["streams"][0]["frames"], 3);
  EXPECT_EQ(s["streams"][0]["damaged"], 1);

  EXPECT_EQ(s["streams"][1]["status"], "failed");
  EXPECT_NEAR(s["cost"].get<double>(), s["wall_s"].get<double>(), 1e-9);  // 1 unit per second, 1 unit

  std::ifstream in(config_.publish.jsonl_path);
  std::string line;
  size_t lines = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    EXPECT_TRUE(j.contains("topic") && j.contains("payload"));
    ++lines;
  }
  EXPECT_EQ(lines, bus_->sent.size());
  std::filesystem::remove(config_.publish.jsonl_path);
}

// An archive job stopped by a signal: a stream that ended "stopped" did not reach its end, so the job
// did not finish (exit 4, by which `vapipe run` then ends by the signal), even with another stream
// failed; its summary counts it. A live job's streams end so whenever it is stopped: it finished.
// A camera down when the live job started reconnects before its first frame, then runs: its summary's
// message is empty (it said the connection refused of long before, found 2026-12-07).
TEST_F(PublishStageTest, ACameraThatCameUpLateHasNoStaleMessageInTheSummary) {
  config_.job.mode = JobMode::kLive;
  open();
  StreamEvent refused{"rtsp://cam/1", "Could not open resource for reading and writing: connection refused", 0, 0};
  refused.attempt = 1;
  ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamReconnecting, testing::envelope(0, 0), refused),
                              out_).ok());
  ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamStart, testing::envelope(0, 0),
                                                    {"rtsp://cam/1", "", 0, 0}), out_).ok());
  ASSERT_TRUE(stage_->process(result(0, 0, "ball"), out_).ok());
  ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamEnd, testing::envelope(0, 1),
                                                    StreamEvent{"rtsp://cam/1", kStoppedReason, 1, 0}), out_).ok());
  ::testing::internal::CaptureStdout();
  ASSERT_TRUE(stage_->close(out_).ok());
  const std::string printed = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(stage_->summary()["streams"][0]["status"], "stopped");
  EXPECT_EQ(stage_->summary()["streams"][0]["message"], "");
  EXPECT_EQ(printed.find("connection refused"), std::string::npos) << printed;
}

TEST_F(PublishStageTest, AnArchiveJobWhoseStreamWasStoppedIsUnfinishedAndALiveOneIsNot) {
  for (const JobMode mode : {JobMode::kArchive, JobMode::kLive}) {
    SetUp();
    config_.job.mode = mode;
    const char* what = mode == JobMode::kArchive ? "archive" : "live";
    open();
    ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamStart, testing::envelope(0, 0),
                                                      {"test://ball", "", 0, 0}), out_).ok());
    ASSERT_TRUE(stage_->process(result(0, 0, "ball"), out_).ok());
    ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamEnd, testing::envelope(0, 0),
                                                      StreamEvent{"test://ball", kStoppedReason, 1, 0}), out_).ok());
    ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamError, testing::envelope(1, 0),
                                                      {"file:///bad.mp4", "file /bad.mp4 does not exist", 0, 0}), out_).ok());
    ASSERT_TRUE(stage_->close(out_).ok());
    EXPECT_EQ(stage_->summary()["streams"][0]["status"], "stopped") << what;
    if (mode == JobMode::kArchive) {
      EXPECT_EQ(stage_->exit_code(), kExitArchiveUnfinished);
      EXPECT_EQ(stage_->summary()["unfinished_streams"], 1);
    } else {
      EXPECT_EQ(stage_->exit_code(), kExitSomeStreamsFailed);
      EXPECT_EQ(stage_->summary()["unfinished_streams"], 0);
    }
  }
}

// A live camera that dropped and came back: events/<id> carries reconnecting (with the reason and the
// attempt) and resumed; its results go on; the summary counts the reconnection.
TEST_F(PublishStageTest, ReconnectingAndResumedEventsArePublishedAndCounted) {
  open();
  auto event = [](MessageKind kind, std::string message, uint64_t frames, uint32_t attempt) {
    StreamEvent ev{"rtsp://cam/1", std::move(message), frames, 0};
    ev.attempt = attempt;
    return Message::stream_event(kind, testing::envelope(0, 0), ev);
  };
  ASSERT_TRUE(stage_->process(event(MessageKind::kStreamStart, "", 0, 0), out_).ok());
  ASSERT_TRUE(stage_->process(result(0, 0, "a"), out_).ok());
  ASSERT_TRUE(stage_->process(event(MessageKind::kStreamReconnecting, "stalled: no frame for 10 s", 1, 1), out_).ok());
  ASSERT_TRUE(stage_->process(event(MessageKind::kStreamReconnecting, "Could not open resource", 1, 2), out_).ok());
  ASSERT_TRUE(stage_->process(event(MessageKind::kStreamResumed, "", 1, 2), out_).ok());
  ASSERT_TRUE(stage_->process(result(0, 1, "a"), out_).ok());
  ASSERT_TRUE(stage_->process(testing::end_message(0, 2), out_).ok());
  ASSERT_TRUE(stage_->process(testing::end_message(1, 0), out_).ok());
  ASSERT_TRUE(stage_->close(out_).ok());
  std::vector<std::string> events;
  for (const auto& [topic, j] : bus_->sent) {
    if (topic == "events/s0") events.push_back(j["event"].get<std::string>());
  }
  EXPECT_EQ(events, (std::vector<std::string>{"started", "reconnecting", "reconnecting", "resumed", "eos"}));
  const nlohmann::json& reconnecting = bus_->sent[2].second;
  EXPECT_EQ(reconnecting["event"], "reconnecting");
  EXPECT_EQ(reconnecting["message"], "stalled: no frame for 10 s");
  EXPECT_EQ(reconnecting["attempt"], 1);
  EXPECT_EQ(bus_->sent[4].second["attempt"], 2);
  EXPECT_FALSE(bus_->sent[0].second.contains("attempt"));
  const nlohmann::json& s = stage_->summary()["streams"][0];
  EXPECT_EQ(s["reconnects"], 1);
  EXPECT_EQ(s["status"], "done");
  EXPECT_EQ(s["frames"], 2);
  EXPECT_EQ(s["gaps"], 0);
  EXPECT_EQ(stage_->exit_code(), 0);
}

// A live job's lane restarted after a crash (pipeline/supervisor.h): the new ingest says reconnecting
// and resumed with attempt 0, and numbers on past the crash. That is a restart, not a reconnection and
// not a gap; ingest's counts start over with it.
TEST_F(PublishStageTest, ALaneRestartIsCountedAsARestartAndItsSeqJumpIsNoGap) {
  open();
  auto event = [](MessageKind kind, std::string message, uint64_t frames, uint64_t dropped, uint32_t attempt) {
    StreamEvent ev{"test://ball", std::move(message), frames, dropped};
    ev.attempt = attempt;
    return Message::stream_event(kind, testing::envelope(0, 0), ev);
  };
  ASSERT_TRUE(stage_->process(event(MessageKind::kStreamStart, "", 0, 0, 0), out_).ok());
  for (uint64_t seq = 0; seq < 3; ++seq) ASSERT_TRUE(stage_->process(result(0, seq, "a"), out_).ok());
  const std::string why = "its lane restarted: stage infer (pid 7) failed: killed by signal 9 (Killed)";
  ASSERT_TRUE(stage_->process(event(MessageKind::kStreamReconnecting, why, 0, 0, 0), out_).ok());
  ASSERT_EQ(stage_->metrics().streams[0].state, "reconnecting");
  ASSERT_TRUE(stage_->process(event(MessageKind::kStreamResumed, "", 0, 0, 0), out_).ok());
  for (uint64_t seq = 4096; seq < 4098; ++seq) ASSERT_TRUE(stage_->process(result(0, seq, "a"), out_).ok());
  ASSERT_TRUE(stage_->process(result(0, 4100, "a"), out_).ok());  // a live drop after the restart: a gap
  // The new ingest's counts: 3 frames emitted, 2 dropped, since the restart.
  ASSERT_TRUE(stage_->process(event(MessageKind::kStreamEnd, "stopped", 3, 2, 0), out_).ok());
  ASSERT_TRUE(stage_->process(testing::end_message(1, 0), out_).ok());
  ASSERT_TRUE(stage_->close(out_).ok());
  const nlohmann::json& s = stage_->summary()["streams"][0];
  EXPECT_EQ(s["restarts"], 1);
  EXPECT_EQ(s["reconnects"], 0);
  EXPECT_EQ(s["gaps"], 2);  // 4098 and 4099, not the jump over the crash
  EXPECT_EQ(s["out_of_order"], 0);
  EXPECT_EQ(s["frames"], 6);
  EXPECT_EQ(s["dropped"], 2);
  EXPECT_EQ(s["status"], "stopped");
  EXPECT_EQ(stage_->metrics().streams[0].restarts, 1u);
  EXPECT_FALSE(stage_->summary()["publish_restarted"].get<bool>());
}

// A camera that gave up, started again by a reload (pipeline/stream_table.h): its `started` after its
// `error` makes it running again, not failed; its numbering goes on with no gap, ingest's counts are
// its new life's, a label run does not span the time between, and its next end is published.
TEST_F(PublishStageTest, AStreamThatEndedAndStartsAgainIsRunningAgainAndItsNextEndCounts) {
  config_.job.mode = JobMode::kLive;
  config_.publish.segments_min_frames = 2;
  open();
  auto event = [](MessageKind kind, std::string message, uint64_t frames) {
    return Message::stream_event(kind, testing::envelope(0, 0), StreamEvent{"rtsp://cam/s0", std::move(message), frames, 0});
  };
  ASSERT_TRUE(stage_->process(event(MessageKind::kStreamStart, "", 0), out_).ok());
  ASSERT_TRUE(stage_->process(result(0, 0, "car"), out_).ok());
  ASSERT_TRUE(stage_->process(event(MessageKind::kStreamError, "gave up after 1 reconnection attempts: ...", 1), out_).ok());
  EXPECT_EQ(stage_->metrics().streams[0].state, "failed");
  ASSERT_TRUE(stage_->process(event(MessageKind::kStreamStart, "started again by a reload, after it had failed", 0),
                              out_).ok());
  EXPECT_EQ(stage_->metrics().streams[0].state, "running");
  ASSERT_TRUE(stage_->process(result(0, 1, "car"), out_).ok());  // not a segment with frame 0: a life apart
  ASSERT_TRUE(stage_->process(result(0, 2, "bus"), out_).ok());
  ASSERT_TRUE(stage_->process(event(MessageKind::kStreamEnd, "stopped", 2), out_).ok());
  ASSERT_TRUE(stage_->process(testing::end_message(1, 0), out_).ok());
  ASSERT_TRUE(stage_->close(out_).ok());
  std::vector<std::string> events;
  size_t segments = 0;
  for (const auto& [topic, j] : bus_->sent) {
    if (topic == "events/s0") events.push_back(j["event"].get<std::string>() + ":" + j["message"].get<std::string>());
    segments += topic.rfind("segments/", 0) == 0;
  }
  EXPECT_EQ(events, (std::vector<std::string>{"started:", "error:gave up after 1 reconnection attempts: ...",
                                              "started:started again by a reload, after it had failed",
                                              "eos:stopped"}));
  EXPECT_EQ(segments, 0u);
  const nlohmann::json& s = stage_->summary()["streams"][0];
  EXPECT_EQ(s["status"], "stopped");
  EXPECT_EQ(s["comebacks"], 1);
  EXPECT_EQ(stage_->metrics().streams[0].comebacks, 1u);  // /metrics, /healthz
  EXPECT_EQ(s["frames"], 3);
  EXPECT_EQ(s["gaps"], 0);
  EXPECT_EQ(s["message"], "");
  EXPECT_EQ(stage_->summary()["failed_streams"], 0);
  EXPECT_EQ(stage_->exit_code(), 0);
}

// A lane that restarts ends a stream removed earlier once more (for its own new stages): published once.
TEST_F(PublishStageTest, AStreamEndsOnceOnTheBusEvenIfItsEndArrivesTwice) {
  open();
  ASSERT_TRUE(stage_->process(testing::end_message(0, 0), out_).ok());
  ASSERT_TRUE(stage_->process(testing::end_message(0, 0), out_).ok());
  ASSERT_TRUE(stage_->process(testing::end_message(1, 0), out_).ok());
  size_t ends = 0;
  for (const auto& [topic, j] : bus_->sent) ends += topic == "events/s0";
  EXPECT_EQ(ends, 1u);
}

// publish itself crashed and was started again (kRestartReasonEnv): it takes each stream's numbering
// from its next result, does not check ingest's counts it never saw, and appends to the JSON-lines
// file after its last whole line.
TEST_F(PublishStageTest, ARestartedPublishAppendsAfterTheLastWholeLineAndCountsNoGapAtFirst) {
  const std::string jsonl = ::testing::TempDir() + "publish-restart-" + std::to_string(getpid()) + ".jsonl";
  std::ofstream(jsonl) << "{\"topic\":\"results/s0\",\"payload\":{\"seq\":0}}\n{\"topic\":\"results/s0\",\"pay";
  config_.publish.jsonl_path = jsonl;
  ::setenv(kRestartReasonEnv, "stage publish (pid 9) failed: killed by signal 9 (Killed)", 1);
  const bool opened = stage_->open(StageContext{config_}).ok();
  ::unsetenv(kRestartReasonEnv);
  ASSERT_TRUE(opened);
  ASSERT_TRUE(stage_->process(result(0, 500, "a"), out_).ok());
  ASSERT_TRUE(stage_->process(result(0, 501, "a"), out_).ok());
  EXPECT_EQ(stage_->metrics().streams[0].state, "running");
  ASSERT_TRUE(stage_->process(testing::end_message(0, 502), out_).ok());  // not 2: no error, no check
  ASSERT_TRUE(stage_->process(testing::end_message(1, 0), out_).ok());
  ASSERT_TRUE(stage_->close(out_).ok());
  EXPECT_EQ(stage_->summary()["streams"][0]["gaps"], 0);
  EXPECT_EQ(stage_->summary()["streams"][0]["frames"], 2);
  EXPECT_TRUE(stage_->summary()["publish_restarted"].get<bool>());
  std::ifstream in(jsonl);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));  // all whole
  ASSERT_GE(lines.size(), 4u);
  EXPECT_EQ(lines[0]["payload"]["seq"], 0);
  EXPECT_EQ(lines[1]["payload"]["seq"], 500);
  std::filesystem::remove(jsonl);
}

// publish.metrics_address: a real HTTP server on loopback; a scrape sees the snapshot of the last
// second (renewed by on_deadline, as the stage runner calls it).
TEST_F(PublishStageTest, MetricsAndHealthAreServedOverHttp) {
  config_.publish.metrics_address = "127.0.0.1:0";
  open();
  ASSERT_NE(stage_->metrics_server(), nullptr);
  httplib::Client client("127.0.0.1", stage_->metrics_server()->port());
  auto get = [&](const char* path) {
    auto res = client.Get(path);
    EXPECT_TRUE(res) << path;
    EXPECT_EQ(res ? res->status : 0, 200) << path;
    return res ? res->body : std::string();
  };
  EXPECT_NE(get("/metrics").find("vapipe_results_total{stream=\"s0\"} 0\n"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(get("/healthz"))["streams"]["s0"]["state"], "pending");

  ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamStart, testing::envelope(0, 0), {"test://ball", "", 0, 0}), out_).ok());
  for (uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(stage_->process(result(0, i, "ball"), out_).ok());
  ASSERT_TRUE(stage_->next_deadline().has_value());
  ASSERT_TRUE(stage_->on_deadline(out_).ok());
  const std::string metrics = get("/metrics");
  EXPECT_NE(metrics.find("vapipe_results_total{stream=\"s0\"} 3\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("vapipe_stream_state{stream=\"s0\",state=\"running\"} 1\n"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(get("/healthz"))["streams"]["s0"]["results"], 3);
  EXPECT_EQ(client.Get("/nothing-here")->status, 404);
  // Not started by `vapipe run` (no supervisor to signal): the reload request says so.
  auto reload = client.Post("/-/reload");
  ASSERT_TRUE(reload);
  EXPECT_EQ(reload->status, 409);
  EXPECT_NE(reload->body.find("not started by `vapipe run`"), std::string::npos) << reload->body;
}

// POST /-/reload answers once the reload is done (as Prometheus's, which config-reloading sidecars expect
// 200 of), with the reload request's status and text; ?timeout=S bounds the wait, ?wait=0 answers once
// asked. Two waits at once at most (each holds a server thread; scrapes still answer); a stop ends them.
TEST(MetricsServer, PostReloadAnswersWhatBecameOfTheReloadUnlessAskedNotToWait) {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::optional<std::chrono::milliseconds>> waits;
  int waiting = 0;
  bool hold = false, saw_stopping = false;
  auto server = MetricsServer::start(
      "127.0.0.1:0", [&](std::optional<std::chrono::milliseconds> wait, const std::atomic<bool>& stopping) {
        std::unique_lock<std::mutex> lock(mutex);
        waits.push_back(wait);
        if (!wait) return MetricsServer::ReloadReply{202, "reload requested\n"};
        ++waiting;
        changed.notify_all();
        while (hold && !stopping.load()) changed.wait_for(lock, std::chrono::milliseconds(20));
        saw_stopping = saw_stopping || stopping.load();
        --waiting;
        return MetricsServer::ReloadReply{422, "the job refused the reload, and changed nothing: job.yaml:3: why\n"};
      });
  ASSERT_TRUE(server.ok()) << server.status().message();
  (*server)->update("vapipe_job_info 1\n", R"({"status":"ok"})");
  httplib::Client client("127.0.0.1", (*server)->port());
  client.set_read_timeout(30, 0);
  auto res = client.Post("/-/reload");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 422);
  EXPECT_EQ(res->body, "the job refused the reload, and changed nothing: job.yaml:3: why\n");
  ASSERT_TRUE(client.Post("/-/reload?timeout=2.5"));
  ASSERT_TRUE(client.Post("/-/reload?wait=0"));
  {
    std::lock_guard<std::mutex> lock(mutex);
    ASSERT_EQ(waits.size(), 3u);
    EXPECT_EQ(waits[0], std::chrono::milliseconds(60000));
    EXPECT_EQ(waits[1], std::chrono::milliseconds(2500));
    EXPECT_EQ(waits[2], std::nullopt);
  }
  EXPECT_EQ(client.Post("/-/reload?wait=0")->status, 202);
  for (const std::string bad : {"abc", "0", "-1", "3601", ""}) {
    auto refused = client.Post("/-/reload?timeout=" + bad);
    ASSERT_TRUE(refused) << bad;
    EXPECT_EQ(refused->status, 400) << bad;
    EXPECT_NE(refused->body.find("timeout wants seconds from 0 to 3600"), std::string::npos) << refused->body;
  }
  EXPECT_EQ(client.Get("/-/reload")->status, 404);  // POST only
  {
    std::lock_guard<std::mutex> lock(mutex);
    EXPECT_EQ(waits.size(), 4u);  // (the refused ones asked nothing)
    hold = true;
  }
  // Two held waits: a third is answered 503 at once, and /metrics still answers.
  std::vector<std::thread> held;
  for (int i = 0; i < 2; ++i) {
    held.emplace_back([port = (*server)->port()] {
      httplib::Client c("127.0.0.1", port);
      c.set_read_timeout(30, 0);
      c.Post("/-/reload");  // answered when the server stops
    });
  }
  {
    std::unique_lock<std::mutex> lock(mutex);
    ASSERT_TRUE(changed.wait_for(lock, std::chrono::seconds(10), [&] { return waiting == 2; }));
  }
  auto third = client.Post("/-/reload");
  ASSERT_TRUE(third);
  EXPECT_EQ(third->status, 503);
  EXPECT_EQ(third->get_header_value("Retry-After"), "5");
  auto scrape = client.Get("/metrics");
  ASSERT_TRUE(scrape);
  EXPECT_EQ(scrape->status, 200);
  // The server stops: the held waits end (their request sees `stopping`), and the destructor returns.
  server->reset();
  for (auto& t : held) t.join();
  std::lock_guard<std::mutex> lock(mutex);
  EXPECT_EQ(waiting, 0);
  EXPECT_TRUE(saw_stopping);
  auto without = MetricsServer::start("127.0.0.1:0");
  ASSERT_TRUE(without.ok());
  EXPECT_EQ(httplib::Client("127.0.0.1", (*without)->port()).Post("/-/reload")->status, 404);
}

// An archive job's bus waits for a slow subscriber (lossless): that is not publish stuck in its own
// work, so the watchdog lets it wait (job.stage_timeout_s would otherwise abort a healthy job).
class SlowBus final : public BusPublisher {
 public:
  Status send(const std::string&, const std::string&) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(600));  // three watchdog timeouts' worth
    return Status::Ok();
  }
};

// One result through publish, on a bus that makes it wait, under a 0.2 s watchdog: 0 if it survived.
int publish_one_result_to_a_slow_bus() {
  Config config = testing::test_config(1);
  StageWatchdog watchdog("publish", 0.2);
  PublishStage stage([](const StageContext&) -> Result<std::unique_ptr<BusPublisher>> {
    return std::unique_ptr<BusPublisher>(std::make_unique<SlowBus>());
  });
  if (!stage.open(StageContext{config, nullptr, nullptr, nullptr, &watchdog}).ok()) return 2;
  CollectingEmitter out;
  Message m;
  m.kind = MessageKind::kResult;
  m.env = testing::envelope(0, 0);
  m.prediction.top_k = {{1, 0.9f, "ball"}};
  watchdog.working("processing a message");  // as the stage runner does
  const bool ok = stage.process(std::move(m), out).ok();
  watchdog.waiting();
  return ok ? 0 : 3;
}

TEST(PublishStageDeathTest, ASlowSubscriberIsAWaitNotAStuckStage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(publish_one_result_to_a_slow_bus()), ::testing::ExitedWithCode(0), "");
}

// publish.metrics_token_file: /metrics and /-/reload need the bearer token; /healthz without it says
// only that the job is up (a liveness probe), with it the whole document.
TEST(MetricsServer, WithATokenMetricsAndReloadNeedItAndHealthShowsOnlyTheStatusWithout) {
  int calls = 0;
  const std::string token = "s3cret-token-0123456789";
  auto server = MetricsServer::start("127.0.0.1:0", [&](std::optional<std::chrono::milliseconds>, const std::atomic<bool>&) {
    ++calls;
    return MetricsServer::ReloadReply{200, "the job reloaded: added none; removed none\n"};
  }, token);
  ASSERT_TRUE(server.ok()) << server.status().message();
  (*server)->update("vapipe_job_info 1\n", R"({"status":"ok","streams":{"yard":{"state":"running"}}})");
  httplib::Client client("127.0.0.1", (*server)->port());
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 401);
  EXPECT_EQ(metrics->get_header_value("WWW-Authenticate"), "Bearer realm=\"vapipe\"");
  EXPECT_EQ(metrics->body.find("vapipe_job_info"), std::string::npos);
  EXPECT_EQ(client.Get("/metrics", {{"Authorization", "Bearer wrong-token-0123456789"}})->status, 401);
  EXPECT_EQ(client.Get("/metrics", {{"Authorization", "Bearer " + token + "x"}})->status, 401);
  auto good = client.Get("/metrics", {{"Authorization", "Bearer " + token}});
  ASSERT_TRUE(good);
  EXPECT_EQ(good->status, 200);
  EXPECT_EQ(good->body, "vapipe_job_info 1\n");
  EXPECT_EQ(client.Get("/healthz")->body, R"({"service":"vapipe","status":"ok"})");
  EXPECT_NE(client.Get("/healthz", {{"Authorization", "Bearer " + token}})->body.find("yard"), std::string::npos);
  EXPECT_EQ(client.Post("/-/reload")->status, 401);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(client.Post("/-/reload", httplib::Headers{{"Authorization", "Bearer " + token}}, "", "text/plain")->status,
            200);
  EXPECT_EQ(calls, 1);
}

// With publish.segments_pictures_dir, GET /pictures/... serves its JPEGs, with the token; nothing outside
// it (.., a link out of it, escaped or not), and no file but a .jpg.
TEST(MetricsServer, ItServesSegmentPicturesUnderTheirFolderAndNothingElse) {
  const std::filesystem::path base = ::testing::TempDir() + ("served-pictures-" + std::to_string(getpid()));
  std::filesystem::remove_all(base);
  const std::filesystem::path dir = base / "pictures";
  std::filesystem::create_directories(dir / "gate" / "2026-12-01");
  std::ofstream(dir / "gate" / "2026-12-01" / "14-03-22.125_truck.jpg", std::ios::binary) << "\xff\xd8 a jpeg";
  std::ofstream(dir / "gate" / "notes.txt") << "not a picture";
  std::ofstream(base / "secret.jpg") << "outside the folder";
  std::filesystem::create_symlink(base / "secret.jpg", dir / "gate" / "link.jpg");
  const std::string token = "picture-token-0123456789";
  auto server = MetricsServer::start("127.0.0.1:0", nullptr, token, {}, dir.string());
  ASSERT_TRUE(server.ok()) << server.status().message();
  httplib::Client client("127.0.0.1", (*server)->port());
  const httplib::Headers auth{{"Authorization", "Bearer " + token}};
  EXPECT_EQ(client.Get("/pictures/gate/2026-12-01/14-03-22.125_truck.jpg")->status, 401);
  auto got = client.Get("/pictures/gate/2026-12-01/14-03-22.125_truck.jpg", auth);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, 200);
  EXPECT_EQ(got->body, "\xff\xd8 a jpeg");
  EXPECT_EQ(got->get_header_value("Content-Type"), "image/jpeg");
  // Written once: asked again with its ETag (a dashboard's refresh), it is not sent again.
  const std::string etag = got->get_header_value("ETag");
  EXPECT_FALSE(etag.empty());
  EXPECT_EQ(got->get_header_value("Cache-Control"), "private, max-age=86400");
  EXPECT_NE(got->get_header_value("Last-Modified").find(" GMT"), std::string::npos);
  httplib::Headers again = auth;
  again.emplace("If-None-Match", etag);
  auto unchanged = client.Get("/pictures/gate/2026-12-01/14-03-22.125_truck.jpg", again);
  ASSERT_TRUE(unchanged);
  EXPECT_EQ(unchanged->status, 304);
  EXPECT_TRUE(unchanged->body.empty());
  again = auth;
  again.emplace("If-None-Match", "\"1-2.3\"");  // another picture's
  EXPECT_EQ(client.Get("/pictures/gate/2026-12-01/14-03-22.125_truck.jpg", again)->status, 200);
  for (const char* refused : {"/pictures/gate/notes.txt", "/pictures/../secret.jpg", "/pictures/gate/%2E%2E/%2E%2E/secret.jpg",
                              "/pictures/gate/link.jpg", "/pictures/gate/2026-12-01/none.jpg", "/pictures/",
                              // A NUL (percent-decoded) would cut the path the file system sees short of
                              // the one checked: the picture above, asked for under another name.
                              "/pictures/gate/2026-12-01/14-03-22.125_truck.jpg%00.jpg",
                              "/pictures/gate/2026-12-01/14-03-22.125_truck.jpg%00/../x.jpg"}) {
    auto r = client.Get(refused, auth);
    ASSERT_TRUE(r) << refused;
    EXPECT_EQ(r->status, 404) << refused;
    EXPECT_EQ(r->body.find("outside"), std::string::npos) << refused;
  }
  std::filesystem::remove_all(base);
}

// Clips: an MP4, and a Motion JPEG camera's QuickTime file (.mov), each with its media type.
TEST(MetricsServer, ItServesClipsWithTheirMediaType) {
  const std::filesystem::path dir = ::testing::TempDir() + ("served-clips-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "gate" / "2026-12-01");
  std::ofstream(dir / "gate" / "2026-12-01" / "a_truck.mp4", std::ios::binary) << "an mp4";
  std::ofstream(dir / "gate" / "2026-12-01" / "b_truck.mov", std::ios::binary) << "a quicktime file";
  std::ofstream(dir / "gate" / "2026-12-01" / "c_truck.mkv", std::ios::binary) << "not served";
  auto server = MetricsServer::start("127.0.0.1:0", nullptr, "", {}, dir.string());
  ASSERT_TRUE(server.ok()) << server.status().message();
  httplib::Client client("127.0.0.1", (*server)->port());
  for (const auto& [file, type, body] : {std::tuple<std::string, std::string, std::string>{"a_truck.mp4", "video/mp4", "an mp4"},
                                         {"b_truck.mov", "video/quicktime", "a quicktime file"}}) {
    auto got = client.Get("/pictures/gate/2026-12-01/" + file);
    ASSERT_TRUE(got) << file;
    EXPECT_EQ(got->status, 200) << file;
    EXPECT_EQ(got->get_header_value("Content-Type"), type) << file;
    EXPECT_EQ(got->body, body) << file;
  }
  EXPECT_EQ(client.Get("/pictures/gate/2026-12-01/c_truck.mkv")->status, 404);
  std::filesystem::remove_all(dir);
}

// publish.metrics_tls_cert_file / metrics_tls_key_file: HTTPS only, and the token travels inside it.
TEST(MetricsServer, WithTlsItServesHttpsOnlyAndABadCertificateIsAnErrorNamingTheFiles) {
  const std::string tls_dir = std::string(VAPIPE_SOURCE_DIR) + "/tests/media/tls/";
  const MetricsTls tls{tls_dir + "metrics-test.crt", tls_dir + "metrics-test.key"};
  const std::string token = "s3cret-token-0123456789";
  auto server = MetricsServer::start("127.0.0.1:0", nullptr, token, tls);
  ASSERT_TRUE(server.ok()) << server.status().message();
  EXPECT_STREQ((*server)->scheme(), "https");
  (*server)->update("vapipe_job_info 1\n", R"({"status":"ok"})");
  httplib::SSLClient https("127.0.0.1", (*server)->port());
  https.set_ca_cert_path(tls.cert_file.c_str());  // the job's self-signed certificate, trusted
  https.enable_server_certificate_verification(true);
  auto good = https.Get("/metrics", {{"Authorization", "Bearer " + token}});
  ASSERT_TRUE(good) << httplib::to_string(good.error());
  EXPECT_EQ(good->status, 200);
  EXPECT_EQ(good->body.rfind("vapipe_job_info 1\n", 0), 0u) << good->body;
  EXPECT_NE(good->body.find("\nvapipe_metrics_tls_not_after_timestamp_seconds "), std::string::npos) << good->body;
  EXPECT_EQ(https.Get("/metrics")->status, 401);  // TLS does not replace the token
  // A client that does not trust the certificate gets nothing; nor does plain HTTP.
  httplib::SSLClient untrusting("127.0.0.1", (*server)->port());
  untrusting.set_ca_cert_path((tls_dir + "missing-ca.crt").c_str());
  untrusting.enable_server_certificate_verification(true);
  EXPECT_FALSE(untrusting.Get("/healthz"));
  httplib::Client plain("127.0.0.1", (*server)->port());
  plain.set_read_timeout(2);
  auto in_clear = plain.Get("/healthz");
  EXPECT_TRUE(!in_clear || in_clear->status != 200);
  // The key where the certificate should be: an error naming the key and the file.
  auto bad = MetricsServer::start("127.0.0.1:0", nullptr, "", MetricsTls{tls.key_file, tls.key_file});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("publish.metrics_tls_cert_file " + tls.key_file + ": no PEM certificate"),
            std::string::npos)
      << bad.status().message();
}

TEST_F(PublishStageTest, AMetricsAddressInUseIsAStartUpErrorNamingIt) {
  httplib::Server other;
  const int port = other.bind_to_any_port("127.0.0.1");
  config_.publish.metrics_address = "127.0.0.1:" + std::to_string(port);
  Status s = stage_->open(StageContext{config_});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("publish.metrics_address 127.0.0.1:" + std::to_string(port) + ": cannot listen"),
            std::string::npos) << s.message();
}

TEST_F(PublishStageTest, WithoutAMetricsAddressNothingIsServedAndOnlyAnArchiveJobLogsProgress) {
  config_.job.mode = JobMode::kLive;
  open();
  EXPECT_EQ(stage_->metrics_server(), nullptr);
  EXPECT_FALSE(stage_->next_deadline().has_value());
  PublishStage archive([](const StageContext&) -> Result<std::unique_ptr<BusPublisher>> {
    return std::unique_ptr<BusPublisher>(std::make_unique<FakeBus>());
  });
  config_.job.mode = JobMode::kArchive;
  ASSERT_TRUE(archive.open(StageContext{config_}).ok());
  ASSERT_TRUE(archive.next_deadline().has_value());  // the progress line, every 30 s
  EXPECT_GT(*archive.next_deadline(), std::chrono::steady_clock::now() + std::chrono::seconds(25));
}

// streams[].from and to: a part of a file counts its progress from `from` (ingest's start event gives
// the part's end as its duration): 4 s to 10 s, with a result at 7 s, is half done.
TEST_F(PublishStageTest, APartOfAFileCountsItsProgressFromItsFrom) {
  config_.streams[0].from_ns = 4'000'000'000;
  config_.streams[0].to_ns = 10'000'000'000;
  open();
  StreamEvent ev{"file:///a.mp4", "", 0, 0};
  ev.duration_ns = 10'000'000'000;
  ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamStart, testing::envelope(0, 0), ev), out_).ok());
  Message r = result(0, 0, "a");
  r.env.pts_ns = 7'000'000'000;
  ASSERT_TRUE(stage_->process(std::move(r), out_).ok());
  const JobMetrics m = stage_->metrics();
  EXPECT_DOUBLE_EQ(health_json(m)["streams"]["s0"]["progress"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(job_progress(m).done_s, 3.0);  // of its 6 s
}

// Archive progress: each file's duration comes with its start event; the timestamps of its results
// say how far it is; an ended stream is wholly done. /healthz, /metrics and the summary carry it.
TEST_F(PublishStageTest, ArchiveProgressComesFromEachFilesDurationAndItsLatestResult) {
  open();
  auto start = [](uint32_t stream, int64_t duration_ns) {
    StreamEvent ev{"file:///a.mp4", "", 0, 0};
    ev.duration_ns = duration_ns;
    ev.file_bytes = 1'000'000 + stream;
    return Message::stream_event(MessageKind::kStreamStart, testing::envelope(stream, 0), ev);
  };
  ASSERT_TRUE(stage_->process(start(0, 10'000'000'000), out_).ok());  // 10 s
  ASSERT_TRUE(stage_->process(start(1, 30'000'000'000), out_).ok());  // 30 s
  Message r = result(0, 0, "a");
  r.env.pts_ns = 5'000'000'000;  // halfway through stream 0
  ASSERT_TRUE(stage_->process(std::move(r), out_).ok());
  JobMetrics m = stage_->metrics();
  JobProgress p = job_progress(m);
  EXPECT_EQ(p.streams_timed, 2u);
  EXPECT_DOUBLE_EQ(p.media_s, 40.0);
  EXPECT_DOUBLE_EQ(p.done_s, 5.0);
  EXPECT_DOUBLE_EQ(p.ratio, 0.125);
  EXPECT_GT(p.eta_s, 0);
  const nlohmann::json health = health_json(m);
  EXPECT_DOUBLE_EQ(health["progress"]["ratio"].get<double>(), 0.125);
  EXPECT_DOUBLE_EQ(health["streams"]["s0"]["progress"].get<double>(), 0.5);
  const std::string text = prometheus_text(m);
  EXPECT_NE(text.find("vapipe_stream_progress_ratio{stream=\"s0\"} 0.5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("vapipe_job_progress_ratio 0.125\n"), std::string::npos);
  EXPECT_NE(text.find("vapipe_job_eta_seconds "), std::string::npos);
  ASSERT_TRUE(stage_->process(testing::end_message(0, 1), out_).ok());  // ended: all of it counts
  EXPECT_DOUBLE_EQ(job_progress(stage_->metrics()).done_s, 10.0);
  ASSERT_TRUE(stage_->process(testing::end_message(1, 0), out_).ok());
  ASSERT_TRUE(stage_->close(out_).ok());
  EXPECT_DOUBLE_EQ(job_progress(stage_->metrics()).ratio, 1.0);
  EXPECT_DOUBLE_EQ(stage_->summary()["streams"][1]["media_s"].get<double>(), 30.0);
  EXPECT_EQ(bus_->sent[0].second["duration_ms"], 10000.0);  // on the `started` event
  EXPECT_EQ(bus_->sent[0].second["bytes"], 1'000'000);       // the file's size as it was read
}

// Who may subscribe changes without a restart: publish looks at publish.curve_authorized_keys every
// 2 s; a changed file goes to the bus, a broken one is logged and changes nothing.
TEST_F(PublishStageTest, AChangedAuthorizedKeysFileTakesEffectWithoutARestart) {
  if (!curve_supported()) GTEST_SKIP() << "libzmq without CURVE";
  const auto path = std::filesystem::temp_directory_path() / ("vapipe-keys-" + std::to_string(getpid()));
  const std::string alice = generate_curve_key_pair()->public_key, bob = generate_curve_key_pair()->public_key;
  std::ofstream(path) << alice << "\n";
  config_.publish.curve_authorized_keys = path.string();
  open();
  ASSERT_TRUE(stage_->next_deadline().has_value());
  auto touch = [&](const std::string& text, int seconds_later) {
    std::ofstream(path) << text;
    std::filesystem::last_write_time(path, std::filesystem::file_time_type::clock::now() + std::chrono::seconds(seconds_later));
  };
  auto after_check = [&] {
    std::this_thread::sleep_until(*stage_->next_deadline());
    ASSERT_TRUE(stage_->on_deadline(out_).ok());
  };
  after_check();
  EXPECT_TRUE(bus_->authorized.empty());  // unchanged: nothing to do
  touch(alice + "\n" + bob + "  # bob\n", 5);
  after_check();
  ASSERT_EQ(bus_->authorized.size(), 1u);
  EXPECT_EQ(bus_->authorized[0], (std::vector<std::string>{alice, bob}));
  touch("not a key\n", 10);
  after_check();
  EXPECT_EQ(bus_->authorized.size(), 1u);  // broken: the list in force stays
  std::filesystem::remove(path);
}

// publish.metrics_token_file rewritten while the job runs (a rotated Secret): the new token from the
// next snapshot on (at most a second), the old one refused; a broken file keeps the token in force.
TEST_F(PublishStageTest, ARotatedMetricsTokenTakesEffectWithoutARestart) {
  const auto path = std::filesystem::temp_directory_path() / ("vapipe-token-" + std::to_string(getpid()));
  const std::string first = "first-token-0123456789", second = "second-token-0123456789";
  std::ofstream(path) << first << "\n";
  config_.publish.metrics_address = "127.0.0.1:0";
  config_.publish.metrics_token_file = path.string();
  config_.publish.metrics_token = first;  // as the config loader read it
  open();
  ASSERT_NE(stage_->metrics_server(), nullptr);
  httplib::Client client("127.0.0.1", stage_->metrics_server()->port());
  auto status_with = [&](const std::string& token) {
    auto res = client.Get("/metrics", {{"Authorization", "Bearer " + token}});
    return res ? res->status : -1;
  };
  auto after_snapshot = [&] {
    std::this_thread::sleep_until(*stage_->next_deadline());
    ASSERT_TRUE(stage_->on_deadline(out_).ok());
  };
  EXPECT_EQ(status_with(first), 200);
  after_snapshot();
  EXPECT_EQ(status_with(first), 200);  // unchanged file: nothing re-read
  std::ofstream(path) << second << "\n";
  after_snapshot();
  EXPECT_EQ(status_with(second), 200);
  EXPECT_EQ(status_with(first), 401);
  std::ofstream(path) << "short\n";  // not a valid token: the one in force stays
  after_snapshot();
  EXPECT_EQ(status_with(second), 200);
  std::filesystem::remove(path);  // gone: the same
  after_snapshot();
  EXPECT_EQ(status_with(second), 200);
}

// A webhook's token_file rewritten while the job runs (a rotated secret): the next request carries the
// new token; a file that no longer holds one keeps the token in force.
// A live job's reload of publish's outputs and segments' settings (vapipe run rewrites the job's copy
// of its config): taken by the running publish within kConfigCheckPeriod. A webhook listed again as it
// was is the same sender (its Idempotency-Key numbering goes on) at its new place; one no longer listed
// gets nothing more; a new one gets the next messages; segments_min_frames 0 ends the open segment.
TEST_F(PublishStageTest, AReloadChangesTheOutputsAndSegmentsSettingsWhileTheBusAndStreamsGoOn) {
  testing::Receiver gone, kept, added;
  const std::filesystem::path dir = ::testing::TempDir() + ("vapipe-publish-reload-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto hook = [](const testing::Receiver& r) {
    return "    - {url: 'http://127.0.0.1:" + std::to_string(r.port()) + "/hook', topics: [events/]}\n";
  };
  auto yaml = [&](const std::string& publish) {
    return testing::live_yaml({{"s0", "ball"}, {"s1", "red"}}, "publish:\n" + publish);
  };
  const std::string copy = (dir / "config.yaml").string();
  const std::string running = yaml("  segments_min_frames: 3\n  webhooks:\n" + hook(gone) + hook(kept));
  std::ofstream(copy) << running;
  auto loaded = load_config_string(running, (dir / "job.yaml").string(), dir.string());
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  config_ = *loaded;
  stage_->set_config_copy(copy);
  open();
  auto started = [](uint32_t stream) {
    return Message::stream_event(MessageKind::kStreamStart, testing::envelope(stream, 0), {"test://ball", "", 0, 0});
  };
  ASSERT_TRUE(stage_->process(started(0), out_).ok());
  ASSERT_EQ(kept.wait_for(1).size(), 1u);
  ASSERT_EQ(gone.wait_for(1).size(), 1u);
  const std::string key_before = kept.received().front().idempotency_key;  // "<sender's id>-0"
  uint64_t seq = 0;
  send_top1(&seq, "cat", 0.9, 3);  // a segment begins
  auto segment_events = [&](const std::string& event) {
    return std::count_if(bus_->sent.begin(), bus_->sent.end(),
                         [&](const auto& m) { return m.first == "segments/s0" && m.second["event"] == event; });
  };
  ASSERT_EQ(segment_events("began"), 1);

  const std::string reloaded = yaml("  webhooks:\n" + hook(kept) + hook(added));  // segments_min_frames: 0
  std::ofstream(copy + ".new") << reloaded;
  std::filesystem::rename(copy + ".new", copy);  // (as vapipe run writes it: a new file)
  std::this_thread::sleep_until(*stage_->next_deadline() + std::chrono::milliseconds(10));
  for (int i = 0; i < 8; ++i) {  // the copy is looked at every kConfigCheckPeriod
    ASSERT_TRUE(stage_->on_deadline(out_).ok());
    if (stage_->webhooks().size() == 2 && stage_->webhooks()[1]->name().find(std::to_string(added.port())) !=
                                              std::string::npos) {
      break;
    }
    std::this_thread::sleep_until(*stage_->next_deadline() + std::chrono::milliseconds(10));
  }
  ASSERT_EQ(stage_->webhooks().size(), 2u);
  EXPECT_EQ(stage_->webhooks()[0]->name(), "publish.webhooks[0] (http://127.0.0.1:" + std::to_string(kept.port()) + ")");
  EXPECT_EQ(stage_->webhooks()[0]->stats().index, 0u);
  EXPECT_EQ(stage_->config().publish.segments_min_frames, 0u);
  EXPECT_EQ(segment_events("ended"), 1);  // the open segment ended with the setting
  send_top1(&seq, "dog", 0.9, 4);
  EXPECT_EQ(segment_events("began"), 1);  // none followed now

  ASSERT_TRUE(stage_->process(started(1), out_).ok());
  ASSERT_EQ(kept.wait_for(2).size(), 2u);
  ASSERT_EQ(added.wait_for(1).size(), 1u);
  EXPECT_EQ(added.received().front().topic, "events/s1");
  // The same sender: its key's prefix, numbered on.
  const std::string key_after = kept.received().back().idempotency_key;
  EXPECT_EQ(key_after.substr(0, key_after.rfind('-')), key_before.substr(0, key_before.rfind('-')));
  EXPECT_EQ(key_after.substr(key_after.rfind('-') + 1), "1\"");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(gone.received().size(), 1u);  // removed: nothing more
  // A copy that changes what publish cannot take (rewritten by hand): said, nothing changes.
  std::ofstream(copy + ".new") << yaml("  endpoint: tcp://127.0.0.1:5999\n  webhooks: []\n");
  std::filesystem::rename(copy + ".new", copy);
  std::this_thread::sleep_until(*stage_->next_deadline() + std::chrono::milliseconds(1100));
  ASSERT_TRUE(stage_->on_deadline(out_).ok());
  EXPECT_EQ(stage_->webhooks().size(), 2u);
  Message end = testing::end_message(1, 0);
  ASSERT_TRUE(stage_->process(std::move(end), out_).ok());
  EXPECT_EQ(added.wait_for(2).size(), 2u);
  std::filesystem::remove_all(dir);
}

// A publish started (again, after a crash) with the job's copy of its config takes its outputs from
// the copy as it reads it, the reloads taken since included: the same outputs as the text it compares
// later reloads with, even when a reload rewrote the copy just as the stage was loading it.
TEST_F(PublishStageTest, APublishStartedAgainRunsWithTheOutputsOfTheLastReload) {
  testing::Receiver receiver;
  const std::filesystem::path dir = ::testing::TempDir() + ("vapipe-publish-copy-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string as_loaded = testing::live_yaml({{"s0", "ball"}, {"s1", "red"}});
  auto loaded = load_config_string(as_loaded, (dir / "job.yaml").string(), dir.string());
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  config_ = *loaded;
  const std::string copy = (dir / "config.yaml").string();
  std::ofstream(copy) << testing::live_yaml({{"s0", "ball"}, {"s1", "red"}},
                                            "publish:\n  segments_min_frames: 4\n  webhooks:\n    - {url: "
                                            "'http://127.0.0.1:" + std::to_string(receiver.port()) +
                                                "/hook', topics: [events/]}\n");
  stage_->set_config_copy(copy);
  open();
  ASSERT_EQ(stage_->webhooks().size(), 1u);
  EXPECT_EQ(stage_->config().publish.segments_min_frames, 4u);
  ASSERT_TRUE(stage_->process(testing::end_message(0, 0), out_).ok());
  EXPECT_EQ(receiver.wait_for(1).size(), 1u);
  std::filesystem::remove_all(dir);
}

// A webhook a reload removed while its receiver is down keeps trying what waited for it; when the job
// stops meanwhile, it has the job's grace like the others (half of job.drain_timeout_s), not the 10 s
// it was given at its removal, and its messages are said undelivered because a reload removed it.
TEST_F(PublishStageTest, AWebhookRemovedByAReloadThatIsStillTryingStopsWithTheJob) {
  const std::filesystem::path dir = ::testing::TempDir() + ("vapipe-publish-removed-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string down = "    - {url: 'http://127.0.0.1:" + std::to_string(testing::free_loopback_tcp_port()) +
                           "/hook', topics: [events/]}\n";
  const std::string running =
      testing::live_yaml({{"s0", "ball"}, {"s1", "red"}}, "publish:\n  webhooks:\n" + down);
  auto loaded = load_config_string(running, (dir / "job.yaml").string(), dir.string());
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  config_ = *loaded;
  config_.job.drain_timeout_s = 1;
  const std::string copy = (dir / "config.yaml").string();
  std::ofstream(copy) << running;
  stage_->set_config_copy(copy);
  open();
  ASSERT_EQ(stage_->webhooks().size(), 1u);
  ASSERT_TRUE(stage_->process(testing::end_message(0, 0), out_).ok());  // waits: its receiver is down
  std::string without = running;
  without.replace(without.find("  webhooks:\n"), std::string("  webhooks:\n").size() + down.size(), "");
  std::ofstream(copy + ".new") << without;
  std::filesystem::rename(copy + ".new", copy);
  ASSERT_TRUE(stage_->process(testing::end_message(1, 0), out_).ok());  // (a stream event looks at the copy)
  EXPECT_TRUE(stage_->webhooks().empty());
  const auto closing = std::chrono::steady_clock::now();
  ASSERT_TRUE(stage_->close(out_).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - closing, std::chrono::seconds(8));  // not PublishStage::kSinkGrace
  std::filesystem::remove_all(dir);
}

// publish.kafka changed by a reload: the running producer hands over what it has and stops, and the
// new one (the same cluster: it waits for the old one) takes the next messages, on its topics.
TEST_F(PublishStageTest, AReloadMovesAKafkaOutputToOtherTopicsWithoutLosingAMessage) {
  testing::KafkaTestCluster cluster(1);
  const std::filesystem::path dir = ::testing::TempDir() + ("vapipe-publish-kafka-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto with_prefix = [&](const std::string& prefix) {
    return testing::live_yaml({{"s0", "ball"}, {"s1", "red"}}, "publish:\n  kafka:\n    - {url: '" + cluster.url() +
                                                                    "', topics: [events/], topic_prefix: " + prefix + "}\n");
  };
  const std::string running = with_prefix("first.");
  auto loaded = load_config_string(running, (dir / "job.yaml").string(), dir.string());
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  config_ = *loaded;
  const std::string copy = (dir / "config.yaml").string();
  std::ofstream(copy) << running;
  stage_->set_config_copy(copy);
  open();
  ASSERT_EQ(stage_->kafka().size(), 1u);
  ASSERT_TRUE(stage_->process(testing::end_message(0, 0), out_).ok());
  std::ofstream(copy + ".new") << with_prefix("second.");
  std::filesystem::rename(copy + ".new", copy);
  ASSERT_TRUE(stage_->process(testing::end_message(1, 0), out_).ok());  // (a stream event looks at the copy)
  ASSERT_EQ(stage_->kafka().size(), 1u);
  EXPECT_EQ(stage_->config().publish.kafka[0].topic_prefix, "second.");
  ASSERT_TRUE(stage_->close(out_).ok());
  const auto first = cluster.read("first.events", 1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].key, "s0");
  const auto second = cluster.read("second.events", 1);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].key, "s1");
  EXPECT_EQ(nlohmann::json::parse(second[0].value)["event"], "eos");
  std::filesystem::remove_all(dir);
}

// An archive job's end: a webhook whose receiver answers 500 for a few seconds (restarting) gets its
// messages all the same (the end gives the sinks up to a minute, not half of job.drain_timeout_s: all
// were lost at 1 s here).
TEST_F(PublishStageTest, AnArchiveJobsEndWaitsForItsSinksAndSaysWhatTheyDidNotTake) {
  testing::Receiver receiver;
  const auto began = std::chrono::steady_clock::now();
  receiver.answer([began](const httplib::Request&, httplib::Response& res) {
    if (std::chrono::steady_clock::now() - began < std::chrono::milliseconds(2500)) res.status = 500;
  });
  // (a block one: a drop_oldest one's messages are lossy by its choice)
  config_.publish.webhooks = {events_webhook(receiver.port(), QueuePolicy::kBlock)};
  config_.job.mode = JobMode::kArchive;
  config_.job.drain_timeout_s = 2;
  open();
  run_a_short_job_to_its_end();
  EXPECT_EQ(receiver.received().size(), 3u);
  EXPECT_EQ(stage_->exit_code(), 0);
}

// An archive job with a results file: a message goes to its sinks once its line is in the file. A job
// restarted after a crash publishes again only what the file lacks: sent before, those reached the
// sinks twice (Redis: 4 results again, their seq going back).
TEST_F(PublishStageTest, AnArchiveJobsSinksGetAMessageOnceItsLineIsInTheResultsFile) {
  testing::Receiver receiver;
  const std::filesystem::path dir = testing::empty_temp_dir("sinks-after-file");
  config_.job.mode = JobMode::kArchive;
  config_.publish.jsonl_path = (dir / "results.jsonl").string();
  config_.publish.webhooks = {events_webhook(receiver.port(), QueuePolicy::kDropOldest)};
  open();
  ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamStart, testing::envelope(0, 0),
                                                    {"test://ball", "", 0, 0}), out_).ok());
  auto lines = [&] {
    std::ifstream in(config_.publish.jsonl_path);
    size_t n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
  };
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(lines(), 0u);  // (the file is written every 0.2 s)
  EXPECT_EQ(receiver.received().size(), 0u);
  for (int i = 0; i < 10 && lines() == 0; ++i) {  // (the sinks' delivery marks have deadlines too)
    std::this_thread::sleep_until(*stage_->next_deadline());
    ASSERT_TRUE(stage_->on_deadline(out_).ok());
  }
  EXPECT_EQ(lines(), 1u);
  EXPECT_EQ(receiver.wait_for(1).size(), 1u);
  ASSERT_TRUE(stage_->process(testing::end_message(0, 0), out_).ok());
  ASSERT_TRUE(stage_->process(testing::end_message(1, 0), out_).ok());
  ASSERT_TRUE(stage_->close(out_).ok());  // the rest, and the summary, with the file's last lines
  EXPECT_EQ(receiver.received().size(), 3u);
  EXPECT_EQ(stage_->exit_code(), 0);
}

// An archive job stopped (or crashed) before its sinks took what its results file holds: the job's
// restart from the file (`--resume`, the supervisor's after a crash) sends each sink the lines after
// its delivery mark first, with the Idempotency-Keys of their first tries; a sink new to the job gets
// what comes from then on. (Before: the file's lines counted as delivered, and were lost to the sinks.)
TEST_F(PublishStageTest, ARestartedArchiveJobsSinksGetTheLinesAfterTheirDeliveryMarksFirst) {
  testing::Receiver receiver, newcomer;
  std::atomic<bool> refuse{true};
  std::vector<std::string> refused_keys;
  std::mutex refused_mutex;
  receiver.answer([&](const httplib::Request& req, httplib::Response& res) {
    if (!refuse) return;
    std::lock_guard<std::mutex> lock(refused_mutex);
    refused_keys.push_back(req.get_header_value("Idempotency-Key"));
    res.status = 503;
  });
  const std::filesystem::path dir = testing::empty_temp_dir("sink-marks");
  config_.job.mode = JobMode::kArchive;
  config_.job.drain_timeout_s = 0.4;  // (a stop's grace: half of it)
  config_.publish.jsonl_path = (dir / "results.jsonl").string();
  config_.publish.webhooks = {events_webhook(receiver.port(), QueuePolicy::kBlock)};
  const std::string marks_path = (dir / ".results.jsonl.sinks").string();
  std::ofstream(marks_path) << "left by another job\n";  // a fresh run's marks start over
  open();
  EXPECT_FALSE(std::filesystem::exists(marks_path));
  ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamStart, testing::envelope(0, 0),
                                                    {"test://ball", "", 0, 0}), out_).ok());
  ASSERT_TRUE(stage_->process(testing::end_message(0, 0), out_).ok());
  ASSERT_TRUE(stage_->close(out_).ok());  // s1 unfinished: stopped, the two events undelivered
  EXPECT_EQ(stage_->webhooks()[0]->stats().undelivered, 2u);
  auto marks = read_sink_marks(marks_path);
  ASSERT_TRUE(marks.ok()) << marks.status().message();
  EXPECT_EQ(marks->results_file, config_.publish.jsonl_path);
  // Known by where it delivers ("webhook " and a hash of its url), not by its place in the list.
  const std::string key = stage_->webhooks()[0]->delivery_key();
  ASSERT_EQ(key.rfind("webhook ", 0), 0u) << key;
  const std::string where = key.substr(8);
  EXPECT_EQ(marks->settled, (std::map<std::string, uint64_t>{{key, 0}}));
  std::vector<std::string> first_keys;
  {
    std::lock_guard<std::mutex> lock(refused_mutex);
    ASSERT_FALSE(refused_keys.empty());
    first_keys = {refused_keys.front()};
  }
  EXPECT_EQ(first_keys[0], "\"" + marks->run_id + "-" + where + "-1\"");

  // --resume: the supervisor cuts the file after the kept lines and hands the stages its plan.
  auto plan = read_resume_plan(config_);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->kept_lines, 2u);  // the two events (the stopped run's summary is cut)
  std::filesystem::resize_file(config_.publish.jsonl_path, plan->keep_bytes);
  const std::string plan_path = (dir / "plan.json").string();
  ASSERT_TRUE(write_resume_plan(*plan, plan_path).ok());
  ::setenv(kResumePlanEnv, plan_path.c_str(), 1);
  refuse = false;
  // A webhook new to the job, first in the list: the first's backlog stays the first's.
  config_.publish.webhooks.insert(config_.publish.webhooks.begin(), events_webhook(newcomer.port(), QueuePolicy::kBlock));
  make_stage();
  open();
  ::unsetenv(kResumePlanEnv);
  const auto got = receiver.wait_for(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].idempotency_key, "\"" + marks->run_id + "-" + where + "-1\"");
  EXPECT_EQ(got[1].idempotency_key, "\"" + marks->run_id + "-" + where + "-2\"");
  EXPECT_EQ(nlohmann::json::parse(got[0].body)["payload"]["event"], "started");
  EXPECT_EQ(nlohmann::json::parse(got[1].body)["payload"]["event"], "eos");
  ASSERT_TRUE(stage_->process(testing::end_message(1, 0), out_).ok());
  ASSERT_TRUE(stage_->close(out_).ok());
  EXPECT_EQ(receiver.received().size(), 3u);  // and s1's end
  ASSERT_EQ(newcomer.received().size(), 1u);  // s1's end alone
  EXPECT_EQ(nlohmann::json::parse(newcomer.received()[0].body)["payload"]["stream_id"], "s1");
  EXPECT_EQ(stage_->exit_code(), 0);
  marks = read_sink_marks(marks_path);
  ASSERT_TRUE(marks.ok());
  const uint64_t lines = count_file_lines(config_.publish.jsonl_path).value();  // (the summary's last)
  EXPECT_EQ(marks->settled, (std::map<std::string, uint64_t>{{stage_->webhooks()[0]->delivery_key(), lines},
                                                             {stage_->webhooks()[1]->delivery_key(), lines}}));
  EXPECT_EQ(stage_->webhooks()[1]->delivery_key(), key);
}

// Two webhooks at one url (two API keys, two chats of one bot) are two receivers: marks and keys of
// their own (they shared one: the second's mark hid the first's backlog; found 2026-12-07).
TEST_F(PublishStageTest, SinksAtOneUrlHaveDeliveryMarksOfTheirOwn) {
  testing::Receiver receiver;
  const std::filesystem::path dir = testing::empty_temp_dir("sink-keys");
  config_.job.mode = JobMode::kArchive;
  config_.publish.jsonl_path = (dir / "results.jsonl").string();
  WebhookConfig a = events_webhook(receiver.port(), QueuePolicy::kBlock), b = a, same_as_a = a;
  a.headers = {{"X-Api-Key", "key-a"}};
  b.headers = {{"X-Api-Key", "key-b"}};
  same_as_a.headers = a.headers;
  config_.publish.webhooks = {a, b, same_as_a};
  open();
  const auto& hooks = stage_->webhooks();
  EXPECT_NE(hooks[0]->delivery_key(), hooks[1]->delivery_key());
  EXPECT_EQ(hooks[2]->delivery_key(), hooks[0]->delivery_key() + ".2");
  ASSERT_TRUE(stage_->close(out_).ok());
}

// Never taken: said, and the exit status says so (within half of job.stage_timeout_s, the watchdog's).
TEST_F(PublishStageTest, AnArchiveJobsMessagesItsSinksDidNotTakeFailItsExitStatus) {
  testing::Receiver refusing;
  open_an_archive_job_with_a_block_webhook_refused_by(refusing);
  run_a_short_job_to_its_end();
  EXPECT_EQ(stage_->webhooks()[0]->stats().undelivered, 3u);
  EXPECT_EQ(stage_->exit_code(), kExitMessagesUndelivered);
}

// A failed stream is what a job's exit says first (3): scripts look for it; the sinks' loss is in the log.
TEST_F(PublishStageTest, AFailedStreamOutranksASinksLossInTheExitStatus) {
  testing::Receiver refusing;
  open_an_archive_job_with_a_block_webhook_refused_by(refusing);
  ASSERT_TRUE(stage_->process(testing::end_message(0, 0), out_).ok());
  ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamError, testing::envelope(1, 0),
                                                    {"file:///bad.mp4", "file /bad.mp4 does not exist", 0, 0}), out_).ok());
  ASSERT_TRUE(stage_->close(out_).ok());
  EXPECT_GT(stage_->webhooks()[0]->stats().undelivered, 0u);
  EXPECT_EQ(stage_->exit_code(), kExitSomeStreamsFailed);
}

TEST_F(PublishStageTest, ARotatedWebhookTokenTakesEffectWithoutARestart) {
  testing::Receiver receiver;
  const auto path = std::filesystem::temp_directory_path() / ("vapipe-hook-token-" + std::to_string(getpid()));
  std::ofstream(path) << "first-token\n";
  WebhookConfig hook;
  hook.url = "http://127.0.0.1:" + std::to_string(receiver.port()) + "/hook";
  hook.topics = {"events/"};
  hook.token_file = path.string();
  hook.token = "first-token";  // as the config loader read it
  config_.publish.webhooks = {hook};
  open();
  // An event published (on events/), and the Authorization its request carried.
  auto sent_with = [&](Message event) {
    const size_t before = receiver.received().size();
    EXPECT_TRUE(stage_->process(std::move(event), out_).ok());
    const auto got = receiver.wait_for(before + 1);
    return got.size() > before ? got.back().authorization : std::string("(none)");
  };
  auto started = [](uint32_t stream) {
    return Message::stream_event(MessageKind::kStreamStart, testing::envelope(stream, 0), {"test://ball", "", 0, 0});
  };
  auto after_check = [&] {
    std::this_thread::sleep_until(*stage_->next_deadline());
    ASSERT_TRUE(stage_->on_deadline(out_).ok());
  };
  EXPECT_EQ(sent_with(started(0)), "Bearer first-token");
  std::ofstream(path) << "second-token\n";
  after_check();  // the file is looked at every 2 s
  EXPECT_EQ(sent_with(started(1)), "Bearer second-token");
  std::ofstream(path) << "\n";  // no token: the one in force stays
  after_check();
  EXPECT_EQ(sent_with(testing::end_message(0, 0)), "Bearer second-token");
  EXPECT_EQ(stage_->webhooks()[0]->stats().delivered, 3u);
  std::filesystem::remove(path);
}

// An MQTT password_file rewritten while the job runs (a rotated secret): the next connection uses the
// new password, so a broker that refused the old one takes the new one without a restart.
TEST_F(PublishStageTest, ARotatedMqttPasswordTakesEffectWithoutARestart) {
  testing::MqttBroker broker({"vapipe", "new secret"});
  const auto path = std::filesystem::temp_directory_path() / ("vapipe-mqtt-password-" + std::to_string(getpid()));
  std::ofstream(path) << "old secret\n";
  MqttConfig c;
  c.url = broker.url();
  c.topics = {"events/"};
  c.username = "vapipe";
  c.password_file = path.string();
  c.password = "old secret";  // as the config loader read it
  config_.publish.mqtt = {c};
  open();
  stage_->mqtt()[0]->set_retry_delays(std::chrono::milliseconds(200), std::chrono::milliseconds(200));
  auto refused = [&] { return stage_->mqtt()[0]->stats().last_error.find("not authorised") != std::string::npos; };
  for (int i = 0; i < 300 && !refused(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(refused()) << stage_->mqtt()[0]->stats().last_error;
  std::ofstream(path) << "new secret\n";
  std::this_thread::sleep_until(*stage_->next_deadline());  // the file is looked at every 2 s
  ASSERT_TRUE(stage_->on_deadline(out_).ok());
  for (int i = 0; i < 500 && !stage_->mqtt()[0]->stats().connected; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(stage_->mqtt()[0]->stats().connected) << stage_->mqtt()[0]->stats().last_error;
  std::filesystem::remove(path);
}

// publish.redis[0] is `c`, whose secret (the file at `path`, read as `old_secret`) the server refuses
// (WRONGPASS); the file is rewritten with `new_secret`, and the next connection uses it: events/s0,
// which waited meanwhile, and events/s1 are delivered. The stage's routing of a bus message to
// publish.redis, end to end.
void PublishStageTest::check_a_rotated_redis_secret_takes_effect(RedisConfig c, const std::filesystem::path& path,
                                                                 const std::string& old_secret,
                                                                 const std::string& new_secret) {
  std::ofstream(path) << old_secret << "\n";
  c.topics = {"events/"};
  c.key_prefix = "vapipe:test:";
  config_.publish.redis = {c};
  open();
  RedisStreamsPublisher& sink = *stage_->redis()[0];
  sink.set_retry_delays(std::chrono::milliseconds(200), std::chrono::milliseconds(200));
  auto refused = [&] { return sink.stats().last_error.find("WRONGPASS") != std::string::npos; };
  for (int i = 0; i < 300 && !refused(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(refused()) << sink.stats().last_error;
  EXPECT_EQ(sink.stats().last_error.find(old_secret), std::string::npos);
  ASSERT_TRUE(stage_->process(testing::end_message(0, 0), out_).ok());  // events/s0 waits meanwhile
  std::ofstream(path) << new_secret << "\n";
  std::this_thread::sleep_until(*stage_->next_deadline());  // the file is looked at every 2 s
  ASSERT_TRUE(stage_->on_deadline(out_).ok());
  for (int i = 0; i < 500 && sink.stats().delivered == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(sink.stats().connected) << sink.stats().last_error;
  ASSERT_TRUE(stage_->process(testing::end_message(1, 0), out_).ok());
  ASSERT_TRUE(stage_->close(out_).ok());
  std::filesystem::remove(path);
}

// A Redis password_file likewise.
TEST_F(PublishStageTest, ARotatedRedisPasswordTakesEffectWithoutARestart) {
  testing::RedisServer server(testing::RedisOptions{"new secret"});
  ASSERT_TRUE(server.started());
  RedisConfig c;
  c.url = server.url();
  const auto path = std::filesystem::temp_directory_path() / ("vapipe-redis-password-" + std::to_string(getpid()));
  c.password_file = path.string();
  c.password = "old secret";  // as the config loader read it
  check_a_rotated_redis_secret_takes_effect(c, path, "old secret", "new secret");
  if (HasFatalFailure()) return;
  const std::string entries = server.cli({"XRANGE", "vapipe:test:events/s0", "-", "+"});
  EXPECT_NE(entries.find("\"event\":\"eos\""), std::string::npos) << entries;
  EXPECT_NE(server.cli({"XRANGE", "vapipe:test:events/s1", "-", "+"}).find("\"event\":\"eos\""), std::string::npos);
}

// The sentinels' password likewise (sentinel_password_file): the next question to a sentinel uses it.
TEST_F(PublishStageTest, ARotatedSentinelPasswordTakesEffectWithoutARestart) {
  testing::RedisServer server;
  ASSERT_TRUE(server.started());
  testing::RedisSentinel sentinel(server.port(), "new-watch");
  ASSERT_TRUE(sentinel.started());
  RedisConfig c;
  c.url = "redis+sentinel://127.0.0.1:" + std::to_string(sentinel.port()) + "/mymaster";
  const auto path = std::filesystem::temp_directory_path() / ("vapipe-sentinel-password-" + std::to_string(getpid()));
  c.sentinel_password_file = path.string();
  c.sentinel_password = "old-watch";  // as the config loader read it
  check_a_rotated_redis_secret_takes_effect(c, path, "old-watch", "new-watch");
  if (HasFatalFailure()) return;
  EXPECT_NE(server.cli({"XRANGE", "vapipe:test:events/s0", "-", "+"}).find("\"event\":\"eos\""), std::string::npos);
}

// The summary says what each stream was mostly about: its commonest top-1 labels, most first (ties in
// label order), with their share of the classified frames; error results are not counted.
TEST_F(PublishStageTest, TheSummaryRanksEachStreamsTopLabels) {
  open();
  uint64_t seq = 0;
  for (const char* label : {"truck", "car", "car", "person", "car", "truck", "bus", "bike", "dog"}) {
    ASSERT_TRUE(stage_->process(result(0, seq++, label), out_).ok());
  }
  Message failed = result(0, seq++, "car");
  failed.prediction.error = "inference failed: out of memory";
  failed.error = failed.prediction.error;
  ASSERT_TRUE(stage_->process(std::move(failed), out_).ok());
  ASSERT_TRUE(stage_->process(testing::end_message(0, seq), out_).ok());
  ASSERT_TRUE(stage_->process(testing::end_message(1, 0), out_).ok());
  ASSERT_TRUE(stage_->close(out_).ok());
  const nlohmann::json& top = stage_->summary()["streams"][0]["top_labels"];
  ASSERT_EQ(top.size(), 5u);  // of 6 labels
  EXPECT_EQ(top[0]["label"], "car");
  EXPECT_EQ(top[0]["frames"], 3);  // the error result's "car" does not count
  EXPECT_NEAR(top[0]["share"].get<double>(), 3.0 / 9.0, 1e-9);
  EXPECT_EQ(top[1]["label"], "truck");
  EXPECT_EQ(top[1]["frames"], 2);
  EXPECT_EQ(top[2]["label"], "bike");  // the ones: in label order
  EXPECT_EQ(top[3]["label"], "bus");
  EXPECT_EQ(top[4]["label"], "dog");
  EXPECT_TRUE(stage_->summary()["streams"][1]["top_labels"].empty());  // no result
}

// publish.segments_min_frames: segments/<id> says when a label began (min_frames frames in a row)
// and when it ended (another label began, or the stream ended); flickers and errors do neither.
TEST_F(PublishStageTest, LabelSegmentsBeginAfterMinFramesInARowAndEndWhenAnotherBegins) {
  config_.publish.segments_min_frames = 3;
  open();
  uint64_t seq = 0;
  auto send = [&](const std::string& label, int n) {
    for (int i = 0; i < n; ++i, ++seq) {
      Message m = result(0, seq, label);
      m.env.capture_ns = 1'800'000'000'000'000'000 + static_cast<int64_t>(seq) * 33'000'000;
      // The camera's clock from frame 4 on (its first RTCP sender report), 250 ms behind.
      if (seq >= 4) m.env.camera_ns = m.env.capture_ns - 250'000'000;
      if (label.empty()) {
        m.prediction.error = "inference failed: out of memory";
        m.error = m.prediction.error;
      }
      ASSERT_TRUE(stage_->process(std::move(m), out_).ok());
    }
  };
  send("car", 2);
  send("truck", 1);  // no segment yet: car had 2 in a row
  send("car", 3);    // car began at seq 3
  send("truck", 2);  // a flicker: car goes on
  send("car", 1);
  send("", 1);       // an error: car goes on
  send("bus", 3);    // bus began (seq 10): car ended at seq 8
  ASSERT_TRUE(stage_->process(testing::end_message(0, seq), out_).ok());  // bus ends with the stream
  ASSERT_TRUE(stage_->process(testing::end_message(1, 0), out_).ok());
  std::vector<nlohmann::json> segments;
  std::vector<std::string> order;  // segment and event messages of s0, in publishing order
  for (const auto& [topic, j] : bus_->sent) {
    if (topic == "segments/s0") {
      segments.push_back(j);
      order.push_back(j["event"].get<std::string>() + " " + j["label"].get<std::string>());
    } else if (topic == "events/s0") {
      order.push_back(j["event"].get<std::string>());
    }
  }
  EXPECT_EQ(order, (std::vector<std::string>{"began car", "ended car", "began bus", "ended bus", "eos"}));
  ASSERT_EQ(segments.size(), 4u);
  EXPECT_EQ(segments[0]["schema"], "vapipe.segment");
  EXPECT_EQ(segments[0]["start_seq"], 3);
  EXPECT_EQ(segments[0]["end_seq"], 5);  // when it began
  EXPECT_EQ(segments[1]["start_seq"], 3);
  EXPECT_EQ(segments[1]["end_seq"], 8);
  EXPECT_EQ(segments[1]["frames"], 4);  // car's own frames: 3 + 1
  EXPECT_NEAR(segments[1]["start_ms"].get<double>(), 3 * 33.0, 1e-6);
  // When, by this machine's clock and by the camera's: its first and last frame's.
  EXPECT_NEAR(segments[1]["start_capture_unix_ms"].get<double>(), 1.8e12 + 3 * 33.0, 1e-3);
  EXPECT_NEAR(segments[1]["end_capture_unix_ms"].get<double>(), 1.8e12 + 8 * 33.0, 1e-3);
  EXPECT_TRUE(segments[1]["start_camera_unix_ms"].is_null());  // frame 3: before the camera's clock was known
  EXPECT_NEAR(segments[1]["end_camera_unix_ms"].get<double>(), 1.8e12 + 8 * 33.0 - 250, 1e-3);
  EXPECT_NEAR(segments[3]["start_camera_unix_ms"].get<double>(), 1.8e12 + 10 * 33.0 - 250, 1e-3);
  EXPECT_EQ(segments[2]["start_seq"], 10);
  EXPECT_EQ(segments[3]["end_seq"], 12);
  EXPECT_EQ(segments[3]["frames"], 3);
}

// publish.webhooks: the messages on its topics reach a real HTTP receiver as the bus has them, in order;
// results (another topic) do not; what became of them is on /metrics and /healthz.
TEST_F(PublishStageTest, AWebhookReceivesTheSegmentMessagesAsTheBusHasThem) {
  testing::Receiver receiver;
  config_.publish.segments_min_frames = 2;
  WebhookConfig hook;
  hook.url = "http://127.0.0.1:" + std::to_string(receiver.port()) + "/hook";  // topics: segments/
  config_.publish.webhooks = {hook};
  open();
  uint64_t seq = 0;
  send_top1(&seq, "car", 0.9, 3);
  send_top1(&seq, "bus", 0.9, 3);
  ASSERT_TRUE(stage_->process(testing::end_message(0, seq), out_).ok());
  ASSERT_TRUE(stage_->process(testing::end_message(1, 0), out_).ok());
  ASSERT_TRUE(stage_->close(out_).ok());  // gives the webhook its grace to deliver what waits
  std::vector<nlohmann::json> on_bus;
  for (const auto& [topic, j] : bus_->sent) {
    if (topic.rfind("segments/", 0) == 0) on_bus.push_back({{"topic", topic}, {"payload", j}});
  }
  ASSERT_EQ(on_bus.size(), 4u);  // began car, ended car, began bus, ended bus
  const auto got = receiver.received();
  ASSERT_EQ(got.size(), on_bus.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(nlohmann::json::parse(got[i].body), on_bus[i]) << i;
    EXPECT_EQ(got[i].topic, "segments/s0");
  }
  const JobMetrics m = stage_->metrics();
  ASSERT_EQ(m.webhooks.size(), 1u);
  EXPECT_EQ(m.webhooks[0].delivered, 4u);
  const std::string origin = "http://127.0.0.1:" + std::to_string(receiver.port());
  EXPECT_NE(prometheus_text(m).find("vapipe_webhook_messages_total{webhook=\"0\",origin=\"" + origin +
                                    "\",outcome=\"delivered\"} 4\n"),
            std::string::npos)
      << prometheus_text(m);
  const nlohmann::json health = health_json(m);
  EXPECT_EQ(health["webhooks"][0]["origin"], origin);
  EXPECT_EQ(health["webhooks"][0]["delivered"], 4);
  EXPECT_TRUE(health["webhooks"][0]["failing_for_s"].is_null());
}

// publish.mqtt: the messages on its topics reach a real broker's subscriber as the bus has them, in order,
// on topic_prefix + their topic; a text broker gets the line a person reads; what became of them is on
// /metrics and /healthz.
// publish.kafka: the segment messages produced as the bus has them (json), keyed by stream; a second
// output of the same cluster takes one label's, as lines of text, on topics of its own.
TEST_F(PublishStageTest, AKafkaClusterReceivesTheSegmentMessagesAsTheBusHasThem) {
  testing::KafkaTestCluster cluster(1);
  config_.job.name = "gate-job";
  config_.publish.segments_min_frames = 2;
  KafkaConfig json;  // topics: segments/
  json.url = cluster.url();
  json.topic_prefix = "vapipe.gate-job.";
  json.client_id = "vapipe-gate-job";
  KafkaConfig text = json;
  text.topic_prefix = "alerts.";
  text.format = "text";
  text.labels = {"bus"};
  config_.publish.kafka = {json, text};
  open();
  uint64_t seq = 0;
  send_top1(&seq, "car", 0.9, 3);
  send_top1(&seq, "bus", 0.9, 3);
  ASSERT_TRUE(stage_->process(testing::end_message(0, seq), out_).ok());
  ASSERT_TRUE(stage_->close(out_).ok());  // gives the clusters their grace
  const JobMetrics m = stage_->metrics();
  ASSERT_EQ(m.kafka.size(), 2u);
  EXPECT_EQ(m.kafka[0].delivered, 4u);
  EXPECT_EQ(m.kafka[1].delivered, 2u);
  EXPECT_EQ(m.kafka[1].name, "publish.kafka[1] (" + cluster.url() + ")");
  std::vector<nlohmann::json> on_bus;
  for (const auto& [topic, j] : bus_->sent) {
    if (topic.rfind("segments/", 0) == 0) on_bus.push_back(j);
  }
  ASSERT_EQ(on_bus.size(), 4u);  // began car, ended car, began bus, ended bus
  const auto got = cluster.read("vapipe.gate-job.segments", 4);
  ASSERT_EQ(got.size(), on_bus.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(nlohmann::json::parse(got[i].value), on_bus[i]) << i;
    EXPECT_EQ(got[i].key, "s0");
    EXPECT_EQ(got[i].headers.at("vapipe-topic"), "segments/s0");
  }
  const auto lines = cluster.read("alerts.segments", 2);  // only bus's: labels
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].value.rfind("s0: bus began", 0), 0u) << lines[0].value;
  EXPECT_EQ(lines[1].value.rfind("s0: bus ended", 0), 0u) << lines[1].value;
  EXPECT_NE(prometheus_text(m).find("vapipe_kafka_messages_total{kafka=\"1\",cluster=\"" + cluster.url() +
                                    "\",outcome=\"delivered\"} 2\n"),
            std::string::npos);
}

TEST_F(PublishStageTest, AnMqttBrokerReceivesTheSegmentMessagesAsTheBusHasThem) {
  testing::MqttBroker broker;
  testing::MqttSubscriber subscriber(broker);
  ASSERT_TRUE(subscriber.subscribed());
  config_.job.name = "gate-job";
  config_.publish.segments_min_frames = 2;
  MqttConfig json;  // topics: segments/
  json.url = broker.url();
  json.topic_prefix = "vapipe/gate-job/";
  json.status_topic = "vapipe/gate-job/status";
  MqttConfig text = json;
  text.topic_prefix = "alerts/";
  text.status_topic.clear();
  text.format = "text";
  text.labels = {"bus"};
  text.home_assistant = true;  // bus: a binary sensor of each stream
  config_.publish.mqtt = {json, text};
  open();
  // Connected before the first result, as a job's brokers are while its model loads: a sensor's
  // changes then go out one by one (before a connection, only the state in force does).
  for (int i = 0; i < 500 && !(stage_->metrics().mqtt[0].connected && stage_->metrics().mqtt[1].connected); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  uint64_t seq = 0;
  send_top1(&seq, "car", 0.9, 3);
  send_top1(&seq, "bus", 0.9, 3);
  ASSERT_TRUE(stage_->process(testing::end_message(0, seq), out_).ok());
  ASSERT_TRUE(stage_->process(testing::end_message(1, 0), out_).ok());
  ASSERT_TRUE(subscriber.wait_for(4, "vapipe/gate-job/segments/s0"));
  ASSERT_TRUE(subscriber.wait_for(2, "alerts/segments/s0"));
  const JobMetrics running = stage_->metrics();
  ASSERT_EQ(running.mqtt.size(), 2u);
  EXPECT_TRUE(running.mqtt[0].connected);
  ASSERT_TRUE(stage_->close(out_).ok());  // gives the brokers their grace, then says offline
  std::vector<nlohmann::json> on_bus;
  for (const auto& [topic, j] : bus_->sent) {
    if (topic.rfind("segments/", 0) == 0) on_bus.push_back(j);
  }
  ASSERT_EQ(on_bus.size(), 4u);  // began car, ended car, began bus, ended bus
  const auto got = subscriber.on("vapipe/gate-job/segments/s0");
  ASSERT_EQ(got.size(), on_bus.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(nlohmann::json::parse(got[i].payload), on_bus[i]) << i;
  const auto lines = subscriber.on("alerts/segments/s0");  // only bus's: labels
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].payload.rfind("s0: bus began", 0), 0u) << lines[0].payload;
  EXPECT_EQ(lines[1].payload.rfind("s0: bus ended", 0), 0u) << lines[1].payload;
  ASSERT_TRUE(subscriber.wait_for(2, "vapipe/gate-job/status"));
  EXPECT_EQ(subscriber.on("vapipe/gate-job/status").back().payload, "offline");
  EXPECT_TRUE(subscriber.on("alerts/status").empty());
  // home_assistant: s0 announced at its first message, its bus sensor OFF, ON while bus's segment was open.
  ASSERT_TRUE(subscriber.wait_for(
      1, "homeassistant/binary_sensor/" + home_assistant_device_id("gate-job", "s0") + "/bus/config"));
  std::vector<std::string> states;
  for (const auto& m : subscriber.on("alerts/state/s0/bus")) states.push_back(m.payload);
  EXPECT_EQ(states, (std::vector<std::string>{"OFF", "ON", "OFF"}));
  const JobMetrics m = stage_->metrics();
  EXPECT_EQ(m.mqtt[0].delivered, 4u);  // the status messages are not counted
  EXPECT_EQ(m.mqtt[1].delivered, 2u);
  // Two brokers' clients of one job have ids of their own: neither pushed the other off.
  EXPECT_EQ(m.mqtt[0].connections, 1u);
  EXPECT_EQ(m.mqtt[1].connections, 1u);
  EXPECT_NE(prometheus_text(m).find("vapipe_mqtt_messages_total{mqtt=\"0\",broker=\"" + broker.url() +
                                    "\",outcome=\"delivered\"} 4\n"),
            std::string::npos)
      << prometheus_text(m);
  const nlohmann::json health = health_json(m);
  EXPECT_EQ(health["mqtt"][0]["broker"], broker.url());
  EXPECT_EQ(health["mqtt"][1]["delivered"], 2);
}

// publish.segments_min_score: a frame whose top-1 score is below it is unsure; min_frames unsure frames in
// a row end the segment (the truck left and the classifier names the street behind it only weakly) and
// begin none; fewer are a flicker.
TEST_F(PublishStageTest, UnsureFramesInARowEndASegmentAndBeginNone) {
  config_.publish.segments_min_frames = 3;
  config_.publish.segments_min_score = 0.5;
  open();
  uint64_t seq = 0;
  auto send = [&](const std::string& label, double score, int n) { send_top1(&seq, label, score, n); };
  send("truck", 0.9, 4);   // truck began at seq 0
  send("truck", 0.3, 2);   // unsure for two frames: a flicker
  send("truck", 0.8, 1);
  send("street", 0.2, 3);  // unsure for three: truck ended at seq 6
  send("street", 0.3, 4);  // still unsure: nothing more
  send("car", 0.45, 3);    // a car, but not sure enough: nothing
  send("car", 0.6, 3);     // car began at seq 17
  ASSERT_TRUE(stage_->process(testing::end_message(0, seq), out_).ok());
  std::vector<nlohmann::json> segments;
  for (const auto& [topic, j] : bus_->sent) {
    if (topic == "segments/s0") segments.push_back(j);
  }
  ASSERT_EQ(segments.size(), 4u);
  EXPECT_EQ(segments[0]["event"], "began");
  EXPECT_EQ(segments[1]["event"], "ended");
  EXPECT_EQ(segments[1]["label"], "truck");
  EXPECT_EQ(segments[1]["end_seq"], 6);
  EXPECT_EQ(segments[1]["frames"], 5);  // its sure frames
  EXPECT_NEAR(segments[1]["score_mean"].get<double>(), (4 * 0.9 + 0.8) / 5, 1e-6);
  EXPECT_EQ(segments[2]["event"], "began");
  EXPECT_EQ(segments[2]["label"], "car");
  EXPECT_EQ(segments[2]["start_seq"], 17);
  EXPECT_EQ(segments[3]["event"], "ended");  // with the stream
}

// segments_min_score_by_label: a label's own minimum, over segments_min_score (0.5 here): a car at 0.45
// is unsure, a rare bicycle at 0.45 is sure (its own 0.4), a truck at 0.6 unsure (its own 0.7).
TEST_F(PublishStageTest, ALabelsOwnMinimumScoreDecidesWhetherItsFramesAreSure) {
  config_.publish.segments_min_frames = 3;
  config_.publish.segments_min_score = 0.5;
  config_.publish.segments_min_score_by_label["bicycle"] = {0.4, 1};
  config_.publish.segments_min_score_by_label["truck"] = {0.7, 2};
  open();
  uint64_t seq = 0;
  auto send = [&](const std::string& label, double score, int n) { send_top1(&seq, label, score, n); };
  send("car", 0.45, 3);      // unsure: nothing
  send("bicycle", 0.45, 3);  // sure for a bicycle: began at seq 3
  send("truck", 0.6, 3);     // unsure for a truck: bicycle ended at seq 5, nothing began
  const double before_s = static_cast<double>(wall_clock_ns()) / 1e9;
  send("truck", 0.75, 3);    // truck began at seq 9
  // Open: a metric of when it began (its first frame's capture time, stamped as it was made), until it ends.
  const std::vector<StreamMetrics::OpenSegment> open = stage_->metrics().streams[0].open_segments;
  ASSERT_EQ(open.size(), 1u);
  EXPECT_EQ(open[0].label, "truck");
  EXPECT_GE(open[0].since_unix_s, before_s - 0.01);
  EXPECT_LE(open[0].since_unix_s, static_cast<double>(wall_clock_ns()) / 1e9 + 0.01);
  ASSERT_TRUE(stage_->process(testing::end_message(0, seq), out_).ok());
  EXPECT_TRUE(stage_->metrics().streams[0].open_segments.empty());
  std::vector<std::string> order;
  for (const auto& [topic, j] : bus_->sent) {
    if (topic != "segments/s0") continue;
    order.push_back(j["event"].get<std::string>() + " " + j["label"].get<std::string>() + " " +
                    std::to_string(j["start_seq"].get<int>()) + ".." + std::to_string(j["end_seq"].get<int>()));
  }
  EXPECT_EQ(order, (std::vector<std::string>{"began bicycle 3..5", "ended bicycle 3..5", "began truck 9..11",
                                             "ended truck 9..11"}));
}

// A segment's best frame (the highest top-1 score of its label, the first of equals; a flicker's frames
// not counted), in its began (the best of its first frames) and its ended (the best of all).
TEST_F(PublishStageTest, ASegmentSaysItsBestFrame) {
  config_.publish.segments_min_frames = 3;
  open();
  uint64_t seq = 0;
  auto send = [&](const std::string& label, std::vector<double> scores) {
    for (const double score : scores) {
      Message m = result(0, seq, label);
      m.prediction.top_k.front().score = static_cast<float>(score);
      m.env.capture_ns = 1'800'000'000'000'000'000 + static_cast<int64_t>(seq) * 33'000'000;
      ASSERT_TRUE(stage_->process(std::move(m), out_).ok());
      ++seq;
    }
  };
  send("truck", {0.5, 0.7, 0.6});       // began: best seq 1
  send("car", {0.99});                  // a flicker: not the truck's
  send("truck", {0.8, 0.95, 0.9, 0.95});  // best seq 5 (the first 0.95)
  send("bus", {0.6, 0.6, 0.6});         // truck ended
  std::vector<nlohmann::json> segments;
  for (const auto& [topic, j] : bus_->sent) {
    if (topic == "segments/s0") segments.push_back(j);
  }
  ASSERT_EQ(segments.size(), 3u);
  EXPECT_EQ(segments[0]["event"], "began");
  EXPECT_EQ(segments[0]["best_seq"], 1);
  EXPECT_NEAR(segments[0]["best_score"].get<double>(), 0.7, 1e-6);
  EXPECT_EQ(segments[1]["event"], "ended");
  EXPECT_EQ(segments[1]["label"], "truck");
  EXPECT_EQ(segments[1]["best_seq"], 5);
  EXPECT_NEAR(segments[1]["best_score"].get<double>(), 0.95, 1e-6);
  EXPECT_NEAR(segments[1]["best_ms"].get<double>(), 5 * 33.0, 1e-6);
  EXPECT_NEAR(segments[1]["best_capture_unix_ms"].get<double>(), 1.8e12 + 5 * 33.0, 1e-3);
  EXPECT_EQ(segments[2]["label"], "bus");
  EXPECT_EQ(segments[2]["best_seq"], 8);  // all equal: the first
}

// A frame decoded after a packet lost on the camera's network (its result "damaged") may be a smear:
// a segment's best frame, and so its picture, is a whole one where it has any, whatever the damaged
// ones scored; a segment of damaged frames alone still has a best one. Each says how many of its frames
// were damaged. Before 2026-12-06 the highest score won, smeared or not.
TEST_F(PublishStageTest, ASegmentsBestFrameIsAWholePictureWhereItHasOne) {
  config_.publish.segments_min_frames = 3;
  open();
  uint64_t seq = 0;
  auto send = [&](const std::string& label, std::vector<std::pair<double, bool>> frames) {
    for (const auto& [score, damaged] : frames) {
      Message m = result(0, seq++, label);
      m.prediction.top_k.front().score = static_cast<float>(score);
      m.env.damaged = damaged;
      ASSERT_TRUE(stage_->process(std::move(m), out_).ok());
    }
  };
  send("truck", {{0.9, true}, {0.6, false}, {0.95, true}});  // began: best seq 1, the whole one
  send("truck", {{0.7, false}, {0.99, true}});               // ended: best seq 3 (0.7 > 0.6, whole)
  send("bus", {{0.8, true}, {0.9, true}, {0.85, true}});     // all damaged: the best of them, seq 6
  send("car", {{0.5, false}, {0.5, false}, {0.5, false}});
  std::vector<nlohmann::json> segments;
  for (const auto& [topic, j] : bus_->sent) {
    if (topic == "segments/s0") segments.push_back(j);
  }
  ASSERT_EQ(segments.size(), 5u);
  EXPECT_EQ(segments[0]["event"], "began");
  EXPECT_EQ(segments[0]["best_seq"], 1);
  EXPECT_EQ(segments[0]["damaged_frames"], 2);
  EXPECT_EQ(segments[1]["event"], "ended");
  EXPECT_EQ(segments[1]["best_seq"], 3);
  EXPECT_NEAR(segments[1]["best_score"].get<double>(), 0.7, 1e-6);
  EXPECT_EQ(segments[1]["damaged_frames"], 3);
  EXPECT_EQ(segments[2]["label"], "bus");
  EXPECT_EQ(segments[2]["best_seq"], 6);
  EXPECT_EQ(segments[2]["damaged_frames"], 3);
  EXPECT_EQ(segments[4]["label"], "car");
  EXPECT_EQ(segments[4]["damaged_frames"], 0);
}

// publish.segments_skip_damaged: a damaged picture's result counts as an error result: it neither
// begins a segment (a run of smears raises no alert) nor ends one (a segment goes on through them), and
// it breaks a run that was beginning; with segments_labels: each too. Off, the same frames begin one.
TEST_F(PublishStageTest, SkippingDamagedFramesTheyNeitherBeginNorEndASegment) {
  for (const std::string labels : {"top1", "each"}) {
    for (const bool skip : {true, false}) {
      make_stage();
      config_.publish.segments_min_frames = 3;
      config_.publish.segments_labels = labels;
      config_.publish.segments_min_score = labels == "each" ? 0.5 : 0.0;
      config_.publish.segments_skip_damaged = skip;
      open();
      uint64_t seq = 0;
      auto send = [&](const std::string& label, std::vector<bool> damaged) {
        for (const bool d : damaged) {
          Message m = result(0, seq++, label);
          m.env.damaged = d;
          ASSERT_TRUE(stage_->process(std::move(m), out_).ok());
        }
      };
      send("fire", {true, true, true, true});                   // smears: no alert when skipped
      send("truck", {false, false, true, false, false, false});  // a smear breaks its beginning run: from seq 7
      send("bus", {true, true, true});                          // smeared buses end nothing when skipped
      send("truck", {false});
      std::vector<std::string> order;
      for (const auto& [topic, j] : bus_->sent) {
        if (topic == "segments/s0") order.push_back(j["event"].get<std::string>() + " " + j["label"].get<std::string>() +
                                                    " " + std::to_string(j["start_seq"].get<int>()));
      }
      const std::string what = labels + (skip ? ", skipped" : ", counted");
      if (skip) {
        EXPECT_EQ(order, (std::vector<std::string>{"began truck 7"})) << what;
      } else {
        EXPECT_EQ(order, (std::vector<std::string>{"began fire 0", "ended fire 0", "began truck 4", "ended truck 4",
                                                   "began bus 10"}))
            << what;
      }
    }
  }
}

// publish.segments_labels: each (a multi-label model's): every label of a frame's top_k whose score
// reaches segments_min_score has segments of its own, overlapping; a label's ends after min_frames
// results in a row without it (fewer: a flicker; error results count neither way).
TEST_F(PublishStageTest, EachLabelHasSegmentsOfItsOwn) {
  config_.publish.segments_min_frames = 3;
  config_.publish.segments_min_score = 0.5;
  config_.publish.segments_labels = "each";
  open();
  uint64_t seq = 0;
  // Each frame's top_k: person and smoke with their scores (below 0.5: not on the frame), and a weak third.
  auto send = [&](double person, double smoke, int n) {
    for (int i = 0; i < n; ++i, ++seq) {
      Message m = result(0, seq, "person");
      m.prediction.top_k = {{0, static_cast<float>(person), "person"}, {1, static_cast<float>(smoke), "smoke"},
                            {2, 0.1f, "car"}};
      std::sort(m.prediction.top_k.begin(), m.prediction.top_k.end(),
                [](const ClassScore& a, const ClassScore& b) { return a.score > b.score; });
      ASSERT_TRUE(stage_->process(std::move(m), out_).ok());
    }
  };
  send(0.9, 0.2, 3);  // person began at seq 0 (announced at seq 2)
  send(0.9, 0.7, 2);  // smoke on twice: not yet
  send(0.3, 0.2, 1);  // neither: person's flicker, smoke's run broken
  send(0.9, 0.8, 3);  // smoke began at seq 6 (announced at seq 8)
  EXPECT_EQ(stage_->metrics().streams[0].open_segments.size(), 2u);  // person and smoke, at once
  Message failed = result(0, seq++, "person");
  failed.prediction.error = "inference failed";
  failed.error = failed.prediction.error;
  ASSERT_TRUE(stage_->process(std::move(failed), out_).ok());  // an error result: neither
  send(0.2, 0.95, 3);  // person gone three results: ended at seq 8
  send(0.2, 0.9, 2);
  ASSERT_TRUE(stage_->process(testing::end_message(0, seq), out_).ok());  // smoke ends with the stream
  std::vector<std::string> order;
  std::vector<nlohmann::json> segments;
  for (const auto& [topic, j] : bus_->sent) {
    if (topic != "segments/s0") continue;
    segments.push_back(j);
    order.push_back(j["event"].get<std::string>() + " " + j["label"].get<std::string>() + " " +
                    std::to_string(j["start_seq"].get<int>()) + ".." + std::to_string(j["end_seq"].get<int>()));
  }
  EXPECT_EQ(order, (std::vector<std::string>{"began person 0..2", "began smoke 6..8", "ended person 0..8",
                                             "ended smoke 6..14"}));
  ASSERT_EQ(segments.size(), 4u);
  EXPECT_EQ(segments[2]["frames"], 8);  // person's own frames: 5 + 3
  EXPECT_EQ(segments[3]["frames"], 8);  // smoke's: 3 + 5
  EXPECT_EQ(segments[3]["best_seq"], 10);
  EXPECT_NEAR(segments[3]["best_score"].get<double>(), 0.95, 1e-6);
}

// segments_labels: each with a label's own minimum: smoke at 0.3 is on (its own 0.25), person at 0.3 is not.
TEST_F(PublishStageTest, EachLabelIsOnAFrameFromItsOwnMinimumScore) {
  config_.publish.segments_min_frames = 2;
  config_.publish.segments_min_score = 0.5;
  config_.publish.segments_labels = "each";
  config_.publish.segments_min_score_by_label["smoke"] = {0.25, 1};
  open();
  for (uint64_t seq = 0; seq < 4; ++seq) {
    Message m = result(0, seq, "person");
    m.prediction.top_k = {{0, 0.3f, "person"}, {1, 0.3f, "smoke"}};
    ASSERT_TRUE(stage_->process(std::move(m), out_).ok());
  }
  ASSERT_TRUE(stage_->process(testing::end_message(0, 4), out_).ok());
  std::vector<std::string> order;
  for (const auto& [topic, j] : bus_->sent) {
    if (topic == "segments/s0") order.push_back(j["event"].get<std::string>() + " " + j["label"].get<std::string>());
  }
  EXPECT_EQ(order, (std::vector<std::string>{"began smoke", "ended smoke"}));
}

// publish.segments_pictures_dir: each segment that begins asks for a picture named by the stream, the
// day and time its first frame was captured and its label; ingest's picture event becomes the
// segment's "picture" message (or says why there is none), counted on /metrics.
TEST_F(PublishStageTest, ASegmentThatBeginsAsksForItsPictureAndIngestsAnswerIsItsPictureMessage) {
  ask_pictures(2);
  const std::vector<PictureRequest>& asked = asked_;
  open();
  uint64_t seq = 0;
  send_top1(&seq, "truck", 0.7, 1);
  EXPECT_TRUE(asked.empty()) << "not yet begun";
  send_top1(&seq, "truck", 0.9, 2);  // began at seq 0, said at seq 1: its best frame is seq 1
  send_top1(&seq, "car", 0.9, 2);    // ended; car began at seq 3
  ASSERT_EQ(asked.size(), 2u);
  EXPECT_EQ(asked[0].stream_id, "s0");
  EXPECT_EQ(asked[0].label, "truck");
  EXPECT_EQ(asked[0].segment_start_seq, 0u);
  EXPECT_EQ(asked[0].frame_seq, 1) << "the best of the frames it began with";
  EXPECT_EQ(asked[0].frame_pts_ns, 33000000) << "found by ingest by its timestamp";
  EXPECT_EQ(asked[1].label, "car");
  EXPECT_EQ(asked[1].segment_start_seq, 3u);
  EXPECT_EQ(asked[1].frame_seq, 3) << "the first of equals";
  EXPECT_EQ(asked[1].frame_pts_ns, 99000000);
  double began_ms = -1;  // the truck segment's first frame's capture time, as its began message says
  for (const auto& [topic, j] : bus_->sent) {
    if (topic == "segments/s0" && j["event"] == "began" && j["label"] == "truck") began_ms = j["start_capture_unix_ms"];
  }
  EXPECT_EQ(asked[0].path, segment_picture_path("/pictures", "s0", "truck", began_ms));
  EXPECT_EQ(asked[0].path.rfind("/pictures/s0/", 0), 0u) << asked[0].path;

  // Ingest's answers: one written (of frame 1, the one asked for), one that could not be (of frame 4,
  // the next frame: ingest no longer had frame 3).
  ASSERT_TRUE(stage_->process(picture_answer(1, "truck", 0, asked[0].path), out_).ok());
  const std::string denied = "cannot make the folder of /pictures/s0/...: Permission denied";
  ASSERT_TRUE(stage_->process(picture_answer(4, "car", 3, "", denied), out_).ok());
  const std::vector<nlohmann::json> pictures = pictures_said();
  ASSERT_EQ(pictures.size(), 2u);
  EXPECT_EQ(pictures[0]["schema"], "vapipe.segment");
  EXPECT_EQ(pictures[0]["label"], "truck");
  EXPECT_EQ(pictures[0]["start_seq"], 0);
  EXPECT_EQ(pictures[0]["seq"], 1);
  EXPECT_EQ(pictures[0]["frame"], "best");
  EXPECT_EQ(pictures[1]["frame"], "next");
  EXPECT_EQ(pictures[0]["picture"], asked[0].path);
  EXPECT_TRUE(pictures[0]["error"].is_null());
  EXPECT_TRUE(pictures[0]["picture_url_path"].is_null()) << "no metrics_address: nothing serves it";
  EXPECT_NEAR(pictures[0]["pts_ms"].get<double>(), 33.0, 1e-9);
  EXPECT_TRUE(pictures[0]["capture_unix_ms"].is_number());
  EXPECT_TRUE(pictures[1]["picture"].is_null());
  EXPECT_NE(pictures[1]["error"].get<std::string>().find("Permission denied"), std::string::npos);
  EXPECT_EQ(stage_->metrics().streams[0].pictures, 1u);
  EXPECT_EQ(stage_->metrics().streams[0].pictures_failed, 1u);
  EXPECT_NE(prometheus_text(stage_->metrics()).find(
                "vapipe_segment_pictures_total{stream=\"s0\",outcome=\"failed\"} 1"),
            std::string::npos);
  EXPECT_EQ(stage_->metrics().streams[0].state, "running");  // a picture changes nothing of the stream's

  // An answer naming a file outside the pictures' folder (another program on ingest's side of the
  // transport) is refused: no webhook, broker or HTTP server would read /etc/shadow for it.
  send_top1(&seq, "truck", 0.9, 2);
  ASSERT_EQ(asked.size(), 3u);
  for (const char* elsewhere : {"/etc/shadow", "/pictures/../etc/shadow", "/pictures"}) {
    ASSERT_TRUE(stage_->process(picture_answer(6, "truck", 5, elsewhere), out_).ok());
    EXPECT_TRUE(pictures_said().back()["picture"].is_null()) << elsewhere;
    EXPECT_EQ(pictures_said().back()["error"], "the picture's path is not under publish.segments_pictures_dir");
  }
  EXPECT_EQ(stage_->metrics().streams[0].pictures, 1u);
}

// publish.segments_clips: a segment that begins also asks for its clip (beside its picture, from its
// first frame's timestamp on), one that ends says where its clip ends (its last frame's timestamp), and
// ingest's clip event becomes the segment's "clip" message, counted on /metrics.
TEST_F(PublishStageTest, ASegmentAsksForItsClipWhenItBeginsAndEndsItAndIngestsAnswerIsItsClipMessage) {
  ask_pictures(2);
  config_.publish.segments_clips = true;
  const std::vector<PictureRequest>& asked = asked_;
  open();
  uint64_t seq = 0;
  send_top1(&seq, "truck", 0.9, 3);  // began at seq 0 (said at 1), last at 2
  send_top1(&seq, "car", 0.9, 2);    // truck ended (at seq 4); car began at 3
  std::vector<std::string> kinds;
  for (const PictureRequest& r : asked) {
    kinds.push_back(r.label + (r.kind == PictureRequest::Kind::kPicture     ? " picture"
                               : r.kind == PictureRequest::Kind::kClipStart ? " clip_start"
                                                                            : " clip_end"));
  }
  ASSERT_EQ(kinds, (std::vector<std::string>{"truck picture", "truck clip_start", "truck clip_end", "car picture",
                                             "car clip_start"}));
  EXPECT_EQ(asked[1].path, segment_clip_path(asked[0].path));
  EXPECT_EQ(asked[1].path.substr(asked[1].path.size() - 4), ".mp4");
  EXPECT_EQ(asked[1].segment_start_seq, 0u);
  EXPECT_EQ(asked[1].frame_pts_ns, 0) << "the segment's first frame";
  EXPECT_EQ(asked[2].segment_start_seq, 0u);
  EXPECT_EQ(asked[2].frame_pts_ns, 2 * 33000000) << "the segment's last frame";
  EXPECT_TRUE(asked[2].path.empty());
  EXPECT_EQ(asked[4].segment_start_seq, 3u);
  EXPECT_EQ(asked[4].frame_pts_ns, 3 * 33000000);

  auto clip_answer = [&](const std::string& path, const std::string& message) {
    Message m = Message::stream_event(MessageKind::kStreamClip, result(0, 0, "truck").env, StreamEvent{});
    m.env.pts_ns = -5 * 33000000 + 33000000 * 10;  // its first frame: the key frame before the pre-roll
    m.event.clip = path;
    m.event.message = message;
    m.event.label = "truck";
    m.event.segment_start_seq = 0;
    m.event.duration_ns = path.empty() ? -1 : 4'500'000'000;
    if (!path.empty()) m.event.turn = "rotate-270";
    return m;
  };
  ASSERT_TRUE(stage_->process(clip_answer(asked[1].path, ""), out_).ok());
  ASSERT_TRUE(stage_->process(clip_answer(asked[1].path, "the stream's decoder started over (a reconnection)"), out_).ok());
  ASSERT_TRUE(stage_->process(clip_answer("", "none of its compressed frames is kept"), out_).ok());
  ASSERT_TRUE(stage_->process(clip_answer("/etc/passwd", ""), out_).ok());
  std::vector<nlohmann::json> clips;
  for (const auto& [topic, j] : bus_->sent) {
    if (topic == "segments/s0" && j["event"] == "clip") clips.push_back(j);
  }
  ASSERT_EQ(clips.size(), 4u);
  EXPECT_EQ(clips[0]["schema"], "vapipe.segment");
  EXPECT_EQ(clips[0]["label"], "truck");
  EXPECT_EQ(clips[0]["start_seq"], 0);
  EXPECT_EQ(clips[0]["clip"], asked[1].path);
  EXPECT_TRUE(clips[0]["clip_url_path"].is_null()) << "no metrics_address: nothing serves it";
  EXPECT_NEAR(clips[0]["duration_s"].get<double>(), 4.5, 1e-9);
  EXPECT_NEAR(clips[0]["pts_ms"].get<double>(), 165.0, 1e-9);
  EXPECT_TRUE(clips[0]["cut_short"].is_null());
  EXPECT_TRUE(clips[0]["error"].is_null());
  EXPECT_EQ(clips[0]["part"], 1);
  EXPECT_EQ(clips[0]["continues"], false);
  EXPECT_EQ(clips[0]["turn"], "rotate-270");  // how to turn it to show what the picture showed
  EXPECT_EQ(clips[1]["cut_short"], "the stream's decoder started over (a reconnection)");
  EXPECT_TRUE(clips[2]["clip"].is_null());
  EXPECT_TRUE(clips[2]["duration_s"].is_null());
  EXPECT_EQ(clips[2]["error"], "none of its compressed frames is kept");
  EXPECT_TRUE(clips[2]["turn"].is_null());
  EXPECT_TRUE(clips[3]["clip"].is_null());
  EXPECT_EQ(clips[3]["error"], "the clip's path is not under publish.segments_pictures_dir");
  EXPECT_EQ(stage_->metrics().streams[0].clips, 2u);
  EXPECT_EQ(stage_->metrics().streams[0].clips_failed, 2u);
  EXPECT_NE(prometheus_text(stage_->metrics()).find("vapipe_segment_clips_total{stream=\"s0\",outcome=\"written\"} 2"),
            std::string::npos);
}

// segments_picture_frame: first asks for the segment's first frame, whatever the scores.
TEST_F(PublishStageTest, ASegmentsFirstFrameIsAskedForWhenSoConfigured) {
  ask_pictures(3);
  config_.publish.segments_picture_frame = "first";
  const std::vector<PictureRequest>& asked = asked_;
  open();
  uint64_t seq = 0;
  send_top1(&seq, "person", 0.5, 1);
  send_top1(&seq, "person", 0.95, 2);
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0].frame_seq, 0);
  EXPECT_EQ(asked[0].frame_pts_ns, 0);
  ASSERT_TRUE(stage_->process(picture_answer(0, "person", 0, asked[0].path), out_).ok());
  ASSERT_EQ(pictures_said().size(), 1u);
  EXPECT_EQ(pictures_said()[0]["frame"], "first");
}

// A picture ingest does not answer for (its lane restarting when publish asked; ingest on another
// host) is said to be missing once the answer is overdue, with no frame; one that comes after all is
// still published, and counted as written, not failed.
TEST_F(PublishStageTest, APictureIngestDoesNotAnswerForIsSaidToBeMissingOnceOverdue) {
  ask_pictures(2);
  const std::vector<PictureRequest>& asked = asked_;
  stage_->set_picture_answer_timeout(std::chrono::seconds(1));
  open();
  EXPECT_FALSE(stage_->next_deadline().has_value()) << "nothing asked, nothing due";
  uint64_t seq = 0;
  send_top1(&seq, "truck", 0.9, 2);
  ASSERT_EQ(asked.size(), 1u);
  ASSERT_TRUE(stage_->next_deadline().has_value()) << "the answer's deadline";
  ASSERT_TRUE(stage_->on_deadline(out_).ok());
  EXPECT_TRUE(pictures_said().empty()) << "not overdue yet";
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));
  ASSERT_TRUE(stage_->on_deadline(out_).ok());
  ASSERT_TRUE(stage_->on_deadline(out_).ok());  // said once
  ASSERT_EQ(pictures_said().size(), 1u);
  const nlohmann::json missing = pictures_said()[0];
  EXPECT_EQ(missing["label"], "truck");
  EXPECT_EQ(missing["start_seq"], 0);
  EXPECT_TRUE(missing["picture"].is_null());
  EXPECT_TRUE(missing["seq"].is_null());
  EXPECT_TRUE(missing["frame"].is_null());
  EXPECT_NE(missing["error"].get<std::string>().find("ingest gave no picture in 1 s"), std::string::npos)
      << missing["error"];
  EXPECT_EQ(stage_->metrics().streams[0].pictures_failed, 1u);
  EXPECT_FALSE(stage_->next_deadline().has_value()) << "said: nothing more is due";

  ASSERT_TRUE(stage_->process(picture_answer(0, "truck", 0, asked[0].path), out_).ok());
  ASSERT_EQ(pictures_said().size(), 2u);
  EXPECT_EQ(pictures_said()[1]["frame"], "best");
  EXPECT_EQ(pictures_said()[1]["picture"], asked[0].path);
  EXPECT_EQ(stage_->metrics().streams[0].pictures, 1u);
  EXPECT_EQ(stage_->metrics().streams[0].pictures_failed, 0u);
}

// A publish started again with clips asks ingest to end the clips of the segments it no longer follows
// (begun before it started), and again once a second for 10 s (a request sent before ingest's
// subscription reached its new socket is lost).
TEST_F(PublishStageTest, APublishStartedAgainEndsTheClipsBegunBeforeIt) {
  ask_pictures(2);
  config_.publish.segments_clips = true;
  const JobLayout layout = make_job_layout(config_, "publish-clips-" + std::to_string(getpid()));
  std::filesystem::create_directories(layout.run_dir);
  setenv(kRestartReasonEnv, "stage publish (pid 4242) failed: killed by signal 9", 1);
  const int64_t before = wall_clock_ns();
  const Status opened = stage_->open(StageContext{config_, nullptr, nullptr, &layout});
  const int64_t after = wall_clock_ns();
  unsetenv(kRestartReasonEnv);
  ASSERT_TRUE(opened.ok()) << opened.message();
  ASSERT_EQ(asked_.size(), 1u);
  EXPECT_EQ(asked_[0].kind, PictureRequest::Kind::kClipsBefore);
  EXPECT_GE(asked_[0].before_unix_ns, before);
  EXPECT_LE(asked_[0].before_unix_ns, after);
  ASSERT_TRUE(stage_->next_deadline().has_value());
  EXPECT_LE(*stage_->next_deadline() - std::chrono::steady_clock::now(), std::chrono::milliseconds(1100));
  std::this_thread::sleep_until(*stage_->next_deadline());
  ASSERT_TRUE(stage_->on_deadline(out_).ok());
  ASSERT_EQ(asked_.size(), 2u);
  EXPECT_EQ(asked_[1].kind, PictureRequest::Kind::kClipsBefore);
  EXPECT_EQ(asked_[1].before_unix_ns, asked_[0].before_unix_ns);
  std::filesystem::remove_all(layout.run_dir);
}

// A clip ingest does not say (its lane restarted while writing it) is said to be missing once its
// segment has ended and the post-roll and the answer timeout have passed; one still open is due at its
// longest; one said meanwhile is not said missing.
TEST_F(PublishStageTest, AClipIngestDoesNotSayIsSaidToBeMissingOnceOverdue) {
  ask_pictures(2);
  config_.publish.segments_clips = true;
  config_.publish.segments_clip_post_s = 0;
  config_.publish.segments_clip_max_s = 3600;
  stage_->set_picture_answer_timeout(std::chrono::seconds(1));
  open();
  uint64_t seq = 0;
  send_top1(&seq, "truck", 0.9, 3);  // truck began
  send_top1(&seq, "car", 0.9, 2);    // truck ended, car began (its clip due in an hour)
  send_top1(&seq, "bus", 0.9, 2);    // car ended, bus began
  auto clips_said = [&] {
    std::vector<nlohmann::json> out;
    for (const auto& [topic, j] : bus_->sent) {
      if (topic == "segments/s0" && j["event"] == "clip") out.push_back(j);
    }
    return out;
  };
  // The car's clip comes in time; the truck's never does.
  Message car = Message::stream_event(MessageKind::kStreamClip, result(0, 3, "car").env, StreamEvent{});
  car.event.clip = "/pictures/s0/car.mp4";
  car.event.label = "car";
  car.event.segment_start_seq = 3;
  car.event.duration_ns = 1'000'000'000;
  ASSERT_TRUE(stage_->process(std::move(car), out_).ok());
  ASSERT_TRUE(stage_->on_deadline(out_).ok());
  ASSERT_EQ(clips_said().size(), 1u) << "not overdue yet";
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));
  ASSERT_TRUE(stage_->on_deadline(out_).ok());
  ASSERT_TRUE(stage_->on_deadline(out_).ok());  // said once
  const std::vector<nlohmann::json> said = clips_said();
  ASSERT_EQ(said.size(), 2u);
  EXPECT_EQ(said[1]["label"], "truck");
  EXPECT_EQ(said[1]["start_seq"], 0);
  EXPECT_TRUE(said[1]["clip"].is_null());
  EXPECT_NE(said[1]["error"].get<std::string>().find("ingest gave no clip"), std::string::npos) << said[1]["error"];
  EXPECT_EQ(stage_->metrics().streams[0].clips, 1u);
  EXPECT_EQ(stage_->metrics().streams[0].clips_failed, 1u);
  // The bus's segment is open: its clip is due at its longest, an hour on; and again after its first
  // part, which continues (part 2 due an hour after it).
  ASSERT_TRUE(stage_->next_deadline().has_value());
  EXPECT_GT(*stage_->next_deadline() - std::chrono::steady_clock::now(), std::chrono::minutes(59));
  Message bus = Message::stream_event(MessageKind::kStreamClip, result(0, 5, "bus").env, StreamEvent{});
  bus.event.clip = "/pictures/s0/bus.mp4";
  bus.event.label = "bus";
  bus.event.segment_start_seq = 5;
  bus.event.attempt = 1;
  bus.event.continues = true;
  ASSERT_TRUE(stage_->process(std::move(bus), out_).ok());
  EXPECT_EQ(clips_said().back()["continues"], true);
  EXPECT_EQ(clips_said().back()["part"], 1);
  ASSERT_TRUE(stage_->next_deadline().has_value()) << "its part 2 is awaited";
  EXPECT_GT(*stage_->next_deadline() - std::chrono::steady_clock::now(), std::chrono::minutes(59));
}

// A publish that crashed and was started again (a live job goes on without it meanwhile) still knows
// the pictures it had asked for (picture-asks.json in the job's run folder): a picture that comes after
// the restart says it is of the best frame, not "next", and one that never comes is said to be missing.
TEST_F(PublishStageTest, APublishStartedAgainKnowsThePicturesAskedBeforeItsRestart) {
  ask_pictures(2);
  const JobLayout layout = make_job_layout(config_, "publish-asks-" + std::to_string(getpid()));
  std::filesystem::create_directories(layout.run_dir);
  ASSERT_TRUE(stage_->open(StageContext{config_, nullptr, nullptr, &layout}).ok());
  uint64_t seq = 0;
  send_top1(&seq, "truck", 0.9, 2);  // began: its picture asked for
  send_top1(&seq, "car", 0.9, 2);    // the next segment's too
  ASSERT_EQ(asked_.size(), 2u);
  EXPECT_EQ(asked_[1].label, "car");

  // It crashes (no close) and is started again.
  setenv(kRestartReasonEnv, "stage publish (pid 4242) failed: killed by signal 9", 1);
  SetUp();
  ask_pictures(2);
  stage_->set_picture_answer_timeout(std::chrono::seconds(1));
  const Status opened = stage_->open(StageContext{config_, nullptr, nullptr, &layout});
  unsetenv(kRestartReasonEnv);
  ASSERT_TRUE(opened.ok()) << opened.message();
  ASSERT_TRUE(stage_->process(picture_answer(static_cast<uint64_t>(asked_[0].frame_seq), "truck", 0, asked_[0].path),
                              out_).ok());
  ASSERT_EQ(pictures_said().size(), 1u);
  EXPECT_EQ(pictures_said()[0]["frame"], "best");
  EXPECT_EQ(pictures_said()[0]["label"], "truck");
  ASSERT_TRUE(stage_->next_deadline().has_value()) << "the car's picture is still awaited";
  // (Its deadlines: the picture's, and once a second the look at the stages' figures.)
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (pictures_said().size() < 2 && std::chrono::steady_clock::now() < limit) {
    std::this_thread::sleep_until(std::min(*stage_->next_deadline(), limit));
    ASSERT_TRUE(stage_->on_deadline(out_).ok());
  }
  ASSERT_EQ(pictures_said().size(), 2u);
  EXPECT_EQ(pictures_said()[1]["label"], "car");
  EXPECT_EQ(pictures_said()[1]["start_seq"], 2);
  EXPECT_NE(pictures_said()[1]["error"].get<std::string>().find("ingest gave no picture"), std::string::npos);
  std::filesystem::remove_all(layout.run_dir);
}

// segments_pictures_keep_days: days older than those kept are deleted when publish starts, and then
// once an hour (here 100 ms) whether or not new pictures come (a retention rule: pictures of people).
TEST_F(PublishStageTest, PicturesOfDaysOlderThanThoseKeptAreDeletedAtStartAndOnTime) {
  const std::filesystem::path dir = ::testing::TempDir() + ("pictures-kept-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "s0" / "2020-01-01");
  std::filesystem::create_directories(dir / "s0" / "notes");
  config_.job.mode = JobMode::kLive;
  config_.publish.segments_min_frames = 2;
  config_.publish.segments_pictures_dir = dir.string();
  config_.publish.segments_pictures_keep_days = 7;
  stage_->set_picture_requester([](const PictureRequest&) {});
  stage_->set_pictures_prune_period(std::chrono::milliseconds(100));
  open();
  EXPECT_FALSE(std::filesystem::exists(dir / "s0" / "2020-01-01"));
  EXPECT_TRUE(std::filesystem::exists(dir / "s0" / "notes"));
  // A day that has become too old since (here one made so): gone at the next hour's pruning, with no
  // picture in between.
  std::filesystem::create_directories(dir / "s0" / "2021-06-30");
  const std::optional<SteadyTime> due = stage_->next_deadline();
  ASSERT_TRUE(due.has_value());
  EXPECT_LE(*due, std::chrono::steady_clock::now() + std::chrono::milliseconds(100));
  std::this_thread::sleep_until(*due);
  ASSERT_TRUE(stage_->on_deadline(out_).ok());
  EXPECT_FALSE(std::filesystem::exists(dir / "s0" / "2021-06-30"));
  EXPECT_TRUE(std::filesystem::exists(dir / "s0" / "notes"));
  std::filesystem::remove_all(dir);
}

TEST_F(PublishStageTest, WithoutSegmentsMinFramesNothingIsPublishedOnSegments) {
  open();
  for (uint64_t seq = 0; seq < 10; ++seq) ASSERT_TRUE(stage_->process(result(0, seq, "car"), out_).ok());
  for (const auto& [topic, j] : bus_->sent) EXPECT_NE(topic.rfind("segments/", 0), 0u) << topic;
}

TEST_F(PublishStageTest, GapsAndOutOfOrderResultsAreCounted) {
  open();
  ASSERT_TRUE(stage_->process(result(0, 0, "a"), out_).ok());
  ASSERT_TRUE(stage_->process(result(0, 3, "a"), out_).ok());  // 1 and 2 missing
  ASSERT_TRUE(stage_->process(result(0, 2, "a"), out_).ok());  // late
  ASSERT_TRUE(stage_->process(testing::end_message(0, 3), out_).ok());
  ASSERT_TRUE(stage_->process(testing::end_message(1, 0), out_).ok());
  ASSERT_TRUE(stage_->close(out_).ok());
  EXPECT_EQ(stage_->summary()["streams"][0]["gaps"], 2);
  EXPECT_EQ(stage_->summary()["streams"][0]["out_of_order"], 1);
  EXPECT_EQ(stage_->exit_code(), 0);
}

// Live drops as they happen: publish takes each stream's count from its ingest's statistics file
// (once a second, with the metrics), never lower than what the events said, and on top of what the
// stream had dropped before its lane restarted. So too its MPEG-TS continuity errors (a live udp://
// stream's lost packets: in the log once a minute before, never on /metrics).
TEST_F(PublishStageTest, QueueDropsAreServedAsIngestCountsThemNotOnlyAtEvents) {
  JobLayout layout = make_job_layout(config_, "publish-drops-" + std::to_string(getpid()));
  std::filesystem::create_directories(layout.run_dir);
  config_.publish.metrics_address = "127.0.0.1:0";
  ASSERT_TRUE(stage_->open(StageContext{config_, nullptr, nullptr, &layout}).ok());
  StageStatsSnapshot ingest;
  ingest.stage = "ingest";
  ingest.has_input = false;
  ingest.stream_dropped = {{"s0", 7}};
  ingest.stream_continuity_errors = {{"s0", 4}};
  ingest.stream_undecoded = {{"s0", 30}};
  ingest.stream_rtp_lost = {{"s0", 12}};
  ingest.stream_rtp_received = {{"s0", 900}};
  ASSERT_TRUE(write_stage_stats(ingest, stage_stats_path(layout, StageKind::kIngest)).ok());
  ASSERT_TRUE(stage_->on_deadline(out_).ok());  // the once-a-second snapshot
  EXPECT_EQ(stage_->metrics().streams[0].dropped, 7u);
  EXPECT_EQ(stage_->metrics().streams[0].continuity_errors, 4u);
  EXPECT_EQ(stage_->metrics().streams[1].continuity_errors, 0u);
  EXPECT_EQ(stage_->metrics().streams[0].undecoded, 30u);
  EXPECT_EQ(stage_->metrics().streams[0].rtp_lost, 12u);
  EXPECT_EQ(stage_->metrics().streams[0].rtp_received, 900u);
  // Its lane restarts: the new ingest counts from 0 again, on top of the 7.
  StreamEvent restart{"test://ball", "its lane restarted: stage infer (pid 1) failed", 0, 0};
  ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamReconnecting, testing::envelope(0, 0), restart),
                              out_).ok());
  ingest.stream_dropped = {{"s0", 2}};
  ingest.stream_continuity_errors = {{"s0", 1}};
  ingest.stream_undecoded = {{"s0", 3}};
  ingest.stream_rtp_lost = {{"s0", 1}};
  ingest.stream_rtp_received = {{"s0", 50}};
  ASSERT_TRUE(write_stage_stats(ingest, stage_stats_path(layout, StageKind::kIngest)).ok());
  ASSERT_TRUE(stage_->on_deadline(out_).ok());
  EXPECT_EQ(stage_->metrics().streams[0].dropped, 9u);
  EXPECT_EQ(stage_->metrics().streams[0].continuity_errors, 5u);
  EXPECT_EQ(stage_->metrics().streams[0].undecoded, 33u);
  EXPECT_EQ(stage_->metrics().streams[0].rtp_lost, 13u);
  EXPECT_EQ(stage_->metrics().streams[0].rtp_received, 950u);

  // It ends, and a reload lists it again: ingest's count is its new run's before its `started`
  // reaches publish (frames on their way ahead of it): not taken on the old base, then again.
  ASSERT_TRUE(stage_->process(testing::end_message(0, 5), out_).ok());
  ingest.stream_dropped = {{"s0", 4}};
  ASSERT_TRUE(write_stage_stats(ingest, stage_stats_path(layout, StageKind::kIngest)).ok());
  ASSERT_TRUE(stage_->on_deadline(out_).ok());
  EXPECT_EQ(stage_->metrics().streams[0].dropped, 9u);
  ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamStart, testing::envelope(0, 6),
                                                    {"test://ball", "", 0, 0}), out_).ok());
  ingest.stream_dropped = {{"s0", 6}};
  ASSERT_TRUE(write_stage_stats(ingest, stage_stats_path(layout, StageKind::kIngest)).ok());
  ASSERT_TRUE(stage_->on_deadline(out_).ok());
  EXPECT_EQ(stage_->metrics().streams[0].dropped, 15u);  // 9, and the new run's 6 (was 19: 4 twice)
  std::filesystem::remove_all(layout.run_dir);
}

// A reload added a stream to the running job (pipeline/stream_table.h): publish learns it from the
// table when its first message comes, and a removed stream is "removed" in the summary.
TEST_F(PublishStageTest, StreamsAddedWhileRunningAreLearnedFromTheStreamTable) {
  JobLayout layout = make_job_layout(config_, "publish-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(layout.run_dir);
  StreamTable table;
  table.version = 1;
  table.writer_pid = getppid();  // as if this process's parent were the supervisor that wrote it
  table.entries = {{0, "s0", "test://ball", 0, false}, {1, "s1", "test://ball", 0, true},
                   {2, "added", "test://smpte", 0, false}};
  ASSERT_TRUE(write_stream_table(table, stream_table_path(layout)).ok());
  ASSERT_TRUE(stage_->open(StageContext{config_, nullptr, nullptr, &layout}).ok());
  Envelope added;
  added.stream_id = "added";
  added.stream_index = 2;
  ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamStart, added, {"test://smpte", "", 0, 0}), out_).ok());
  Message r = result(0, 0, "smpte");
  r.env.stream_id = "added";
  r.env.stream_index = 2;
  ASSERT_TRUE(stage_->process(std::move(r), out_).ok());
  ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamEnd, testing::envelope(1, 0),
                                                    {"test://ball", "removed from the config", 0, 0}), out_).ok());
  Message stranger = result(0, 0, "x");
  stranger.env.stream_id = "stranger";
  stranger.env.stream_index = 3;  // in no table
  EXPECT_FALSE(stage_->process(std::move(stranger), out_).ok());
  ASSERT_TRUE(stage_->close(out_).ok());
  const nlohmann::json& s = stage_->summary();
  ASSERT_EQ(s["streams"].size(), 3u);
  EXPECT_EQ(s["streams"][1]["status"], "removed");
  EXPECT_EQ(s["streams"][2]["stream_id"], "added");
  EXPECT_EQ(s["streams"][2]["frames"], 1);
  EXPECT_EQ(bus_->sent[0].first, "events/added");
  std::filesystem::remove_all(layout.run_dir);
}

// Publish crashed after a reload changed a stream's region and turn: started again, it takes them from
// the stream table (not the config the job started with), for the started event of a stream that had
// no frame yet.
TEST_F(PublishStageTest, ARestartedPublishTakesARegionAReloadChangedFromTheStreamTable) {
  JobLayout layout = make_job_layout(config_, "publish-test-roi-" + std::to_string(getpid()));
  std::filesystem::create_directories(layout.run_dir);
  StreamTable table;
  table.version = 2;
  table.writer_pid = getppid();
  table.entries = {{0, "s0", "test://ball", 0, false}, {1, "s1", "test://ball", 0, false}};
  table.entries[1].roi = {0, 0.5, 1, 0.5};
  table.entries[1].turn = Orientation::kRotate90;
  ASSERT_TRUE(write_stream_table(table, stream_table_path(layout)).ok());
  setenv(kRestartReasonEnv, "stage publish (pid 4242) failed: killed by signal 9", 1);
  const bool opened = stage_->open(StageContext{config_, nullptr, nullptr, &layout}).ok();
  unsetenv(kRestartReasonEnv);
  ASSERT_TRUE(opened);
  ASSERT_TRUE(stage_->process(Message::stream_event(MessageKind::kStreamStart, testing::envelope(1, 0),
                                                    {"test://ball", "", 0, 0}), out_).ok());
  ASSERT_EQ(bus_->sent.size(), 1u);
  EXPECT_EQ(bus_->sent[0].second["roi"], nlohmann::json::array({0, 0.5, 1, 0.5}));
  EXPECT_EQ(bus_->sent[0].second["turn"], "rotate-90");
  std::filesystem::remove_all(layout.run_dir);
}

TEST_F(PublishStageTest, MessageForAnUnknownStreamIsRejected) {
  open();
  Message m = result(0, 0, "a");
  m.env.stream_id = "intruder";
  Status s = stage_->process(std::move(m), out_);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("intruder"), std::string::npos);
  EXPECT_TRUE(bus_->sent.empty());
}

}  // namespace
}  // namespace vapipe
