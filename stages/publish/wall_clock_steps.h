// Frames carry their capture time by the wall clock (CLOCK_REALTIME: the one clock every process of a
// job, and a subscriber, can compare). When that clock is stepped while a job runs (NTP's first sync
// on a machine without an RTC, a person's `date -s`), the frames captured before the step and published
// after it looked late (or early) by the step: a stream's latency_ms_max read 48 hours. Publish notices
// a step as the wall clock moving against the monotonic one, and puts the capture times of frames from
// before it on the clock as it is now.
#pragma once

#include <cstdint>
#include <cstdlib>

namespace vapipe {

class WallClockSteps {
 public:
  // Steps smaller than this are drift and slewing, not steps.
  static constexpr int64_t kStepNs = 1'000'000'000;

  // At each result: the wall and monotonic clocks read now.
  void look(int64_t wall_ns, int64_t monotonic_ns) {
    const int64_t offset = wall_ns - monotonic_ns;
    if (known_ && std::llabs(offset - offset_ns_) >= kStepNs) {
      step_ns_ = offset - offset_ns_;
      stepped_at_wall_ns_ = wall_ns;
    }
    offset_ns_ = offset;
    known_ = true;
  }
  // `capture_ns` on the wall clock as it is now: a time closer to where the clock was before its
  // latest step than to where it is now is from before the step, and is moved by it.
  int64_t now_clock(int64_t capture_ns) const {
    if (step_ns_ == 0 || capture_ns <= 0) return capture_ns;
    const int64_t before_step = stepped_at_wall_ns_ - step_ns_;
    return std::llabs(capture_ns - before_step) < std::llabs(capture_ns - stepped_at_wall_ns_) ? capture_ns + step_ns_
                                                                                             : capture_ns;
  }
  int64_t latest_step_ns() const { return step_ns_; }

 private:
  bool known_ = false;
  int64_t offset_ns_ = 0;
  int64_t step_ns_ = 0;
  int64_t stepped_at_wall_ns_ = 0;
};

}  // namespace vapipe
