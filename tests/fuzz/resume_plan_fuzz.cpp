// `vapipe run --resume` reads the job's results file after a crash, a kill or a full disk: its last
// line may be cut anywhere, and a damaged disk or a hand edit may leave anything in it. It must give a
// plan or an error naming the file, never crash; and the plan keeps whole lines only (publish appends
// after keep_bytes, so a cut inside a line would corrupt the file).
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "pipeline/config.h"
#include "pipeline/resume.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

struct Job {
  int fd = -1;
  vapipe::Config config;
};

// The file is one memfd, rewritten for each input; the config names it, with three streams.
const Job& job() {
  static const Job j = [] {
    Job made;
    made.fd = memfd_create("vapipe-fuzz-results", MFD_CLOEXEC);
    const std::string src = VAPIPE_SOURCE_DIR;
    const std::string yaml = "job: {name: fuzz, mode: archive}\n"
                             "streams:\n"
                             "  - {id: ball, uri: 'test://ball?frames=30'}\n"
                             "  - {id: smpte, uri: 'test://smpte?frames=30'}\n"
                             "  - {id: snow, uri: 'test://snow?frames=30'}\n"
                             "infer: {model: " + src + "/models/pattern_cnn.pt, labels: " + src +
                             "/models/pattern_cnn.labels.txt}\n"
                             "publish: {jsonl_path: /proc/self/fd/" + std::to_string(made.fd) + "}\n";
    auto config = vapipe::load_config_string(yaml, "fuzz.yaml", src);
    if (made.fd < 0 || !config.ok()) {
      std::fprintf(stderr, "resume_plan_fuzz: the fuzz job's config does not load: %s\n",
                   config.ok() ? "no memfd" : config.status().message().c_str());
      std::abort();
    }
    made.config = *config;
    return made;
  }();
  return j;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Job& j = job();
  if (ftruncate(j.fd, 0) != 0 || (size && pwrite(j.fd, data, size, 0) != static_cast<ssize_t>(size))) return 0;
  auto plan = vapipe::read_resume_plan(j.config);
  if (!plan.ok()) {
    VAPIPE_FUZZ_CHECK(plan.status().message().find(j.config.publish.jsonl_path) != std::string::npos,
                      "an error names the results file");
    return 0;
  }
  VAPIPE_FUZZ_CHECK(plan->keep_bytes <= size, "the plan keeps no more than the file");
  VAPIPE_FUZZ_CHECK(plan->keep_bytes == 0 || data[plan->keep_bytes - 1] == '\n', "the plan keeps whole lines");
  return 0;
}
