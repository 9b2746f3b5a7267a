#include "pipeline/stream_table.h"

#include <cstdint>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "pipeline/running_job.h"
#include "pipeline/stage.h"

#include "tests/fakes/live_yaml.h"

namespace vapipe {
namespace {

using testing::live_yaml;

Config load(const std::string& yaml) {
  auto c = load_config_string(yaml, "job.yaml", "/cfg");
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : Config{};
}

StreamTable table_for(const std::string& yaml, size_t lanes) {
  const Config c = load(yaml);
  Placement p;
  for (uint32_t l = 0; l < lanes; ++l) {
    Lane lane;
    lane.index = l;
    p.lanes.push_back(lane);
  }
  for (uint32_t s = 0; s < c.streams.size(); ++s) p.lanes[s % lanes].streams.push_back(s);
  return initial_stream_table(c, p);
}

TEST(StreamTable, AReloadRemovesMissingStreamsAndAddsNewOnesOnTheLeastLoadedLaneWithStableIndices) {
  const std::string running = live_yaml({{"a", "ball"}, {"b", "smpte"}, {"c", "snow"}});
  StreamTable table = table_for(running, 2);  // lane 0: a, c; lane 1: b
  // b goes (lane 1 is then empty), d and e come: both on lane 1 (2 and 0, then 2 and 1 streams), and
  // f on lane 0 (a tie goes to the lowest lane).
  const std::string reloaded =
      live_yaml({{"c", "snow"}, {"d", "red"}, {"a", "ball"}, {"e", "blue"}, {"f", "green"}});
  auto change = apply_stream_reload(table, running, reloaded, load(reloaded), 2);
  ASSERT_TRUE(change.ok()) << change.status().message();
  EXPECT_EQ(change->removed, std::vector<std::string>{"b"});
  EXPECT_EQ(change->added, (std::vector<std::string>{"d", "e", "f"}));
  EXPECT_EQ(change->added_lanes, (std::vector<uint32_t>{1, 1, 0}));
  EXPECT_EQ(table.version, 1u);
  ASSERT_EQ(table.entries.size(), 6u);
  EXPECT_EQ(table.entries[0].id, "a");  // a keeps index 0 though it moved in the file
  EXPECT_FALSE(table.entries[0].removed);
  EXPECT_TRUE(table.entries[1].removed);
  EXPECT_EQ(table.entries[3].id, "d");
  EXPECT_EQ(table.entries[3].index, 3u);
  EXPECT_EQ(table.entries[3].uri, "test://red?frames=0&live=true");
  EXPECT_EQ(table.live_streams(), 5u);

  // The same file again changes no stream, but is a new version: ingest starts again the cameras
  // that have ended (gave up) at every reload.
  auto again = apply_stream_reload(table, running, reloaded, load(reloaded), 2);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->changed());
  EXPECT_EQ(table.version, 2u);
  EXPECT_EQ(table.entries.size(), 6u);
}

// A camera removed by one reload and listed by a later one comes back under its id: its index and
// lane, and the settings it is listed with; a file cannot (it would be read again from its start),
// nor a region stream whose source is not listed.
TEST(StreamTable, ACameraRemovedEarlierComesBackUnderItsIdIndexAndLane) {
  auto live_with = [](const std::string& stream_lines) {
    return "job: {mode: live}\nstreams:\n" + stream_lines + "infer: {model: m.pt, labels: m.txt}\n";
  };
  auto camera = [](const std::string& id, const std::string& pattern) {
    return "  - {id: " + id + ", uri: \"test://" + pattern + "?frames=0&live=true\"}\n";
  };
  const std::string running =
      live_with(camera("a", "ball") + camera("b", "smpte") + "  - {id: b-left, source: b, roi: [0, 0, 0.5, 1]}\n");
  StreamTable table = table_for(running, 2);  // lane 0: a, b-left; lane 1: b
  table.entries[2].lane = 1;                   // (a member is on its source's lane)
  const std::string without_b = live_with(camera("a", "ball"));
  auto removed = apply_stream_reload(table, running, without_b, load(without_b), 2);
  ASSERT_TRUE(removed.ok()) << removed.status().message();
  EXPECT_EQ(removed->removed, (std::vector<std::string>{"b", "b-left"}));

  // The region cannot come back with another source.
  const std::string other_source =
      live_with(camera("a", "ball") + camera("c", "red") + "  - {id: b-left, source: c}\n");
  auto refused = apply_stream_reload(table, running, other_source, load(other_source), 2);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("stream 'b-left' was removed earlier in this run with another source ('b')"),
            std::string::npos)
      << refused.status().message();

  const std::string back =
      live_with(camera("a", "ball") + camera("b", "snow") + "  - {id: b-left, source: b, roi: [0, 0, 0.25, 1]}\n");
  const uint64_t version = table.version;
  auto change = apply_stream_reload(table, running, back, load(back), 2);
  ASSERT_TRUE(change.ok()) << change.status().message();
  EXPECT_EQ(change->returned, (std::vector<std::string>{"b", "b-left"}));
  EXPECT_TRUE(change->added.empty());
  EXPECT_TRUE(change->changed());
  EXPECT_EQ(table.version, version + 1);
  ASSERT_EQ(table.entries.size(), 3u);  // no new entry: the same index
  EXPECT_FALSE(table.entries[1].removed);
  EXPECT_EQ(table.entries[1].lane, 1u);
  EXPECT_EQ(table.entries[1].uri, "test://snow?frames=0&live=true");  // as listed now
  EXPECT_FALSE(table.entries[2].removed);
  EXPECT_EQ(table.entries[2].lane, 1u);
  EXPECT_EQ(table.entries[2].roi, (std::array<double, 4>{0, 0, 0.25, 1}));
  EXPECT_EQ(table.live_streams(), 3u);

  // A file's stream, removed, cannot come back under its id.
  const std::string with_file = live_with(camera("a", "ball") + "  - {id: f, uri: /media/f.mp4}\n");
  StreamTable files = table_for(with_file, 1);
  ASSERT_TRUE(apply_stream_reload(files, with_file, without_b, load(without_b), 1).ok());
  auto file_back = apply_stream_reload(files, with_file, with_file, load(with_file), 1);
  ASSERT_FALSE(file_back.ok());
  EXPECT_NE(file_back.status().message().find("stream 'f' was removed earlier in this run, and a file's stream "
                                              "cannot come back"),
            std::string::npos)
      << file_back.status().message();
}

TEST(StreamTable, WhatCannotChangeWhileTheJobRunsIsRefusedAndNothingIsApplied) {
  const std::string running = live_yaml({{"a", "ball"}, {"b", "smpte"}});
  StreamTable table = table_for(running, 1);
  auto refused = [&](const std::string& reloaded) {
    const StreamTable before = table;
    auto r = apply_stream_reload(table, running, reloaded, load(reloaded), 1);
    EXPECT_EQ(table.version, before.version);
    EXPECT_EQ(table.entries.size(), before.entries.size());
    return r.ok() ? std::string("(applied)") : r.status().message();
  };
  EXPECT_NE(refused(live_yaml({{"a", "ball"}, {"c", "red"}}, "batch: {max_batch_size: 4}\n")).find("`batch` changed"),
            std::string::npos);
  // An archive job (every stream ends by itself).
  const std::string archive = "streams: [{id: a, uri: 'test://ball?frames=5'}]\ninfer: {model: m.pt, labels: m.txt}\n";
  EXPECT_NE(refused(archive).find("only a live job's streams can change"), std::string::npos);
  // Of `publish`, the bus's address needs a restart (its outputs do not: below).
  EXPECT_NE(refused(live_yaml({{"a", "ball"}, {"c", "red"}}, "publish: {endpoint: 'tcp://127.0.0.1:5999'}\n"))
                .find("`publish.endpoint` changed"),
            std::string::npos);
}

// A reload that adds a webhook and changes a segments' setting passes, with its streams' changes, and
// says what it changes of publish (which the job's publish then takes: pipeline/publish_reload.h).
TEST(StreamTable, AReloadOfPublishsOutputsPassesWithTheStreamsAndSaysWhatChanged) {
  const std::string hook = "    - {url: 'http://127.0.0.1:9/a', topics: [events/]}\n";
  const std::string running = live_yaml({{"a", "ball"}}, "publish:\n  segments_min_frames: 3\n  webhooks:\n" + hook);
  StreamTable table = table_for(running, 1);
  const std::string reloaded = live_yaml(
      {{"a", "ball"}, {"b", "red"}},
      "publish:\n  segments_min_frames: 5\n  webhooks:\n    - {url: 'http://127.0.0.1:9/b', topics: [segments/]}\n" +
          hook);
  auto change = apply_stream_reload(table, running, reloaded, load(reloaded), 1);
  ASSERT_TRUE(change.ok()) << change.status().message();
  EXPECT_EQ(change->added, std::vector<std::string>{"b"});
  ASSERT_EQ(change->publish.webhooks.kept_from.size(), 2u);
  EXPECT_FALSE(change->publish.webhooks.kept_from[0].has_value());
  EXPECT_EQ(change->publish.webhooks.kept_from[1], std::optional<size_t>(0));
  EXPECT_EQ(change->publish.segment_keys, std::vector<std::string>{"segments_min_frames"});
  // A reload that changes publish alone passes too, and changes no stream.
  const std::string publish_alone = live_yaml({{"a", "ball"}, {"b", "red"}}, "publish: {segments_min_frames: 5}\n");
  auto alone = apply_stream_reload(table, reloaded, publish_alone, load(publish_alone), 1);
  ASSERT_TRUE(alone.ok()) << alone.status().message();
  EXPECT_FALSE(alone->changed());
  EXPECT_TRUE(alone->publish.changed());
  EXPECT_EQ(alone->publish.webhooks.removed, (std::vector<size_t>{0, 1}));
}

// log.level changes with a reload (every process of the job takes it: pipeline/logging.h).
TEST(StreamTable, AReloadOfTheLogLevelPassesAndSaysTheLevel) {
  const std::string running = live_yaml({{"a", "ball"}});
  StreamTable table = table_for(running, 1);
  const std::string debug = live_yaml({{"a", "ball"}}, "log: {level: debug}\n");
  auto change = apply_stream_reload(table, running, debug, load(debug), 1);
  ASSERT_TRUE(change.ok()) << change.status().message();
  EXPECT_EQ(change->log_level, std::optional<std::string>("debug"));
  EXPECT_FALSE(change->changed());
  EXPECT_EQ(describe_settings_reload(*change), "log.level debug");
  // Back to the default by removing the section: the level is the default's.
  auto back = apply_stream_reload(table, debug, running, load(running), 1);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->log_level, std::optional<std::string>("info"));
  // The same level written another way is no change.
  const std::string same = live_yaml({{"a", "ball"}}, "log:\n  level: 'debug'\n");
  auto unchanged = apply_stream_reload(table, debug, same, load(same), 1);
  ASSERT_TRUE(unchanged.ok());
  EXPECT_FALSE(unchanged->log_level.has_value());
}

// A reload of infer's model: taken (infer loads it beside the running one), said, and no stream
// changes; a setting of infer that needs a restart is refused, the table as it was.
TEST(StreamTable, AReloadOfTheModelIsTakenAndInfersOtherSettingsAreRefused) {
  auto job = [](const std::string& infer) {
    return "job: {mode: live}\nstreams:\n  - {id: gate, uri: \"rtsp://10.0.0.5/stream1\"}\ninfer: {" + infer + "}\n";
  };
  const std::string dir = ::testing::TempDir() + "vapipe-model-reload-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/m2.pt") << "a model";
  std::ofstream(dir + "/m2.txt") << "a\n";
  const std::string running = job("model: m.pt, labels: m.txt");
  StreamTable table = table_for(running, 1);
  // A new model file that is not there: refused now, naming it and its line (infer could only say so later).
  const std::string missing = job("model: " + dir + "/m3.pt, labels: m.txt");
  auto absent = apply_stream_reload(table, running, missing, load(missing), 1);
  ASSERT_FALSE(absent.ok());
  EXPECT_EQ(absent.status().message(), "job.yaml:4: infer.model: " + dir + "/m3.pt: file not found (the running model "
                                       "goes on)");
  EXPECT_EQ(table.version, 0u);
  const std::string newer = job("model: " + dir + "/m2.pt, labels: " + dir + "/m2.txt, top_k: 1");
  auto change = apply_stream_reload(table, running, newer, load(newer), 1);
  ASSERT_TRUE(change.ok()) << change.status().message();
  EXPECT_FALSE(change->changed());  // no stream
  EXPECT_TRUE(settings_changed(*change));
  EXPECT_EQ(change->infer.keys, (std::vector<std::string>{"labels", "model", "top_k"}));
  EXPECT_EQ(describe_settings_reload(*change), "infer.labels, infer.model, infer.top_k changed");
  EXPECT_EQ(table.version, 1u);
  const std::string moved = job("model: " + dir + "/m2.pt, labels: " + dir + "/m2.txt, top_k: 1, batch_shapes: padded");
  auto refused = apply_stream_reload(table, newer, moved, load(moved), 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("`infer.batch_shapes` changed; of `infer`, a running job takes only model"),
            std::string::npos)
      << refused.status().message();
  EXPECT_EQ(table.version, 1u);
  const std::string batch = "job: {mode: live}\nstreams:\n  - {id: gate, uri: \"rtsp://10.0.0.5/stream1\"}\n"
                            "infer: {model: " + dir + "/m2.pt, labels: " + dir + "/m2.txt, top_k: 1}\n"
                            "batch: {max_batch_size: 2}\n";
  auto section = apply_stream_reload(table, newer, batch, load(batch), 1);
  ASSERT_FALSE(section.ok());
  EXPECT_NE(section.status().message().find("`batch` changed; only `streams`, `log` and some of `publish`, `ingest` "
                                            "and `infer` can change"),
            std::string::npos)
      << section.status().message();
  std::filesystem::remove_all(dir);
}

// ingest's sampling, jitter buffer and reconnection change with a reload: the streams that decode with
// a changed setting (they set none of their own) take it, and are said. A new max_fps, keyframes_only
// or jitter buffer is taken as the connection goes on, by a file's stream too (nothing of it is read
// again).
TEST(StreamTable, AReloadOfIngestsSettingsRetunesTheStreamsThatTakeThem) {
  auto job = [](const std::string& ingest, const std::string& loop_settings) {
    return "job: {mode: live}\nstreams:\n"
           "  - {id: gate, uri: \"rtsp://10.0.0.5/stream1\"}\n"
           "  - {id: door, uri: \"rtsp://10.0.0.6/stream1\", max_fps: 2, rtsp_latency_ms: 100}\n"
           "  - {id: mjpeg, uri: \"http://10.0.0.7/video\"}\n"
           "  - {id: gate-left, source: gate, roi: [0, 0, 0.5, 1]}\n"
           "  - {id: loop, uri: \"/media/loop.mp4\"" + loop_settings + "}\n"
           "infer: {model: m.pt, labels: m.txt}\n" + ingest;
  };
  const std::string running = job("", "");
  StreamTable table = table_for(running, 2);
  auto refused = [&](const std::string& was, const std::string& reloaded) {
    const StreamTable before = table;
    auto r = apply_stream_reload(table, was, reloaded, load(reloaded), 2);
    EXPECT_EQ(table.version, before.version);
    return r.ok() ? std::string("(applied)") : r.status().message();
  };
  const std::string sampled = job("ingest: {max_fps: 5, rtsp_latency_ms: 400, reconnect_attempts: 3}\n", "");
  const StreamTable as_started = table;
  auto change = apply_stream_reload(table, running, sampled, load(sampled), 2);
  ASSERT_TRUE(change.ok()) << change.status().message();
  EXPECT_EQ(change->retuned, (std::vector<std::string>{"gate", "mjpeg", "loop"}));
  EXPECT_EQ(change->retuned_connects, (std::vector<bool>{false, false, false}));
  EXPECT_EQ(change->retuned_what,
            (std::vector<std::string>{"max_fps (ingest.max_fps), rtsp_latency_ms (ingest.rtsp_latency_ms)",
                                      "max_fps (ingest.max_fps)", "max_fps (ingest.max_fps)"}));
  EXPECT_EQ(change->ingest.keys, (std::vector<std::string>{"max_fps", "rtsp_latency_ms", "reconnect_attempts"}));
  EXPECT_TRUE(settings_changed(*change));
  EXPECT_NE(describe_reload(*change, 2).find(
                "changed 'gate' (max_fps (ingest.max_fps), rtsp_latency_ms (ingest.rtsp_latency_ms)), 'mjpeg' "
                "(max_fps (ingest.max_fps)), 'loop' (max_fps (ingest.max_fps)); ingest.max_fps, "
                "ingest.rtsp_latency_ms, ingest.reconnect_attempts changed"),
            std::string::npos)
      << describe_reload(*change, 2);
  EXPECT_EQ(table.entries[0].max_fps, -1);  // the camera's own setting stays unset: it takes the job's
  // None needs a new connection: gate takes its jitter buffer, all three their 5 frames/s, as they go.
  const IngestConfig was = load(running).ingest, now = load(sampled).ingest;
  EXPECT_EQ(connection_settings_changed(as_started.entries[0], table.entries[0], was, now), "");
  EXPECT_EQ(resolved_entry(table.entries[0], now).rtsp_latency_ms, std::optional<uint32_t>(400));
  EXPECT_FALSE(settings_need_new_connection(as_started.entries[2], table.entries[2], was, now));
  EXPECT_FALSE(settings_need_new_connection(as_started.entries[4], table.entries[4], was, now));
  EXPECT_EQ(resolved_entry(table.entries[4], now).max_fps, 5);
  // An own value written as the job's value it took is no change.
  const std::string own_as_taken = job("ingest: {max_fps: 5, rtsp_latency_ms: 400, reconnect_attempts: 3}\n", ", max_fps: 5");
  auto same = apply_stream_reload(table, sampled, own_as_taken, load(own_as_taken), 2);
  ASSERT_TRUE(same.ok()) << same.status().message();
  EXPECT_TRUE(same->retuned.empty());
  EXPECT_EQ(table.entries[4].max_fps, 5);

  // Reconnection alone: no stream is retuned.
  const std::string patient = job("ingest: {max_fps: 5, rtsp_latency_ms: 400, reconnect_attempts: 0}\n", ", max_fps: 5");
  auto reconnection = apply_stream_reload(table, own_as_taken, patient, load(patient), 2);
  ASSERT_TRUE(reconnection.ok()) << reconnection.status().message();
  EXPECT_TRUE(reconnection->retuned.empty());
  EXPECT_EQ(describe_settings_reload(*reconnection), "ingest.reconnect_attempts changed");

  // Key frames only: every stream that sets none of its own (door sets its max_fps only), the file too.
  const std::string key_frames = job("ingest: {max_fps: 5, rtsp_latency_ms: 400, keyframes_only: true}\n", ", max_fps: 5");
  auto kept = apply_stream_reload(table, patient, key_frames, load(key_frames), 2);
  ASSERT_TRUE(kept.ok()) << kept.status().message();
  EXPECT_EQ(kept->retuned, (std::vector<std::string>{"gate", "door", "mjpeg", "loop"}));
  EXPECT_EQ(kept->retuned_what.back(), "keyframes_only (ingest.keyframes_only)");

  // Any other ingest setting needs a restart, named with its line.
  const std::string decoder = job("ingest: {max_fps: 5, decoder: cpu}\n", ", max_fps: 5");
  EXPECT_NE(refused(key_frames, decoder).find("job.yaml:9: `ingest.decoder` changed; of `ingest`, a running job takes only"),
            std::string::npos);
}

// Anchors under x- keys: an edit there is judged by what it changes where it is merged (a section
// that merges it has changed; streams that merge it are compared as streams), not as a section itself.
TEST(StreamTable, AnAnchorUnderAnXKeyIsJudgedWhereItIsMerged) {
  const std::string running = "x-common: &common {max_batch_size: 8}\nx-note: &note {a: 1}\n" +
                              live_yaml({{"a", "ball"}}, "batch: {<<: *common}\n");
  StreamTable table = table_for(running, 1);
  std::string note_edited = running;
  note_edited.replace(note_edited.find("{a: 1}"), 6, "{a: 2}");
  EXPECT_TRUE(apply_stream_reload(table, running, note_edited, load(note_edited), 1).ok());
  std::string batch_edited = running;
  batch_edited.replace(batch_edited.find("max_batch_size: 8"), 17, "max_batch_size: 4");
  auto refused = apply_stream_reload(table, running, batch_edited, load(batch_edited), 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("`batch` changed"), std::string::npos) << refused.status().message();
}

TEST(StreamTable, IsWrittenPrivatelyAndReadsBack) {
  const auto dir = std::filesystem::temp_directory_path() / ("vapipe-stream-table-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "streams.json").string();
  auto none = read_stream_table(path);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  StreamTable t = table_for(live_yaml({{"a", "ball"}, {"b", "smpte"}}), 2);
  t.version = 7;
  t.entries[1].removed = true;
  ASSERT_TRUE(write_stream_table(t, path).ok());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);  // URIs may carry camera passwords
  auto back = read_stream_table(path);
  ASSERT_TRUE(back.ok() && back->has_value()) << back.status().message();
  EXPECT_EQ((*back)->version, 7u);
  EXPECT_EQ((*back)->writer_pid, getpid());
  // A stage process takes only its parent's table: a table another process left is stale.
  auto stale = read_job_stream_table(path);
  ASSERT_TRUE(stale.ok());
  EXPECT_FALSE(stale->has_value());
  t.writer_pid = getppid();
  ASSERT_TRUE(write_stream_table(t, path).ok());
  auto ours = read_job_stream_table(path);
  ASSERT_TRUE(ours.ok() && ours->has_value());
  ASSERT_EQ((*back)->entries.size(), 2u);
  EXPECT_EQ((*back)->entries[1].id, "b");
  EXPECT_EQ((*back)->entries[1].lane, 1u);
  EXPECT_TRUE((*back)->entries[1].removed);
  auto stream = stream_config_of((*back)->entries[0]);
  ASSERT_TRUE(stream.ok());
  EXPECT_EQ(stream->parsed.kind, UriKind::kTest);
  EXPECT_EQ(stream->parsed.test.pattern, "ball");
  std::filesystem::remove_all(dir);
}

// streams[].max_fps and roi travel with the stream: in the table (so a restarted lane, and a stream a reload
// adds, sample as configured); a reload that changes them for a running stream changes its entry in
// place (index and lane kept), and says what changed.
TEST(StreamTable, AStreamsOwnMaxFpsAndRoiTravelWithItAndChangeInPlaceWithAReload) {
  const std::string running = "job: {mode: live}\nstreams:\n"
                              "  - {id: a, uri: \"test://ball?frames=0&live=true\", max_fps: 2}\n"
                              "  - {id: b, uri: \"test://smpte?frames=0&live=true\"}\n"
                              "infer: {model: m.pt, labels: m.txt}\n";
  StreamTable table = table_for(running, 1);
  ASSERT_EQ(table.entries.size(), 2u);
  EXPECT_EQ(table.entries[0].max_fps, 2);
  EXPECT_EQ(table.entries[1].max_fps, -1);  // the job's ingest.max_fps
  const auto dir = std::filesystem::temp_directory_path() / ("vapipe-stream-table-fps-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(write_stream_table(table, (dir / "t.json").string()).ok());
  auto back = read_stream_table((dir / "t.json").string());
  ASSERT_TRUE(back.ok() && back->has_value());
  auto a = stream_config_of((*back)->entries[0]);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->max_fps, 2);

  std::string changed = running;
  changed.replace(changed.find("max_fps: 2"), 10, "max_fps: 5");
  const StreamTableEntry before = table.entries[0];
  auto faster = apply_stream_reload(table, running, changed, load(changed), 1);
  ASSERT_TRUE(faster.ok()) << faster.status().message();
  EXPECT_EQ(faster->retuned, std::vector<std::string>{"a"});
  EXPECT_EQ(faster->retuned_what, std::vector<std::string>{"max_fps"});
  EXPECT_TRUE(faster->added.empty() && faster->removed.empty());
  EXPECT_EQ(table.version, 1u);
  EXPECT_EQ(table.entries[0].max_fps, 5);
  EXPECT_EQ(table.entries[0].index, 0u);
  EXPECT_EQ(table.entries[0].lane, before.lane);
  EXPECT_FALSE(settings_need_new_connection(before, table.entries[0]));  // sampled so as it goes
  EXPECT_EQ(table.entries[1].max_fps, -1);  // b untouched
  // The same file again changes no stream (a new version all the same).
  const std::vector<StreamTableEntry> entries_before = table.entries;
  auto same = apply_stream_reload(table, running, changed, load(changed), 1);
  ASSERT_TRUE(same.ok());
  EXPECT_FALSE(same->changed());
  EXPECT_EQ(table.version, 2u);
  EXPECT_EQ(table.entries[0].max_fps, entries_before[0].max_fps);
  EXPECT_EQ(table.entries[0].roi, entries_before[0].roi);
  std::string cropped = changed;  // a region given to a running stream: from its next frame, no new connection
  cropped.replace(cropped.find("max_fps: 5"), 10, "max_fps: 5, roi: [0, 0, 0.5, 0.5]");
  const StreamTableEntry whole = table.entries[0];
  auto region = apply_stream_reload(table, running, cropped, load(cropped), 1);
  ASSERT_TRUE(region.ok()) << region.status().message();
  EXPECT_EQ(region->retuned_what, std::vector<std::string>{"roi"});
  EXPECT_EQ(table.entries[0].roi, (std::array<double, 4>{0, 0, 0.5, 0.5}));
  EXPECT_FALSE(settings_need_new_connection(whole, table.entries[0]));
  EXPECT_EQ(changed_settings(before, table.entries[0]), "max_fps, roi");
  std::string added = running;
  added.replace(added.find("infer:"), 0,
                "  - {id: c, uri: \"test://red?frames=0&live=true\", max_fps: 0.5, roi: [0.25, 0.25, 0.5, 0.5]}\n");
  ASSERT_TRUE(apply_stream_reload(table, running, added, load(added), 1).ok());
  ASSERT_EQ(table.entries.size(), 3u);
  EXPECT_EQ(table.entries[2].max_fps, 0.5);
  EXPECT_EQ(table.entries[2].roi, (std::array<double, 4>{0.25, 0.25, 0.5, 0.5}));
  ASSERT_TRUE(write_stream_table(table, (dir / "t.json").string()).ok());
  auto again = read_stream_table((dir / "t.json").string());
  ASSERT_TRUE(again.ok() && again->has_value());
  EXPECT_EQ(stream_config_of((*again)->entries[2])->roi, (std::array<double, 4>{0.25, 0.25, 0.5, 0.5}));
  std::filesystem::remove_all(dir);
}

// streams[].keyframes_only and rtsp_latency_ms the same way; unset stays unset (the job's setting).
TEST(StreamTable, AStreamsOwnKeyframesOnlyAndJitterBufferTravelWithItAndChangeWithAReload) {
  const std::string running = "job: {mode: live}\nstreams:\n"
                              "  - {id: a, uri: \"test://ball?frames=0&live=true\", keyframes_only: true, rtsp_latency_ms: 500}\n"
                              "  - {id: b, uri: \"test://smpte?frames=0&live=true\"}\n"
                              "ingest: {keyframes_only: false}\n"
                              "infer: {model: m.pt, labels: m.txt}\n";
  StreamTable table = table_for(running, 1);
  EXPECT_EQ(table.entries[0].keyframes_only, std::optional<bool>(true));
  EXPECT_EQ(table.entries[1].keyframes_only, std::nullopt);
  const auto dir = std::filesystem::temp_directory_path() / ("vapipe-stream-table-keys-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(write_stream_table(table, (dir / "t.json").string()).ok());
  auto back = read_stream_table((dir / "t.json").string());
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_EQ(stream_config_of((*back)->entries[0])->keyframes_only, std::optional<bool>(true));
  EXPECT_EQ(stream_config_of((*back)->entries[1])->keyframes_only, std::nullopt);
  EXPECT_EQ(stream_config_of((*back)->entries[0])->rtsp_latency_ms, std::optional<uint32_t>(500));
  EXPECT_EQ(stream_config_of((*back)->entries[1])->rtsp_latency_ms, std::nullopt);
  std::filesystem::remove_all(dir);
  for (const std::string& edit : {std::string("keyframes_only: false"), std::string("roi: [0, 0, 1, 1]")}) {
    std::string changed = running;  // false is a change; so is leaving it out (the job's: false)
    changed.replace(changed.find("keyframes_only: true"), 20, edit);
    StreamTable copy = table;
    auto change = apply_stream_reload(copy, running, changed, load(changed), 1);
    ASSERT_TRUE(change.ok()) << edit << ": " << change.status().message();
    // Left out, the stream takes the job's, and says so.
    EXPECT_EQ(change->retuned_what, std::vector<std::string>{edit == "keyframes_only: false"
                                                                 ? "keyframes_only"
                                                                 : "keyframes_only (ingest.keyframes_only)"})
        << edit;
    EXPECT_EQ(copy.entries[0].keyframes_only, edit == "keyframes_only: false" ? std::optional<bool>(false) : std::nullopt);
  }
  std::string jitter = running;  // a camera's own jitter buffer: taken as its connection goes on
  jitter.replace(jitter.find("rtsp_latency_ms: 500"), 20, "rtsp_latency_ms: 800");
  const StreamTableEntry before = table.entries[0];
  auto change = apply_stream_reload(table, running, jitter, load(jitter), 1);
  ASSERT_TRUE(change.ok()) << change.status().message();
  EXPECT_EQ(change->retuned_what, std::vector<std::string>{"rtsp_latency_ms"});
  EXPECT_EQ(table.entries[0].rtsp_latency_ms, std::optional<uint32_t>(800));
  EXPECT_FALSE(settings_need_new_connection(before, table.entries[0]));
}

// streams[].rotate and mirror travel with a stream (a camera added by a reload is turned as its entry
// says), and a reload may change them (a camera remounted): taken as the connection goes on.
TEST(StreamTable, AStreamsTurnTravelsWithItAndChangesWithAReload) {
  const std::string running = "job: {mode: live}\nstreams:\n"
                              "  - {id: a, uri: \"test://ball?frames=0&live=true\", rotate: 90, mirror: true}\n"
                              "  - {id: b, uri: \"test://smpte?frames=0&live=true\"}\n"
                              "infer: {model: m.pt, labels: m.txt}\n";
  StreamTable table = table_for(running, 1);
  const auto dir = std::filesystem::temp_directory_path() / ("vapipe-stream-table-turn-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(write_stream_table(table, (dir / "t.json").string()).ok());
  auto back = read_stream_table((dir / "t.json").string());
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_EQ(stream_config_of((*back)->entries[0])->turn, std::optional<Orientation>(Orientation::kTransverse));
  EXPECT_EQ(stream_config_of((*back)->entries[1])->turn, std::nullopt);
  std::filesystem::remove_all(dir);
  std::string changed = running;
  changed.replace(changed.find("rotate: 90"), 10, "rotate: 270");
  StreamTable turned = table;
  auto change = apply_stream_reload(turned, running, changed, load(changed), 1);
  ASSERT_TRUE(change.ok()) << change.status().message();
  EXPECT_EQ(change->retuned_what, std::vector<std::string>{"rotate or mirror"});
  EXPECT_EQ(change->retuned_connects, std::vector<bool>{false});
  EXPECT_EQ(connection_settings_changed(table.entries[0], turned.entries[0]), "");
  EXPECT_NE(turned.entries[0].turn, table.entries[0].turn);
  std::string with_c = running;
  with_c.insert(with_c.find("infer:"), "  - {id: c, uri: \"test://snow?frames=0&live=true\", rotate: 180}\n");
  auto applied = apply_stream_reload(table, running, with_c, load(with_c), 1);
  ASSERT_TRUE(applied.ok()) << applied.status().message();
  EXPECT_EQ(table.entries.back().turn, std::optional<Orientation>(Orientation::kRotate180));
}

// How a camera's certificate is checked travels to ingest with the stream (a reload-added rtsps://
// camera with its own certificate), and a reload may change it (a camera given a new certificate).
TEST(StreamTable, AStreamsTlsTrustTravelsWithItAndChangesWithAReload) {
  const std::string running = "job: {mode: live}\nstreams:\n"
                              "  - {id: a, uri: \"https://cam/v.mjpg\", tls_verify: false}\n"
                              "  - {id: b, uri: \"rtsps://cam/s\"}\n"
                              "infer: {model: m.pt, labels: m.txt}\n";
  StreamTable table = table_for(running, 1);
  const auto dir = std::filesystem::temp_directory_path() / ("vapipe-stream-table-tls-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(write_stream_table(table, (dir / "t.json").string()).ok());
  auto back = read_stream_table((dir / "t.json").string());
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_EQ(stream_config_of((*back)->entries[0])->tls, (SourceTls{"", false}));
  EXPECT_EQ(stream_config_of((*back)->entries[1])->tls, SourceTls{});
  std::filesystem::remove_all(dir);
  std::string changed = running;
  changed.replace(changed.find(", tls_verify: false"), 19, "");
  StreamTable checked = table;
  auto change = apply_stream_reload(checked, running, changed, load(changed), 1);
  ASSERT_TRUE(change.ok()) << change.status().message();
  EXPECT_EQ(change->retuned_what, std::vector<std::string>{"tls_ca_file, tls_verify or tls_fingerprint"});
  EXPECT_EQ(checked.entries[0].tls, SourceTls{});
  std::string with_c = running;
  with_c.insert(with_c.find("infer:"), "  - {id: c, uri: \"rtsps://cam2/s\", tls_verify: false}\n");
  auto applied = apply_stream_reload(table, running, with_c, load(with_c), 1);
  ASSERT_TRUE(applied.ok()) << applied.status().message();
  EXPECT_EQ(table.entries.back().tls, (SourceTls{"", false}));
}

// When a file's recording started, and the part of it classified, travel to ingest with the stream,
// resolved (a file name's time too), and cannot change while it runs.
TEST(StreamTable, AStreamsRecordingStartAndPartTravelWithItAndCannotChangeWhileItRuns) {
  const std::string running = "job: {mode: live}\nstreams:\n"
                              "  - {id: a, uri: \"test://ball\", recorded_at: \"2026-11-30T14:30:00Z\"}\n"
                              "  - {id: b, uri: \"/media/phone.mp4\", recorded_at: container}\n"
                              "  - {id: c, uri: \"/media/plain.mp4\", from: 10, to: 20}\n"
                              "infer: {model: m.pt, labels: m.txt}\n";
  StreamTable table = table_for(running, 1);
  const auto dir = std::filesystem::temp_directory_path() / ("vapipe-stream-table-rec-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(write_stream_table(table, (dir / "t.json").string()).ok());
  auto back = read_stream_table((dir / "t.json").string());
  ASSERT_TRUE(back.ok() && back->has_value()) << (back.ok() ? "" : back.status().message());
  const StreamConfig a = stream_config_of((*back)->entries[0]).value();
  EXPECT_EQ(a.recorded.from, RecordingStart::From::kGiven);
  EXPECT_EQ(a.recorded.unix_ns, int64_t{1796049000} * 1000000000);
  EXPECT_EQ(stream_config_of((*back)->entries[1])->recorded.from, RecordingStart::From::kContainer);
  const StreamConfig c = stream_config_of((*back)->entries[2]).value();
  EXPECT_EQ(c.recorded, RecordingStart{});
  EXPECT_EQ(c.from_ns, int64_t{10} * 1000000000);
  EXPECT_EQ(c.to_ns, int64_t{20} * 1000000000);
  EXPECT_TRUE(stream_config_of((*back)->entries[0])->whole_file());
  std::filesystem::remove_all(dir);
  std::string changed = running;
  changed.replace(changed.find("14:30:00Z"), 9, "15:30:00Z");
  auto refused = apply_stream_reload(table, running, changed, load(changed), 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("stream 'a': its recorded_at changed"), std::string::npos)
      << refused.status().message();
  std::string later = running;
  later.replace(later.find("to: 20"), 6, "to: 30");
  auto moved = apply_stream_reload(table, running, later, load(later), 1);
  ASSERT_FALSE(moved.ok());
  EXPECT_NE(moved.status().message().find("stream 'c': its from or to changed"), std::string::npos)
      << moved.status().message();
}

// streams[].loop travels with its stream and cannot change while it runs; a file added by a reload keeps
// its part, recording start and loop in the table (before stop 55 an added stream's entry had its
// uri, sampling, region, turn and TLS only: a file added with from/to was read whole).
TEST(StreamTable, AStreamsLoopTravelsWithItAndAStreamAddedByAReloadKeepsItsPartAndLoop) {
  const std::string running = "job: {mode: live}\nstreams:\n"
                              "  - {id: a, uri: \"/media/a.mp4\", loop: true}\n"
                              "  - {id: cam, uri: \"test://ball?frames=0\"}\n"
                              "infer: {model: m.pt, labels: m.txt}\n";
  StreamTable table = table_for(running, 1);
  const auto dir = std::filesystem::temp_directory_path() / ("vapipe-stream-table-loop-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(write_stream_table(table, (dir / "t.json").string()).ok());
  auto back = read_stream_table((dir / "t.json").string());
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_TRUE(stream_config_of((*back)->entries[0])->loop);
  EXPECT_FALSE(stream_config_of((*back)->entries[1])->loop);

  std::string stopped = running;
  stopped.replace(stopped.find("loop: true"), 10, "loop: false");
  auto refused = apply_stream_reload(table, running, stopped, load(stopped), 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("stream 'a': its loop changed"), std::string::npos)
      << refused.status().message();

  std::string added = running;
  added.replace(added.find("infer:"), 0,
                "  - {id: b, uri: \"/media/b.mp4\", from: 10, to: 20, loop: true, recorded_at: \"2026-11-30T14:30:00Z\"}\n");
  auto taken = apply_stream_reload(table, running, added, load(added), 1);
  ASSERT_TRUE(taken.ok()) << taken.status().message();
  ASSERT_EQ(table.entries.size(), 3u);
  const StreamConfig b = stream_config_of(table.entries[2]).value();
  EXPECT_EQ(b.id, "b");
  EXPECT_TRUE(b.loop);
  EXPECT_EQ(b.from_ns, int64_t{10} * 1000000000);
  EXPECT_EQ(b.to_ns, int64_t{20} * 1000000000);
  EXPECT_EQ(b.recorded.from, RecordingStart::From::kGiven);
}

TEST(StreamTracker, StreamsExpectedLaterCountTheirEndsSeenEarlier) {
  StreamTracker tracker(2);
  auto end_of = [](uint32_t i) {
    Envelope env;
    env.stream_index = i;
    return Message::stream_event(MessageKind::kStreamEnd, env, {});
  };
  tracker.observe(end_of(0));
  tracker.observe(end_of(3));  // an added stream that ended before this stage read the table
  tracker.observe(end_of(1));
  EXPECT_TRUE(tracker.all_ended());
  tracker.expect(2);
  tracker.expect(3);
  EXPECT_FALSE(tracker.all_ended());
  EXPECT_EQ(tracker.ended_count(), 3u);
  tracker.observe(end_of(2));
  tracker.observe(end_of(2));  // twice: counted once
  EXPECT_TRUE(tracker.all_ended());
  EXPECT_EQ(tracker.expected_count(), 4u);
}

// A stream that ended and begins again (a reload brought it back: `started`; its lane restarted:
// `reconnecting`) is running again until its next end; a message of another kind after its end
// (a late picture) does not make it so.
TEST(StreamTracker, AStreamThatBeginsAgainAfterItsEndIsWaitedForUntilItsNextEnd) {
  StreamTracker tracker(2);
  auto message = [](MessageKind kind, uint32_t i) {
    Envelope env;
    env.stream_index = i;
    return Message::stream_event(kind, env, {});
  };
  tracker.observe(message(MessageKind::kStreamEnd, 0));
  tracker.observe(message(MessageKind::kStreamError, 1));
  EXPECT_TRUE(tracker.all_ended());
  tracker.observe(message(MessageKind::kStreamPicture, 1));
  EXPECT_TRUE(tracker.all_ended());
  tracker.observe(message(MessageKind::kStreamStart, 1));
  EXPECT_FALSE(tracker.all_ended());
  EXPECT_EQ(tracker.ended_count(), 1u);
  tracker.observe(message(MessageKind::kStreamEnd, 1));
  EXPECT_TRUE(tracker.all_ended());
  tracker.observe(message(MessageKind::kStreamReconnecting, 0));
  EXPECT_FALSE(tracker.all_ended());
  tracker.observe(message(MessageKind::kStreamStart, 5));  // a stream not yet known: nothing to undo
  tracker.observe(message(MessageKind::kStreamEnd, 0));
  EXPECT_TRUE(tracker.all_ended());
}

TEST(StreamTable, AStreamWithASourceKeepsItInTheTableJoinsItsLaneOnAReloadAndCannotChangeIt) {
  const std::string running = live_yaml({{"a", "ball"}, {"b", "smpte"}}, "");
  StreamTable table = table_for(running, 2);  // lane 0: a; lane 1: b
  // Members of b (lane 1), though lane 0 has fewer streams once c comes; c's member follows c, which
  // is listed after it.
  std::string reloaded = live_yaml({{"a", "ball"}, {"b", "smpte"}}) ;
  reloaded.replace(reloaded.find("infer:"), 0,
                   "  - {id: b-left, source: b, roi: [0, 0, 0.5, 1]}\n  - {id: b-right, source: b, roi: [0.5, 0, 0.5, 1]}\n"
                   "  - {id: c-top, source: c, roi: [0, 0, 1, 0.5]}\n  - {id: c, uri: 'test://snow?frames=0&live=true'}\n");
  auto change = apply_stream_reload(table, running, reloaded, load(reloaded), 2);
  ASSERT_TRUE(change.ok()) << change.status().message();
  EXPECT_EQ(change->added, (std::vector<std::string>{"c", "b-left", "b-right", "c-top"}));
  EXPECT_EQ(change->added_lanes, (std::vector<uint32_t>{0, 1, 1, 0}));
  const StreamTableEntry& b_left = table.entries[3];
  EXPECT_EQ(b_left.id, "b-left");
  EXPECT_EQ(b_left.source, "b");
  EXPECT_EQ(b_left.uri, "test://smpte?frames=0&live=true");
  EXPECT_EQ(b_left.roi, (std::array<double, 4>{0, 0, 0.5, 1}));

  // Written and read back with its source; a stage makes its StreamConfig from it.
  const std::string path = ::testing::TempDir() + "/members-streams.json";
  ASSERT_TRUE(write_stream_table(table, path).ok());
  auto read = read_stream_table(path);
  ASSERT_TRUE(read.ok() && read->has_value());
  EXPECT_EQ((*read)->entries[3].source, "b");
  EXPECT_EQ((*read)->entries[2].source, "");
  auto config = stream_config_of((*read)->entries[3]);
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->source, "b");
  EXPECT_TRUE(config->is_member());
  std::filesystem::remove(path);

  // A running stream's source cannot change.
  std::string moved = reloaded;
  moved.replace(moved.find("{id: b-left, source: b"), 22, "{id: b-left, source: a");
  auto refused = apply_stream_reload(table, reloaded, moved, load(moved), 2);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("stream 'b-left': its source changed"), std::string::npos)
      << refused.status().message();

  // The source's uri changes: its members' copies follow, unsaid (they are connected through it); a
  // member's own region is its change.
  std::string retuned = reloaded;
  retuned.replace(retuned.find("test://smpte"), 12, "test://pinwheel");
  retuned.replace(retuned.find("roi: [0.5, 0, 0.5, 1]"), 21, "roi: [0.6, 0, 0.4, 1]");
  auto change_b = apply_stream_reload(table, reloaded, retuned, load(retuned), 2);
  ASSERT_TRUE(change_b.ok()) << change_b.status().message();
  EXPECT_EQ(change_b->retuned, (std::vector<std::string>{"b", "b-right"}));
  EXPECT_EQ(change_b->retuned_what, (std::vector<std::string>{"uri", "roi"}));
  EXPECT_EQ(table.entries[1].uri, "test://pinwheel?frames=0&live=true");
  EXPECT_EQ(table.entries[3].uri, "test://pinwheel?frames=0&live=true");  // b-left: its copy
  EXPECT_EQ(table.entries[3].roi, (std::array<double, 4>{0, 0, 0.5, 1}));
  EXPECT_EQ(table.entries[4].roi, (std::array<double, 4>{0.6, 0, 0.4, 1}));
  EXPECT_FALSE(settings_need_new_connection(b_left, table.entries[3]));  // a member is never connected itself
}

// A camera's uri changes in place (a new address, a new password); a file's may not (the stream would
// be read again from its start), nor may a camera become a file.
TEST(StreamTable, ACamerasUriChangesInPlaceAndAFilesConnectionDoesNot) {
  const std::string running = "job: {mode: live}\nstreams:\n"
                              "  - {id: gate, uri: \"rtsp://user:old@10.0.0.5/stream1\"}\n"
                              "  - {id: door, uri: \"rtsp://10.0.0.6/stream1\"}\n"
                              "  - {id: loop, uri: \"/media/loop.mp4\"}\n"
                              "infer: {model: m.pt, labels: m.txt}\n";
  StreamTable table = table_for(running, 2);
  std::string moved = running;
  moved.replace(moved.find("user:old@10.0.0.5"), 17, "user:new@10.0.0.15");
  auto change = apply_stream_reload(table, running, moved, load(moved), 2);
  ASSERT_TRUE(change.ok()) << change.status().message();
  EXPECT_EQ(change->retuned, std::vector<std::string>{"gate"});
  EXPECT_EQ(change->retuned_what, std::vector<std::string>{"uri"});
  EXPECT_EQ(change->retuned_connects, std::vector<bool>{true});
  EXPECT_NE(describe_reload(*change, 2).find("changed 'gate' (uri; connects again)"), std::string::npos);
  EXPECT_EQ(table.entries[0].uri, "rtsp://user:new@10.0.0.15/stream1");
  EXPECT_EQ(table.entries[0].lane, 0u);
  EXPECT_EQ(table.entries[1].uri, "rtsp://10.0.0.6/stream1");

  auto refused = [&](const std::string& reloaded) {
    const StreamTable before = table;
    auto r = apply_stream_reload(table, moved, reloaded, load(reloaded), 2);
    EXPECT_EQ(table.version, before.version);
    EXPECT_EQ(table.entries[2].uri, before.entries[2].uri);
    EXPECT_EQ(table.entries[1].uri, before.entries[1].uri);
    return r.ok() ? std::string("(applied)") : r.status().message();
  };
  std::string other_file = moved;
  other_file.replace(other_file.find("/media/loop.mp4"), 15, "/media/other.mp4");
  EXPECT_EQ(refused(other_file), "job.yaml:5: stream 'loop': its uri changed; a file's connection cannot change while "
                                 "the job runs: it would be read again from its start (give it a new id, or restart "
                                 "the job)");
  std::string file_turned = moved;  // a new file, turned and sampled: only what would read it again is named
  file_turned.replace(file_turned.find("/media/loop.mp4\""), 16, "/media/other.mp4\", rotate: 90, max_fps: 1");
  EXPECT_NE(refused(file_turned).find("stream 'loop': its uri changed; a file's connection"),
            std::string::npos);  // rotate and max_fps alone would pass (below); the reload is refused whole
  std::string to_file = moved;
  to_file.replace(to_file.find("rtsp://10.0.0.6/stream1"), 23, "/media/door.mp4");
  EXPECT_NE(refused(to_file).find("stream 'door': its uri changed; a stream that becomes a file's"), std::string::npos);
  // A file's region may change: it takes the next frame, nothing is read again.
  std::string file_roi = moved;
  file_roi.replace(file_roi.find("/media/loop.mp4\""), 16, "/media/loop.mp4\", roi: [0, 0, 0.5, 1]");
  auto region = apply_stream_reload(table, moved, file_roi, load(file_roi), 2);
  ASSERT_TRUE(region.ok()) << region.status().message();
  EXPECT_EQ(region->retuned, std::vector<std::string>{"loop"});
  EXPECT_EQ(table.entries[2].roi, (std::array<double, 4>{0, 0, 0.5, 1}));
  // And its sampling: taken as it goes (StreamReader::retune).
  std::string file_fps = file_roi;
  file_fps.replace(file_fps.find("/media/loop.mp4\""), 16, "/media/loop.mp4\", max_fps: 1, keyframes_only: true");
  auto sampling = apply_stream_reload(table, file_roi, file_fps, load(file_fps), 2);
  ASSERT_TRUE(sampling.ok()) << sampling.status().message();
  EXPECT_EQ(sampling->retuned_what, std::vector<std::string>{"max_fps, keyframes_only"});
  EXPECT_EQ(table.entries[2].max_fps, 1);
  // And how it is turned (a phone's video its tag does not turn): taken from the next frame.
  std::string file_turned_only = file_fps;
  file_turned_only.replace(file_turned_only.find("max_fps: 1,"), 11, "max_fps: 1, rotate: 90,");
  auto turn = apply_stream_reload(table, file_fps, file_turned_only, load(file_turned_only), 2);
  ASSERT_TRUE(turn.ok()) << turn.status().message();
  EXPECT_EQ(turn->retuned_what, std::vector<std::string>{"rotate or mirror"});
  EXPECT_EQ(turn->retuned_connects, std::vector<bool>{false});
  EXPECT_EQ(table.entries[2].turn, std::optional<Orientation>(Orientation::kRotate90));
}

}  // namespace
}  // namespace vapipe
