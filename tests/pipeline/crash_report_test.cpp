#include "pipeline/crash_report.h"

#include <cstdlib>
#include <gtest/gtest.h>

#include <csignal>

namespace vapipe {
namespace {

// Not inlined: the backtrace must hold a frame of this test's own code.
[[gnu::noinline]] void crash_here() { std::raise(SIGSEGV); }

TEST(CrashReport, AFatalSignalNamesTheProcessAndTheSignalAndPrintsABacktrace) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        install_crash_report("test-role");
        crash_here();
      },
      ::testing::KilledBySignal(SIGSEGV), "vapipe test-role \\(pid [0-9]+\\): SIGSEGV; backtrace:\n.*vapipe_pipeline_tests");
}

TEST(CrashReport, AnAbortIsReportedAndStillEndsTheProcessWithSigabrt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        install_crash_report("test-role");
        std::abort();
      },
      ::testing::KilledBySignal(SIGABRT), "SIGABRT; backtrace:");
}

// What the process was doing, when it said: `vapipe validate --open` names the files it was opening.
TEST(CrashReport, TheContextSetLastIsSaidAfterTheFirstLine) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        install_crash_report("validate");
        set_crash_context("opening 'a' (file:///a.mkv)");
        set_crash_context("opening 'b' (file:///b.mkv)");
        crash_here();
      },
      ::testing::KilledBySignal(SIGSEGV), "SIGSEGV; backtrace:\n  while opening 'b' \\(file:///b.mkv\\)\n");
}

}  // namespace
}  // namespace vapipe
