#include "pipeline/config_copy.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace vapipe {
namespace {

using namespace std::chrono_literals;

class ConfigCopyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("vapipe-config-copy-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "config.yaml").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // As the supervisor writes it: whole, under a new identity.
  void write(const std::string& top_k) {
    std::ofstream(path_ + ".tmp") << "job: {mode: live}\nstreams: [{id: a, uri: 'rtsp://cam/a'}]\n"
                                     "infer: {model: m.pt, labels: m.txt, top_k: " + top_k + "}\n";
    std::filesystem::rename(path_ + ".tmp", path_);
  }
  Config config(JobMode mode) const {
    Config c;
    c.source = (dir_ / "job.yaml").string();
    c.job.mode = mode;
    return c;
  }
  std::filesystem::path dir_;
  std::string path_;
};

// Read as the stage opens; a look finds a rewritten text once, and none while it is the one taken.
TEST_F(ConfigCopyTest, ARewrittenCopyIsFoundOnceAndTheTakenTextIsWhatLaterLooksCompareWith) {
  write("3");
  ConfigCopy copy(1000ms);
  copy.set_path(path_);
  auto started = copy.start(config(JobMode::kLive));
  ASSERT_TRUE(started.has_value());
  ASSERT_TRUE(started->ok()) << started->status().message();
  EXPECT_EQ((*started)->infer.top_k, 3u);
  EXPECT_EQ((*started)->infer.model, (dir_ / "m.pt").string());  // relative to the config's folder
  EXPECT_TRUE(copy.followed());
  EXPECT_FALSE(copy.due(std::chrono::steady_clock::now()));
  EXPECT_TRUE(copy.due(std::chrono::steady_clock::now() + 1100ms));
  auto same = copy.look();
  ASSERT_TRUE(same.ok());
  EXPECT_FALSE(same->has_value());
  write("5");
  auto changed = copy.look();
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  ASSERT_TRUE(changed->has_value());
  auto reloaded = copy.load(**changed);
  ASSERT_TRUE(reloaded.ok()) << reloaded.status().message();
  EXPECT_EQ(reloaded->infer.top_k, 5u);
  copy.take(**changed);
  EXPECT_EQ(copy.running_text(), **changed);
  write("5");  // rewritten with the same text (another stage's reload): nothing new
  auto again = copy.look();
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->has_value());
  std::filesystem::remove(path_);
  EXPECT_FALSE(copy.look().ok());
}

// An archive job follows none; a copy that cannot be read at the start is said, and none is followed.
TEST_F(ConfigCopyTest, NoneIsFollowedInAnArchiveJobNorWhenItCannotBeReadAtTheStart) {
  ConfigCopy archive(250ms);
  EXPECT_FALSE(archive.start(config(JobMode::kArchive)).has_value());
  EXPECT_FALSE(archive.followed());
  ConfigCopy missing(250ms);
  missing.set_path(path_);
  auto started = missing.start(config(JobMode::kLive));
  ASSERT_TRUE(started.has_value());
  EXPECT_FALSE(started->ok());
  EXPECT_FALSE(missing.followed());
  EXPECT_FALSE(missing.due(std::chrono::steady_clock::now() + 1h));
}

}  // namespace
}  // namespace vapipe
