// SIGINT/SIGTERM handling for stage processes and the supervisor: the first signal asks for a clean
// stop (drain what is in flight), the second for an immediate one.
#pragma once

#include <atomic>

namespace vapipe {

struct ShutdownFlags {
  std::atomic<bool> stop{false};   // first signal: stop taking new input, drain, exit
  std::atomic<bool> abort{false};  // second signal: stop now
};

// Installs the handlers; returns the process-wide flags they set.
ShutdownFlags& install_shutdown_handlers();
ShutdownFlags& shutdown_flags();

}  // namespace vapipe
