// A fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) prints one line naming the process and the
// signal, then a backtrace, on stderr; then the signal takes its default course (core, exit status).
// Without it a stage or the supervisor dies with nothing but "exit -11".
#pragma once

#include <string>

namespace vapipe {

// `role` must outlive the process (a string literal): the handler may not allocate.
void install_crash_report(const char* role);

// What the process is doing, printed after the first line of a crash report ("" to clear): `vapipe
// validate --open` names the files it is opening, one of which may crash GStreamer's decoder (it
// segfaulted without naming any, found 2026-12-07). Copied (up to 2 KB); any thread.
void set_crash_context(const std::string& text);

}  // namespace vapipe
