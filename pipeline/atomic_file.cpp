#include "pipeline/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace vapipe {

Status write_file_atomically(const std::string& path, const std::string& text, mode_t mode) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, mode);
  if (fd < 0) return Unavailable("cannot write " + tmp + ": " + std::strerror(errno));
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const bool closed = ::close(fd) == 0;
  if (!written || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return Unavailable("cannot write " + path + ": " + why);
  }
  return Status::Ok();
}

Result<std::string> read_file_bytes(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Unavailable("cannot read " + path + ": " + std::strerror(errno));
  std::string bytes;
  char block[65536];
  size_t n = 0;
  while ((n = std::fread(block, 1, sizeof block, f)) > 0) bytes.append(block, n);
  const int error = std::ferror(f) ? errno : 0;
  std::fclose(f);
  if (error != 0) return Unavailable("cannot read " + path + ": " + std::strerror(error));
  return bytes;
}

}  // namespace vapipe
