// `vapipe status`'s report of a job's /healthz: publish's own document (health_json, through JSON text
// as the network carries it), and documents that are not vapipe's or not whole.
#include "cli/status_report.h"

#include <gtest/gtest.h>

#include "stages/publish/metrics.h"

namespace vapipe::cli {
namespace {

using nlohmann::json;

// As `vapipe status` receives it: publish's document, written and parsed again.
json served(const JobMetrics& m) { return json::parse(health_json(m).dump()); }

JobMetrics archive_job() {
  JobMetrics m;
  m.job = "nightly";
  m.mode = "archive";
  m.start_unix_s = 1000;
  m.now_unix_s = 1250;
  StreamMetrics gate;
  gate.id = "gate";
  gate.state = "running";
  gate.results = 1800;
  gate.dropped = 3;
  gate.undecoded = 41;
  gate.damaged = 230;
  gate.reconnects = 1;
  gate.last_result_unix_s = 1249.5;
  gate.media_s = 120;
  gate.position_s = 60;
  StreamMetrics dock;
  dock.id = "dock";
  dock.state = "done";
  dock.results = 900;
  dock.ended = true;
  dock.media_s = 30;
  m.streams = {gate, dock};
  return m;
}

bool has_line_starting(const std::string& text, const std::string& start) {
  return text.rfind(start, 0) == 0 || text.find("\n" + start) != std::string::npos;
}

TEST(StatusReport, ListsEachStreamOfPublishsDocument) {
  const auto report = status_report(served(archive_job()), "http://h:9100/healthz");
  ASSERT_TRUE(report.ok()) << report.status().message();
  const std::string& r = report.value();
  EXPECT_TRUE(has_line_starting(r, "job 'nightly' (archive), up 4 min 10 s: 2 streams (1 running, 1 done)\n")) << r;
  EXPECT_NE(r.find("\n  gate                     running             1800    0.5 s ago         3           41       230"
                   "         0           1     50.0%\n"),
            std::string::npos)
      << r;
  EXPECT_NE(r.find("\n  dock                     done                 900            -         0            0         0"
                   "         0           0    100.0%\n"),
            std::string::npos)
      << r;
  EXPECT_EQ(r.find("segments"), std::string::npos) << r;  // publish.segments_min_frames unset: no column
  EXPECT_TRUE(has_line_starting(r, "progress: ")) << r;
  EXPECT_EQ(r.back(), '\n');
}

// A stalled stage is said first, and the time left, worked out from a rate that has stopped, is not.
TEST(StatusReport, SaysAStalledStageAndNoTimeLeft) {
  JobMetrics m = archive_job();
  const auto before = status_report(served(m), "http://h:9100/healthz");
  ASSERT_TRUE(before.ok()) << before.status().message();
  EXPECT_NE(before->find(" left\n"), std::string::npos) << before.value();
  EXPECT_EQ(before->find("STALLED"), std::string::npos) << before.value();
  StageStatsSnapshot batch;
  batch.stage = "batch";
  batch.lane = 1;
  batch.written_unix_s = m.now_unix_s - 30;
  m.stages = {batch};
  const auto report = status_report(served(m), "http://h:9100/healthz");
  ASSERT_TRUE(report.ok()) << report.status().message();
  const std::string& r = report.value();
  EXPECT_EQ(r.rfind("STALLED: batch lane 1: no figures for 30 s (it writes them every second: the process is stopped, "
                    "SIGSTOP or a debugger, or frozen)\njob 'nightly' ", 0), 0u)  // first, before the streams
      << r;
  EXPECT_TRUE(has_line_starting(r, "progress: 60.0% of 2 min 30 s of media, time left unknown while stalled\n")) << r;
}

TEST(StatusReport, SaysOpenSegmentsARefusingResultsFileAndWatchedFolders) {
  JobMetrics m = archive_job();
  m.segments = true;
  m.streams[0].open_segments = {{"truck", 1000}, {"person", 1238}};
  m.results_file = ResultsFileHealth{"/data/r.jsonl", false, "/data/r.jsonl cannot be written (No space left on device)",
                                     1200, 42, 7};
  m.watches_folders = true;
  FolderWatchStatus f;
  f.where = "streams[0]";
  f.pattern = "/nvr/**/*.mp4";
  f.watch_s = 60;
  f.files_added = 1;
  f.files_settling = 2;
  f.last_look_unix_s = 1240;
  f.last_look_s = 0.25;
  f.error = "cannot list /nvr (No such file or directory)";
  m.watched_folders = {f};
  m.job_restarts = 2;  // an archive job restarted whole: its streams' own counts stay 0
  const auto report = status_report(served(m), "http://h:9100/healthz");
  ASSERT_TRUE(report.ok()) << report.status().message();
  const std::string& r = report.value();
  EXPECT_NE(r.find("the job restarted 2 times after a stage crashed (see its log)\n"), std::string::npos) << r;
  EXPECT_NE(r.find("  segments\n"), std::string::npos) << r;
  EXPECT_NE(r.find("  truck for 4 min 10 s, person for 12.0 s\n"), std::string::npos) << r;
  EXPECT_NE(r.find("results file REFUSES lines for 50.0 s: /data/r.jsonl cannot be written (No space left on "
                   "device); 42 waiting, 7 lines lost\n"),
            std::string::npos)
      << r;
  EXPECT_NE(r.find("1 file added, 2 files settling, the last file none; looked 10.0 s ago (0.25 s): CANNOT LIST IT: "
                   "cannot list /nvr (No such file or directory)\n"),
            std::string::npos)
      << r;
}

// publish.webhooks: each receiver's figures, and one that cannot be reached says why.
TEST(StatusReport, SaysEachWebhooksFiguresAndOneThatCannotBeReached) {
  JobMetrics m = archive_job();
  WebhookStats up;
  up.index = 0;
  up.origin = "https://ha.local:8123";
  up.delivered = 12;
  up.last_delivered_unix_s = 1240;
  WebhookStats down;
  down.index = 1;
  down.origin = "http://10.0.0.5:5678";
  down.delivered = 3;
  down.queued = 4;
  down.dropped = 2;
  down.failing = true;
  down.failing_since_unix_s = 1130;
  down.last_error = "cannot connect (refused, no route, or a name that does not resolve)";
  m.webhooks = {up, down};
  const auto report = status_report(served(m), "http://h:9100/healthz");
  ASSERT_TRUE(report.ok()) << report.status().message();
  const std::string& r = report.value();
  EXPECT_TRUE(has_line_starting(r, "webhook 0 https://ha.local:8123: 12 delivered, 0 waiting, 0 refused, 0 dropped; "
                                   "last delivered 10.0 s ago; ok\n")) << r;
  EXPECT_TRUE(has_line_starting(r, "webhook 1 http://10.0.0.5:5678: 3 delivered, 4 waiting, 0 refused, 2 dropped; "
                                   "last delivered never; CANNOT DELIVER for 2 min 00 s: cannot connect (refused, no "
                                   "route, or a name that does not resolve)\n")) << r;
}

// publish.mqtt: each broker's figures, and one that is not connected says for how long and why.
TEST(StatusReport, SaysEachMqttBrokersFiguresAndOneThatIsNotConnected) {
  JobMetrics m = archive_job();
  MqttStats up;
  up.index = 0;
  up.broker = "mqtt://homeassistant.local:1883";
  up.connected = true;
  up.delivered = 40;
  up.connections = 1;
  up.last_delivered_unix_s = 1240;
  MqttStats down;
  down.index = 1;
  down.broker = "mqtts://iot.example.com:8883";
  down.delivered = 3;
  down.queued = 9;
  down.dropped = 1;
  down.lost = 2;
  down.disconnected_since_unix_s = 1180;
  down.last_error = "the broker refused the connection: not authorised";
  m.mqtt = {up, down};
  const auto report = status_report(served(m), "http://h:9100/healthz");
  ASSERT_TRUE(report.ok()) << report.status().message();
  const std::string& r = report.value();
  EXPECT_TRUE(has_line_starting(r, "mqtt 0 mqtt://homeassistant.local:1883: 40 delivered, 0 waiting; last delivered "
                                   "10.0 s ago; connected\n")) << r;
  EXPECT_TRUE(has_line_starting(r, "mqtt 1 mqtts://iot.example.com:8883: 3 delivered, 9 waiting, 3 lost (dropped, "
                                   "refused or qos 0); last delivered never; NOT CONNECTED for 1 min 10 s: the broker "
                                   "refused the connection: not authorised\n")) << r;
}

// publish.redis likewise, in /healthz, in vapipe status and on /metrics.
TEST(StatusReport, SaysEachRedisServersFiguresAndOneThatIsNotConnected) {
  JobMetrics m = archive_job();
  RedisStats up;
  up.index = 0;
  up.server = "redis://10.0.0.7:6379";
  up.connected = true;
  up.delivered = 1200;
  up.connections = 1;
  up.last_delivered_unix_s = 1240;
  up.node = "10.0.0.7:6379";
  RedisStats watched = up;  // a master found through Redis Sentinel
  watched.index = 2;
  watched.server = "redis+sentinel://10.0.0.5:26379,10.0.0.6:26379/cache";
  watched.node = "10.0.0.8:6379";
  RedisStats unwatched = watched;  // its sentinel cannot be subscribed to: failovers found late
  unwatched.index = 3;
  unwatched.sentinel_watch_error = "cannot watch sentinel 10.0.0.5:26379 for failovers: no answer from the server within 5 s";
  RedisStats down;
  down.index = 1;
  down.server = "rediss://cache.example.com:6380";
  down.queued = 9;
  down.refused = 1;
  down.disconnected_since_unix_s = 1180;
  down.last_error = "the server refused the password: WRONGPASS invalid username-password pair";
  watched.sentinel_watched = "10.0.0.5:26379";
  m.redis = {up, down, watched, unwatched};
  const auto report = status_report(served(m), "http://h:9100/healthz");
  ASSERT_TRUE(report.ok()) << report.status().message();
  const std::string& r = report.value();
  EXPECT_TRUE(has_line_starting(r, "redis 0 redis://10.0.0.7:6379: 1200 delivered, 0 waiting, 0 refused, 0 dropped; "
                                   "last delivered 10.0 s ago; connected\n")) << r;
  EXPECT_TRUE(has_line_starting(r, "redis 1 rediss://cache.example.com:6380: 0 delivered, 9 waiting, 1 refused, 0 "
                                   "dropped; last delivered never; NOT CONNECTED for 1 min 10 s: the server refused the "
                                   "password: WRONGPASS invalid username-password pair\n")) << r;
  EXPECT_TRUE(has_line_starting(r, "redis 2 redis+sentinel://10.0.0.5:26379,10.0.0.6:26379/cache: 1200 delivered, 0 "
                                   "waiting, 0 refused, 0 dropped; last delivered 10.0 s ago; connected to "
                                   "10.0.0.8:6379\n")) << r;
  EXPECT_TRUE(has_line_starting(r, "redis 3 redis+sentinel://10.0.0.5:26379,10.0.0.6:26379/cache: 1200 delivered, 0 "
                                   "waiting, 0 refused, 0 dropped; last delivered 10.0 s ago; connected to "
                                   "10.0.0.8:6379; FAILOVERS NOT WATCHED: cannot watch sentinel 10.0.0.5:26379 for "
                                   "failovers: no answer from the server within 5 s\n")) << r;
  const nlohmann::json health = health_json(m);
  EXPECT_EQ(health["redis"][2]["sentinel_watched"], "10.0.0.5:26379");
  EXPECT_TRUE(health["redis"][2]["sentinel_watch_error"].is_null());
  EXPECT_TRUE(health["redis"][0]["sentinel_watched"].is_null());
  const std::string metrics = prometheus_text(m);
  EXPECT_NE(metrics.find("vapipe_redis_messages_total{redis=\"0\",server=\"redis://10.0.0.7:6379\",outcome=\"delivered\"} "
                         "1200\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("vapipe_redis_connected{redis=\"1\",server=\"rediss://cache.example.com:6380\"} 0\n"),
            std::string::npos) << metrics;
  EXPECT_NE(metrics.find("vapipe_redis_sentinel_watched{redis=\"2\",server=\"redis+sentinel://10.0.0.5:26379,"
                         "10.0.0.6:26379/cache\"} 1\nvapipe_redis_sentinel_watched{redis=\"3\",server=\"redis+sentinel://"
                         "10.0.0.5:26379,10.0.0.6:26379/cache\"} 0\n"),
            std::string::npos) << metrics;
  EXPECT_EQ(metrics.find("vapipe_redis_sentinel_watched{redis=\"0\""), std::string::npos) << "not a sentinel's";
}

// publish.kafka likewise.
TEST(StatusReport, SaysEachKafkaClustersFiguresAndOneThatCannotBeReached) {
  JobMetrics m = archive_job();
  KafkaStats up;
  up.index = 0;
  up.cluster = "kafka://10.0.0.7:9092,10.0.0.8:9092";
  up.connected = true;
  up.delivered = 1200;
  up.producers = 1;
  up.last_delivered_unix_s = 1240;
  KafkaStats down;
  down.index = 1;
  down.cluster = "kafkas://kafka.example.com:9093";
  down.queued = 9;
  down.refused = 1;
  down.dropped = 2;
  down.disconnected_since_unix_s = 1180;
  down.last_error = "1/1 brokers are down";
  m.kafka = {up, down};
  const auto report = status_report(served(m), "http://h:9100/healthz");
  ASSERT_TRUE(report.ok()) << report.status().message();
  const std::string& r = report.value();
  EXPECT_TRUE(has_line_starting(r, "kafka 0 kafka://10.0.0.7:9092,10.0.0.8:9092: 1200 delivered, 0 waiting, 0 refused, "
                                   "0 dropped; last delivered 10.0 s ago; connected\n")) << r;
  EXPECT_TRUE(has_line_starting(r, "kafka 1 kafkas://kafka.example.com:9093: 0 delivered, 9 waiting, 1 refused, 2 "
                                   "dropped; last delivered never; NOT CONNECTED for 1 min 10 s: 1/1 brokers are "
                                   "down\n")) << r;
  const std::string metrics = prometheus_text(m);
  EXPECT_NE(metrics.find("vapipe_kafka_messages_total{kafka=\"0\",cluster=\"kafka://10.0.0.7:9092,10.0.0.8:9092\","
                         "outcome=\"delivered\"} 1200\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("vapipe_kafka_messages_total{kafka=\"1\",cluster=\"kafkas://kafka.example.com:9093\","
                         "outcome=\"dropped\"} 2\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("vapipe_kafka_connected{kafka=\"1\",cluster=\"kafkas://kafka.example.com:9093\"} 0\n"),
            std::string::npos) << metrics;
  EXPECT_NE(metrics.find("vapipe_kafka_queued{kafka=\"1\",cluster=\"kafkas://kafka.example.com:9093\"} 9\n"),
            std::string::npos) << metrics;
}

// publish.metrics_token_file and no token: /healthz says only {"status": "ok"}.
TEST(StatusReport, WithoutTheTokenSaysOnlyTheJobsStatus) {
  const auto report = status_report(json::parse(R"({"service":"vapipe","status":"ok"})"), "http://h:9100/healthz");
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report.value(), "job is ok (its streams need the metrics token: --token-file FILE)\n");
  const auto stalled = status_report(json::parse(R"({"service":"vapipe","status":"stalled"})"), "http://h:9100/healthz");
  ASSERT_TRUE(stalled.ok());
  EXPECT_EQ(stalled.value(), "job is stalled (its streams need the metrics token: --token-file FILE)\n");
  // Another program's health check: not taken for a job.
  const auto foreign = status_report(json::parse(R"({"status":"ok"})"), "http://h:9100/healthz");
  ASSERT_FALSE(foreign.ok());
  EXPECT_EQ(foreign.status().message().rfind("http://h:9100/healthz: not a vapipe job's /healthz (it says its status, "
                                             "\"ok\", but not \"service\": \"vapipe\"", 0), 0u)
      << foreign.status().message();
}

// The job's last reload: a refused one says why (the file as edited is not what runs); a taken one
// what it changed.
TEST(StatusReport, TheLastReloadSaysWhetherItWasRefusedAndWhy) {
  json h = json::parse(R"({"job": "gate", "mode": "live", "uptime_s": 100, "streams": {},
                           "last_reload": {"taken": false, "age_s": 125, "message": "job.yaml:4: `batch` changed",
                                           "taken_total": 1, "refused_total": 1}})");
  auto report = status_report(h, "http://h:9100/healthz");
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_NE(report->find("last reload REFUSED 2 min 05 s ago, nothing changed: job.yaml:4: `batch` changed\n"),
            std::string::npos)
      << *report;
  h["last_reload"]["taken"] = true;
  h["last_reload"]["message"] = "added 'yard'; removed none";
  report = status_report(h, "http://h:9100/healthz");
  ASSERT_TRUE(report.ok());
  EXPECT_NE(report->find("last reload 2 min 05 s ago: added 'yard'; removed none\n"), std::string::npos) << *report;
}

// Each lane's model, with its reloads: one being loaded, one that could not be used (and why).
TEST(StatusReport, SaysEachLanesModelAndAReloadsModelThatCouldNotBeUsed) {
  const json h = json::parse(R"({"job": "gate", "mode": "live", "uptime_s": 100, "streams": {},
      "models": [{"lane": 0, "model": "door-v2", "model_file": "/m/door-v2.pt", "model_reloads": 1,
                  "model_file_modified": "2026-12-05T15:02:54Z",
                  "model_reload_failures": 1, "loading": null,
                  "last_reload_error": "model /m/x.pt is not a TorchScript model"},
                 {"lane": 1, "model": "door-v1", "model_file": "/m/door-v1.pt", "model_reloads": 0,
                  "model_reload_failures": 0, "loading": "/m/door-v2.pt", "last_reload_error": null}]})");
  auto report = status_report(h, "http://h:9100/healthz");
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_NE(report->find("model (lane 0): 'door-v2' (/m/door-v2.pt, written 2026-12-05T15:02:54Z); reloads: 1 taken, 1 "
                         "could not be used\n"
                         "  the last reload's model COULD NOT BE USED (this one goes on): model /m/x.pt is not a "
                         "TorchScript model\n"),
            std::string::npos)
      << *report;
  EXPECT_NE(report->find("model (lane 1): 'door-v1' (/m/door-v1.pt); LOADING /m/door-v2.pt\n"), std::string::npos)
      << *report;
}

// Another program on that port, or a document another version wrote: an error that names the URL, or
// a report with "-" for what it lacks, never an exception.
TEST(StatusReport, ADocumentThatIsNotVapipesIsAnErrorNamingTheUrl) {
  for (const char* body : {"[1, 2]", "\"ok\"", "{}", R"({"streams": [1, 2]})", R"({"health": "green"})"}) {
    const auto report = status_report(json::parse(body), "http://h:9100/healthz");
    ASSERT_FALSE(report.ok()) << body;
    EXPECT_NE(report.status().message().find("http://h:9100/healthz: not a vapipe job's /healthz"), std::string::npos)
        << report.status().message();
  }
}

TEST(StatusReport, FieldsOfOtherTypesAreLeftOut) {
  const json h = json::parse(R"({
    "job": 5, "mode": null, "uptime_s": "long", "stream_states": [1, 2],
    "streams": {"a": 7, "b": {"state": ["x"], "results": "many", "last_result_age_s": "soon", "progress": {},
                                "segments": "truck", "dropped": -4, "restarts": 1.5},
                "c\u001b[31m": {"segments": [3, {"label": 4, "for_s": "x"}]}},
    "progress": {"ratio": "half", "eta_s": 1e300},
    "results_file": {"writable": "no", "lines_lost": -1},
    "reload_running_s": "5",
    "watched_folders": [1, {"folder": [], "files_added": "2", "look_running_s": 1e12}]
  })");
  const auto report = status_report(h, "http://h:9100/healthz");
  ASSERT_TRUE(report.ok()) << report.status().message();
  const std::string& r = report.value();
  EXPECT_TRUE(has_line_starting(r, "job '' (), up 0.0 s: 3 streams\n")) << r;
  EXPECT_NE(r.find("\n  b                                            many            -        -4            -         -         2"
                   "           -"),
            std::string::npos)
      << r;
  EXPECT_NE(r.find("c?[31m"), std::string::npos) << r;  // no terminal escape from a foreign server
  EXPECT_NE(r.find("  ? for 0.0 s\n"), std::string::npos) << r;
  EXPECT_NE(r.find("about "), std::string::npos) << r;  // a huge ETA is still a duration
  EXPECT_NE(r.find("a look RUNNING FOR "), std::string::npos) << r;
}

}  // namespace
}  // namespace vapipe::cli
