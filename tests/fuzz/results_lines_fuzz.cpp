// `vapipe segments` reads a results file (JSON lines) that a crash may have cut, a disk may have
// damaged, or a person may have edited: it must give segments or an error naming the file and line,
// never crash, in either mode (top-1 label, or each label of the top-k).
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "cli/segments.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (bool each_label : {false, true}) {
    vapipe::cli::SegmentOptions options;
    options.each_label = each_label;
    options.min_score = 0.2;
    std::istringstream in(text);
    uint64_t incomplete = 0;
    auto segments = vapipe::cli::read_segments(in, "results.jsonl", options, &incomplete);
    if (!segments.ok()) {
      VAPIPE_FUZZ_CHECK(segments.status().message().find("results.jsonl") != std::string::npos,
                        "an error names the file");
    }
  }
  return 0;
}
