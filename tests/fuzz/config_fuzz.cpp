// A job's config is written by hand: whatever YAML it holds must load or give an error naming the
// file, never crash. Globs are not expanded (a fuzzed "/**" would list the whole machine); paths
// resolve against a folder that does not exist, so nothing outside is read.
#include <cstddef>
#include <cstdint>
#include <string>

#include "pipeline/config.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string yaml(reinterpret_cast<const char*>(data), size);
  vapipe::ConfigLoadOptions options;
  options.expand_globs = false;
  auto config = vapipe::load_config_string(yaml, "fuzz.yaml", "/nonexistent/vapipe-fuzz", options);
  if (!config.ok()) {
    VAPIPE_FUZZ_CHECK(config.status().message().find("fuzz.yaml") != std::string::npos, "an error names the file");
  }
  return 0;
}
