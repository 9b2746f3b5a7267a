// Watched archive folders (streams[].watch_s): the files a recorder, an NVR export or a person adds to
// a `glob:`'s folder while the job runs become streams of the running job, each classified once, every
// frame, as the files that were there at its start are.
//
// `vapipe run` looks (on a thread of its own: FolderLooker; a share that hangs holds up no restart or
// stop) and the supervisor's loop adds what it finds to the stream table
// (pipeline/stream_table.h), as a live job's reload adds cameras; ingest opens the new files in turn
// (ingest.max_open_streams). A file is a stream once: by its id (its path under the pattern's folder,
// as at the job's start), so a file seen again, or one whose id a results file already has (a
// resumed job: its earlier run classified it), is not added again.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "pipeline/background_task.h"
#include "pipeline/config.h"
#include "pipeline/stream_table.h"

namespace vapipe {

// What a job's looks at one folder found, for its metrics and `vapipe status`: the supervisor writes
// them to the run folder (folder_watch_status_path) after each look, and publish reads them.
struct FolderWatchStatus {
  std::string where;               // "streams[0]"
  std::string pattern;
  double watch_s = 0;
  uint64_t looks = 0;
  uint64_t files_added = 0;        // files its looks added to the job (not those of its start)
  uint64_t files_settling = 0;     // at the last look: files modified in the last settle_s (being written)
  double last_look_unix_s = 0;     // 0: none yet
  double last_look_s = 0;          // how long that look took
  // When a file last joined the job from this folder (the job's start counts: a recorder that stops
  // writing shows as this growing old).
  double last_file_unix_s = 0;
  std::string error;               // the last look's, or empty (a folder gone: unmounted, renamed)
  double looking_since_unix_s = 0; // a look running now began then (0: none): a share that does not answer
};

std::string folder_watch_status_path(const std::string& run_dir);
Status write_folder_watch_status(const std::vector<FolderWatchStatus>& status, const std::string& path);
// Empty when there is no such file (yet) or it cannot be read.
std::vector<FolderWatchStatus> read_folder_watch_status(const std::string& path);

// What one look read from the disk of one folder: the part of a look that may take long (a large
// folder, a slow share) or never end (a hard-mounted share whose server is gone), so it is done off the
// supervisor's loop (FolderLooker) and touches nothing but its own copies.
struct FolderReading {
  size_t folder = 0;                          // the folder's index, in config order
  Result<GlobFiles> files = GlobFiles{};
  std::map<std::string, uintmax_t> bytes_of;  // each settled file's size, by URI
  double took_s = 0;
};
// Reads the folders `due` (indices into `watches`), in that order.
std::vector<FolderReading> read_folders(const std::vector<FolderWatch>& watches, const std::vector<size_t>& due);

class FolderWatcher {
 public:
  using Clock = std::chrono::steady_clock;
  // Each folder is first looked at again watch_s after `now` (the job's start looked at it once).
  FolderWatcher(std::vector<FolderWatch> watches, Clock::time_point now);

  // A look in two halves, for a caller that reads on another thread: the folders due at `now` and not
  // being read (they are then being read, until take() has their readings), ...
  std::vector<size_t> start_look(Clock::time_point now);
  // ... and the new files in what was read, made streams: those that are not streams of `table` (by
  // id) and whose ids are not in `earlier_ids` (streams of the results file that the job's config no
  // longer had: a resumed job's departed ones). A file that cannot be a stream (its id is another
  // file's, or not a valid id) is logged once and left out. Each folder read is next due watch_s on.
  std::vector<StreamConfig> take(std::vector<FolderReading> readings, const StreamTable& table,
                                 const std::set<std::string>& earlier_ids);
  // Both on the caller's thread.
  std::vector<StreamConfig> look(const StreamTable& table, const std::set<std::string>& earlier_ids,
                                 Clock::time_point now);
  // The folders, as read_folders takes them.
  std::vector<FolderWatch> watches() const;

  // When the next look is due (Clock::time_point::max() while every folder is being read).
  Clock::time_point next_look() const;
  // Every folder is looked at `now` (SIGHUP, POST /-/reload: a script that has just copied files in);
  // one being read is looked at again as soon as that read ends.
  void look_at(Clock::time_point now);
  // Says once of each read that has run longer than kHungLookS at `now` that it has not ended (a
  // share that does not answer); the job goes on meanwhile.
  void check_reads(Clock::time_point now);
  static constexpr double kHungLookS = 30;
  // Looks so far, and the longest one's seconds (a folder on a slow network share).
  size_t looks() const { return looks_; }
  double longest_look_s() const { return longest_look_s_; }
  // Each folder's, in config order. `added` counts what look() returned and the job took (the
  // supervisor says so: a table that could not be written takes them at the next look).
  std::vector<FolderWatchStatus> status() const;
  void took(const std::vector<StreamConfig>& files);

 private:
  struct Watched {
    FolderWatch watch;
    Clock::time_point due;
    FolderWatchStatus status;
    std::optional<Clock::time_point> reading_since;  // being read (start_look) since then
    bool again = false;                              // look_at while it was read: due when it ends
    bool said_hung = false;                          // its read was said to run long
  };
  std::vector<Watched> watched_;
  std::set<std::string> said_;  // files already logged as left out, so each is said once
  std::map<std::string, size_t> found_in_;  // the last look's files: id -> its folder's index
  // Each file's size when a look first saw it (a job's first files: at the first look), by URI: one
  // that changes after the job took it is said once.
  std::map<std::string, uintmax_t> size_of_;
  void check_unchanged(const FolderWatch& watch, const StreamConfig& stream,
                       const std::map<std::string, uintmax_t>& bytes_of);
  size_t looks_ = 0;
  double longest_look_s_ = 0;
  bool said_slow_ = false;
};

// Runs a look's reads (read_folders) on a thread of its own, one look at a time, so that `vapipe run`'s
// loop (a crashed stage's restart, a stop, signals) never waits on a folder (pipeline/background_task.h:
// a read that never ends is left behind when the looker goes).
class FolderLooker {
 public:
  using Reader = std::function<std::vector<FolderReading>(const std::vector<size_t>& folders)>;
  explicit FolderLooker(Reader reader) : reader_(std::move(reader)) {}
  // The read_folders of these folders.
  explicit FolderLooker(std::vector<FolderWatch> watches);

  bool busy() const { return task_.busy(); }
  // Reads `folders` on the looker's thread; false (nothing started) while a read runs.
  bool start(std::vector<size_t> folders);
  // The readings of the read started last, once it has ended (the looker is then free again).
  std::optional<std::vector<FolderReading>> finished() { return task_.finished(); }

 private:
  Reader reader_;
  BackgroundTask<std::vector<FolderReading>> task_;
};

// The streams of `table` added by `files` (each on the lane with the fewest streams, as a reload adds
// cameras), with their ids and lanes in `added`; the table's version is raised.
StreamReload add_watched_files(StreamTable& table, const std::vector<StreamConfig>& files, size_t lanes);

// A job that restarts after a crash (an archive job restarts whole): the files its watched folders
// added while it ran (`files`) that `config.streams` does not have yet, put after them, so that the
// restart's --resume goes on with them instead of taking them for departed. Returns how many were added.
size_t add_watched_streams(Config& config, const std::vector<StreamConfig>& files);

}  // namespace vapipe
