#include "pipeline/signals.h"

#include <csignal>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include <cstdint>
#include <ctime>

namespace vapipe {

ShutdownFlags& shutdown_flags() {
  static ShutdownFlags flags;
  return flags;
}

namespace {
int64_t monotonic_ns() {  // clock_gettime is async-signal-safe
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}
void on_signal(int signo) {
  ShutdownFlags& f = shutdown_flags();
  const int64_t now = monotonic_ns();
  if (!f.stop.exchange(true)) {
    f.first_signal_ns.store(now);
    f.signal.store(signo);
    return;
  }
  if (signo == f.signal.load() && now - f.first_signal_ns.load() < kDuplicateSignalWindowNs) return;  // sent twice
  f.abort.store(true);
}
void on_reload_signal(int) { shutdown_flags().reload.store(true); }
}  // namespace

void install_reload_handler() {
  shutdown_flags();
  struct sigaction sa {};
  sa.sa_handler = on_reload_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGHUP, &sa, nullptr);
}

pid_t fork_holding_stop_signals() {
  sigset_t stops;
  sigset_t before;
  sigemptyset(&stops);
  sigaddset(&stops, SIGINT);
  sigaddset(&stops, SIGTERM);
  // Held in the parent across the fork, so the child has them held from its first instruction: one
  // sent before the child ran at all (a busy machine can leave it unscheduled for tens of ms) would
  // run the parent's handler in the child's copy of its memory, which the exec then threw away.
  pthread_sigmask(SIG_BLOCK, &stops, &before);
  const pid_t pid = fork();
  if (pid != 0) pthread_sigmask(SIG_SETMASK, &before, nullptr);  // the parent (or a failed fork) as it was
  return pid;
}

ShutdownFlags& install_shutdown_handlers() {
  ShutdownFlags& f = shutdown_flags();  // constructed before any signal can arrive
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: blocking waits wake up and look at the flags
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // A stage's stop signals were held back until now (fork_holding_stop_signals): one that came while it started
  // is taken now, as a stop.
  sigset_t stops;
  sigemptyset(&stops);
  sigaddset(&stops, SIGINT);
  sigaddset(&stops, SIGTERM);
  pthread_sigmask(SIG_UNBLOCK, &stops, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  // A file-size limit (ulimit -f) makes a write fail with EFBIG, which publish reports as it does a full
  // disk, instead of killing the process (SIGXFSZ's default).
  std::signal(SIGXFSZ, SIG_IGN);
  return f;
}

}  // namespace vapipe
