#include "pipeline/cgroup.h"

#include <cstdint>
#include <cstdlib>
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace vapipe {
namespace {

// The first word of a small file ("" when it cannot be read).
std::string first_word(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  in >> word;
  return word;
}

// A count, or nullopt for "max", a missing file or anything else.
bool read_count(const std::string& path, uint64_t* out) {
  const std::string word = first_word(path);
  if (word.empty() || word.find_first_not_of("0123456789") != std::string::npos) return false;
  *out = std::stoull(word);
  return true;
}

std::string text_of(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// `path` ("/a/b") under `base`, then each parent up to `base` itself.
std::vector<std::string> dirs_up(const std::string& base, std::string path) {
  std::vector<std::string> dirs;
  while (!path.empty() && path.back() == '/') path.pop_back();
  for (;;) {
    dirs.push_back(base + path);
    if (path.empty()) break;
    path.erase(path.rfind('/'));
  }
  return dirs;
}

}  // namespace

std::vector<std::string> cgroup_dirs(const std::string& controller, const std::string& proc_self_cgroup,
                                     const std::string& root) {
  std::error_code ec;
  std::istringstream lines(proc_self_cgroup);
  std::string line, unified_path;
  bool has_unified = false;
  while (std::getline(lines, line)) {
    // "ID:CONTROLLERS:PATH"; v2's line is "0::PATH".
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers.empty()) {
      has_unified = true;
      unified_path = path;
      continue;
    }
    std::istringstream names(controllers);
    std::string name;
    while (std::getline(names, name, ',')) {
      if (name != controller) continue;
      // v1: mounted as root/NAME, or root/LIST ("cpu,cpuacct") with NAME a link to it.
      for (const std::string& mount : {root + "/" + controller, root + "/" + controllers}) {
        if (std::filesystem::is_directory(mount, ec)) return dirs_up(mount, path);
      }
    }
  }
  // v2: the controller is enabled at the root of the one hierarchy.
  if (has_unified) {
    std::istringstream enabled(text_of(root + "/cgroup.controllers"));
    std::string name;
    while (enabled >> name) {
      if (name == controller) return dirs_up(root, unified_path);
    }
  }
  return {};
}

std::vector<std::string> own_cgroup_dirs(const std::string& controller) {
  return cgroup_dirs(controller, text_of("/proc/self/cgroup"), "/sys/fs/cgroup");
}

TaskLimit cgroup_task_limit(const std::vector<std::string>& pids_dirs) {
  TaskLimit tightest;
  for (const std::string& dir : pids_dirs) {
    TaskLimit here;
    if (!read_count(dir + "/pids.max", &here.max)) continue;  // "max": no limit at this level
    read_count(dir + "/pids.current", &here.in_use);
    here.where = "cgroup pids.max (" + dir + "/pids.max)";
    if (tightest.max == 0 || here.room() < tightest.room()) tightest = here;
  }
  return tightest;
}

TaskLimit task_limit() {
  TaskLimit tightest = cgroup_task_limit(own_cgroup_dirs("pids"));
  auto consider = [&](const TaskLimit& other) {
    if (other.max > 0 && (tightest.max == 0 || other.room() < tightest.room())) tightest = other;
  };
  // System-wide: /proc/loadavg's fourth field is "running/total" tasks.
  TaskLimit kernel;
  if (read_count("/proc/sys/kernel/threads-max", &kernel.max)) {
    std::istringstream loadavg(text_of("/proc/loadavg"));
    std::string field;
    for (int i = 0; i < 4 && loadavg >> field; ++i) {
    }
    if (const size_t slash = field.find('/'); slash != std::string::npos) {
      kernel.in_use = std::strtoull(field.c_str() + slash + 1, nullptr, 10);
    }
    kernel.where = "kernel.threads-max";
    consider(kernel);
  }
  // Per user, for all of the user's processes (their count is not known here: taken as none). Root
  // is not held to it.
  rlimit nproc{};
  if (geteuid() != 0 && getrlimit(RLIMIT_NPROC, &nproc) == 0 && nproc.rlim_cur != RLIM_INFINITY) {
    consider(TaskLimit{static_cast<uint64_t>(nproc.rlim_cur), 0, "RLIMIT_NPROC (ulimit -u, for all of this user's processes)"});
  }
  return tightest;
}

uint64_t threads_needed(size_t network_streams, size_t file_streams, size_t test_streams, uint32_t decoder_threads,
                        uint64_t base) {
  const uint64_t decoded = network_streams + file_streams;
  return base + kThreadsPerNetworkStream * network_streams + kThreadsPerFileStream * file_streams +
         kThreadsPerTestStream * test_streams + decoded * (decoder_threads > 1 ? decoder_threads - 1 : 0);
}

uint64_t own_thread_count() {
  std::error_code ec;
  uint64_t n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/task", ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    ++n;
  }
  return n;
}

std::string task_shortfall(uint64_t needed, const TaskLimit& limit, const std::string& what) {
  if (limit.max == 0 || needed <= limit.room()) return "";
  return what + " need about " + std::to_string(needed) + " threads, but only " + std::to_string(limit.room()) +
         " more may start here (" + limit.where + ": " + std::to_string(limit.max) + ", " +
         std::to_string(limit.in_use) + " in use): past that a stream's thread cannot start and the lane crashes; "
         "raise the limit (`docker run --pids-limit`, podPidsLimit in the kubelet's config, TasksMax= in a "
         "systemd unit), or spread the streams over more lanes or hosts";
}

uint64_t vmstat_oom_kills(const std::string& vmstat_text) {
  std::istringstream lines(vmstat_text);
  std::string name;
  uint64_t value = 0;
  while (lines >> name >> value) {
    if (name == "oom_kill") return value;
  }
  return 0;
}

uint64_t oom_kills_so_far() { return vmstat_oom_kills(text_of("/proc/vmstat")); }

uint64_t cgroup_memory_limit(const std::vector<std::string>& memory_dirs) {
  uint64_t tightest = 0;
  for (const std::string& dir : memory_dirs) {
    uint64_t limit = 0;
    if (!read_count(dir + "/memory.max", &limit) && !read_count(dir + "/memory.limit_in_bytes", &limit)) continue;
    if (limit >= (uint64_t{1} << 62)) continue;  // v1's "no limit" (a page-rounded 2^63)
    if (limit > 0 && (tightest == 0 || limit < tightest)) tightest = limit;
  }
  return tightest;
}

unsigned cgroup_cpu_quota(const std::vector<std::string>& cpu_dirs) {
  double tightest = 0;
  for (const std::string& dir : cpu_dirs) {
    double cpus = 0;
    std::ifstream v2(dir + "/cpu.max");  // "max 100000" or "QUOTA PERIOD", in microseconds
    std::string quota;
    double period = 0;
    if (v2 >> quota >> period) {
      if (quota != "max" && period > 0) cpus = std::strtod(quota.c_str(), nullptr) / period;
    } else {
      uint64_t v1_period = 0;
      const std::string v1_quota = first_word(dir + "/cpu.cfs_quota_us");  // -1: none
      if (!v1_quota.empty() && v1_quota[0] != '-' && read_count(dir + "/cpu.cfs_period_us", &v1_period) && v1_period > 0) {
        cpus = std::strtod(v1_quota.c_str(), nullptr) / static_cast<double>(v1_period);
      }
    }
    if (cpus > 0 && (tightest == 0 || cpus < tightest)) tightest = cpus;
  }
  return tightest > 0 ? std::max(1u, static_cast<unsigned>(std::ceil(tightest - 1e-9))) : 0;
}

}  // namespace vapipe
