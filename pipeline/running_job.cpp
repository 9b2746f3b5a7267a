#include "pipeline/running_job.h"

#include <cstdint>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "pipeline/atomic_file.h"
#include "pipeline/envelope.h"
#include "pipeline/file_identity.h"
#include "pipeline/job_layout.h"
#include "pipeline/stage_stats.h"
#include "pipeline/trusted_dir.h"

namespace vapipe {
namespace {

bool process_alive(int64_t pid) { return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

}  // namespace

std::string config_path_mark(const std::string& run_dir) { return run_dir + "/config-path"; }

std::string absolute_path_of(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
  return ec ? path : p.string();
}

namespace {

std::string lexical_path_of(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::absolute(path, ec);
  return ec ? path : p.lexically_normal().string();
}

}  // namespace

std::string config_path_mark_text(const std::string& config_path) {
  return absolute_path_of(config_path) + "\n" + lexical_path_of(config_path) + "\n";
}

std::vector<RunningJob> running_jobs_of(const std::string& config_path, const std::string& runs_root) {
  const std::string wanted = absolute_path_of(config_path), wanted_as_written = lexical_path_of(config_path);
  std::vector<RunningJob> jobs;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(runs_root, ec)) {
    if (entry.path().filename().string().rfind("vapipe-", 0) != 0 || !entry.is_directory(ec)) continue;
    const std::string run_dir = entry.path().string();
    auto started_from = read_file_bytes(config_path_mark(run_dir));
    if (!started_from.ok()) continue;  // a job started without a file (the demo), or not by `vapipe run`
    // Its resolved path, then (since 2026-12-05) the path as written.
    std::istringstream lines(*started_from);
    std::string resolved, as_written;
    std::getline(lines, resolved);
    std::getline(lines, as_written);
    if (resolved != wanted && (as_written.empty() || as_written != wanted_as_written)) continue;
    JobLayout layout;
    layout.run_dir = run_dir;
    const std::string table_path = stream_table_path(layout);
    if (::access(table_path.c_str(), F_OK) == 0 && ::access(table_path.c_str(), R_OK) != 0) {
      jobs.push_back(RunningJob{run_dir, 0,
                                table_path + " cannot be read by this user (it is the job's alone: it holds camera "
                                             "passwords): run this as the user the job runs as"});
      continue;
    }
    auto table = read_stream_table(table_path);
    if (!table.ok() || !table->has_value() || !process_alive((*table)->writer_pid)) continue;  // one that ended
    // A folder another user made (or may write) under /tmp, naming our config and any process: its
    // "job" is not ours, and gets no signal (a SIGHUP kills most processes; found 2026-12-07).
    const std::string proc = "/proc/" + std::to_string((*table)->writer_pid);
    std::string not_ours = not_this_users_own(run_dir);
    if (not_ours.empty()) not_ours = not_this_users_own(table_path);
    if (not_ours.empty()) {
      struct stat st {};
      if (::stat(proc.c_str(), &st) == 0 && st.st_uid != ::geteuid()) {
        not_ours = "its process " + std::to_string((*table)->writer_pid) + " is uid " + std::to_string(st.st_uid) + "'s";
      }
    }
    if (!not_ours.empty()) {
      jobs.push_back(RunningJob{run_dir, 0, "it is not this user's job (" + not_ours + "): it is left alone; run this as "
                                            "the user the job runs as"});
      continue;
    }
    jobs.push_back(RunningJob{run_dir, (*table)->writer_pid, ""});
  }
  std::sort(jobs.begin(), jobs.end(), [](const RunningJob& a, const RunningJob& b) { return a.run_dir < b.run_dir; });
  return jobs;
}

Result<ReloadPreview> preview_reload(const RunningJob& job, const std::string& reloaded_text, const Config& reloaded) {
  if (!job.unreadable.empty()) return FailedPrecondition(job.unreadable);
  auto running_text = read_file_bytes(config_as_started_path(job.run_dir));
  if (!running_text.ok()) return running_text.status().with_context("the job's copy of its config");
  JobLayout layout;
  layout.run_dir = job.run_dir;
  VAPIPE_ASSIGN_OR_RETURN(std::optional<StreamTable> table, read_stream_table(stream_table_path(layout)));
  if (!table) return Unavailable("the job's stream table in " + job.run_dir + " is gone (the job has ended?)");
  ReloadPreview preview;
  for (const StreamTableEntry& e : table->entries) preview.lanes = std::max<size_t>(preview.lanes, e.lane + 1);
  VAPIPE_ASSIGN_OR_RETURN(preview.change,
                          apply_stream_reload(*table, *running_text, reloaded_text, reloaded, preview.lanes));
  // A model or labels file replaced under the same path, as the supervisor would find it.
  if (auto identities = read_infer_file_identities(job.run_dir)) {
    note_replaced_infer_files(reloaded.infer, *identities, preview.change.infer);
  }
  preview.streams_then = table->live_streams();
  return preview;
}

std::string describe_reload(const StreamReload& change, size_t lanes) {
  std::string added, removed, retuned;
  for (size_t i = 0; i < change.added.size(); ++i) {
    added += (added.empty() ? "'" : ", '") + change.added[i] + "'" +
             (lanes > 1 && i < change.added_lanes.size() ? " (lane " + std::to_string(change.added_lanes[i]) + ")"
                                                         : std::string());
  }
  for (const std::string& id : change.removed) removed += (removed.empty() ? "'" : ", '") + id + "'";
  for (size_t i = 0; i < change.retuned.size(); ++i) {
    const bool connects = i < change.retuned_connects.size() && change.retuned_connects[i];
    retuned += (retuned.empty() ? "'" : ", '") + change.retuned[i] + "' (" + change.retuned_what[i] +
               (connects ? "; connects again" : "") + ")";
  }
  std::string returned;
  for (const std::string& id : change.returned) returned += (returned.empty() ? "'" : ", '") + id + "'";
  return "added " + (added.empty() ? std::string("none") : added) + "; removed " +
         (removed.empty() ? std::string("none") : removed) + (returned.empty() ? "" : "; back " + returned) +
         (retuned.empty() ? "" : "; changed " + retuned) +
         (settings_changed(change) ? "; " + describe_settings_reload(change) : std::string());
}

bool settings_changed(const StreamReload& change) {
  return change.publish.changed() || change.ingest.changed() || change.infer.changed() || change.log_level.has_value();
}

std::string describe_settings_reload(const StreamReload& change) {
  std::string out = describe_publish_reload(change.publish);
  if (change.ingest.changed()) out += (out.empty() ? "" : "; ") + describe_ingest_reload(change.ingest);
  if (change.infer.changed()) out += (out.empty() ? "" : "; ") + describe_infer_reload(change.infer);
  if (change.log_level) out += (out.empty() ? "" : "; ") + std::string("log.level ") + *change.log_level;
  return out;
}

std::string reload_outcome_path(const std::string& run_dir) { return run_dir + "/last-reload.json"; }

Status write_reload_outcome(const std::string& run_dir, const ReloadOutcome& o) {
  const nlohmann::json j = {{"number", o.number},           {"at_unix_s", o.at_unix_s},
                            {"taken", o.taken},             {"message", o.message},
                            {"taken_total", o.taken_total}, {"refused_total", o.refused_total},
                            {"last_taken_unix_s", o.last_taken_unix_s}, {"read_started_unix_s", o.read_started_unix_s},
                            {"model_loads", o.model_loads}};
  // Owner-only, as the rest of the run folder: a refusal may quote the config.
  return write_file_atomically(reload_outcome_path(run_dir), j.dump() + "\n", 0600);
}

std::optional<ReloadOutcome> read_reload_outcome(const std::string& run_dir) {
  auto text = read_file_bytes(reload_outcome_path(run_dir));
  if (!text.ok()) return std::nullopt;
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  ReloadOutcome o;
  o.number = j.value("number", uint64_t{0});
  o.at_unix_s = j.value("at_unix_s", 0.0);
  o.taken = j.value("taken", false);
  o.message = j.value("message", std::string());
  o.taken_total = j.value("taken_total", uint64_t{0});
  o.refused_total = j.value("refused_total", uint64_t{0});
  o.last_taken_unix_s = j.value("last_taken_unix_s", 0.0);
  o.read_started_unix_s = j.value("read_started_unix_s", 0.0);
  o.model_loads = j.value("model_loads", false);
  return o;
}

std::vector<LaneModel> read_lane_models(const std::string& run_dir) {
  std::vector<LaneModel> lanes;
  const auto now = std::filesystem::file_time_type::clock::now();
  for (const StageStatsSnapshot& s : read_stage_stats(run_dir)) {
    if (s.stage != "infer") continue;
    LaneModel m;
    m.lane = s.lane;
    for (const auto& [k, v] : s.facts) {
      if (k == "model") m.model = v;
      if (k == "model_file") m.model_file = v;
      if (k == "loading") m.loading = v;
      if (k == "last_reload_error") m.last_reload_error = v;
      if (k == "config_copy") m.config_copy = v;
    }
    for (const auto& [k, v] : s.counters) {
      if (k == "model_reloads") m.reloads = static_cast<uint64_t>(v);
      if (k == "model_reload_failures") m.failures = static_cast<uint64_t>(v);
    }
    JobLayout layout;
    layout.run_dir = run_dir;
    layout.lane = s.lane;
    std::error_code ec;
    const auto written = std::filesystem::last_write_time(stage_stats_path(layout, StageKind::kInfer), ec);
    m.running = !ec && now - written < std::chrono::seconds(3);
    lanes.push_back(std::move(m));
  }
  return lanes;
}

ModelReloadReport report_model_reload(const std::vector<LaneModel>& before, const std::vector<LaneModel>& now,
                                      const std::string& copy_identity) {
  ModelReloadReport report;
  report.done = true;
  for (const LaneModel& lane : now) {
    const auto was = std::find_if(before.begin(), before.end(), [&](const LaneModel& b) { return b.lane == lane.lane; });
    const uint64_t reloads = was == before.end() ? 0 : was->reloads;
    const uint64_t failures = was == before.end() ? 0 : was->failures;
    std::string line = "  lane " + std::to_string(lane.lane) + ": ";
    if (!lane.running) {
      line += "its infer is not running now (it loads the reloaded model as it starts)";
    } else if (lane.config_copy != copy_identity || !lane.loading.empty()) {
      report.done = false;
      line += lane.loading.empty() ? "has not yet looked at the reload"
                                   : "loading " + lane.loading + " beside '" + lane.model + "', which classifies meanwhile";
    } else if (lane.failures > failures) {
      report.failed = true;
      line += "the new model COULD NOT BE USED, and '" + lane.model + "' (" + lane.model_file +
              ") goes on classifying: " + lane.last_reload_error;
    } else if (lane.reloads > reloads) {
      line += "model '" + lane.model + "' (" + lane.model_file + ") classifies from now on";
    } else if (!lane.last_reload_error.empty()) {  // (the same file that could not be used, not tried again)
      report.failed = true;
      line += "the reloaded model still CANNOT BE USED, and '" + lane.model + "' (" + lane.model_file +
              ") goes on classifying: " + lane.last_reload_error;
    } else {
      line += "runs model '" + lane.model + "' (" + lane.model_file + ") already: nothing to load";
    }
    report.text += line + "\n";
  }
  return report;
}

Result<ReloadAnswer> reload_and_wait(const std::string& run_dir, int64_t supervisor_pid,
                                     std::chrono::milliseconds timeout, const std::atomic<bool>* stop) {
  // The job's answer is its next outcome: after this SIGHUP's re-read.
  const uint64_t before = read_reload_outcome(run_dir).value_or(ReloadOutcome{}).number;
  const std::vector<LaneModel> models_before = read_lane_models(run_dir);
  const double sent_unix_s = static_cast<double>(wall_clock_ns()) / 1e9;
  if (::kill(static_cast<pid_t>(supervisor_pid), SIGHUP) != 0) {
    return Unavailable("vapipe run (pid " + std::to_string(supervisor_pid) + ") cannot be sent SIGHUP: " +
                       std::strerror(errno));
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const double seconds = std::chrono::duration<double>(timeout).count();
  std::ostringstream after;
  after << seconds;
  auto stopped = [stop] { return stop && stop->load(); };
  // A job that ends meanwhile (stopped, or crashed) answers nothing more: said at once, not at the deadline.
  auto job_ended = [supervisor_pid] { return ::kill(static_cast<pid_t>(supervisor_pid), 0) != 0 && errno == ESRCH; };
  const std::string ended = "ended before it said what became of the reload";
  ReloadAnswer answer;
  std::optional<ReloadOutcome> outcome;
  bool gone = false;
  while (std::chrono::steady_clock::now() < deadline && !stopped() && !(gone = job_ended())) {
    outcome = read_reload_outcome(run_dir);
    // (a read that was under way when the signal came is of the file before: the job reads it again)
    if (outcome && outcome->number > before && outcome->read_started_unix_s + 0.01 >= sent_unix_s) break;
    outcome.reset();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!outcome && gone) {
    answer.verdict = ReloadAnswer::Verdict::kNoAnswer;
    answer.said = ended;
    return answer;
  }
  if (!outcome) {
    answer.verdict = ReloadAnswer::Verdict::kNoAnswer;
    answer.said = "has not said within " + after.str() +
                  " s what became of the reload (its config is still being read? `vapipe status` says so); it is "
                  "applied when the read ends";
    return answer;
  }
  if (!outcome->taken) {
    answer.verdict = ReloadAnswer::Verdict::kRefused;
    answer.said = "refused the reload, and changed nothing: " + outcome->message;
    return answer;
  }
  answer.verdict = ReloadAnswer::Verdict::kTaken;
  answer.said = "reloaded: " + outcome->message;
  if (!outcome->model_loads) {
    // Nothing new to load, but a lane still runs another model than the config's (the last reload's
    // could not be used): the config is not what classifies, and a deployment's retry must not read
    // success (it did: exit 0, 200).
    for (const LaneModel& lane : read_lane_models(run_dir)) {
      if (!lane.running || !lane.loading.empty() || lane.last_reload_error.empty()) continue;
      answer.verdict = ReloadAnswer::Verdict::kModelNotUsed;
      answer.lanes += "  lane " + std::to_string(lane.lane) + ": the config's model still CANNOT BE USED (it is not "
                      "loaded again until its file changes), and '" + lane.model + "' (" + lane.model_file +
                      ") goes on classifying: " + lane.last_reload_error + "\n";
    }
    return answer;
  }
  // Each lane's infer loads the model beside the one it runs: its word, within the same time.
  const std::string copy = file_identity(config_as_started_path(run_dir));
  ModelReloadReport report;
  for (;;) {
    report = report_model_reload(models_before, read_lane_models(run_dir), copy);
    if (report.done || std::chrono::steady_clock::now() >= deadline || stopped() || (gone = job_ended())) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  answer.lanes = report.text;
  if (!report.done) {
    answer.verdict = ReloadAnswer::Verdict::kModelNotYetTaken;
    answer.lanes += gone ? "the job ended before every lane took the model\n"
                         : "the model is not yet taken in every lane after " + after.str() +
                               " s (`vapipe status` says when it is)\n";
  } else if (report.failed) {
    answer.verdict = ReloadAnswer::Verdict::kModelNotUsed;
  }
  return answer;
}

}  // namespace vapipe
