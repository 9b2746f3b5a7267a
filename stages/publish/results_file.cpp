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
      buffered_lines_(std::exchange(other.buffered_lines_, 0)) {
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
  return Status::Ok();
}

void ResultsFile::append(std::string_view line) {
  buffer_.append(line);
  buffer_.push_back('\n');
  ++buffered_lines_;
}

Status ResultsFile::flush() {
  if (buffer_.empty()) return Status::Ok();
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
  if (err == 0) return Status::Ok();
  return Unavailable(path_ + ": cannot be written (" + std::strerror(err) + ")");
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
