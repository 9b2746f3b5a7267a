// SIGINT/SIGTERM handling for stage processes and the supervisor: the first signal asks for a clean
// stop (drain what is in flight), the second for an immediate one.
#pragma once

#include <atomic>

namespace vapipe {

struct ShutdownFlags {
  std::atomic<bool> stop{false};   // first signal: stop taking new input, drain, exit
  std::atomic<bool> abort{false};  // second signal: stop now
  std::atomic<bool> reload{false}; // SIGHUP (supervisor only, install_reload_handler): re-read the streams
};

// Installs the handlers; returns the process-wide flags they set.
ShutdownFlags& install_shutdown_handlers();
ShutdownFlags& shutdown_flags();
// SIGHUP sets `reload` instead of ending the process (`vapipe run`: add and remove streams).
void install_reload_handler();

}  // namespace vapipe
