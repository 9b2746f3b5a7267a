#include "pipeline/stage_watchdog.h"

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <chrono>

#include "pipeline/logging.h"

namespace vapipe {
namespace {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

StageWatchdog::StageWatchdog(std::string stage, double timeout_s)
    : stage_(std::move(stage)), timeout_ns_(static_cast<int64_t>(timeout_s * 1e9)), watched_(pthread_self()) {
  if (timeout_ns_ > 0) thread_ = std::thread([this] { watch(); });
}

StageWatchdog::~StageWatchdog() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void StageWatchdog::working(const char* what) {
  what_.store(what, std::memory_order_relaxed);
  working_since_ns_.store(steady_ns(), std::memory_order_release);
}

void StageWatchdog::waiting() { working_since_ns_.store(0, std::memory_order_release); }

double StageWatchdog::working_for_s() const {
  const int64_t since = working_since_ns_.load(std::memory_order_acquire);
  return since == 0 ? 0.0 : static_cast<double>(std::max<int64_t>(0, steady_ns() - since)) / 1e9;
}

void StageWatchdog::raise_timeout(double timeout_s) {
  const auto raised = static_cast<int64_t>(timeout_s * 1e9);
  if (timeout_ns_.load() > 0 && raised > timeout_ns_.load()) timeout_ns_.store(raised);
}

void StageWatchdog::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  // Looks ten times per timeout (at most once a second): a stuck stage is caught within 110% of it.
  auto period = [this] { return std::chrono::nanoseconds(std::min<int64_t>(timeout_ns_.load() / 10, 1000000000)); };
  while (!wake_.wait_for(lock, period(), [this] { return stop_; })) {
    const int64_t since = working_since_ns_.load(std::memory_order_acquire);
    if (since == 0 || steady_ns() - since < timeout_ns_.load()) continue;
    VAPIPE_LOG_ERROR("{}: stuck in its own work ({}) for {:.1f} s (job.stage_timeout_s): aborting it, so that it is "
                     "restarted; the backtrace below shows where it was", stage_, what_.load(),
                     static_cast<double>(steady_ns() - since) / 1e9);
    ::spdlog::default_logger()->flush();
    pthread_kill(watched_, SIGABRT);
    // A thread stuck in the kernel takes the signal only when it comes back: do not wait forever.
    if (!wake_.wait_for(lock, std::chrono::seconds(10), [this] { return stop_; })) {
      VAPIPE_LOG_ERROR("{}: the stuck thread did not take SIGABRT within 10 s: exiting", stage_);
      ::spdlog::default_logger()->flush();
      std::_Exit(134);
    }
    return;
  }
}

}  // namespace vapipe
