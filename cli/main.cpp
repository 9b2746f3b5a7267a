// vapipe: one binary, one subcommand per role. Exceptions stop here (the process boundary).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "pipeline/crash_report.h"
#include "pipeline/logging.h"
#include "pipeline/open_files.h"
#include "pipeline/transport.h"
#include "pipeline/supervisor.h"

namespace {

const char* kUsage = R"(vapipe - streaming video analytics pipeline

usage:
  vapipe run [CONFIG.yaml] [--job-id ID] [--resume]
                                        run a job: every stage as its own process (no CONFIG: the demo);
                                        --resume: an archive job goes on from its publish.jsonl_path file;
                                        SIGHUP: a live job re-reads the config's streams (adds, removes)
  vapipe stage NAME [--config CONFIG.yaml | --demo] [--job-id ID] [--lane N]
                                        run one stage process (ingest, preprocess, batch, infer, publish)
                                        of lane N (one lane per GPU; default 0)
  vapipe sub [--endpoint E] [--topic TOPIC]... [--count N] [--exit-on-summary] [--timeout S] [--with-topic]
             [--server-key KEY|FILE [--key SECRET_FILE]]
                                        print results and events from the bus as JSON lines; with
                                        --server-key, from a bus with CURVE (publish.curve_secret_key)
  vapipe keygen PREFIX                  write a CURVE key pair: PREFIX.secret (mode 0600), PREFIX.public
  vapipe status [https://]HOST:PORT [--token-file FILE] [--ca-file PEM] [--cert PEM --key PEM] [--json]
                                        a running job's streams, from publish.metrics_address's /healthz
  vapipe validate CONFIG.yaml [--reload] [--open] [--send-test] [--timeout S] [--at-once N]
                                        check a config and print it resolved; --open: and open each
                                        stream until its first frame (ok, or FAILED and why), at most
                                        S s each (15), N at once (8), and connect to each webhook,
                                        MQTT broker, Redis server and Kafka cluster; --send-test: send each of those
                                        a test message; --reload: and say what a reload (SIGHUP) of
                                        the job running with this file would do, or why it would be
                                        refused (exit 1)
  vapipe reload CONFIG.yaml [--timeout S]
                                        reload the live job running with this file (SIGHUP) and wait
                                        for what became of it: what it changed (exit 0), or why it
                                        was refused and nothing changed (exit 1); 2: no answer in S s
  vapipe segments RESULTS.jsonl...|- [--stream ID]... [--label LABEL]... [--min-frames N [--bridge]]
                  [--min-score S|LABEL=S]... [--each-label] [--skip-damaged] [--reconnect-grace S]
                  [--join NAME=PATTERN [--join-gap S]]...
                  [--clock media|capture|camera] [--frames DIR [--picture best|first]]
                  [--clips DIR [--clip-pre S] [--clip-post S]] [--moved FROM TO]... [--json|--csv]
                                        a job's results as runs of one label per stream: where in the
                                        video each class is (from publish.jsonl_path); --join: a
                                        camera's consecutive files as one stream; --frames: a picture
                                        of each, --clips: an MP4 cut from its file
  vapipe bench decode|preprocess|infer|per-frame [CONFIG.yaml] [options]
                                        measure one stage alone (see tools/bench.sh)
  vapipe discover [--timeout S] [--probe HOST[:PORT]]... [--user NAME --password-file FILE]
                  [--password-var NAME] [--profiles all|smallest|largest] [--open [--open-timeout S]]
                  [--config FILE] [--no-multicast] [--interface ADDR] [--json]
                                        find ONVIF cameras (WS-Discovery) and print their stream URIs
                                        as `streams:` entries (the password as ${CAMERA_PASSWORD});
                                        --open: and open each until its first frame; --config:
                                        leave out the streams that config has
  vapipe doctor [--json]                check this machine: CUDA, GPUs, LibTorch, GStreamer, NVDEC,
                                        ZeroMQ, free space, the shipped model (exit 1 if a check FAILs)
  vapipe --version

Exit status of run: 0 done, 1 bad arguments or config, 2 a stage failed, 3 some stream failed,
4 an archive job's stages were stopped before its end; an archive job stopped by SIGINT/SIGTERM
before its end ends by that signal (130/143 in a shell; --resume goes on), 130 also when a second
signal killed the stages.
)";

// The usage of one command: its lines of kUsage ("  vapipe NAME ..." and the more indented ones after
// it), and the exit statuses for run. Empty when there is no such command.
std::string usage_of(const std::string& command) {
  const std::string usage = kUsage;
  const std::string head = "  vapipe " + command + " ";
  size_t at = usage.find(head);
  if (at == std::string::npos) at = usage.find("  vapipe " + command + "\n");
  if (at == std::string::npos) return "";
  std::string text = "usage:\n";
  for (size_t line = at; line < usage.size();) {
    const size_t end = usage.find('\n', line);
    const std::string l = usage.substr(line, end - line);
    if (line != at && (l.rfind("    ", 0) != 0)) break;  // the next command, or the end of the list
    text += l + "\n";
    line = end == std::string::npos ? usage.size() : end + 1;
  }
  if (command == "run") text += usage.substr(usage.find("\nExit status of run:") + 1);
  return text;
}

std::string self_exe(const char* argv0) {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n > 0) return std::string(buf, static_cast<size_t>(n));
  return argv0;
}

// Ends the process once the command is done and every resource it held has been released (RAII, in
// the command's scope). The supervisor and doctor then skip the libraries' static destructors: on a
// GPU machine (H200, 2026-11-29) `vapipe run` and `vapipe doctor` died with SIGSEGV in them after a
// successful job, when CUDA's static runtime (ours) and shared runtime (LibTorch's) and the driver
// tore down in turn. ZeroMQ's context is terminated first, so no queued message is lost.
// VAPIPE_FULL_TEARDOWN=1 keeps the ordinary exit (to look into such a crash).
int finish(const std::string& command, int status) {
  const char* full = std::getenv("VAPIPE_FULL_TEARDOWN");
  if ((command != "run" && command != "doctor") || (full && std::string(full) == "1")) return status;
  vapipe::zmq_context().close();  // waits for each closed socket's queued messages (its linger)
  std::fflush(nullptr);
  std::_Exit(status);
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
  // `vapipe CMD --help`: that command's usage (it was taken as a file, a stage, or an unknown argument).
  if (!args.empty() && (args[0] == "-h" || args[0] == "--help")) {
    if (const std::string usage = usage_of(command); !usage.empty()) {
      std::fputs(usage.c_str(), stdout);
      return 0;
    }
  }
  // A level spdlog does not know it takes as "off": every error of the job would go unsaid.
  if (!vapipe::log_level_from_environment()) {
    std::fprintf(stderr, "vapipe: VAPIPE_LOG_LEVEL='%s' is not a log level: give trace, debug, info, warn, error or "
                         "off (or unset it: the config's log.level, info by default)\n", std::getenv("VAPIPE_LOG_LEVEL"));
    return vapipe::kExitUsage;
  }
  // Stages share the cores, so LibTorch's OpenMP threads must not spin between forward passes
  // (docs/architecture.md, Shutdown). libgomp reads this at load time: set it and start again.
  if (command == "stage" && !std::getenv("OMP_WAIT_POLICY") && !std::getenv("GOMP_SPINCOUNT")) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    execv(self_exe(argv[0]).c_str(), argv);  // returns only on failure: then go on as we are
  }
  // The crash report names the process: "run", "doctor", "stage infer", ... (kept for the process's life).
  static const std::string role = command == "stage" && !args.empty() ? "stage " + args[0] : command;
  vapipe::install_crash_report(role.c_str());
  // GStreamer holds some 20 descriptors per camera: the shell's default of 1,024 is too few for a lane
  // of 64 (pipeline/open_files.h). Stages started by `run` inherit it; by hand or in a container, too.
  if (command == "run" || command == "stage") vapipe::raise_open_file_limit();
  int status = -1;
  try {
    if (command == "run") status = vapipe::cli::run_command(args, self_exe(argv[0]));
    if (command == "stage") status = vapipe::cli::stage_command(args);
    if (command == "sub") status = vapipe::cli::sub_command(args);
    if (command == "keygen") status = vapipe::cli::keygen_command(args);
    if (command == "status") status = vapipe::cli::status_command(args);
    if (command == "bench") status = vapipe::cli::bench_command(args);
    if (command == "validate") status = vapipe::cli::validate_command(args);
    if (command == "reload") status = vapipe::cli::reload_command(args);
    if (command == "doctor") status = vapipe::cli::doctor_command(args);
    if (command == "segments") status = vapipe::cli::segments_command(args);
    if (command == "discover") status = vapipe::cli::discover_command(args);
    if (command == "--version" || command == "version") {
      std::printf("vapipe %s\n", VAPIPE_VERSION);
      status = 0;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vapipe %s: unexpected error: %s\n", command.c_str(), e.what());
    status = vapipe::kExitStageFailed;
  }
  if (status >= 0) return finish(command, status);
  std::fprintf(stderr, "vapipe: unknown command '%s'\n\n%s", command.c_str(), kUsage);
  return vapipe::kExitUsage;
}
