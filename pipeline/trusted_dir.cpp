#include "pipeline/trusted_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace vapipe {

std::string not_this_users_own(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return path + ": " + std::strerror(errno);
  if (S_ISLNK(st.st_mode)) return path + " is a symbolic link";
  if (st.st_uid != ::geteuid()) {
    return path + " is owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " +
           std::to_string(::geteuid()) + ")";
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) return path + " may be written by other users";
  return "";
}

Status make_trusted_dir(const std::string& path, const std::string& what) {
  if (::mkdir(path.c_str(), 0755) == 0) {
    // (a umask of 0 would leave it writable by all)
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
      ::chmod(path.c_str(), st.st_mode & 0755 & ~(S_IWGRP | S_IWOTH));
    }
    return Status::Ok();
  }
  if (errno != EEXIST) return Unavailable(what + " " + path + ": cannot be made (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return Unavailable(what + " " + path + ": " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) {
    return FailedPrecondition(what + " " + path + " is there already and is not a folder (" +
                              (S_ISLNK(st.st_mode) ? "a symbolic link" : "a file") +
                              "): another user's? remove it, or give the job another --job-id");
  }
  if (st.st_uid != ::geteuid()) {
    return FailedPrecondition(what + " " + path + " is there already and is owned by uid " + std::to_string(st.st_uid) +
                              ", not by this user (uid " + std::to_string(::geteuid()) +
                              "): its files would be trusted as the job's own; remove it, or give the job another --job-id");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && ::chmod(path.c_str(), (st.st_mode & 07755) & ~(S_IWGRP | S_IWOTH)) != 0) {
    return Unavailable(what + " " + path + ": cannot be kept from other users' writes (" + std::strerror(errno) + ")");
  }
  return Status::Ok();
}

}  // namespace vapipe
