// vapipe: one binary, one subcommand per role. Exceptions stop here (the process boundary).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "pipeline/supervisor.h"

namespace {

const char* kUsage = R"(vapipe - streaming video analytics pipeline

usage:
  vapipe run [CONFIG.yaml] [--job-id ID]
                                        run a job: every stage as its own process (no CONFIG: the demo)
  vapipe stage NAME [--config CONFIG.yaml | --demo] [--job-id ID] [--lane N]
                                        run one stage process (ingest, preprocess, batch, infer, publish)
                                        of lane N (one lane per GPU; default 0)
  vapipe sub [--endpoint E] [--topic PREFIX]... [--count N] [--exit-on-summary] [--timeout S] [--with-topic]
                                        print results and events from the bus as JSON lines
  vapipe validate CONFIG.yaml           check a config and print it resolved
  vapipe bench decode|preprocess|infer|per-frame [CONFIG.yaml] [options]
                                        measure one stage alone (see tools/bench.sh)
  vapipe doctor [--json]                check this machine: CUDA, GPUs, LibTorch, GStreamer, NVDEC,
                                        ZeroMQ, free space, the shipped model (exit 1 if a check FAILs)
  vapipe --version

Exit status of run: 0 done, 1 bad arguments or config, 2 a stage failed, 3 some stream failed,
130 interrupted (a second SIGINT/SIGTERM killed the stages).
)";

std::string self_exe(const char* argv0) {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n > 0) return std::string(buf, static_cast<size_t>(n));
  return argv0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? vapipe::kExitUsage : 0;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  // Stages share the cores, so LibTorch's OpenMP threads must not spin between forward passes
  // (docs/architecture.md, Shutdown). libgomp reads this at load time: set it and start again.
  if (command == "stage" && !std::getenv("OMP_WAIT_POLICY") && !std::getenv("GOMP_SPINCOUNT")) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    execv(self_exe(argv[0]).c_str(), argv);  // returns only on failure: then go on as we are
  }
  try {
    if (command == "run") return vapipe::cli::run_command(args, self_exe(argv[0]));
    if (command == "stage") return vapipe::cli::stage_command(args);
    if (command == "sub") return vapipe::cli::sub_command(args);
    if (command == "bench") return vapipe::cli::bench_command(args);
    if (command == "validate") return vapipe::cli::validate_command(args);
    if (command == "doctor") return vapipe::cli::doctor_command(args);
    if (command == "--version" || command == "version") {
      std::printf("vapipe %s\n", VAPIPE_VERSION);
      return 0;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vapipe %s: unexpected error: %s\n", command.c_str(), e.what());
    return vapipe::kExitStageFailed;
  }
  std::fprintf(stderr, "vapipe: unknown command '%s'\n\n%s", command.c_str(), kUsage);
  return vapipe::kExitUsage;
}
