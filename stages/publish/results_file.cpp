#include "stages/publish/results_file.h"

#include <cstdint>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

namespace vapipe {

ResultsFile::~ResultsFile() {
  // As an ofstream does: a stage that returns early (an error) still leaves what it had buffered.
  if (fd_ >= 0 && !buffer_.empty()) (void)flush();
  if (fd_ >= 0) ::close(fd_);
}

ResultsFile::ResultsFile(ResultsFile&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      buffer_(std::move(other.buffer_)),
      buffered_lines_(std::exchange(other.buffered_lines_, 0)),
      size_after_flush_(std::exchange(other.size_after_flush_, 0)) {
  other.path_.clear();
  other.buffer_.clear();
}

ResultsFile& ResultsFile::operator=(ResultsFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0 && !buffer_.empty()) (void)flush();
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    buffer_ = std::move(other.buffer_);
    buffered_lines_ = std::exchange(other.buffered_lines_, 0);
    size_after_flush_ = std::exchange(other.size_after_flush_, 0);
    other.path_.clear();
    other.buffer_.clear();
  }
  return *this;
}

Result<ResultsFile> ResultsFile::open(const std::string& path) {
  ResultsFile f;
  f.path_ = path;
  VAPIPE_RETURN_IF_ERROR(f.open_fd());
  return f;
}

Status ResultsFile::open_fd() {
  // Missing folders are made (a timed path's next day; a folder removed while the file was refused).
  std::error_code ec;
  if (const std::filesystem::path parent = std::filesystem::path(path_).parent_path(); !parent.empty()) {
    std::filesystem::create_directories(parent, ec);
  }
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Unavailable(path_ + ": cannot be opened (" + std::strerror(errno) + ")");
  fd_ = fd;
  struct stat st {};
  size_after_flush_ = ::fstat(fd_, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  return Status::Ok();
}

void ResultsFile::append(std::string_view line) {
  buffer_.append(line);
  buffer_.push_back('\n');
  ++buffered_lines_;
}

Status ResultsFile::flush() {
  if (buffer_.empty()) return Status::Ok();
  if (!cannot_write_again_.empty()) return Unavailable(cannot_write_again_);  // (follow_path tries again)
  if (fd_ < 0) VAPIPE_RETURN_IF_ERROR(open_fd());
  size_t written = 0;
  int err = 0;
  while (written < buffer_.size()) {
    const ssize_t n = ::write(fd_, buffer_.data() + written, buffer_.size() - written);
    if (n > 0) {
      written += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      err = n < 0 ? errno : EIO;  // 0 bytes taken of a regular file: as an I/O error
      break;
    }
  }
  // The whole lines the file took leave the buffer; the part of a line it took before refusing the
  // rest is cut off it again, so that a reader never meets half a line in the middle of the file.
  size_t kept_from = written;
  if (written < buffer_.size()) {
    const size_t newline = written == 0 ? std::string::npos : buffer_.rfind('\n', written - 1);
    kept_from = newline == std::string::npos ? 0 : newline + 1;
  }
  if (const size_t partial = written - kept_from; partial > 0) {
    struct stat st {};
    // (a device such as /dev/full cannot be cut, and never took anything)
    if (::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode) && static_cast<size_t>(st.st_size) >= partial) {
      (void)::ftruncate(fd_, st.st_size - static_cast<off_t>(partial));
    }
  }
  buffered_lines_ -= static_cast<uint64_t>(std::count(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(kept_from), '\n'));
  buffer_.erase(0, kept_from);
  // What a long refusal made it hold goes back to the heap once written.
  if (buffer_.empty() && buffer_.capacity() > (size_t{1} << 20)) std::string().swap(buffer_);
  if (struct stat st {}; ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode)) size_after_flush_ = static_cast<uint64_t>(st.st_size);
  if (err == 0) return Status::Ok();
  return Unavailable(path_ + ": cannot be written (" + std::strerror(err) + ")");
}

namespace {

// Where an open file is now, as the kernel names it ("/data/old.jsonl", "... (deleted)").
std::string path_of_open_file(int fd) {
  char target[4096];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
  return n > 0 ? std::string(target, static_cast<size_t>(n)) : std::string("(somewhere unknown)");
}

// Copies what `from` holds to a new file at `path` (not one there already); its descriptor, or -1 and why
// (`opening`: the errno of a file that could not be made at all, else 0).
int copy_to_new_file(int from, const std::string& path, std::string* why, int* opening) {
  *opening = 0;
  const int to = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
  if (to < 0) {
    *opening = errno;
    *why = std::strerror(*opening);
    return -1;
  }
  const std::string again = "/proc/self/fd/" + std::to_string(from);
  const int in = ::open(again.c_str(), O_RDONLY | O_CLOEXEC);  // (a deleted file can still be read)
  int err = in >= 0 ? 0 : errno;  // why it is not whole, as the failing call said
  bool whole = in >= 0;
  char block[1 << 16];
  for (off_t at = 0; whole;) {
    const ssize_t n = ::pread(in, block, sizeof block, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      whole = n == 0;
      if (n < 0) err = errno;
      break;
    }
    for (ssize_t done = 0; whole && done < n;) {
      const ssize_t w = ::write(to, block + done, static_cast<size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        whole = false;
        err = w < 0 ? errno : EIO;
      } else {
        done += w;
      }
    }
    at += n;
  }
  if (!whole) *why = std::strerror(err ? err : EIO);
  if (in >= 0) ::close(in);
  if (!whole) {
    ::close(to);
    ::unlink(path.c_str());
    return -1;
  }
  return to;
}

}  // namespace

std::string ResultsFile::follow_path(bool begin_anew_when_moved) {
  struct stat open_st {};
  if (fd_ < 0 || ::fstat(fd_, &open_st) != 0 || !S_ISREG(open_st.st_mode)) return "";
  struct stat path_st {};
  const bool something_there = ::stat(path_.c_str(), &path_st) == 0;
  if (something_there && path_st.st_dev == open_st.st_dev && path_st.st_ino == open_st.st_ino) {
    said_apart_.clear();
    // Emptied (or cut) under the job: logrotate's copytruncate, `: > results.jsonl`. The lines go on at
    // its start (O_APPEND); an archive job's earlier ones are no longer in it, which --resume needs.
    const auto now_size = static_cast<uint64_t>(open_st.st_size);
    if (now_size < size_after_flush_) {
      const uint64_t was = std::exchange(size_after_flush_, now_size);
      return path_ + " was emptied while the job wrote it (" + std::to_string(was) + " bytes, now " +
             std::to_string(now_size) + ": logrotate's copytruncate, or `: > FILE`?): the results go on into it" +
             (begin_anew_when_moved ? std::string()
                                    : "; the earlier ones are no longer in it (in the rotated copy?), so `vapipe run "
                                      "--resume` cannot go on from it: keep an archive job's file out of log rotation");
    }
    return "";
  }
  const bool deleted = open_st.st_nlink == 0;
  if (deleted && !something_there) {
    std::string why;
    int opening = 0;
    int fresh = copy_to_new_file(fd_, path_, &why, &opening);
    bool folder_made = false;
    if (fresh < 0 && opening == ENOENT) {  // its folder went with it (an `rm -rf` of the output)
      std::error_code ec;
      folder_made = std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ec);
      if (folder_made) fresh = copy_to_new_file(fd_, path_, &why, &opening);
    }
    if (fresh < 0) {
      cannot_write_again_ = path_ + " was deleted while the job ran, and cannot be written again there (" + why + ")";
      const std::string said = "deleted:" + why;
      if (std::exchange(said_apart_, said) == said) return "";
      return cannot_write_again_ + ": it takes no more lines until it can (tried again at each flush)";
    }
    ::close(fd_);
    fd_ = fresh;
    said_apart_.clear();
    cannot_write_again_.clear();
    return path_ + " was deleted while the job ran" + (folder_made ? " with its folder (made again)" : "") +
           ": it is written again there, whole (" + std::to_string(open_st.st_size) +
           " bytes so far), and the results go on into it";
  }
  if (begin_anew_when_moved) {
    const std::string was = path_of_open_file(fd_);
    ::close(fd_);
    fd_ = -1;
    if (Status opened = open_fd(); !opened.ok()) return opened.message();  // (flush tries again)
    said_apart_.clear();
    return something_there ? path_ + " is another file than the one the job was writing (now " + was +
                                 "): the results go on into the file at " + path_
                           : path_ + " was moved to " + was + " (rotated?): a new " + path_ + " is begun";
  }
  const std::string now = path_of_open_file(fd_);
  if (std::exchange(said_apart_, now) == now) return "";
  return path_ + (something_there ? " is another file than the one the job writes (" + now + ")" : " was moved to " + now) +
         " while the job ran: its results go on into " + now + " (put it back at " + path_ +
         " before `vapipe run --resume`, which reads that path)";
}

Status ResultsFile::switch_to(const std::string& path) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  path_ = path;
  return open_fd();
}

uint64_t ResultsFile::drop_oldest(size_t max_bytes) {
  if (buffer_.size() <= max_bytes) return 0;
  // Cut at the first line boundary that leaves at most max_bytes.
  const size_t newline = buffer_.find('\n', buffer_.size() - max_bytes - 1);
  const size_t cut = newline == std::string::npos ? buffer_.size() : newline + 1;
  const auto dropped = static_cast<uint64_t>(std::count(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(cut), '\n'));
  buffer_.erase(0, cut);
  buffered_lines_ -= dropped;
  return dropped;
}

}  // namespace vapipe
