#include "pipeline/running_job.h"

#include <cstdint>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "pipeline/envelope.h"
#include "pipeline/file_identity.h"
#include "pipeline/stage_stats.h"
#include "tests/fakes/live_yaml.h"

namespace vapipe {
namespace {

using testing::live_yaml;

void write(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

// A folder of run folders, and a config file beside them, as `vapipe run CONFIG` leaves them.
class RunningJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::path(::testing::TempDir()) / ("running-job-" + std::to_string(getpid()));
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
    config_path_ = (root_ / "cameras.yaml").string();
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  // A job started with `yaml` from config_path_, by the process `pid`; its run folder.
  std::string start_job(const std::string& job_id, const std::string& yaml, int64_t pid) {
    const std::filesystem::path run_dir = root_ / ("vapipe-" + job_id);
    std::filesystem::create_directories(run_dir);
    write(config_as_started_path(run_dir.string()), yaml);
    write(config_path_mark(run_dir.string()), config_path_mark_text(config_path_));
    auto config = load_config_string(yaml, "cameras.yaml", root_.string());
    EXPECT_TRUE(config.ok()) << config.status().message();
    Placement placement;
    placement.lanes.push_back(Lane{});
    for (uint32_t s = 0; s < config->streams.size(); ++s) placement.lanes[0].streams.push_back(s);
    StreamTable table = initial_stream_table(*config, placement);
    table.writer_pid = pid;
    JobLayout layout;
    layout.run_dir = run_dir.string();
    EXPECT_TRUE(write_stream_table(table, stream_table_path(layout)).ok());
    return run_dir.string();
  }

  // The edited file, read as `vapipe validate` reads it; what a reload of `job` to it would do.
  Result<ReloadPreview> preview(const RunningJob& job, const std::string& edited) {
    write(config_path_, edited);
    std::string text;
    auto config = load_config_file(config_path_, &text);
    EXPECT_TRUE(config.ok()) << config.status().message();
    return preview_reload(job, text, *config);
  }

  std::filesystem::path root_;
  std::string config_path_;
};

// The job is found by the file it was started with (written relative, or through `..`); one whose
// `vapipe run` has ended, and one started with another file, are not.
TEST_F(RunningJobTest, TheJobRunningWithAConfigFileIsFoundByItsPath) {
  const std::string yaml = live_yaml({{"front", "ball"}, {"back", "smpte"}});
  const std::string running = start_job("running", yaml, getpid());
  start_job("ended", yaml, 999999999);  // no such process
  const std::string other = start_job("other", yaml, getpid());
  write(config_path_mark(other), (root_ / "elsewhere.yaml").string() + "\n");
  std::filesystem::create_directories(root_ / "sub");
  const std::string through_dots = (root_ / "sub" / ".." / "cameras.yaml").string();
  for (const std::string& path : {config_path_, through_dots}) {
    const std::vector<RunningJob> jobs = running_jobs_of(path, root_.string());
    ASSERT_EQ(jobs.size(), 1u) << path;
    EXPECT_EQ(jobs[0].run_dir, running);
    EXPECT_EQ(jobs[0].pid, getpid());
  }
  EXPECT_TRUE(running_jobs_of((root_ / "nothing.yaml").string(), root_.string()).empty());
  EXPECT_TRUE(running_jobs_of(config_path_, (root_ / "no-such-folder").string()).empty());
}

// A Kubernetes ConfigMap's file: job.yaml -> ..data/job.yaml, ..data -> a folder of the map's version,
// swapped for a new one at each update of the map. The job is still found by the path it was started
// with, though that path now resolves elsewhere.
TEST_F(RunningJobTest, AConfigMapsFileIsFoundAfterTheMapWasUpdated) {
  std::filesystem::create_directories(root_ / "map" / "v1");
  std::filesystem::create_directories(root_ / "map" / "v2");
  const std::string yaml = live_yaml({{"front", "ball"}});
  write((root_ / "map" / "v1" / "job.yaml").string(), yaml);
  write((root_ / "map" / "v2" / "job.yaml").string(), yaml);
  std::filesystem::create_directory_symlink("v1", root_ / "map" / "..data");
  std::filesystem::create_symlink("..data/job.yaml", root_ / "map" / "job.yaml");
  config_path_ = (root_ / "map" / "job.yaml").string();
  const std::string running = start_job("mapped", yaml, getpid());
  ASSERT_EQ(running_jobs_of(config_path_, root_.string()).size(), 1u);
  std::filesystem::create_directory_symlink("v2", root_ / "map" / "..data_tmp");  // the kubelet's swap
  std::filesystem::rename(root_ / "map" / "..data_tmp", root_ / "map" / "..data");
  std::filesystem::remove_all(root_ / "map" / "v1");
  const std::vector<RunningJob> jobs = running_jobs_of(config_path_, root_.string());
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].run_dir, running);
  // The resolved path alone (a mark written before the path as written was kept) still finds it where
  // it resolves the same.
  write(config_path_mark(running), absolute_path_of(config_path_) + "\n");
  EXPECT_EQ(running_jobs_of(config_path_, root_.string()).size(), 1u);
}

// A run folder that another user made in /tmp (or may write), naming our config and a process of its
// choosing: not taken for our job, and never signalled (`vapipe reload` sent SIGHUP, which kills most
// processes, to whatever pid its table named; found 2026-12-07).
TEST_F(RunningJobTest, ARunFolderThatIsNotThisUsersIsNotTakenForItsJob) {
  const std::string run_dir = start_job("planted", live_yaml({{"front", "ball"}}), getpid());
  std::filesystem::permissions(run_dir, std::filesystem::perms::others_write, std::filesystem::perm_options::add);
  std::vector<RunningJob> jobs = running_jobs_of(config_path_, root_.string());
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].pid, 0);
  EXPECT_NE(jobs[0].unreadable.find("it is not this user's job (" + run_dir + " may be written by other users)"),
            std::string::npos) << jobs[0].unreadable;
  std::filesystem::permissions(run_dir, std::filesystem::perms::others_write, std::filesystem::perm_options::remove);
  ASSERT_EQ(running_jobs_of(config_path_, root_.string())[0].pid, getpid());
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to give a folder to another user";
  ASSERT_EQ(::chown(run_dir.c_str(), 65534, 65534), 0);
  jobs = running_jobs_of(config_path_, root_.string());
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].pid, 0);
  EXPECT_NE(jobs[0].unreadable.find("is owned by uid 65534, not by this user"), std::string::npos) << jobs[0].unreadable;
}

// Asked by another user than the job's (its table is its owner's alone: camera passwords), the job is
// still found, and said to be unreadable with what to do, rather than passed over as not running.
TEST_F(RunningJobTest, AJobWhoseFilesThisUserCannotReadIsSaidNotPassedOver) {
  if (::getuid() != 0) GTEST_SKIP() << "needs root, to become another user";
  const std::string run_dir = start_job("theirs", live_yaml({{"front", "ball"}}), getpid());
  std::filesystem::permissions(root_, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                          std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                                          std::filesystem::perms::others_exec);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);  // nobody
    const std::vector<RunningJob> jobs = running_jobs_of(config_path_, root_.string());
    const bool said = jobs.size() == 1 && jobs[0].run_dir == run_dir && jobs[0].pid == 0 &&
                      jobs[0].unreadable.find("cannot be read by this user") != std::string::npos &&
                      jobs[0].unreadable.find("run this as the user the job runs as") != std::string::npos;
    ::_exit(said ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: not said as expected; 2: could not become nobody";
}

// What a reload would do is what the job would do: an added, a removed and a changed stream, said as
// its log says them; the job's table is untouched.
TEST_F(RunningJobTest, APreviewSaysWhatTheReloadWouldAddRemoveAndChange) {
  const std::string run_dir = start_job("j", live_yaml({{"front", "ball"}, {"back", "smpte"}}), getpid());
  JobLayout layout;
  layout.run_dir = run_dir;
  auto before = read_stream_table(stream_table_path(layout));
  auto p = preview(RunningJob{run_dir, getpid(), ""}, live_yaml({{"front", "snow"}, {"side", "pinwheel"}}));
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(describe_reload(p->change, 1), "added 'side'; removed 'back'; changed 'front' (uri; connects again)");
  EXPECT_EQ(p->streams_then, 2u);
  auto after = read_stream_table(stream_table_path(layout));
  ASSERT_TRUE(before.ok() && after.ok() && before->has_value() && after->has_value());
  EXPECT_EQ((*after)->version, (*before)->version);
  EXPECT_EQ((*after)->entries.size(), 2u);

  auto same = preview(RunningJob{run_dir, getpid(), ""}, live_yaml({{"front", "ball"}, {"back", "smpte"}}));
  ASSERT_TRUE(same.ok()) << same.status().message();
  EXPECT_FALSE(same->change.changed());
}

// A reload the job would refuse: the same words its log would have, naming what cannot change.
TEST_F(RunningJobTest, APreviewOfARefusedReloadSaysWhy) {
  const std::string yaml = live_yaml({{"front", "ball"}});
  const std::string run_dir = start_job("j", yaml, getpid());
  auto p = preview(RunningJob{run_dir, getpid(), ""}, live_yaml({{"front", "ball"}}, "batch: {max_batch_size: 4}\n"));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("`batch` changed"), std::string::npos) << p.status().message();
  std::filesystem::remove(config_as_started_path(run_dir));
  auto gone = preview(RunningJob{run_dir, getpid(), ""}, yaml);
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.status().message().find(config_as_started_path(run_dir)), std::string::npos);
}

// `vapipe reload` of a new model: each lane's infer says, in its stats file, which copy of the config
// it last looked at, a model it is loading, and how its reloads went. The report is done once every
// running lane has looked at the reload's copy and loads nothing more; a lane that could not use the
// model is a failure; a lane whose infer is not running is not waited for.
TEST_F(RunningJobTest, AReloadsNewModelIsReportedLaneByLaneOnceEachHasTakenIt) {
  const std::string run_dir = (root_ / "vapipe-models").string();
  std::filesystem::create_directories(run_dir);
  auto infer = [&](uint32_t lane, StageFacts facts, uint64_t reloads, uint64_t failures) {
    StageStatsSnapshot s;
    s.stage = "infer";
    s.lane = lane;
    s.facts = std::move(facts);
    s.counters = {{"model_reloads", static_cast<double>(reloads)}, {"model_reload_failures", static_cast<double>(failures)}};
    JobLayout layout;
    layout.run_dir = run_dir;
    layout.lane = lane;
    ASSERT_TRUE(write_stage_stats(s, stage_stats_path(layout, StageKind::kInfer)).ok());
  };
  infer(0, {{"model", "door-v1"}, {"model_file", "/m/door-v1.pt"}, {"config_copy", "copy 1"}}, 0, 0);
  infer(1, {{"model", "door-v1"}, {"model_file", "/m/door-v1.pt"}, {"config_copy", "copy 1"}}, 2, 0);
  const std::vector<LaneModel> before = read_lane_models(run_dir);
  ASSERT_EQ(before.size(), 2u);
  EXPECT_TRUE(before[0].running);
  EXPECT_EQ(before[1].reloads, 2u);

  // Lane 0 loading, lane 1 not yet looked.
  infer(0, {{"model", "door-v1"}, {"model_file", "/m/door-v1.pt"}, {"config_copy", "copy 2"}, {"loading", "/m/door-v2.pt"}},
        0, 0);
  ModelReloadReport r = report_model_reload(before, read_lane_models(run_dir), "copy 2");
  EXPECT_FALSE(r.done);
  EXPECT_EQ(r.text, "  lane 0: loading /m/door-v2.pt beside 'door-v1', which classifies meanwhile\n"
                    "  lane 1: has not yet looked at the reload\n");

  // Lane 0 took it; lane 1 could not use it.
  infer(0, {{"model", "door-v2"}, {"model_file", "/m/door-v2.pt"}, {"config_copy", "copy 2"}}, 1, 0);
  infer(1, {{"model", "door-v1"}, {"model_file", "/m/door-v1.pt"}, {"config_copy", "copy 2"},
            {"last_reload_error", "model /m/door-v2.pt is not a TorchScript model"}}, 2, 1);
  r = report_model_reload(before, read_lane_models(run_dir), "copy 2");
  EXPECT_TRUE(r.done);
  EXPECT_TRUE(r.failed);
  EXPECT_EQ(r.text, "  lane 0: model 'door-v2' (/m/door-v2.pt) classifies from now on\n"
                    "  lane 1: the new model COULD NOT BE USED, and 'door-v1' (/m/door-v1.pt) goes on classifying: "
                    "model /m/door-v2.pt is not a TorchScript model\n");

  // A lane that runs that model already (restarted after the reload), and one whose infer has stopped
  // writing its stats (not running: not waited for).
  infer(1, {{"model", "door-v2"}, {"model_file", "/m/door-v2.pt"}, {"config_copy", "copy 2"}}, 0, 0);
  JobLayout lane0;
  lane0.run_dir = run_dir;
  std::filesystem::last_write_time(stage_stats_path(lane0, StageKind::kInfer),
                                   std::filesystem::file_time_type::clock::now() - std::chrono::seconds(10));
  r = report_model_reload(before, read_lane_models(run_dir), "copy 2");
  EXPECT_TRUE(r.done);
  EXPECT_FALSE(r.failed);
  EXPECT_EQ(r.text, "  lane 0: its infer is not running now (it loads the reloaded model as it starts)\n"
                    "  lane 1: runs model 'door-v2' (/m/door-v2.pt) already: nothing to load\n");

  // A reload again of a model that could not be used, its file as it was: not tried again, and said.
  infer(1, {{"model", "door-v1"}, {"model_file", "/m/door-v1.pt"}, {"config_copy", "copy 3"},
            {"last_reload_error", "model /m/door-v2.pt is not a TorchScript model"}}, 2, 1);
  const std::vector<LaneModel> failed_before = read_lane_models(run_dir);
  r = report_model_reload(failed_before, read_lane_models(run_dir), "copy 3");
  EXPECT_TRUE(r.done);
  EXPECT_TRUE(r.failed);
  EXPECT_NE(r.text.find("  lane 1: the reloaded model still CANNOT BE USED, and 'door-v1' (/m/door-v1.pt) goes on "
                        "classifying: model /m/door-v2.pt is not a TorchScript model\n"),
            std::string::npos)
      << r.text;
}

// This process stands in for `vapipe run`: its SIGHUP sets a flag, and a thread answers it as the
// supervisor does (write_reload_outcome), by `answer` (nothing written when it returns false).
class FakeSupervisor {
 public:
  using Answer = std::function<bool(ReloadOutcome&)>;
  FakeSupervisor(std::string run_dir, Answer answer) : run_dir_(std::move(run_dir)), answer_(std::move(answer)) {
    hup_ = false;
    struct sigaction sa {};
    sa.sa_handler = [](int) { hup_ = true; };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGHUP, &sa, &old_);
    thread_ = std::thread([this] {
      while (!done_) {
        if (hup_.exchange(false)) {
          ReloadOutcome o = read_reload_outcome(run_dir_).value_or(ReloadOutcome{});
          ++o.number;
          o.read_started_unix_s = static_cast<double>(wall_clock_ns()) / 1e9;
          if (answer_(o)) {
            EXPECT_TRUE(write_reload_outcome(run_dir_, o).ok());
          }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    });
  }
  ~FakeSupervisor() {
    done_ = true;
    thread_.join();
    sigaction(SIGHUP, &old_, nullptr);
  }

 private:
  static inline std::atomic<bool> hup_{false};
  std::string run_dir_;
  Answer answer_;
  std::atomic<bool> done_{false};
  struct sigaction old_ {};
  std::thread thread_;
};

// `vapipe reload` and POST /-/reload: SIGHUP, then the job's outcome of that re-read (not one before
// it), and each lane's word on a model the reload loads; within the time given, or until a stop.
TEST_F(RunningJobTest, AReloadAskedIsAnsweredWithTheJobsOutcomeOfIt) {
  const std::string run_dir = (root_ / "vapipe-asked").string();
  std::filesystem::create_directories(run_dir);
  write(config_as_started_path(run_dir), "copy");
  const auto timeout = std::chrono::milliseconds(10000);
  {
    FakeSupervisor job(run_dir, [](ReloadOutcome& o) {
      o.taken = true;
      o.message = "added 'yard'; removed none";
      return true;
    });
    // An earlier reload's outcome is there already: not the answer.
    ReloadOutcome earlier;
    earlier.number = 4;
    earlier.taken = false;
    earlier.message = "an earlier one";
    ASSERT_TRUE(write_reload_outcome(run_dir, earlier).ok());
    auto answer = reload_and_wait(run_dir, ::getpid(), timeout);
    ASSERT_TRUE(answer.ok()) << answer.status().message();
    EXPECT_EQ(answer->verdict, ReloadAnswer::Verdict::kTaken);
    EXPECT_EQ(answer->said, "reloaded: added 'yard'; removed none");
    EXPECT_EQ(answer->lanes, "");
  }
  {
    FakeSupervisor job(run_dir, [](ReloadOutcome& o) {
      o.taken = false;
      o.message = "cameras.yaml:4: `batch` changed";
      return true;
    });
    auto answer = reload_and_wait(run_dir, ::getpid(), timeout);
    ASSERT_TRUE(answer.ok());
    EXPECT_EQ(answer->verdict, ReloadAnswer::Verdict::kRefused);
    EXPECT_EQ(answer->said, "refused the reload, and changed nothing: cameras.yaml:4: `batch` changed");
  }
  {
    // No answer: within the time given, or at once when stopped.
    FakeSupervisor job(run_dir, [](ReloadOutcome&) { return false; });
    auto answer = reload_and_wait(run_dir, ::getpid(), std::chrono::milliseconds(300));
    ASSERT_TRUE(answer.ok());
    EXPECT_EQ(answer->verdict, ReloadAnswer::Verdict::kNoAnswer);
    EXPECT_NE(answer->said.find("has not said within 0.3 s what became of the reload"), std::string::npos)
        << answer->said;
    std::atomic<bool> stop{true};
    const auto asked = std::chrono::steady_clock::now();
    answer = reload_and_wait(run_dir, ::getpid(), timeout, &stop);
    ASSERT_TRUE(answer.ok());
    EXPECT_EQ(answer->verdict, ReloadAnswer::Verdict::kNoAnswer);
    EXPECT_LT(std::chrono::steady_clock::now() - asked, std::chrono::seconds(5));
  }
  // A reload that loads a model: each lane's word, as report_model_reload gives it.
  auto infer = [&](StageFacts facts, uint64_t reloads, uint64_t failures) {
    StageStatsSnapshot s;
    s.stage = "infer";
    s.facts = std::move(facts);
    s.counters = {{"model_reloads", static_cast<double>(reloads)}, {"model_reload_failures", static_cast<double>(failures)}};
    JobLayout layout;
    layout.run_dir = run_dir;
    ASSERT_TRUE(write_stage_stats(s, stage_stats_path(layout, StageKind::kInfer)).ok());
  };
  for (const bool usable : {true, false}) {
    infer({{"model", "door-v1"}, {"model_file", "/m/door-v1.pt"}, {"config_copy", "old copy"}}, usable ? 0 : 1, 0);
    std::optional<FakeSupervisor> job;
    job.emplace(run_dir, [&](ReloadOutcome& o) {
      o.taken = true;
      o.model_loads = true;
      o.message = "infer.model changed";
      const std::string copy = file_identity(config_as_started_path(run_dir));
      if (usable) {
        infer({{"model", "door-v2"}, {"model_file", "/m/door-v2.pt"}, {"config_copy", copy}}, 1, 0);
      } else {
        infer({{"model", "door-v1"}, {"model_file", "/m/door-v1.pt"}, {"config_copy", copy},
               {"last_reload_error", "not a TorchScript model"}}, 2, 1);
      }
      return true;
    });
    auto answer = reload_and_wait(run_dir, ::getpid(), timeout);
    ASSERT_TRUE(answer.ok());
    EXPECT_EQ(answer->said, "reloaded: infer.model changed");
    if (usable) {
      EXPECT_EQ(answer->verdict, ReloadAnswer::Verdict::kTaken);
      EXPECT_EQ(answer->lanes, "  lane 0: model 'door-v2' (/m/door-v2.pt) classifies from now on\n");
    } else {
      EXPECT_EQ(answer->verdict, ReloadAnswer::Verdict::kModelNotUsed);
      EXPECT_NE(answer->lanes.find("COULD NOT BE USED"), std::string::npos) << answer->lanes;
      // The same reload again (a deployment's retry): nothing new to load, and still not the config's
      // model that classifies. Not a success (it was: exit 0, 200). (The first one gone first: both
      // would take the SIGHUP, and the first one's answer, a model loaded, came under load.)
      job.reset();
      FakeSupervisor again(run_dir, [&](ReloadOutcome& o) {
        o.taken = true;
        o.model_loads = false;
        o.message = "the streams are unchanged";
        return true;
      });
      answer = reload_and_wait(run_dir, ::getpid(), timeout);
      ASSERT_TRUE(answer.ok());
      EXPECT_EQ(answer->verdict, ReloadAnswer::Verdict::kModelNotUsed);
      EXPECT_EQ(answer->lanes, "  lane 0: the config's model still CANNOT BE USED (it is not loaded again until its file "
                               "changes), and 'door-v1' (/m/door-v1.pt) goes on classifying: not a TorchScript model\n");
    }
  }
  {
    // A lane that does not take it in time.
    infer({{"model", "door-v1"}, {"model_file", "/m/door-v1.pt"}, {"config_copy", "old copy"}}, 0, 0);
    FakeSupervisor job(run_dir, [&](ReloadOutcome& o) {
      o.taken = true;
      o.model_loads = true;
      o.message = "infer.model changed";
      return true;
    });
    std::atomic<bool> keep_running{true};
    std::thread stats([&] {  // its infer goes on writing its stats, never looking at the copy
      while (keep_running) {
        infer({{"model", "door-v1"}, {"model_file", "/m/door-v1.pt"}, {"config_copy", "old copy"}}, 0, 0);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
    auto answer = reload_and_wait(run_dir, ::getpid(), std::chrono::milliseconds(1500));
    keep_running = false;
    stats.join();
    ASSERT_TRUE(answer.ok());
    EXPECT_EQ(answer->verdict, ReloadAnswer::Verdict::kModelNotYetTaken);
    EXPECT_NE(answer->lanes.find("the model is not yet taken in every lane after 1.5 s"), std::string::npos)
        << answer->lanes;
  }
  {
    // A job that ends before it answers (here a process that takes SIGHUP for nothing and exits 0.3 s
    // later): said then, not at the deadline.
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::signal(SIGHUP, SIG_IGN);
      ::usleep(300000);
      ::_exit(0);
    }
    std::thread reaper([child] { ::waitpid(child, nullptr, 0); });  // (a zombie still takes signals)
    const auto asked = std::chrono::steady_clock::now();
    auto answer = reload_and_wait(run_dir, child, timeout);
    reaper.join();
    ASSERT_TRUE(answer.ok()) << answer.status().message();
    EXPECT_EQ(answer->verdict, ReloadAnswer::Verdict::kNoAnswer);
    EXPECT_EQ(answer->said, "ended before it said what became of the reload");
    EXPECT_LT(std::chrono::steady_clock::now() - asked, std::chrono::seconds(5));
  }
  // No such process: an error that names it.
  auto gone = reload_and_wait(run_dir, INT_MAX, timeout);
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.status().message().find("pid 2147483647"), std::string::npos) << gone.status().message();
}

TEST(DescribeReload, SaysNoneForNothingAndLanesOnlyWhenThereAreSeveral) {
  StreamReload change;
  EXPECT_EQ(describe_reload(change, 1), "added none; removed none");
  change.added = {"a", "b"};
  change.added_lanes = {0, 1};
  change.retuned = {"c"};
  change.retuned_what = {"roi"};
  EXPECT_EQ(describe_reload(change, 2), "added 'a' (lane 0), 'b' (lane 1); removed none; changed 'c' (roi)");
  change.returned = {"d", "e"};
  EXPECT_EQ(describe_reload(change, 1), "added 'a', 'b'; removed none; back 'd', 'e'; changed 'c' (roi)");
}

}  // namespace
}  // namespace vapipe
