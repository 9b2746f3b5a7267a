// One decoded stream, classified as several: the stream itself and the streams that name it as their
// `source` (streams[].source: other regions of the same camera or file). The stream's reader emits
// into a StreamFanOut, which sends each frame and event on once per stream of the group, with that
// stream's id, index, numbering and region (`roi`). The camera is connected to and decoded once.
//
// Each frame reaches the first streams as copies (a payload slot of their own: a host memcpy, or a
// device-to-device copy on a GPU lane) and the last as the decoded original: downstream stages own
// and release each slot on their own, as for any stream.
//
// Streams join (a reload adds one) and leave (a reload removes one) while the group runs: a joining
// stream starts at the next frame, numbered from 0 (or from its reserved mark after a lane restart);
// a leaving one gets its end event at the next frame or idle() of the reader, from the reader's thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/message.h"
#include "pipeline/seq_reservation.h"
#include "pipeline/stage.h"
#include "pipeline/stage_watchdog.h"

namespace vapipe {

class CudaStream;

// streams[].roi in pixels of this frame as shown upright (its size can change mid-stream): at least
// one pixel, inside it; the whole frame clears the crop.
void crop_to_region(const std::array<double, 4>& roi, FrameInfo* info);

struct FanOutTarget {
  uint32_t index = 0;
  std::string id;
  std::array<double, 4> roi{0, 0, 1, 1};
  // How the group's frames are turned (orientation_name(); "" when a file's own tag decides): what the
  // target's changed events say along with its roi.
  std::string turn;
  // --resume: results kept from an earlier run (frames 0 .. earlier_results-1 are not sent again), and
  // whether it ended then (it only ends again, without a frame).
  uint64_t earlier_results = 0;
  bool ended_earlier = false;
  // After a lane restart: where its numbering goes on (SeqReservations::reserved). The source's own
  // numbering is its reader's. A stream that comes back (a reload) goes on from its last frame's.
  uint64_t first_seq = 0;
  // The message of its `started` event when it joins a running group ("" for a stream added).
  std::string start_message;
};

class StreamFanOut final : public Emitter {
 public:
  // `targets` must hold the source itself (index `source_index`); `reservations` (live jobs, or null)
  // takes the members' numbers before their frames leave; `uri` (redacted) goes in their events.
  StreamFanOut(uint32_t source_index, std::string uri, std::vector<FanOutTarget> targets,
               SeqReservations* reservations);
  ~StreamFanOut() override;
  StreamFanOut(const StreamFanOut&) = delete;
  StreamFanOut& operator=(const StreamFanOut&) = delete;

  // Where the group's messages go (the stream's socket); before the first emit, on the reader's thread.
  // `watchdog` (or null) watches each copy (a GPU copy that never ends), as the reader's own.
  void attach(Emitter* out, StageWatchdog* watchdog = nullptr) {
    out_ = out;
    watchdog_ = watchdog;
  }

  // Any thread. false once the group has ended (its source's end went out): the target gets nothing.
  // A target that has left (or is leaving) comes back: numbered on from its last frame (or from its
  // first_seq, if higher), its own `started` again with its next frame.
  bool add(FanOutTarget target);
  // Any thread: the target ends ("removed from the config", say) with the next message or idle().
  void remove(uint32_t index, std::string reason);
  // Any thread: the target's region (a reload changed its `roi`), from the group's next frame on. The
  // target says so by a kStreamChanged event before that frame (or at the reader's next idle()).
  void set_region(uint32_t index, const std::array<double, 4>& roi);
  // Any thread: no stream joins any more (the group's thread could not start; its streams end without it).
  void close();
  bool has(uint32_t index) const;
  // The ids of the group's streams (for per-stream figures).
  std::vector<std::string> ids() const;
  // Any thread: the stream of the group named `id` (its index and region), unless it is leaving.
  std::optional<FanOutTarget> target_named(const std::string& id) const;

  // Any thread: the seq the target's next frame would have (the source's too), for a stream that
  // comes back after this group has ended; nullopt: no such target.
  std::optional<uint64_t> next_seq_of(uint32_t index) const;
  // Any thread: how the group ended (kStreamEnd or kStreamError: its source's end went out); nullopt
  // while it runs.
  std::optional<MessageKind> ended_as() const;

  // What the reader resumes from: the least earlier_results of the targets that did not end earlier.
  // nullopt: every target ended in an earlier run.
  std::optional<uint64_t> resume_from() const;

  Status emit(Message&& msg) override;
  Result<Payload> allocate(size_t bytes) override { return out_->allocate(bytes); }
  Status idle() override;

 private:
  struct Target {
    FanOutTarget config;
    // The reader's thread only:
    bool started = false;
    bool ended = false;
    uint64_t emitted = 0;  // frames sent, counting the earlier run's (events' `frames`)
    uint64_t next_seq = 0;  // a member's number for its first frame
    std::optional<int64_t> seq_offset;  // the source's seq minus this stream's (set by its first frame)
    std::atomic<uint64_t> next_number{0};  // its next frame's seq (any thread reads it)
    // Came back and has not started since: its end went out before, so one now says nothing (the
    // stages downstream count it ended already).
    bool end_said = false;
    // Under mutex_: why it leaves.
    std::optional<std::string> leaving;
    // Under mutex_: add()'s, for a target that has left or is leaving: it comes back (snapshot()).
    std::optional<FanOutTarget> rejoin;
    // Under mutex_: set_region()'s, taken into config by the reader's thread (snapshot()), which reads
    // config without the lock.
    std::optional<std::array<double, 4>> next_region;
  };
  struct Snapshot {
    Target* target;
    std::optional<std::string> leaving;
    bool region_changed;  // set_region() was called since the last snapshot
  };
  // The reader's thread: each target and whether it leaves; a region set since is taken.
  std::vector<Snapshot> snapshot();
  Status end_leaving(const std::vector<Snapshot>& targets);
  // The targets whose region changed say so (kStreamChanged), before anything else of theirs goes out.
  Status say_changed_regions(const std::vector<Snapshot>& targets);
  Status send_event(Target& t, MessageKind kind, const StreamEvent& ev);
  Status send_frame(Target& t, Message&& frame);
  Result<Payload> copy_payload(const Payload& from);

  const uint32_t source_index_;
  SeqReservations* const reservations_;
  Emitter* out_ = nullptr;
  StageWatchdog* watchdog_ = nullptr;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Target>> targets_;  // stable addresses; only added to
  bool closed_ = false;                           // the source's end went out
  std::optional<MessageKind> ended_as_;           // under mutex_: the source's end, once it went out
  // From the source's events: what a target's own events carry.
  std::string uri_;
  uint64_t dropped_ = 0;
  int64_t duration_ns_ = -1;
  std::string turn_;  // as its source's latest started or changed event said (a member that joins says it)
  bool reservation_failed_ = false;
  bool source_started_ = false;  // the source's start went out (its first frame follows)
  std::unique_ptr<CudaStream> cuda_stream_;  // device-to-device copies (GPU lanes), made on first use
};

}  // namespace vapipe
