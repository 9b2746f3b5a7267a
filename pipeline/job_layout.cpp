#include "pipeline/job_layout.h"

#include <cstdint>
#include <filesystem>
#include <fstream>

#include "pipeline/atomic_file.h"

namespace vapipe {

namespace {
const char* const kPoolKinds[] = {"-frames", "-tensors"};  // frame_pool, tensor_pool: "/vapipe-<id><kind>-<lane>"
}  // namespace

bool is_pool_of_job(const std::string& shm_name, const std::string& job_id) {
  for (const std::string kind : kPoolKinds) {
    const std::string head = "vapipe-" + job_id + kind + "-";
    if (shm_name.size() > head.size() && shm_name.rfind(head, 0) == 0 &&
        shm_name.find_first_not_of("0123456789", head.size()) == std::string::npos) {
      return true;
    }
  }
  return false;
}

PoolFilter pools_accepted_by_stages(const JobLayout& layout) {
  if (!layout.by_reference) return {};
  return [job_id = layout.job_id](const std::string& pool) {
    return !pool.empty() && pool[0] == '/' && is_pool_of_job(pool.substr(1), job_id);
  };
}

JobLayout make_job_layout(const Config& config, const std::string& job_id, uint32_t lane) {
  JobLayout l;
  l.job_id = job_id;
  l.lane = lane;
  l.run_dir = "/tmp/vapipe-" + job_id;
  l.by_reference = config.transport.mode == TransportMode::kShm;
  const std::string lane_suffix = "-" + std::to_string(lane);
  l.frame_pool = "/vapipe-" + job_id + kPoolKinds[0] + lane_suffix;
  l.tensor_pool = "/vapipe-" + job_id + kPoolKinds[1] + lane_suffix;
  // tcp mode: lane 0 uses 5551-5553 and the shared publish input 5554; lane N > 0 uses 5600 + 3N
  // onwards (clear of the default results endpoint, 5560).
  const int lane_port = lane == 0 ? 5551 : 5600 + 3 * static_cast<int>(lane);
  int offset = 0;
  for (StageKind k : {StageKind::kPreprocess, StageKind::kBatch, StageKind::kInfer, StageKind::kPublish}) {
    const bool shared = k == StageKind::kPublish;
    auto it = config.transport.endpoints.find(k);
    if (it != config.transport.endpoints.end()) {
      l.input_endpoint[k] = it->second;
    } else if (l.by_reference) {
      l.input_endpoint[k] =
          "ipc://" + l.run_dir + "/" + stage_kind_name(k) + (shared ? std::string() : lane_suffix) + ".sock";
    } else {
      l.input_endpoint[k] = "tcp://127.0.0.1:" + std::to_string(shared ? 5554 : lane_port + offset);
    }
    ++offset;
  }
  return l;
}

std::string opening_mark(const JobLayout& layout, StageKind kind) {
  const std::string lane = kind == StageKind::kPublish ? std::string() : "-" + std::to_string(layout.lane);
  return layout.run_dir + "/" + stage_kind_name(kind) + lane + ".opening";
}

std::string restart_mark(const JobLayout& layout) { return layout.run_dir + "/restarting"; }

std::string stopping_mark(const JobLayout& layout) { return layout.run_dir + "/stopping"; }

std::string config_as_started_path(const std::string& run_dir) { return run_dir + "/config.yaml"; }

std::string reload_mark(const JobLayout& layout) { return layout.run_dir + "/reloading"; }

void write_reload_mark(const JobLayout& layout, double since_unix_s) {
  // Best effort: it only shows the read on the job's health; the read goes on without it.
  (void)write_file_atomically(reload_mark(layout), std::to_string(since_unix_s), 0600);
}

void remove_reload_mark(const JobLayout& layout) {
  std::error_code ec;
  std::filesystem::remove(reload_mark(layout), ec);
}

double read_reload_mark(const JobLayout& layout) {
  std::ifstream in(reload_mark(layout));
  double since = 0;
  if (!(in >> since) || since < 0) return 0;
  return since;
}

std::string picture_requests_endpoint(const JobLayout& layout) { return "ipc://" + layout.run_dir + "/pictures.sock"; }

}  // namespace vapipe
