// The one stage contract (MediaPipe calculators, Holoscan operators): a stage is opened, then gets
// its input messages one at a time, then is closed. The framework never calls one stage instance
// from two threads at once, so stage code needs no locks on its hot path. Stages do not know about
// sockets: tests drive them directly (tests/fakes/stage_harness.h), the StageRunner drives them in a
// stage process.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "pipeline/config.h"
#include "pipeline/job_layout.h"
#include "pipeline/message.h"
#include "pipeline/placement.h"
#include "pipeline/status.h"

namespace vapipe {

using SteadyTime = std::chrono::steady_clock::time_point;

// Where a stage sends what it produces.
class Emitter {
 public:
  virtual ~Emitter() = default;
  virtual Status emit(Message&& msg) = 0;
  // A payload buffer for an outgoing message (a shared memory slot on one host). May block while
  // the downstream stages hold every buffer: that is back-pressure.
  virtual Result<Payload> allocate(size_t bytes) = 0;
  // Called by a producer with nothing to send for a while (ingest's stream readers, every 50 ms or
  // so), so that an emitter with work of its own (stages/ingest/stream_fan_out.h: the end of a stream
  // removed meanwhile) can send it from the producer's thread.
  virtual Status idle() { return Status::Ok(); }
};

using StageCounters = std::vector<std::pair<std::string, double>>;
// A stage's own facts as text, beside its counters (infer: the model it runs).
using StageFacts = std::vector<std::pair<std::string, std::string>>;

class StageWatchdog;

struct StageContext {
  const Config& config;
  const std::atomic<bool>* stop_requested = nullptr;
  // The lane this stage process serves: its streams and devices. Null: every stream, on the CPU
  // (tests, publish).
  const Lane* lane = nullptr;
  // Where the job's stages meet (run folder, endpoints). Null in tests that drive a stage directly.
  const JobLayout* layout = nullptr;
  // The stage thread's watchdog (pipeline/stage_watchdog.h): a stage that waits on something outside
  // it inside process() (publish on a slow subscriber) marks that wait with a WatchdogWait. Null in tests.
  StageWatchdog* watchdog = nullptr;
};

class Stage {
 public:
  virtual ~Stage() = default;
  virtual StageKind kind() const = 0;
  // Loads what the stage needs (a model, a socket). A failure here is a start-up error.
  virtual Status open(const StageContext& ctx) = 0;
  // One input message. An error here is logged and counted; the stage goes on with the next message,
  // so a stage turns per-frame problems into error results or events rather than failing.
  virtual Status process(Message&& in, Emitter& out) = 0;
  // Stages that work better on several inputs at once (one GPU launch for many frames) say how many
  // they take; the runner then hands over, in arrival order, what has already arrived (never waiting
  // for more). The default takes them one by one.
  virtual size_t max_inputs_at_once() const { return 1; }
  virtual Status process_many(std::vector<Message>&& in, Emitter& out) {
    Status first;
    for (Message& m : in) {
      Status s = process(std::move(m), out);
      if (s.code() == StatusCode::kCancelled || s.code() == StatusCode::kAborted) return s;
      if (first.ok()) first = s;
    }
    return first;
  }
  // Called when next_deadline() has passed (e.g. the batcher's max delay).
  virtual Status on_deadline(Emitter& /*out*/) { return Status::Ok(); }
  virtual std::optional<SteadyTime> next_deadline() const { return std::nullopt; }
  // Called once after the last input (every stream ended, or shutdown).
  virtual Status close(Emitter& /*out*/) { return Status::Ok(); }
  // The stage's own running totals (e.g. infer's batches), served with the job's metrics as
  // vapipe_<stage>_<name>_total; names are lower case with underscores. Called on the stage's thread.
  virtual StageCounters counters() const { return {}; }
  // The stage's own facts, served with the job's health (infer's model: /healthz `models`, `vapipe
  // status`, vapipe_infer_model_info). Called on the stage's thread.
  virtual StageFacts facts() const { return {}; }
  // After open(): the least time one piece of own work may take before the watchdog calls the stage
  // stuck (pipeline/stage_watchdog.h), when it knows its work is slow (infer: a big model on a CPU).
  // job.stage_timeout_s applies when it is longer.
  virtual double watchdog_floor_s() const { return 0; }
};

// Counts the streams that have ended (end-of-stream or error), to know when a stage is done. Streams
// can be added while the job runs (pipeline/stream_table.h): expect() them; an end seen before its
// stream was expected still counts once it is. A stream that ended and starts again (a `started` or
// `reconnecting` after its end: a reload brought it back) counts as running until its next end.
class StreamTracker {
 public:
  // Every stream of the job.
  explicit StreamTracker(size_t stream_count) {
    for (uint32_t s = 0; s < stream_count; ++s) expect(s);
  }
  // Only the given streams (a lane's): the stage is done when these have ended.
  StreamTracker(size_t /*stream_count*/, const std::vector<uint32_t>& streams) {
    for (uint32_t s : streams) expect(s);
  }
  void expect(uint32_t s) {
    grow(s);
    if (expected_[s]) return;
    expected_[s] = true;
    ++expected_count_;
    if (ended_[s]) ++ended_count_;
  }
  bool expects(uint32_t s) const { return s < expected_.size() && expected_[s]; }
  void observe(const Message& m) {
    const uint32_t i = m.env.stream_index;
    if (m.kind == MessageKind::kStreamStart || m.kind == MessageKind::kStreamReconnecting) {
      // A stream that had ended begins again (a reload brought it back, or its lane restarted): it
      // ends once more before the stage is done.
      if (i < ended_.size() && ended_[i]) {
        ended_[i] = false;
        if (expected_[i]) --ended_count_;
      }
      return;
    }
    if (!ends_stream(m.kind)) return;
    grow(i);
    if (ended_[i]) return;
    ended_[i] = true;
    if (expected_[i]) ++ended_count_;
  }
  bool all_ended() const { return ended_count_ == expected_count_; }
  size_t ended_count() const { return ended_count_; }
  size_t expected_count() const { return expected_count_; }

 private:
  void grow(uint32_t s) {
    if (s >= expected_.size()) {
      expected_.resize(s + 1, false);
      ended_.resize(s + 1, false);
    }
  }
  std::vector<bool> expected_;
  std::vector<bool> ended_;
  size_t expected_count_ = 0;
  size_t ended_count_ = 0;
};

}  // namespace vapipe
