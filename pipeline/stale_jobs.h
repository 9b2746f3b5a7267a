// What a `vapipe run` leaves behind when it dies without cleaning up (SIGKILL, the OOM killer, a
// systemd stop that timed out): its shared memory pools (/dev/shm/vapipe-<job id>-frames-N and
// -tensors-N, up to hundreds of MB each, held in RAM until removed) and its run folder
// (/tmp/vapipe-<job id>/). A job holds a JobLock for as long as any of its processes lives: the
// supervisor takes it, and the stages it starts inherit it. The next `vapipe run` on the host removes
// what each job whose lock nobody holds left behind. Stages started by hand (`vapipe stage`) take no
// lock, and what they leave is never touched.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/status.h"

namespace vapipe {

class JobLock {
 public:
  JobLock() = default;
  // Creates and locks `<tmp_dir>/vapipe-<job_id>.lock`, inherited by the processes this one starts
  // (not close-on-exec). kUnavailable when another live job holds it: two jobs with one id would share
  // their pools and sockets.
  static Result<JobLock> acquire(const std::string& job_id, const std::string& tmp_dir = "/tmp");
  ~JobLock();  // removes the lock file, then lets the lock go
  JobLock(JobLock&& other) noexcept;
  JobLock& operator=(JobLock&& other) noexcept;
  JobLock(const JobLock&) = delete;
  JobLock& operator=(const JobLock&) = delete;
  bool held() const { return fd_ >= 0; }

 private:
  void release();
  int fd_ = -1;
  std::string path_;
};

struct SweptJobs {
  std::vector<std::string> job_ids;  // the dead jobs whose leftovers were removed
  uintmax_t shm_bytes = 0;           // the size of their shared memory pools
};

// Removes the pools and run folder of every job whose lock file is in `tmp_dir` and held by nobody.
SweptJobs sweep_dead_jobs(const std::string& tmp_dir = "/tmp", const std::string& shm_dir = "/dev/shm");

}  // namespace vapipe
