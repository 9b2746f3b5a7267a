#include "pipeline/stale_jobs.h"

#include <cstdint>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "pipeline/job_layout.h"

namespace vapipe {
namespace {

constexpr const char* kPrefix = "vapipe-";
constexpr const char* kLockSuffix = ".lock";

std::string lock_path(const std::string& tmp_dir, const std::string& job_id) {
  return tmp_dir + "/" + kPrefix + job_id + kLockSuffix;
}

}  // namespace

Result<JobLock> JobLock::acquire(const std::string& job_id, const std::string& tmp_dir) {
  const std::string path = lock_path(tmp_dir, job_id);
  // Inherited by the stages (no O_CLOEXEC): the lock stays held while any process of the job lives.
  // Not through a link, and this user's (in /tmp, another user could have put either there: the link
  // made root create the file it named; found 2026-12-07).
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW, 0600);
  if (fd < 0) {
    const int err = errno;
    return InvalidArgument("job lock " + path + ": cannot open it (" +
                           (err == ELOOP ? std::string("it is a symbolic link: another user's? remove it")
                                         : std::string(std::strerror(err))) + ")");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
    ::close(fd);
    return InvalidArgument("job lock " + path + " is not this user's file (owned by uid " + std::to_string(st.st_uid) +
                           "): another user's? remove it, or give the job another --job-id");
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      return Unavailable("job id '" + job_id + "' is in use by another `vapipe run` (or its stages), which holds " +
                         path + ": the two would share shared memory pools and sockets; give this one another " +
                         "--job-id");
    }
    return JobLock();  // a filesystem that cannot lock: no lock, and nothing sweeps this job
  }
  JobLock lock;
  lock.fd_ = fd;
  lock.path_ = path;
  return lock;
}

void JobLock::release() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // while still held: nobody takes an unlocked file of a job for a dead one
  ::close(fd_);
  fd_ = -1;
}

JobLock::~JobLock() { release(); }

JobLock::JobLock(JobLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

JobLock& JobLock::operator=(JobLock&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

SweptJobs sweep_dead_jobs(const std::string& tmp_dir, const std::string& shm_dir) {
  namespace fs = std::filesystem;
  SweptJobs swept;
  std::error_code ec;
  std::vector<std::string> job_ids;
  for (fs::directory_iterator it(tmp_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const size_t prefix = std::strlen(kPrefix), suffix = std::strlen(kLockSuffix);
    if (name.size() > prefix + suffix && name.rfind(kPrefix, 0) == 0 &&
        name.compare(name.size() - suffix, suffix, kLockSuffix) == 0) {
      job_ids.push_back(name.substr(prefix, name.size() - prefix - suffix));
    }
  }
  for (const std::string& job_id : job_ids) {
    const std::string path = lock_path(tmp_dir, job_id);
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;  // gone meanwhile (or a link)
    // Another user's lock file names no job of ours: what it names is left alone (anyone may put one
    // in /tmp, naming any job id).
    if (struct stat st {}; ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
      ::close(fd);
      continue;
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd);  // alive (or a filesystem that cannot lock: leave it)
      continue;
    }
    std::error_code list_ec, file_ec;
    for (fs::directory_iterator it(shm_dir, list_ec), end; !list_ec && it != end; it.increment(list_ec)) {
      if (!is_pool_of_job(it->path().filename().string(), job_id)) continue;
      const uintmax_t size = fs::file_size(it->path(), file_ec);
      if (fs::remove(it->path(), file_ec)) swept.shm_bytes += file_ec ? 0 : size;
    }
    fs::remove_all(tmp_dir + "/" + kPrefix + job_id, file_ec);
    ::unlink(path.c_str());
    ::close(fd);
    swept.job_ids.push_back(job_id);
  }
  return swept;
}

}  // namespace vapipe
