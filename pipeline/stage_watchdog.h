// Catches a stage stuck in its own work: a CUDA call that never returns, a deadlock in a library. The
// supervisor sees only processes that die, and a stuck one stays alive forever while its lane's
// streams stop. The watchdog is a thread that watches the stage's thread (the one that created it):
// the stage runner says when that thread starts its own work and when it waits (for input, for room
// downstream, for a pool slot: waits that other stages cause are not watched, and the stage after
// it has its own watchdog). If one stretch of own work lasts `timeout_s`, the watchdog logs what the
// stage was doing and sends SIGABRT to the stage's thread: the crash report prints that thread's
// backtrace (where it was stuck), the process dies, and `vapipe run` restarts it like any crash
// (job.max_restarts). If the thread cannot take the signal (stuck in the kernel) the process exits
// from the watchdog's thread 10 s later.
#pragma once

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace vapipe {

class StageWatchdog {
 public:
  // timeout_s <= 0: the watchdog is off (no thread).
  StageWatchdog(std::string stage, double timeout_s);
  ~StageWatchdog();
  StageWatchdog(const StageWatchdog&) = delete;
  StageWatchdog& operator=(const StageWatchdog&) = delete;

  // From the watched thread: its own work starts now (`what` names it; a string literal), or it waits.
  // Each call to working() starts the clock again.
  void working(const char* what);
  void waiting();
  const char* what() const { return what_.load(std::memory_order_relaxed); }
  // Lengthens the timeout to `timeout_s` if that is longer (never turns an off watchdog on).
  void raise_timeout(double timeout_s);
  double timeout_s() const { return static_cast<double>(timeout_ns_.load()) / 1e9; }
  bool is_working() const { return working_since_ns_.load(std::memory_order_relaxed) != 0; }
  // How long the stretch of own work under way has lasted; 0 while waiting.
  double working_for_s() const;

 private:
  void watch();

  std::string stage_;
  std::atomic<int64_t> timeout_ns_;
  pthread_t watched_;
  std::atomic<int64_t> working_since_ns_{0};  // 0: waiting
  std::atomic<const char*> what_{""};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

// A wait inside the stage's own work (an emitter's send or allocate): not watched while it lasts;
// the own work goes on (its clock started again) when it ends.
class WatchdogWait {
 public:
  explicit WatchdogWait(StageWatchdog* dog) : dog_(dog && dog->is_working() ? dog : nullptr) {
    if (dog_) {
      then_ = dog_->what();
      dog_->waiting();
    }
  }
  ~WatchdogWait() {
    if (dog_) dog_->working(then_);
  }
  WatchdogWait(const WatchdogWait&) = delete;
  WatchdogWait& operator=(const WatchdogWait&) = delete;

 private:
  StageWatchdog* dog_;
  const char* then_ = "";
};

}  // namespace vapipe
