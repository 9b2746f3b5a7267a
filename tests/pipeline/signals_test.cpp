// The shutdown flags as real signals set them: the first asks for a clean stop, the same signal sent
// twice at once (`timeout`'s to its process group, systemd's to its control group) is still one, and a
// second one a moment later, or the other signal at once (the supervisor's "stop now"), is an abort.
#include "pipeline/signals.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <thread>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace vapipe {
namespace {

// The process-wide flags, with their handlers, as a process starts with them.
ShutdownFlags& fresh_flags() {
  ShutdownFlags& flags = install_shutdown_handlers();
  flags.stop = false;
  flags.abort = false;
  flags.signal = 0;
  return flags;
}

TEST(ShutdownSignals, ASignalSentTwiceAtOnceIsOneStopAndALaterOneAnAbort) {
  ShutdownFlags& flags = fresh_flags();
  raise(SIGINT);
  EXPECT_TRUE(flags.stop.load());
  EXPECT_FALSE(flags.abort.load());
  EXPECT_EQ(flags.signal.load(), SIGINT);
  raise(SIGINT);  // at once: the same request
  EXPECT_FALSE(flags.abort.load());
  EXPECT_EQ(flags.signal.load(), SIGINT);
  std::this_thread::sleep_for(std::chrono::nanoseconds(kDuplicateSignalWindowNs) + std::chrono::milliseconds(50));
  raise(SIGINT);  // a person's second Ctrl-C
  EXPECT_TRUE(flags.abort.load());
  EXPECT_EQ(flags.signal.load(), SIGINT) << "the first signal is the one that stopped it";
}

TEST(ShutdownSignals, TheOtherSignalAtOnceIsAnAbort) {
  ShutdownFlags& flags = fresh_flags();
  raise(SIGINT);
  raise(SIGTERM);  // the supervisor's "stop now" to a stage: SIGINT, then SIGTERM
  EXPECT_TRUE(flags.stop.load());
  EXPECT_TRUE(flags.abort.load());
}

// `vapipe run` stops a stage the moment it has forked it (a Ctrl-C as the job starts). The child must
// find the stop waiting for its own handlers: taken by the parent's handler in the child before the
// exec, it was lost, and ingest ran every stream to its end.
TEST(ShutdownSignals, AStopSentTheMomentAStageIsForkedWaitsForItsHandlers) {
  ShutdownFlags& flags = fresh_flags();  // the supervisor's handlers, which the child inherits
  const pid_t child = fork_holding_stop_signals();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Until the signal comes: waiting (held), or taken already (by the handler the child inherited).
    sigset_t pending;
    bool held = false;
    for (int i = 0; i < 1000 && !held && !shutdown_flags().stop.load(); ++i) {
      sigpending(&pending);
      held = sigismember(&pending, SIGTERM) == 1;
      if (!held) usleep(10'000);
    }
    if (!held) _exit(1);
    install_shutdown_handlers();  // as the stage does after its exec: the stop is taken now
    _exit(shutdown_flags().stop.load() && shutdown_flags().signal.load() == SIGTERM ? 0 : 2);
  }
  kill(child, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of the signal: status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << (WEXITSTATUS(status) == 1 ? "the stop was taken before it was held"
                                                                  : "the stop held was not taken by the handlers");
  sigset_t mask;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  EXPECT_FALSE(sigismember(&mask, SIGTERM)) << "the parent's own stop signals are not held after the fork";
  EXPECT_FALSE(sigismember(&mask, SIGINT));
  EXPECT_FALSE(flags.stop.load()) << "the child's signal is not the parent's";
}

}  // namespace
}  // namespace vapipe
