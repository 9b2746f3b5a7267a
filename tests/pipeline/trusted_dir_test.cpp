#include "pipeline/trusted_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/fakes/process_temp_dir.h"

namespace vapipe {
namespace {

namespace fs = std::filesystem;

mode_t mode_of(const fs::path& p) {
  struct stat st {};
  ::lstat(p.c_str(), &st);
  return st.st_mode & 07777;
}

// Made, or taken as it is: this user's, and no other's to write (a folder of ours others could write
// loses that).
TEST(TrustedDir, AFolderIsMadeOrKeptThisUsersAndNoOneElsesToWrite) {
  const fs::path dir = testing::empty_temp_dir("trusted-dir");
  const fs::path run = dir / "vapipe-job";
  ASSERT_TRUE(make_trusted_dir(run.string(), "the job's run folder").ok());
  EXPECT_EQ(mode_of(run) & 022, 0u);
  EXPECT_EQ(not_this_users_own(run.string()), "");
  fs::permissions(run, fs::perms::all);  // 0777: as a umask of 0 or a chmod leaves it
  EXPECT_EQ(not_this_users_own(run.string()), run.string() + " may be written by other users");
  ASSERT_TRUE(make_trusted_dir(run.string(), "the job's run folder").ok());
  EXPECT_EQ(mode_of(run), 0755u);
}

// A link, a file, or another user's folder where the run folder goes: refused, named.
TEST(TrustedDir, ALinkAFileOrAnotherUsersFolderIsRefused) {
  const fs::path dir = testing::empty_temp_dir("trusted-dir-refused");
  fs::create_directories(dir / "elsewhere");
  fs::create_directory_symlink(dir / "elsewhere", dir / "linked");
  Status linked = make_trusted_dir((dir / "linked").string(), "the job's run folder");
  ASSERT_FALSE(linked.ok());
  EXPECT_NE(linked.message().find("the job's run folder " + (dir / "linked").string() +
                                  " is there already and is not a folder (a symbolic link)"), std::string::npos)
      << linked.message();
  std::ofstream((dir / "file").string()) << "";
  EXPECT_FALSE(make_trusted_dir((dir / "file").string(), "the job's run folder").ok());
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to give a folder to another user";
  fs::create_directories(dir / "theirs");
  ASSERT_EQ(::chown((dir / "theirs").c_str(), 65534, 65534), 0);
  Status theirs = make_trusted_dir((dir / "theirs").string(), "the job's run folder");
  ASSERT_FALSE(theirs.ok());
  EXPECT_NE(theirs.message().find("is owned by uid 65534, not by this user (uid 0)"), std::string::npos)
      << theirs.message();
}

}  // namespace
}  // namespace vapipe
