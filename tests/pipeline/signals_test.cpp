// The shutdown flags as real signals set them: the first asks for a clean stop, the same request sent
// twice at once (`timeout`'s signal to its process group, systemd's to its control group) is still one,
// and a second one a moment later asks for an immediate stop.
#include "pipeline/signals.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <thread>

namespace vapipe {
namespace {

TEST(ShutdownSignals, ASignalSentTwiceAtOnceIsOneStopAndALaterOneAnAbort) {
  ShutdownFlags& flags = install_shutdown_handlers();
  ASSERT_FALSE(flags.stop.load());
  raise(SIGINT);
  EXPECT_TRUE(flags.stop.load());
  EXPECT_FALSE(flags.abort.load());
  EXPECT_EQ(flags.signal.load(), SIGINT);
  raise(SIGINT);  // at once: the same request
  raise(SIGTERM);
  EXPECT_FALSE(flags.abort.load());
  EXPECT_EQ(flags.signal.load(), SIGINT) << "the first signal is the one that stopped it";
  std::this_thread::sleep_for(std::chrono::nanoseconds(kDuplicateSignalWindowNs) + std::chrono::milliseconds(50));
  raise(SIGINT);  // a person's second Ctrl-C
  EXPECT_TRUE(flags.abort.load());
}

}  // namespace
}  // namespace vapipe
