// The Prometheus text and the health document, from a JobMetrics snapshot.
#include "stages/publish/metrics.h"

#include <cstdint>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "pipeline/job_layout.h"

namespace vapipe {
namespace {

JobMetrics two_cameras() {
  JobMetrics m;
  m.job = "yard \"north\"";
  m.mode = "live";
  m.start_unix_s = 1000;
  m.now_unix_s = 1060;
  StreamMetrics a;
  a.id = "gate";
  a.state = "running";
  a.results = 1800;
  a.frame_errors = 2;
  a.gaps = 5;
  a.continuity_errors = 14;
  a.undecoded = 6;
  a.rtp_lost = 25;
  a.rtp_received = 10000;
  a.reconnects = 1;
  a.comebacks = 2;
  a.latency_sum_s = 90;
  a.latency_count = 1800;
  a.latency_max_s = 0.25;
  a.last_result_unix_s = 1059.5;
  StreamMetrics b;
  b.id = "dock";
  b.state = "reconnecting";
  m.streams = {a, b};
  return m;
}

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

TEST(Metrics, EveryStageProcessHasItsTimesAndItsOwnTotalsPerLane) {
  JobMetrics m = two_cameras();
  StageStatsSnapshot infer0;
  infer0.stage = "infer";
  infer0.lane = 0;
  infer0.messages_in = 120;
  infer0.busy_s = 12.5;
  infer0.input_wait_s = 47.5;
  infer0.counters = {{"batches", 120}, {"frames", 1800}};
  StageStatsSnapshot infer1 = infer0;
  infer1.lane = 1;
  infer1.counters = {{"batches", 60}, {"frames", 900}};
  StageStatsSnapshot batch0;
  batch0.stage = "batch";
  batch0.send_blocked_s = 3;
  batch0.counters = {{"full_batches", 7}};
  StageStatsSnapshot ingest0;
  ingest0.stage = "ingest";
  ingest0.has_input = false;
  ingest0.slot_wait_s = 4;
  ingest0.counters = {{"messages_sent", 1900}};
  m.stages = {ingest0, batch0, infer0, infer1};
  const std::string t = prometheus_text(m);
  EXPECT_TRUE(has_line(t, "# TYPE vapipe_stage_busy_seconds_total counter")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_stage_busy_seconds_total{stage=\"infer\",lane=\"1\"} 12.5")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_stage_input_wait_seconds_total{stage=\"infer\",lane=\"0\"} 47.5")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_stage_send_blocked_seconds_total{stage=\"batch\",lane=\"0\"} 3")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_stage_messages_total{stage=\"infer\",lane=\"0\"} 120")) << t;
  // One family per stage total, a sample per lane.
  EXPECT_TRUE(has_line(t, "# TYPE vapipe_infer_batches_total counter")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_infer_batches_total{lane=\"0\"} 120")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_infer_frames_total{lane=\"1\"} 900")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_batch_full_batches_total{lane=\"0\"} 7")) << t;
  // Ingest has no input and decodes on GStreamer's threads: only its waits and totals.
  EXPECT_TRUE(has_line(t, "vapipe_stage_slot_wait_seconds_total{stage=\"ingest\",lane=\"0\"} 4")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_ingest_messages_sent_total{lane=\"0\"} 1900")) << t;
  EXPECT_EQ(t.find("vapipe_stage_busy_seconds_total{stage=\"ingest\""), std::string::npos) << t;
  EXPECT_EQ(t.find("# TYPE vapipe_infer_batches_total"), t.rfind("# TYPE vapipe_infer_batches_total"));
  // Without stage files (a stage driven alone), no stage families at all.
  EXPECT_EQ(prometheus_text(two_cameras()).find("vapipe_stage_"), std::string::npos);
}

// A stage whose work does not move makes /healthz say "stalled", naming it and why: one stopped (its
// figures, written every second, are old) and one in one stretch of its own work past half its
// watchdog's time. One waiting on them, one that ended, and publish itself (its server says) are not.
TEST(Metrics, AStageStoppedOrStuckInItsOwnWorkMakesTheJobStalled) {
  JobMetrics m = two_cameras();  // now 1060
  StageStatsSnapshot ingest;
  ingest.stage = "ingest";
  ingest.has_input = false;
  ingest.written_unix_s = 1059.6;
  ingest.slot_wait_s = 40;  // waiting on the stopped one: moving
  StageStatsSnapshot batch;
  batch.stage = "batch";
  batch.written_unix_s = 1039;  // 21 s ago
  StageStatsSnapshot infer;
  infer.stage = "infer";
  infer.written_unix_s = 1059.8;
  infer.working_s = 61;
  infer.working_on = "processing messages";
  infer.stuck_after_s = 120;
  StageStatsSnapshot ended;  // an ended stage's figures stand still
  ended.stage = "preprocess";
  ended.lane = 1;
  ended.written_unix_s = 900;
  ended.ended = true;
  StageStatsSnapshot publish;
  publish.stage = "publish";
  publish.written_unix_s = 1000;
  m.stages = {ingest, batch, infer, ended, publish};

  const auto stalled = stalled_stages(m);
  ASSERT_EQ(stalled.size(), 2u);
  EXPECT_EQ(stalled[0].stage, "batch");
  EXPECT_DOUBLE_EQ(stalled[0].for_s, 21);
  EXPECT_EQ(stalled[0].why, "no figures for 21 s (it writes them every second: the process is stopped, SIGSTOP or a "
                            "debugger, or frozen)");
  EXPECT_EQ(stalled[1].stage, "infer");
  EXPECT_EQ(stalled[1].why, "in one stretch of its own work (processing messages) for 61 s; its watchdog aborts it at "
                            "120 s (job.stage_timeout_s)");
  const nlohmann::json h = health_json(m);
  EXPECT_EQ(h["status"], "stalled");
  ASSERT_EQ(h["stalled"].size(), 2u);
  EXPECT_EQ(h["stalled"][0]["stage"], "batch");
  EXPECT_EQ(h["stalled"][0]["lane"], 0);
  const std::string t = prometheus_text(m);
  EXPECT_TRUE(has_line(t, "vapipe_stage_silent_seconds{stage=\"batch\",lane=\"0\"} 21")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_stage_silent_seconds{stage=\"preprocess\",lane=\"1\"} 0")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_stage_working_seconds{stage=\"infer\",lane=\"0\"} 61")) << t;

  // Below the limits, and with the watchdog off (60 s then): ok.
  m.stages[1].written_unix_s = 1046;  // 14 s
  m.stages[2].working_s = 59;
  m.stages[2].stuck_after_s = 0;
  EXPECT_TRUE(stalled_stages(m).empty());
  EXPECT_EQ(health_json(m)["status"], "ok");
  EXPECT_TRUE(health_json(m)["stalled"].empty());
  m.stages[2].working_s = 60;
  ASSERT_EQ(stalled_stages(m).size(), 1u);
  EXPECT_EQ(stalled_stages(m)[0].why, "in one stretch of its own work (processing messages) for 60 s");
  // A snapshot of an earlier version (no time written): not judged.
  m.stages[2].working_s = 0;
  m.stages[1].written_unix_s = 0;
  EXPECT_TRUE(stalled_stages(m).empty());

  // The wall clock stepped 2 days ahead (NTP, a person): on the monotonic clock, written 0.5 s ago, so
  // not stalled (before: 503 "stalled" for every stage, which a liveness probe restarts the job for).
  m.stages[1].written_unix_s = 1059.5;
  m.stages[1].written_monotonic_s = 500.0;
  m.now_unix_s = 1060 + 2 * 86400;
  m.now_monotonic_s = 500.5;
  for (StageStatsSnapshot& st : m.stages) {
    if (st.stage != "batch") st.written_monotonic_s = 500.2;
  }
  EXPECT_TRUE(stalled_stages(m).empty());
  m.now_monotonic_s = 520;  // and 20 s later on it: stalled
  ASSERT_EQ(stalled_stages(m).size(), 3u);  // (ingest, batch, infer: not the ended one, nor publish)
  EXPECT_EQ(stalled_stages(m)[1].stage, "batch");
  EXPECT_DOUBLE_EQ(stalled_stages(m)[1].for_s, 20);
}

// Each lane's infer says its model (a reload may change it lane by lane): an info metric on /metrics,
// and /healthz's `models`, with how its reloads went.
TEST(Metrics, EachLanesModelIsAnInfoMetricAndInTheHealthDocument) {
  JobMetrics m = two_cameras();
  StageStatsSnapshot infer0;
  infer0.stage = "infer";
  infer0.counters = {{"batches", 120}, {"model_reloads", 1}, {"model_reload_failures", 2}};
  infer0.facts = {{"model", "door \"v2\""}, {"model_file", "/models/door-v2.pt"}, {"labels_file", "/models/l.txt"},
                  {"last_reload_error", "model /models/x.pt is not a TorchScript model"}};
  StageStatsSnapshot infer1 = infer0;
  infer1.lane = 1;
  infer1.counters = {};
  infer1.facts = {{"model", "door-v1"}, {"model_file", "/models/door-v1.pt"}, {"loading", "/models/door-v2.pt"}};
  StageStatsSnapshot batch0;
  batch0.stage = "batch";
  m.stages = {batch0, infer0, infer1};
  const std::string t = prometheus_text(m);
  EXPECT_TRUE(has_line(t, "# TYPE vapipe_infer_model_info gauge")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_infer_model_info{lane=\"0\",model=\"door \\\"v2\\\"\",file=\"/models/door-v2.pt\"} 1")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_infer_model_info{lane=\"1\",model=\"door-v1\",file=\"/models/door-v1.pt\"} 1")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_infer_model_reload_failures_total{lane=\"0\"} 2")) << t;
  const nlohmann::json h = health_json(m);
  ASSERT_EQ(h["models"].size(), 2u) << h.dump();
  EXPECT_EQ(h["models"][0]["lane"], 0);
  EXPECT_EQ(h["models"][0]["model"], "door \"v2\"");
  EXPECT_EQ(h["models"][0]["model_reloads"], 1);
  EXPECT_EQ(h["models"][0]["model_reload_failures"], 2);
  EXPECT_EQ(h["models"][0]["last_reload_error"], "model /models/x.pt is not a TorchScript model");
  EXPECT_TRUE(h["models"][0]["loading"].is_null());
  EXPECT_EQ(h["models"][1]["loading"], "/models/door-v2.pt");
  EXPECT_TRUE(h["models"][1]["last_reload_error"].is_null());
  EXPECT_EQ(prometheus_text(two_cameras()).find("vapipe_infer_model_info"), std::string::npos);
  EXPECT_TRUE(health_json(two_cameras())["models"].empty());
}

// Durations for log lines and `vapipe status`, including an ETA at a pace near 0 (once an int overflow).
TEST(Metrics, HumanDurationsFromSecondsToCenturies) {
  EXPECT_EQ(human_duration(12.54), "12.5 s");
  EXPECT_EQ(human_duration(250), "4 min 10 s");
  EXPECT_EQ(human_duration(3900), "1 h 05 min");
  EXPECT_EQ(human_duration(9e9), "2500000 h 00 min");
  EXPECT_EQ(human_duration(1e300), "2.78e+296 h");
}

TEST(Metrics, PrometheusTextHasEveryFamilyAndStream) {
  const std::string t = prometheus_text(two_cameras());
  EXPECT_TRUE(has_line(t, "vapipe_job_info{job=\"yard \\\"north\\\"\",mode=\"live\"} 1")) << t;
  EXPECT_TRUE(has_line(t, "# TYPE vapipe_results_total counter"));
  EXPECT_TRUE(has_line(t, "vapipe_results_total{stream=\"gate\"} 1800"));
  EXPECT_TRUE(has_line(t, "vapipe_results_total{stream=\"dock\"} 0"));
  EXPECT_TRUE(has_line(t, "vapipe_frame_errors_total{stream=\"gate\"} 2"));
  EXPECT_TRUE(has_line(t, "vapipe_gaps_total{stream=\"gate\"} 5"));
  EXPECT_TRUE(has_line(t, "vapipe_ts_continuity_errors_total{stream=\"gate\"} 14"));
  EXPECT_TRUE(has_line(t, "vapipe_ts_continuity_errors_total{stream=\"dock\"} 0"));
  EXPECT_EQ(health_json(two_cameras())["streams"]["gate"]["ts_continuity_errors"], 14);
  EXPECT_TRUE(has_line(t, "vapipe_undecodable_frames_total{stream=\"gate\"} 6"));
  EXPECT_EQ(health_json(two_cameras())["streams"]["gate"]["undecodable_frames"], 6);
  EXPECT_TRUE(has_line(t, "vapipe_rtp_packets_lost_total{stream=\"gate\"} 25"));
  EXPECT_TRUE(has_line(t, "vapipe_rtp_packets_received_total{stream=\"gate\"} 10000"));
  EXPECT_EQ(health_json(two_cameras())["streams"]["gate"]["rtp_packets_lost"], 25);
  EXPECT_TRUE(has_line(t, "vapipe_reconnects_total{stream=\"gate\"} 1"));
  EXPECT_TRUE(has_line(t, "vapipe_stream_comebacks_total{stream=\"gate\"} 2"));
  EXPECT_TRUE(has_line(t, "vapipe_stream_comebacks_total{stream=\"dock\"} 0"));
  EXPECT_TRUE(has_line(t, "vapipe_stream_state{stream=\"gate\",state=\"running\"} 1"));
  EXPECT_TRUE(has_line(t, "vapipe_stream_state{stream=\"gate\",state=\"reconnecting\"} 0"));
  EXPECT_TRUE(has_line(t, "vapipe_stream_state{stream=\"dock\",state=\"reconnecting\"} 1"));
  EXPECT_TRUE(has_line(t, "# TYPE vapipe_latency_seconds summary"));
  EXPECT_TRUE(has_line(t, "vapipe_latency_seconds_sum{stream=\"gate\"} 90"));
  EXPECT_TRUE(has_line(t, "vapipe_latency_seconds_count{stream=\"gate\"} 1800"));
  EXPECT_TRUE(has_line(t, "vapipe_latency_max_seconds{stream=\"gate\"} 0.25"));
  EXPECT_TRUE(has_line(t, "vapipe_last_result_time_seconds{stream=\"gate\"} 1059.5"));
  EXPECT_TRUE(has_line(t, "vapipe_job_start_time_seconds 1000"));
  EXPECT_TRUE(has_line(t, "vapipe_job_restarts_total 0"));
  // Each stream has one state line per state; every family is declared once.
  size_t state_lines = 0, pos = 0;
  while ((pos = t.find("\nvapipe_stream_state{", pos + 1)) != std::string::npos) ++state_lines;
  EXPECT_EQ(state_lines, 2 * stream_states().size());
  EXPECT_EQ(t.back(), '\n');
}

TEST(Metrics, HealthSaysEachStreamsStateAndHowLongSinceItsLastResult) {
  const nlohmann::json h = health_json(two_cameras());
  EXPECT_EQ(h["status"], "ok");
  EXPECT_EQ(h["mode"], "live");
  EXPECT_DOUBLE_EQ(h["uptime_s"].get<double>(), 60);
  EXPECT_EQ(h["streams"]["gate"]["state"], "running");
  EXPECT_DOUBLE_EQ(h["streams"]["gate"]["last_result_age_s"].get<double>(), 0.5);
  EXPECT_EQ(h["streams"]["gate"]["comebacks"], 2);
  EXPECT_EQ(h["streams"]["dock"]["state"], "reconnecting");
  EXPECT_TRUE(h["streams"]["dock"]["last_result_age_s"].is_null());
  EXPECT_EQ(h["stream_states"]["running"], 1);
  EXPECT_EQ(h["stream_states"]["reconnecting"], 1);
  EXPECT_EQ(h["stream_states"]["removed"], 0);
}

// publish.segments_min_frames: each open segment is a sample of when it began, for alerts in
// Prometheus (time() minus it: how long the label has been on); /healthz says for how long.
TEST(Metrics, OpenSegmentsSayWhenTheyBegan) {
  JobMetrics m = two_cameras();
  EXPECT_EQ(prometheus_text(m).find("vapipe_segment_open_since_seconds"), std::string::npos);  // no segments
  EXPECT_FALSE(health_json(m)["streams"]["gate"].contains("segments"));
  m.segments = true;
  m.streams[0].open_segments = {{"truck", 1030.25}, {"person \"x\"", 1050}};
  const std::string t = prometheus_text(m);
  EXPECT_TRUE(has_line(t, "# TYPE vapipe_segment_open_since_seconds gauge")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_segment_open_since_seconds{stream=\"gate\",label=\"truck\"} 1030.25")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_segment_open_since_seconds{stream=\"gate\",label=\"person \\\"x\\\"\"} 1050")) << t;
  EXPECT_EQ(t.find("vapipe_segment_open_since_seconds{stream=\"dock\""), std::string::npos);
  const nlohmann::json h = health_json(m);
  ASSERT_EQ(h["streams"]["gate"]["segments"].size(), 2u);
  EXPECT_EQ(h["streams"]["gate"]["segments"][0]["label"], "truck");
  EXPECT_DOUBLE_EQ(h["streams"]["gate"]["segments"][0]["for_s"].get<double>(), 29.75);
  EXPECT_TRUE(h["streams"]["dock"]["segments"].empty());
  EXPECT_FALSE(h["streams"]["gate"]["segments"][0].contains("picture_url_path"));
  // With segments_pictures_dir: where each open segment's picture is served, null until it is written.
  m.segment_pictures = true;
  m.streams[0].open_segments[0].picture_url_path = "/pictures/gate/2026-12-01/14-03-22.125_truck.jpg";
  const nlohmann::json with = health_json(m);
  EXPECT_EQ(with["streams"]["gate"]["segments"][0]["picture_url_path"], "/pictures/gate/2026-12-01/14-03-22.125_truck.jpg");
  EXPECT_TRUE(with["streams"]["gate"]["segments"][1]["picture_url_path"].is_null());
}

// A job that watches folders gains a stream with every file for as long as it runs: the streams that
// ended long ago are counted in the job's figures but no longer listed one by one (Prometheus would
// keep a series per file for ever). Other jobs list every stream.
TEST(Metrics, AWatchingJobListsTheFilesThatEndedLongAgoOnlyInItsOwnCounts) {
  JobMetrics m = two_cameras();
  m.mode = "archive";
  StreamMetrics old_file;
  old_file.id = "2026-11-30-cam1";
  old_file.state = "done";
  old_file.results = 9000;
  old_file.ended = true;
  old_file.ended_unix_s = 100;  // long before now (1060)
  StreamMetrics recent = old_file;
  recent.id = "2026-12-01-cam1";
  recent.ended_unix_s = 1000;
  StreamMetrics earlier_run = old_file;  // ended in an earlier run (--resume): no end time here
  earlier_run.id = "2026-11-29-cam1";
  earlier_run.ended_unix_s = 0;
  m.streams.push_back(old_file);
  m.streams.push_back(recent);
  m.streams.push_back(earlier_run);
  const std::string every = prometheus_text(m);  // not watching: every stream listed
  EXPECT_TRUE(has_line(every, "vapipe_results_total{stream=\"2026-11-30-cam1\"} 9000")) << every;
  m.ended_streams_listed_for_s = 600;
  const std::string t = prometheus_text(m);
  EXPECT_EQ(t.find("2026-11-30-cam1"), std::string::npos) << t;
  EXPECT_EQ(t.find("2026-11-29-cam1"), std::string::npos) << t;
  EXPECT_TRUE(has_line(t, "vapipe_results_total{stream=\"2026-12-01-cam1\"} 9000")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_results_total{stream=\"gate\"} 1800")) << t;  // not ended
  EXPECT_TRUE(has_line(t, "vapipe_job_results_total 28800")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_job_frame_errors_total 2")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_job_streams{state=\"done\"} 3")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_job_streams{state=\"running\"} 1")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_job_streams{state=\"failed\"} 0")) << t;
  const nlohmann::json h = health_json(m);
  EXPECT_EQ(h["streams"].size(), 3u);  // gate, dock and the recent file
  EXPECT_TRUE(h["streams"].contains("2026-12-01-cam1"));
  EXPECT_EQ(h["stream_states"]["done"], 3);  // every stream counted
}

// A live job's camera a reload removed: listed for 10 minutes after, then counted in the job's figures
// only (a job whose cameras come and go kept a series of each for its life). One that failed stays.
TEST(Metrics, AStreamARemovedLongAgoIsCountedButNotListed) {
  JobMetrics m = two_cameras();
  StreamMetrics removed;
  removed.id = "old-door";
  removed.state = "removed";
  removed.results = 500;
  removed.ended = true;
  removed.ended_unix_s = 100;  // long before now (1060)
  StreamMetrics just_removed = removed;
  just_removed.id = "new-door";
  just_removed.ended_unix_s = 1000;
  StreamMetrics failed = removed;
  failed.id = "broken";
  failed.state = "failed";
  m.streams.push_back(removed);
  m.streams.push_back(just_removed);
  m.streams.push_back(failed);
  const std::string t = prometheus_text(m);
  EXPECT_EQ(t.find("old-door"), std::string::npos) << t;
  EXPECT_TRUE(has_line(t, "vapipe_results_total{stream=\"new-door\"} 500")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_results_total{stream=\"broken\"} 500")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_job_streams{state=\"removed\"} 2")) << t;
  const nlohmann::json h = health_json(m);
  EXPECT_FALSE(h["streams"].contains("old-door"));
  EXPECT_TRUE(h["streams"].contains("broken"));
}

// A job that watches folders (streams[].watch_s): each folder's looks and when a file last came, for
// an alert on a recorder that stopped writing (time() minus it); /healthz says how long ago.
// A live job's SIGHUP re-read that has not ended (its config on a share that does not answer): the
// supervisor's mark in the run folder, on /metrics and /healthz.
TEST(Metrics, ALiveJobsReloadUnderWaySaysHowLongItHasRun) {
  const std::string run_dir = ::testing::TempDir() + "vapipe-reload-mark-" + std::to_string(::getpid());
  std::filesystem::create_directories(run_dir);
  JobLayout layout;
  layout.run_dir = run_dir;
  EXPECT_EQ(read_reload_mark(layout), 0);
  write_reload_mark(layout, 1047.5);
  EXPECT_DOUBLE_EQ(read_reload_mark(layout), 1047.5);
  JobMetrics m = two_cameras();  // live, now 1060
  m.reload_running_since_unix_s = read_reload_mark(layout);
  EXPECT_TRUE(has_line(prometheus_text(m), "vapipe_reload_running_seconds 12.5")) << prometheus_text(m);
  EXPECT_DOUBLE_EQ(health_json(m)["reload_running_s"].get<double>(), 12.5);
  remove_reload_mark(layout);
  EXPECT_EQ(read_reload_mark(layout), 0);
  m.reload_running_since_unix_s = 0;
  EXPECT_TRUE(has_line(prometheus_text(m), "vapipe_reload_running_seconds 0"));
  EXPECT_TRUE(health_json(m)["reload_running_s"].is_null());
  m.mode = "archive";  // no reload: no such series
  EXPECT_EQ(prometheus_text(m).find("vapipe_reload_running_seconds"), std::string::npos);
  std::filesystem::remove_all(run_dir);
}

// A live job's last reload (`vapipe run` writes its outcome to the run folder): as Prometheus says its
// own (an alert on `vapipe_config_last_reload_successful == 0`), and on /healthz with why.
TEST(Metrics, ALiveJobsLastReloadSaysWhetherItWasTakenAndWhy) {
  const std::string run_dir = ::testing::TempDir() + "vapipe-reload-outcome-" + std::to_string(::getpid());
  std::filesystem::create_directories(run_dir);
  EXPECT_FALSE(read_reload_outcome(run_dir).has_value());
  JobMetrics m = two_cameras();  // live, now 1060
  const std::string before = prometheus_text(m);  // none yet: successful, as of the job's start
  EXPECT_TRUE(has_line(before, "vapipe_config_last_reload_successful 1")) << before;
  EXPECT_TRUE(has_line(before, "vapipe_config_reloads_total{result=\"refused\"} 0")) << before;
  EXPECT_TRUE(health_json(m)["last_reload"].is_null());
  ReloadOutcome o{3, 1050, false, "job.yaml:12: `batch` changed; ...", 2, 1, 1000};
  ASSERT_TRUE(write_reload_outcome(run_dir, o).ok());
  m.last_reload = read_reload_outcome(run_dir);
  ASSERT_TRUE(m.last_reload.has_value());
  EXPECT_EQ(m.last_reload->number, 3u);
  EXPECT_EQ(m.last_reload->message, o.message);
  const std::string text = prometheus_text(m);
  EXPECT_TRUE(has_line(text, "vapipe_config_last_reload_successful 0")) << text;
  EXPECT_TRUE(has_line(text, "vapipe_config_last_reload_success_timestamp_seconds 1000")) << text;
  EXPECT_TRUE(has_line(text, "vapipe_config_reloads_total{result=\"taken\"} 2")) << text;
  EXPECT_TRUE(has_line(text, "vapipe_config_reloads_total{result=\"refused\"} 1")) << text;
  const nlohmann::json h = health_json(m)["last_reload"];
  EXPECT_EQ(h["taken"], false);
  EXPECT_DOUBLE_EQ(h["age_s"].get<double>(), 10);
  EXPECT_EQ(h["message"], o.message);
  EXPECT_EQ(std::filesystem::status(reload_outcome_path(run_dir)).permissions() & std::filesystem::perms::others_read,
            std::filesystem::perms::none);
  m.mode = "archive";  // no reload: no such series
  EXPECT_EQ(prometheus_text(m).find("vapipe_config_last_reload_successful"), std::string::npos);
  std::filesystem::remove_all(run_dir);
}

TEST(Metrics, WatchedFoldersSayTheirLooksAndWhenAFileLastCame) {
  JobMetrics m = two_cameras();
  m.mode = "archive";
  EXPECT_EQ(prometheus_text(m).find("vapipe_watched_folder"), std::string::npos);
  EXPECT_TRUE(health_json(m)["watched_folders"].is_null());
  m.watches_folders = true;
  m.watched_folders = {FolderWatchStatus{"streams[0]", "/nvr/**/*.mp4", 10, 6, 2, 1, 1058, 0.125, 1030, ""},
                       FolderWatchStatus{"streams[1]", "/mnt/share \"b\"/*.mkv", 30, 2, 0, 0, 1050, 0.5, 1000,
                                         "/mnt/share \"b\" does not exist", 1000}};
  const std::string t = prometheus_text(m);
  EXPECT_TRUE(has_line(t, "# TYPE vapipe_watched_folder_looks_total counter")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_watched_folder_looks_total{folder=\"/nvr/**/*.mp4\"} 6")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_watched_folder_files_total{folder=\"/nvr/**/*.mp4\"} 2")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_watched_folder_files_settling{folder=\"/nvr/**/*.mp4\"} 1")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_watched_folder_last_file_time_seconds{folder=\"/nvr/**/*.mp4\"} 1030")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_watched_folder_last_look_time_seconds{folder=\"/nvr/**/*.mp4\"} 1058")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_watched_folder_last_look_duration_seconds{folder=\"/nvr/**/*.mp4\"} 0.125")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_watched_folder_readable{folder=\"/nvr/**/*.mp4\"} 1")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_watched_folder_readable{folder=\"/mnt/share \\\"b\\\"/*.mkv\"} 0")) << t;
  // A look that has not ended (a share that does not answer), and none running.
  EXPECT_TRUE(has_line(t, "vapipe_watched_folder_look_running_seconds{folder=\"/mnt/share \\\"b\\\"/*.mkv\"} 60")) << t;
  EXPECT_TRUE(has_line(t, "vapipe_watched_folder_look_running_seconds{folder=\"/nvr/**/*.mp4\"} 0")) << t;
  const nlohmann::json h = health_json(m);
  ASSERT_EQ(h["watched_folders"].size(), 2u);
  const nlohmann::json& f = h["watched_folders"][0];
  EXPECT_EQ(f["folder"], "/nvr/**/*.mp4");
  EXPECT_EQ(f["every_s"], 10);
  EXPECT_EQ(f["looks"], 6);
  EXPECT_EQ(f["files_added"], 2);
  EXPECT_EQ(f["files_settling"], 1);
  EXPECT_DOUBLE_EQ(f["last_file_age_s"].get<double>(), 30);
  EXPECT_DOUBLE_EQ(f["last_look_age_s"].get<double>(), 2);
  EXPECT_TRUE(f["error"].is_null());
  EXPECT_EQ(h["watched_folders"][1]["error"], "/mnt/share \"b\" does not exist");
  EXPECT_TRUE(f["look_running_s"].is_null());
  EXPECT_DOUBLE_EQ(h["watched_folders"][1]["look_running_s"].get<double>(), 60);
}

// Files waiting their turn (ingest.max_open_streams) have no duration yet: an archive job counts each
// at the average length of those opened, so the time left is not that of the open ones alone.
TEST(JobProgress, FilesNotOpenedYetCountAtTheAverageLengthOfTheOpenedOnes) {
  JobMetrics m;
  m.mode = "archive";
  m.start_unix_s = 100;
  m.now_unix_s = 110;
  auto stream = [](const std::string& state, double media_s, double position_s) {
    StreamMetrics s;
    s.id = state;
    s.state = state;
    s.media_s = media_s;
    s.position_s = position_s;
    s.ended = state == "done";
    return s;
  };
  m.streams = {stream("done", 10, 10), stream("running", 30, 10), stream("pending", -1, 0), stream("pending", -1, 0)};
  JobProgress p = job_progress(m);
  EXPECT_EQ(p.streams_timed, 2u);
  EXPECT_EQ(p.streams_estimated, 2u);
  EXPECT_DOUBLE_EQ(p.media_s, 80.0);  // 40 s opened, and two more of 20 s each
  EXPECT_DOUBLE_EQ(p.done_s, 20.0);
  EXPECT_DOUBLE_EQ(p.ratio, 0.25);
  EXPECT_DOUBLE_EQ(p.media_per_s, 2.0);  // 20 s of media in 10 s
  EXPECT_DOUBLE_EQ(p.eta_s, 30.0);
  EXPECT_EQ(health_json(m)["progress"]["streams_estimated"], 2);
  m.mode = "live";  // a camera not started yet is not a file of unknown length
  EXPECT_EQ(job_progress(m).streams_estimated, 0u);
  EXPECT_DOUBLE_EQ(job_progress(m).media_s, 40.0);
}

// A running stream whose last result is old (a file whose read has not returned: a share that does
// not answer) is named, the longest quiet first: the job's pace alone would go on promising its end.
TEST(JobProgress, RunningStreamsWithoutAResultFor30sAreNamedLongestFirst) {
  JobMetrics m;
  m.mode = "archive";
  m.start_unix_s = 100;
  m.now_unix_s = 200;
  auto stream = [](const std::string& id, const std::string& state, double last_result_unix_s) {
    StreamMetrics s;
    s.id = id;
    s.state = state;
    s.media_s = 60;
    s.last_result_unix_s = last_result_unix_s;
    s.ended = state == "done";
    return s;
  };
  m.streams = {stream("fresh", "running", 195), stream("stuck", "running", 160), stream("stuck-longer", "running", 120),
               stream("ended", "done", 110), stream("not-yet", "running", 0)};
  const JobProgress p = job_progress(m);
  ASSERT_EQ(p.quiet.size(), 2u);
  EXPECT_EQ(p.quiet[0].first, "stuck-longer");
  EXPECT_DOUBLE_EQ(p.quiet[0].second, 80);
  EXPECT_EQ(p.quiet[1].first, "stuck");
  m.streams[1].last_result_unix_s = 171;  // 29 s: not yet
  EXPECT_EQ(job_progress(m).quiet.size(), 1u);
}

// The summary's steady time: the time some stream had a frame under way, not the gaps between (a
// watched folder's files, seconds or days apart).
TEST(JobSummary, BusySecondsCountOverlapsOnceAndLeaveOutTheGaps) {
  const int64_t s = 1'000'000'000;
  EXPECT_DOUBLE_EQ(busy_seconds({}), 0);
  EXPECT_DOUBLE_EQ(busy_seconds({{10 * s, 14 * s}}), 4);
  // Two at once (an archive job's files opened together): their hull.
  EXPECT_DOUBLE_EQ(busy_seconds({{10 * s, 14 * s}, {11 * s, 16 * s}}), 6);
  // One within another, given out of order.
  EXPECT_DOUBLE_EQ(busy_seconds({{12 * s, 13 * s}, {10 * s, 20 * s}}), 10);
  // A file an hour after the last one ended: 2 s + 3 s, not an hour.
  EXPECT_DOUBLE_EQ(busy_seconds({{3600 * s, 3603 * s}, {10 * s, 12 * s}}), 5);
  // Touching spans join; a stream with a first frame and no later result (or a reversed span) adds nothing.
  EXPECT_DOUBLE_EQ(busy_seconds({{10 * s, 12 * s}, {12 * s, 13 * s}, {20 * s, 20 * s}, {30 * s, 25 * s}}), 3);
}

}  // namespace
}  // namespace vapipe
