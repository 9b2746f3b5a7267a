// publish.jsonl_path's writer: JSON lines appended to a file, whole lines or none.
//
// Lines are buffered and written out in blocks (flush()). A write the disk refuses (full, over quota,
// over the process's file-size limit, an I/O error) leaves no part of a line in the file: what the
// kernel took of a line before refusing is cut off again. The lines not written stay buffered, in
// order, for a later flush() to write once the disk takes them, so that a live job can go on while
// its disk is full and fill the file again afterwards (publish_stage.cpp decides what a failure means).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "pipeline/status.h"

namespace vapipe {

class ResultsFile {
 public:
  ResultsFile() = default;
  ~ResultsFile();  // writes what is buffered, if it can
  ResultsFile(ResultsFile&& other) noexcept;
  ResultsFile& operator=(ResultsFile&& other) noexcept;
  ResultsFile(const ResultsFile&) = delete;
  ResultsFile& operator=(const ResultsFile&) = delete;

  // Opens `path` for appending (O_APPEND: a file emptied under it, logrotate's copytruncate, is written
  // on from its start), created with mode 0644 when missing. An error names the path and the system's
  // reason.
  static Result<ResultsFile> open(const std::string& path);

  // Whether this writes a file (opened, or switched to one that could not be opened yet).
  bool active() const { return !path_.empty(); }
  const std::string& path() const { return path_; }

  // Buffers one line (without its newline).
  void append(std::string_view line);
  // Writes every buffered line out. On failure the lines not written stay buffered and the error
  // names the file and the system's reason ("... cannot be written (No space left on device)"); a file
  // that could not be opened is tried again first.
  Status flush();

  // From here on, lines go to `path` (the next period's file of a timed publish.jsonl_path). What is
  // still buffered goes there too: flush() first to keep it in the old file. An error when the new file
  // cannot be opened; it is tried again by each flush().
  Status switch_to(const std::string& path);

  // Whether `path` still names the file open, and if not what is done, in words for the log ("" when it
  // does, or nothing new happened since the last call). Found 2026-12-07: a file deleted while the job
  // ran took every result after it with it, in silence, and a second job could take its path.
  //  - Deleted: it is written again at `path`, whole (its lines so far read back from the open file),
  //    and written on there: nothing is lost. Its folder deleted with it is made again. One that cannot
  //    be written again (a folder made read-only) takes no more lines: flush() refuses them, as a full
  //    disk's file does (an archive job stops; a live job keeps them), and they go into it once it can
  //    be (found 2026-12-07: they went on into the deleted file, lost with it, and the job said
  //    "finished", exit 0).
  //  - Moved (renamed: logrotate's `create`, a person tidying up) with `begin_anew_when_moved` (a live
  //    job's file): a new file is begun at `path`. Without it (an archive job's, whose --resume reads
  //    `path` whole), the lines go on into the moved file, which is named.
  //  - Another file put at `path` in its place: a live job's lines go on there; an archive job's stay in
  //    its own file, which is named.
  std::string follow_path(bool begin_anew_when_moved);

  // Whether the file was deleted and cannot be written again (follow_path): its lines so far went with it.
  bool lost_with_deleted_file() const { return !cannot_write_again_.empty(); }

  size_t buffered_bytes() const { return buffer_.size(); }
  uint64_t buffered_lines() const { return buffered_lines_; }
  // Drops the oldest buffered lines until at most `max_bytes` are left; returns how many it dropped.
  uint64_t drop_oldest(size_t max_bytes);

 private:
  Status open_fd();
  std::string path_;
  int fd_ = -1;
  std::string buffer_;  // whole lines, each ending in '\n'
  uint64_t buffered_lines_ = 0;
  std::string said_apart_;  // follow_path: where the open file was said to be, apart from path_
  std::string cannot_write_again_;  // follow_path: why a deleted file cannot be written again ("": it can)
  uint64_t size_after_flush_ = 0;   // the file's size after the last flush: smaller later, it was emptied
};

}  // namespace vapipe
