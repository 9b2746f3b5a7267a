// Sequence numbers that survive a restart of a live job's lane. When a stage of a lane crashes, the
// supervisor restarts that lane's processes alone (pipeline/supervisor.h); the new ingest must number
// each stream's frames after every number the old one may have sent, or subscribers would see a
// stream's `seq` go back. Ingest therefore reserves numbers in blocks: before it emits frame `seq`
// it makes sure the lane's file (run_dir/seq-<lane>.json) says "reserved up to at least seq + 1",
// writing the file only when a block is used up (once per 4,096 frames of a stream). A restarted
// ingest starts each stream at its reserved mark: seq jumps forward over the frames lost in the crash
// and the unused rest of the block, and never repeats.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "pipeline/job_layout.h"
#include "pipeline/status.h"

namespace vapipe {

std::string seq_reservation_path(const JobLayout& layout);

class SeqReservations {
 public:
  static constexpr uint64_t kDefaultBlock = 4096;

  // Reads the file if there is one (a lane that restarts); a missing file is an empty table.
  static Result<std::unique_ptr<SeqReservations>> open(std::string path, uint64_t block = kDefaultBlock);

  // The first number no earlier instance can have sent for `stream_id` (0: it sent none).
  uint64_t reserved(const std::string& stream_id) const;
  // Called before frame `seq` of `stream_id` leaves: reserves the next block if `seq` is not covered
  // yet, and writes the file before returning. Thread-safe (one call per frame of every stream).
  Status ensure(const std::string& stream_id, uint64_t seq);

  // A live job's file that was read to its end (or to its streams[].to): a lane restarted later ends
  // it again without reading it, rather than read it again from its start (its results would repeat).
  // Written to the file before the end goes out.
  Status mark_ended(const std::string& stream_id);
  bool ended(const std::string& stream_id) const;

 private:
  Status write_locked();  // under mutex_
  SeqReservations(std::string path, uint64_t block) : path_(std::move(path)), block_(block) {}
  std::string path_;
  uint64_t block_;
  mutable std::mutex mutex_;
  std::map<std::string, uint64_t> reserved_;
  std::set<std::string> ended_;
};

}  // namespace vapipe
