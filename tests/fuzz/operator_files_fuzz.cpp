// Files an operator writes and vapipe re-reads while it runs: CURVE key files (a live job's authorized
// keys are read again when they change), a model's labels, the metrics bearer token. Whatever they
// hold gives the keys or an error naming the file, never a crash. The bytes are a file in memory
// (memfd), read through /proc/self/fd.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "pipeline/config.h"
#include "pipeline/curve.h"
#include "stages/infer/labels.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

template <typename R>
void expect_named(const R& result, const std::string& path, const char* what) {
  if (!result.ok()) VAPIPE_FUZZ_CHECK(result.status().message().find(path) != std::string::npos, what);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memfd_create("vapipe-fuzz-operator-file", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (size && write(fd, data, size) != static_cast<ssize_t>(size)) {
    close(fd);
    return 0;
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  expect_named(vapipe::read_curve_public_key_file(path), path, "a public key file's error names it");
  expect_named(vapipe::read_curve_secret_key_file(path), path, "a secret key file's error names it");
  (void)vapipe::read_curve_public_key_argument(path);
  expect_named(vapipe::load_labels(path), path, "a labels file's error names it");
  (void)vapipe::read_metrics_token_file(path);
  close(fd);
  return 0;
}
