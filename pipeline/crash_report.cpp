#include "pipeline/crash_report.h"

#include <execinfo.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <mutex>
#include <cstdio>
#include <cstring>
#include <initializer_list>

namespace vapipe {
namespace {

const char* g_role = "vapipe";
// Two buffers, the one in force named by g_context_in_use: a crash while one is rewritten reads the other.
char g_context[2][2048];
std::atomic<int> g_context_in_use{0};
std::mutex g_context_mutex;  // writers only

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
  const char* context = g_context[g_context_in_use.load()];
  if (context[0] != '\0') {
    write_text("  while ");
    write_text(context);
    write_text("\n");
  }
  void* frames[64];
  const int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  std::signal(sig, SIG_DFL);  // SA_RESETHAND did so already; raise() then ends the process as before
  std::raise(sig);
}

}  // namespace

void set_crash_context(const std::string& text) {
  std::lock_guard<std::mutex> lock(g_context_mutex);
  const int spare = 1 - g_context_in_use.load();
  const size_t n = std::min(text.size(), sizeof g_context[spare] - 1);
  std::memcpy(g_context[spare], text.data(), n);
  g_context[spare][n] = '\0';
  g_context_in_use.store(spare);
}

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
