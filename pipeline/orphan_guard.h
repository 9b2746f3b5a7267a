// A stage process whose `vapipe run` is gone (kill -9, the OOM killer: the process has another parent
// now) and that was told to stop (the parent's death signal) has nobody to hold it to
// job.drain_timeout_s: one waiting for pool slots that a dead stage holds waited for ever, an orphan
// holding shared memory and the job's locks (found 2026-12-07). An OrphanGuard's thread exits the
// process once the drain had its time and some more, leaving the job's pools unnamed.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <sys/types.h>
#include <thread>

#include "pipeline/job_layout.h"
#include "pipeline/signals.h"

namespace vapipe {

class OrphanGuard {
 public:
  // Watches while it lives, where VAPIPE_SUPERVISOR_PID names the parent (a stage `vapipe run` started).
  // `who`: the stage, as its log lines name it ("ingest lane 0").
  OrphanGuard(const ShutdownFlags& flags, const JobLayout& layout, std::chrono::steady_clock::duration drain,
              std::string who, std::chrono::steady_clock::duration margin = kMargin);
  ~OrphanGuard();
  OrphanGuard(const OrphanGuard&) = delete;
  OrphanGuard& operator=(const OrphanGuard&) = delete;

  // How long after the drain an orphan that was told to stop is given before it exits (the default).
  static constexpr std::chrono::seconds kMargin{5};

 private:
  void watch(pid_t supervisor);
  const ShutdownFlags& flags_;
  const JobLayout layout_;
  const std::chrono::steady_clock::duration drain_, margin_;
  const std::string who_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace vapipe
