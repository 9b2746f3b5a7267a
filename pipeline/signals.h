// SIGINT/SIGTERM handling for stage processes and the supervisor: the first signal asks for a clean
// stop (drain what is in flight), the second for an immediate one. The first signal again within
// kDuplicateSignalWindowNs is the same request sent twice, not a second one: `timeout` sends its
// signal to the command and then to its whole process group, and systemd's control-group stop reaches
// ingest as `vapipe run` forwards it (either made a job's clean stop a kill). The other signal at once
// is a second request (the supervisor's SIGINT then SIGTERM: "stop now").
#pragma once

#include <atomic>
#include <cstdint>

#include <sys/types.h>

namespace vapipe {

inline constexpr int64_t kDuplicateSignalWindowNs = 250'000'000;  // a person's second Ctrl-C takes longer

struct ShutdownFlags {
  std::atomic<bool> stop{false};   // first signal: stop taking new input, drain, exit
  std::atomic<bool> abort{false};  // second signal: stop now
  std::atomic<int> signal{0};      // the first one's number (SIGINT or SIGTERM), 0 before
  std::atomic<int64_t> first_signal_ns{0};  // CLOCK_MONOTONIC when it came
  std::atomic<bool> reload{false}; // SIGHUP (supervisor only, install_reload_handler): re-read the streams
};

// Installs the handlers; returns the process-wide flags they set. SIGINT and SIGTERM held back by
// fork_holding_stop_signals are let through then: one that came meanwhile is taken at once.
ShutdownFlags& install_shutdown_handlers();
// fork() for a stage started by `vapipe run`: in the child, SIGINT and SIGTERM are held (across its
// exec) until the stage has its handlers. Sent earlier (a job stopped as it starts, or as a lane
// restarts), they killed it, and the job counted that as the stage failing (exit 2), or the stop was
// lost. The parent's signal mask is as it was.
pid_t fork_holding_stop_signals();
ShutdownFlags& shutdown_flags();
// SIGHUP sets `reload` instead of ending the process (`vapipe run`: add and remove streams).
void install_reload_handler();

}  // namespace vapipe
