// Reading a job's JSON-lines file into a resume plan: what is kept, where it is cut, what cannot be
// resumed exactly once.
#include "pipeline/resume.h"

#include "pipeline/file_identity.h"

#include <cstdint>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace vapipe {
namespace {

class ResumePlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("vapipe-resume-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    config_.source = "job.yaml";
    for (const char* id : {"a", "b"}) {
      StreamConfig s;
      s.id = id;
      config_.streams.push_back(s);
    }
    config_.publish.jsonl_path = (dir_ / "results.jsonl").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& text) { std::ofstream(config_.publish.jsonl_path, std::ios::binary) << text; }
  static std::string result(const std::string& id, int seq, bool error = false, bool damaged = false) {
    return "{\"topic\":\"results/" + id + "\",\"payload\":{\"stream_id\":\"" + id + "\",\"seq\":" + std::to_string(seq) +
           ",\"error\":" + (error ? "\"bad frame\"" : "null") + ",\"damaged\":" + (damaged ? "true" : "false") + "}}\n";
  }
  static std::string event(const std::string& id, const std::string& kind, const std::string& message = "") {
    return "{\"topic\":\"events/" + id + "\",\"payload\":{\"stream_id\":\"" + id + "\",\"event\":\"" + kind +
           "\",\"message\":\"" + message + "\"}}\n";
  }
  std::filesystem::path dir_;
  Config config_;
};

TEST_F(ResumePlanTest, AMissingFileResumesEveryStreamFromItsFirstFrame) {
  auto plan = read_resume_plan(config_);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->streams.size(), 2u);
  EXPECT_EQ(plan->streams.at("a").results, 0u);
  EXPECT_EQ(plan->keep_bytes, 0u);
  EXPECT_FALSE(plan->complete());
}

TEST_F(ResumePlanTest, ACrashedRunIsKeptUpToItsLastCompleteLine) {
  const std::string kept = event("a", "started") + result("a", 0) + event("b", "started") + result("b", 0) +
                           result("a", 1, true) + result("b", 1) +
                           "{\"topic\":\"events/b\",\"payload\":{\"stream_id\":\"b\",\"event\":\"eos\",\"message\":"
                           "\"end of stream\",\"warning\":\"the file is cut short: ...\"}}\n" +
                           result("a", 2);
  write(kept + "{\"topic\":\"results/a\",\"payl");
  auto plan = read_resume_plan(config_);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->keep_bytes, kept.size());
  EXPECT_EQ(plan->kept_lines, 8u);
  EXPECT_NE(plan->cut_reason.find("results.jsonl:9: an incomplete last line"), std::string::npos) << plan->cut_reason;
  const StreamProgress& a = plan->streams.at("a");
  EXPECT_EQ(a.results, 3u);
  EXPECT_EQ(a.frame_errors, 1u);
  EXPECT_TRUE(a.started);
  EXPECT_EQ(a.ended, "");
  EXPECT_EQ(plan->streams.at("b").ended, "done");
  EXPECT_EQ(plan->streams.at("b").message, "the file is cut short: ...");  // the summary says it again
  EXPECT_EQ(plan->streams.at("b").results, 2u);
  EXPECT_FALSE(plan->complete());
}

// A run stopped by a signal ends its streams as "stopped" and writes a summary: neither is the end of
// the job, so the file is cut at the first of them, and what came after is redone.
// A damaged disk or a hand edit: a JSON line whose fields have other types than vapipe writes is cut
// there like any line that is not the job's (it used to throw out of the reader, ending vapipe run
// with an uncaught exception; found by tools/fuzz.sh).
TEST_F(ResumePlanTest, ALineWithFieldsOfAnotherTypeIsCutThereAndThrowsNothing) {
  const std::string kept = event("a", "started") + result("a", 0) +
                           "{\"topic\":\"events/b\",\"payload\":{\"event\":7,\"message\":[1]}}\n";
  for (const std::string& damaged : {std::string("{\"topic\":\"results/a\",\"payload\":{\"seq\":\"1\"}}\n"),
                                     std::string("{\"topic\":\"results/a\",\"payload\":{\"seq\":-1}}\n"),
                                     std::string("{\"topic\":\"results/a\",\"payload\":{}}\n")}) {
    write(kept + damaged + result("a", 1));
    auto plan = read_resume_plan(config_);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    EXPECT_EQ(plan->keep_bytes, kept.size()) << damaged;
    EXPECT_EQ(plan->streams.at("a").results, 1u);
    EXPECT_EQ(plan->streams.at("b").ended, "");  // an event named by a number is no end
    EXPECT_EQ(plan->cut_lines, 2u);
    EXPECT_NE(plan->cut_reason.find("results.jsonl:4: a result without its frame number (seq)"), std::string::npos)
        << plan->cut_reason;
  }
}

TEST_F(ResumePlanTest, AStoppedRunIsCutAtItsFirstStoppedStream) {
  const std::string kept = event("a", "started") + result("a", 0) + event("b", "error", "file /x.mp4 does not exist");
  write(kept + event("a", "eos", "stopped") + result("a", 1) + "{\"topic\":\"job/summary\",\"payload\":{}}\n");
  auto plan = read_resume_plan(config_);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->keep_bytes, kept.size());
  EXPECT_EQ(plan->cut_lines, 3u);
  EXPECT_NE(plan->cut_reason.find("results.jsonl:4: stream 'a' was stopped there"), std::string::npos) << plan->cut_reason;
  EXPECT_EQ(plan->streams.at("a").results, 1u);
  EXPECT_EQ(plan->streams.at("b").ended, "failed");
  EXPECT_EQ(plan->streams.at("b").message, "file /x.mp4 does not exist");
}

// A stop ends a stream's open segments just before its "stopped" eos: those `ended` lines are no
// segment's end (the resumed run goes on with the segment), and are cut with the eos. An `ended` of a
// label that changed (followed by a result), or another stream's, is kept.
TEST_F(ResumePlanTest, TheSegmentsEndsAStopWroteAreCutWithIt) {
  auto ended = [](const std::string& id, const std::string& label) {
    return "{\"topic\":\"segments/" + id + "\",\"payload\":{\"stream_id\":\"" + id +
           "\",\"event\":\"ended\",\"label\":\"" + label + "\"}}\n";
  };
  const std::string kept = event("a", "started") + result("a", 0) + ended("a", "car") + result("a", 1) +
                           ended("b", "bus") + result("a", 2);
  write(kept + ended("a", "truck") + ended("a", "person") + event("a", "eos", "stopped") + result("a", 3));
  auto plan = read_resume_plan(config_);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->keep_bytes, kept.size());
  EXPECT_EQ(plan->kept_lines, 6u);
  EXPECT_EQ(plan->cut_lines, 4u);
  EXPECT_EQ(plan->streams.at("a").results, 3u);
  // Another stream's ends right before a's stop are its own: kept.
  const std::string b_ends = kept + ended("b", "bus");
  write(b_ends + event("a", "eos", "stopped"));
  plan = read_resume_plan(config_);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->keep_bytes, b_ends.size());
}

// A file whose timestamps started over (files joined end to end): its results' pts_ms rose, as ingest
// put its parts on one timeline, but a seek to the last one would look for it on the file's own clock
// (a resume of such a file failed: the seek landed near its end). Its stopped event says so: its frames
// are then dropped by count. A file that did not start over is sought as before.
TEST_F(ResumePlanTest, AFileWhoseTimestampsStartedOverIsResumedByCountNotBySeeking) {
  auto timed = [](const std::string& id, int seq, double pts_ms) {
    return "{\"topic\":\"results/" + id + "\",\"payload\":{\"stream_id\":\"" + id + "\",\"seq\":" +
           std::to_string(seq) + ",\"pts_ms\":" + std::to_string(pts_ms) + ",\"error\":null}}\n";
  };
  auto stopped = [](const std::string& id, int restarts) {
    return "{\"topic\":\"events/" + id + "\",\"payload\":{\"stream_id\":\"" + id +
           "\",\"event\":\"eos\",\"message\":\"stopped\",\"timeline_restarts\":" + std::to_string(restarts) + "}}\n";
  };
  for (int restarts : {0, 2}) {
    write(event("a", "started") + timed("a", 0, 100) + timed("a", 1, 3200) + timed("a", 2, 6300) + stopped("a", restarts));
    auto plan = read_resume_plan(config_);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    EXPECT_EQ(plan->streams.at("a").results, 3u);
    EXPECT_EQ(plan->streams.at("a").last_pts_ms, restarts > 0 ? -1.0 : 6300.0) << restarts;
  }
}

TEST_F(ResumePlanTest, AFinishedJobIsCompleteAndKeptWhole) {
  const std::string whole = event("a", "started") + result("a", 0) + event("a", "eos", "end of stream") +
                            event("b", "error", "no such file") + "{\"topic\":\"job/summary\",\"payload\":{}}\n";
  write(whole);
  auto plan = read_resume_plan(config_);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_TRUE(plan->complete());
  EXPECT_TRUE(plan->summarized);
  EXPECT_TRUE(plan->cut_reason.empty()) << plan->cut_reason;
  EXPECT_EQ(plan->keep_bytes, whole.size());

  // Every stream ended but the summary is not there (the disk filled as it was written): a resume writes
  // it (before, "already complete: nothing to resume", and the file never had one).
  write(whole.substr(0, whole.find("{\"topic\":\"job/summary\"")));
  plan = read_resume_plan(config_);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_TRUE(plan->complete());
  EXPECT_FALSE(plan->summarized);
}

// A finished job whose config gained a stream since (a glob over a folder that grew): the new stream
// runs from its first frame, the finished one is kept, and the old summary goes (a new one follows).
TEST_F(ResumePlanTest, AFinishedJobWithAStreamAddedSinceRunsOnlyTheNewStream) {
  const std::string kept = event("a", "started") + result("a", 0) + event("a", "eos", "end of stream");
  write(kept + "{\"topic\":\"job/summary\",\"payload\":{}}\n");
  auto plan = read_resume_plan(config_);  // the config has a and b; the file knows only a
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_FALSE(plan->complete());
  EXPECT_EQ(plan->keep_bytes, kept.size());
  EXPECT_EQ(plan->streams.at("a").ended, "done");
  EXPECT_EQ(plan->streams.at("b").results, 0u);
  EXPECT_FALSE(plan->streams.at("b").started);
  EXPECT_NE(plan->cut_reason.find("results.jsonl:4: the summary of a run that ended before the config had the "
                                  "streams that are new in it now"),
            std::string::npos) << plan->cut_reason;
}

TEST_F(ResumePlanTest, ResultsOutOfSequenceCannotBeResumedExactlyOnce) {
  write(result("a", 0) + result("a", 2));
  auto plan = read_resume_plan(config_);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("results.jsonl:2: stream 'a': result for frame 2 where frame 1 was due"),
            std::string::npos) << plan.status().message();
}

// A stream whose file left the folder (or that was taken out of `streams`) after it had finished:
// its results stay, it is not run, and a job whose other streams are all done is complete.
TEST_F(ResumePlanTest, AFinishedStreamTheConfigNoLongerHasIsKeptAndNotRun) {
  const std::string whole = event("c", "started") + result("c", 0) + result("c", 1) + event("c", "eos", "end of stream") +
                            event("a", "started") + result("a", 0) + event("a", "eos", "end of stream") +
                            event("b", "started") + event("b", "eos", "end of stream") +
                            "{\"topic\":\"job/summary\",\"payload\":{}}\n";
  write(whole);
  auto plan = read_resume_plan(config_);  // the config has a and b
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->departed.size(), 1u);
  EXPECT_EQ(plan->departed.at("c").results, 2u);
  EXPECT_EQ(plan->departed.at("c").ended, "done");
  EXPECT_EQ(plan->streams.count("c"), 0u);
  EXPECT_TRUE(plan->complete());
  EXPECT_EQ(plan->keep_bytes, whole.size());
}

// One that had not finished cannot go on: the plan is not complete until publish has ended it as
// removed, and a later resume reads that end as "removed".
TEST_F(ResumePlanTest, AnUnfinishedStreamTheConfigNoLongerHasEndsAsRemoved) {
  const std::string crashed = event("a", "started") + result("a", 0) + event("c", "started") + result("c", 0);
  write(crashed);
  auto plan = read_resume_plan(config_);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->departed.count("c"), 1u);
  EXPECT_EQ(plan->departed.at("c").ended, "");
  EXPECT_EQ(plan->departed.at("c").results, 1u);
  EXPECT_FALSE(plan->complete());

  write(crashed + event("c", "eos", "removed from the config") + result("a", 1) + event("a", "eos", "end of stream") +
        event("b", "eos", "end of stream") + "{\"topic\":\"job/summary\",\"payload\":{}}\n");
  plan = read_resume_plan(config_);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->departed.at("c").ended, "removed");
  EXPECT_TRUE(plan->complete());
  EXPECT_TRUE(plan->cut_reason.empty()) << plan->cut_reason;
}

// A file none of whose streams the config has was most likely written by another job's config.
TEST_F(ResumePlanTest, AFileWithNoneOfTheConfigsStreamsIsAnErrorNamingBoth) {
  write(result("c", 0) + result("d", 0));
  auto plan = read_resume_plan(config_);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("results.jsonl: none of its streams ('c', 'd') is in the config job.yaml"),
            std::string::npos)
      << plan.status().message();
}

// Ingest may seek past the kept results only when their timestamps rose strictly from frame 0.
TEST_F(ResumePlanTest, TheLastTimestampIsKeptOnlyWhenTimestampsRoseStrictly) {
  auto timed = [](const std::string& id, int seq, const std::string& pts) {
    return "{\"topic\":\"results/" + id + "\",\"payload\":{\"stream_id\":\"" + id + "\",\"seq\":" +
           std::to_string(seq) + ",\"pts_ms\":" + pts + ",\"error\":null}}\n";
  };
  write(timed("a", 0, "0") + timed("a", 1, "33.333333") + timed("a", 2, "66.666667") +  // rising
        timed("b", 0, "0") + timed("b", 1, "null") + timed("b", 2, "66.666667"));     // one without
  auto plan = read_resume_plan(config_);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_DOUBLE_EQ(plan->streams.at("a").last_pts_ms, 66.666667);
  EXPECT_LT(plan->streams.at("b").last_pts_ms, 0);
  // And through the plan file the stages read.
  const std::string path = (dir_ / "plan.json").string();
  ASSERT_TRUE(write_resume_plan(*plan, path).ok());
  auto back = load_resume_plan(path);
  ASSERT_TRUE(back.ok());
  EXPECT_DOUBLE_EQ(back->streams.at("a").last_pts_ms, 66.666667);
  EXPECT_LT(back->streams.at("b").last_pts_ms, 0);

  write(timed("a", 0, "0") + timed("a", 1, "40") + timed("a", 2, "40"));  // not strictly
  EXPECT_LT(read_resume_plan(config_)->streams.at("a").last_pts_ms, 0);
}

// The summary of a resumed job ranks labels over every run: the plan counts the kept results' labels.
TEST_F(ResumePlanTest, KeptResultsAreCountedByLabelAndTheCountsSurviveThePlanFile) {
  auto labelled = [](const std::string& id, int seq, const std::string& label) {
    return "{\"topic\":\"results/" + id + "\",\"payload\":{\"stream_id\":\"" + id + "\",\"seq\":" +
           std::to_string(seq) + ",\"error\":null,\"label\":\"" + label + "\"}}\n";
  };
  write(event("a", "started") + labelled("a", 0, "car") + labelled("a", 1, "bus") + result("a", 2, true) +
        labelled("a", 3, "car"));
  auto plan = read_resume_plan(config_);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const std::map<std::string, uint64_t> expected{{"bus", 1}, {"car", 2}};  // the error result: none
  EXPECT_EQ(plan->streams.at("a").labels, expected);
  const std::string path = (dir_ / "plan.json").string();
  ASSERT_TRUE(write_resume_plan(*plan, path).ok());
  auto loaded = load_resume_plan(path);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->streams.at("a").labels, expected);
}

TEST_F(ResumePlanTest, APlanSurvivesItsFile) {
  write(event("a", "started") + result("a", 0, true) + result("a", 1, false, /*damaged=*/true) +
        event("b", "error", "gone") + result("c", 0) + event("c", "eos", "end of stream"));
  auto plan = read_resume_plan(config_);
  ASSERT_TRUE(plan.ok());
  const std::string path = (dir_ / "resume.json").string();
  ASSERT_TRUE(write_resume_plan(*plan, path).ok());
  auto back = load_resume_plan(path);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->keep_bytes, plan->keep_bytes);
  EXPECT_EQ(back->streams.at("a").results, 2u);
  EXPECT_EQ(back->streams.at("a").frame_errors, 1u);
  EXPECT_EQ(back->streams.at("a").damaged, 1u);  // the summary counts an earlier run's too
  EXPECT_TRUE(back->streams.at("a").started);
  EXPECT_EQ(back->streams.at("b").ended, "failed");
  EXPECT_EQ(back->streams.at("b").message, "gone");
  ASSERT_EQ(back->departed.count("c"), 1u);
  EXPECT_EQ(back->departed.at("c").results, 1u);
  EXPECT_EQ(back->departed.at("c").ended, "done");
  EXPECT_FALSE(load_resume_plan((dir_ / "none.json").string()).ok());
}

// A file's size as it was read (its `started` event's `bytes`) is kept, for --resume to say when the
// file has changed since.
TEST_F(ResumePlanTest, AFilesSizeAsItWasReadIsKeptFromItsStartedEvent) {
  write("{\"topic\":\"events/a\",\"payload\":{\"stream_id\":\"a\",\"event\":\"started\",\"message\":\"\",\"bytes\":123456}}\n" +
        result("a", 0) + event("a", "eos", "end of stream") + event("b", "started"));
  auto plan = read_resume_plan(config_);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->streams.at("a").file_bytes, 123456);
  EXPECT_EQ(plan->streams.at("b").file_bytes, -1);  // not a file, or from before it was recorded
  const std::string path = (dir_ / "plan.json").string();
  ASSERT_TRUE(write_resume_plan(*plan, path).ok());
  auto back = load_resume_plan(path);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->streams.at("a").file_bytes, 123456);
}

// A file a stream had not finished: its started event's size and head_hash go through the plan file to
// ingest, which goes on only with the same recording: its beginning the same (appended to: said), not
// another put under its name, whatever its size.
TEST_F(ResumePlanTest, AnUnfinishedFileGoesOnOnlyIfItIsStillTheRecordingItsResultsAreOf) {
  const std::string video = (dir_ / "cam.mkv").string();
  std::ofstream(video, std::ios::binary) << std::string(100000, 'a');
  const std::string head = file_head_hash(video);
  write("{\"topic\":\"events/a\",\"payload\":{\"stream_id\":\"a\",\"event\":\"started\",\"uri\":\"file://" + video +
        "\",\"bytes\":100000,\"duration_ms\":10000.0,\"head_hash\":\"" + head + "\"}}\n" + result("a", 0) + result("a", 1));
  auto read = read_resume_plan(config_);
  ASSERT_TRUE(read.ok()) << read.status().message();
  const std::string path = (dir_ / "plan.json").string();
  ASSERT_TRUE(write_resume_plan(*read, path).ok());
  auto plan = load_resume_plan(path);
  ASSERT_TRUE(plan.ok());
  const StreamProgress& a = plan->streams.at("a");
  EXPECT_EQ(a.file_bytes, 100000);
  EXPECT_EQ(a.file_head, head);
  EXPECT_EQ(a.uri, "file://" + video);
  EXPECT_DOUBLE_EQ(a.duration_ms, 10000.0);  // the summary's media_s of a stream an earlier run finished

  std::string note = "x";
  EXPECT_TRUE(check_resumed_file(video, "cam.mkv", a, &note).ok());
  EXPECT_EQ(note, "");
  std::ofstream(video, std::ios::binary | std::ios::app) << std::string(5000, 'b');  // a recorder appended to it
  EXPECT_TRUE(check_resumed_file(video, "cam.mkv", a, &note).ok());
  EXPECT_EQ(note, "cam.mkv has grown since it was classified in part (100000 bytes then, 105000 now), its beginning "
                  "the same: it goes on");
  std::ofstream(video, std::ios::binary) << std::string(100000, 'c');  // another recording, the same size
  Status other = check_resumed_file(video, "cam.mkv", a, &note);
  EXPECT_EQ(other.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(other.message(), "cam.mkv has changed since it was classified in part (100000 bytes then, 100000 now, and "
                             "its first bytes differ): it is another recording than the one its results are of; its 2 "
                             "results are kept and it is not classified further: give it a new id, or run without "
                             "--resume, to classify it again");
  // A results file of before head_hash: only its size can tell.
  StreamProgress old = a;
  old.file_head.clear();
  EXPECT_TRUE(check_resumed_file(video, "cam.mkv", old, &note).ok());
  std::ofstream(video, std::ios::binary | std::ios::app) << "d";
  EXPECT_FALSE(check_resumed_file(video, "cam.mkv", old, &note).ok());
}

}  // namespace
}  // namespace vapipe
