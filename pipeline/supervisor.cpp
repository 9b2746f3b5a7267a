#include "pipeline/supervisor.h"

#include <cstdint>
#include <cstdio>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "pipeline/atomic_file.h"
#include "pipeline/background_task.h"
#include "pipeline/cgroup.h"
#include "pipeline/crashed_streams.h"
#include "pipeline/cuda/gpu_info.h"
#include "pipeline/file_lock.h"
#include "pipeline/folder_watch.h"
#include "pipeline/infer_reload.h"
#include "pipeline/job_layout.h"
#include "pipeline/logging.h"
#include "pipeline/resume.h"
#include "pipeline/results_path.h"
#include "pipeline/running_job.h"
#include "pipeline/stage_stats.h"
#include "pipeline/stale_jobs.h"
#include "pipeline/trusted_dir.h"
#include "pipeline/stream_table.h"
#include "pipeline/stream_uri.h"
#include "pipeline/transport.h"
#include "pipeline/utf8.h"

namespace vapipe {
namespace {

struct Child {
  StageKind kind;
  uint32_t lane = 0;
  pid_t pid = -1;
  bool exited = false;
  int status = 0;  // waitpid status
  bool killed_for_restart = false;  // its lane restarts after another of its stages crashed
  bool started_stopping = false;     // started during a stop, with its stop requested: no SIGTERM needed
  std::optional<std::chrono::steady_clock::time_point> finished_at = std::nullopt;  // when it exited cleanly
};

// The kernel's out-of-memory kills when a stage's death was last looked at (or the job started).
std::atomic<uint64_t> oom_kills_seen{0};

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    std::string text = "killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
    if (sig == SIGKILL) {
      // Not by vapipe (its own kills are said otherwise): a person's `kill -9`, or the kernel's OOM killer.
      const uint64_t now = oom_kills_so_far();
      if (now > oom_kills_seen.exchange(now)) {
        const uint64_t limit = cgroup_memory_limit(own_cgroup_dirs("memory"));
        text += ": the kernel's out-of-memory killer killed a process just now, most likely this one (" +
                (limit > 0 ? "the container's or cgroup's memory limit, " + std::to_string(limit >> 20) + " MiB"
                           : std::string("the machine's memory")) +
                ": give the job more memory, or fewer streams at once; `dmesg` says which process)";
      }
    }
    return text;
  }
  return "status " + std::to_string(status);
}

std::string child_name(const Child& c, size_t lanes) {
  std::string name = stage_kind_name(c.kind);
  if (lanes > 1 && c.kind != StageKind::kPublish) name += "[" + std::to_string(c.lane) + "]";
  return name;
}

pid_t spawn_stage(StageKind kind, uint32_t lane, const SupervisorOptions& o, const std::string& job_id,
                  int64_t start_ns, int visible_gpus, int gpus_used, const std::string& restart_reason = "",
                  bool stopping = false) {
  std::vector<std::string> args = {o.self_exe, "stage", stage_kind_name(kind)};
  args.insert(args.end(), o.config_args.begin(), o.config_args.end());
  args.push_back("--job-id");
  args.push_back(job_id);
  args.push_back("--lane");
  args.push_back(std::to_string(lane));
  pid_t pid = fork_holding_stop_signals();  // held until the stage has its handlers (kept across the exec)
  if (pid != 0) return pid;
  // Child. Its own process group: a terminal's Ctrl-C reaches only the supervisor, which then stops
  // the stages in order. If the supervisor dies, the stages get SIGTERM.
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  setenv("VAPIPE_JOB_START_NS", std::to_string(start_ns).c_str(), 1);
  setenv("VAPIPE_SUPERVISOR_PID", std::to_string(getppid()).c_str(), 1);  // publish's POST /-/reload
  setenv(kStreamsFromTableEnv, "1", 1);
  // Every stage plans the same placement as the supervisor from the same GPU count.
  setenv("VAPIPE_VISIBLE_GPUS", std::to_string(visible_gpus).c_str(), 1);
  if (!getenv("VAPIPE_GPU_COUNT")) setenv("VAPIPE_GPU_COUNT", std::to_string(gpus_used).c_str(), 1);
  if (restart_reason.empty()) {
    unsetenv(kRestartReasonEnv);
  } else {
    setenv(kRestartReasonEnv, restart_reason.c_str(), 1);
  }
  if (stopping) {
    setenv(kStopRequestedEnv, "1", 1);
  } else {
    unsetenv(kStopRequestedEnv);
  }
  // Stages share the cores: OpenMP threads (LibTorch's) that spin between forward passes take CPU
  // that decode and preprocess need. Measured on 2 cores: 371-374 -> 460-477 frames/s end to end.
  // (`vapipe stage` sets it too when started by hand; setting it here saves that re-exec.)
  if (!getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT")) setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  execv(o.self_exe.c_str(), argv.data());
  std::fprintf(stderr, "vapipe run: cannot start stage %s: %s\n", stage_kind_name(kind), std::strerror(errno));
  _exit(127);
}

// A run that lasted this long was not a crash loop: the restart count starts over.
constexpr auto kRestartCountReset = std::chrono::minutes(10);
// How long a live lane's ingest may go on after its preprocess finished before the lane counts as
// stranded (restart_stranded_lanes): ingest exits within milliseconds behind it otherwise.
constexpr auto kStrandedLaneGrace = std::chrono::seconds(10);
// A reload's config read that has run this long is said once (a share that does not answer), as a
// watched folder's look is (FolderWatcher::kHungLookS).
constexpr double kHungReloadS = 30;

// Whether the stages of `lane` (or publish) are still opening (their start-up marks are there): a
// failure then is a start-up error (a model that does not load, a bad device), which a restart would
// only repeat.
bool lane_opening(const Config& config, const std::string& job_id, uint32_t lane) {
  std::error_code ec;
  const JobLayout layout = make_job_layout(config, job_id, lane);
  for (StageKind k : {StageKind::kPreprocess, StageKind::kBatch, StageKind::kInfer}) {
    if (std::filesystem::exists(opening_mark(layout, k), ec)) return true;
  }
  return false;
}
bool publish_opening(const Config& config, const std::string& job_id) {
  std::error_code ec;
  return std::filesystem::exists(opening_mark(make_job_layout(config, job_id), StageKind::kPublish), ec);
}

bool any_opening_mark(const Config& config, const std::string& job_id, const Placement& placement) {
  std::error_code ec;
  if (std::filesystem::exists(opening_mark(make_job_layout(config, job_id), StageKind::kPublish), ec)) return true;
  for (const Lane& lane : placement.lanes) {
    const JobLayout layout = make_job_layout(config, job_id, lane.index);
    for (StageKind k : {StageKind::kPreprocess, StageKind::kBatch, StageKind::kInfer}) {
      if (std::filesystem::exists(opening_mark(layout, k), ec)) return true;
    }
  }
  return false;
}

// Each stream of `table` that has not been removed, as (id, URI).
std::vector<std::pair<std::string, std::string>> live_sources(const StreamTable& table) {
  std::vector<std::pair<std::string, std::string>> sources;
  for (const StreamTableEntry& e : table.entries) {
    if (!e.removed && e.source.empty()) sources.emplace_back(e.id, e.uri);  // a member decodes nothing
  }
  return sources;
}

}  // namespace

void cleanup_job_resources(const Config& config, const std::string& job_id, size_t lanes) {
  for (uint32_t lane = 0; lane < std::max<size_t>(lanes, 1); ++lane) {
    JobLayout layout = make_job_layout(config, job_id, lane);
    shm_unlink(layout.frame_pool.c_str());
    shm_unlink(layout.tensor_pool.c_str());
  }
  JobLayout layout = make_job_layout(config, job_id);
  std::error_code ec;
  std::filesystem::remove_all(layout.run_dir, ec);
}

namespace {

// How one run of the job's stage processes ended.
constexpr const char* kUnwritableRefusal =
    " (not restarted: its results file cannot be written, and a restart would fail the same way)";
constexpr const char* kSummaryUnwritableRefusal =
    " (not restarted: its job.summary_path could not be written; the results file is whole, with the job's summary, "
    "and `vapipe run --resume` writes the summary file once it can be)";
// (Without a results file: no --resume to offer; the summary went out on the bus as job/summary.)
constexpr const char* kSummaryUnwritableRefusalNoFile =
    " (not restarted: its job.summary_path could not be written; the summary went out as job/summary on the bus "
    "and to the sinks)";

struct RunOutcome {
  int code = kExitOk;
  std::string failure = "";  // the first stage that failed, and how
  bool restartable = false; // a stage failed after every stage had opened (a crash, not a bad config)
  std::string refusal = "";  // why the job is not restarted, when run_job_once decided (live jobs)
  std::vector<StreamConfig> watched_files = {};  // the files its watched folders added to the job
  // An archive job's ingest died of a signal: the streams it was reading then (pipeline/crashed_streams.h),
  // and how it died.
  std::vector<std::string> crash_suspects = {};
  std::string crash_how = "";
};

// Files that crashed an archive job's ingest, left out from the restart on; and whether it reads one
// file at a time until the next crash names one (pipeline/crashed_streams.h).
struct CrashQuarantine {
  std::map<std::string, std::string> crashed;  // stream id -> how ingest died
  bool one_at_a_time = false;
};

// One run of every stage process. `restarts`: restarts in a row before this run. A crash that will
// restart the job (restart_refusal) leaves the restart mark, so that the stages it then stops know that
// this is not the job's end.
RunOutcome run_job_once(const Config& config, const SupervisorOptions& options, ShutdownFlags& flags,
                        const std::string& job_id, int64_t start_ns, int visible_gpus, const Placement* placement,
                        bool resume, uint32_t restarts, const CrashQuarantine& quarantine = {},
                        FileLock* results_lock = nullptr) {
  const auto began = std::chrono::steady_clock::now();
  const size_t lanes = placement->lanes.size();
  JobLayout layout = make_job_layout(config, job_id);
  std::filesystem::create_directories(layout.run_dir);
  // A crashed run with this job id may have left infer's automatic batch sizes behind, and live ingest's
  // sequence reservations (pipeline/seq_reservation.h): this run's stages start their streams anew, and
  // a file marked read to its end by an earlier run must not be taken for one this run read.
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(layout.run_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name == kResumeCutFile || name.rfind("auto-batch-size-", 0) == 0 || name.rfind("reading-", 0) == 0 ||
        (name.rfind("seq-", 0) == 0 &&
                                                      (entry.path().extension() == ".json" ||
                                                       entry.path().extension() == ".positions"))) {
      std::filesystem::remove(entry.path(), ec);
    }
  }
  for (const auto& [id, how] : quarantine.crashed) {
    if (Status st = add_crashed_stream(layout, id, how); !st.ok()) VAPIPE_LOG_ERROR("{}", st.message());
  }
  if (quarantine.one_at_a_time) std::ofstream(one_at_a_time_mark(layout)).flush();

  // Streams of the results file that the config no longer has: a watched folder's file that comes
  // back is not classified again.
  std::set<std::string> earlier_ids;
  if (resume) {
    // Read once here, before any stage starts: publish truncates nothing itself, and every stage
    // that needs the plan reads the same one.
    auto plan = read_resume_plan(config);
    if (!plan.ok()) {
      VAPIPE_LOG_ERROR("--resume: {}", plan.status().message());
      cleanup_job_resources(config, job_id, lanes);  // (its run folder: found left, empty)
      return RunOutcome{kExitUsage};
    }
    const std::string& jsonl = config.publish.jsonl_path;
    for (const auto& [id, p] : plan->departed) {
      earlier_ids.insert(id);
      VAPIPE_LOG_WARN("--resume: stream '{}' is in {} but no longer in the config (its file left the folder, or it "
                      "was taken out of streams): its {} results are kept{}", id, jsonl, p.results,
                      p.ended.empty() ? "; it ends now, unfinished, as removed" : ", and it is not run again");
    }
    // A file that was classified to its end and has changed since (a recorder still writing it when
    // it was read): its results stay as they are, and the rest of it is not classified. Said, by name.
    // Not at a restart after a crash: the run before said so, and its watched folder may be on a share
    // that has stopped answering (the restart would wait on it).
    for (const StreamConfig& s : config.streams) {
      if (restarts > 0) break;
      const StreamProgress& p = plan->streams.at(s.id);
      if (p.ended != "done" || p.file_bytes < 0 || s.parsed.kind != UriKind::kFile) continue;
      std::error_code ec;
      const auto now = std::filesystem::file_size(file_uri_path(s.uri), ec);
      if (ec || static_cast<int64_t>(now) == p.file_bytes) continue;
      VAPIPE_LOG_WARN("--resume: stream '{}': {} has changed since it was classified ({} bytes then, {} now): its {} "
                      "results are kept and what it holds now is not classified (a recorder was still writing it? "
                      "streams[].settle_s leaves such files for a later run); give it a new id, or run without "
                      "--resume, to classify it again", s.id, escape_invalid_utf8(file_uri_path(s.uri)), p.file_bytes, now, p.results);
    }
    // (Every stream ended, but no summary: the run stopped as it wrote it, a full disk: this run writes it.)
    if (plan->complete() && plan->summarized && plan->cut_reason.empty() && !config.watches_folders()) {
      VAPIPE_LOG_INFO("job '{}' is already complete in {}: every stream has ended there; nothing to resume",
                      config.job.name, jsonl);
      // As the run that ended them: a stream that failed there is still failed (exit 3, each named),
      // so that a script that resumes a job does not take one with a missing file for a success.
      std::vector<std::string> failed;
      for (const auto& [id, p] : plan->streams) {
        if (p.ended != "failed") continue;
        failed.push_back(id);
        VAPIPE_LOG_WARN("--resume: stream '{}' failed in an earlier run ({}); it is not run again: give it a new id, "
                        "or run the job without --resume, to classify it", id, p.message);
      }
      // Its sinks' messages that a receiver down at its end did not take (exit 7 then): sent now.
      uint64_t undelivered = 0;
      if (options.deliver_what_sinks_missed) {
        auto missed = options.deliver_what_sinks_missed(config, &flags.stop);
        if (!missed.ok()) {
          VAPIPE_LOG_ERROR("--resume: {}", missed.status().message());
        } else {
          undelivered = *missed;
        }
      }
      // Its summary file, where the run that ended could not write it (a full disk then).
      if (!config.job.summary_path.empty() && !plan->summary_json.empty() &&
          !std::filesystem::exists(config.job.summary_path, ec)) {
        if (Status st = write_file_atomically(config.job.summary_path, plan->summary_json, 0644); st.ok()) {
          VAPIPE_LOG_INFO("--resume: job.summary_path {} written from the results' summary", config.job.summary_path);
        } else {
          VAPIPE_LOG_ERROR("job.summary_path: {}", st.message());
        }
      }
      cleanup_job_resources(config, job_id, lanes);
      return RunOutcome{!failed.empty() ? kExitStreamsFailed : undelivered > 0 ? kExitSinksUndelivered : kExitOk};
    }
    if (!plan->cut_reason.empty()) {
      VAPIPE_LOG_INFO("--resume: {} is kept up to line {} ({} bytes); cut from {} ({} complete lines after it are "
                      "redone)", jsonl, plan->kept_lines, plan->keep_bytes, plan->cut_reason, plan->cut_lines);
      // What is cut, for publish's sinks, which may have taken some of it (resume.h's kResumeCutFile).
      if (std::ifstream whole(jsonl, std::ios::binary); whole) {
        whole.seekg(0, std::ios::end);
        const auto size = static_cast<uint64_t>(std::max<std::streamoff>(0, whole.tellg()));
        whole.seekg(static_cast<std::streamoff>(plan->keep_bytes));
        // (what is there, not 64 MB zero-filled at every resume)
        std::string cut(static_cast<size_t>(std::min(kMostResumeCutBytes, size - std::min(size, plan->keep_bytes))), '\0');
        whole.read(cut.data(), static_cast<std::streamsize>(cut.size()));
        cut.resize(static_cast<size_t>(whole.gcount()));
        (void)write_file_atomically(layout.run_dir + "/" + kResumeCutFile, cut, 0600);
      }
      std::filesystem::resize_file(jsonl, plan->keep_bytes, ec);
      if (ec) {
        VAPIPE_LOG_ERROR("--resume: cannot cut {} to {} bytes: {}", jsonl, plan->keep_bytes, ec.message());
        cleanup_job_resources(config, job_id, lanes);  // (its run folder: found left, empty)
        return RunOutcome{kExitUsage};
      }
    }
    for (const StreamConfig& s : config.streams) {
      const StreamProgress& p = plan->streams.at(s.id);
      if (!p.ended.empty()) {
        VAPIPE_LOG_INFO("--resume: stream '{}' {} in an earlier run ({} results)", s.id, p.ended, p.results);
      } else {
        VAPIPE_LOG_INFO("--resume: stream '{}' goes on from frame {}", s.id, p.results);
      }
    }
    const std::string plan_path = layout.run_dir + "/resume.json";
    if (Status s = write_resume_plan(*plan, plan_path); !s.ok()) {
      VAPIPE_LOG_ERROR("--resume: {}", s.message());
      cleanup_job_resources(config, job_id, lanes);  // (its run folder: found left, empty)
      return RunOutcome{kExitUsage};
    }
    setenv(kResumePlanEnv, plan_path.c_str(), 1);  // inherited by every stage
  }

  // The job's streams, as every stage will use them: a `glob:` is expanded here once, so that files
  // appearing while the stages start cannot give two stages different lists (pipeline/stream_table.h).
  StreamTable table = initial_stream_table(config, *placement);
  if (Status s = write_stream_table(table, stream_table_path(layout)); !s.ok()) {
    VAPIPE_LOG_ERROR("{}", s.message());
    cleanup_job_resources(config, job_id, lanes);
    return RunOutcome{kExitStageFailed};
  }
  // The config as the job started with it, for every stage it starts (kConfigAsStartedEnv): a stage
  // started again after a crash runs with it, not with the file as edited since. Owner-only: it may
  // hold a camera's password.
  if (!options.config_path.empty()) {
    const std::string copy = config_as_started_path(layout.run_dir);
    if (Status s = write_file_atomically(copy, options.config_text, 0600); !s.ok()) {
      VAPIPE_LOG_ERROR("{}", s.message());
      cleanup_job_resources(config, job_id, lanes);
      return RunOutcome{kExitStageFailed};
    }
    setenv(kConfigAsStartedEnv, copy.c_str(), 1);  // inherited by every stage
    // Which file a reload reads, for `vapipe validate CONFIG --reload` to find this job by.
    if (Status s = write_file_atomically(config_path_mark(layout.run_dir), config_path_mark_text(options.config_path),
                                         0644);  // a path, no secret: any user may ask
        !s.ok()) {
      VAPIPE_LOG_WARN("{} (`vapipe validate --reload` will not find this job)", s.message());
    }
  }
  // The table version that added each stream, and the one each lane's ingest started with: a lane that
  // finished (its streams all removed or given up) starts again for streams added after it started.
  std::vector<uint64_t> added_at(table.entries.size(), table.version);
  std::vector<uint64_t> lane_started_at(lanes, table.version);
  // Watched folders (streams[].watch_s): their new files join the table as they settle.
  std::optional<FolderWatcher> watcher;
  // Reads the folders on a thread of its own: a share that hangs holds up no restart, stop or signal.
  std::optional<FolderLooker> looker;
  std::vector<StreamConfig> watched_files;  // what the looks added, for a restart (RunOutcome)
  if (config.watches_folders()) {
    watcher.emplace(config.watches, std::chrono::steady_clock::now());
    looker.emplace(watcher->watches());
  }

  // The start-up gate (opening_mark in job_layout.h): ingest starts its streams once the others opened.
  for (const Lane& lane : placement->lanes) {
    const JobLayout lane_layout = make_job_layout(config, job_id, lane.index);
    for (StageKind k : {StageKind::kPreprocess, StageKind::kBatch, StageKind::kInfer}) {
      std::ofstream(opening_mark(lane_layout, k)).flush();
    }
  }
  std::ofstream(opening_mark(layout, StageKind::kPublish)).flush();

  VAPIPE_LOG_INFO("job '{}' ({}): {} streams, {} mode, results on {}", config.job.name, job_id, config.streams.size(),
                  config.job.mode == JobMode::kArchive ? "archive" : "live", config.publish.endpoint);
  for (const Lane& lane : placement->lanes) VAPIPE_LOG_INFO("{}", lane.describe(config));
  for (const SharedSource& shared : shared_network_sources(live_sources(table))) {
    VAPIPE_LOG_WARN("{}", describe(shared));
  }
  for (const std::string& note : config.notes) {
    if (note.find(kCouldNotBeListed) != std::string::npos) {
      VAPIPE_LOG_WARN("{}", note);  // files left out that the user did not mean to leave out
    } else {
      VAPIPE_LOG_INFO("{}", note);
    }
  }
  // Downstream first, so every input is bound before its upstream starts sending: publish, then each
  // lane from infer up to ingest.
  std::vector<Child> plan = {Child{StageKind::kPublish}};
  for (const Lane& lane : placement->lanes) {
    for (StageKind k : {StageKind::kInfer, StageKind::kBatch, StageKind::kPreprocess, StageKind::kIngest}) {
      plan.push_back(Child{k, lane.index});
    }
  }
  std::vector<Child> children;
  for (Child c : plan) {
    c.pid = spawn_stage(c.kind, c.lane, options, job_id, start_ns, visible_gpus, placement->gpus_used());
    if (c.pid < 0) {
      VAPIPE_LOG_ERROR("cannot fork stage {}: {}", child_name(c, lanes), std::strerror(errno));
      for (Child& other : children) kill(other.pid, SIGKILL);
      cleanup_job_resources(config, job_id, lanes);
      return RunOutcome{kExitStageFailed};
    }
    VAPIPE_LOG_INFO("started stage {} (pid {})", child_name(c, lanes), c.pid);
    children.push_back(c);
  }
  auto child_of = [&](StageKind k) -> Child& {
    for (Child& c : children) {
      if (c.kind == k) return c;
    }
    return children.front();
  };
  auto signal_all = [&](int sig) {
    for (Child& c : children) {
      if (!c.exited) kill(c.pid, sig);
    }
  };
  auto running = [&] {
    size_t n = 0;
    for (const Child& c : children) n += !c.exited;
    return n;
  };

  // SIGHUP: a live job re-reads its config and adds and removes streams (pipeline/stream_table.h).
  // The file is read (its globs expanded) on a thread of its own: a config or a glob on a share that
  // has stopped answering holds up no restart, stop or signal; the streams change when it ends.
  struct ConfigRead {
    Result<Config> config = Unavailable("not read");
    std::string text;
  };
  BackgroundTask<ConfigRead> reload_read;
  // The config text the job runs with: as it started, then as each reload that changed `publish` left
  // it (its copy in the run folder is rewritten, for publish and for a stage started again).
  std::string running_text = options.config_text;
  // infer's model and labels files as they were when the job loaded them, then at each reload taken: a
  // reload that finds one replaced under the same path has infer load it again.
  InferFileIdentities infer_files = infer_file_identities(config.infer);
  auto keep_infer_files = [&] {  // (for `vapipe validate --reload`)
    if (Status st = write_infer_file_identities(layout.run_dir, infer_files); !st.ok()) {
      VAPIPE_LOG_WARN("{} (`vapipe validate --reload` will not say whether a model file was replaced)", st.message());
    }
  };
  if (config.job.mode == JobMode::kLive) keep_infer_files();
  bool reload_again = false;     // SIGHUP while a read ran: read again when it ends
  bool said_reload_hung = false;  // the running read was said to take long
  std::chrono::steady_clock::time_point reload_started;
  double reload_read_started_unix_s = 0;  // the read's start by the wall clock (ReloadOutcome)
  const std::string reload_what = "reload (SIGHUP): ";
  const std::string reload_unchanged = "; the job goes on with its streams unchanged";
  auto start_reload_read = [&] {
    said_reload_hung = false;
    reload_started = std::chrono::steady_clock::now();
    reload_read_started_unix_s = static_cast<double>(wall_clock_ns()) / 1e9;
    write_reload_mark(layout, static_cast<double>(wall_clock_ns()) / 1e9);  // for /healthz: a read that hangs
    reload_read.start(
        [path = options.config_path] {
          ConfigRead read;
          read.config = load_config_file(path, &read.text);
          return read;
        },
        [path = options.config_path](const std::string& e) {
          ConfigRead read;
          read.config = Unavailable(path + ": cannot be read: " + e);
          return read;
        });
  };
  // What became of each reload, for /metrics, /healthz and `vapipe reload` (pipeline/running_job.h).
  ReloadOutcome reload_outcome;
  auto record_reload = [&](bool taken, const std::string& message, bool model_loads = false) {
    ReloadOutcome& o = reload_outcome;
    ++o.number;
    o.model_loads = model_loads;
    o.at_unix_s = static_cast<double>(wall_clock_ns()) / 1e9;
    o.taken = taken;
    o.message = message;
    o.read_started_unix_s = reload_read_started_unix_s;
    ++(taken ? o.taken_total : o.refused_total);
    if (taken) o.last_taken_unix_s = o.at_unix_s;
    if (Status st = write_reload_outcome(layout.run_dir, o); !st.ok()) VAPIPE_LOG_WARN("{}{}", reload_what, st.message());
  };
  auto reload = [&] {
    const std::string& what = reload_what;
    const std::string& unchanged = reload_unchanged;
    if (options.config_path.empty()) {
      VAPIPE_LOG_WARN("{}the embedded demo config has no file to re-read{}", what, unchanged);
      reload_read_started_unix_s = static_cast<double>(wall_clock_ns()) / 1e9;  // (answered without a read)
      record_reload(false, "the embedded demo config has no file to re-read");
      return;
    }
    if (watcher) {
      // An archive job that watches folders: its streams are what they hold; look now rather than at
      // the next look (a script that has just copied files in says so).
      watcher->look_at(std::chrono::steady_clock::now());
      VAPIPE_LOG_INFO("{}the watched folders are looked at now (an archive job's config is not read again while it "
                      "runs)", what);
      reload_read_started_unix_s = static_cast<double>(wall_clock_ns()) / 1e9;
      record_reload(true, "the watched folders are looked at now (an archive job's config is not read again while it "
                          "runs)");
      return;
    }
    if (config.job.mode != JobMode::kLive) {
      VAPIPE_LOG_ERROR("{}{}: only a live job's streams can change while it runs{}", what, options.config_path,
                       unchanged);
      reload_read_started_unix_s = static_cast<double>(wall_clock_ns()) / 1e9;
      record_reload(false, options.config_path + ": only a live job's streams can change while it runs");
      return;
    }
    if (reload_read.busy()) {
      reload_again = true;
      VAPIPE_LOG_INFO("{}{} is still being read for the reload before (for {:.1f} s); it is read again when that "
                      "read ends", what, options.config_path, reload_read.running_s(std::chrono::steady_clock::now()));
      return;
    }
    start_reload_read();
  };
  // The config read for a reload, once it has ended: the streams it names join and leave the job.
  auto apply_reload = [&](ConfigRead read) {
    const std::string& what = reload_what;
    const std::string& unchanged = reload_unchanged;
    const std::string& text = read.text;
    auto& fresh = read.config;
    if (!fresh.ok()) {
      VAPIPE_LOG_ERROR("{}{}{}", what, fresh.status().message(), unchanged);
      record_reload(false, fresh.status().message());
      return;
    }
    if (options.check_streams) {
      if (Status st = options.check_streams(*fresh); !st.ok()) {
        VAPIPE_LOG_ERROR("{}{}{}", what, st.message(), unchanged);
        record_reload(false, st.message());
        return;
      }
    }
    StreamTable next = table;
    auto change = apply_stream_reload(next, running_text, text, *fresh, lanes);
    if (!change.ok()) {
      VAPIPE_LOG_ERROR("{}{}{}", what, change.status().message(), unchanged);
      record_reload(false, change.status().message());
      return;
    }
    note_replaced_infer_files(fresh->infer, infer_files, change->infer);
    for (size_t i = 0; i < change->infer.missing.size(); ++i) {
      VAPIPE_LOG_WARN("{}{}: infer.{}: {}: file not found: the running model goes on, but a lane that starts again "
                      "cannot load it", what, options.config_path, change->infer.missing[i],
                      change->infer.missing_paths[i]);
    }
    // publish's outputs and segments' settings, ingest's sampling and reconnection, infer's model,
    // log.level: the job's copy of its config, which publish, ingest and infer look at
    // (pipeline/publish_reload.h, ingest_reload.h, infer_reload.h),
    // is the reloaded text from now on. Written before the table (ingest reads the copy when the table's
    // version rises), and put back if the table cannot be written: a reload is applied whole or not at all.
    const std::string copy = config_as_started_path(layout.run_dir);
    const bool copy_changes = settings_changed(*change);
    if (copy_changes) {
      if (Status st = write_file_atomically(copy, text, 0600); !st.ok()) {
        VAPIPE_LOG_ERROR("{}{}{}", what, st.message(), unchanged);
        record_reload(false, st.message());
        return;
      }
    }
    // Written even when no stream changed: ingest starts again the cameras that have ended (gave up).
    if (Status st = write_stream_table(next, stream_table_path(layout)); !st.ok()) {
      VAPIPE_LOG_ERROR("{}{}{}", what, st.message(), unchanged);
      if (copy_changes) (void)write_file_atomically(copy, running_text, 0600);
      record_reload(false, st.message());
      return;
    }
    if (copy_changes) running_text = text;
    infer_files = infer_file_identities(fresh->infer);
    keep_infer_files();
    if (change->log_level) {
      // Every stage takes it from the copy within a second (LogLevelFollower); this process now.
      const bool taken = set_log_level(*change->log_level);
      VAPIPE_LOG_WARN("{}{}: log.level {}{}", what, options.config_path, *change->log_level,
                      taken || std::getenv("VAPIPE_LOG_LEVEL") == nullptr
                          ? " in every process of the job from now on"
                          : " (VAPIPE_LOG_LEVEL is set, and wins: the level stays)");
    }
    if (change->publish.changed()) {
      VAPIPE_LOG_INFO("{}{}: {} (publish takes it within a quarter of a second; the bus and the streams go on)", what,
                      options.config_path, describe_publish_reload(change->publish));
    }
    if (change->infer.changed()) {
      VAPIPE_LOG_INFO("{}{}: {} (each lane's infer loads it beside the model it runs and classifies with it once it is "
                      "ready; the streams go on)",
                      what, options.config_path, describe_infer_reload(change->infer));
    }
    if (change->ingest.changed()) {
      VAPIPE_LOG_INFO("{}{}: {} (every stream takes it within a second{})", what, options.config_path,
                      describe_ingest_reload(change->ingest),
                      change->retuned.empty() ? ""
                                              : "; those that sample or buffer with it take it as they go");
    }
    table = std::move(next);
    added_at.resize(table.entries.size(), table.version);
    // A lane that had finished starts again for a stream that comes back to it, as for one added; and,
    // when every stream it decodes is a camera (each gave up, or was removed), for its cameras: a reload
    // tries again each camera that gave up, on a lane that has finished too. (Not a lane with a file:
    // its new ingest would read the file again from its start.)
    std::map<uint32_t, bool> cameras_only;
    for (const StreamTableEntry& e : table.entries) {
      if (e.removed || !e.source.empty()) continue;
      bool& cameras = cameras_only.emplace(e.lane, true).first->second;
      cameras = cameras && uri_kind_of(e.uri) == UriKind::kNetwork;
    }
    for (const StreamTableEntry& e : table.entries) {
      const bool returned = std::find(change->returned.begin(), change->returned.end(), e.id) != change->returned.end();
      auto lane_cameras = cameras_only.find(e.lane);
      if (returned || (!e.removed && lane_cameras != cameras_only.end() && lane_cameras->second)) {
        added_at[e.index] = table.version;
      }
    }
    record_reload(true,
                  change->changed() || settings_changed(*change)
                      ? describe_reload(*change, lanes)
                      : "the streams are unchanged (cameras that have ended start again)",
                  infer_change_needs_new_model(change->infer.keys) || !change->infer.replaced.empty());
    if (!change->changed()) {
      VAPIPE_LOG_INFO("{}{}: the streams are unchanged (cameras that have ended start again)", what,
                      options.config_path);
      return;
    }
    StreamReload streams_alone = *change;
    streams_alone.publish = PublishReload{};  // (said above)
    streams_alone.ingest = IngestReload{};
    streams_alone.infer = InferReload{};
    streams_alone.log_level.reset();
    VAPIPE_LOG_INFO("{}{}: {}; {} streams now", what, options.config_path, describe_reload(streams_alone, lanes),
                    table.live_streams());
    auto named = [](const std::vector<std::string>& ids, const std::string& id) {
      return std::find(ids.begin(), ids.end(), id) != ids.end();
    };
    for (const SharedSource& shared : shared_network_sources(live_sources(table))) {
      const auto& ids = shared.stream_ids;
      if (std::any_of(ids.begin(), ids.end(), [&](const std::string& id) {
            return named(change->added, id) || named(change->retuned, id);
          })) {
        VAPIPE_LOG_WARN("{}{}", what, describe(shared));
      }
    }
  };

  // For publish's metrics and `vapipe status` (pipeline/folder_watch.h): what the looks found.
  auto share_watch_status = [&] {
    if (Status st = write_folder_watch_status(watcher->status(), folder_watch_status_path(layout.run_dir)); !st.ok()) {
      VAPIPE_LOG_DEBUG("watched folders: {}", st.message());
    }
  };
  if (watcher) share_watch_status();
  // A look: started when due, its files taken when its reads end (the loop goes on meanwhile).
  auto watch_folders = [&] {
    const auto now = std::chrono::steady_clock::now();
    if (!looker->busy()) {
      if (now < watcher->next_look()) return;
      if (looker->start(watcher->start_look(now))) share_watch_status();  // looking_since, for a hung share
      return;
    }
    watcher->check_reads(now);
    std::optional<std::vector<FolderReading>> readings = looker->finished();
    if (!readings) return;
    std::vector<StreamConfig> files = watcher->take(std::move(*readings), table, earlier_ids);
    if (files.empty()) return share_watch_status();
    StreamTable next = table;
    const StreamReload change = add_watched_files(next, files, lanes);
    if (Status st = write_stream_table(next, stream_table_path(layout)); !st.ok()) {
      VAPIPE_LOG_ERROR("watched folders: {}: the {} new file(s) are added at the next look", st.message(), files.size());
      return share_watch_status();
    }
    watcher->took(files);
    share_watch_status();
    watched_files.insert(watched_files.end(), files.begin(), files.end());
    table = std::move(next);
    added_at.resize(table.entries.size(), table.version);
    std::string added;
    for (size_t i = 0; i < change.added.size() && i < 10; ++i) {
      added += (added.empty() ? "'" : ", '") + change.added[i] + "'" +
               (lanes > 1 ? " (lane " + std::to_string(change.added_lanes[i]) + ")" : std::string());
    }
    if (change.added.size() > 10) added += " and " + std::to_string(change.added.size() - 10) + " more";
    VAPIPE_LOG_INFO("watched folders: {} new file(s), classified in turn: {}; {} streams in the job now",
                    change.added.size(), added, table.entries.size());
  };

  const auto drain = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(config.job.drain_timeout_s));
  std::optional<std::chrono::steady_clock::time_point> stopping_since;  // shutdown requested
  std::optional<std::chrono::steady_clock::time_point> terminated_at;   // SIGTERM sent to all
  std::string failure;                                                  // first stage that failed
  bool failed_after_opening = false;  // the failure came once every stage had opened
  bool abort_sent = false;

  // A live job goes on when a stage crashes: that stage's lane (its ingest, preprocess, batch and
  // infer) starts again, or publish alone, after the same back-off as a job restart. The other lanes
  // keep their streams; the restarted ingest reconnects its streams and numbers on past what the
  // crashed one sent (pipeline/seq_reservation.h). An archive job restarts whole instead, from its
  // JSON-lines file: a frame lost in flight would be a frame without a result.
  constexpr uint32_t kPublishGroup = UINT32_MAX;  // publish's "lane" in `pending`
  struct PendingRestart {
    std::string reason;
    std::chrono::steady_clock::time_point due;
  };
  std::map<uint32_t, PendingRestart> pending;
  // Crash loops are counted per lane (and publish): a lane whose GPU or camera keeps crashing it stops
  // the job after job.max_restarts in a row; crashes spread over independent lanes do not add up.
  struct CrashCount {
    uint32_t in_a_row = 0;
    std::chrono::steady_clock::time_point last{};
  };
  std::map<uint32_t, CrashCount> crashes;
  std::string refusal;  // why a failed live job was not kept going
  std::vector<std::string> crash_suspects;  // an archive job's ingest died of a signal: what it was reading
  std::string crash_how;
  auto group_of = [&](const Child& c) { return c.kind == StageKind::kPublish ? kPublishGroup : c.lane; };
  auto describe_group = [&](uint32_t group) {
    if (group == kPublishGroup) return std::string("publish");
    std::string ids;
    for (const StreamTableEntry& e : table.entries) {
      if (e.lane == group && !e.removed) ids += (ids.empty() ? "'" : ", '") + e.id + "'";
    }
    return (lanes > 1 ? "lane " + std::to_string(group) : std::string("the lane")) +
           " (ingest, preprocess, batch and infer; streams " + (ids.empty() ? "none" : ids) + ")";
  };
  // The stats files of the group's stages (pipeline/stage_stats.h), of processes that are gone.
  auto forget_figures = [&](uint32_t group) {
    std::error_code gone;
    if (group == kPublishGroup) {
      std::filesystem::remove(stage_stats_path(layout, StageKind::kPublish), gone);
      return;
    }
    const JobLayout lane_layout = make_job_layout(config, job_id, group);
    for (StageKind k : {StageKind::kIngest, StageKind::kPreprocess, StageKind::kBatch, StageKind::kInfer}) {
      std::filesystem::remove(stage_stats_path(lane_layout, k), gone);
    }
  };
  // Starts the group's processes again, downstream first, as at the job's start.
  // `stopping`: the job is being stopped; the group starts only to end its streams (each gets its end
  // event, publish its summary) instead of leaving them to the drain timeout.
  auto restart_group = [&](uint32_t group, const std::string& reason, bool stopping) -> bool {
    children.erase(std::remove_if(children.begin(), children.end(),
                                  [&](const Child& c) { return c.exited && group_of(c) == group; }),
                   children.end());
    std::vector<Child> again;
    forget_figures(group);  // (the dead processes')
    if (group == kPublishGroup) {
      std::ofstream(opening_mark(layout, StageKind::kPublish)).flush();
      again.push_back(Child{StageKind::kPublish});
    } else {
      const JobLayout lane_layout = make_job_layout(config, job_id, group);
      // What the crashed processes left: their pools and sockets (the new owners would replace them
      // too), and the start-up gate closed again, so the new ingest waits for its lane to open.
      shm_unlink(lane_layout.frame_pool.c_str());
      shm_unlink(lane_layout.tensor_pool.c_str());
      // (forget_figures above: its ingest's per-stream drop counts start over with the new process, which
      // publish adds to what it had counted, and the other stages' figures stand still until the new
      // processes write theirs, a model loading: /healthz would call the lane stalled.)
      for (StageKind k : {StageKind::kPreprocess, StageKind::kBatch, StageKind::kInfer}) {
        const std::string marker = input_closed_marker(lane_layout.input_endpoint.at(k));
        if (!marker.empty()) std::filesystem::remove(marker, ec);
        std::ofstream(opening_mark(lane_layout, k)).flush();
      }
      for (StageKind k : {StageKind::kInfer, StageKind::kBatch, StageKind::kPreprocess, StageKind::kIngest}) {
        again.push_back(Child{k, group});
      }
      lane_started_at[group] = table.version;
    }
    for (Child c : again) {
      c.started_stopping = stopping;
      c.pid = spawn_stage(c.kind, c.lane, options, job_id, start_ns, visible_gpus, placement->gpus_used(), reason,
                          stopping);
      if (c.pid < 0) {
        failure = "cannot fork stage " + child_name(c, lanes) + ": " + std::strerror(errno);
        return false;
      }
      VAPIPE_LOG_INFO("started stage {} again (pid {})", child_name(c, lanes), c.pid);
      children.push_back(c);
    }
    return true;
  };


  const bool live = config.job.mode == JobMode::kLive;
  // A live lane's ingest finishes when each of its streams has ended (removed by a reload, or given
  // up); its infer may linger, waiting for publish. A stream a reload adds to such a lane afterwards
  // (the lane with the fewest streams, so likely that one) would never start, and the job's stop would
  // wait for its end: the lane starts again for it. At most once per reload: a stream that the lane
  // had already started and that ended again is not retried again and again.
  auto reopen_finished_lanes = [&] {
    if (!live || stopping_since || flags.stop.load() || flags.abort.load() || !failure.empty()) return;
    for (const Child& c : children) {
      if (c.kind != StageKind::kIngest || !c.exited || c.killed_for_restart || pending.count(c.lane)) continue;
      bool added_since = false;
      for (const StreamTableEntry& e : table.entries) {
        added_since = added_since || (e.lane == c.lane && !e.removed && added_at[e.index] > lane_started_at[c.lane]);
      }
      if (!added_since) continue;
      for (Child& other : children) {
        if (!other.exited && group_of(other) == c.lane) {
          kill(other.pid, SIGKILL);  // its streams have all ended: nothing in flight
          other.killed_for_restart = true;
        }
      }
      VAPIPE_LOG_INFO("{} had finished (all of its streams had ended): it starts again for the streams a reload "
                      "added to it, listed again or tries again", describe_group(c.lane));
      pending[c.lane] = PendingRestart{"a reload came after all of its streams had ended",
                                       std::chrono::steady_clock::now()};
    }
  };
  // A live lane whose preprocess finished (every stream of the lane had ended) while its ingest goes
  // on: a reload started a stream again just as the lane's last one ended, and its frames have nowhere
  // to go. Ingest, which exits at once behind its preprocess otherwise, would wait for ever: the lane
  // starts again, its streams from the table. Publish likewise, when every stream of the job had ended
  // (its results would have nowhere to go): it starts again, as after a crash.
  auto restart_stranded_lanes = [&] {
    if (!live || stopping_since || flags.stop.load() || flags.abort.load() || !failure.empty()) return;
    const auto now = std::chrono::steady_clock::now();
    for (const Child& c : children) {
      const bool watched = c.kind == StageKind::kPreprocess || c.kind == StageKind::kPublish;
      const uint32_t group = group_of(c);
      if (!watched || !c.finished_at || now - *c.finished_at < kStrandedLaneGrace || pending.count(group)) continue;
      // Publish serves every lane: it is stranded by any ingest that goes on.
      const bool ingest_runs = std::any_of(children.begin(), children.end(), [&](const Child& i) {
        return i.kind == StageKind::kIngest && (group == kPublishGroup || i.lane == c.lane) && !i.exited;
      });
      if (!ingest_runs) continue;
      for (Child& other : children) {
        if (!other.exited && group_of(other) == group) {
          kill(other.pid, SIGKILL);
          other.killed_for_restart = true;
        }
      }
      VAPIPE_LOG_WARN("{}: {} finished (every stream had ended) while {} went on with a stream started again: "
                      "it starts again", describe_group(group), group == kPublishGroup ? "it" : "its stages",
                      group == kPublishGroup ? "an ingest" : "its ingest");
      pending[group] = PendingRestart{group == kPublishGroup ? "it had finished while a stream started again"
                                                             : "its stages had finished while a stream started again",
                                      now};
    }
  };
  auto next_lock_look = std::chrono::steady_clock::now();
  std::string lock_said;
  while (running() > 0 || !pending.empty()) {
    // The results file deleted (publish writes it again) or moved and begun anew: locked again.
    if (results_lock && std::chrono::steady_clock::now() >= next_lock_look) {
      next_lock_look = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      const Status followed = results_lock->follow();
      if (!followed.ok() && followed.message() != lock_said) VAPIPE_LOG_WARN("{}", followed.message());
      lock_said = followed.ok() ? std::string() : followed.message();
    }
    reopen_finished_lanes();
    restart_stranded_lanes();
    if (flags.reload.exchange(false)) {
      if (!stopping_since && failure.empty()) reload();
    }
    if (reload_read.busy()) {
      const auto now = std::chrono::steady_clock::now();
      if (std::optional<ConfigRead> read = reload_read.finished()) {
        remove_reload_mark(layout);
        if (said_reload_hung) {
          VAPIPE_LOG_INFO("{}reading {} ended, after {:.1f} s", reload_what, options.config_path,
                          std::chrono::duration<double>(now - reload_started).count());
        }
        if (stopping_since || !failure.empty() || flags.stop.load() || flags.abort.load()) {
          VAPIPE_LOG_INFO("{}the job is stopping: the streams are not changed", reload_what);
          record_reload(false, "the job is stopping: the streams are not changed");
        } else {
          apply_reload(std::move(*read));
          if (reload_again) {
            reload_again = false;
            start_reload_read();
          }
        }
      } else if (!said_reload_hung && reload_read.running_s(now) >= kHungReloadS) {
        said_reload_hung = true;
        VAPIPE_LOG_WARN("{}reading {} has not ended after {:.0f} s (a network share that does not answer?); the "
                        "job goes on with its streams meanwhile (restarts and stops too), and they change when "
                        "the read ends", reload_what, options.config_path, kHungReloadS);
      }
    }
    if (watcher && !stopping_since && failure.empty() && !flags.stop.load() && !flags.abort.load() &&
        pending.empty()) {
      watch_folders();
    }
    for (auto it = pending.begin(); it != pending.end();) {
      const uint32_t group = it->first;
      bool gone = true;  // every process of the group has exited
      for (const Child& c : children) gone = gone && (c.exited || group_of(c) != group);
      const bool stopping = flags.stop.load();
      if (!gone || (!stopping && std::chrono::steady_clock::now() < it->second.due)) {
        ++it;
        continue;
      }
      if (flags.abort.load() || !failure.empty()) {
        VAPIPE_LOG_WARN("{} not restarted: the job is ending", describe_group(group));
      } else if (stopping) {
        VAPIPE_LOG_WARN("the job is stopping: {} starts again only to end its streams", describe_group(group));
        if (!restart_group(group, it->second.reason, true)) VAPIPE_LOG_ERROR("{}", failure);
      } else if (!restart_group(group, it->second.reason, false)) {
        VAPIPE_LOG_ERROR("{}; stopping the job", failure);
        signal_all(SIGINT);
        signal_all(SIGTERM);
        terminated_at = std::chrono::steady_clock::now() - drain;
      }
      it = pending.erase(it);
    }
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (Child& c : children) {
        if (c.pid != pid) continue;
        c.exited = true;
        c.status = status;
        const bool clean = WIFEXITED(status) &&
                           (WEXITSTATUS(status) == 0 ||
                            (c.kind == StageKind::kPublish && (WEXITSTATUS(status) == kExitStreamsFailed ||
                                                               WEXITSTATUS(status) == kExitStreamsUnfinished ||
                                                               WEXITSTATUS(status) == kExitSinksUndelivered)));
        if (clean) {
          VAPIPE_LOG_INFO("stage {} (pid {}) finished", child_name(c, lanes), pid);
          c.finished_at = std::chrono::steady_clock::now();
        } else if (c.killed_for_restart) {
          VAPIPE_LOG_INFO("stage {} (pid {}) stopped for its lane's restart", child_name(c, lanes), pid);
        } else if (abort_sent && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
          VAPIPE_LOG_INFO("stage {} (pid {}) killed (it had not drained)", child_name(c, lanes), pid);
        } else if (failure.empty() && !flags.abort.load()) {
          const std::string what = "stage " + child_name(c, lanes) + " (pid " + std::to_string(pid) + ") failed: " +
                                   describe_exit(status);
          const bool stopping = flags.stop.load() || flags.abort.load();
          // A results file that cannot be written (a full disk) fails every restart the same way.
          const bool summary_unwritable = c.kind == StageKind::kPublish && WIFEXITED(status) &&
                                          WEXITSTATUS(status) == kExitSummaryUnwritable;
          const bool unwritable = summary_unwritable || (c.kind == StageKind::kPublish && WIFEXITED(status) &&
                                                         WEXITSTATUS(status) == kExitResultsUnwritable);
          const char* unwritable_refusal = !summary_unwritable                 ? kUnwritableRefusal
                                           : config.publish.jsonl_path.empty() ? kSummaryUnwritableRefusalNoFile
                                                                               : kSummaryUnwritableRefusal;
          const auto now = std::chrono::steady_clock::now();
          // As run_supervisor counts: a long run without a crash starts the count over.
          const uint32_t count = now - began > kRestartCountReset ? 0 : restarts;
          // SIGKILL is the OOM killer's or a person's, not a fault of the stage's start: the job is restarted
          // as after any crash, even while another stage still loads (infer's model warm-up, long on a GPU:
          // the whole job failed, exit 2, found 2026-12-07). (The supervisor's own kills are said above.)
          const bool killed_from_outside = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
          if (live) {
            const uint32_t group = group_of(c);
            CrashCount& crash = crashes[group];
            const uint32_t in_a_row = now - crash.last > kRestartCountReset ? 0 : crash.in_a_row;
            const bool opening = publish_opening(config, job_id) ||
                                 (group != kPublishGroup && lane_opening(config, job_id, group));
            refusal = unwritable ? unwritable_refusal
                                 : restart_refusal(config, !opening || killed_from_outside, in_a_row, stopping);
            if (refusal.empty()) {
              crash.in_a_row = in_a_row + 1;
              crash.last = now;
              const double delay = std::min(30.0, static_cast<double>(1u << std::min(in_a_row, 5u)));
              for (Child& other : children) {
                if (!other.exited && group_of(other) == group) {
                  kill(other.pid, SIGKILL);  // nothing to drain: the lane's in-flight frames are lost
                  other.killed_for_restart = true;
                }
              }
              // Their figures stand still until the restart (up to 30 s away): /healthz would take the
              // lane for a stalled one. (Its restarts are said as such.)
              forget_figures(group);
              pending[group] = PendingRestart{
                  what, now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                  std::chrono::duration<double>(delay))};
              VAPIPE_LOG_WARN("{}; restarting {} in {:.0f} s (restart {} of at most {} in a row); the rest of the "
                              "job goes on", what, describe_group(group), delay, crash.in_a_row,
                              config.job.max_restarts);
              continue;
            }
          }
          failure = what;
          failed_after_opening = killed_from_outside || !any_opening_mark(config, job_id, *placement);
          // A file that crashes GStreamer's decoder: which ones ingest was reading (crashed_streams.h).
          // (A crash of its own, not a kill: SIGKILL is the OOM killer's or a person's, whatever it read.)
          const bool crashed = WIFSIGNALED(status) && (WTERMSIG(status) == SIGSEGV || WTERMSIG(status) == SIGBUS ||
                                                       WTERMSIG(status) == SIGILL || WTERMSIG(status) == SIGFPE ||
                                                       WTERMSIG(status) == SIGABRT);
          if (!live && c.kind == StageKind::kIngest && crashed && !stopping) {
            crash_suspects = streams_being_read(make_job_layout(config, job_id, c.lane));
            crash_how = describe_exit(status);
            if (!crash_suspects.empty()) failed_after_opening = true;  // a restart can leave out what crashed it
            std::string reading;
            for (const std::string& id : crash_suspects) {
              std::string file;
              for (const StreamConfig& s : config.streams) {
                if (s.id == id && s.parsed.kind == UriKind::kFile) file = " (" + escape_invalid_utf8(file_uri_path(s.uri)) + ")";
              }
              reading += (reading.empty() ? "" : ", ") + ("'" + id + "'") + file;
            }
            if (!reading.empty()) failure += " while reading " + reading;
          }
          if (unwritable) refusal = unwritable_refusal;
          const bool will_restart = !live && !unwritable &&
                                (restart_refusal(config, failed_after_opening, count, stopping).empty() ||
                                 (!crash_suspects.empty() && !stopping && !config.publish.jsonl_path.empty()));
          if (will_restart) std::ofstream(restart_mark(layout)).flush();
          // (An archive job that restarts says so next: "stopping the job" alone read as its end.)
          VAPIPE_LOG_ERROR("{}; stopping {}{}", failure, will_restart ? "its stages, to restart the job" : "the job",
                           live || unwritable ? refusal : std::string());
          if (!terminated_at) {
            // The pipeline is broken, so there is nothing to drain: a second signal means "now".
            signal_all(SIGINT);
            signal_all(SIGTERM);
            terminated_at = std::chrono::steady_clock::now() - drain;
          }
        }
      }
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    if (flags.abort.load() && !abort_sent) {
      VAPIPE_LOG_WARN("second signal: killing every stage");
      signal_all(SIGKILL);
      abort_sent = true;
    } else if (flags.stop.load() && !stopping_since) {
      // Clean stop: ingest ends its streams, and the end travels down the pipeline behind the last
      // frames, so every stage drains and exits by itself.
      VAPIPE_LOG_INFO("stopping: ingest ends the streams, the other stages drain (up to {} s)",
                      config.job.drain_timeout_s);
      stopping_since = now;
      std::ofstream(stopping_mark(layout)).flush();  // what the stages of a job that watches folders end on
      for (Child& c : children) {
        // One started during the stop stops by itself (a SIGTERM before it set up its handlers would kill it).
        if (c.kind == StageKind::kIngest && !c.exited && !c.started_stopping) kill(c.pid, SIGTERM);
      }
    } else if (stopping_since && !terminated_at && now - *stopping_since > drain) {
      VAPIPE_LOG_WARN("drain timeout: terminating the remaining stages");
      signal_all(SIGTERM);
      terminated_at = now;
    } else if (terminated_at && !abort_sent && now - *terminated_at > drain + std::chrono::seconds(2)) {
      // Named: the one that did not drain is among them (the others may only wait behind it). Their
      // deaths by this SIGKILL are not failures of their own (it blamed whichever was reaped first).
      std::string still;
      for (const Child& c : children) {
        if (!c.exited) still += (still.empty() ? "" : ", ") + child_name(c, lanes) + " (pid " + std::to_string(c.pid) + ")";
      }
      VAPIPE_LOG_WARN("stages still running after SIGTERM: killing them: {}", still);
      signal_all(SIGKILL);
      abort_sent = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  cleanup_job_resources(config, job_id, lanes);

  if (abort_sent && failure.empty()) {
    VAPIPE_LOG_WARN("job '{}' interrupted: stages were killed before they drained", config.job.name);
    return RunOutcome{kExitInterrupted};
  }
  if (!failure.empty()) {
    // A live job that could go on did (pending): one that stops here is not restarted whole either.
    return RunOutcome{kExitStageFailed, failure,
                      !live && failed_after_opening && !flags.stop.load() && !flags.abort.load() && refusal.empty(),
                      live ? (refusal.empty() ? std::string(" (not restarted)") : refusal) : refusal,
                      std::move(watched_files), std::move(crash_suspects), std::move(crash_how)};
  }
  const Child& publish = child_of(StageKind::kPublish);
  if (WIFEXITED(publish.status) && WEXITSTATUS(publish.status) == kExitStreamsUnfinished) {
    VAPIPE_LOG_WARN("job '{}' stopped before its end: its results are whole up to there (see the summary)",
                    config.job.name);
    return RunOutcome{kExitStreamsUnfinished};
  }
  if (WIFEXITED(publish.status) && WEXITSTATUS(publish.status) == kExitSinksUndelivered) {
    VAPIPE_LOG_ERROR("job '{}' finished, but messages did not reach its webhooks, MQTT, Redis or Kafka (publish's "
                     "log says which and how many): its results file has them all", config.job.name);
    return RunOutcome{kExitSinksUndelivered};
  }
  if (WIFEXITED(publish.status) && WEXITSTATUS(publish.status) == kExitStreamsFailed) {
    VAPIPE_LOG_ERROR("job '{}' finished, but some streams failed (see the events and the summary)", config.job.name);
    return RunOutcome{kExitStreamsFailed};
  }
  VAPIPE_LOG_INFO("job '{}' finished", config.job.name);
  return RunOutcome{kExitOk};
}

}  // namespace

std::string restart_refusal(const Config& config, bool failed_after_opening, uint32_t restarts_in_a_row,
                            bool stopping) {
  if (stopping) return " (the job was being stopped)";
  if (!failed_after_opening) return " (during start-up: a restart would fail the same way)";
  if (config.job.max_restarts == 0) return " (job.max_restarts is 0)";
  if (restarts_in_a_row >= config.job.max_restarts) {
    return " (not restarted: " + std::to_string(restarts_in_a_row) + " restarts in a row, job.max_restarts)";
  }
  if (config.job.mode == JobMode::kArchive && config.publish.jsonl_path.empty()) {
    return " (not restarted: an archive job resumes from publish.jsonl_path, which is not set; started afresh it "
           "would classify frames twice)";
  }
  return "";
}

int run_supervisor(const Config& config, const SupervisorOptions& options, ShutdownFlags& flags) {
  const std::string job_id =
      options.job_id.empty() ? std::to_string(getpid()) + "-" + std::to_string(wall_clock_ns() % 1000000000) : options.job_id;
  const int64_t start_ns = wall_clock_ns();  // the job's, over every restart
  // (And on the monotonic clock, for its durations: inherited by every stage.)
  setenv("VAPIPE_JOB_START_MONOTONIC_NS", std::to_string(monotonic_clock_ns()).c_str(), 1);
  oom_kills_seen = oom_kills_so_far();
  const int visible_gpus = options.visible_gpus >= 0 ? options.visible_gpus : visible_gpu_count();
  auto placement = plan_placement(config, visible_gpus);
  if (!placement.ok()) {
    VAPIPE_LOG_ERROR("{}", placement.status().message());
    return kExitUsage;
  }
  // What jobs that died without cleaning up left on this host (pipeline/stale_jobs.h); then this job's
  // own lock, which its stages inherit.
  const SweptJobs swept = sweep_dead_jobs();
  if (!swept.job_ids.empty()) {
    std::string ids;
    for (const std::string& id : swept.job_ids) ids += (ids.empty() ? "'" : ", '") + id + "'";
    VAPIPE_LOG_INFO("removed what {} job(s) that died without cleaning up left behind ({}): {:.0f} MB of shared "
                    "memory and their run folders", swept.job_ids.size(), ids,
                    static_cast<double>(swept.shm_bytes) / 1e6);
  }
  auto job_lock = JobLock::acquire(job_id);
  if (!job_lock.ok()) {
    VAPIPE_LOG_ERROR("job '{}' not started: {}", config.job.name, job_lock.status().message());
    return kExitUsage;
  }
  // Its run folder, trusted by its stages and by `vapipe reload`: this user's, which no other may write.
  if (Status own = make_trusted_dir(make_job_layout(config, job_id).run_dir, "the job's run folder"); !own.ok()) {
    VAPIPE_LOG_ERROR("job '{}' not started: {}", config.job.name, own.message());
    return kExitUsage;
  }
  // The results file has one writer: this job, over all its restarts (pipeline/file_lock.h).
  FileLock jsonl_lock;
  if (!config.publish.jsonl_path.empty()) {
    std::error_code ec;  // publish makes the folder too; the lock needs it first
    // A path named by the time (a file a day) is locked once, on a file beside its first conversion.
    const std::string lock_path = results_lock_path(config.publish.jsonl_path);
    const std::filesystem::path folder = std::filesystem::path(lock_path).parent_path();
    if (!folder.empty()) std::filesystem::create_directories(folder, ec);
    auto lock = FileLock::acquire(lock_path, "publish.jsonl_path", config.publish.jsonl_path);
    if (!lock.ok()) {
      VAPIPE_LOG_ERROR("job '{}' not started: {}", config.job.name, lock.status().message());
      return kExitUsage;
    }
    jsonl_lock = std::move(lock).value();
    if (!jsonl_lock.held()) VAPIPE_LOG_WARN("{}", jsonl_lock.why_not_held());
    jsonl_lock.share_with_children();  // (held while a stage of the job lives: publish drains after a kill -9)
  }
  // The summary is written last: a path it cannot be written to was found only at the job's end, after
  // hours of work, and the job still exited 0 (found 2026-12-07). Tried now, as publish will write it.
  if (!config.job.summary_path.empty()) {
    std::error_code ec;
    const std::filesystem::path folder = std::filesystem::path(config.job.summary_path).parent_path();
    if (!folder.empty()) std::filesystem::create_directories(folder, ec);
    const std::string probe = config.job.summary_path + ".tmp";  // what publish writes, then renames
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) {
      VAPIPE_LOG_ERROR("job '{}' not started: job.summary_path {}: cannot write in its folder ({})", config.job.name,
                       config.job.summary_path, std::strerror(errno));
      return kExitUsage;
    }
    if (fd >= 0) {
      ::close(fd);
      ::unlink(probe.c_str());
    }
  }
  bool resume = options.resume;
  uint32_t restarts = 0;  // in a row: a run that lasts kRestartCountReset starts the count over
  CrashQuarantine quarantine;
  uint32_t job_restarts = 0;  // every restart of this `vapipe run`, in a row or not (kJobRestartsEnv)
  // Only an archive job restarts whole (a live one restarts the crashed lane within the run, and only
  // a live job's streams change while it runs), so the config it started with still holds, but for
  // the files its watched folders got since.
  Config job = config;
  while (true) {
    const auto began = std::chrono::steady_clock::now();
    setenv(kJobRestartsEnv, std::to_string(job_restarts).c_str(), 1);  // (the stages it starts inherit it)
    const RunOutcome run = run_job_once(job, options, flags, job_id, start_ns, visible_gpus, &*placement, resume,
                                        restarts, quarantine, &jsonl_lock);
    if (run.failure.empty()) return run.code;
    if (std::chrono::steady_clock::now() - began > kRestartCountReset) restarts = 0;
    // Ingest crashed reading files: the one it names is left out, several are read one at a time until
    // the next crash names one (pipeline/crashed_streams.h). Either way the restart gets further, so it
    // is not counted as one in a row, nor refused as a crash at start-up.
    const bool stopping = flags.stop.load() || flags.abort.load();
    bool narrowed = false;
    if (!run.crash_suspects.empty() && run.refusal.empty() && !stopping && !config.publish.jsonl_path.empty()) {
      if (run.crash_suspects.size() == 1 && !quarantine.crashed.count(run.crash_suspects.front())) {
        quarantine.crashed[run.crash_suspects.front()] = run.crash_how;
        quarantine.one_at_a_time = false;
        narrowed = true;
        VAPIPE_LOG_ERROR("stream '{}' crashed ingest ({}): it is left out, with an error naming the crash, and the "
                         "job goes on without it", run.crash_suspects.front(), run.crash_how);
      } else if (run.crash_suspects.size() > 1 && !quarantine.one_at_a_time) {
        quarantine.one_at_a_time = true;
        narrowed = true;
        VAPIPE_LOG_WARN("ingest crashed reading {} files at once: the job goes on reading one at a time, so that a "
                        "crash names its file", run.crash_suspects.size());
      }
    }
    const std::string why = narrowed ? std::string()
                            : !run.refusal.empty() ? run.refusal
                                                   : restart_refusal(config, run.restartable, restarts, stopping);
    if (!why.empty()) {
      VAPIPE_LOG_ERROR("job '{}' failed: {}{}", config.job.name, run.failure, why);
      return run.code;
    }
    if (!narrowed) ++restarts;
    ++job_restarts;
    const double delay = narrowed ? 1.0 : std::min(30.0, static_cast<double>(1u << std::min(restarts - 1, 5u)));
    VAPIPE_LOG_WARN("{}; restarting the job in {:.0f} s ({}), going on from {}", run.failure, delay,
                    narrowed ? std::string("to leave out what crashed it: not counted as a restart in a row")
                             : "restart " + std::to_string(restarts) + " of at most " +
                                   std::to_string(config.job.max_restarts) + " in a row",
                    config.publish.jsonl_path);
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                             std::chrono::duration<double>(delay));
    while (std::chrono::steady_clock::now() < until && !flags.stop.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (flags.stop.load()) {
      // As a stop during the run: its results are whole up to where it crashed, and --resume goes on.
      VAPIPE_LOG_WARN("job '{}' stopped before its restart: its results are whole up to there; `vapipe run --resume` "
                      "goes on", config.job.name);
      return kExitStreamsUnfinished;
    }
    resume = true;  // an archive job goes on from its JSON-lines file: no frame twice
    if (add_watched_streams(job, run.watched_files) > 0) {
      // The files the watch added are the restart's own streams, not departed ones (files that came
      // since are found by the restart's own first look, on its own thread: a share that hangs does
      // not hold up the restart).
      auto again = plan_placement(job, visible_gpus);
      if (!again.ok()) {
        VAPIPE_LOG_ERROR("{}", again.status().message());
        return kExitUsage;
      }
      placement = std::move(again);
    }
  }
}

void die_by_stop_signal(const ShutdownFlags& flags) {
  const int signo = flags.signal.load();
  if (signo == 0) return;
  std::fflush(stdout);
  std::fflush(stderr);
  struct sigaction sa {};
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  sigaction(signo, &sa, nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signo);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
  raise(signo);
}

}  // namespace vapipe
