#include "pipeline/folder_watch.h"

#include <cstdint>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <thread>

#include "pipeline/config.h"
#include "pipeline/placement.h"
#include "pipeline/stream_table.h"
#include "pipeline/stream_uri.h"

namespace vapipe {
namespace {

using Clock = std::chrono::steady_clock;

// A recorder's folder: files written into it while the job that watches it runs.
class FolderWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("vapipe-watch-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_ / "nvr/day1");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // A file an hour old (settled), or modified now.
  void write(const std::string& rel, bool settled = true) {
    std::filesystem::create_directories((dir_ / rel).parent_path());
    std::ofstream(dir_ / rel) << "x";
    if (settled) {
      std::filesystem::last_write_time(dir_ / rel, std::filesystem::file_time_type::clock::now() - std::chrono::hours(1));
    }
  }
  Result<Config> load(const std::string& streams, const std::string& extra = "") const {
    return load_config_string("infer: {model: m.pt, labels: m.txt}\nstreams:\n" + streams + extra, "job.yaml",
                              dir_.string());
  }
  static std::vector<std::string> ids(const std::vector<StreamConfig>& streams) {
    std::vector<std::string> out;
    for (const StreamConfig& s : streams) out.push_back(s.id);
    return out;
  }
  std::filesystem::path dir_;
};

// A watched folder may be empty when the job starts (a recorder's first file comes later), or hold
// only a file still being written: neither is the error it is for a glob that is read once. The
// config keeps what makes each later file's stream, and says the folder is watched.
TEST_F(FolderWatchTest, AWatchedFolderMayBeEmptyAtTheStartAndTheConfigSaysItIsWatched) {
  auto c = load("  - {glob: 'nvr/**/*.mp4', watch_s: 5, settle_s: 30, max_fps: 2, recorded_at: 'name:%Y%m%d%H%M%S'}\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->streams.empty());
  EXPECT_EQ(c->job.mode, JobMode::kArchive);
  ASSERT_EQ(c->watches.size(), 1u);
  const FolderWatch& w = c->watches[0];
  EXPECT_EQ(w.pattern, (dir_ / "nvr/**/*.mp4").string());
  EXPECT_EQ(w.watch_s, 5);
  EXPECT_EQ(w.settle_s, 30);
  EXPECT_EQ(w.where, "streams[0]");
  EXPECT_EQ(w.each.max_fps, 2);
  ASSERT_EQ(c->notes.size(), 1u);
  EXPECT_EQ(c->notes[0], "streams[0].glob: watched: '" + w.pattern +
                             "' is looked at again every 5 s while the job runs, and each file added to it is "
                             "classified once it has not changed for 30 s");
  // Without settle_s a watched folder's file waits 10 s unchanged (one copied in is not read halfway
  // through its copy); settle_s: 0 for files that land whole (a rename).
  auto by_default = load("  - {glob: 'nvr/**/*.mp4', watch_s: 5}\n");
  ASSERT_TRUE(by_default.ok()) << by_default.status().message();
  EXPECT_EQ(by_default->watches[0].settle_s, kWatchedFolderSettleS);
  EXPECT_EQ(kWatchedFolderSettleS, 10);
  auto whole = load("  - {glob: 'nvr/**/*.mp4', watch_s: 5, settle_s: 0}\n");
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  EXPECT_EQ(whole->watches[0].settle_s, 0);
  EXPECT_NE(whole->notes[0].find("as soon as it is seen (settle_s: 0, for files that land whole)"), std::string::npos)
      << whole->notes[0];
  write("nvr/day1/cam_20261130140000.mp4", false);  // being written
  auto writing = load("  - {glob: 'nvr/**/*.mp4', watch_s: 5, settle_s: 30}\n");
  ASSERT_TRUE(writing.ok()) << writing.status().message();
  EXPECT_TRUE(writing->streams.empty());
  // Without watch_s both are errors, as before.
  auto once = load("  - {glob: 'nvr/**/*.mp4', settle_s: 30}\n");
  ASSERT_FALSE(once.ok());
  EXPECT_NE(once.status().message().find("none is settled yet"), std::string::npos) << once.status().message();
  std::filesystem::remove(dir_ / "nvr/day1/cam_20261130140000.mp4");
  auto empty = load("  - {glob: 'nvr/**/*.mp4'}\n");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("no file matches"), std::string::npos);
}

// watch_s belongs to a glob, in an archive job: a live job drops frames when it falls behind, and a
// folder's files are to be classified whole. A folder that does not exist is still an error (a typo
// would otherwise wait for ever).
TEST_F(FolderWatchTest, WatchSIsAGlobsInAnArchiveJobAndItsFolderMustExist) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"  - {id: x, uri: 'test://ball?frames=10', watch_s: 5}\n", "job.yaml:3: streams[0].watch_s: only with glob"},
      {"  - {glob: 'nvr/*.mp4', watch_s: 0}\n", "streams[0].watch_s"},
      {"  - {glob: 'nvr/*.mp4', watch_s: 5}\n  - {id: cam, uri: 'rtsp://10.0.0.5/live'}\n",
       "job.yaml:3: streams[0].watch_s: only in an archive job (every frame of each file classified, once): this one "
       "is live because some of its streams never end by themselves (cameras); run the folder in a job of its own"},
      {"  - {glob: 'nvr/*.mp4', watch_s: 5}\njob: {mode: live}\n",
       "streams[0].watch_s: only in an archive job (every frame of each file classified, once): this one is live "
       "(job.mode)"},
      {"  - {glob: 'elsewhere/*.mp4', watch_s: 5}\n", "streams[0].glob: "},
  };
  for (const auto& [yaml, expected] : cases) {
    auto c = load(yaml);
    ASSERT_FALSE(c.ok()) << yaml;
    EXPECT_NE(c.status().message().find(expected), std::string::npos) << c.status().message();
  }
}

// The watch's looks: each folder when its time comes, every watch_s; a file once, by its id, when it
// has settled; a file whose id another file has, or a results file's earlier stream has, never.
TEST_F(FolderWatchTest, ALookFindsEachSettledFileOnceAndNothingTheJobAlreadyHas) {
  write("nvr/day1/a.mp4");
  auto c = load("  - {glob: 'nvr/**/*.mp4', watch_s: 10, settle_s: 30, roi: [0, 0, 0.5, 1]}\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(ids(c->streams), (std::vector<std::string>{"day1-a"}));
  auto placement = plan_placement(*c, 0);
  ASSERT_TRUE(placement.ok());
  StreamTable table = initial_stream_table(*c, *placement);
  const auto start = Clock::now();
  FolderWatcher watcher(c->watches, start);
  EXPECT_EQ(watcher.next_look(), start + std::chrono::seconds(10));

  write("nvr/day1/b.mp4");
  write("nvr/day2/c.mp4", false);  // still being written
  EXPECT_TRUE(watcher.look(table, {}, start + std::chrono::seconds(9)).empty());  // not due yet
  EXPECT_EQ(watcher.looks(), 0u);
  std::vector<StreamConfig> found = watcher.look(table, {}, start + std::chrono::seconds(10));
  EXPECT_EQ(watcher.looks(), 1u);
  ASSERT_EQ(ids(found), (std::vector<std::string>{"day1-b"}));
  EXPECT_EQ(found[0].uri, "file://" + (dir_ / "nvr/day1/b.mp4").string());
  EXPECT_EQ(found[0].roi, (std::array<double, 4>{0, 0, 0.5, 1}));  // what the entry says of each file
  EXPECT_GT(watcher.next_look(), start + std::chrono::seconds(10));
  const StreamReload added = add_watched_files(table, found, 1);
  EXPECT_EQ(added.added, (std::vector<std::string>{"day1-b"}));
  EXPECT_EQ(table.entries.size(), 2u);
  EXPECT_EQ(table.version, 1u);

  // The next look: c has settled; a and b are the job's already. A file whose id another has ("e f"
  // and "e#f" both make "e-f": the first by name is taken), and one whose id the results file had (a
  // resumed job's departed stream, back in the folder), are left out.
  std::filesystem::last_write_time(dir_ / "nvr/day2/c.mp4", std::filesystem::file_time_type::clock::now() - std::chrono::hours(1));
  write("nvr/day3/d.mp4");
  write("nvr/day2/e f.mp4");
  write("nvr/day2/e#f.mp4");
  auto next = watcher.look(table, {"day3-d"}, watcher.next_look());
  ASSERT_EQ(ids(next), (std::vector<std::string>{"day2-c", "day2-e-f"}));
  EXPECT_EQ(file_uri_path(next[1].uri), (dir_ / "nvr/day2/e f.mp4").string());
  add_watched_files(table, next, 1);
  EXPECT_TRUE(watcher.look(table, {"day3-d"}, watcher.next_look()).empty());
  EXPECT_EQ(watcher.looks(), 3u);
  // SIGHUP: every folder is looked at now, not at its next time.
  const auto now = Clock::now();
  EXPECT_GT(watcher.next_look(), now + std::chrono::seconds(5));
  watcher.look_at(now);
  EXPECT_LE(watcher.next_look(), now);
  write("nvr/day4/f.mp4");
  EXPECT_EQ(ids(watcher.look(table, {}, now)), (std::vector<std::string>{"day3-d", "day4-f"}));
}

// What the looks found, for publish's metrics (written to the run folder by `vapipe run`): looks,
// the files the job took, when one last came, and why a folder cannot be listed (it is looked at again).
TEST_F(FolderWatchTest, TheLooksStatusSaysWhatTheyFoundAndWhyAFolderCannotBeListed) {
  auto c = load("  - {glob: 'nvr/**/*.mp4', watch_s: 1}\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  StreamTable table;
  FolderWatcher watcher(c->watches, Clock::now());
  ASSERT_EQ(watcher.status().size(), 1u);
  const double started = watcher.status()[0].last_file_unix_s;  // the job's start counts
  EXPECT_GT(started, 0);
  EXPECT_EQ(watcher.status()[0].looks, 0u);
  write("nvr/day1/a.mp4");
  write("nvr/day1/b.mp4");
  write("nvr/day1/c.mp4", false);  // still being written: settling (settle_s 10 by default)
  auto found = watcher.look(table, {}, watcher.next_look());
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(watcher.status()[0].looks, 1u);
  EXPECT_EQ(watcher.status()[0].files_settling, 1u);
  EXPECT_EQ(watcher.status()[0].files_added, 0u);  // not until the job took them
  watcher.took(found);
  FolderWatchStatus s = watcher.status()[0];
  EXPECT_EQ(s.files_added, 2u);
  EXPECT_GE(s.last_file_unix_s, started);
  EXPECT_GT(s.last_look_unix_s, 0);
  EXPECT_TRUE(s.error.empty());
  const std::string path = (dir_ / "watched-folders.json").string();
  ASSERT_TRUE(write_folder_watch_status(watcher.status(), path).ok());
  const std::vector<FolderWatchStatus> read = read_folder_watch_status(path);
  ASSERT_EQ(read.size(), 1u);
  EXPECT_EQ(read[0].pattern, c->watches[0].pattern);
  EXPECT_EQ(read[0].files_added, 2u);
  EXPECT_EQ(read[0].watch_s, 1);
  EXPECT_EQ(read[0].looking_since_unix_s, 0);
  // The folder goes (an unmounted share): said, and the job looks again; it comes back, and with it
  // what it holds that the job does not have yet.
  std::filesystem::rename(dir_ / "nvr", dir_ / "nvr-away");
  EXPECT_TRUE(watcher.look(table, {}, watcher.next_look()).empty());
  EXPECT_NE(watcher.status()[0].error.find("does not exist"), std::string::npos) << watcher.status()[0].error;
  std::filesystem::rename(dir_ / "nvr-away", dir_ / "nvr");
  EXPECT_EQ(watcher.look(table, {}, watcher.next_look()).size(), 2u);  // the table never took them
  EXPECT_TRUE(watcher.status()[0].error.empty());
  EXPECT_TRUE(read_folder_watch_status((dir_ / "none.json").string()).empty());
}

// A look's reads run on the looker's thread (a share that hangs holds up no restart or stop of
// `vapipe run`): a folder being read is not started again, is shown as being read, and a SIGHUP
// meanwhile looks again once the read ends. A read that never ends is left behind by the looker's end.
TEST_F(FolderWatchTest, ALookReadsOffTheCallersThreadAndAReadThatHangsHoldsNothingUp) {
  write("nvr/day1/a.mp4");
  auto c = load("  - {glob: 'nvr/**/*.mp4', watch_s: 1, settle_s: 0}\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  auto placement = plan_placement(*c, 0);
  ASSERT_TRUE(placement.ok());
  StreamTable table = initial_stream_table(*c, *placement);
  const auto start = Clock::now();
  FolderWatcher watcher(c->watches, start);

  // A share that does not answer until it is let go.
  struct Gate {
    std::mutex mutex;
    std::condition_variable changed;
    bool open = false;
    int reads = 0;
  };
  auto gate = std::make_shared<Gate>();
  const std::vector<FolderWatch> watches = watcher.watches();
  ASSERT_EQ(watches.size(), 1u);
  auto hanging_reader = [gate, watches](const std::vector<size_t>& folders) {
    std::unique_lock<std::mutex> lock(gate->mutex);
    ++gate->reads;
    gate->changed.notify_all();
    gate->changed.wait(lock, [&] { return gate->open; });
    lock.unlock();
    return read_folders(watches, folders);
  };
  auto wait_for_reads = [&](int n) {
    std::unique_lock<std::mutex> lock(gate->mutex);
    return gate->changed.wait_for(lock, std::chrono::seconds(10), [&] { return gate->reads >= n; });
  };
  {
    FolderLooker looker(hanging_reader);
    write("nvr/day1/b.mp4");
    const auto due = watcher.start_look(start + std::chrono::seconds(1));
    ASSERT_EQ(due, (std::vector<size_t>{0}));
    ASSERT_TRUE(looker.start(due));
    ASSERT_TRUE(wait_for_reads(1));
    EXPECT_TRUE(looker.busy());
    EXPECT_FALSE(looker.start(due));  // one read at a time
    EXPECT_FALSE(looker.finished().has_value());
    // Being read: not due again, shown as looking, and nothing said before kHungLookS.
    EXPECT_EQ(watcher.next_look(), Clock::time_point::max());
    EXPECT_TRUE(watcher.start_look(start + std::chrono::hours(1)).empty());
    EXPECT_GT(watcher.status()[0].looking_since_unix_s, 0);
    watcher.check_reads(start + std::chrono::seconds(2));
    watcher.check_reads(start + std::chrono::seconds(40));  // said once (the log)
    watcher.look_at(Clock::now());                          // SIGHUP while it reads
    EXPECT_EQ(watcher.next_look(), Clock::time_point::max());
    {
      std::lock_guard<std::mutex> lock(gate->mutex);
      gate->open = true;
    }
    gate->changed.notify_all();
    std::optional<std::vector<FolderReading>> readings;
    for (int k = 0; k < 1000 && !readings; ++k) {
      readings = looker.finished();
      if (!readings) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_TRUE(readings.has_value());
    EXPECT_FALSE(looker.busy());
    ASSERT_EQ(readings->size(), 1u);
    EXPECT_EQ((*readings)[0].folder, 0u);
    EXPECT_EQ((*readings)[0].bytes_of.size(), 2u);  // a.mp4 and b.mp4, one byte each
    const std::vector<StreamConfig> found = watcher.take(std::move(*readings), table, {});
    EXPECT_EQ(ids(found), (std::vector<std::string>{"day1-b"}));
    EXPECT_EQ(watcher.status()[0].looking_since_unix_s, 0);
    EXPECT_EQ(watcher.status()[0].looks, 1u);
    EXPECT_LE(watcher.next_look(), Clock::now());  // the SIGHUP's look, at once
  }
  // A read that never ends when the looker goes (the job's end): the looker's end does not wait for it.
  {
    std::lock_guard<std::mutex> lock(gate->mutex);
    gate->open = false;
  }
  // The gate opens only later, from another thread: a looker's end that waited for its read would
  // return after that (and, without the opener, never).
  std::atomic<bool> opened{false};
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    {
      std::lock_guard<std::mutex> lock(gate->mutex);
      gate->open = true;
    }
    opened = true;
    gate->changed.notify_all();
  });
  {
    FolderLooker looker(hanging_reader);  // (EXPECT, not ASSERT: the opener must be joined)
    EXPECT_TRUE(looker.start(watcher.start_look(Clock::now())));
    EXPECT_TRUE(wait_for_reads(2));
  }
  EXPECT_FALSE(opened.load());  // the looker ended while its read still hung
  opener.join();
}

// The stages `vapipe run` starts take the job's files from its stream table: their config's load
// looks for no glob's files (a share that has stopped answering would hold up their start), so a
// pattern that matches nothing is not its error there; a watched one is still a watch.
TEST_F(FolderWatchTest, AStageOfVapipeRunLooksForNoGlobsFiles) {
  write("nvr/day1/a.mp4");
  const std::string yaml = "infer: {model: m.pt, labels: m.txt}\nstreams:\n"
                           "  - {glob: 'nvr/**/*.mp4', watch_s: 5}\n"
                           "  - {glob: 'none/*.mkv'}\n"
                           "  - {id: cam, uri: 'test://ball?frames=10'}\n";
  auto whole = load_config_string(yaml, "job.yaml", dir_.string());
  ASSERT_FALSE(whole.ok());  // 'none/' does not exist
  EXPECT_NE(whole.status().message().find("streams[1].glob"), std::string::npos) << whole.status().message();
  ConfigLoadOptions stage;
  stage.expand_globs = false;
  auto c = load_config_string(yaml, "job.yaml", dir_.string(), stage);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(ids(c->streams), (std::vector<std::string>{"cam"}));
  ASSERT_EQ(c->watches.size(), 1u);
  EXPECT_EQ(c->watches[0].pattern, (dir_ / "nvr/**/*.mp4").string());
  EXPECT_EQ(c->job.mode, JobMode::kArchive);
}

// New files go to the lane with the fewest streams, with every setting the table carries for them
// (a file's part and recording start too: the stages take the stream from the table).
TEST_F(FolderWatchTest, NewFilesGoToTheLaneWithTheFewestStreamsWithTheirWholeSettings) {
  write("nvr/day1/cam_20261130140000.mp4");
  auto c = load("  - {glob: 'nvr/**/*.mp4', watch_s: 1, recorded_at: 'name:cam_%Y%m%d%H%M%S', from: 5, to: 65}\n",
                "lanes_per_device: 3\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  auto placement = plan_placement(*c, 0);
  ASSERT_TRUE(placement.ok());
  ASSERT_EQ(placement->lanes.size(), 3u);  // a watching job has its lanes however few files it starts with
  StreamTable table = initial_stream_table(*c, *placement);
  FolderWatcher watcher(c->watches, Clock::now());
  for (const char* f : {"nvr/day1/cam_20261130150000.mp4", "nvr/day1/cam_20261130160000.mp4",
                        "nvr/day1/cam_20261130170000.mp4"}) {
    write(f);
  }
  auto found = watcher.look(table, {}, watcher.next_look());
  ASSERT_EQ(found.size(), 3u);
  const StreamReload added = add_watched_files(table, found, 3);
  EXPECT_EQ(added.added_lanes, (std::vector<uint32_t>{1, 2, 0}));
  const StreamTableEntry& e = table.entries.at(1);
  EXPECT_EQ(e.id, "day1-cam_20261130150000");
  EXPECT_EQ(e.index, 1u);
  EXPECT_EQ(e.from_ns, 5'000'000'000);
  EXPECT_EQ(e.to_ns, 65'000'000'000);
  EXPECT_TRUE(e.recorded.known());
  EXPECT_EQ(e.recorded.unix_ns - table.entries.at(0).recorded.unix_ns, 3600'000'000'000);
  // Read back as the stages read it.
  auto again = stream_config_of(e);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->uri, found[0].uri);
  EXPECT_EQ(again->recorded.unix_ns, e.recorded.unix_ns);
}

// An archive job restarts whole after a crash: the files its watch added are its streams then, put
// after those it started with, so that --resume goes on with them rather than ending them as gone.
TEST_F(FolderWatchTest, ARestartTakesTheFilesTheWatchAddedAsItsOwnStreams) {
  write("nvr/day1/a.mp4");
  auto c = load("  - {glob: 'nvr/**/*.mp4', watch_s: 1}\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  Config job = *c;
  EXPECT_EQ(add_watched_streams(job, {}), 0u);
  write("nvr/day1/0.mp4");  // sorts first, comes after
  write("nvr/day2/b.mp4");
  StreamTable table;
  FolderWatcher watcher(job.watches, Clock::now());
  const std::vector<StreamConfig> added = watcher.look(table, {}, watcher.next_look());
  ASSERT_EQ(ids(added), (std::vector<std::string>{"day1-0", "day1-a", "day2-b"}));  // the table had none
  EXPECT_EQ(add_watched_streams(job, added), 2u);
  EXPECT_EQ(ids(job.streams), (std::vector<std::string>{"day1-a", "day1-0", "day2-b"}));
  EXPECT_EQ(job.streams[2].uri, added[2].uri);
  EXPECT_EQ(add_watched_streams(job, added), 0u);  // a second restart
}

// Lanes are planned for the GPUs a watching job is given, not for the files it starts with (none,
// here): its files come later.
TEST_F(FolderWatchTest, AWatchingJobWithNoFileYetGetsALanePerGpu) {
  auto c = load("  - {glob: 'nvr/**/*.mp4', watch_s: 1}\n", "gpus: all\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  auto placement = plan_placement(*c, 2);
  ASSERT_TRUE(placement.ok()) << placement.status().message();
  ASSERT_EQ(placement->lanes.size(), 2u);
  EXPECT_EQ(placement->lanes[0].gpu, 0);
  EXPECT_EQ(placement->lanes[1].gpu, 1);
  EXPECT_TRUE(placement->lanes[0].streams.empty());
}

}  // namespace
}  // namespace vapipe
