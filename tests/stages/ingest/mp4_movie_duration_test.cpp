// A moov box's movie duration against its edit lists, on boxes written byte by byte. Files read end to
// end: StreamReaderTest.AnMp4TrimmedFarIntoALongGopGivesEveryFrameShown.
#include "stages/ingest/mp4_movie_duration.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace vapipe {
namespace {

std::string be(uint64_t v, int size) {
  std::string out(static_cast<size_t>(size), '\0');
  for (int i = size - 1; i >= 0; --i, v >>= 8) out[static_cast<size_t>(i)] = static_cast<char>(v & 0xff);
  return out;
}

std::string box(const std::string& type, const std::string& body) { return be(8 + body.size(), 4) + type + body; }

// mvhd or mdhd: version, flags, two times, timescale, duration (then the rest of an mvhd: not read).
std::string header_box(const std::string& type, int version, uint32_t timescale, uint64_t duration) {
  const int size = version == 1 ? 8 : 4;
  return box(type, std::string(1, static_cast<char>(version)) + std::string(3, '\0') + be(0, size) + be(0, size) +
                       be(timescale, 4) + be(duration, size) + std::string(type == "mvhd" ? 80 : 4, '\0'));
}

struct Edit {
  uint64_t duration;   // movie units
  int64_t media_time;  // media units; -1: an empty edit
};

std::string trak(uint32_t media_timescale, const std::vector<Edit>& edits, int version = 0) {
  const int size = version == 1 ? 8 : 4;
  std::string entries;
  for (const Edit& e : edits) entries += be(e.duration, size) + be(static_cast<uint64_t>(e.media_time), size) + be(0x10000, 4);
  const std::string elst = box("elst", std::string(1, static_cast<char>(version)) + std::string(3, '\0') +
                                           be(edits.size(), 4) + entries);
  const std::string edts = edits.empty() ? "" : box("edts", elst);
  return box("trak", box("tkhd", std::string(84, '\0')) + edts +
                         box("mdia", header_box("mdhd", version, media_timescale, 10 * media_timescale)));
}

// ffmpeg -ss 3 -t 2 -c copy of a recording with 4 s GOPs: the edit starts 3 s into the media
// (timescale 12800) and shows 2 s (movie timescale 1000).
TEST(MovieDuration, ATrimThatStartsFarIntoItsMediaIsReadToWhereItsEditEnds) {
  const std::string moov = box("moov", header_box("mvhd", 0, 1000, 2000) + trak(12800, {{2000, 3 * 12800}}));
  const std::optional<MovieDurationPatch> patch = movie_duration_past_edit_lists(moov);
  ASSERT_TRUE(patch.has_value());
  EXPECT_EQ(patch->timescale, 1000u);
  EXPECT_EQ(patch->duration, 2000u);
  EXPECT_EQ(patch->read_as, 5001u);
  EXPECT_EQ(patch->duration_size, 4);
  EXPECT_EQ(moov.substr(patch->duration_at, 4), be(2000, 4));  // where the duration is
}

// The most any track needs; an empty edit first (a delay) counts its time on the timeline.
TEST(MovieDuration, TheLatestReachOfAnyTrackCountsWithEmptyEditsFirst) {
  const std::string moov = box("moov", header_box("mvhd", 1, 600, 1200) + trak(90000, {{300, -1}, {900, 45000}}, 1) +
                                           trak(48000, {{1200, 1024}}));
  const std::optional<MovieDurationPatch> patch = movie_duration_past_edit_lists(moov);
  ASSERT_TRUE(patch.has_value());
  EXPECT_EQ(patch->duration_size, 8);
  // video: 300 + 900 on the timeline, 45000/90000 s = 300 units in: 1500; audio: 1200 + 13 (rounded up)
  EXPECT_EQ(patch->read_as, 1501u);
  EXPECT_EQ(moov.substr(patch->duration_at, 8), be(1200, 8));
}

TEST(MovieDuration, MoviesWhoseEditsStartAtTheirMediasStartAreLeftAlone) {
  EXPECT_FALSE(movie_duration_past_edit_lists(box("moov", header_box("mvhd", 0, 1000, 4000) + trak(12800, {}))));
  EXPECT_FALSE(movie_duration_past_edit_lists(box("moov", header_box("mvhd", 0, 1000, 4000) + trak(12800, {{4000, 0}}))));
  // A fragmented movie is timed by its fragments.
  EXPECT_FALSE(movie_duration_past_edit_lists(
      box("moov", header_box("mvhd", 0, 1000, 2000) + trak(12800, {{2000, 3 * 12800}}) + box("mvex", ""))));
  // Bytes that are not a whole moov box.
  const std::string moov = box("moov", header_box("mvhd", 0, 1000, 2000) + trak(12800, {{2000, 3 * 12800}}));
  EXPECT_FALSE(movie_duration_past_edit_lists(moov.substr(0, moov.size() - 10)));
  EXPECT_FALSE(movie_duration_past_edit_lists("moov"));
  EXPECT_FALSE(movie_duration_past_edit_lists(box("free", moov)));
}

}  // namespace
}  // namespace vapipe
