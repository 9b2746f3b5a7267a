// Sequence numbers that survive a restart of a live job's lane. When a stage of a lane crashes, the
// supervisor restarts that lane's processes alone (pipeline/supervisor.h); the new ingest must number
// each stream's frames after every number the old one may have sent, or subscribers would see a
// stream's `seq` go back. Ingest therefore reserves numbers in blocks: before it emits frame `seq`
// it makes sure the lane's file (run_dir/seq-<lane>.json) says "reserved up to at least seq + 1",
// writing the file only when a block is used up (once per 4,096 frames of a stream). A restarted
// ingest starts each stream at its reserved mark: seq jumps forward over the frames lost in the crash
// and the unused rest of the block, and never repeats.
//
// A live job's file is also followed frame by frame: before each of its frames leaves, the timestamp of
// that frame goes into a slot of run_dir/seq-<lane>.positions (one 8-byte pwrite; the JSON file says
// which slot is whose, and for which uri). A restarted ingest seeks the file past its last frame sent,
// instead of reading it again from its start: its results do not repeat (the frames in flight at the
// crash are lost, as a camera's are).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

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

  // A live job's file: frame `pts_ns` of `stream_id`, read from `uri`, is about to leave. The first
  // call for a stream, or for a new uri of it, takes a new slot (the JSON file is written then); every
  // call writes the timestamp into the slot. It clears an end mark (the stream is being read again: a
  // reload brought it back). Thread-safe.
  Status note_sent(const std::string& stream_id, const std::string& uri, int64_t pts_ns);
  // The timestamp of the last frame of `stream_id` sent by an earlier instance while it read `uri`
  // (as of open()); nullopt: none sent, or it read another uri.
  std::optional<int64_t> last_sent(const std::string& stream_id, const std::string& uri) const;
  ~SeqReservations();

 private:
  struct Position {
    uint32_t slot = 0;
    std::string uri;
  };
  Status write_locked();  // under mutex_
  SeqReservations(std::string path, uint64_t block) : path_(std::move(path)), block_(block) {}
  std::string positions_path() const;
  std::string path_;
  uint64_t block_;
  mutable std::mutex mutex_;
  std::map<std::string, uint64_t> reserved_;
  std::set<std::string> ended_;
  std::map<std::string, Position> positions_;
  uint32_t next_slot_ = 0;
  int positions_fd_ = -1;                 // opened at the first note_sent
  std::vector<int64_t> earlier_sent_;     // the positions file as open() found it, by slot (pts + 1; 0: none)
};

}  // namespace vapipe
