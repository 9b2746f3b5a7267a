// A folder of this test process's own under the test temp dir, removed when the process ends: tests
// that write files into it leave nothing behind in /tmp (folders named for each run's pid piled up).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace vapipe::testing {

class ProcessTempDir {
 public:
  ProcessTempDir()
      : owner_(::getpid()),
        path_(std::filesystem::path(::testing::TempDir()) / ("vapipe-test-" + std::to_string(owner_))) {
    std::filesystem::create_directories(path_);
  }
  ~ProcessTempDir() {
    // A forked child that exits runs this too: only the process that made the folder removes it.
    if (::getpid() != owner_) return;
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ProcessTempDir(const ProcessTempDir&) = delete;
  ProcessTempDir& operator=(const ProcessTempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  pid_t owner_;
  std::filesystem::path path_;
};

// This process's temp folder, made at the first call.
inline const std::filesystem::path& process_temp_dir() {
  static const ProcessTempDir dir;
  return dir.path();
}

// `name` under this process's temp folder, emptied: a test's own folder for the files it writes.
inline std::filesystem::path empty_temp_dir(const std::string& name) {
  const std::filesystem::path dir = process_temp_dir() / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace vapipe::testing
