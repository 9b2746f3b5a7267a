#include "pipeline/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

namespace vapipe {

Result<FileLock> FileLock::acquire(const std::string& path, const std::string& key, const std::string& shown) {
  // Not truncated, only opened: the file is the job's record (--resume reads it).
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return InvalidArgument(key + " " + path + ": cannot open it (" + std::strerror(errno) + ")");
  const std::string& named = shown.empty() ? path : shown;
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      return Unavailable(key + " " + named + " is being written by another vapipe job (a `vapipe run`, or a " +
                         "`vapipe stage publish` started by hand, holds its lock): two jobs writing one results " +
                         "file would break its record of each frame's result exactly once. Wait for that job or " +
                         "stop it, or give this one another " + key);
    }
    FileLock unlocked;  // e.g. ENOLCK, EOPNOTSUPP: this filesystem does not lock
    unlocked.why_not_held_ = key + " " + named + ": cannot be locked on its filesystem (" + std::strerror(err) +
                             "): nothing stops a second job from writing it too";
    return unlocked;
  }
  FileLock lock;
  lock.fd_ = fd;
  lock.path_ = path;
  lock.key_ = key;
  lock.shown_ = shown;
  return lock;
}

namespace {

void inherited(int fd) {
  const int flags = ::fcntl(fd, F_GETFD);
  if (flags >= 0) ::fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC);
}

}  // namespace

void FileLock::share_with_children() {
  shared_with_children_ = true;
  if (fd_ >= 0) inherited(fd_);
}

Status FileLock::follow() {
  struct stat locked {}, named {};
  if (fd_ < 0 || ::fstat(fd_, &locked) != 0) return Status::Ok();
  if (::stat(path_.c_str(), &named) != 0) {
    // A lock file of its own (a timed results path's, beside its files) deleted with its folder: made
    // again, and locked (found 2026-12-07: a second job on the same path then started, and both wrote).
    // Not the results file itself, which its writer makes again whole (results_file.h).
    if (shown_.empty() || shown_ == path_) return Status::Ok();
    std::error_code ec;
    const std::filesystem::path folder = std::filesystem::path(path_).parent_path();
    if (!folder.empty()) std::filesystem::create_directories(folder, ec);
    const int made = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (made < 0) return Status::Ok();  // (tried again at the next look)
    if (::flock(made, LOCK_EX | LOCK_NB) != 0) {
      ::close(made);
      return Unavailable(key_ + " " + shown_ + ": its lock file was deleted, and another process holds the one made "
                         "since (a second job?)");
    }
    ::close(fd_);
    fd_ = made;
    if (shared_with_children_) inherited(fd_);
    return Status::Ok();
  }
  if (locked.st_dev == named.st_dev && locked.st_ino == named.st_ino) return Status::Ok();
  const int fd = ::open(path_.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return Status::Ok();  // gone again since
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return Unavailable(key_ + " " + (shown_.empty() ? path_ : shown_) + " is another file now, and another process "
                       "holds its lock (a second job?)");
  }
  ::close(fd_);
  fd_ = fd;
  if (shared_with_children_) inherited(fd_);
  return Status::Ok();
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor drops the lock
}

FileLock::FileLock(FileLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      shared_with_children_(other.shared_with_children_),
      why_not_held_(std::move(other.why_not_held_)),
      path_(std::move(other.path_)),
      key_(std::move(other.key_)),
      shown_(std::move(other.shown_)) {}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    shared_with_children_ = other.shared_with_children_;
    why_not_held_ = std::move(other.why_not_held_);
    path_ = std::move(other.path_);
    key_ = std::move(other.key_);
    shown_ = std::move(other.shown_);
  }
  return *this;
}

}  // namespace vapipe
