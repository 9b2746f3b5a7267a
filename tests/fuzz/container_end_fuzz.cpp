// Archive files are read by name: a damaged, cut or hostile file's headers (MP4 boxes, Matroska
// elements, AVI chunks, MPEG-TS packets, a recorder's own header) must give an answer or nothing,
// never a crash or a hang. The bytes are a file in memory (memfd), read through /proc/self/fd.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "stages/ingest/container_end.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memfd_create("vapipe-fuzz-file", MFD_CLOEXEC);
  if (fd < 0) return 0;
  size_t written = 0;
  while (written < size) {
    const ssize_t n = write(fd, data + written, size - written);
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  (void)vapipe::describe_container_end(vapipe::check_container_end(path));
  (void)vapipe::unreadable_recording(path);
  (void)vapipe::describe_unidentified_file(path);
  close(fd);
  return 0;
}
