// A fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) prints one line naming the process and the
// signal, then a backtrace, on stderr; then the signal takes its default course (core, exit status).
// Without it a stage or the supervisor dies with nothing but "exit -11".
#pragma once

namespace vapipe {

// `role` must outlive the process (a string literal): the handler may not allocate.
void install_crash_report(const char* role);

}  // namespace vapipe
