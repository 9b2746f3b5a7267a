// Drives one Stage inside a stage process: binds its input edge, connects its output edge, and calls
// the stage one message at a time until every stream has ended (or shutdown).
#pragma once

#include <cstdint>

#include "pipeline/job_layout.h"
#include "pipeline/shm_pool.h"
#include "pipeline/transport.h"
#include "pipeline/signals.h"
#include "pipeline/stage.h"
#include "pipeline/stage_watchdog.h"

namespace vapipe {

// Emits into a MessageSender, allocating payloads from a PayloadAllocator. `cancel` aborts a send
// or an allocation that waits for room.
class SenderEmitter final : public Emitter {
 public:
  SenderEmitter(MessageSender* sender, PayloadAllocator* allocator, const std::atomic<bool>* cancel,
                StageWatchdog* watchdog = nullptr)
      : sender_(sender), allocator_(allocator), cancel_(cancel), watchdog_(watchdog) {}
  Status emit(Message&& msg) override;
  Result<Payload> allocate(size_t bytes) override;
  // Seconds spent in send (waiting for room downstream, back-pressure) and in allocate (waiting for a
  // free pool slot: downstream still holds them), summed over the emitter's life, and messages sent.
  // Readable from any thread (ingest's statistics); written only by the emitting one.
  // A wait under way counts as far as it has gone (a stage stuck behind a stopped one shows it as it
  // happens: the figures of /metrics were frozen until the wait ended).
  double send_seconds() const { return send_s_.load(std::memory_order_relaxed) + so_far(send_since_ns_); }
  double allocate_seconds() const { return allocate_s_.load(std::memory_order_relaxed) + so_far(allocate_since_ns_); }
  uint64_t messages_sent() const { return sent_.load(std::memory_order_relaxed); }

 private:
  MessageSender* sender_;
  PayloadAllocator* allocator_;
  const std::atomic<bool>* cancel_;
  StageWatchdog* watchdog_;  // waits for room downstream or a free slot are not the stage's own work
  static double so_far(const std::atomic<int64_t>& since_ns);
  std::atomic<double> send_s_{0}, allocate_s_{0};
  std::atomic<int64_t> send_since_ns_{0}, allocate_since_ns_{0};  // a wait under way began (steady ns; 0: none)
  std::atomic<uint64_t> sent_{0};
};

// Where a stage's time went, to find a job's bottleneck: the stage whose own work (busy minus the
// time blocked downstream) fills its wall time is the one the others wait for.
struct StageRunStats {
  uint64_t messages_in = 0;
  uint64_t malformed = 0;     // messages that could not be decoded (logged, skipped)
  uint64_t stage_errors = 0;  // process() calls that returned an error (logged)
  double wall_s = 0;           // from ready to done
  double busy_s = 0;           // in the stage's process / on_deadline / close
  double send_blocked_s = 0;   // of busy: waiting for room downstream
  double slot_wait_s = 0;      // of busy: waiting for a free slot of this stage's pool
  double input_wait_s = 0;     // waiting for input
};

// Returns when the stage is done: every stream of `lane` has ended (every stream of the job when
// `lane` is null, as for publish), or shutdown. Start-up failures (bind, open) are returned as errors.
Status run_stage(Stage& stage, const Config& config, const JobLayout& layout, const Lane* lane,
                 ShutdownFlags& flags, StageRunStats* stats = nullptr);

// Waits until every slot of a pool this process owns has been released downstream (or timeout).
void wait_for_pool_drained(const ShmPool& pool, const ShutdownFlags& flags,
                           std::chrono::steady_clock::duration timeout);

// Before a process that sent on `endpoint` exits: waits until the receiving stage has marked it
// closed (it reads no more; see input_closed_marker in transport.h). Without a stop request it waits
// as long as that takes (archive mode: the receiver may have much left to do); after one, at most
// `drain`; after an abort, not at all. False if it stopped waiting without the mark.
bool wait_for_downstream_closed(const std::string& endpoint, const ShutdownFlags& flags,
                                std::chrono::steady_clock::duration drain);

// Ingest, before it starts its streams: waits until the stages after it in its lane, and publish,
// have opened (their opening marks are gone, see opening_mark in job_layout.h), or a stop or abort.
// Returns the seconds waited and, when it waited, the stage that opened last.
struct DownstreamOpenWait {
  double seconds = 0;
  std::string last;  // empty: nothing to wait for
  bool opened = true;  // false: stopped waiting on stop or abort
};
DownstreamOpenWait wait_for_downstream_open(const JobLayout& layout, const ShutdownFlags& flags);

// The stage after `kind` in the pipeline (ingest -> preprocess -> batch -> infer -> publish).
StageKind next_stage(StageKind kind);

}  // namespace vapipe
