// One writer per JSON-lines file: `vapipe run` (or a `vapipe stage publish` started by hand) holds an
// exclusive lock on publish.jsonl_path for the whole job, so a second job pointed at the same file (a
// cron run that overlaps the last one, a job started twice) stops at once instead of truncating or
// interleaving a record that must hold each frame's result exactly once. flock(2): the kernel drops
// the lock when the process dies, however it dies, so no stale lock survives a crash.
#pragma once

#include <string>

#include "pipeline/status.h"

namespace vapipe {

class FileLock {
 public:
  FileLock() = default;
  // Opens (creating it if missing, its folder must exist) and locks `path`. kUnavailable when another
  // process holds the lock; the error names `key` and the file. A filesystem that cannot lock (some
  // FUSE or network mounts) is no error: the lock then is not held() and why_not_held() says why.
  // `shown`: what the messages name instead of `path` (a timed results path, whose lock is one file
  // beside its files: pipeline/results_path.h).
  static Result<FileLock> acquire(const std::string& path, const std::string& key, const std::string& shown = "");
  ~FileLock();
  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  bool held() const { return fd_ >= 0; }
  // The lock is inherited by the processes this one starts from now on (its descriptor without
  // FD_CLOEXEC): it stays held while any of them lives. `vapipe run`'s, for its stages: a supervisor
  // killed (kill -9, the OOM killer) leaves its publish writing the file while it drains, and a
  // `--resume` started meanwhile wrote it too (duplicates, two summaries; found 2026-12-07).
  void share_with_children();
  const std::string& why_not_held() const { return why_not_held_; }

  // The path names another file than the one locked (the results file deleted and written again, or
  // moved and begun anew: stages/publish/results_file.h): the lock is taken on that one instead. An
  // error when another process holds it; nothing to do when the path names the same one, or no file
  // (its writer makes it again), except a lock file of its own (`shown` another path: a timed results
  // path's), which is made again and locked.
  Status follow();

 private:
  int fd_ = -1;
  bool shared_with_children_ = false;
  std::string why_not_held_;
  std::string path_, key_, shown_;
};

}  // namespace vapipe
