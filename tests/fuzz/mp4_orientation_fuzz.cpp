// An MP4's video track's turn is read from files the user names (`vapipe segments --clips` keeps a
// phone video's turn) and written into the clips ingest makes: a damaged, cut or hostile file's boxes
// must give an answer or an error, never a crash or a hang. When a turn can be written, it reads back
// as written and the file keeps its size. The first byte picks the turn; the rest is the file, in
// memory (memfd), opened through /proc/self/fd.
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "stages/ingest/mp4_orientation.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const auto turn = static_cast<vapipe::Orientation>(data[0] % 8);
  const int fd = memfd_create("vapipe-fuzz-mp4", MFD_CLOEXEC);
  if (fd < 0) return 0;
  size_t written = 0;
  while (written + 1 < size) {
    const ssize_t n = write(fd, data + 1 + written, size - 1 - written);
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  vapipe::Result<vapipe::Orientation> before = vapipe::mp4_orientation(path);
  if (vapipe::set_mp4_orientation(path, turn).ok()) {
    VAPIPE_FUZZ_CHECK(before.ok() || before.status().code() == vapipe::StatusCode::kInvalidArgument,
                      "a file whose turn can be written has a video track whose matrix could be read");
    vapipe::Result<vapipe::Orientation> after = vapipe::mp4_orientation(path);
    VAPIPE_FUZZ_CHECK(after.ok() && *after == turn, "a turn written reads back as written");
    struct stat st {};
    VAPIPE_FUZZ_CHECK(fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) == written, "writing a turn keeps the file's size");
  }
  close(fd);
  return 0;
}
