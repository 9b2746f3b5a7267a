// The shutdown flags as real signals set them: the first asks for a clean stop, the same signal sent
// twice at once (`timeout`'s to its process group, systemd's to its control group) is still one, and a
// second one a moment later, or the other signal at once (the supervisor's "stop now"), is an abort.
#include "pipeline/signals.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <thread>

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

}  // namespace
}  // namespace vapipe
