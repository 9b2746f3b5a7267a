#include "stages/publish/results_file.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/fakes/process_temp_dir.h"

namespace vapipe {
namespace {

// The kernel refuses writes past the process's file-size limit (EFBIG) as it refuses them on a full
// disk (ENOSPC): a short write, then an error. Lowered for the test, then raised back ("space freed").
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    std::signal(SIGXFSZ, SIG_IGN);  // as the stage processes do (pipeline/signals.cpp)
    getrlimit(RLIMIT_FSIZE, &saved_);
    set(bytes);
  }
  ~FileSizeLimit() { setrlimit(RLIMIT_FSIZE, &saved_); }
  void set(rlim_t bytes) {
    rlimit r = saved_;
    r.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &r);
  }
  void lift() { setrlimit(RLIMIT_FSIZE, &saved_); }

 private:
  rlimit saved_{};
};

std::string temp_path(const std::string& name) {
  const std::filesystem::path dir = vapipe::testing::process_temp_dir() / "results-file";
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string line(int i) { return "{\"seq\":" + std::to_string(i) + ",\"label\":\"ball\"}"; }

std::string lines(int from, int to) {
  std::string s;
  for (int i = from; i < to; ++i) s += line(i) + "\n";
  return s;
}

TEST(ResultsFile, AppendsWholeLinesToWhatTheFileHad) {
  const std::string path = temp_path("append.jsonl");
  { std::ofstream(path) << line(0) << "\n"; }
  auto file = ResultsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  for (int i = 1; i < 4; ++i) file->append(line(i));
  EXPECT_EQ(file->buffered_lines(), 3u);
  EXPECT_EQ(read_all(path), lines(0, 1));  // buffered until flushed
  ASSERT_TRUE(file->flush().ok());
  EXPECT_EQ(file->buffered_lines(), 0u);
  EXPECT_EQ(file->buffered_bytes(), 0u);
  EXPECT_EQ(read_all(path), lines(0, 4));
}

// The file emptied under the job (logrotate's copytruncate): said once, the lines going on at its start;
// an archive job's (whose --resume needs its earlier lines) is told it cannot go on from it. A file
// opened with lines in it is no such thing.
TEST(ResultsFile, AFileEmptiedWhileWrittenIsSaidOnce) {
  const std::string path = temp_path("emptied.jsonl");
  { std::ofstream(path) << line(0) << "\n"; }
  auto file = ResultsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->follow_path(false), "");
  for (int i = 1; i < 4; ++i) file->append(line(i));
  ASSERT_TRUE(file->flush().ok());
  EXPECT_EQ(file->follow_path(false), "");
  std::filesystem::resize_file(path, 0);
  const std::string said = file->follow_path(false);
  EXPECT_NE(said.find("emptied.jsonl was emptied while the job wrote it (" + std::to_string(lines(0, 4).size()) +
                      " bytes, now 0: logrotate's copytruncate"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("`vapipe run --resume` cannot go on from it"), std::string::npos) << said;
  EXPECT_EQ(file->follow_path(false), "");  // once
  file->append(line(4));
  ASSERT_TRUE(file->flush().ok());
  EXPECT_EQ(read_all(path), lines(4, 5));  // at its start, not after a hole
  std::filesystem::resize_file(path, 0);
  const std::string live = file->follow_path(true);
  EXPECT_NE(live.find("was emptied while the job wrote it"), std::string::npos) << live;
  EXPECT_EQ(live.find("--resume"), std::string::npos) << live;
}

// The file deleted while the job runs (found 2026-12-07: every result after it went with it, without a
// word): it is written again at its path, whole, and goes on there. Moved away, an archive job's lines
// follow it (its --resume reads the path whole: the file is named instead); a live job's begin a new
// file at the path (logrotate's `create`).
TEST(ResultsFile, AFileDeletedWhileWrittenIsWrittenAgainWholeAndOneMovedIsFollowedOrBegunAnew) {
  const std::string path = temp_path("followed.jsonl");
  std::filesystem::remove(path);
  auto file = ResultsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->follow_path(false), "");  // where it was opened
  for (int i = 0; i < 3; ++i) file->append(line(i));
  ASSERT_TRUE(file->flush().ok());
  std::filesystem::remove(path);
  const std::string deleted = file->follow_path(false);
  EXPECT_NE(deleted.find(path + " was deleted while the job ran: it is written again there, whole"), std::string::npos)
      << deleted;
  for (int i = 3; i < 5; ++i) file->append(line(i));
  ASSERT_TRUE(file->flush().ok());
  EXPECT_EQ(read_all(path), lines(0, 5));
  EXPECT_EQ(file->follow_path(false), "");

  // Moved, in an archive job: its lines go on into the moved file, which is named once.
  const std::string moved = temp_path("moved.jsonl");
  std::filesystem::rename(path, moved);
  const std::string said = file->follow_path(false);
  EXPECT_NE(said.find(path + " was moved to " + moved + " while the job ran: its results go on into " + moved),
            std::string::npos) << said;
  EXPECT_EQ(file->follow_path(false), "");  // said once
  file->append(line(5));
  ASSERT_TRUE(file->flush().ok());
  EXPECT_EQ(read_all(moved), lines(0, 6));
  EXPECT_FALSE(std::filesystem::exists(path));

  // Moved, in a live job: a new file at the path.
  const std::string rotated = file->follow_path(true);
  EXPECT_NE(rotated.find(path + " was moved to " + moved + " (rotated?): a new " + path + " is begun"), std::string::npos)
      << rotated;
  file->append(line(6));
  ASSERT_TRUE(file->flush().ok());
  EXPECT_EQ(read_all(path), lines(6, 7));
  EXPECT_EQ(read_all(moved), lines(0, 6));
}

// Its folder deleted with it (an `rm -rf` of the output folder) is made again, and the file written again
// whole there. One that cannot be written again takes no line (before: they went on into the deleted
// file and were lost with it, and the job said it finished) until it can: then every line is there once.
TEST(ResultsFile, AFileDeletedWithItsFolderIsWrittenAgainWholeAndOneThatCannotBeRefusesLinesUntilItCan) {
  const std::filesystem::path dir = std::filesystem::path(temp_path("x")).parent_path() / "gone" / "out";
  std::filesystem::remove_all(dir.parent_path());
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "r.jsonl").string();
  auto file = ResultsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  for (int i = 0; i < 3; ++i) file->append(line(i));
  ASSERT_TRUE(file->flush().ok());
  std::filesystem::remove_all(dir.parent_path());
  const std::string made_again = file->follow_path(false);
  EXPECT_NE(made_again.find(path + " was deleted while the job ran with its folder (made again): it is written again "
                            "there, whole"), std::string::npos) << made_again;
  file->append(line(3));
  ASSERT_TRUE(file->flush().ok());
  EXPECT_EQ(read_all(path), lines(0, 4));

  // Deleted, and its folder's place taken by a file: nothing can be written there.
  std::filesystem::remove_all(dir);
  { std::ofstream(dir.string()) << "not a folder"; }
  const std::string cannot = file->follow_path(false);
  EXPECT_NE(cannot.find(path + " was deleted while the job ran, and cannot be written again there ("), std::string::npos)
      << cannot;
  file->append(line(4));
  const Status refused = file->flush();
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find(path + " was deleted while the job ran"), std::string::npos) << refused.message();
  EXPECT_EQ(file->buffered_lines(), 1u);  // kept
  std::filesystem::remove(dir);
  EXPECT_NE(file->follow_path(false).find("with its folder (made again)"), std::string::npos);
  file->append(line(5));
  ASSERT_TRUE(file->flush().ok());
  EXPECT_EQ(read_all(path), lines(0, 6));
  std::filesystem::remove_all(dir.parent_path());
}

// The disk refuses a block in the middle of a line: the part of the line it took is cut off again,
// the lines it did not take stay buffered, in order, and go out once it takes them: the file then
// holds every line once, whole.
TEST(ResultsFile, AWriteTheDiskRefusesLeavesNoPartOfALineAndKeepsTheRestForLater) {
  const std::string path = temp_path("refused.jsonl");
  std::filesystem::remove(path);
  auto file = ResultsFile::open(path);
  ASSERT_TRUE(file.ok());
  const size_t line_bytes = line(10).size() + 1;  // lines 10..99 are of one length
  const std::string before = lines(0, 10);
  {
    FileSizeLimit limit(before.size() + 5 * line_bytes + line_bytes / 2);  // room for 5.5 more lines
    for (int i = 0; i < 10; ++i) file->append(line(i));
    ASSERT_TRUE(file->flush().ok());
    for (int i = 10; i < 100; ++i) file->append(line(i));
    const Status refused = file->flush();
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.message(), path + ": cannot be written (File too large)");
    EXPECT_EQ(read_all(path), lines(0, 15));  // five more whole lines, not the half of the sixth
    EXPECT_EQ(file->buffered_lines(), 85u);
    EXPECT_EQ(file->buffered_bytes(), lines(15, 100).size());
    // Still refused: nothing changes.
    file->append(line(100));
    EXPECT_FALSE(file->flush().ok());
    EXPECT_EQ(read_all(path), lines(0, 15));
    limit.lift();
    ASSERT_TRUE(file->flush().ok());
  }
  EXPECT_EQ(read_all(path), lines(0, 101));
  EXPECT_EQ(file->buffered_lines(), 0u);
}

// A disk with no room at all (not even part of a line).
TEST(ResultsFile, ADiskWithNoRoomTakesNothingAndLosesNothing) {
  const std::string path = temp_path("full.jsonl");
  { std::ofstream(path) << lines(0, 2); }
  auto file = ResultsFile::open(path);
  ASSERT_TRUE(file.ok());
  {
    FileSizeLimit limit(lines(0, 2).size());
    file->append(line(2));
    EXPECT_FALSE(file->flush().ok());
    EXPECT_EQ(read_all(path), lines(0, 2));
    EXPECT_EQ(file->buffered_lines(), 1u);
  }
  ASSERT_TRUE(file->flush().ok());
  EXPECT_EQ(read_all(path), lines(0, 3));
}

TEST(ResultsFile, DroppingTheOldestKeepsWholeLinesWithinTheBound) {
  const std::string path = temp_path("drop.jsonl");
  std::filesystem::remove(path);
  auto file = ResultsFile::open(path);
  ASSERT_TRUE(file.ok());
  for (int i = 10; i < 20; ++i) file->append(line(i));
  const size_t line_bytes = line(10).size() + 1;
  EXPECT_EQ(file->drop_oldest(10 * line_bytes), 0u);  // within the bound already
  EXPECT_EQ(file->drop_oldest(4 * line_bytes + 3), 6u);  // 4 whole lines fit, not 5
  EXPECT_EQ(file->buffered_lines(), 4u);
  EXPECT_EQ(file->buffered_bytes(), 4 * line_bytes);
  ASSERT_TRUE(file->flush().ok());
  EXPECT_EQ(read_all(path), lines(16, 20));
  file->append(line(20));
  EXPECT_EQ(file->drop_oldest(0), 1u);
  EXPECT_EQ(file->buffered_bytes(), 0u);
}

// The next file cannot be opened (here a plain file stands where its folder would be): the lines
// wait, and each flush tries it again; once it can be made, they are written to it.
TEST(ResultsFile, AFileThatCannotBeOpenedYetIsTriedAgainByEachFlush) {
  const std::string dir = temp_path("blocked");
  std::filesystem::remove_all(dir);
  { std::ofstream(dir) << "not a folder"; }
  const std::string first = temp_path("first.jsonl");
  std::filesystem::remove(first);
  auto file = ResultsFile::open(first);
  ASSERT_TRUE(file.ok());
  file->append(line(0));
  ASSERT_TRUE(file->flush().ok());
  const std::string next = dir + "/next.jsonl";
  const Status opened = file->switch_to(next);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.message().rfind(next + ": cannot be opened (", 0), 0u) << opened.message();
  EXPECT_TRUE(file->active());
  EXPECT_EQ(file->path(), next);
  file->append(line(1));
  EXPECT_FALSE(file->flush().ok());
  EXPECT_EQ(file->buffered_lines(), 1u);
  std::filesystem::remove(dir);
  file->append(line(2));
  ASSERT_TRUE(file->flush().ok());  // its folder made, the file opened, the lines written
  EXPECT_EQ(read_all(first), lines(0, 1));
  EXPECT_EQ(read_all(next), lines(1, 3));
}

// As an ofstream's: a stage that returns early (an error, before its close) leaves what it buffered.
TEST(ResultsFile, WhatIsBufferedIsWrittenWhenTheWriterGoes) {
  const std::string path = temp_path("gone.jsonl");
  std::filesystem::remove(path);
  {
    auto file = ResultsFile::open(path);
    ASSERT_TRUE(file.ok());
    file->append(line(0));
    file->append(line(1));
    EXPECT_EQ(read_all(path), "");
  }
  EXPECT_EQ(read_all(path), lines(0, 2));
}

TEST(ResultsFile, AFileThatCannotBeOpenedIsAnErrorNamingIt) {
  auto file = ResultsFile::open("/proc/vapipe-no-such/results.jsonl");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().message().rfind("/proc/vapipe-no-such/results.jsonl: cannot be opened (", 0), 0u)
      << file.status().message();
}

}  // namespace
}  // namespace vapipe
