#include "pipeline/config.h"
#include "pipeline/http_url.h"

#include "tests/fakes/local_zone.h"
#include "tests/fakes/process_temp_dir.h"

#include <cstdint>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <unistd.h>

namespace vapipe {
namespace {

const char* kMinimal = R"(
streams:
  - id: cam1
    uri: test://ball?frames=10&width=320&height=240
infer:
  model: m.pt
  labels: m.txt
)";

// Each config, `head` and a case's text, is refused with an error that holds the case's words.
void expect_each_refused(const std::string& head, const std::vector<std::pair<std::string, std::string>>& cases,
                         const std::string& base_dir) {
  for (const auto& [text, expected] : cases) {
    auto bad = load_config_string(head + text, "job.yaml", base_dir);
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_NE(bad.status().message().find(expected), std::string::npos) << bad.status().message();
  }
}

TEST(Config, MinimalConfigGetsDefaultsAndResolvesPaths) {
  auto c = load_config_string(kMinimal, "job.yaml", "/cfg");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->streams.size(), 1u);
  EXPECT_EQ(c->streams[0].parsed.kind, UriKind::kTest);
  EXPECT_EQ(c->streams[0].parsed.test.pattern, "ball");
  EXPECT_EQ(c->streams[0].parsed.test.width, 320u);
  EXPECT_EQ(c->infer.model, "/cfg/m.pt");
  EXPECT_EQ(c->infer.model_name, "m");
  EXPECT_EQ(c->job.mode, JobMode::kArchive);
  EXPECT_EQ(c->ingest.queue_policy, QueuePolicy::kBlock);
  EXPECT_EQ(c->ingest.queue_capacity, 4u);  // back-pressure holds the decoder: few frames need wait
  EXPECT_EQ(c->batch.max_batch_size, 16u);
  EXPECT_EQ(c->publish.endpoint, "tcp://127.0.0.1:5560");
  EXPECT_EQ(c->transport.effective_tensor_slots(c->batch), 64u);
}

// A video file over HTTP ends by itself: with files, the job is an archive job by default (it was a
// live one, and read the file again and again for ever).
TEST(Config, AVideoFileOverHttpLeavesTheJobAnArchiveJob) {
  auto c = load_config_string(R"(
streams: [{id: gate, uri: "https://nvr.local/exports/gate.mp4"}, {id: yard, uri: "yard.mkv"}]
infer: {model: m.pt, labels: m.txt}
)", "web.yaml", "/cfg");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->job.mode, JobMode::kArchive);
}

TEST(Config, NetworkStreamMakesTheJobLiveWithDropOldest) {
  auto c = load_config_string(R"(
streams: [{id: cam, uri: "rtsp://user:secret@10.0.0.1/stream"}]
infer: {model: m.pt, labels: m.txt}
)", "live.yaml", "/cfg");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->job.mode, JobMode::kLive);
  EXPECT_EQ(c->ingest.queue_policy, QueuePolicy::kDropOldest);
  EXPECT_EQ(c->ingest.queue_capacity, 8u);  // what a burst may queue before the oldest is dropped
  EXPECT_TRUE(c->ingest.reconnect);
  EXPECT_EQ(c->ingest.reconnect_delay_s, 1.0);
  EXPECT_EQ(c->ingest.reconnect_max_delay_s, 30.0);
  EXPECT_EQ(c->ingest.reconnect_attempts, 0u);
  EXPECT_EQ(c->ingest.stall_timeout_s, 10.0);
}

// YAML anchors and merge keys: settings shared by several cameras are written once, under a top-level
// "x-" key (the config's own, ignored otherwise) or in the first camera itself. A camera's own key wins
// over a merged one; of two merged mappings, the first. Errors in a merged value name the line where
// it was written.
TEST(Config, MergeKeysShareSettingsBetweenStreams) {
  auto c = load_config_string(R"(
x-lobby: &lobby {max_fps: 2, rtsp_latency_ms: 500, roi: [0, 0, 0.5, 1]}
x-fast: &fast {max_fps: 10, keyframes_only: false}
streams:
  - {<<: *lobby, id: a, uri: "rtsp://10.0.0.1/a"}
  - {<<: *lobby, id: b, uri: "rtsp://10.0.0.1/b", max_fps: 5}
  - {<<: [*fast, *lobby], id: c, uri: "rtsp://10.0.0.1/c"}
  - &plain {id: d, uri: "rtsp://10.0.0.1/d", max_fps: 1}
  - {<<: *plain, id: e, uri: "rtsp://10.0.0.1/e"}
ingest: {<<: *fast}
infer: {model: m.pt, labels: m.txt}
)", "merge.yaml", "/cfg");
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->streams.size(), 5u);
  EXPECT_EQ(c->streams[0].max_fps, 2);
  EXPECT_EQ(c->streams[0].rtsp_latency_ms, 500u);
  EXPECT_EQ(c->streams[0].roi, (std::array<double, 4>{0, 0, 0.5, 1}));
  EXPECT_EQ(c->streams[0].line, 5);  // its own line, for errors about it
  EXPECT_EQ(c->streams[1].max_fps, 5);  // its own key wins
  EXPECT_EQ(c->streams[2].max_fps, 10);  // the first merged mapping wins
  EXPECT_EQ(c->streams[2].keyframes_only, false);
  EXPECT_EQ(c->streams[2].rtsp_latency_ms, 500u);
  EXPECT_EQ(c->streams[4].max_fps, 1);
  EXPECT_EQ(c->streams[4].id, "e");
  EXPECT_EQ(c->ingest.max_fps, 10);

  auto bad = load_config_string(R"(
x-cams: &cams {max_fps: lots}
streams:
  - {<<: *cams, id: a, uri: "rtsp://10.0.0.1/a"}
infer: {model: m.pt, labels: m.txt}
)", "merge.yaml", "/cfg");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("merge.yaml:2: streams[0].max_fps: expected a number"), std::string::npos)
      << bad.status().message();
  auto not_a_mapping = load_config_string(R"(
streams:
  - {<<: 3, id: a, uri: "rtsp://10.0.0.1/a"}
infer: {model: m.pt, labels: m.txt}
)", "merge.yaml", "/cfg");
  ASSERT_FALSE(not_a_mapping.ok());
  EXPECT_NE(not_a_mapping.status().message().find(
                "merge.yaml:3: streams[0].<<: expected an alias of a mapping (<<: *name) or a list of them, got '3'"),
            std::string::npos)
      << not_a_mapping.status().message();
  // Top-level keys other than x- ones are still checked.
  auto unknown = load_config_string("streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\ny-cams: 1\n",
                                    "merge.yaml", "/cfg");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("y-cams: unknown key"), std::string::npos) << unknown.status().message();
}

TEST(Config, ReconnectionSettings) {
  auto c = load_config_string(R"(
streams: [{id: cam, uri: "rtsp://10.0.0.1/stream"}]
infer: {model: m.pt, labels: m.txt}
ingest: {reconnect: false, reconnect_delay_s: 0.5, reconnect_max_delay_s: 8, reconnect_attempts: 5, stall_timeout_s: 0}
)", "live.yaml", "/cfg");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_FALSE(c->ingest.reconnect);
  EXPECT_EQ(c->ingest.reconnect_delay_s, 0.5);
  EXPECT_EQ(c->ingest.reconnect_max_delay_s, 8.0);
  EXPECT_EQ(c->ingest.reconnect_attempts, 5u);
  EXPECT_EQ(c->ingest.stall_timeout_s, 0.0);
}

// How long a file may show no video stream, unsaid, before it ends with an error: 60 s, longer for a
// slow network file system.
TEST(Config, FileOpenTimeout) {
  auto c = load_config_string("streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\n", "job.yaml", "/cfg");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->ingest.file_open_timeout_s, 60.0);
  c = load_config_string("streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\n"
                         "ingest: {file_open_timeout_s: 300}\n", "job.yaml", "/cfg");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->ingest.file_open_timeout_s, 300.0);
  auto bad = load_config_string("streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\n"
                                "ingest: {file_open_timeout_s: 0}\n", "job.yaml", "/cfg");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("job.yaml:3: ingest.file_open_timeout_s: expected a number from 1 to 3600"),
            std::string::npos) << bad.status().message();
}

// Interlaced frames are read from their first field unless `deinterlace: off` (YAML's `off`, read as
// the word it is, not as false).
TEST(Config, DeinterlaceReadsTheFirstFieldUnlessOff) {
  const std::string base = "streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\n";
  auto c = load_config_string(base, "job.yaml", "/cfg");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->ingest.first_field);
  c = load_config_string(base + "ingest: {deinterlace: off}\n", "job.yaml", "/cfg");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_FALSE(c->ingest.first_field);
  auto bad = load_config_string(base + "ingest: {deinterlace: yadif}\n", "job.yaml", "/cfg");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("job.yaml:3: ingest.deinterlace: expected one of first_field | off, got 'yadif'"),
            std::string::npos) << bad.status().message();
}

TEST(Config, PlainPathBecomesAbsoluteFileUri) {
  auto c = load_config_string(R"(
streams: [{id: clip, uri: media/a.mp4}]
infer: {model: m.pt, labels: m.txt}
)", "x.yaml", "/data/jobs");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->streams[0].uri, "file:///data/jobs/media/a.mp4");
}

// Each bad config must name the file, the line and the key.
struct BadCase {
  const char* yaml;
  const char* expected;  // substring of the error
};

class BadConfig : public ::testing::TestWithParam<BadCase> {};

// A bracket that does not close is not an unquoted URI: no quoting hint (a comma, or ? & in quotes, alone).
// An apostrophe inside a plain scalar opens no quote: the query after it still gets the hint.
TEST(BadConfigHints, AnApostropheInAPlainValueKeepsTheQuotingHint) {
  auto c = load_config_string("streams:\n  - {id: a, uri: rtsp://o'neil:pw@10.0.0.5/s?ch=1&sub=0}\n", "bad.yaml", "/cfg");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("(in a { ... } mapping, quote a value that holds"), std::string::npos)
      << c.status().message();
}

TEST(BadConfigHints, AFlowMappingWithCommasAndQuotedQueriesGetsNoQuotingHint) {
  auto c = load_config_string("job: {name: \"a?b&c\", x: [1, 2}\n", "bad.yaml", "/cfg");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "bad.yaml:1: YAML syntax error: illegal flow end at column 30");
}

TEST_P(BadConfig, ErrorNamesFileLineAndKey) {
  auto c = load_config_string(GetParam().yaml, "bad.yaml", "/cfg");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find(GetParam().expected), std::string::npos) << c.status().message();
  EXPECT_EQ(c.status().message().rfind("bad.yaml", 0), 0u) << c.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadConfig,
    ::testing::Values(
        BadCase{"streams: [{id: a, uri: 'test://smpte'}]\ninfer: {model: m, labels: l}\nbatch:\n  max_batch_sise: 4\n",
                "bad.yaml:4: batch.max_batch_sise: unknown key"},
        BadCase{"streams: [{id: a, uri: 'test://smpte'}]\ninfer: {model: m, labels: l}\nbatch:\n  max_batch_size: lots\n",
                "bad.yaml:4: batch.max_batch_size: expected auto or an integer from 1 to 4096, got 'lots'"},
        BadCase{"streams: [{id: a, uri: 'test://smpte'}]\ninfer: {model: m, labels: l}\nbatch: {max_batch_size: -3}\n",
                "batch.max_batch_size: expected auto or an integer"},
        BadCase{"streams: [{id: a, uri: 'test://smpte'}]\ninfer: {model: m, labels: l}\njob: {stage_timeout_s: -1}\n",
                "bad.yaml:3: job.stage_timeout_s: expected a number from 0 to 86400"},
        BadCase{"streams: [{id: a, uri: 'test://nosuch'}]\ninfer: {model: m, labels: l}\n",
                "bad.yaml:1: streams[0].uri: unknown test pattern 'nosuch'"},
        BadCase{"streams: [{id: a, uri: 'test://ball?fps=0'}]\ninfer: {model: m, labels: l}\n",
                "streams[0].uri: bad value '0' for test URI parameter 'fps'"},
        BadCase{"streams:\n  - {id: a, uri: 'test://ball'}\n  - {id: a, uri: 'test://snow'}\ninfer: {model: m, labels: l}\n",
                "bad.yaml:3: streams[1].id: duplicate stream id 'a'"},
        BadCase{"streams: [{id: 'a b', uri: 'test://ball'}]\ninfer: {model: m, labels: l}\n",
                "streams[0].id: stream id 'a b' may only contain"},
        BadCase{"streams: [{id: '..', uri: 'test://ball'}]\ninfer: {model: m, labels: l}\n",
                "streams[0].id: stream id '..' may not be '.' or '..'"},
        BadCase{"streams: []\ninfer: {model: m, labels: l}\n", "streams: expected a non-empty list"},
        BadCase{"streams: [{id: a, uri: 'test://ball'}]\n", "infer.model: missing"},
        BadCase{"streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\npreprocess: {std: [1, 0, 1]}\n",
                "preprocess.std[1]: expected a positive number"},
        BadCase{"streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\npreprocess: {resize: fit}\n",
                "bad.yaml:3: preprocess.resize: expected one of stretch | center_crop | letterbox, got 'fit'"},
        BadCase{"streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\npreprocess:\n  pad_color: [114, 114, 114]\n",
                "bad.yaml:4: preprocess.pad_color: is the colour of letterbox's margins: it needs resize: letterbox "
                "(resize is stretch)"},
        BadCase{"streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\npreprocess: {resize: letterbox, "
                "pad_color: [0, 256, 0]}\n",
                "preprocess.pad_color[1]: expected a list of 3 integers from 0 to 255, got '256'"},
        BadCase{"streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\npreprocess: {resize: letterbox, "
                "pad_color: 114}\n",
                "preprocess.pad_color: expected a list of 3 integers from 0 to 255, got '114'"},
        BadCase{"streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\njob: {mode: fast}\n",
                "bad.yaml:3: job.mode: expected archive | live, got 'fast'"},
        BadCase{"streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l, device: tpu}\n",
                "infer.device: expected auto | cpu | cuda | cuda:N, got 'tpu'"},
        BadCase{"streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\nbatch: {max_batch_size: 32}\ntransport: {tensor_slots: 8}\n",
                "transport.tensor_slots: must be at least batch.max_batch_size"},
        BadCase{"streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\ningest:\n  reconnect_delay_s: 5\n  reconnect_max_delay_s: 2\n",
                "bad.yaml:5: ingest.reconnect_max_delay_s: must be at least ingest.reconnect_delay_s (5), got 2"},
        BadCase{"streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\ningest: {max_open_streams: many}\n",
                "bad.yaml:3: ingest.max_open_streams: expected an integer from 0 to 1000000, got 'many'"},
        BadCase{"streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\ningest: {decoder_threads: 65}\n",
                "bad.yaml:3: ingest.decoder_threads: expected auto or an integer from 0 to 64, got '65'"},
        BadCase{"streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\ningest: {reconnect: sometimes}\n",
                "bad.yaml:3: ingest.reconnect: expected true or false, got 'sometimes'"},
        BadCase{"streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\npublish:\n  metrics_address: 9560\n",
                "bad.yaml:4: publish.metrics_address: expected HOST:PORT such as 127.0.0.1:9560 or 0.0.0.0:9560, got '9560'"},
        BadCase{"streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\npublish: {metrics_address: 'localhost:99999'}\n",
                "publish.metrics_address: expected HOST:PORT"},
        BadCase{"streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\nextra: 1\n",
                "bad.yaml:3: extra: unknown key"},
        BadCase{"streams: [{id: a, uri: 'test://ball'}\n", "YAML syntax error"},
        // A tab from an editor's tab key: yaml-cpp says only "illegal block entry".
        BadCase{"streams:\n\t- {id: a, uri: 'test://ball'}\ninfer: {model: m, labels: l}\n",
                "bad.yaml:2: YAML syntax error: illegal block entry at column 2 (the line is indented with a tab: YAML indents with "
                "spaces only)"},
        // A uri with a query, unquoted in a flow mapping: yaml-cpp says only "unknown token".
        BadCase{"streams:\n  - {id: cam1, uri: test://ball?frames=300&motion=wavy}\ninfer: {model: m, labels: l}\n",
                "bad.yaml:2: YAML syntax error: unknown token at column "},
        BadCase{"streams:\n  - {id: cam1, uri: test://ball?frames=300&motion=wavy}\ninfer: {model: m, labels: l}\n",
                "(in a { ... } mapping, quote a value that holds ? & # , * or :, as a uri's query does: "},
        // Columns in characters, as an editor counts them (yaml-cpp counts bytes: an é before was off by one).
        BadCase{"job: {name: \"\u00e9t\u00e9\", x: [1, 2}\n", "bad.yaml:1: YAML syntax error: illegal flow end at column 28"},
        BadCase{"\xEF\xBB\xBFjob: {name: \"\u00e9t\u00e9\", x: [1, 2}\n", "illegal flow end at column 28"},
        // A key given twice: yaml-cpp would answer the first and drop the second without a word.
        BadCase{"streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\nbatch:\n  max_batch_size: 32\n"
                "batch:\n  max_batch_size: 4\n",
                "bad.yaml:5: batch: given twice in one mapping (first on line 3): only one of the two would count"},
        BadCase{"streams:\n  - {id: a, uri: 'test://ball', max_fps: 1, max_fps: 5}\ninfer: {model: m, labels: l}\n",
                "bad.yaml:2: streams[0].max_fps: given twice in one mapping (first on line 2)"},
        // A typo of a key whose absence another check meets first: the typo is said (it was "topics: not
        // given, so segments/ ... need publish.segments_min_frames", "username: required with a password").
        BadCase{"streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\npublish:\n  webhooks:\n"
                "    - url: http://hooks.local/x\n      topicz: [events/]\n",
                "bad.yaml:6: publish.webhooks[0].topicz: unknown key (did you mean topics?)"},
        BadCase{"streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\npublish:\n  mqtt:\n"
                "    - {url: 'mqtt://broker:1883', topics: [events/], usename: u, password: p}\n",
                "publish.mqtt[0].usename: unknown key (did you mean username?)"},
        BadCase{"streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\nbatchh: {max_batch_size: 4}\n",
                "bad.yaml:3: batchh: unknown key (did you mean batch?)"},
        // Aliases of aliases, 8 levels of 9 (a "billion laughs"): walked each time used, refused, not hours.
        BadCase{"x-l:\n  a: &a [x,x,x,x,x,x,x,x,x]\n  b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n  c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
                "  d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n  e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
                "  f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n  g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"
                "  h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\nstreams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\n",
                "(aliases): the config expands to more than 1000000 nodes through its aliases"},
        // yaml-cpp reads a leading 0 as octal (010 is 8): refused, said why.
        BadCase{"streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l, top_k: 010}\n",
                "bad.yaml:2: infer.top_k: expected an integer from 1 to "},
        BadCase{"streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\ningest: {rtsp_latency_ms: 0200}\n",
                "got '0200' (YAML reads a leading 0 as octal: write it without)"},
        // Two configs pasted into one file: the second would go unread.
        BadCase{"streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\n---\njob: {name: second}\n",
                "bad.yaml:4: a second YAML document (after '---'): a config is one document"},
        BadCase{"streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\npreprocess: {mean: [0.5, 0.5]}\n",
                "preprocess.mean: expected a list of 3 numbers, got a list of 2 items"},
        // A key with nothing after it: a value forgotten (or indented onto the next line), not its default.
        BadCase{"streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\njob:\n  drain_timeout_s:\n"
                "  stage_timeout_s: 60\n",
                "bad.yaml:4: job.drain_timeout_s: has no value: give it one, or leave the key out for its default"},
        BadCase{"streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\npublish:\n  mqtt:\n"
                "    - {url: 'mqtt://broker:1883', topics: [events/], retain: ~}\n",
                "bad.yaml:5: publish.mqtt[0].retain: has no value"},
        // (lists and mappings that are values, too: they took their defaults, every topic)
        BadCase{"streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\npublish:\n  webhooks:\n"
                "    - url: http://hooks.local/x\n      topics:\n",
                "bad.yaml:6: publish.webhooks[0].topics: has no value"},
        BadCase{"streams:\n  - id: a\n    uri: 'test://ball'\n    rotate:\ninfer: {model: m, labels: l}\n",
                "bad.yaml:4: streams[0].rotate: has no value"},
        // Latin-1, as an editor set to a Windows code page saves it: not UTF-8.
        BadCase{"streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: mod\xE8le.pt, labels: l}\n",
                "bad.yaml:2: not UTF-8 text (byte 0xE8 at column 19): save the file as UTF-8"}));

// Document markers around the one document are no second document: "---" before it (with a comment),
// "..." after it, comments after that.
TEST(Config, DocumentMarkersAroundTheOneDocumentAreTakenAsOne) {
  for (const std::string& text :
       {std::string("--- # the job\nstreams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\n"),
        std::string("%YAML 1.2\n---\nstreams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\n...\n# end\n"),
        std::string("streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\n---\n# nothing after\n"),
        std::string("streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: '---', labels: l}\n")}) {
    auto c = load_config_string(text, "job.yaml", "/cfg");
    EXPECT_TRUE(c.ok()) << text << ": " << c.status().message();
  }
}

// A NUL after a backslash in a double-quoted string: yaml-cpp's message holds the byte, shown escaped
// (it went to the terminal as it was).
TEST(Config, AControlByteInAYamlErrorIsShownEscaped) {
  const std::string text = std::string("streams: [{id: a, uri: \"test://ball\\") + '\0' + "\"}]\ninfer: {model: m, labels: l}\n";
  auto c = load_config_string(text, "bad.yaml", "/cfg");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("YAML syntax error: unknown escape character: \\x00"), std::string::npos)
      << c.status().message();
  EXPECT_EQ(c.status().message().find('\0'), std::string::npos);
}

TEST(Config, MissingFileIsNotFound) {
  auto c = load_config_file("/nonexistent/job.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("/nonexistent/job.yaml"), std::string::npos);
  EXPECT_NE(c.status().message().find("(No such file or directory)"), std::string::npos) << c.status().message();
  // A folder is not read as an empty config.
  auto folder = load_config_file(std::filesystem::temp_directory_path().string());
  ASSERT_FALSE(folder.ok());
  EXPECT_NE(folder.status().message().find(": is a folder, not a config file"), std::string::npos) << folder.status().message();
}

TEST(Config, FilePathsResolveAgainstTheConfigFolder) {
  auto dir = std::filesystem::temp_directory_path() / "vapipe-config-test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "job.yaml") << kMinimal;
  auto c = load_config_file((dir / "job.yaml").string());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->infer.model, (dir / "m.pt").string());
  // "~/" is the user's home, as in a shell, for every path and a stream's plain path.
  std::ofstream(dir / "home.yaml") << "streams: [{id: a, uri: ~/videos/a.mp4}]\n"
                                      "infer: {model: ~/models/m.pt, labels: ~/models/m.txt}\n";
  const char* saved = std::getenv("HOME");
  const std::string before = saved ? saved : "";
  setenv("HOME", "/home/operator", 1);
  auto home = load_config_file((dir / "home.yaml").string());
  saved ? setenv("HOME", before.c_str(), 1) : unsetenv("HOME");
  ASSERT_TRUE(home.ok()) << home.status().message();
  EXPECT_EQ(home->infer.model, "/home/operator/models/m.pt");
  EXPECT_EQ(home->infer.labels, "/home/operator/models/m.txt");
  EXPECT_EQ(home->streams[0].uri, "file:///home/operator/videos/a.mp4");
  std::filesystem::remove_all(dir);
}

// A stage `vapipe run` started: the config the job started with (its copy), not the file as it is.
TEST(Config, TheTextReadBeforeIsParsedInsteadOfTheFileAndStillNamedByIt) {
  auto dir = std::filesystem::temp_directory_path() / "vapipe-config-text-test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "job.yaml") << "streams: [\n";  // half saved since the job started
  const std::string as_started = kMinimal;
  ConfigLoadOptions options;
  options.file_text = &as_started;
  std::string text;
  auto c = load_config_file((dir / "job.yaml").string(), &text, options);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(text, as_started);
  EXPECT_EQ(c->source, (dir / "job.yaml").string());
  EXPECT_EQ(c->infer.model, (dir / "m.pt").string());  // against the file's folder, as before
  // Not read at all: a file that is gone (or on a share that does not answer) is no matter.
  auto gone = load_config_file((dir / "gone" / "job.yaml").string(), nullptr, options);
  ASSERT_TRUE(gone.ok()) << gone.status().message();
  EXPECT_EQ(gone->infer.model, (dir / "gone" / "m.pt").string());
  // Its errors name the file and line, as the file's own would.
  const std::string wrong = "streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m.pt, labels: l.txt}\nbatch: {max_batch_size: 0}\n";
  options.file_text = &wrong;
  auto bad = load_config_file((dir / "job.yaml").string(), nullptr, options);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find((dir / "job.yaml").string() + ":3"), std::string::npos) << bad.status().message();
  // Without it, the file itself (half saved) is read.
  EXPECT_FALSE(load_config_file((dir / "job.yaml").string()).ok());
  std::filesystem::remove_all(dir);
}

TEST(Config, EmbeddedDemoConfigLoads) {
  auto c = load_demo_config();
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->job.name, "demo");
  EXPECT_GE(c->streams.size(), 3u);
  EXPECT_TRUE(std::filesystem::exists(c->infer.model)) << c->infer.model;
  EXPECT_TRUE(std::filesystem::exists(c->infer.labels)) << c->infer.labels;
  for (const auto& s : c->streams) {
    if (s.parsed.kind == UriKind::kFile) {
      EXPECT_TRUE(std::filesystem::exists(file_uri_path(s.uri))) << s.uri;
    }
  }
}

TEST(Config, GpusTakesAllNoneOrAListOfIndices) {
  auto all = load_config_string(kMinimal, "job.yaml", "/cfg");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->gpus.kind, GpuSelection::Kind::kAll);
  EXPECT_EQ(all->preprocess.device, "auto");
  EXPECT_EQ(all->infer.precision, DType::kFloat32);
  auto none = load_config_string(std::string(kMinimal) + "gpus: none\n", "job.yaml", "/cfg");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->gpus.kind, GpuSelection::Kind::kNone);
  auto list = load_config_string(std::string(kMinimal) + "gpus: [2, 0]\n", "job.yaml", "/cfg");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->gpus.kind, GpuSelection::Kind::kList);
  EXPECT_EQ(list->gpus.list, (std::vector<int>{2, 0}));
  EXPECT_EQ(list->gpus.line, 8);
}

TEST(Config, BadGpusAreErrorsNamingTheLine) {
  auto dup = load_config_string(std::string(kMinimal) + "gpus: [1, 1]\n", "job.yaml", "/cfg");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("job.yaml:8: gpus[1]: GPU 1 is listed twice"), std::string::npos)
      << dup.status().message();
  auto word = load_config_string(std::string(kMinimal) + "gpus: some\n", "job.yaml", "/cfg");
  ASSERT_FALSE(word.ok());
  EXPECT_NE(word.status().message().find("job.yaml:8: gpus: expected all, none or a list"), std::string::npos)
      << word.status().message();
  auto negative = load_config_string(std::string(kMinimal) + "gpus: [-1]\n", "job.yaml", "/cfg");
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("gpus[0]: expected a GPU index"), std::string::npos);
}

TEST(Config, InferPrecisionAndChannelsLast) {
  auto c = load_config_string(R"(
streams: [{id: a, uri: "test://ball?frames=1"}]
infer: {model: m.pt, labels: m.txt, precision: fp16, channels_last: false, jit_optimize: true, batch_shapes: padded,
        cuda_graphs: on}
)", "job.yaml", "/cfg");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->infer.cuda_graphs, "on");
  EXPECT_EQ(c->infer.precision, DType::kFloat16);
  EXPECT_FALSE(c->infer.channels_last);
  EXPECT_TRUE(c->infer.jit_optimize);
  EXPECT_EQ(c->infer.batch_shapes, "padded");
  auto shapes = load_config_string(R"(
streams: [{id: a, uri: "test://ball?frames=1"}]
infer: {model: m.pt, labels: m.txt, batch_shapes: buckets}
)", "job.yaml", "/cfg");
  ASSERT_FALSE(shapes.ok());
  EXPECT_NE(shapes.status().message().find("infer.batch_shapes: expected one of auto | exact | padded, got 'buckets'"),
            std::string::npos)
      << shapes.status().message();
  auto graphs = load_config_string(R"(
streams: [{id: a, uri: "test://ball?frames=1"}]
infer: {model: m.pt, labels: m.txt, batch_shapes: exact, cuda_graphs: on}
)", "job.yaml", "/cfg");
  ASSERT_FALSE(graphs.ok());
  EXPECT_NE(graphs.status().message().find("job.yaml:3: infer.cuda_graphs: 'on' needs batch_shapes padded or auto"),
            std::string::npos)
      << graphs.status().message();
  auto bad = load_config_string(R"(
streams: [{id: a, uri: "test://ball?frames=1"}]
infer: {model: m.pt, labels: m.txt, precision: int8}
)", "job.yaml", "/cfg");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("infer.precision: expected one of fp32 | fp16, got 'int8'"), std::string::npos)
      << bad.status().message();
}

TEST(Config, LetterboxTakesItsPadColour) {
  auto c = load_config_string(R"(
streams: [{id: a, uri: 'test://ball'}]
infer: {model: m.pt, labels: m.txt}
preprocess: {resize: letterbox, pad_color: [114, 0, 255]}
)", "job.yaml", "/cfg");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->preprocess.resize, "letterbox");
  EXPECT_EQ(c->preprocess.pad_color, (std::array<uint32_t, 3>{114, 0, 255}));
  auto plain = load_config_string("streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m.pt, labels: m.txt}\n"
                                  "preprocess: {resize: letterbox}\n", "job.yaml", "/cfg");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(plain->preprocess.pad_color, (std::array<uint32_t, 3>{0, 0, 0}));  // black by default
}

TEST(Config, ShippedMultiGpuExampleLoads) {
  auto c = load_config_file(std::string(VAPIPE_SOURCE_DIR) + "/configs/multi-gpu.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->gpus.kind, GpuSelection::Kind::kAll);
  EXPECT_EQ(c->streams.size(), 8u);
  EXPECT_EQ(c->infer.precision, DType::kFloat16);
  EXPECT_EQ(c->preprocess.dtype, DType::kFloat16);
}

TEST(Config, FrameSlotsDefaultToTwoPerStreamOfTheLane) {
  auto c = load_config_string(kMinimal, "job.yaml", "/cfg");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->transport.effective_frame_slots(1), 32u);
  EXPECT_EQ(c->transport.effective_frame_slots(80), 160u);
  auto fixed = load_config_string(std::string(kMinimal) + "transport: {frame_slots: 8}\n", "job.yaml", "/cfg");
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(fixed->transport.effective_frame_slots(80), 8u);
  auto one = load_config_string(std::string(kMinimal) + "transport: {frame_slots: 1}\n", "job.yaml", "/cfg");
  ASSERT_FALSE(one.ok());
  EXPECT_NE(one.status().message().find("transport.frame_slots"), std::string::npos);
}

// A slot holds a 1080p RGB frame in shared memory, and a 4K NV12 frame (NVDEC's, which is not scaled
// to fit) in GPU memory, unless set.
TEST(Config, FrameSlotBytesDependOnWhereThePoolIs) {
  auto c = load_config_string(kMinimal, "job.yaml", "/cfg");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->transport.effective_frame_slot_bytes(false), 1920u * 1080 * 3);
  EXPECT_EQ(c->transport.effective_frame_slot_bytes(true), 3840u * 2160 * 3 / 2);
  auto fixed = load_config_string(std::string(kMinimal) + "transport: {frame_slot_bytes: 100000}\n", "job.yaml", "/cfg");
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(fixed->transport.effective_frame_slot_bytes(false), 100000u);
  EXPECT_EQ(fixed->transport.effective_frame_slot_bytes(true), 100000u);
  auto tiny = load_config_string(std::string(kMinimal) + "transport: {frame_slot_bytes: 100}\n", "job.yaml", "/cfg");
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.status().message().find("job.yaml:"), std::string::npos) << tiny.status().message();
  EXPECT_NE(tiny.status().message().find("transport.frame_slot_bytes: must be 0"), std::string::npos)
      << tiny.status().message();
}

TEST(Config, EveryShippedConfigLoads) {
  size_t checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(VAPIPE_SOURCE_DIR) + "/configs")) {
    if (entry.path().extension() != ".yaml") continue;
    auto c = load_config_file(entry.path().string());
    EXPECT_TRUE(c.ok()) << entry.path() << ": " << c.status().message();
    ++checked;
  }
  EXPECT_GE(checked, 5u);  // demo, archive, watched-folder, rtsp-cameras, multi-gpu
}

// docs/config.md's annotated example claims to show every key: it must load (unknown keys are errors,
// so a key renamed in the code and not in the docs fails here), and with the values it states.
// Secrets stay out of the file: ${NAME} in a string value comes from the environment.
TEST(Config, StringValuesTakeEnvironmentVariables) {
  ::setenv("VAPIPE_TEST_CAM_PASSWORD", "s3cr:t", 1);
  ::unsetenv("VAPIPE_TEST_UNSET");
  ::setenv("VAPIPE_TEST_EMPTY", "", 1);  // set, but to nothing (QA_PW= in a shell)
  auto c = load_config_string(R"(
streams:
  - {id: cam, uri: "rtsp://admin:${VAPIPE_TEST_CAM_PASSWORD}@10.0.0.1/stream"}
  - {id: lit, uri: "test://ball?frames=${VAPIPE_TEST_UNSET:-5}"}
infer: {model: "$${HOME}/m.pt", labels: m.txt}
)", "job.yaml", "/cfg");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->streams[0].uri, "rtsp://admin:s3cr:t@10.0.0.1/stream");
  EXPECT_EQ(c->streams[1].parsed.test.frames, 5u);
  EXPECT_EQ(c->infer.model, "/cfg/${HOME}/m.pt");  // $${ is a literal ${
  for (const auto& [yaml, expected] : std::vector<std::pair<std::string, std::string>>{
           {"streams: [{id: a, uri: 'rtsp://u:${VAPIPE_TEST_UNSET}@h/s'}]\ninfer: {model: m, labels: l}\n",
            "job.yaml:1: streams[0].uri: environment variable VAPIPE_TEST_UNSET is not set"},
           {"streams: [{id: a, uri: 'rtsp://u:${VAPIPE_TEST_EMPTY}@h/s'}]\ninfer: {model: m, labels: l}\n",
            "job.yaml:1: streams[0].uri: environment variable VAPIPE_TEST_EMPTY is empty (give it a value"},
           {"streams: [{id: a, uri: 'rtsp://h/${1BAD}'}]\ninfer: {model: m, labels: l}\n",
            "streams[0].uri: expected ${NAME} or ${NAME:-default}"},
           {"streams: [{id: a, uri: 'rtsp://h/${OPEN'}]\ninfer: {model: m, labels: l}\n",
            "streams[0].uri: '${' without its '}'"}}) {
    auto bad = load_config_string(yaml, "job.yaml", "/cfg");
    ASSERT_FALSE(bad.ok()) << yaml;
    EXPECT_NE(bad.status().message().find(expected), std::string::npos) << bad.status().message();
  }
  // A password from the environment with a character URIs reserve: refused, naming the stream and
  // what to escape, never the password.
  ::setenv("VAPIPE_TEST_CAM_PASSWORD", "Adm1n@2024#", 1);
  auto reserved = load_config_string("streams:\n  - {id: gate, uri: 'rtsp://admin:${VAPIPE_TEST_CAM_PASSWORD}@10.0.0.1/s'}\n"
                                     "infer: {model: m, labels: l}\n", "job.yaml", "/cfg");
  ASSERT_FALSE(reserved.ok());
  EXPECT_NE(reserved.status().message().find("job.yaml:2: streams[0].uri: "), std::string::npos)
      << reserved.status().message();
  EXPECT_NE(reserved.status().message().find("%40"), std::string::npos) << reserved.status().message();
  EXPECT_EQ(reserved.status().message().find("Adm1n"), std::string::npos) << reserved.status().message();
  // A Kubernetes Secret made with --from-file keeps the file's final newline: refused, named, not shown.
  ::setenv("VAPIPE_TEST_CAM_PASSWORD", "s3cret\n", 1);
  auto newline = load_config_string("streams:\n  - {id: gate, uri: 'rtsp://admin:${VAPIPE_TEST_CAM_PASSWORD}@10.0.0.1/s'}\n"
                                    "infer: {model: m, labels: l}\n", "job.yaml", "/cfg");
  ASSERT_FALSE(newline.ok());
  EXPECT_NE(newline.status().message().find("job.yaml:2: streams[0].uri: environment variable VAPIPE_TEST_CAM_PASSWORD "
                                            "holds a line break at its end"),
            std::string::npos)
      << newline.status().message();
  EXPECT_EQ(newline.status().message().find("s3cret"), std::string::npos) << newline.status().message();
  ::unsetenv("VAPIPE_TEST_CAM_PASSWORD");
}

// Each case's YAML (after `head`, loaded from `dir`) is refused with a message that holds the case's
// expected text, and never `secret` (when given).
struct ConfigErrorCase {
  std::string yaml, expected;
};
void expect_config_errors(const std::string& head, const std::filesystem::path& dir,
                          const std::vector<ConfigErrorCase>& cases, const std::string& secret = "") {
  for (const ConfigErrorCase& bad : cases) {
    auto r = load_config_string(head + bad.yaml, "job.yaml", dir.string());
    ASSERT_FALSE(r.ok()) << bad.yaml;
    EXPECT_NE(r.status().message().find(bad.expected), std::string::npos) << r.status().message();
    if (!secret.empty()) {
      EXPECT_EQ(r.status().message().find(secret), std::string::npos);
    }
  }
}

// CURVE keys are read when the config loads: a bad key file is a config error naming key and file.
TEST(Config, CurveKeysAreReadAtLoadAndTheirErrorsNameKeyAndFile) {
  if (!curve_supported()) GTEST_SKIP() << "libzmq without CURVE";
  const auto dir = std::filesystem::temp_directory_path() / ("vapipe-config-curve-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const CurveKeyPair bus = generate_curve_key_pair().value(), alice = generate_curve_key_pair().value();
  ASSERT_TRUE(write_curve_key_files((dir / "bus").string(), bus).ok());
  std::ofstream(dir / "subscribers") << alice.public_key << "  # alice\n";
  std::ofstream(dir / "broken") << "not a key\n";
  const std::string head = "streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\n";
  auto c = load_config_string(head + "publish:\n  curve_secret_key: bus.secret\n  curve_authorized_keys: subscribers\n"
                              "transport: {mode: tcp, curve_secret_key: bus.secret}\n",
                              "job.yaml", dir.string());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->publish.curve_keys.public_key, bus.public_key);
  EXPECT_EQ(c->publish.curve_clients, std::vector<std::string>{alice.public_key});
  EXPECT_EQ(c->transport.curve_keys.secret_key, bus.secret_key);
  // Encryption runs on ZeroMQ's I/O threads: with CURVE, half the CPUs (1 to 4); without, one.
  EXPECT_EQ(c->transport.effective_io_threads(2), 1u);
  EXPECT_EQ(c->transport.effective_io_threads(16), 4u);
  c->transport.curve_keys = {};
  EXPECT_EQ(c->transport.effective_io_threads(16), 1u);
  c->transport.io_threads = 3;
  EXPECT_EQ(c->transport.effective_io_threads(16), 3u);

  expect_config_errors(head, dir, {
      ConfigErrorCase{"publish:\n  curve_secret_key: missing.secret\n",
          "job.yaml:4: publish.curve_secret_key: cannot read CURVE secret key file " + (dir / "missing.secret").string()},
      ConfigErrorCase{"publish:\n  curve_secret_key: broken\n",
          "job.yaml:4: publish.curve_secret_key: " + (dir / "broken").string() + ":1: expected a CURVE secret key"},
      ConfigErrorCase{"publish:\n  curve_authorized_keys: subscribers\n",
          "job.yaml:4: publish.curve_authorized_keys: needs publish.curve_secret_key"},
      ConfigErrorCase{"publish:\n  curve_secret_key: bus.secret\n  curve_authorized_keys: broken\n",
          "job.yaml:5: publish.curve_authorized_keys: " + (dir / "broken").string() + ":1:"},
      ConfigErrorCase{"transport:\n  curve_secret_key: bus.secret\n",
          "job.yaml:4: transport.curve_secret_key: only with transport.mode: tcp"},
      });
  std::filesystem::remove_all(dir);
}

// publish.webhooks: checked at load, so that a typo in a receiver's URL is an error naming the key and
// line rather than a failure at the first alert; errors never repeat the URL's path or a token.
TEST(Config, WebhooksAreCheckedAtLoadAndTheirErrorsNameTheKey) {
  const auto dir = std::filesystem::temp_directory_path() / ("vapipe-config-webhooks-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "hook.token") << "\xEF\xBB\xBF  s3cr3t-token  \n";  // (a byte order mark first)
  std::ofstream(dir / "empty.token") << "\n";
  std::ofstream(dir / "ca.pem") << "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  std::ofstream(dir / "ca.der") << "0\x82\x01";
  ::setenv("VAPIPE_TEST_ALERTS_KEY", "k-123", 1);
  const std::string head = "streams: [{id: gate, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\n";
  auto c = load_config_string(head + R"(publish:
  segments_min_frames: 5
  webhooks:
    - url: https://ha.local:8123/api/webhook/vapipe-gate-0d9e
      token_file: hook.token
      ca_file: ca.pem
    - url: http://10.0.0.5:5678/webhook?x=1
      topics: [events/, segments/gate]
      labels: [person, truck]
      cooldown_s: 300
      headers: {X-Api-Key: '${VAPIPE_TEST_ALERTS_KEY}'}
      format: slack
      timeout_s: 2.5
      max_queued: 50
      queue_policy: block
)", "job.yaml", dir.string());
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->publish.webhooks.size(), 2u);
  const WebhookConfig& ha = c->publish.webhooks[0];
  EXPECT_EQ(ha.topics, std::vector<std::string>{"segments/"});  // the alerts, by default
  EXPECT_EQ(ha.token, "s3cr3t-token");
  EXPECT_EQ(ha.ca_file, (dir / "ca.pem").string());
  EXPECT_TRUE(ha.tls_verify);
  EXPECT_EQ(ha.queue_policy, QueuePolicy::kDropOldest);
  EXPECT_EQ(ha.max_queued, 10000u);
  EXPECT_EQ(ha.line, 6);
  const WebhookConfig& n8n = c->publish.webhooks[1];
  EXPECT_EQ(n8n.topics, (std::vector<std::string>{"events/", "segments/gate"}));
  ASSERT_EQ(n8n.headers.size(), 1u);
  EXPECT_EQ(n8n.headers[0], (std::pair<std::string, std::string>{"X-Api-Key", "k-123"}));
  EXPECT_DOUBLE_EQ(n8n.timeout_s, 2.5);
  EXPECT_EQ(n8n.max_queued, 50u);
  EXPECT_EQ(n8n.queue_policy, QueuePolicy::kBlock);
  EXPECT_EQ(n8n.format, "slack");
  EXPECT_EQ(n8n.labels, (std::vector<std::string>{"person", "truck"}));
  EXPECT_EQ(n8n.labels_line, 11);
  EXPECT_TRUE(ha.labels.empty());
  EXPECT_DOUBLE_EQ(n8n.cooldown_s, 300);
  EXPECT_DOUBLE_EQ(ha.cooldown_s, 0);
  EXPECT_EQ(ha.format, "json");

  // A stream's topic naming no stream of an archive job (a typo: "gaet") would send nothing: an error. A
  // stream's topic is taken whole ("segments/ga" is no stream's: said with the '*' that takes "gate"); a
  // live job's reload may add the camera later.
  const std::string archive_head = "streams: [{id: gate, uri: 'test://ball?frames=10'}]\ninfer: {model: m, labels: l}\n";
  const std::string hook = "publish:\n  segments_min_frames: 5\n  webhooks:\n    - url: http://h/x\n      topics: [";
  auto typo = load_config_string(archive_head + hook + "segments/gaet]\n", "job.yaml", dir.string());
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("job.yaml:7: publish.webhooks[0].topics[0]: 'segments/gaet' names no stream "
                                         "of this job (no stream 'gaet'; its streams: gate)"),
            std::string::npos) << typo.status().message();
  auto part = load_config_string(archive_head + hook + "segments/ga]\n", "job.yaml", dir.string());
  ASSERT_FALSE(part.ok());
  EXPECT_NE(part.status().message().find("'segments/ga' names no stream of this job (a topic names a stream whole: "
                                         "'segments/ga*' takes every stream whose id starts with 'ga'"),
            std::string::npos) << part.status().message();
  EXPECT_TRUE(load_config_string(archive_head + hook + "segments/ga*]\n", "job.yaml", dir.string()).ok());
  EXPECT_FALSE(load_config_string(archive_head + hook + "segments/x*]\n", "job.yaml", dir.string()).ok());
  const auto live_typo = load_config_string("job: {mode: live}\n" + head + hook + "segments/gaet]\n", "job.yaml", dir.string());
  EXPECT_TRUE(live_typo.ok()) << live_typo.status().message();

  const std::string segments = "publish:\n  segments_min_frames: 5\n  webhooks:\n";
  expect_config_errors(head, dir, {
      ConfigErrorCase{segments + "    - {topics: [events/]}\n", "job.yaml:6: publish.webhooks[0].url: required"},
      ConfigErrorCase{segments + "    - url: ftp://host/x\n",
          "job.yaml:6: publish.webhooks[0].url: expected an http:// or https:// URL, got a ftp:// one"},
      ConfigErrorCase{segments + "    - url: ha.local:8123/api/webhook/x\n",
          "publish.webhooks[0].url: expected an http:// or https:// URL"},
      ConfigErrorCase{segments + "    - url: 'http://host:99999/hook'\n", "its port '99999' is not a number from 1 to 65535"},
      ConfigErrorCase{segments + "    - url: 'http://host/my hook'\n", "holds a space, which an HTTP request line cannot carry"},
      ConfigErrorCase{segments + "    - url: http://h/x\n      topics: [alerts/]\n",
          "job.yaml:7: publish.webhooks[0].topics[0]: 'alerts/' starts no topic vapipe publishes"},
      ConfigErrorCase{segments + "    - url: http://h/x\n      topics: events/\n",
          "publish.webhooks[0].topics: expected a list of topic prefixes"},
      ConfigErrorCase{segments + "    - url: http://h/x\n      topic: [events/]\n", "publish.webhooks[0].topic"},
      ConfigErrorCase{segments + "    - url: http://h/x\n      token_file: missing.token\n",
          "job.yaml:7: publish.webhooks[0].token_file: cannot read the token file " + (dir / "missing.token").string()},
      ConfigErrorCase{segments + "    - url: http://h/x\n      token_file: empty.token\n",
          (dir / "empty.token").string() + ":1: expected the token on the first line"},
      ConfigErrorCase{segments + "    - url: http://h/x\n      token_file: hook.token\n      headers: {authorization: x}\n",
          "token_file sends Authorization: Bearer TOKEN; keep one"},
      ConfigErrorCase{segments + "    - url: http://h/x\n      headers: {Content-Type: text/plain}\n",
          "publish.webhooks[0].headers.Content-Type: is set by vapipe itself"},
      ConfigErrorCase{segments + "    - url: http://h/x\n      headers: {'X Key': v}\n", "'X Key' is not an HTTP header name"},
      ConfigErrorCase{segments + "    - url: http://h/x\n      headers: {X-Key: \"a\\r\\nX-Evil: 1\"}\n",
          "publish.webhooks[0].headers.X-Key: its value holds a control character"},
      ConfigErrorCase{segments + "    - url: http://h/x\n      ca_file: ca.pem\n", "publish.webhooks[0].ca_file: is for an https:// url"},
      ConfigErrorCase{segments + "    - url: https://h/x\n      ca_file: ca.der\n", "holds no PEM certificate"},
      ConfigErrorCase{segments + "    - url: https://h/x\n      ca_file: ca.pem\n      tls_verify: false\n", "keep one"},
      ConfigErrorCase{segments + "    - url: http://h/x\n      max_queued: 0\n", "publish.webhooks[0].max_queued: expected an integer from 1"},
      ConfigErrorCase{segments + "    - url: http://h/x\n      queue_policy: newest\n",
          "publish.webhooks[0].queue_policy: expected one of drop_oldest | block"},
      ConfigErrorCase{segments + "    - url: http://h/x\n      labels: person\n",
          "job.yaml:7: publish.webhooks[0].labels: expected a list of labels of infer.labels"},
      ConfigErrorCase{segments + "    - url: http://h/x\n      labels: [person, '']\n",
          "publish.webhooks[0].labels[1]: expected a list of labels"},
      ConfigErrorCase{segments + "    - url: http://h/x\n      topics: [events/, job/summary]\n      labels: [person]\n",
          "publish.webhooks[0].labels: only segments/ and results/ messages have labels, and its topics take neither"},
      ConfigErrorCase{segments + "    - url: http://h/x\n      format: whatsapp\n",
          "publish.webhooks[0].format: expected one of json | text | slack | discord | telegram | teams"},
      ConfigErrorCase{segments + "    - url: https://api.telegram.org/botSECRET\n      format: telegram\n",
          "job.yaml:7: publish.webhooks[0].telegram_chat_id: required with format: telegram"},
      ConfigErrorCase{segments + "    - url: https://api.telegram.org/botSECRET/sendMessage\n      format: telegram\n"
                      "      telegram_chat_id: 42\n",
          "publish.webhooks[0].url: with format: telegram, the bot's URL (https://api.telegram.org/bot<TOKEN>) without a "
          "method"},
      ConfigErrorCase{segments + "    - url: http://h/x\n      telegram_chat_id: 42\n",
          "publish.webhooks[0].telegram_chat_id: is for format: telegram"},
      ConfigErrorCase{"publish:\n  webhooks: {url: http://h/x}\n", "job.yaml:4: publish.webhooks: expected a list of webhooks"},
      // Without segments the default topic (segments/) has nothing to send.
      ConfigErrorCase{"publish:\n  webhooks: [{url: http://h/x}]\n",
          "publish.webhooks[0].topics: not given, so segments/ (label runs, the alerts), which need "
          "publish.segments_min_frames"},
      ConfigErrorCase{"publish:\n  webhooks: [{url: http://h/x, topics: [events/], cooldown_s: 60}]\n",
          "publish.webhooks[0].cooldown_s: is for segments (publish.segments_min_frames N >= 1)"},
      ConfigErrorCase{segments + "    - url: http://h/x\n      cooldown_s: -1\n",
          "publish.webhooks[0].cooldown_s: expected a number from 0 to 604800"},
      ConfigErrorCase{"publish:\n  webhooks: [{url: http://h/x, topics: [segments/gate]}]\n",
          "'segments/gate' has no messages without publish.segments_min_frames"},
      ConfigErrorCase{segments + "    - url: http://h/x\n      attach_pictures: true\n",
          "job.yaml:7: publish.webhooks[0].attach_pictures: needs publish.segments_pictures_dir"},
      });
  // attach_pictures: with a live job's pictures, on a json or text webhook that takes segments.
  const std::string live = "job: {name: nightly, mode: live}\nstreams: [{id: gate, uri: 'test://ball'}]\n"
                           "infer: {model: m, labels: l}\npublish:\n  segments_min_frames: 5\n"
                           "  segments_pictures_dir: pictures\n  webhooks:\n";
  auto attaching = load_config_string(live + "    - {url: 'http://h/x', attach_pictures: true, format: text}\n"
                                             "    - {url: 'http://h/x', topics: [segments/gate]}\n",
                                      "job.yaml", dir.string());
  ASSERT_TRUE(attaching.ok()) << attaching.status().message();
  EXPECT_TRUE(attaching->publish.webhooks[0].attach_pictures);
  auto telegram = load_config_string(live + "    - {url: 'https://api.telegram.org/bot123:ABC', format: telegram, "
                                            "telegram_chat_id: -1001234567890, attach_pictures: true}\n",
                                     "job.yaml", dir.string());
  ASSERT_TRUE(telegram.ok()) << telegram.status().message();
  EXPECT_EQ(telegram->publish.webhooks[0].telegram_chat_id, "-1001234567890");
  // A Teams workflow's url as Teams gives it, its signature in the query.
  auto teams = load_config_string(live + "    - {url: 'https://prod-12.westeurope.logic.azure.com:443/workflows/ab12/triggers/"
                                         "manual/paths/invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0"
                                         "&sig=S1gn4ture', format: teams}\n",
                                  "job.yaml", dir.string());
  ASSERT_TRUE(teams.ok()) << teams.status().message();
  EXPECT_EQ(teams->publish.webhooks[0].format, "teams");
  EXPECT_FALSE(attaching->publish.webhooks[1].attach_pictures);
  expect_config_errors("", dir, {
      ConfigErrorCase{live + "    - {url: 'http://h/x', attach_pictures: true, format: slack}\n",
          "publish.webhooks[0].attach_pictures: Slack's incoming webhooks take no files"},
      ConfigErrorCase{live + "    - {url: 'https://prod.westeurope.logic.azure.com/w', attach_pictures: true, format: teams}\n",
          "publish.webhooks[0].attach_pictures: Teams' workflow webhooks take no files (format: teams); format json, "
          "text, discord or telegram can attach them"},
      ConfigErrorCase{live + "    - {url: 'http://h/x', attach_pictures: true, topics: [events/]}\n",
          "publish.webhooks[0].attach_pictures: its topics take no segments/ messages"},
      ConfigErrorCase{live + "    - {url: 'http://h/x', attach_clips: true}\n",
          "publish.webhooks[0].attach_clips: needs publish.segments_clips"},
      });
  // attach_clips: with clips, as attach_pictures.
  const std::string clips = "job: {name: nightly, mode: live}\nstreams: [{id: gate, uri: 'test://ball'}]\n"
                            "infer: {model: m, labels: l}\npublish:\n  segments_min_frames: 5\n"
                            "  segments_pictures_dir: pictures\n  segments_clips: true\n  webhooks:\n";
  auto clipping = load_config_string(clips + "    - {url: 'http://h/x', attach_clips: true, format: text}\n",
                                     "job.yaml", dir.string());
  ASSERT_TRUE(clipping.ok()) << clipping.status().message();
  EXPECT_TRUE(clipping->publish.webhooks[0].attach_clips);
  EXPECT_FALSE(clipping->publish.webhooks[0].attach_pictures);
  EXPECT_EQ(clipping->publish.webhooks[0].attach_max_mb, 0) << "the format's";
  auto limited = load_config_string(clips + "    - {url: 'http://h/x', attach_clips: true, attach_max_mb: 8}\n",
                                    "job.yaml", dir.string());
  ASSERT_TRUE(limited.ok()) << limited.status().message();
  EXPECT_EQ(limited->publish.webhooks[0].attach_max_mb, 8);
  expect_config_errors("", dir, {
      ConfigErrorCase{clips + "    - {url: 'http://h/x', attach_clips: true, format: slack}\n",
          "publish.webhooks[0].attach_clips: Slack's incoming webhooks take no files"},
      ConfigErrorCase{clips + "    - {url: 'http://h/x', attach_clips: true, format: teams}\n",
          "publish.webhooks[0].attach_clips: Teams' workflow webhooks take no files"},
      ConfigErrorCase{clips + "    - {url: 'http://h/x', attach_max_mb: 8}\n",
          "publish.webhooks[0].attach_max_mb: limits the files attached, and neither attach_pictures nor "
          "attach_clips is on"},
      ConfigErrorCase{clips + "    - {url: 'http://h/x', attach_clips: true, attach_max_mb: 0}\n",
          "publish.webhooks[0].attach_max_mb"},
      ConfigErrorCase{clips + "    - {url: 'http://h/x', attach_clips: true, topics: [results/]}\n",
          "publish.webhooks[0].attach_clips: its topics take no segments/ messages, whose `clip` messages"},
      });
  // The URL's path (a webhook's secret id) and the token never appear in an error.
  auto bad = load_config_string(head + segments + "    - url: 'https://h:0/api/webhook/secret-id'\n", "job.yaml", dir.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().find("secret-id"), std::string::npos) << bad.status().message();
  std::filesystem::remove_all(dir);
}

// publish.mqtt: checked at load, as webhooks are; a password is read from its file and never shown.
TEST(Config, RedisServersAreCheckedAtLoadAndTheirErrorsNameTheKey) {
  const auto dir = std::filesystem::temp_directory_path() / ("vapipe-config-redis-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "redis.password") << "s3cret\n";
  const std::string head = "job: {name: nightly}\nstreams: [{id: gate, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\n";
  auto c = load_config_string(head + R"(publish:
  segments_min_frames: 5
  redis:
    - url: redis://cache.local
    - url: rediss://vapipe@10.0.0.5:6380/4
      password_file: redis.password
      topics: [results/, events/]
      key_prefix: 'site-3:'
      maxlen: 0
      format: text
      max_queued: 100
      queue_policy: block
    - url: redis+sentinel://vapipe@sentinel-1,[fd00::2]:26380,10.0.0.9/gate-cache/3
      password_file: redis.password
      sentinel_password_file: redis.password
)", "job.yaml", dir.string());
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->publish.redis.size(), 3u);
  const RedisConfig& plain = c->publish.redis[0];
  EXPECT_EQ(plain.topics, std::vector<std::string>{"segments/"});
  EXPECT_EQ(plain.key_prefix, "vapipe:nightly:");  // the job's name keeps two jobs on one server apart
  EXPECT_EQ(plain.maxlen, 100000u);
  EXPECT_EQ(plain.db, 0u);
  EXPECT_TRUE(plain.password.empty());
  EXPECT_EQ(plain.format, "json");
  EXPECT_EQ(plain.line, 7);
  const RedisConfig& site = c->publish.redis[1];
  EXPECT_EQ(site.username, "vapipe");
  EXPECT_EQ(site.password, "s3cret");
  EXPECT_EQ(site.db, 4u);
  EXPECT_EQ(parse_redis_url(site.url).value().port, 6380);
  EXPECT_EQ(parse_redis_url("rediss://cache").value().port, 6379);  // Redis's port, TLS or not
  EXPECT_EQ(site.key_prefix, "site-3:");
  EXPECT_EQ(site.maxlen, 0u);
  EXPECT_EQ(site.format, "text");
  EXPECT_EQ(site.max_queued, 100u);
  EXPECT_EQ(site.queue_policy, QueuePolicy::kBlock);
  // A master found through Redis Sentinel: the sentinels in the url's order (26379 by default), the
  // master's name and database, the master's user; the sentinels' own password.
  const RedisConfig& watched = c->publish.redis[2];
  EXPECT_EQ(watched.username, "vapipe");
  EXPECT_EQ(watched.password, "s3cret");
  EXPECT_EQ(watched.sentinel_password, "s3cret");
  EXPECT_EQ(watched.db, 3u);
  const RedisUrl sentinel = parse_redis_url(watched.url).value();
  ASSERT_EQ(sentinel.sentinels.size(), 3u);
  EXPECT_EQ(sentinel.sentinels[0].host, "sentinel-1");
  EXPECT_EQ(sentinel.sentinels[0].port, 26379);
  EXPECT_EQ(sentinel.sentinels[1].host, "fd00::2");
  EXPECT_EQ(sentinel.sentinels[1].port, 26380);
  EXPECT_EQ(sentinel.sentinels[2].host, "10.0.0.9");
  EXPECT_EQ(sentinel.master_name, "gate-cache");
  EXPECT_FALSE(sentinel.tls);
  EXPECT_EQ(sentinel.origin(), "redis+sentinel://sentinel-1:26379,[fd00::2]:26380,10.0.0.9:26379/gate-cache");
  EXPECT_TRUE(parse_redis_url("rediss+sentinel://s1/m").value().tls);
  EXPECT_FALSE(parse_redis_url("redis://cache").value().sentinel());

  const std::string segments = "publish:\n  segments_min_frames: 5\n  redis:\n";
  expect_config_errors(head, dir, {
      ConfigErrorCase{segments + "    - {topics: [events/]}\n", "job.yaml:7: publish.redis[0].url: required"},
      ConfigErrorCase{segments + "    - url: redis://cache\n      cert_file: client.pem\n      key_file: client.key\n",
          "publish.redis[0].cert_file: is for a rediss:// url"},
      ConfigErrorCase{segments + "    - url: rediss://cache\n      cert_file: client.pem\n",
          "publish.redis[0].key_file: required too"},
      ConfigErrorCase{segments + "    - url: http://cache:6379\n",
          "publish.redis[0].url: expected a redis:// or rediss:// URL, got a http:// one"},
      ConfigErrorCase{segments + "    - url: redis://cache/vapipe\n",
          "publish.redis[0].url: a Redis server's URL has at most a database number for its path"},
      ConfigErrorCase{segments + "    - url: redis://vapipe@cache\n",
          "publish.redis[0].password_file: required with a user name"},
      ConfigErrorCase{segments + "    - url: redis://cache\n      ca_file: ca.pem\n",
          "publish.redis[0].ca_file: is for a rediss:// url"},
      ConfigErrorCase{segments + "    - url: redis://cache\n      format: slack\n",
          "publish.redis[0].format: expected one of json | text"},
      ConfigErrorCase{segments + "    - url: redis://cache\n      stream: x\n", "publish.redis[0].stream"},
      ConfigErrorCase{segments + "    - url: redis://:pw@cache\n      password_file: redis.password\n",
          "publish.redis[0].password_file: and the url's :password@ both: keep one"},
      ConfigErrorCase{segments + "    - url: redis+sentinel://s1,s2\n",
          "publish.redis[0].url: its path names the master that the sentinels watch, and nothing else"},
      ConfigErrorCase{segments + "    - url: redis+sentinel://s1,,s2/m\n",
          "publish.redis[0].url: its list of sentinels has an empty entry"},
      ConfigErrorCase{segments + "    - url: redis+sentinel://s1,s2:99999/m\n",
          "publish.redis[0].url: sentinel 2: its port '99999' is not a number from 1 to 65535"},
      ConfigErrorCase{segments + "    - url: redis+sentinel://s1/m/x\n",
          "publish.redis[0].url: after the master's name, its path has at most a database number"},
      ConfigErrorCase{segments + "    - url: sentinel://s1/m\n",
          "publish.redis[0].url: expected a redis+sentinel:// or rediss+sentinel:// URL for a master found through "
          "Redis Sentinel, got a sentinel:// one"},
      ConfigErrorCase{segments + "    - url: redis://cache\n      sentinel_password_file: redis.password\n",
          "publish.redis[0].sentinel_password_file: is for a master found through Redis Sentinel"},
  });
  std::filesystem::remove_all(dir);
}

// publish.kafka: checked at load, as Redis servers are; a password is read from its file.
TEST(Config, KafkaClustersAreCheckedAtLoadAndTheirErrorsNameTheKey) {
  const auto dir = std::filesystem::temp_directory_path() / ("vapipe-config-kafka-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "kafka.password") << "s3cret\n";
  std::ofstream(dir / "ca.pem") << "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  const std::string head = "job: {name: gate.North}\nstreams: [{id: gate, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\n";
  auto c = load_config_string(head + R"(publish:
  segments_min_frames: 5
  kafka:
    - url: kafka://k1,k2:9093
    - url: kafkas://vapipe@kafka.example.com:9094
      password_file: kafka.password
      sasl_mechanism: SCRAM-SHA-512
      ca_file: ca.pem
      topics: [results/, events/]
      topic_prefix: site-3.video.
      acks: leader
      compression: zstd
      client_id: site-3
      format: text
      max_queued: 100
      queue_policy: block
)", "job.yaml", dir.string());
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->publish.kafka.size(), 2u);
  const KafkaConfig& plain = c->publish.kafka[0];
  EXPECT_EQ(plain.topics, std::vector<std::string>{"segments/"});
  EXPECT_EQ(plain.topic_prefix, "vapipe.gate.North.");
  EXPECT_EQ(plain.acks, "all");
  EXPECT_TRUE(plain.idempotence);
  EXPECT_EQ(plain.compression, "lz4");
  EXPECT_EQ(plain.client_id, "vapipe-gate.North");
  EXPECT_TRUE(plain.username.empty());
  EXPECT_EQ(plain.format, "json");
  EXPECT_EQ(plain.line, 7);
  EXPECT_EQ(parse_kafka_url(plain.url).value().bootstrap_servers(), "k1:9092,k2:9093");
  const KafkaConfig& site = c->publish.kafka[1];
  EXPECT_EQ(site.username, "vapipe");
  EXPECT_EQ(site.password, "s3cret");
  EXPECT_EQ(site.sasl_mechanism, "scram-sha-512");
  EXPECT_EQ(site.topic_prefix, "site-3.video.");
  EXPECT_EQ(site.acks, "leader");
  EXPECT_FALSE(site.idempotence);  // (it needs acks: all)
  EXPECT_EQ(site.compression, "zstd");
  EXPECT_EQ(site.client_id, "site-3");
  EXPECT_EQ(site.format, "text");
  EXPECT_EQ(site.max_queued, 100u);
  EXPECT_EQ(site.queue_policy, QueuePolicy::kBlock);
  EXPECT_EQ(site.ca_file, (dir / "ca.pem").string());

  const std::string segments = "publish:\n  segments_min_frames: 5\n  kafka:\n";
  expect_config_errors(head, dir, {
      ConfigErrorCase{segments + "    - {topics: [events/]}\n", "job.yaml:7: publish.kafka[0].url: required"},
      ConfigErrorCase{segments + "    - url: kafka://k1/vapipe.results\n",
          "publish.kafka[0].url: a Kafka cluster's URL has no path or query"},
      ConfigErrorCase{segments + "    - url: PLAINTEXT://k1:9092\n",
          "publish.kafka[0].url: expected a kafka:// or kafkas:// URL, got a plaintext:// one"},
      ConfigErrorCase{segments + "    - url: kafka://k1\n      topic_prefix: 'video/'\n",
          "publish.kafka[0].topic_prefix: 'video/' holds a character Kafka's topic names cannot"},
      ConfigErrorCase{segments + "    - url: kafka://k1\n      acks: leader\n      idempotence: true\n",
          "publish.kafka[0].idempotence: needs acks: all"},
      ConfigErrorCase{segments + "    - url: kafka://k1\n      acks: 0\n", "publish.kafka[0].acks: expected one of all | leader"},
      ConfigErrorCase{segments + "    - url: kafka://k1\n      compression: brotli\n", "publish.kafka[0].compression"},
      ConfigErrorCase{segments + "    - url: kafka://vapipe@k1\n      sasl_mechanism: plain\n",
          "publish.kafka[0].password_file: required with a user name"},
      ConfigErrorCase{segments + "    - url: kafka://vapipe@k1\n      password_file: kafka.password\n",
          "publish.kafka[0].sasl_mechanism: required with a user name: plain, scram-sha-256 or scram-sha-512"},
      ConfigErrorCase{segments + "    - url: kafka://k1\n      sasl_mechanism: gssapi\n",
          "publish.kafka[0].sasl_mechanism: expected plain, scram-sha-256 or scram-sha-512"},
      ConfigErrorCase{segments + "    - url: kafka://k1\n      sasl_mechanism: plain\n",
          "publish.kafka[0].username: required with sasl_mechanism"},
      ConfigErrorCase{segments + "    - url: kafka://k1\n      ca_file: ca.pem\n", "publish.kafka[0].ca_file: is for a kafkas:// url"},
      ConfigErrorCase{segments + "    - url: kafka://k1\n      topic: x\n", "publish.kafka[0].topic"},
      ConfigErrorCase{segments + "    - url: kafka://k1\n      client_id: ''\n", "publish.kafka[0].client_id: expected a name"},
      ConfigErrorCase{"publish:\n  segments_min_frames: 5\n  kafka: kafka://k1\n",
          "publish.kafka: expected a list of clusters"},
  });
  std::filesystem::remove_all(dir);
}

TEST(Config, MqttBrokersAreCheckedAtLoadAndTheirErrorsNameTheKey) {
  const auto dir = std::filesystem::temp_directory_path() / ("vapipe-config-mqtt-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  // (as Windows Notepad saves it: a UTF-8 byte order mark, CRLF)
  std::ofstream(dir / "mqtt.password") << "\xEF\xBB\xBFpass word with blanks\r\n";
  std::ofstream(dir / "empty.password") << "\n";
  std::ofstream(dir / "ca.pem") << "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  std::ofstream(dir / "client.key") << "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n";
  const std::string head = "job: {name: nightly}\nstreams: [{id: gate, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\n";
  auto c = load_config_string(head + R"(publish:
  segments_min_frames: 5
  mqtt:
    - url: mqtt://broker.local
    - url: mqtts://vapipe@iot.example.com
      password_file: mqtt.password
      ca_file: ca.pem
      cert_file: ca.pem
      key_file: client.key
      topics: [events/, segments/]
      labels: [person]
      home_assistant: true
      discovery_prefix: ha
      topic_prefix: site-3/cameras/
      status_topic: site-3/vapipe
      qos: 2
      retain: true
      client_id: vapipe-site-3
      keepalive_s: 10
      format: text
      max_queued: 100
      queue_policy: block
)", "job.yaml", dir.string());
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->publish.mqtt.size(), 2u);
  const MqttConfig& plain = c->publish.mqtt[0];
  EXPECT_EQ(plain.topics, std::vector<std::string>{"segments/"});
  EXPECT_EQ(plain.topic_prefix, "vapipe/nightly/");  // the job's name keeps two jobs on one broker apart
  EXPECT_EQ(plain.status_topic, "vapipe/nightly/status");
  EXPECT_EQ(plain.qos, 1u);
  EXPECT_FALSE(plain.retain);
  EXPECT_TRUE(plain.client_id.empty());
  EXPECT_TRUE(plain.username.empty());
  EXPECT_EQ(plain.keepalive_s, 30u);
  EXPECT_EQ(plain.format, "json");
  EXPECT_FALSE(plain.home_assistant);
  EXPECT_EQ(plain.discovery_prefix, "homeassistant");
  EXPECT_EQ(plain.line, 7);
  const MqttConfig& iot = c->publish.mqtt[1];
  EXPECT_EQ(iot.username, "vapipe");
  EXPECT_EQ(iot.password, "pass word with blanks");
  EXPECT_EQ(iot.ca_file, (dir / "ca.pem").string());
  EXPECT_EQ(iot.key_file, (dir / "client.key").string());
  EXPECT_EQ(iot.topic_prefix, "site-3/cameras/");
  EXPECT_EQ(iot.status_topic, "site-3/vapipe");
  EXPECT_EQ(iot.qos, 2u);
  EXPECT_TRUE(iot.retain);
  EXPECT_EQ(iot.client_id, "vapipe-site-3");
  EXPECT_EQ(iot.keepalive_s, 10u);
  EXPECT_EQ(iot.format, "text");
  EXPECT_EQ(iot.labels, std::vector<std::string>{"person"});
  EXPECT_TRUE(iot.home_assistant);
  EXPECT_EQ(iot.discovery_prefix, "ha");
  EXPECT_EQ(iot.max_queued, 100u);
  EXPECT_EQ(iot.queue_policy, QueuePolicy::kBlock);
  auto quiet = load_config_string(head + "publish:\n  segments_min_frames: 5\n  mqtt: [{url: 'mqtt://b', status_topic: ''}]\n",
                                  "job.yaml", dir.string());
  ASSERT_TRUE(quiet.ok()) << quiet.status().message();
  EXPECT_TRUE(quiet->publish.mqtt[0].status_topic.empty());
  // pictures: on by default with home_assistant and segments' pictures (a camera entity each), else off.
  auto pictured = load_config_string(
      "job: {name: nightly, mode: live}\nstreams: [{id: gate, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\n"
      "publish:\n  segments_min_frames: 5\n  segments_pictures_dir: pictures\n  mqtt:\n"
      "    - {url: 'mqtt://b', home_assistant: true, labels: [truck]}\n"
      "    - {url: 'mqtt://b', home_assistant: true, labels: [truck], pictures: false}\n"
      "    - {url: 'mqtt://b'}\n    - {url: 'mqtt://b', pictures: true, pictures_max_kb: 128}\n"
      // The sensors and pictures of these labels, none of the segment messages.
      "    - {url: 'mqtt://b', home_assistant: true, labels: [truck], topics: [events/]}\n",
      "job.yaml", dir.string());
  ASSERT_TRUE(pictured.ok()) << pictured.status().message();
  EXPECT_TRUE(pictured->publish.mqtt[0].pictures);
  EXPECT_EQ(pictured->publish.mqtt[0].pictures_max_kb, 1000u) << "below EMQX's 1 MB";
  EXPECT_EQ(pictured->publish.mqtt[3].pictures_max_kb, 128u) << "AWS IoT Core's";
  EXPECT_FALSE(pictured->publish.mqtt[1].pictures);
  EXPECT_FALSE(pictured->publish.mqtt[2].pictures);
  EXPECT_TRUE(pictured->publish.mqtt[3].pictures);
  EXPECT_EQ(pictured->publish.mqtt[4].labels, std::vector<std::string>{"truck"});
  EXPECT_FALSE(iot.pictures);  // home_assistant without segments' pictures

  const std::string segments = "publish:\n  segments_min_frames: 5\n  mqtt:\n";
  expect_config_errors(head, dir, {
      ConfigErrorCase{segments + "    - {topics: [events/]}\n", "job.yaml:7: publish.mqtt[0].url: required"},
      ConfigErrorCase{segments + "    - url: tcp://broker:1883\n",
          "publish.mqtt[0].url: expected an mqtt:// or mqtts:// URL, got a tcp:// one"},
      ConfigErrorCase{segments + "    - url: mqtt://broker/vapipe/alerts\n", "publish.mqtt[0].url: a broker's URL has no path"},
      ConfigErrorCase{segments + "    - url: mqtt://b\n      topic_prefix: 'vapipe/+/'\n",
          "publish.mqtt[0].topic_prefix: 'vapipe/+/' holds '+' or '#'"},
      ConfigErrorCase{segments + "    - url: mqtt://b\n      status_topic: 'a/#'\n", "publish.mqtt[0].status_topic:"},
      ConfigErrorCase{segments + "    - url: mqtt://b\n      qos: 3\n", "publish.mqtt[0].qos: expected an integer from 0 to 2"},
      ConfigErrorCase{segments + "    - url: mqtt://b\n      format: slack\n", "publish.mqtt[0].format: expected one of json | text"},
      ConfigErrorCase{segments + "    - url: mqtt://b\n      ca_file: ca.pem\n", "publish.mqtt[0].ca_file: is for an mqtts:// url"},
      ConfigErrorCase{segments + "    - url: mqtt://b\n      password_file: mqtt.password\n",
          "publish.mqtt[0].username: required with a password"},
      ConfigErrorCase{segments + "    - url: mqtt://u:p@b\n      password_file: mqtt.password\n", "and the url's :password@ both"},
      ConfigErrorCase{segments + "    - url: mqtt://u@b\n      username: v\n", "publish.mqtt[0].username: and the url's user@ both"},
      ConfigErrorCase{segments + "    - url: mqtt://u@b\n      password_file: empty.password\n",
          (dir / "empty.password").string() + ":1: expected the password on the first line"},
      ConfigErrorCase{segments + "    - url: mqtts://b\n      cert_file: ca.pem\n", "publish.mqtt[0].key_file: required too"},
      ConfigErrorCase{segments + "    - url: mqtts://b\n      cert_file: ca.pem\n      key_file: ca.pem\n",
          "publish.mqtt[0].key_file: " + (dir / "ca.pem").string() + " holds no PEM private key"},
      ConfigErrorCase{segments + "    - url: mqtt://b\n      keepalive_s: 2\n", "publish.mqtt[0].keepalive_s: expected an integer from 5"},
      ConfigErrorCase{segments + "    - url: mqtt://b\n      qso: 1\n", "publish.mqtt[0].qso"},
      ConfigErrorCase{"publish:\n  mqtt: {url: mqtt://b}\n", "job.yaml:5: publish.mqtt: expected a list of brokers"},
      ConfigErrorCase{segments + "    - url: mqtt://b\n      home_assistant: true\n",
          "publish.mqtt[0].home_assistant: needs labels"},
      ConfigErrorCase{segments + "    - url: mqtt://b\n      home_assistant: true\n      labels: [Fire truck, fire-truck]\n",
          "publish.mqtt[0].labels: 'Fire truck' and 'fire-truck' are one sensor id for Home Assistant ('fire_truck')"},
      ConfigErrorCase{segments + "    - url: mqtt://b\n      discovery_prefix: 'ha/#'\n", "publish.mqtt[0].discovery_prefix:"},
      ConfigErrorCase{segments + "    - url: mqtt://b\n      pictures: true\n",
          "job.yaml:8: publish.mqtt[0].pictures: needs publish.segments_pictures_dir"},
      ConfigErrorCase{"publish:\n  mqtt: [{url: mqtt://b}]\n", "publish.mqtt[0].topics: not given, so segments/"},
      ConfigErrorCase{segments + "    - url: mqtt://b\n      pictures_max_kb: 128\n",
          "publish.mqtt[0].pictures_max_kb: limits the pictures published, and pictures is off"},
      });
  // The password never appears in an error.
  auto bad = load_config_string(head + segments + "    - url: 'mqtt://u:hunter2@b:0'\n", "job.yaml", dir.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().find("hunter2"), std::string::npos) << bad.status().message();
  std::filesystem::remove_all(dir);
}

// publish.metrics_token_file: read at load; its errors name the file, never the token.
TEST(Config, AMetricsTokenIsReadAtLoadAndItsErrorsNameTheFileNotTheToken) {
  const auto dir = std::filesystem::temp_directory_path() / ("vapipe-config-token-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "good") << "  abcdefghijklmnop0123  \nignored\n";
  std::ofstream(dir / "short") << "tooshort\n";
  std::ofstream(dir / "blank") << "abcdefgh ijklmnop0123\n";
  const std::string head = "streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\n";
  auto c = load_config_string(head + "publish: {metrics_address: '127.0.0.1:0', metrics_token_file: good}\n",
                              "job.yaml", dir.string());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->publish.metrics_token, "abcdefghijklmnop0123");
  expect_config_errors(head, dir, {
      ConfigErrorCase{"publish: {metrics_address: '127.0.0.1:0', metrics_token_file: missing}\n",
          "job.yaml:3: publish.metrics_token_file: cannot read the token file " + (dir / "missing").string()},
      ConfigErrorCase{"publish: {metrics_address: '127.0.0.1:0', metrics_token_file: short}\n",
          (dir / "short").string() + ":1: expected a token of 16 to 4096 characters"},
      ConfigErrorCase{"publish: {metrics_address: '127.0.0.1:0', metrics_token_file: blank}\n",
          (dir / "blank").string() + ":1: the token must be printable ASCII without blanks"},
      ConfigErrorCase{"publish: {metrics_token_file: good}\n", "publish.metrics_token_file: needs publish.metrics_address"},
      }, "tooshort");
  std::filesystem::remove_all(dir);
}

// publish.metrics_tls_cert_file / metrics_tls_key_file: both or neither, readable, with an address;
// metrics_tls_client_ca_file: readable, with both.
TEST(Config, MetricsTlsNeedsBothReadableFilesAndAnAddress) {
  const auto dir = std::filesystem::temp_directory_path() / ("vapipe-config-tls-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "m.crt") << "-----BEGIN CERTIFICATE-----\n";
  std::ofstream(dir / "m.key") << "-----BEGIN PRIVATE KEY-----\n";
  const std::string head = "streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\n";
  auto c = load_config_string(
      head + "publish: {metrics_address: '127.0.0.1:0', metrics_tls_cert_file: m.crt, metrics_tls_key_file: m.key}\n",
      "job.yaml", dir.string());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->publish.metrics_tls_cert_file, (dir / "m.crt").string());  // resolved against the config's folder
  EXPECT_EQ(c->publish.metrics_tls_key_file, (dir / "m.key").string());
  expect_config_errors(head, dir, {
      ConfigErrorCase{"publish: {metrics_address: '127.0.0.1:0', metrics_tls_cert_file: m.crt}\n",
          "job.yaml:3: publish.metrics_tls_cert_file: needs publish.metrics_tls_cert_file and metrics_tls_key_file both"},
      ConfigErrorCase{"publish: {metrics_address: '127.0.0.1:0', metrics_tls_key_file: m.key}\n",
          "job.yaml:3: publish.metrics_tls_key_file: needs publish.metrics_tls_cert_file and metrics_tls_key_file both"},
      ConfigErrorCase{"publish: {metrics_tls_cert_file: m.crt, metrics_tls_key_file: m.key}\n",
          "publish.metrics_tls_cert_file: needs publish.metrics_address"},
      ConfigErrorCase{"publish: {metrics_address: '127.0.0.1:0', metrics_tls_cert_file: m.crt, metrics_tls_key_file: gone.key}\n",
          "job.yaml:3: publish.metrics_tls_key_file: cannot read " + (dir / "gone.key").string()},
      ConfigErrorCase{"publish: {metrics_address: '127.0.0.1:0', metrics_tls_client_ca_file: m.crt}\n",
          "job.yaml:3: publish.metrics_tls_client_ca_file: needs publish.metrics_tls_cert_file and metrics_tls_key_file"},
      ConfigErrorCase{"publish: {metrics_address: '127.0.0.1:0', metrics_tls_cert_file: m.crt, metrics_tls_key_file: m.key,\n"
                      "  metrics_tls_client_ca_file: gone.crt}\n",
          "job.yaml:4: publish.metrics_tls_client_ca_file: cannot read " + (dir / "gone.crt").string()},
      });
  auto mutual = load_config_string(head + "publish: {metrics_address: '127.0.0.1:0', metrics_tls_cert_file: m.crt, "
                                          "metrics_tls_key_file: m.key, metrics_tls_client_ca_file: m.crt}\n",
                                   "job.yaml", dir.string());
  ASSERT_TRUE(mutual.ok()) << mutual.status().message();
  EXPECT_EQ(mutual->publish.metrics_tls_client_ca_file, (dir / "m.crt").string());
  std::filesystem::remove_all(dir);
}

TEST(Config, TheDocumentedAnnotatedExampleLoads) {
  std::ifstream in(std::string(VAPIPE_SOURCE_DIR) + "/docs/config.md");
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto section = doc.find("## Annotated example");
  ASSERT_NE(section, std::string::npos);
  const auto start = doc.find("```yaml\n", section);
  ASSERT_NE(start, std::string::npos);
  const auto end = doc.find("```", start + 8);
  const std::string yaml = doc.substr(start + 8, end - start - 8);
  auto c = load_config_string(yaml, "docs/config.md#annotated", "/jobs");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->job.max_restarts, 3u);
  EXPECT_EQ(c->job.stage_timeout_s, 120.0);
  EXPECT_EQ(c->lanes_per_device, 1u);
  EXPECT_EQ(c->preprocess.threads, 1u);
  EXPECT_TRUE(c->ingest.reconnect);
  EXPECT_EQ(c->ingest.max_open_streams, 64u);
  EXPECT_EQ(c->ingest.decoder_threads, 0u);  // auto
  EXPECT_TRUE(c->publish.metrics_address.empty());
  EXPECT_EQ(c->streams.size(), 3u);
}

// ingest.decoder_threads: `auto`, as the log and the README name 0, is 0; a number is itself.
TEST(ConfigTest, DecoderThreadsTakeAutoAsZero) {
  const std::string base = "streams: [{id: a, uri: 'test://ball'}]\ninfer: {model: m, labels: l}\n";
  auto automatic = load_config_string(base + "ingest: {decoder_threads: auto}\n", "t.yaml", "/jobs");
  ASSERT_TRUE(automatic.ok()) << automatic.status().message();
  EXPECT_EQ(automatic->ingest.decoder_threads, 0u);
  auto four = load_config_string(base + "ingest: {decoder_threads: 4}\n", "t.yaml", "/jobs");
  ASSERT_TRUE(four.ok()) << four.status().message();
  EXPECT_EQ(four->ingest.decoder_threads, 4u);
  auto word = load_config_string(base + "ingest: {decoder_threads: many}\n", "t.yaml", "/jobs");
  ASSERT_FALSE(word.ok());
  EXPECT_EQ(word.status().message(), "t.yaml:3: ingest.decoder_threads: expected auto or an integer from 0 to 64, got 'many'");
}

// streams[].source: another region of one camera, decoded once by the stream it names.
TEST(Config, AStreamWithASourceTakesItsUriAndDecodingSettingsAndKeepsItsOwnRegion) {
  auto c = load_config_string(R"(
streams:
  - {id: gate, source: door, roi: [0.5, 0, 0.5, 1]}
  - {id: door, uri: 'rtsp://cam/door', max_fps: 5, keyframes_only: true, rtsp_latency_ms: 50, roi: [0, 0, 0.5, 1],
     rotate: 180}
  - {id: yard, uri: 'rtsp://cam/yard'}
infer: {model: m, labels: l}
)", "job.yaml", "/cfg");
  ASSERT_TRUE(c.ok()) << c.status().message();
  const StreamConfig& gate = c->streams[0];
  EXPECT_EQ(gate.source, "door");
  EXPECT_TRUE(gate.is_member());
  EXPECT_EQ(gate.uri, "rtsp://cam/door");
  EXPECT_EQ(gate.parsed.kind, UriKind::kNetwork);
  EXPECT_EQ(gate.max_fps, 5);
  EXPECT_EQ(gate.keyframes_only, std::optional<bool>(true));
  EXPECT_EQ(gate.rtsp_latency_ms, std::optional<uint32_t>(50));
  EXPECT_EQ(gate.roi, (std::array<double, 4>{0.5, 0, 0.5, 1}));
  EXPECT_EQ(gate.turn, std::optional<Orientation>(Orientation::kRotate180));  // its source's
  EXPECT_FALSE(c->streams[1].is_member());
  EXPECT_EQ(c->job.mode, JobMode::kLive);
}

// streams[].rotate and mirror: a camera mounted upside down or on its side (corridor format), turned
// as GStreamer's image-orientation tags name it; a glob's files take them too.
TEST(Config, RotateAndMirrorSayHowAStreamsFramesAreTurnedUpright) {
  auto c = load_config_string(R"(
streams:
  - {id: plain, uri: 'test://ball'}
  - {id: ceiling, uri: 'test://ball', rotate: 180}
  - {id: corridor, uri: 'test://ball', rotate: 90}
  - {id: mirrored, uri: 'test://ball', mirror: true}
  - {id: both, uri: 'test://ball', rotate: 270, mirror: true}
  - {id: zero, uri: 'test://ball', rotate: 0}
infer: {model: m, labels: l}
)", "job.yaml", "/cfg");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->streams[0].turn, std::nullopt);  // its file's tag decides
  EXPECT_EQ(c->streams[1].turn, std::optional<Orientation>(Orientation::kRotate180));
  EXPECT_EQ(c->streams[2].turn, std::optional<Orientation>(Orientation::kRotate90));
  EXPECT_EQ(c->streams[3].turn, std::optional<Orientation>(Orientation::kFlipHorizontal));
  EXPECT_EQ(c->streams[4].turn, std::optional<Orientation>(Orientation::kTranspose));  // "flip-rotate-270"
  EXPECT_EQ(c->streams[5].turn, std::optional<Orientation>(Orientation::kAsStored));  // as stored, whatever the tag
  for (const auto& [text, expected] : std::vector<std::pair<std::string, std::string>>{
           {"rotate: 45", "job.yaml:2: streams[0].rotate: expected 0, 90, 180 or 270 (degrees clockwise that turn the "
                          "picture upright), got '45'"},
           {"rotate: 360", "streams[0].rotate: expected 0, 90, 180 or 270 (degrees clockwise that turn the picture upright), got '360'"},
           {"rotate: -90", "streams[0].rotate: expected 0, 90, 180 or 270 (degrees clockwise that turn the picture upright), got '-90'"},
           {"mirror: sideways", "streams[0].mirror: expected true or false"}}) {
    auto bad = load_config_string("streams:\n  - {id: a, uri: 'test://ball', " + text + "}\ninfer: {model: m, labels: l}\n",
                                  "job.yaml", "/cfg");
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_NE(bad.status().message().find(expected), std::string::npos) << bad.status().message();
  }
}

// An rtsps:// or https:// camera's own certificate (a file relative to the config, PEM), or no check;
// its members take the source's; anything else is an error naming the line and key.
TEST(Config, TlsFingerprintPinsACamerasOwnCertificate) {
  const std::string pinned = "ED:BF:28:4D:EB:B2:37:75:03:FF:EE:7F:BB:77:44:75:8C:BF:67:0F:44:81:9F:59:59:A7:BF:FE:8F:6E:DE:37";
  auto c = load_config_string(R"(
streams:
  - {id: hik, uri: 'rtsps://10.0.0.9/Streaming/Channels/101', tls_fingerprint: 'sha256 Fingerprint=ED:BF:28:4D:EB:B2:37:75:03:FF:EE:7F:BB:77:44:75:8C:BF:67:0F:44:81:9F:59:59:A7:BF:FE:8F:6E:DE:37'}
  - {id: nvr, uri: 'https://10.0.0.10/snap.jpg', tls_fingerprint: edbf284debb2377503ffee7fbb7744758cbf670f44819f5959a7bffe8f6ede37}
  - {id: gate, source: hik, roi: [0, 0, 0.5, 1]}
infer: {model: m, labels: l}
)", "job.yaml", "/cfg");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->streams[0].tls, (SourceTls{"", true, pinned}));
  EXPECT_EQ(c->streams[1].tls, c->streams[0].tls);  // the same certificate, written as 64 hex digits
  EXPECT_EQ(c->streams[2].tls, c->streams[0].tls);  // a member: its source's connection
  expect_each_refused("infer: {model: m, labels: l}\nstreams:\n", {
      {"  - {id: a, uri: 'rtsps://cam/s', tls_fingerprint: 'AB:CD'}\n",
       "job.yaml:3: streams[0].tls_fingerprint: expected the camera certificate's SHA-256 fingerprint, 64 hex digits"},
      {"  - {id: a, uri: 'rtsps://cam/s', tls_fingerprint: 'D1:2E:3F:40:51:62:73:84:95:A6:B7:C8:D9:EA:FB:0C:1D:2E:3F:40'}\n",
       "got 40 in 'D1:2E:3F:40:51:62:73:84:95:A6:B7:C8:D9:EA:FB:0C:1D:2E:3F:40' (a SHA-1 fingerprint? give -sha256)"},
      {"  - {id: a, uri: 'rtsps://cam/s', tls_verify: false, tls_fingerprint: " + pinned + "}\n",
       "streams[0].tls_verify: tls_fingerprint trusts that one certificate alone, so tls_verify would not be used"},
      {"  - {id: a, uri: 'rtsp://cam/s', tls_fingerprint: " + pinned + "}\n",
       "streams[0].tls_fingerprint: only for rtsps:// and https:// streams (this one's uri does not use TLS)"}}, "/cfg");
}

TEST(Config, TlsCaFileAndTlsVerifySayHowACamerasCertificateIsChecked) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("vapipe-config-tls-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  { std::ofstream(dir / "cam.pem") << "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"; }
  { std::ofstream(dir / "cam.der") << std::string("\x30\x82\x01\x0a", 4); }
  auto c = load_config_string(R"(
streams:
  - {id: unifi, uri: 'rtsps://192.168.1.1:7441/abc', tls_ca_file: cam.pem}
  - {id: gate, source: unifi, roi: [0, 0, 0.5, 1]}
  - {id: axis, uri: 'https://10.0.0.7/axis-cgi/mjpg/video.cgi', tls_verify: false}
  - {id: plain, uri: 'rtsp://10.0.0.8/stream1'}
infer: {model: m, labels: l}
)", "job.yaml", dir.string());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->streams[0].tls, (SourceTls{(dir / "cam.pem").string(), true}));
  EXPECT_EQ(c->streams[1].tls, c->streams[0].tls);  // a member: its source's connection
  EXPECT_EQ(c->streams[2].tls, (SourceTls{"", false}));
  EXPECT_EQ(c->streams[3].tls, SourceTls{});
  const std::string head = "infer: {model: m, labels: l}\nstreams:\n";
  expect_each_refused(head, {
           {"  - {id: a, uri: 'rtsp://cam/s', tls_verify: false}\n",
            "job.yaml:3: streams[0].tls_verify: only for rtsps:// and https:// streams (this one's uri does not use TLS)"},
           {"  - {id: a, uri: 'rtsps://cam/s', tls_ca_file: nowhere.pem}\n",
            "job.yaml:3: streams[0].tls_ca_file: cannot read " + (dir / "nowhere.pem").string()},
           {"  - {id: a, uri: 'rtsps://cam/s', tls_ca_file: cam.der}\n",
            "streams[0].tls_ca_file: " + (dir / "cam.der").string() + " holds no PEM certificate"},
           {"  - {id: a, uri: 'rtsps://cam/s', tls_ca_file: cam.pem, tls_verify: false}\n",
            "streams[0].tls_verify: tls_verify: false checks nothing, so tls_ca_file would not be used"},
           {"  - {id: a, uri: 'rtsps://cam/s'}\n  - {id: b, source: a, tls_verify: false}\n",
            "job.yaml:4: streams[1].tls_verify: a stream with `source` classifies the frames of stream 'a'"},
           {"  - {glob: '" + (dir / "*.pem").string() + "', tls_verify: false}\n",
            "streams[0].tls_verify: only for rtsps:// and https:// streams, not a glob's files"},
           {"  - {id: a, uri: 'https://cam/v.mjpg', tls_verify: maybe}\n", "streams[0].tls_verify: expected true or false"}}, dir.string());
  std::filesystem::remove_all(dir);
}

// streams[].recorded_at: when a file's recording started: a time, the file's name (a glob's files each
// their own; those whose names hold none are noted), or its container; members take their source's;
// not for cameras.
TEST(Config, RecordedAtSaysWhenAFilesRecordingStarted) {
  testing::LocalZone zone("UTC0");
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("vapipe-config-rec-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  for (const char* name : {"ch01_20261130143000.mp4", "ch01_20261130150000.mp4", "holiday.mp4"}) {
    std::ofstream(dir / name) << "x";
  }
  auto c = load_config_string(R"(
streams:
  - {id: given, uri: 'test://ball', recorded_at: '2026-11-30T14:30:00Z'}
  - {id: named, uri: ch01_20261130143000.mp4, recorded_at: 'name:ch01_%Y%m%d%H%M%S'}
  - {id: phone, uri: holiday.mp4, recorded_at: container}
  - {id: gate, source: named, roi: [0, 0, 0.5, 1]}
  - {glob: '*.mp4', id_prefix: 'all-', recorded_at: 'name:%Y%m%d%H%M%S'}
  - {id: plain, uri: holiday.mp4}
infer: {model: m, labels: l}
)", "job.yaml", dir.string());
  ASSERT_TRUE(c.ok()) << c.status().message();
  constexpr int64_t k1430 = int64_t{1796049000} * 1000000000;
  EXPECT_EQ(c->streams[0].recorded.from, RecordingStart::From::kGiven);
  EXPECT_EQ(c->streams[0].recorded.unix_ns, k1430);
  EXPECT_EQ(c->streams[1].recorded.from, RecordingStart::From::kFileName);
  EXPECT_EQ(c->streams[1].recorded.unix_ns, k1430);
  EXPECT_EQ(c->streams[2].recorded.from, RecordingStart::From::kContainer);
  EXPECT_EQ(c->streams[3].recorded, c->streams[1].recorded);  // a member: its source's
  ASSERT_EQ(c->streams.size(), 8u);
  EXPECT_EQ(c->streams[4].recorded.unix_ns, k1430);  // all-ch01_20261130143000.mp4
  EXPECT_EQ(c->streams[5].recorded.unix_ns, k1430 + int64_t{1800} * 1000000000);
  EXPECT_FALSE(c->streams[6].recorded.known());  // all-holiday.mp4
  EXPECT_EQ(c->streams[7].recorded.from, RecordingStart::From::kNone);
  ASSERT_EQ(c->notes.size(), 1u);
  EXPECT_EQ(c->notes[0], "streams[4].recorded_at: 1 of 3 file names hold no time that name:%Y%m%d%H%M%S reads "
                         "('holiday.mp4'): their results' camera_unix_ms stay null");
  const std::string head = "infer: {model: m, labels: l}\nstreams:\n";
  expect_each_refused(head, {
           {"  - {id: a, uri: 'rtsp://cam/s', recorded_at: container}\n",
            "job.yaml:3: streams[0].recorded_at: only for files (a camera's own clock comes from its RTCP sender reports"},
           {"  - {id: a, uri: holiday.mp4, recorded_at: 'name:%Y%m%d%H%M%S'}\n",
            "job.yaml:3: streams[0].recorded_at: the name 'holiday.mp4' holds no time that name:%Y%m%d%H%M%S reads"},
           {"  - {id: a, uri: holiday.mp4, recorded_at: 'yesterday at noon'}\n",
            "streams[0].recorded_at: expected a date and time as ISO 8601 writes it"},
           {"  - {id: a, uri: 'test://ball', recorded_at: container}\n",
            "streams[0].recorded_at: a test:// source has no file name or container: give the time"},
           {"  - {id: a, uri: holiday.mp4}\n  - {id: b, source: a, recorded_at: container}\n",
            "job.yaml:4: streams[1].recorded_at: a stream with `source` classifies the frames of stream 'a'"}}, dir.string());
  std::filesystem::remove_all(dir);
}

// streams[].from and to: the part of a file classified, in seconds or [H:]MM:SS[.fff] of its own time;
// a glob's files and a source's members take them; not for cameras.
TEST(Config, FromAndToGiveThePartOfAFileThatIsClassified) {
  auto c = load_config_string(R"(
streams:
  - {id: a, uri: /m/a.mp4, from: '1:30:00', to: 5430.5}
  - {id: b, uri: /m/b.mp4, from: '12:05.25'}
  - {id: c, uri: /m/c.mp4, to: 90}
  - {id: d, source: a, roi: [0, 0, 0.5, 1]}
  - {id: e, uri: /m/e.mp4}
infer: {model: m, labels: l}
)", "job.yaml", "/cfg");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->streams[0].from_ns, int64_t{5400} * 1000000000);
  EXPECT_EQ(c->streams[0].to_ns, int64_t{5430500} * 1000000);
  EXPECT_EQ(c->streams[1].from_ns, int64_t{725250} * 1000000);
  EXPECT_EQ(c->streams[1].to_ns, -1);
  EXPECT_EQ(c->streams[2].from_ns, 0);
  EXPECT_EQ(c->streams[2].to_ns, int64_t{90} * 1000000000);
  EXPECT_EQ(c->streams[3].from_ns, c->streams[0].from_ns);  // a member: its source's part
  EXPECT_TRUE(c->streams[4].whole_file());
  EXPECT_EQ(media_time_text(c->streams[0].from_ns), "1:30:00.000");
  EXPECT_EQ(media_time_text(c->streams[1].from_ns), "12:05.250");
  const std::string head = "infer: {model: m, labels: l}\nstreams:\n";
  expect_each_refused(head, {
           {"  - {id: a, uri: /m/a.mp4, from: 60, to: 30}\n", "job.yaml:3: streams[0].to: must be after from (1:00.000), got 0:30.000"},
           {"  - {id: a, uri: /m/a.mp4, from: '1:75'}\n", "streams[0].from: expected seconds (5400) or [H:]MM:SS[.fff] (1:30:00) of "
                                                          "the video's own time, got '1:75' (minutes and seconds below 60)"},
           {"  - {id: a, uri: /m/a.mp4, to: -5}\n", "streams[0].to: expected seconds"},
           {"  - {id: a, uri: /m/a.mp4, to: 'the end'}\n", "streams[0].to: expected seconds"},
           {"  - {id: a, uri: 'rtsp://cam/s', from: 10}\n", "streams[0].from: only for files (a part of a recording, in its own time)"},
           {"  - {id: a, uri: /m/a.mp4}\n  - {id: b, source: a, to: 10}\n",
            "job.yaml:4: streams[1].to: a stream with `source` classifies the frames of stream 'a'"}}, "/cfg");
}

// streams[].loop: a live job's file read again at its end, as an endless camera. It makes the job live
// by default (it never ends by itself); files of a live job only.
TEST(Config, LoopReadsALiveJobsFileAgainAndOnlyThat) {
  auto c = load_config_string(R"(
streams:
  - {id: a, uri: /m/a.mp4, loop: true, from: 10}
  - {id: b, uri: /m/b.mp4}
infer: {model: m, labels: l}
)", "job.yaml", "/cfg");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->job.mode, JobMode::kLive);  // (without the loop: archive, every stream a file)
  EXPECT_TRUE(c->streams[0].loop);
  EXPECT_FALSE(c->streams[1].loop);
  const std::string head = "infer: {model: m, labels: l}\nstreams:\n";
  expect_each_refused(head, {
           {"  - {id: a, uri: 'rtsp://cam/s', loop: true}\n",
            "job.yaml:3: streams[0].loop: only for files (a recording read again from its start at its end, as an "
            "endless camera)"},
           {"  - {id: a, uri: /m/a.mp4, loop: true}\njob: {mode: archive}\n",
            "job.yaml:3: streams[0].loop: only in a live job (a file read again at its end never ends"},
           {"  - {id: a, uri: /m/a.mp4}\n  - {id: b, source: a, loop: true}\n",
            "job.yaml:4: streams[1].loop: a stream with `source` classifies the frames of stream 'a'"},
           {"  - {glob: '/m/*.mp4', loop: true}\njob: {mode: live}\n",
            "streams[0].loop: only for a file of its own (uri)"},
           {"  - {id: a, uri: /m/a.mp4, loop: yes please}\n", "streams[0].loop: expected"}}, "/cfg");
}

// streams[].from and to as times of day ("camera 3 between 14:10 and 14:40"): placed in each file by
// when its recording started; a glob's files recorded from `to` on, or whose names say no start, are
// left out (noted); a time of day needs a start known as the config is read.
TEST(Config, FromAndToAsTimesOfDayArePlacedInEachRecording) {
  testing::LocalZone zone("UTC0");
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("vapipe-config-day-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir / "dvr");
  for (const char* name : {"ch03_20261130130000.mp4", "ch03_20261130140000.mp4", "ch03_20261130150000.mp4", "export.mp4"}) {
    std::ofstream(dir / "dvr" / name) << "x";
  }
  auto c = load_config_string(R"(
streams:
  - {glob: 'dvr/*.mp4', recorded_at: 'name:ch03_%Y%m%d%H%M%S', from: '2026-11-30T14:10:00', to: '2026-11-30T14:40:00'}
  - {id: one, uri: dvr/export.mp4, recorded_at: '2026-11-30T14:05:00Z', from: '2026-11-30T14:10:00Z'}
infer: {model: m, labels: l}
)", "job.yaml", dir.string());
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->streams.size(), 3u);
  constexpr int64_t kMin = int64_t{60} * 1000000000;
  EXPECT_EQ(c->streams[0].id, "ch03_20261130130000");  // 13:00: 70 to 100 min in (past its end, if an hour)
  EXPECT_EQ(c->streams[0].from_ns, 70 * kMin);
  EXPECT_EQ(c->streams[0].to_ns, 100 * kMin);
  EXPECT_EQ(c->streams[1].id, "ch03_20261130140000");  // 14:00: 10 to 40 min in
  EXPECT_EQ(c->streams[1].from_ns, 10 * kMin);
  EXPECT_EQ(c->streams[1].to_ns, 40 * kMin);
  EXPECT_EQ(c->streams[2].id, "one");
  EXPECT_EQ(c->streams[2].from_ns, 5 * kMin);
  EXPECT_EQ(c->streams[2].to_ns, -1);
  ASSERT_EQ(c->notes.size(), 2u);
  EXPECT_EQ(c->notes[0], "streams[0].recorded_at: 1 of 4 file names hold no time that name:ch03_%Y%m%d%H%M%S reads "
                         "('export.mp4'): left out, as its from and to are times of day");
  EXPECT_EQ(c->notes[1], "streams[0].to: 1 of 4 files left out: recorded from 2026-11-30T14:40:00 on "
                         "('ch03_20261130150000.mp4')");
  const std::string head = "infer: {model: m, labels: l}\nstreams:\n";
  expect_each_refused(head, {
           {"  - {id: a, uri: dvr/export.mp4, recorded_at: container, from: '2026-11-30T14:10:00'}\n",
            "job.yaml:3: streams[0].from: a time of day needs when the recording started, as the config is read: give "
            "recorded_at as a time or name:FORMAT (its container is read only when the file opens)"},
           {"  - {id: a, uri: dvr/export.mp4, to: '2026-11-30T14:10:00'}\n",
            "streams[0].to: a time of day needs when the recording started, as the config is read: give recorded_at,"},
           {"  - {id: a, uri: dvr/export.mp4, recorded_at: '2026-11-30T14:00:00', from: '2026-11-30T14:10:00', to: 600}\n",
            "streams[0].to: give from and to alike"},
           {"  - {id: a, uri: dvr/export.mp4, recorded_at: '2026-11-30T14:00:00', from: '2026-11-30T14:10:00', "
            "to: '2026-11-30T14:05:00'}\n",
            "streams[0].to: must be after from (2026-11-30T14:10:00), got 2026-11-30T14:05:00"},
           {"  - {id: a, uri: dvr/export.mp4, recorded_at: '2026-11-30T15:00:00', to: '2026-11-30T14:40:00'}\n",
            "streams[0].to: its recording starts at 2026-11-30 15:00:00 +0000, at or after its to (2026-11-30T14:40:00): "
            "nothing of it is in that part"},
           {"  - {glob: 'dvr/*150000.mp4', recorded_at: 'name:ch03_%Y%m%d%H%M%S', to: '2026-11-30T14:40:00'}\n",
            "streams[0].glob: none of its 1 files was recorded before its to (2026-11-30T14:40:00)"}}, dir.string());
  std::filesystem::remove_all(dir);
}

// publish.jsonl_path named by the time: a live job's file a day (or an hour); an archive job's --resume
// reads one file, so it is refused there, as are conversions that name no date or hour.
TEST(Config, AResultsFileNamedByTheTimeIsALiveJobs) {
  auto c = load_config_string("job: {mode: live}\nstreams: [{id: a, uri: 'rtsp://cam/s'}]\ninfer: {model: m, labels: l}\n"
                              "publish: {jsonl_path: 'results/%Y-%m-%d.jsonl'}\n", "job.yaml", "/cfg");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->publish.jsonl_path, "/cfg/results/%Y-%m-%d.jsonl");
  expect_each_refused("infer: {model: m, labels: l}\n", {
      {"streams: [{id: a, uri: /m/a.mp4}]\npublish: {jsonl_path: 'r-%F.jsonl'}\n",
       "job.yaml:3: publish.jsonl_path: a results file named by the time (/cfg/r-%F.jsonl) is for live jobs"},
      {"streams: [{id: a, uri: 'rtsp://cam/s'}]\npublish: {jsonl_path: 'r-%H%M%S.jsonl'}\n",
       "publish.jsonl_path: '/cfg/r-%H%M%S.jsonl': %S is not a conversion that names a date or an hour"},
      {"streams: [{id: a, uri: 'rtsp://cam/s'}]\npublish: {jsonl_path: 'r.jsonl', jsonl_keep: 14}\n",
       "publish.jsonl_keep: only with a publish.jsonl_path named by the time"}}, "/cfg");
}

// A live job's (or a watched folder's) sink topic that names no stream while some ids start with it took
// them before a stream's topic was taken whole: noted, with the '*' that takes them.
TEST(Config, ALiveJobsSinkTopicThatIsAPartOfIdsIsNoted) {
  auto c = load_config_string(
      "job: {mode: live}\nstreams: [{id: cam1-day, uri: 'rtsp://cam/a'}, {id: cam1-night, uri: 'rtsp://cam/b'}]\n"
      "infer: {model: m, labels: l}\npublish:\n  webhooks: [{url: 'https://h/x', topics: [events/cam1, events/cam1-day]}]\n",
      "job.yaml", "/cfg");
  ASSERT_TRUE(c.ok()) << c.status().message();
  std::string notes;
  for (const std::string& n : c->notes) notes += n + "\n";
  EXPECT_NE(notes.find("publish.webhooks[0].topics: 'events/cam1' takes stream 'cam1''s messages alone (a stream's "
                       "topic is taken whole), not those of 'cam1-day', 'cam1-night': 'events/cam1*' takes every "
                       "stream whose id starts with 'cam1'"), std::string::npos) << notes;
  EXPECT_EQ(notes.find("'events/cam1-day'"), std::string::npos) << notes;
}

// A sink's secret that crosses the network unencrypted is said where the job starts (a note); over TLS,
// or to this host, it is not.
TEST(Config, ASinksSecretSentUnencryptedBeyondThisHostIsNoted) {
  const std::filesystem::path dir = testing::empty_temp_dir("config-in-clear");
  std::ofstream((dir / "pw").string()) << "secret\n";
  std::filesystem::permissions(dir / "pw", std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  auto c = load_config_string(
      "streams: [{id: a, uri: 'rtsp://cam/s'}]\ninfer: {model: m, labels: l}\npublish:\n  webhooks:\n"
      "    - {url: 'http://hooks.lan:8080/x', topics: [events/], headers: {Authorization: 'Bearer t'}}\n"
      "    - {url: 'https://hooks.lan/x', topics: [events/], headers: {Authorization: 'Bearer t'}}\n"
      "    - {url: 'http://u:p@127.0.0.1:8080/x', topics: [events/]}\n"
      "  mqtt: [{url: 'mqtt://ha@10.0.0.2', password_file: pw, topics: [events/]}]\n"
      "  redis: [{url: 'rediss://10.0.0.3', password_file: pw, topics: [events/]}]\n",
      "job.yaml", dir.string());
  ASSERT_TRUE(c.ok()) << c.status().message();
  std::string notes;
  for (const std::string& n : c->notes) notes += n + "\n";
  EXPECT_NE(notes.find("publish.webhooks[0]: its secret header goes unencrypted over http:// to hooks.lan: anyone on "
                       "the network between may read it (https:// keeps it private)"), std::string::npos) << notes;
  EXPECT_NE(notes.find("publish.mqtt[0]: its password goes unencrypted over mqtt:// to 10.0.0.2"), std::string::npos)
      << notes;
  EXPECT_EQ(notes.find("webhooks[1]"), std::string::npos) << notes;
  EXPECT_EQ(notes.find("webhooks[2]"), std::string::npos) << notes;
  EXPECT_EQ(notes.find("redis[0]"), std::string::npos) << notes;
}

// The results file naming one of the job's inputs would be emptied at its start: refused, naming which.
TEST(Config, AResultsFileThatIsOneOfTheJobsInputsIsRefused) {
  expect_each_refused("", {
      {"streams: [{id: gate, uri: /m/gate.mp4}]\ninfer: {model: m.pt, labels: l}\npublish: {jsonl_path: /m/gate.mp4}\n",
       "publish.jsonl_path: /m/gate.mp4 is stream 'gate''s file too: the results would overwrite it"},
      {"streams: [{id: a, uri: 'rtsp://cam/s'}]\ninfer: {model: m.pt, labels: l}\npublish: {jsonl_path: ./x/../m.pt}\n",
       "publish.jsonl_path: /cfg/m.pt is infer.model's file too"},
      {"job: {summary_path: s.json}\nstreams: [{id: a, uri: 'rtsp://cam/s'}]\ninfer: {model: m, labels: l}\n"
       "publish: {jsonl_path: s.json}\n",
       "publish.jsonl_path: /cfg/s.json is job.summary_path's file too"}}, "/cfg");
}

// Either output naming the config itself would overwrite it; a summary path that is a folder was found
// only at the job's end (every frame classified, then exit 2).
TEST(Config, AnOutputThatIsTheConfigOrASummaryThatIsAFolderIsRefused) {
  const std::filesystem::path dir = testing::empty_temp_dir("config-outputs");
  std::filesystem::create_directories(dir / "out");
  const std::string job = (dir / "job.yaml").string();
  const std::string head = "streams: [{id: a, uri: 'rtsp://cam/s'}]\ninfer: {model: m, labels: l}\n";
  for (const auto& [text, expected] : std::vector<std::pair<std::string, std::string>>{
           {"publish: {jsonl_path: job.yaml}\n", "publish.jsonl_path: " + job + " is the config's file too"},
           {"job: {summary_path: ./job.yaml}\n", "job.summary_path: " + job + " is the config's file too: the summary "
                                                 "would overwrite it"},
           {"job: {summary_path: out}\n", ":3: job.summary_path: out is a folder: give a file's path (out/summary.json)"},
           {"job: {summary_path: out/}\n", "job.summary_path: out/ is a folder"},
           {"job: {summary_path: .}\n", "job.summary_path: . is a folder"}}) {
    std::ofstream(job) << head << text;
    auto c = load_config_file(job);
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_NE(c.status().message().find(expected), std::string::npos) << c.status().message();
  }
  std::ofstream(job) << head << "job: {summary_path: out/summary.json}\npublish: {jsonl_path: out/results.jsonl}\n";
  EXPECT_TRUE(load_config_file(job).ok());
}

// Values a stage could not bind were found only once the job's stages ran (exit 2, no line), and ZeroMQ
// took a port over 65535 modulo 65536.
TEST(Config, EndpointsAStageCannotBindAreRefused) {
  expect_each_refused("streams: [{id: a, uri: 'rtsp://cam/s'}]\ninfer: {model: m, labels: l}\n", {
      {"publish: {endpoint: 'foo://bar'}\n", "job.yaml:3: publish.endpoint: expected a ZeroMQ endpoint tcp://HOST:PORT"},
      {"publish: {endpoint: 'tcp://127.0.0.1'}\n", "publish.endpoint: expected tcp://HOST:PORT with a port from 1 to 65535"},
      {"publish: {endpoint: 'tcp://127.0.0.1:99999'}\n", "publish.endpoint: expected tcp://HOST:PORT with a port"},
      {"transport: {endpoints: {preprocess: 'tcp://10.0.0.2:5551', batch: 'tcp://*:5551'}}\n",
       "transport.endpoints.batch: tcp://*:5551 is transport.endpoints.preprocess too: each stage's input needs its own"},
      {"transport: {endpoints: {infer: 'tcp://0.0.0.0:5560'}}\n",
       "transport.endpoints.infer: tcp://0.0.0.0:5560 is the result bus's (publish.endpoint) too"},
      {"transport: {mode: tcp, endpoints: {infer: 'tcp://127.0.0.1:5551', batch: 'tcp://*:5551'}}\n",
       "transport.endpoints.infer: tcp://127.0.0.1:5551 is transport.endpoints.batch too"},
      {"publish: {endpoint: 'tcp://0.0.0.0:5560'}\ntransport: {mode: tcp, endpoints: {publish: 'tcp://10.0.0.2:5560'}}\n",
       "transport.endpoints.publish: tcp://10.0.0.2:5560 is the result bus's (publish.endpoint) too"},
      {"publish: {metrics_address: '127.0.0.1:5560'}\n",
       "publish.metrics_address: 127.0.0.1:5560 is the result bus's port too (publish.endpoint tcp://127.0.0.1:5560)"},
      {"publish: {metrics_address: 'http://127.0.0.1:9100'}\n", "publish.metrics_address: expected HOST:PORT without a scheme"},
      {"transport: {mode: tcp, frame_slots: 8}\n", "job.yaml:3: transport.frame_slots: only with transport.mode: shm"},
      {"transport: {mode: tcp, device_pools: false}\n", "transport.device_pools: only with transport.mode: shm"}},
      "/cfg");
  for (const char* fine : {"publish: {endpoint: 'tcp://*:5560', metrics_address: '0.0.0.0:9560'}\n",
                           "publish: {endpoint: 'ipc:///tmp/bus.sock'}\n",
                           "publish: {endpoint: 'ws://127.0.0.1:5877'}\n",  // ZeroMQ's other transports
                           "publish: {endpoint: 'epgm://eth0;239.192.1.1:5560'}\n",
                           // tcp across hosts: the bus on every interface of its host, preprocess on another.
                           "publish: {endpoint: 'tcp://0.0.0.0:5560', metrics_address: '0.0.0.0:5551'}\n"
                           "transport: {mode: tcp, endpoints: {preprocess: 'tcp://10.0.0.1:5560', batch: "
                           "'tcp://10.0.0.1:5551', publish: 'tcp://10.0.0.2:5554'}}\n",
                           "transport: {mode: tcp, endpoints: {preprocess: 'tcp://[::1]:5551', batch: 'tcp://[::1]:5552'}}\n"}) {
    auto c = load_config_string(std::string("streams: [{id: a, uri: 'rtsp://cam/s'}]\ninfer: {model: m, labels: l}\n") +
                                    fine, "job.yaml", "/cfg");
    EXPECT_TRUE(c.ok()) << fine << ": " << c.status().message();
  }
}

TEST(Config, ValuesThatPassedAndMisledAreRefused) {
  expect_each_refused("infer: {model: m, labels: l}\n", {
      // .nan is a number to YAML: every tensor NaN, classified as anything.
      {"streams: [{id: a, uri: 'rtsp://cam/s'}]\npreprocess: {mean: [.nan, 0.4, 0.4]}\n",
       "job.yaml:3: preprocess.mean[0]: expected a number, got '.nan'"},
      {"streams: [{id: a, uri: 'rtsp://cam/s'}]\npreprocess: {std: [0.2, .inf, 0.2]}\n", "preprocess.std[1]: expected a positive"},
      // GStreamer's num-buffers is 32 bits: 2^32 + 1 frames made 1.
      {"streams: [{id: a, uri: 'test://ball?frames=4294967297'}]\n", "bad value '4294967297' for test URI parameter 'frames'"},
      {"streams: [{id: a, uri: 'test://ball?frames=2&frames=5'}]\n", "test URI parameter 'frames' given twice"},
}, "/cfg");
  expect_each_refused("streams: [{id: a, uri: 'rtsp://cam/s'}]\n", {
      {"infer: {model: m, labels: l, device: cpu, cuda_graphs: 'on'}\n",
       "infer.cuda_graphs: 'on' needs the model on a GPU, and infer.device is cpu"}},
      "/cfg");
  expect_each_refused("streams: [{id: a, uri: 'rtsp://cam/s'}]\ninfer: {model: m, labels: l}\n", {
      {"publish:\n  webhooks:\n    - {url: 'http://127.0.0.1:9/h', topics: [events/], headers: {X-A: '1', x-a: '2'}}\n",
       "job.yaml:5: publish.webhooks[0].headers.x-a: is headers.X-A too (header names ignore case)"},
      {"batch: {max_batch_size: '${N}'}\n", "(${...} is expanded in string values only: write the number)"}},
      "/cfg");
  // Left out, the longest reconnect wait is at least the first (the default 30 refused 60 alone).
  auto slow = load_config_string("streams: [{id: a, uri: 'rtsp://cam/s'}]\ninfer: {model: m, labels: l}\n"
                                 "ingest: {reconnect_delay_s: 60}\n", "job.yaml", "/cfg");
  ASSERT_TRUE(slow.ok()) << slow.status().message();
  EXPECT_EQ(slow->ingest.reconnect_max_delay_s, 60.0);
  // An unknown key of a webhook is said before what it lacks (its `timeout` said "topics: not given").
  expect_each_refused("streams: [{id: a, uri: 'rtsp://cam/s'}]\ninfer: {model: m, labels: l}\n", {
      {"publish:\n  webhooks:\n    - {url: 'http://127.0.0.1:9/h', timeout: 5}\n",
       "job.yaml:5: publish.webhooks[0].timeout: unknown key"}},
      "/cfg");
}

TEST(Config, SegmentsMinScoreSaysWhichFramesCountForSegments) {
  auto c = load_config_string("streams: [{id: a, uri: 'rtsp://cam/s'}]\ninfer: {model: m, labels: l}\n"
                              "publish: {segments_min_frames: 5, segments_min_score: 0.6}\n", "job.yaml", "/cfg");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_DOUBLE_EQ(c->publish.segments_min_score, 0.6);
  expect_each_refused("streams: [{id: a, uri: 'rtsp://cam/s'}]\ninfer: {model: m, labels: l}\n", {
      {"publish: {segments_min_score: 0.6}\n", "job.yaml:3: publish.segments_min_score: needs publish.segments_min_frames"},
      {"publish: {segments_min_frames: 5, segments_min_score: 1.5}\n", "job.yaml:3: publish.segments_min_score"}},
      "/cfg");
}

TEST(Config, SegmentsOfEachLabelNeedAMinimumScore) {
  auto c = load_config_string("streams: [{id: a, uri: 'rtsp://cam/s'}]\ninfer: {model: m, labels: l}\n"
                              "publish: {segments_min_frames: 5, segments_min_score: 0.5, segments_labels: each}\n",
                              "job.yaml", "/cfg");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->publish.segments_labels, "each");
  auto plain = load_config_string("streams: [{id: a, uri: 'rtsp://cam/s'}]\ninfer: {model: m, labels: l}\n",
                                  "job.yaml", "/cfg");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(plain->publish.segments_labels, "top1");
  expect_each_refused("streams: [{id: a, uri: 'rtsp://cam/s'}]\ninfer: {model: m, labels: l}\n", {
      {"publish: {segments_min_frames: 5, segments_labels: each}\n",
       "job.yaml:3: publish.segments_labels: each needs publish.segments_min_frames (N >= 1) and segments_min_score"},
      {"publish: {segments_min_frames: 5, segments_min_score: 0.5, segments_labels: all}\n",
       "job.yaml:3: publish.segments_labels"}},
      "/cfg");
}

// segments_reconnect_grace_s: 0 by default, seconds up to an hour, and only with segments.
TEST(Config, AReconnectGraceIsForSegments) {
  auto c = load_config_string("streams: [{id: a, uri: 'rtsp://cam/s'}]\ninfer: {model: m, labels: l}\n"
                              "publish: {segments_min_frames: 5, segments_reconnect_grace_s: 12.5}\n",
                              "job.yaml", "/cfg");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->publish.segments_reconnect_grace_s, 12.5);
  auto plain = load_config_string("streams: [{id: a, uri: 'rtsp://cam/s'}]\ninfer: {model: m, labels: l}\n",
                                  "job.yaml", "/cfg");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(plain->publish.segments_reconnect_grace_s, 0);
  expect_each_refused("streams: [{id: a, uri: 'rtsp://cam/s'}]\ninfer: {model: m, labels: l}\n", {
      {"publish: {segments_reconnect_grace_s: 10}\n",
       "job.yaml:3: publish.segments_reconnect_grace_s: needs publish.segments_min_frames (N >= 1)"},
      {"publish: {segments_min_frames: 5, segments_reconnect_grace_s: -1}\n", "job.yaml:3: publish.segments_reconnect_grace_s"},
      {"publish: {segments_min_frames: 5, segments_reconnect_grace_s: 7200}\n", "job.yaml:3: publish.segments_reconnect_grace_s"}},
      "/cfg");
}

// segments_skip_damaged: off by default, a boolean, and only with segments.
TEST(Config, SkippingDamagedFramesIsForSegments) {
  auto c = load_config_string("streams: [{id: a, uri: 'rtsp://cam/s'}]\ninfer: {model: m, labels: l}\n"
                              "publish: {segments_min_frames: 5, segments_skip_damaged: true}\n",
                              "job.yaml", "/cfg");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->publish.segments_skip_damaged);
  auto plain = load_config_string("streams: [{id: a, uri: 'rtsp://cam/s'}]\ninfer: {model: m, labels: l}\n",
                                  "job.yaml", "/cfg");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_FALSE(plain->publish.segments_skip_damaged);
  expect_each_refused("streams: [{id: a, uri: 'rtsp://cam/s'}]\ninfer: {model: m, labels: l}\n", {
      {"publish: {segments_skip_damaged: true}\n",
       "job.yaml:3: publish.segments_skip_damaged: needs publish.segments_min_frames (N >= 1)"},
      {"publish: {segments_min_frames: 5, segments_skip_damaged: often}\n", "job.yaml:3: publish.segments_skip_damaged"}},
      "/cfg");
}

// Pictures of segments: a live job's, relative to the config's folder; refused without segments, and
// for an archive job (whose files `vapipe segments --frames` decodes again).
TEST(Config, SegmentPicturesAreALiveJobsWithSegments) {
  auto c = load_config_string("streams: [{id: a, uri: 'rtsp://cam/s'}]\ninfer: {model: m, labels: l}\n"
                              "publish: {segments_min_frames: 5, segments_pictures_dir: pictures}\n",
                              "job.yaml", "/cfg");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->publish.segments_pictures_dir, "/cfg/pictures");
  auto none = load_config_string("streams: [{id: a, uri: 'rtsp://cam/s'}]\ninfer: {model: m, labels: l}\n",
                                 "job.yaml", "/cfg");
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_EQ(none->publish.segments_pictures_dir, "");
  expect_each_refused("infer: {model: m, labels: l}\n", {
      {"streams: [{id: a, uri: 'rtsp://cam/s'}]\npublish: {segments_pictures_dir: /p}\n",
       "job.yaml:3: publish.segments_pictures_dir: needs publish.segments_min_frames (N >= 1)"},
      {"streams: [{id: a, uri: 'test://ball?frames=30'}]\npublish: {segments_min_frames: 3, segments_pictures_dir: /p}\n",
       "job.yaml:3: publish.segments_pictures_dir: is for live jobs"},
      {"streams: [{id: a, uri: 'test://ball?frames=30'}]\npublish: {segments_min_frames: 3, segments_pictures_dir: /p}\n",
       "vapipe segments RESULTS.jsonl --frames DIR"},
      {"streams: [{id: a, uri: 'rtsp://cam/s'}]\npublish: {segments_min_frames: 3, segments_pictures_keep_days: 30}\n",
       "job.yaml:3: publish.segments_pictures_keep_days: only with publish.segments_pictures_dir"}},
      "/cfg");
  auto kept = load_config_string("streams: [{id: a, uri: 'rtsp://cam/s'}]\ninfer: {model: m, labels: l}\n"
                                 "publish: {segments_min_frames: 5, segments_pictures_dir: p, segments_pictures_keep_days: 30}\n",
                                 "job.yaml", "/cfg");
  ASSERT_TRUE(kept.ok()) << kept.status().message();
  EXPECT_EQ(kept->publish.segments_pictures_keep_days, 30u);
}

// Clips of segments: beside their pictures, so only with segments_pictures_dir; their pre-roll,
// post-roll and longest are read only with them.
TEST(Config, SegmentClipsAreWrittenBesideThePictures) {
  auto c = load_config_string("streams: [{id: a, uri: 'rtsp://cam/s'}]\ninfer: {model: m, labels: l}\n"
                              "publish: {segments_min_frames: 5, segments_pictures_dir: p, segments_clips: true,\n"
                              "          segments_clip_pre_s: 2.5, segments_clip_post_s: 10, segments_clip_max_s: 60}\n",
                              "job.yaml", "/cfg");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->publish.segments_clips);
  EXPECT_EQ(c->publish.segments_clip_pre_s, 2.5);
  EXPECT_EQ(c->publish.segments_clip_post_s, 10);
  EXPECT_EQ(c->publish.segments_clip_max_s, 60);
  auto plain = load_config_string("streams: [{id: a, uri: 'rtsp://cam/s'}]\ninfer: {model: m, labels: l}\n"
                                  "publish: {segments_min_frames: 5, segments_pictures_dir: p}\n",
                                  "job.yaml", "/cfg");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_FALSE(plain->publish.segments_clips);
  EXPECT_EQ(plain->publish.segments_clip_pre_s, 5);
  EXPECT_EQ(plain->publish.segments_clip_max_s, 300);
  expect_each_refused("streams: [{id: a, uri: 'rtsp://cam/s'}]\ninfer: {model: m, labels: l}\n", {
      {"publish: {segments_min_frames: 3, segments_clips: true}\n",
       "job.yaml:3: publish.segments_clips: needs publish.segments_pictures_dir"},
      {"publish: {segments_min_frames: 3, segments_pictures_dir: p, segments_clip_pre_s: 3}\n",
       "job.yaml:3: publish.segments_clip_pre_s: only with publish.segments_clips: true"},
      {"publish: {segments_min_frames: 3, segments_pictures_dir: p, segments_clips: true, segments_clip_pre_s: 90}\n",
       "job.yaml:3: publish.segments_clip_pre_s"},
      {"publish: {segments_min_frames: 3, segments_pictures_dir: p, segments_clips: true, segments_clip_max_s: 0}\n",
       "job.yaml:3: publish.segments_clip_max_s"}},
      "/cfg");
}

// A label's own minimum score for segments, over segments_min_score; each remembers its line, for
// infer's check that it is a label of the labels file.
TEST(Config, SegmentsMinScoreByLabelGivesLabelsAMinimumOfTheirOwn) {
  auto c = load_config_string("streams: [{id: a, uri: 'rtsp://cam/s'}]\ninfer: {model: m, labels: l}\npublish:\n"
                              "  segments_min_frames: 5\n  segments_min_score: 0.5\n  segments_min_score_by_label:\n"
                              "    smoke: 0.3\n    'fire truck': 0.75\n", "job.yaml", "/cfg");
  ASSERT_TRUE(c.ok()) << c.status().message();
  const PublishConfig& p = c->publish;
  ASSERT_EQ(p.segments_min_score_by_label.size(), 2u);
  EXPECT_EQ(p.segments_min_score_by_label.at("smoke").line, 7);
  EXPECT_EQ(p.segments_min_score_by_label.at("fire truck").line, 8);
  EXPECT_DOUBLE_EQ(p.segment_min_score("smoke"), 0.3);
  EXPECT_DOUBLE_EQ(p.segment_min_score("fire truck"), 0.75);
  EXPECT_DOUBLE_EQ(p.segment_min_score("person"), 0.5);  // not listed: segments_min_score
  auto each = load_config_string("streams: [{id: a, uri: 'rtsp://cam/s'}]\ninfer: {model: m, labels: l}\n"
                                 "publish: {segments_min_frames: 5, segments_min_score: 0.5, segments_labels: each, "
                                 "segments_min_score_by_label: {smoke: 0.2}}\n", "job.yaml", "/cfg");
  ASSERT_TRUE(each.ok()) << each.status().message();
  EXPECT_DOUBLE_EQ(each->publish.segment_min_score("smoke"), 0.2);
  expect_each_refused("streams: [{id: a, uri: 'rtsp://cam/s'}]\ninfer: {model: m, labels: l}\n", {
      {"publish: {segments_min_score_by_label: {smoke: 0.3}}\n",
       "job.yaml:3: publish.segments_min_score_by_label: needs publish.segments_min_frames"},
      {"publish: {segments_min_frames: 5, segments_min_score_by_label: 0.3}\n",
       "job.yaml:3: publish.segments_min_score_by_label: expected a mapping of label: score"},
      {"publish: {segments_min_frames: 5, segments_min_score_by_label: [smoke]}\n",
       "job.yaml:3: publish.segments_min_score_by_label: expected a mapping of label: score (e.g. {smoke: 0.3, "
       "person: 0.7}), got a list"},
      {"publish:\n  segments_min_frames: 5\n  segments_min_score_by_label:\n    smoke: 1.5\n",
       "job.yaml:6: publish.segments_min_score_by_label.smoke: expected a number from 0 to 1, got '1.5'"},
      {"publish:\n  segments_min_frames: 5\n  segments_min_score_by_label:\n    smoke: high\n",
       "job.yaml:6: publish.segments_min_score_by_label.smoke: expected a number from 0 to 1, got 'high'"},
      {"publish: {segments_min_frames: 5, segments_min_score: 0.5, segments_labels: each, "
       "segments_min_score_by_label: {smoke: 0}}\n",
       "job.yaml:3: publish.segments_min_score_by_label.smoke: expected a number above 0 with segments_labels: each"}},
      "/cfg");
}

TEST(Config, ASourceThatCannotBeIsAnErrorNamingTheLineAndKey) {
  const std::string head = "infer: {model: m, labels: l}\nstreams:\n  - {id: door, uri: 'test://ball'}\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"  - {id: gate, source: dor}\n", "job.yaml:4: streams[1].source: no stream has the id 'dor'"},
      {"  - {id: gate, source: gate}\n", "job.yaml:4: streams[1].source: a stream cannot be its own source"},
      {"  - {id: gate, source: door}\n  - {id: yard, source: gate}\n",
       "job.yaml:5: streams[2].source: 'gate' takes its frames from 'door' itself: name 'door' as the source"},
      {"  - {id: gate, source: door, uri: 'test://snow'}\n",
       "job.yaml:4: streams[1].uri: a stream with `source` classifies the frames of stream 'door' as that stream decodes "
       "them: set uri on 'door' instead"},
      {"  - {id: gate, source: door, max_fps: 2}\n", "streams[1].max_fps: a stream with `source`"},
      {"  - {id: gate, source: door, keyframes_only: true}\n", "streams[1].keyframes_only: a stream with `source`"},
      {"  - {id: gate, source: door, rtsp_latency_ms: 10}\n", "streams[1].rtsp_latency_ms: a stream with `source`"},
      {"  - {id: gate, source: door, rotate: 90}\n", "streams[1].rotate: a stream with `source`"},
      {"  - {id: gate, source: door, mirror: true}\n", "streams[1].mirror: a stream with `source`"},
      {"  - {glob: '*.mp4', source: door}\n", "streams[1].glob: a stream with `source`"},
      {"  - {id: gate, source: door, id_prefix: x}\n", "streams[1].id_prefix: a stream with `source`"},
      {"  - {id: gate, source: door, settle_s: 5}\n", "streams[1].settle_s: a stream with `source`"},
      {"  - {id: gate, source: door}\n  - {id: yard, uri: 'test://snow'}\n  - {id: yard-2, source: yard}\n"
       "transport: {frame_slots: 2}\n",
       "job.yaml:7: transport.frame_slots: 2 slots are too few for 2 streams with members (streams[].source): each "
       "holds its decoded frame while it waits for a slot for a member's copy; give at least 3"},
      {"  - {source: door}\n", "streams[1].id: missing"},
      {"  - {id: door, source: door}\n", "streams[1].id: duplicate stream id 'door'"},
  };
  for (const auto& [stream, expected] : cases) {
    auto c = load_config_string(head + stream, "job.yaml", "/cfg");
    ASSERT_FALSE(c.ok()) << stream;
    EXPECT_NE(c.status().message().find(expected), std::string::npos) << c.status().message();
  }
}

}  // namespace
}  // namespace vapipe
