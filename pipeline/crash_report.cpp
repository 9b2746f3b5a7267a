#include "pipeline/crash_report.h"

#include <execinfo.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <initializer_list>

namespace vapipe {
namespace {

const char* g_role = "vapipe";

void write_text(const char* s) {
  ssize_t ignored = ::write(STDERR_FILENO, s, std::strlen(s));
  (void)ignored;
}

// Only async-signal-safe calls, apart from backtrace(), whose one unsafe step (loading libgcc_s) is
// done in install_crash_report().
void on_fatal_signal(int sig) {
  char line[160];
  const char* name = sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS" : sig == SIGFPE ? "SIGFPE"
                     : sig == SIGILL ? "SIGILL" : sig == SIGABRT ? "SIGABRT" : "a fatal signal";
  std::snprintf(line, sizeof line, "vapipe %s (pid %d): %s; backtrace:\n", g_role, static_cast<int>(getpid()), name);
  write_text(line);
  void* frames[64];
  const int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  std::signal(sig, SIG_DFL);  // SA_RESETHAND did so already; raise() then ends the process as before
  std::raise(sig);
}

}  // namespace

void install_crash_report(const char* role) {
  g_role = role;
  void* warm_up[1];
  backtrace(warm_up, 1);
  struct sigaction sa {};
  sa.sa_handler = on_fatal_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND | SA_NODEFER;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(sig, &sa, nullptr);
}

}  // namespace vapipe
