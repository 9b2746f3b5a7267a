#include "pipeline/open_files.h"

#include <cstdint>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace vapipe {
namespace {

// A process may raise its soft limit to its hard limit, never past it; checked in a child, so that
// this test's own limit is left as it was.
TEST(OpenFiles, TheSoftLimitIsRaisedToTheHardLimit) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    rlimit rl{100, 200};
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(10);
    const OpenFileLimit raised = raise_open_file_limit();
    if (raised.before != 100) _exit(11);
    if (raised.soft != 200 || raised.hard != 200) _exit(12);
    if (open_file_limit().soft != 200) _exit(13);  // in force, not only reported
    if (raise_open_file_limit().soft != 200) _exit(14);  // again: nothing to do
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: setrlimit failed, 11: before, 12: raised, 13: in force, 14: again";
}

// 64 cameras need more than the 1,024 a shell allows by default: the message says how many, what the
// limit is and how to raise it; with room, nothing is said.
TEST(OpenFiles, AShortfallNamesWhatIsNeededTheLimitAndHowToRaiseIt) {
  const uint64_t needed = open_files_needed(64, 0);
  EXPECT_EQ(needed, kOpenFilesPerProcess + 64 * kOpenFilesPerNetworkStream);
  EXPECT_GT(needed, 1024u);
  OpenFileLimit limit;
  limit.soft = limit.hard = 1024;
  const std::string text = open_file_shortfall(needed, limit, "ingest lane 0: its 64 streams (64 from the network)");
  EXPECT_NE(text.find("ingest lane 0: its 64 streams (64 from the network) need about " + std::to_string(needed) +
                      " open files, but this process may have 1024 (RLIMIT_NOFILE, hard limit 1024)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("LimitNOFILE="), std::string::npos) << text;
  EXPECT_NE(text.find("--ulimit nofile=" + std::to_string(needed)), std::string::npos) << text;
  limit.soft = 4096;
  EXPECT_EQ(open_file_shortfall(needed, limit, "x"), "");
  EXPECT_EQ(open_file_shortfall(open_files_needed(0, 64), OpenFileLimit{1024, 1024, 1024}, "x"), "");  // files
}

}  // namespace
}  // namespace vapipe
