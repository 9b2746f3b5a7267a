#include "pipeline/seq_reservation.h"

#include <cstdint>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

namespace vapipe {
namespace {

class SeqReservationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("vapipe-seq-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "seq-0.json").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(SeqReservationTest, WithoutAFileNothingIsReserved) {
  auto table = SeqReservations::open(path_);
  ASSERT_TRUE(table.ok()) << table.status().message();
  EXPECT_EQ((*table)->reserved("cam"), 0u);
  EXPECT_FALSE(std::filesystem::exists(path_));
}

TEST_F(SeqReservationTest, ARestartedInstanceStartsPastEveryNumberTheOldOneCouldHaveSent) {
  {
    auto table = SeqReservations::open(path_, 100);
    ASSERT_TRUE(table.ok());
    for (uint64_t seq = 0; seq < 250; ++seq) ASSERT_TRUE((*table)->ensure("cam-a", seq).ok());
    ASSERT_TRUE((*table)->ensure("cam-b", 0).ok());
    EXPECT_EQ((*table)->reserved("cam-a"), 300u);  // blocks: 0..99, 100..199, 200..299
    EXPECT_EQ((*table)->reserved("cam-b"), 100u);
  }  // the instance "crashes": only the file is left
  auto restarted = SeqReservations::open(path_, 100);
  ASSERT_TRUE(restarted.ok()) << restarted.status().message();
  EXPECT_EQ((*restarted)->reserved("cam-a"), 300u);
  EXPECT_EQ((*restarted)->reserved("cam-b"), 100u);
  EXPECT_EQ((*restarted)->reserved("cam-c"), 0u);
  // It reserves on from where it starts, and keeps the other streams' marks.
  ASSERT_TRUE((*restarted)->ensure("cam-a", 300).ok());
  auto again = SeqReservations::open(path_, 100);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->reserved("cam-a"), 400u);
  EXPECT_EQ((*again)->reserved("cam-b"), 100u);
}

// A live job's file read to its end is marked so: a restarted instance knows not to read it again; the
// marks and the reservations survive each other's writes.
TEST_F(SeqReservationTest, AFileReadToItsEndIsKnownToHaveEndedByARestartedInstance) {
  {
    auto table = SeqReservations::open(path_, 100);
    ASSERT_TRUE(table.ok());
    ASSERT_TRUE((*table)->ensure("clip", 0).ok());
    EXPECT_FALSE((*table)->ended("clip"));
    ASSERT_TRUE((*table)->mark_ended("clip").ok());
    EXPECT_TRUE((*table)->ended("clip"));
    ASSERT_TRUE((*table)->ensure("cam", 0).ok());  // (a later write keeps the mark)
  }
  auto restarted = SeqReservations::open(path_, 100);
  ASSERT_TRUE(restarted.ok()) << restarted.status().message();
  EXPECT_TRUE((*restarted)->ended("clip"));
  EXPECT_FALSE((*restarted)->ended("cam"));
  EXPECT_EQ((*restarted)->reserved("clip"), 100u);
  EXPECT_EQ((*restarted)->reserved("cam"), 100u);
}

// A live job's file: the last frame sent is known to a restarted instance, for the uri it was read
// from only; a new uri takes a new slot (never the old one's timestamp), a stream being read again loses
// its end mark, and the JSON file is written when a slot is taken, not per frame.
TEST_F(SeqReservationTest, TheLastFrameSentOfEachFileIsKnownToARestartedInstance) {
  {
    auto table = SeqReservations::open(path_, 100);
    ASSERT_TRUE(table.ok());
    for (int64_t pts = 0; pts <= 1000; pts += 100) ASSERT_TRUE((*table)->note_sent("a", "file:///a.mp4", pts).ok());
    const auto json_written = std::filesystem::last_write_time(path_);
    std::filesystem::last_write_time(path_, json_written - std::chrono::hours(1));
    ASSERT_TRUE((*table)->note_sent("a", "file:///a.mp4", 1100).ok());
    EXPECT_EQ(std::filesystem::last_write_time(path_), json_written - std::chrono::hours(1));
    ASSERT_TRUE((*table)->note_sent("b", "file:///b.mp4", 0).ok());  // frame 0 at timestamp 0
    ASSERT_TRUE((*table)->note_sent("c", "file:///c.mp4", 5).ok());
    ASSERT_TRUE((*table)->mark_ended("c").ok());
    ASSERT_TRUE((*table)->note_sent("d", "file:///old.mp4", 70).ok());
    ASSERT_TRUE((*table)->note_sent("d", "file:///new.mp4", 30).ok());  // a reload changed its uri
    EXPECT_EQ((*table)->last_sent("a", "file:///a.mp4"), std::nullopt);  // as of open(): nothing
  }
  auto restarted = SeqReservations::open(path_, 100);
  ASSERT_TRUE(restarted.ok()) << restarted.status().message();
  EXPECT_EQ((*restarted)->last_sent("a", "file:///a.mp4"), 1100);
  EXPECT_EQ((*restarted)->last_sent("a", "file:///other.mp4"), std::nullopt);
  EXPECT_EQ((*restarted)->last_sent("b", "file:///b.mp4"), 0);
  EXPECT_EQ((*restarted)->last_sent("d", "file:///new.mp4"), 30);
  EXPECT_EQ((*restarted)->last_sent("d", "file:///old.mp4"), std::nullopt);
  EXPECT_EQ((*restarted)->last_sent("e", "file:///a.mp4"), std::nullopt);
  EXPECT_TRUE((*restarted)->ended("c"));
  // d's new uri took a slot of its own: a crash before its first write leaves no timestamp for it.
  ASSERT_TRUE((*restarted)->note_sent("f", "file:///f.mp4", 9).ok());
  ASSERT_TRUE((*restarted)->note_sent("c", "file:///c.mp4", 6).ok());  // read again: no longer ended
  EXPECT_FALSE((*restarted)->ended("c"));
  auto again = SeqReservations::open(path_, 100);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE((*again)->ended("c"));
  EXPECT_EQ((*again)->last_sent("c", "file:///c.mp4"), 6);
  EXPECT_EQ((*again)->last_sent("f", "file:///f.mp4"), 9);
  EXPECT_EQ((*again)->last_sent("a", "file:///a.mp4"), 1100);
}

// A slot taken (the JSON file written) whose instance crashed before its first timestamp: nothing sent.
TEST_F(SeqReservationTest, ASlotNeverWrittenSaysNothingWasSent) {
  std::ofstream(path_) << R"({"streams": {}, "positions": {"a": {"slot": 3, "uri": "file:///a.mp4"}}, "next_slot": 4})";
  auto table = SeqReservations::open(path_);
  ASSERT_TRUE(table.ok()) << table.status().message();
  EXPECT_EQ((*table)->last_sent("a", "file:///a.mp4"), std::nullopt);
  ASSERT_TRUE((*table)->note_sent("b", "file:///b.mp4", 40).ok());  // slot 4: slots 0 to 3 are holes
  auto reread = SeqReservations::open(path_);
  ASSERT_TRUE(reread.ok()) << reread.status().message();
  EXPECT_EQ((*reread)->last_sent("a", "file:///a.mp4"), std::nullopt);
  EXPECT_EQ((*reread)->last_sent("b", "file:///b.mp4"), 40);
}

TEST_F(SeqReservationTest, TheFileIsWrittenOncePerBlockNotPerFrame) {
  auto table = SeqReservations::open(path_, 1000);
  ASSERT_TRUE(table.ok());
  ASSERT_TRUE((*table)->ensure("cam", 0).ok());
  const auto first = std::filesystem::last_write_time(path_);
  std::filesystem::last_write_time(path_, first - std::chrono::hours(1));
  for (uint64_t seq = 1; seq < 1000; ++seq) ASSERT_TRUE((*table)->ensure("cam", seq).ok());
  EXPECT_EQ(std::filesystem::last_write_time(path_), first - std::chrono::hours(1));
  ASSERT_TRUE((*table)->ensure("cam", 1000).ok());
  EXPECT_NE(std::filesystem::last_write_time(path_), first - std::chrono::hours(1));
}

TEST_F(SeqReservationTest, StreamsReserveFromTheirOwnThreads) {
  auto table = SeqReservations::open(path_, 64);
  ASSERT_TRUE(table.ok());
  std::vector<std::thread> threads;
  for (int s = 0; s < 4; ++s) {
    threads.emplace_back([&, s] {
      for (uint64_t seq = 0; seq < 1000; ++seq) ASSERT_TRUE((*table)->ensure("cam-" + std::to_string(s), seq).ok());
    });
  }
  for (auto& t : threads) t.join();
  auto reread = SeqReservations::open(path_, 64);
  ASSERT_TRUE(reread.ok());
  for (int s = 0; s < 4; ++s) EXPECT_GE((*reread)->reserved("cam-" + std::to_string(s)), 1000u);
}

TEST_F(SeqReservationTest, ABrokenFileIsAnErrorThatNamesIt) {
  std::ofstream(path_) << "{not json";
  auto table = SeqReservations::open(path_);
  ASSERT_FALSE(table.ok());
  EXPECT_NE(table.status().message().find(path_), std::string::npos);
}

}  // namespace
}  // namespace vapipe
