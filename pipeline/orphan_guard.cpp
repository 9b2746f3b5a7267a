#include "pipeline/orphan_guard.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <utility>

#include "pipeline/logging.h"

namespace vapipe {

OrphanGuard::OrphanGuard(const ShutdownFlags& flags, const JobLayout& layout, std::chrono::steady_clock::duration drain,
                         std::string who, std::chrono::steady_clock::duration margin)
    : flags_(flags), layout_(layout), drain_(drain), margin_(margin), who_(std::move(who)) {
  const char* supervisor = std::getenv("VAPIPE_SUPERVISOR_PID");
  if (!supervisor || !*supervisor) return;
  const pid_t pid = static_cast<pid_t>(std::strtol(supervisor, nullptr, 10));
  if (pid <= 1) return;
  thread_ = std::thread([this, pid] { watch(pid); });
}

OrphanGuard::~OrphanGuard() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void OrphanGuard::watch(pid_t supervisor) {
  std::optional<std::chrono::steady_clock::time_point> orphaned_stop;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, std::chrono::milliseconds(200), [&] { return done_; })) {
    if (::getppid() == supervisor || !flags_.stop.load()) continue;
    const auto now = std::chrono::steady_clock::now();
    if (!orphaned_stop) orphaned_stop = now;
    if (now - *orphaned_stop < drain_ + margin_) continue;
    VAPIPE_LOG_ERROR("{}: its vapipe run (pid {}) is gone and the drain did not finish within job.drain_timeout_s: "
                     "exiting", who_, supervisor);
    if (layout_.by_reference) {  // (their names only: what still maps them keeps them)
      ::shm_unlink(layout_.frame_pool.c_str());
      ::shm_unlink(layout_.tensor_pool.c_str());
    }
    std::_Exit(2);  // as a failed stage (nobody waits for it)
  }
}

}  // namespace vapipe
