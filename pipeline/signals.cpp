#include "pipeline/signals.h"

#include <csignal>

namespace vapipe {

ShutdownFlags& shutdown_flags() {
  static ShutdownFlags flags;
  return flags;
}

namespace {
void on_signal(int) {
  ShutdownFlags& f = shutdown_flags();
  if (f.stop.exchange(true)) f.abort.store(true);
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

ShutdownFlags& install_shutdown_handlers() {
  ShutdownFlags& f = shutdown_flags();  // constructed before any signal can arrive
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: blocking waits wake up and look at the flags
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  return f;
}

}  // namespace vapipe
