// An archive job whose ingest crashes on one file: GStreamer's FFV1 decoder segfaults on 10- and 12-bit
// grey and 16-bit RGB frames (scanned film), and such a file took the whole archive down with it: the
// job stopped at start-up (exit 2, every stream "pending") or crashed at each restart until it gave up,
// and nothing named the file (found 2026-12-07).
//
// Ingest keeps, in its lane's file in the run folder, the streams it is reading (opened and not ended).
// When it dies of a signal, `vapipe run` reads that list:
//  - one stream: that file is what crashed it. It is listed in the job's crashed-streams file, and the
//    restarted ingest ends it at once with an error naming the crash ("left out"); the others go on.
//  - several: the job restarts reading one file at a time (the one-at-a-time mark), so that the next
//    crash names its file; then it reads as many at once as before again.
// Such a restart is one that makes progress: it is not counted against job.max_restarts, nor refused
// as a crash during start-up.
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "pipeline/job_layout.h"
#include "pipeline/status.h"

namespace vapipe {

// Ingest's side: the ids it is reading, written whole at each change (a crash leaves the last list).
class StreamsBeingRead {
 public:
  StreamsBeingRead() = default;  // keeps nothing (a stage started by hand)
  explicit StreamsBeingRead(std::string path) : path_(std::move(path)) {}
  void add(const std::string& id);
  void remove(const std::string& id);

 private:
  void write_locked();
  std::string path_;
  std::mutex mutex_;
  std::multiset<std::string> ids_;
};

// The lane's list (layout.lane) and what it held at the crash (none: empty).
std::string streams_being_read_path(const JobLayout& layout);
std::vector<std::string> streams_being_read(const JobLayout& layout);

// The streams left out after crashing ingest, with why ("killed by signal 11 (Segmentation fault)").
std::string crashed_streams_path(const JobLayout& layout);
std::map<std::string, std::string> crashed_streams(const JobLayout& layout);
Status add_crashed_stream(const JobLayout& layout, const std::string& id, const std::string& why);

// While it exists, an archive job's ingest opens one stream at a time.
std::string one_at_a_time_mark(const JobLayout& layout);

// The error a crashed stream ends with.
std::string crashed_stream_message(const std::string& why);

}  // namespace vapipe
