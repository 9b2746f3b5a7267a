// `vapipe segments` reads a results file (JSON lines) that a crash may have cut, a disk may have
// damaged, or a person may have edited: it must give segments or an error naming the file and line,
// never crash, in each mode (top-1 label, each label of the top-k, and every stream joined as one
// camera's files, bridged).
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "cli/segments.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (int mode : {0, 1, 2}) {
    vapipe::cli::SegmentOptions options;
    options.each_label = mode == 1;
    options.min_score = 0.2;
    if (mode == 2) {
      options.joins = {{"joined", "[a-m]*"}, {"z", "*"}};
      options.bridge = true;
      options.min_frames = 2;
    }
    std::istringstream in(text);
    uint64_t incomplete = 0;
    auto segments = vapipe::cli::read_segments(in, "results.jsonl", options, &incomplete);
    if (!segments.ok()) {
      const std::string& message = segments.status().message();
      VAPIPE_FUZZ_CHECK(message.find("results.jsonl") != std::string::npos || message.rfind("--join ", 0) == 0,
                        "an error names the file, or the join");
    }
  }
  return 0;
}
