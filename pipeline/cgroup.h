// What the process's cgroups allow it: threads (the pids controller: a container's --pids-limit, a
// pod's podPidsLimit, a systemd unit's TasksMax=) and CPU time (a container's --cpus, CPUQuota=).
// cgroup v2 (one hierarchy) and v1 (one per controller) are both read, at every level from the
// process's own cgroup up to the root: the tightest level is the one that holds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vapipe {

// The folders of `controller` ("pids", "cpu") that hold this process, its own first, then each parent
// up to the hierarchy's root, under `root` (where cgroups are mounted); `proc_self_cgroup` is the text
// of /proc/self/cgroup. Empty when the controller is not mounted there.
std::vector<std::string> cgroup_dirs(const std::string& controller, const std::string& proc_self_cgroup,
                                     const std::string& root);
std::vector<std::string> own_cgroup_dirs(const std::string& controller);  // /proc/self/cgroup, /sys/fs/cgroup

// Threads (tasks) that may still start, at the tightest of: a pids cgroup (pids.max, pids.current),
// the kernel's threads-max, and RLIMIT_NPROC (not for root). At the limit a new thread fails, and
// GLib, which cannot do without it, aborts the process.
struct TaskLimit {
  uint64_t max = 0;     // 0: no limit found
  uint64_t in_use = 0;  // tasks counted against it now
  std::string where;    // "cgroup pids.max (/sys/fs/cgroup/pids/docker/x/pids.max)", "kernel.threads-max", ...
  uint64_t room() const { return max > in_use ? max - in_use : 0; }
};
// From the pids folders (own_cgroup_dirs("pids")) alone.
TaskLimit cgroup_task_limit(const std::vector<std::string>& pids_dirs);
TaskLimit task_limit();

// Threads an ingest lane starts, measured (docs/benchmarks.md, "CPU decoder threads") with some room:
// per network stream (a camera: its RTSP session, jitter buffer, UDP sources, decoder, appsink: 9.4
// measured), per file (demuxer, parser, decoder, appsink: 4.8), per synthetic test source (2.5),
// plus each decoder's threads past its first; and the job's other stages (LibTorch's and ZeroMQ's
// threads, the supervisor's) or an ingest process's own.
inline constexpr uint64_t kThreadsPerNetworkStream = 10;
inline constexpr uint64_t kThreadsPerFileStream = 6;
inline constexpr uint64_t kThreadsPerTestStream = 3;
inline constexpr uint64_t kThreadsPerJob = 200;
inline constexpr uint64_t kThreadsPerIngestProcess = 32;
uint64_t threads_needed(size_t network_streams, size_t file_streams, size_t test_streams, uint32_t decoder_threads,
                        uint64_t base);

// Threads this process has now (/proc/self/task).
uint64_t own_thread_count();

// "" when `limit` has room for `needed` more threads; otherwise what to do, for a log line.
std::string task_shortfall(uint64_t needed, const TaskLimit& limit, const std::string& what);

// The CPUs the cgroups' quota gives (rounded up, at least 1) at the tightest level of `cpu_dirs`
// (own_cgroup_dirs("cpu")): v2's cpu.max, v1's cpu.cfs_quota_us / cpu.cfs_period_us. 0: no quota.
unsigned cgroup_cpu_quota(const std::vector<std::string>& cpu_dirs);

// The kernel's out-of-memory kills so far: /proc/vmstat's oom_kill (Linux 4.13 on), which counts those
// of a cgroup's memory limit too; 0 when not known. A stage killed by SIGKILL while it went up was
// killed for memory, most likely (found 2026-12-07: "killed by signal 9", the words of a `kill -9`).
uint64_t oom_kills_so_far();
uint64_t vmstat_oom_kills(const std::string& vmstat_text);
// The tightest memory limit of `memory_dirs` (own_cgroup_dirs("memory")), in bytes: v2's memory.max,
// v1's memory.limit_in_bytes (a value near 2^63 is none); 0: none.
uint64_t cgroup_memory_limit(const std::vector<std::string>& memory_dirs);

}  // namespace vapipe
