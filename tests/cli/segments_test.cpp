#include "cli/segments.h"

#include "tests/fakes/local_zone.h"

#include <cstdint>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <sstream>
#include <string>
#include <vector>

namespace vapipe::cli {
namespace {

std::string result(const std::string& id, uint64_t seq, const std::string& label, double score = 0.9,
                   bool error = false) {
  return "{\"topic\":\"results/" + id + "\",\"payload\":{\"stream_id\":\"" + id + "\",\"seq\":" +
         std::to_string(seq) + ",\"pts_ms\":" + std::to_string(seq * 100) + ",\"label\":" +
         (error ? "null" : "\"" + label + "\"") + ",\"score\":" + (error ? "null" : std::to_string(score)) +
         ",\"error\":" + (error ? "\"bad frame\"" : "null") + "}}\n";
}

std::vector<Segment> segments_of(const std::string& text, SegmentOptions options = {}, uint64_t* incomplete = nullptr) {
  std::istringstream in(text);
  auto r = read_segments(in, "results.jsonl", options, incomplete);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : std::vector<Segment>{};
}

TEST(Segments, RunsOfOneLabelPerStreamEndAtALabelChangeAnErrorOrAMissingFrame) {
  std::string text = "{\"topic\":\"events/a\",\"payload\":{\"event\":\"started\"}}\n";
  text += result("a", 0, "car", 0.8) + result("b", 0, "bus") + result("a", 1, "car", 0.6) + result("a", 2, "truck");
  text += result("a", 3, "truck") + result("a", 4, "", 0, true) + result("a", 5, "truck");  // an error between
  text += result("b", 1, "bus") + result("b", 3, "bus");                                     // b's frame 2 dropped
  const std::vector<Segment> s = segments_of(text);
  ASSERT_EQ(s.size(), 5u);
  EXPECT_EQ(s[0].stream_id, "a");
  EXPECT_EQ(s[0].label, "car");
  EXPECT_EQ(s[0].start_seq, 0u);
  EXPECT_EQ(s[0].end_seq, 1u);
  EXPECT_EQ(s[0].frames, 2u);
  EXPECT_DOUBLE_EQ(s[0].start_ms, 0);
  EXPECT_DOUBLE_EQ(s[0].end_ms, 100);
  EXPECT_NEAR(s[0].score_mean(), 0.7, 1e-9);
  EXPECT_EQ(s[1].label, "truck");  // 2..3, ended by the error result
  EXPECT_EQ(s[1].start_seq, 2u);
  EXPECT_EQ(s[1].end_seq, 3u);
  EXPECT_EQ(s[2].stream_id, "b");  // 0..1, ended by the missing frame 2
  EXPECT_EQ(s[2].end_seq, 1u);
  // At the end of the file, each stream's open segment (in stream order).
  EXPECT_EQ(s[3].stream_id, "a");
  EXPECT_EQ(s[3].start_seq, 5u);
  EXPECT_EQ(s[3].frames, 1u);
  EXPECT_EQ(s[4].stream_id, "b");
  EXPECT_EQ(s[4].start_seq, 3u);
}

// A segment's first and last frame's clocks: this machine's (capture_unix_ms) and the camera's
// (camera_unix_ms, null before its first sender report), as on segments/<id>.
TEST(Segments, ASegmentKeepsItsFirstAndLastFramesWallClocks) {
  auto timed = [](uint64_t seq, const std::string& camera) {
    return "{\"topic\":\"results/a\",\"payload\":{\"seq\":" + std::to_string(seq) + ",\"pts_ms\":" +
           std::to_string(seq * 100) + ",\"label\":\"car\",\"score\":0.9,\"error\":null,\"capture_unix_ms\":" +
           std::to_string(1800000000000 + seq * 100) + ",\"camera_unix_ms\":" + camera + "}}\n";
  };
  const std::vector<Segment> s = segments_of(timed(0, "null") + timed(1, "1799999999850") + timed(2, "1799999999950"));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_DOUBLE_EQ(s[0].start_capture_ms, 1800000000000);
  EXPECT_DOUBLE_EQ(s[0].end_capture_ms, 1800000000200);
  EXPECT_DOUBLE_EQ(s[0].start_camera_ms, -1);  // not known yet at its first frame
  EXPECT_DOUBLE_EQ(s[0].end_camera_ms, 1799999999950);
  // Results of before these fields: unknown, not zero.
  EXPECT_DOUBLE_EQ(segments_of(result("b", 0, "bus"))[0].start_capture_ms, -1);
}

TEST(Segments, ShortRunsAndOtherLabelsOrStreamsCanBeLeftOut) {
  std::string text;
  const char* labels[] = {"car", "car", "car", "bus", "car", "car", "car", "car"};
  for (uint64_t i = 0; i < 8; ++i) text += result("a", i, labels[i]) + result("b", i, "car");
  SegmentOptions o;
  o.min_frames = 2;  // the one-frame "bus" goes, and splits the cars in two
  std::vector<Segment> s = segments_of(text, o);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].frames, 3u);
  EXPECT_EQ(s[1].frames, 4u);
  EXPECT_EQ(s[2].stream_id, "b");
  EXPECT_EQ(s[2].frames, 8u);
  o.stream_ids = {"a"};
  o.labels = {"bus"};
  o.min_frames = 1;
  s = segments_of(text, o);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].label, "bus");
  EXPECT_DOUBLE_EQ(s[0].start_ms, 300);
  // Given more than once (--stream a --stream b): each of them.
  o.stream_ids = {"a", "b"};
  o.labels = {"bus", "car"};
  o.min_frames = 2;
  EXPECT_EQ(segments_of(text, o).size(), 3u);
}

// A --stream, --label or --min-score LABEL=S that names nothing in the results (a typo) is said, with
// what the results have, instead of an empty table that reads as "never seen".
TEST(Segments, ANameNoResultHasIsSaidWithTheNamesTheyHave) {
  std::string text = result("a", 0, "car") + result("a", 1, "bus") + result("b", 0, "car");
  SegmentOptions o;
  std::vector<std::string> notes;
  o.note = [&](const std::string& n) { notes.push_back(n); };
  o.stream_ids = {"a", "c"};
  o.labels = {"bus", "bsu"};
  o.min_score_by_label = {{"car", 0.5}, {"blue", 0.99}};
  EXPECT_EQ(segments_of(text, o).size(), 1u);  // a's bus
  EXPECT_EQ(notes, (std::vector<std::string>{
                       "--stream c: no result of the results is of it (their streams: 'a', 'b')",
                       "--min-score blue=...: no result names that label (their labels: 'bus', 'car')",
                       "--label bsu: no result names that label (their labels: 'bus', 'car')"}));
  // `vapipe segments` takes them apart from other notes (it exits 1 for them).
  std::vector<std::string> unmatched;
  o.unmatched = [&](const std::string& n) { unmatched.push_back(n); };
  notes.clear();
  segments_of(text, o);
  EXPECT_EQ(unmatched.size(), 3u);
  EXPECT_TRUE(notes.empty());
  unmatched.clear();
  o.stream_ids = {"a"};
  o.labels = {"car"};
  o.min_score_by_label.clear();
  segments_of(text, o);
  EXPECT_TRUE(notes.empty());
  EXPECT_TRUE(unmatched.empty());
}

// --bridge: a classifier's flicker (another label, an error, a dropped frame) shorter than
// --min-frames does not cut a segment in two; a real change of that length or more does.
TEST(Segments, BridgingJoinsRunsOfOneLabelAcrossInterruptionsShorterThanMinFrames) {
  std::string text;
  uint64_t seq = 0;
  auto run = [&](const std::string& label, int n) {
    for (int i = 0; i < n; ++i, ++seq) text += label.empty() ? result("a", seq, "", 0, true) : result("a", seq, label);
  };
  run("car", 5);
  run("truck", 1);  // flicker
  run("car", 4);
  run("", 1);       // an error result
  run("car", 3);
  ++seq;            // a dropped frame
  run("car", 2);
  run("bus", 3);    // a change (3 >= min_frames)
  run("car", 2);
  SegmentOptions o;
  o.min_frames = 3;
  const std::vector<Segment> plain = segments_of(text, o);
  ASSERT_EQ(plain.size(), 4u);  // car 5, car 4, car 3, bus 3: cut at each interruption
  o.bridge = true;
  const std::vector<Segment> s = segments_of(text, o);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].label, "car");
  EXPECT_EQ(s[0].start_seq, 0u);
  EXPECT_EQ(s[0].end_seq, 16u);
  EXPECT_EQ(s[0].frames, 14u);  // its own frames only: 5 + 4 + 3 + 2
  EXPECT_EQ(s[1].label, "bus");  // the last two cars are shorter than 3: left out
  EXPECT_EQ(s[1].frames, 3u);
  o.labels = {"bus"};  // filtered after bridging: the cars are still bridged, then left out
  const std::vector<Segment> only_bus = segments_of(text, o);
  ASSERT_EQ(only_bus.size(), 1u);
  EXPECT_EQ(only_bus[0].label, "bus");
}

// A segment's best frame: the highest score of its label (the first of equals), also across what
// --bridge joins; a flicker's frames are not its.
TEST(Segments, ASegmentsBestFrameIsItsHighestScoringOne) {
  std::string text;
  uint64_t seq = 0;
  auto run = [&](const std::string& label, std::vector<double> scores) {
    for (const double score : scores) text += result("a", seq++, label, score);
  };
  run("car", {0.6, 0.8, 0.7, 0.8});  // best seq 1 (the first 0.8)
  run("truck", {0.99});              // a flicker
  run("car", {0.7, 0.9, 0.5});       // best seq 6
  SegmentOptions o;
  o.min_frames = 3;
  const std::vector<Segment> plain = segments_of(text, o);
  ASSERT_EQ(plain.size(), 2u);
  EXPECT_EQ(plain[0].best_seq, 1u);
  EXPECT_DOUBLE_EQ(plain[0].best_ms, 100);
  EXPECT_NEAR(plain[0].best_score, 0.8, 1e-9);
  EXPECT_EQ(plain[1].best_seq, 6u);
  o.bridge = true;
  const std::vector<Segment> bridged = segments_of(text, o);
  ASSERT_EQ(bridged.size(), 1u);
  EXPECT_EQ(bridged[0].best_seq, 6u);
  EXPECT_DOUBLE_EQ(bridged[0].best_ms, 600);
  EXPECT_NEAR(bridged[0].best_score, 0.9, 1e-9);
}

// A result that says "damaged" (decoded after a lost packet: maybe a smear) is a segment's best frame
// only where none of its frames before was whole, across what --bridge joins too; counted.
TEST(Segments, ASegmentsBestFrameIsAWholePictureWhereItHasOne) {
  std::string text;
  uint64_t seq = 0;
  auto run = [&](const std::string& label, std::vector<std::pair<double, bool>> frames) {
    for (const auto& [score, damaged] : frames) {
      std::string line = result("a", seq++, label, score);
      line.insert(line.size() - 3, damaged ? ",\"damaged\":true" : ",\"damaged\":false");
      text += line;
    }
  };
  run("car", {{0.95, true}, {0.6, false}, {0.7, false}});  // best seq 2: whole
  run("truck", {{0.99, false}});                           // a flicker
  run("car", {{0.99, true}, {0.9, true}, {0.97, true}});   // all damaged: best seq 4
  SegmentOptions o;
  o.min_frames = 3;
  const std::vector<Segment> plain = segments_of(text, o);
  ASSERT_EQ(plain.size(), 2u);
  EXPECT_EQ(plain[0].best_seq, 2u);
  EXPECT_EQ(plain[0].damaged_frames, 1u);
  EXPECT_FALSE(plain[0].best_damaged);
  EXPECT_EQ(plain[1].best_seq, 4u);
  EXPECT_EQ(plain[1].damaged_frames, 3u);
  EXPECT_TRUE(plain[1].best_damaged);
  o.bridge = true;
  const std::vector<Segment> bridged = segments_of(text, o);
  ASSERT_EQ(bridged.size(), 1u);
  EXPECT_EQ(bridged[0].best_seq, 2u) << "the whole one, over the later damaged 0.99";
  EXPECT_EQ(bridged[0].damaged_frames, 4u);
}

// --skip-damaged: a result that says "damaged" counts as an error result (it ends a run here, as an
// error does in vapipe segments, and --bridge bridges a short stretch of them).
TEST(Segments, SkippingDamagedResultsTheyCountAsErrors) {
  std::string text;
  uint64_t seq = 0;
  auto run = [&](const std::string& label, std::vector<bool> damaged) {
    for (const bool d : damaged) {
      std::string line = result("a", seq++, label, 0.9);
      line.insert(line.size() - 3, d ? ",\"damaged\":true" : ",\"damaged\":false");
      text += line;
    }
  };
  run("fire", {true, true, true, true});
  run("car", {false, false, false, true, false, false, false});
  SegmentOptions o;
  o.min_frames = 3;
  std::vector<Segment> counted = segments_of(text, o);
  ASSERT_EQ(counted.size(), 2u);
  EXPECT_EQ(counted[0].label, "fire");
  EXPECT_EQ(counted[1].frames, 7u);
  o.skip_damaged = true;
  std::vector<Segment> skipped = segments_of(text, o);
  ASSERT_EQ(skipped.size(), 2u);  // car 4..6 and 8..10: no fire
  EXPECT_EQ(skipped[0].label, "car");
  EXPECT_EQ(skipped[0].end_seq, 6u);
  EXPECT_EQ(skipped[1].start_seq, 8u);
  o.bridge = true;
  skipped = segments_of(text, o);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0].frames, 6u);
}

// --each-label: every label of a frame's top_k whose score reaches --min-score has runs of its own,
// overlapping (a multi-label model's); a frame without it, an error or a missing frame ends its run.
TEST(Segments, EachLabelOfAFramesTopKHasSegmentsOfItsOwn) {
  auto frame = [](uint64_t seq, double person, double smoke) {  // its top-1 the likelier of the two
    return "{\"topic\":\"results/a\",\"payload\":{\"stream_id\":\"a\",\"seq\":" + std::to_string(seq) +
           ",\"pts_ms\":" + std::to_string(seq * 100) + ",\"label\":\"" + (person >= smoke ? "person" : "smoke") +
           "\",\"score\":" + std::to_string(std::max(person, smoke)) + ",\"error\":null,\"top_k\":[{\"label\":\"person\",\"class_id\":0,\"score\":" +
           std::to_string(person) + "},{\"label\":\"smoke\",\"class_id\":1,\"score\":" + std::to_string(smoke) +
           "}]}}\n";
  };
  std::string text;
  for (uint64_t seq = 0; seq < 4; ++seq) text += frame(seq, 0.9, 0.2);
  for (uint64_t seq = 4; seq < 8; ++seq) text += frame(seq, 0.9, 0.7 + 0.01 * seq);
  text += frame(8, 0.3, 0.8);  // person off for a frame
  for (uint64_t seq = 9; seq < 11; ++seq) text += frame(seq, 0.9, 0.8);
  SegmentOptions o;
  o.min_score = 0.5;
  o.each_label = true;
  std::vector<Segment> s = segments_of(text, o);
  ASSERT_EQ(s.size(), 3u);  // in the order they end
  EXPECT_EQ(s[0].label, "person");
  EXPECT_EQ(s[0].start_seq, 0u);
  EXPECT_EQ(s[0].end_seq, 7u);
  EXPECT_EQ(s[1].label, "person");
  EXPECT_EQ(s[1].start_seq, 9u);
  EXPECT_EQ(s[2].label, "smoke");  // open at the end, after person's second
  EXPECT_EQ(s[2].start_seq, 4u);
  EXPECT_EQ(s[2].end_seq, 10u);
  EXPECT_EQ(s[2].frames, 7u);
  EXPECT_EQ(s[2].best_seq, 8u);
  o.min_frames = 3;
  o.bridge = true;  // person's gap of one frame is bridged
  s = segments_of(text, o);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].label, "person");
  EXPECT_EQ(s[0].start_seq, 0u);
  EXPECT_EQ(s[0].end_seq, 10u);
  EXPECT_EQ(s[0].frames, 10u);
  EXPECT_EQ(s[1].label, "smoke");
  // Without --each-label: the top-1 label only (person, then smoke at frame 8, then person).
  o = SegmentOptions{};
  o.min_score = 0.5;
  s = segments_of(text, o);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[1].label, "smoke");
}

// --min-score LABEL=S: a label's own minimum, over --min-score S, for its top-1 frames and with --each-label.
TEST(Segments, ALabelsOwnMinimumScoreDecidesWhetherItsFramesCount) {
  auto frame = [](uint64_t seq, const std::string& label, double score, double other) {
    return "{\"topic\":\"results/a\",\"payload\":{\"stream_id\":\"a\",\"seq\":" + std::to_string(seq) +
           ",\"pts_ms\":" + std::to_string(seq * 100) + ",\"label\":\"" + label + "\",\"score\":" +
           std::to_string(score) + ",\"error\":null,\"top_k\":[{\"label\":\"" + label + "\",\"class_id\":0,\"score\":" +
           std::to_string(score) + "},{\"label\":\"smoke\",\"class_id\":1,\"score\":" + std::to_string(other) + "}]}}\n";
  };
  std::string text;
  for (uint64_t seq = 0; seq < 3; ++seq) text += frame(seq, "car", 0.45, 0.1);      // unsure
  for (uint64_t seq = 3; seq < 6; ++seq) text += frame(seq, "bicycle", 0.45, 0.3);  // sure: its own 0.4
  SegmentOptions o;
  o.min_score = 0.5;
  o.min_score_by_label["bicycle"] = 0.4;
  std::vector<Segment> s = segments_of(text, o);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].label, "bicycle");
  EXPECT_EQ(s[0].start_seq, 3u);
  EXPECT_EQ(s[0].frames, 3u);
  o.each_label = true;
  o.min_score_by_label["smoke"] = 0.25;  // smoke at 0.3 on frames 3 to 5, at 0.1 before
  s = segments_of(text, o);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].label, "bicycle");
  EXPECT_EQ(s[1].label, "smoke");
  EXPECT_EQ(s[1].start_seq, 3u);
  EXPECT_EQ(s[1].end_seq, 5u);
}

// A segment knows its stream's uri from the stream's events (a resumed job's started event is in the
// file's earlier part), for `--frames`; a stream without events has none.
TEST(Segments, ASegmentKnowsItsStreamsUriFromItsEvents) {
  std::string text = "{\"topic\":\"events/a\",\"payload\":{\"event\":\"started\",\"uri\":\"file:///data/a%201.mp4\"}}\n";
  text += result("a", 0, "car") + result("b", 0, "bus") + result("a", 1, "truck");
  const std::vector<Segment> s = segments_of(text);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].uri, "file:///data/a%201.mp4");
  EXPECT_EQ(s[1].stream_id, "a");
  EXPECT_EQ(s[1].uri, "file:///data/a%201.mp4");
  EXPECT_EQ(s[2].stream_id, "b");
  EXPECT_EQ(s[2].uri, "");
}

// A live job's picture of a segment (publish.segments_pictures_dir), from its `picture` message: the
// segment of its label that holds the picture's start_seq has it; a picture that failed (null) is none.
TEST(Segments, ASegmentHasThePictureItsLiveJobTookAsItBegan) {
  auto picture = [](const std::string& id, const std::string& label, uint64_t start_seq, const std::string& path) {
    return "{\"topic\":\"segments/" + id + "\",\"payload\":{\"event\":\"picture\",\"label\":\"" + label +
           "\",\"start_seq\":" + std::to_string(start_seq) + ",\"picture\":" +
           (path.empty() ? std::string("null") : "\"" + path + "\"") + "}}\n";
  };
  std::string text;
  for (uint64_t seq = 0; seq < 6; ++seq) {
    text += result("gate", seq, seq < 3 ? "truck" : "car");
    if (seq == 2) text += picture("gate", "truck", 0, "/p/gate/truck.jpg");
    if (seq == 5) text += picture("gate", "car", 3, "");  // could not be written
  }
  text += result("door", 0, "truck") + picture("gate", "bus", 0, "/p/gate/bus.jpg");  // another label: not its
  std::map<std::string, std::string> pictures;  // "stream label": its live picture
  for (const Segment& g : segments_of(text)) pictures[g.stream_id + " " + g.label] = g.live_picture;
  EXPECT_EQ(pictures, (std::map<std::string, std::string>{
                          {"gate truck", "/p/gate/truck.jpg"}, {"gate car", ""}, {"door truck", ""}}));

  // A segment that ended before its picture's message (a short one; the message comes a little
  // after the beginning): read from the whole file first, when it can be read twice.
  const std::string late = result("yard", 0, "dog") + result("yard", 1, "cat") + picture("yard", "dog", 0, "/p/dog.jpg");
  EXPECT_EQ(segments_of(late).front().live_picture, "") << "read as it comes: not yet known";
  SegmentOptions first;
  first.read_events_first = true;
  const std::vector<Segment> read_first = segments_of(late, first);
  ASSERT_EQ(read_first.size(), 2u);
  EXPECT_EQ(read_first[0].label, "dog");
  EXPECT_EQ(read_first[0].live_picture, "/p/dog.jpg");
  EXPECT_EQ(read_first[1].live_picture, "");
}

// A file whose timestamps started over (files joined end to end; ingest put its parts on one timeline):
// its eos event says where, read first when the results can be read twice, so that --frames and
// --clips do not look for its later frames by time.
TEST(Segments, ASegmentKnowsWhereItsFilesTimestampsStartOver) {
  std::string text = result("a", 0, "car") + result("a", 1, "bus") + result("b", 0, "car");
  text += "{\"topic\":\"events/a\",\"payload\":{\"event\":\"eos\",\"stream_id\":\"a\",\"uri\":\"file:///d/a.ts\","
          "\"timeline_restarts\":2,\"timeline_restart_ms\":3191.5}}\n";
  text += "{\"topic\":\"events/b\",\"payload\":{\"event\":\"eos\",\"stream_id\":\"b\",\"uri\":\"file:///d/b.ts\","
          "\"timeline_restarts\":0,\"timeline_restart_ms\":null}}\n";
  SegmentOptions first;
  first.read_events_first = true;
  const std::vector<Segment> s = segments_of(text, first);
  ASSERT_EQ(s.size(), 3u);
  for (const Segment& g : s) {
    const double expected = g.stream_id == "a" ? 3191.5 : -1;
    EXPECT_EQ(g.timeline_restart_ms, expected) << g.stream_id << " " << g.label;
    EXPECT_EQ(g.best_timeline_restart_ms, expected) << g.stream_id << " " << g.label;
  }
  // Read as it comes, a segment that ended before the eos does not know yet.
  EXPECT_EQ(segments_of(text).front().timeline_restart_ms, -1);
}

// And its region and turn from its latest started event (a later eos, without them, keeps them).
TEST(Segments, ASegmentKnowsItsStreamsRegionAndTurnFromItsStartedEvent) {
  std::string text = "{\"topic\":\"events/a\",\"payload\":{\"event\":\"started\",\"uri\":\"file:///d/a.mp4\","
                     "\"roi\":[0.5,0,0.5,1],\"turn\":\"rotate-90\"}}\n";
  text += result("a", 0, "car");
  text += "{\"topic\":\"events/a\",\"payload\":{\"event\":\"eos\",\"uri\":\"file:///d/a.mp4\"}}\n";
  text += result("b", 0, "bus");
  const std::vector<Segment> s = segments_of(text);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].roi, (std::array<double, 4>{0.5, 0, 0.5, 1}));
  EXPECT_EQ(s[0].turn, "rotate-90");
  EXPECT_EQ(s[1].roi, (std::array<double, 4>{0, 0, 1, 1}));
  EXPECT_EQ(s[1].turn, "");
}

// A reload changed the stream's region (and turned its camera) while it ran: the segments after its
// changed event show the new ones, and none runs across it (car before and car after are two).
TEST(Segments, ASegmentAfterAReloadsChangedEventHasTheNewRegionAndTurn) {
  std::string text = "{\"topic\":\"events/a\",\"payload\":{\"event\":\"started\",\"uri\":\"rtsp://cam/a\","
                     "\"roi\":[0.5,0,0.5,1]}}\n";
  text += result("a", 0, "car");
  text += "{\"topic\":\"events/a\",\"payload\":{\"event\":\"changed\",\"uri\":\"rtsp://cam/a2\","
          "\"roi\":[0,0,0.5,0.5],\"turn\":\"rotate-180\"}}\n";
  text += result("a", 1, "car") + result("a", 2, "bus");
  text += "{\"topic\":\"events/a\",\"payload\":{\"event\":\"changed\",\"uri\":\"rtsp://cam/a2\","
          "\"roi\":[0,0,1,1],\"turn\":null}}\n";
  text += result("a", 3, "dog");
  for (bool bridge : {false, true}) {
    SegmentOptions options;
    options.bridge = bridge;  // nor bridged over it
    const std::vector<Segment> s = segments_of(text, options);
    ASSERT_EQ(s.size(), 4u) << bridge;
    EXPECT_EQ(s[0].label, "car");
    EXPECT_EQ(s[0].end_seq, 0u);
    EXPECT_EQ(s[0].roi, (std::array<double, 4>{0.5, 0, 0.5, 1}));
    EXPECT_EQ(s[0].uri, "rtsp://cam/a");
    EXPECT_EQ(s[1].label, "car");
    EXPECT_EQ(s[1].start_seq, 1u);
    EXPECT_EQ(s[1].roi, (std::array<double, 4>{0, 0, 0.5, 0.5}));
    EXPECT_EQ(s[1].turn, "rotate-180");
    EXPECT_EQ(s[1].uri, "rtsp://cam/a2");
    EXPECT_EQ(s[2].label, "bus");
    EXPECT_EQ(s[2].roi, (std::array<double, 4>{0, 0, 0.5, 0.5}));
    EXPECT_EQ(s[3].label, "dog");
    EXPECT_EQ(s[3].roi, (std::array<double, 4>{0, 0, 1, 1}));
    EXPECT_EQ(s[3].turn, "");
  }
}

// A reload that changed only the sampling (max_fps): the same camera, region and turn; the segment
// goes on across its changed event, as publish's does.
TEST(Segments, AChangedEventOfTheSamplingOnlyLeavesTheSegmentOpen) {
  std::string text = "{\"topic\":\"events/a\",\"payload\":{\"event\":\"started\",\"uri\":\"rtsp://cam/a\"}}\n";
  text += result("a", 0, "car") + result("a", 1, "car");
  text += "{\"topic\":\"events/a\",\"payload\":{\"event\":\"changed\",\"uri\":\"rtsp://cam/a\","
          "\"message\":\"a reload changed its max_fps\"}}\n";
  text += result("a", 2, "car");
  const std::vector<Segment> s = segments_of(text, SegmentOptions{});
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].start_seq, 0u);
  EXPECT_EQ(s[0].end_seq, 2u);
  // A looping file read again (a new timeline) ends it, though its uri is the same.
  text += "{\"topic\":\"events/a\",\"payload\":{\"event\":\"changed\",\"uri\":\"rtsp://cam/a\","
          "\"message\":\"looped: read again from its start (streams[].loop; time 2)\"}}\n";
  text += result("a", 3, "car");
  EXPECT_EQ(segments_of(text, SegmentOptions{}).size(), 2u);
}

// A live job's camera lost (reconnecting, attempt 1 on) ends its segments, as publish's live ones end
// there (since 2026-12-06): what came during the outage was not seen. A lane restart (attempt 0) ends
// them only if the stream's next frame comes on a new timeline (its pts_ms went back: a camera
// connected again); an archive job's file goes on where it was, and so does its segment.
TEST(Segments, ACameraLostEndsItsSegmentsAndALaneRestartOnlyWhenItsTimelineStartsOver) {
  auto reconnecting = [](int attempt) {
    return "{\"topic\":\"events/a\",\"payload\":{\"event\":\"reconnecting\",\"attempt\":" +
           std::to_string(attempt) + ",\"message\":\"end of stream\"}}\n";
  };
  auto restarted_at_zero = [](std::string line) {  // the new connection's first frame: pts_ms 33
    const std::string pts = "\"pts_ms\":300";
    return line.replace(line.find(pts), pts.size(), "\"pts_ms\":33");
  };
  const std::string before = result("a", 0, "car") + result("a", 1, "car") + result("a", 2, "car");
  const std::string after = result("a", 4, "car") + result("a", 5, "car");
  const std::string camera_lost = before + reconnecting(1) + reconnecting(2) + result("a", 3, "car") + after;
  const std::string lane_went_on = before + reconnecting(0) + result("a", 3, "car") + after;
  const std::string lane_started_over = before + reconnecting(0) + restarted_at_zero(result("a", 3, "car")) + after;
  for (bool bridge : {false, true}) {
    SegmentOptions options;
    options.bridge = bridge;  // nor bridged over it
    std::vector<Segment> s = segments_of(camera_lost, options);
    ASSERT_EQ(s.size(), 2u) << bridge;
    EXPECT_EQ(s[0].end_seq, 2u);
    EXPECT_EQ(s[1].start_seq, 3u);
    EXPECT_EQ(s[1].end_seq, 5u);
    s = segments_of(lane_went_on, options);
    ASSERT_EQ(s.size(), 1u) << bridge;
    EXPECT_EQ(s[0].start_seq, 0u);
    EXPECT_EQ(s[0].end_seq, 5u);
    s = segments_of(lane_started_over, options);
    ASSERT_EQ(s.size(), 2u) << bridge;
    EXPECT_EQ(s[0].end_seq, 2u);
    EXPECT_EQ(s[0].end_ms, 200);
    EXPECT_EQ(s[1].start_seq, 3u);
    EXPECT_EQ(s[1].start_ms, 33);
  }
}

// --reconnect-grace S (publish.segments_reconnect_grace_s): a camera lost whose next frame came within S
// seconds of its reconnecting event (its time_unix_ms, the frame's capture_unix_ms) does not end its
// segment, which goes on as its label does; one that came later ends it, as without.
TEST(Segments, ACameraBackWithinTheReconnectGraceKeepsItsSegment) {
  auto at = [](std::string line, double ms) {  // a result captured at `ms`
    return line.insert(line.find("\"seq\""), "\"capture_unix_ms\":" + std::to_string(ms) + ",");
  };
  auto reconnecting = [](int attempt, double ms) {
    return "{\"topic\":\"events/a\",\"payload\":{\"event\":\"reconnecting\",\"attempt\":" +
           std::to_string(attempt) + ",\"message\":\"end of stream\",\"time_unix_ms\":" + std::to_string(ms) + "}}\n";
  };
  const double t = 1764491221000;
  const std::string before = at(result("a", 0, "car"), t) + at(result("a", 1, "car"), t + 100) +
                             at(result("a", 2, "car"), t + 200);
  auto back_at = [&](double ms, const std::string& label) {  // lost at t + 250, two attempts, back at `ms`
    return before + reconnecting(1, t + 250) + reconnecting(2, t + 1250) + at(result("a", 3, label), ms) +
           at(result("a", 4, label), ms + 100);
  };
  SegmentOptions options;
  options.reconnect_grace_s = 10;
  std::vector<Segment> s = segments_of(back_at(t + 4000, "car"), options);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].start_seq, 0u);
  EXPECT_EQ(s[0].end_seq, 4u);
  EXPECT_EQ(s[0].reconnections, 1u);  // (as the bus's segment counts it: --json had no such field)
  s = segments_of(back_at(t + 4000, "bus"), options);  // back with another label: that one begins
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].end_seq, 2u);
  EXPECT_EQ(s[0].reconnections, 0u);
  EXPECT_EQ(s[1].label, "bus");
  EXPECT_EQ(s[1].reconnections, 0u);
  s = segments_of(back_at(t + 11000, "car"), options);  // back too late
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].end_seq, 2u);
  EXPECT_EQ(s[1].start_seq, 3u);
  s = segments_of(back_at(t + 4000, "car"));  // without: the loss ends it
  ASSERT_EQ(s.size(), 2u);
}

// --min-score: a frame whose top-1 score is below it counts as no label (the classifier unsure), as an
// error result does: it ends a segment, and with --bridge a short stretch of them is bridged.
TEST(Segments, FramesBelowTheMinimumScoreBelongToNoSegment) {
  std::string text;
  uint64_t seq = 0;
  auto run = [&](const std::string& label, double score, int n) {
    for (int i = 0; i < n; ++i, ++seq) text += result("a", seq, label, score);
  };
  run("truck", 0.9, 4);
  run("truck", 0.4, 1);   // unsure for a frame
  run("truck", 0.8, 3);
  run("street", 0.3, 5);  // the truck left: the street behind it, unsure
  run("bus", 0.7, 3);
  SegmentOptions o;
  EXPECT_EQ(segments_of(text, o).size(), 3u);  // every frame counts: truck 8, street 5, bus 3
  o.min_score = 0.5;
  std::vector<Segment> s = segments_of(text, o);
  ASSERT_EQ(s.size(), 3u);  // truck 4, truck 3, bus 3
  EXPECT_EQ(s[0].end_seq, 3u);
  EXPECT_EQ(s[1].start_seq, 5u);
  EXPECT_NEAR(s[1].score_mean(), 0.8, 1e-9);
  EXPECT_EQ(s[2].label, "bus");
  o.min_frames = 3;
  o.bridge = true;  // one unsure frame does not cut the truck in two; five are a change
  s = segments_of(text, o);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].label, "truck");
  EXPECT_EQ(s[0].start_seq, 0u);
  EXPECT_EQ(s[0].end_seq, 7u);
  EXPECT_EQ(s[0].frames, 7u);  // the unsure frame not counted
  EXPECT_EQ(s[1].label, "bus");
  EXPECT_EQ(s[1].start_seq, 13u);
}

TEST(Segments, AFileBeingWrittenIsReadUpToItsLastWholeLineAndABadLineIsNamed) {
  uint64_t incomplete = 0;
  const std::string whole = result("a", 0, "car") + result("a", 1, "car");
  const std::vector<Segment> s = segments_of(whole + "{\"topic\":\"results/a\",\"pay", {}, &incomplete);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].frames, 2u);
  EXPECT_EQ(incomplete, 1u);
  std::istringstream bad(whole + "not json\n" + result("a", 2, "car"));
  auto r = read_segments(bad, "results.jsonl", {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("results.jsonl:3: not a line of a vapipe results file"), std::string::npos)
      << r.status().message();
}

// Lines that are JSON but whose fields have other types than vapipe writes (a damaged disk, a hand
// edit): an event named by a number is no event; a result without a frame number is named. Before,
// nlohmann's type_error ended `vapipe segments` with "unexpected error" (found by tools/fuzz.sh).
TEST(Segments, FieldsOfAnotherTypeAreNoEventAndAResultWithoutItsFrameNumberIsNamed) {
  const std::string odd_event = "{\"topic\":\"events/a\",\"payload\":{\"event\":7,\"roi\":[0,0,1,1]}}\n";
  const std::string odd_picture = "{\"topic\":\"segments/a\",\"payload\":{\"event\":[\"picture\"]}}\n";
  const std::vector<Segment> s = segments_of(odd_event + odd_picture + result("a", 0, "car") + result("a", 1, "car"));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].frames, 2u);
  for (const char* seq : {"\"2\"", "-1", "2.5", "null"}) {
    std::istringstream bad(result("a", 0, "car") + result("a", 1, "car") +
                           "{\"topic\":\"results/a\",\"payload\":{\"seq\":" + seq + ",\"label\":\"car\"}}\n");
    auto r = read_segments(bad, "results.jsonl", {});
    ASSERT_FALSE(r.ok()) << seq;
    EXPECT_NE(r.status().message().find("results.jsonl:3: a result without its frame number (seq)"), std::string::npos)
        << r.status().message();
  }
}

// A live job's results files named by the date, read as one in order: a run that goes on past
// midnight is one segment; a bad line is named by its own file and line.
TEST(Segments, SeveralFilesAreReadAsOneInOrder) {
  std::istringstream day1(result("a", 0, "car") + result("a", 1, "truck")), day2(result("a", 2, "truck") + result("a", 3, "car"));
  std::vector<Segment> s;
  ASSERT_TRUE(for_each_segment({{&day1, "2026-11-30.jsonl"}, {&day2, "2026-12-01.jsonl"}}, {},
                               [&](const Segment& x) { s.push_back(x); })
                  .ok());
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[1].label, "truck");
  EXPECT_EQ(s[1].start_seq, 1u);
  EXPECT_EQ(s[1].end_seq, 2u);  // across the two files
  std::istringstream good(result("a", 0, "car")), bad(result("a", 1, "car") + "not json\n");
  const Status st = for_each_segment({{&good, "2026-11-30.jsonl"}, {&bad, "2026-12-01.jsonl"}}, {}, [](const Segment&) {});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("2026-12-01.jsonl:2: not a line of a vapipe results file"), std::string::npos)
      << st.message();
}

TEST(Segments, MediaTimesReadAsMinutesOrHours) {
  EXPECT_EQ(media_time_text(0), "0:00.000");
  EXPECT_EQ(media_time_text(72400), "1:12.400");
  EXPECT_EQ(media_time_text(3723456), "1:02:03.456");
  EXPECT_EQ(media_time_text(-1), "-");
}

// --clock capture / camera: the wall clock, in this machine's local time zone.
TEST(Segments, WallClocksReadAsLocalTimes) {
  {
    vapipe::testing::LocalZone zone("CET-1");  // UTC+1
    EXPECT_EQ(clock_time_text(1796093645520.9), "2026-12-01 03:54:05.521");
    EXPECT_EQ(clock_time_text(-1), "-");
  }
  vapipe::testing::LocalZone zone("UTC0");
  EXPECT_EQ(clock_time_text(1796093645520.9), "2026-12-01 02:54:05.521");
}

// --join: a camera recorded as consecutive files (an NVR's export, a stream per file), read as one
// stream in the order of the camera's clock. Files are 25 frames/s: 40 ms apart.
std::string file_result(const std::string& id, uint64_t seq, const std::string& label, double camera_ms,
                        double score = 0.9) {
  char camera[32];
  std::snprintf(camera, sizeof camera, "%.0f", camera_ms);
  return "{\"topic\":\"results/" + id + "\",\"payload\":{\"stream_id\":\"" + id + "\",\"seq\":" +
         std::to_string(seq) + ",\"pts_ms\":" + std::to_string(seq * 40) + ",\"label\":\"" + label +
         "\",\"score\":" + std::to_string(score) + ",\"camera_unix_ms\":" + camera + ",\"error\":null}}\n";
}

constexpr double kTwoPm = 1796220000000;  // a day at 14:00:00, as the files' recorded_at says

TEST(Segments, AJoinReadsACamerasFilesAsOneStreamInTheOrderOfItsClock) {
  // Three files named so that their ids do not sort by time, their lines interleaved as an archive job
  // writes them (several files at once): 14:00 (5 frames), 14:00:00.2 right after it, and 14:10.
  const std::string first = "gate-b", second = "gate-a", later = "gate-c";
  std::string text = "{\"topic\":\"events/gate-a\",\"payload\":{\"event\":\"started\",\"uri\":\"file:///nvr/a.mp4\"}}\n";
  text += "{\"topic\":\"events/gate-b\",\"payload\":{\"event\":\"started\",\"uri\":\"file:///nvr/b.mp4\"}}\n";
  const char* first_labels[] = {"car", "car", "car", "truck", "truck"};
  const char* second_labels[] = {"truck", "truck", "car", "car", "car"};
  for (uint64_t i = 0; i < 5; ++i) {
    text += file_result(later, i, "car", kTwoPm + 600000 + 40.0 * i);
    text += file_result(second, i, second_labels[i], kTwoPm + 200 + 40.0 * i, i == 1 ? 0.99 : 0.9);
    text += file_result(first, i, first_labels[i], kTwoPm + 40.0 * i);
    text += result("yard", i, "dog");  // not one of them: as without a join
  }
  SegmentOptions o;
  o.joins = {{"gate", "gate-*"}};
  const std::vector<Segment> all = segments_of(text, o);
  ASSERT_EQ(all.size(), 5u);
  std::vector<Segment> s;  // the join's, in order; the other stream's are as without a join
  std::vector<std::string> runs;
  for (const Segment& g : all) {
    if (g.stream_id == "yard") {
      EXPECT_EQ(g.frames, 5u);
      EXPECT_TRUE(g.start_stream.empty());
      continue;
    }
    EXPECT_EQ(g.stream_id, "gate");
    s.push_back(g);
    runs.push_back(g.label + " " + g.start_stream + ":" + std::to_string(g.start_seq) + "-" + g.end_stream + ":" +
                   std::to_string(g.end_seq) + " " + std::to_string(g.frames));
  }
  EXPECT_EQ(runs, (std::vector<std::string>{"car gate-b:0-gate-b:2 3",
                                             "truck gate-b:3-gate-a:1 4",  // across the files' boundary
                                             "car gate-a:2-gate-a:4 3",    // the 10-minute gap ends it
                                             "car gate-c:0-gate-c:4 5"}));
  ASSERT_EQ(s.size(), 4u);
  const Segment& truck = s[1];
  EXPECT_DOUBLE_EQ(truck.start_camera_ms, kTwoPm + 120);
  EXPECT_DOUBLE_EQ(truck.end_camera_ms, kTwoPm + 240);
  EXPECT_EQ(truck.uri, "file:///nvr/b.mp4");  // its first frame's file
  EXPECT_EQ(truck.best_stream, "gate-a");     // its best frame (0.99) is in the next file
  EXPECT_EQ(truck.best_seq, 1u);
  EXPECT_DOUBLE_EQ(truck.best_ms, 40);
  EXPECT_EQ(truck.best_uri, "file:///nvr/a.mp4");

  // Without the join, the truck is two runs of two frames, which --min-frames 3 leaves out; joined, one
  // of four. --stream selects the join by its name.
  o.min_frames = 3;
  o.stream_ids = {"gate"};
  o.labels = {"truck"};
  const std::vector<Segment> joined = segments_of(text, o);
  ASSERT_EQ(joined.size(), 1u);
  EXPECT_EQ(joined[0].frames, 4u);
  o.joins.clear();
  o.stream_ids.clear();
  EXPECT_TRUE(segments_of(text, o).empty());

  // A gap tolerance below the one between the first two files (40 ms from frame to frame) cuts there.
  o.joins = {{"gate", "gate-*"}};
  o.join_gap_ms = 30;
  o.min_frames = 1;
  const std::vector<Segment> cut = segments_of(text, o);
  ASSERT_EQ(cut.size(), 2u);
  EXPECT_EQ(cut[0].end_stream, "gate-b");
  EXPECT_EQ(cut[1].start_stream, "gate-a");
}

TEST(Segments, AJoinsFilesMustHaveTheCameraClockAndItsNameMustBeNew) {
  SegmentOptions o;
  o.joins = {{"gate", "gate-*"}};
  std::istringstream no_clock(file_result("gate-1", 0, "car", kTwoPm) + result("gate-2", 0, "car"));
  auto r = read_segments(no_clock, "results.jsonl", o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--join gate: stream 'gate-2' has no camera clock"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("recorded_at"), std::string::npos);

  std::istringstream taken(file_result("gate-1", 0, "car", kTwoPm) + result("gate", 0, "car"));
  r = read_segments(taken, "results.jsonl", o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("results.jsonl:2: --join gate: the results have a stream of that name already"),
            std::string::npos)
      << r.status().message();

  // A pattern that matches nothing, and files that overlap, are said; the rest is read as usual.
  std::vector<std::string> notes;
  o.note = [&](const std::string& n) { notes.push_back(n); };
  o.joins = {{"gate", "gate-*"}, {"door", "door-*"}};
  const std::vector<Segment> s = segments_of(
      file_result("gate-1", 0, "car", kTwoPm) + file_result("gate-1", 1, "car", kTwoPm + 5000) +
          file_result("gate-2", 0, "car", kTwoPm + 1000) + file_result("gate-2", 1, "car", kTwoPm + 1040),
      o);
  ASSERT_EQ(s.size(), 2u);  // not joined where they overlap
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_NE(notes[0].find("'gate-2' begins at"), std::string::npos) << notes[0];
  EXPECT_NE(notes[0].find("before 'gate-1' ends"), std::string::npos) << notes[0];
  EXPECT_EQ(notes[1], "--join door=door-*: no stream of the results matches door-*");
}

// --csv: for a spreadsheet. ImageNet's labels hold commas ("tench, Tinca tinca") and may hold quotes.
TEST(Segments, CsvLinesQuoteWhatNeedsItAndLeaveUnknownNumbersEmpty) {
  EXPECT_EQ(csv_field("truck"), "truck");
  EXPECT_EQ(csv_field("tench, Tinca tinca"), "\"tench, Tinca tinca\"");
  EXPECT_EQ(csv_field("a \"b\""), "\"a \"\"b\"\"\"");
  EXPECT_EQ(csv_field("two\nlines"), "\"two\nlines\"");
  const std::vector<Segment> s = segments_of(result("a", 0, "tench, Tinca tinca", 0.5) +
                                             result("a", 1, "tench, Tinca tinca", 0.75));
  ASSERT_EQ(s.size(), 1u);
  const std::string row = segment_csv_row(s[0], "0:00.000", "0:00.100", "");
  EXPECT_EQ(row, "a,\"tench, Tinca tinca\",0:00.000,0:00.100,2,0.6250,0,100,0,1,1,100,0.7500,,0,0,,,,,,,,");
  // As many fields as the header names (the quoted comma is not a field's end).
  auto fields = [](const std::string& line) {
    size_t n = 1;
    bool quoted = false;
    for (char c : line) {
      if (c == '"') quoted = !quoted;
      if (c == ',' && !quoted) ++n;
    }
    return n;
  };
  EXPECT_EQ(fields(row), fields(segment_csv_header()));
  EXPECT_EQ(segment_csv_header().substr(0, 32), "stream_id,label,from,to,frames,s");
  EXPECT_EQ(segment_csv_row(s[0], "-", "-", "/p/a.jpg").substr(0, 30), "a,\"tench, Tinca tinca\",,,2,0.6");
}

}  // namespace
}  // namespace vapipe::cli
