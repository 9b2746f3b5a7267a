// streams[].recorded_at: the times a config gives, or a recorder's file names hold, in the local time
// zone (POSIX TZ rules, so no zone files are needed) or their own.
#include "pipeline/recorded_at.h"

#include <cstdint>
#include <gtest/gtest.h>

#include "tests/fakes/local_zone.h"

namespace vapipe {
namespace {

constexpr int64_t kS = 1000000000;
constexpr int64_t k20261130T143000Z = 1796049000;  // 2026-11-30 14:30:00 UTC

int64_t ns_of(const std::string& text) {
  Result<int64_t> r = parse_date_time(text);
  return r.ok() ? r.value() : -1;
}

using testing::LocalZone;

TEST(RecordedAt, DatesAndTimesAsIso8601WritesThem) {
  LocalZone zone("CET-1CEST,M3.5.0,M10.5.0/3");  // Central Europe, with summer time
  EXPECT_EQ(ns_of("2026-11-30T14:30:00Z"), k20261130T143000Z * kS);
  EXPECT_EQ(ns_of("2026-11-30T15:30:00+01:00"), k20261130T143000Z * kS);
  EXPECT_EQ(ns_of("2026-11-30 09:30:00-0500"), k20261130T143000Z * kS);
  EXPECT_EQ(ns_of("2026-11-30T20:00+05:30"), k20261130T143000Z * kS);
  EXPECT_EQ(ns_of("2026-11-30T14:30:00.250Z"), k20261130T143000Z * kS + 250000000);
  // Without a zone: local time, winter (+1) and summer (+2) alike.
  EXPECT_EQ(ns_of("2026-11-30T15:30:00"), k20261130T143000Z * kS);
  EXPECT_EQ(ns_of("2026-07-01 14:00"), int64_t{1782907200} * kS);  // 12:00 UTC
  for (const char* bad : {"yesterday", "2026-11-30", "2026-11-30T14:30:00+1", "2026-11-30T14:30:00 UTC",
                          "2026-13-01T00:00:00Z", "1960-01-01T00:00:00Z", "2026-11-30T14:30:00."}) {
    const auto r = parse_date_time(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("as ISO 8601 writes it"), std::string::npos) << bad;
    }
  }
}

TEST(RecordedAt, TheThreeFormsAndAFormatThatReadsNoDate) {
  LocalZone zone("UTC0");
  auto given = parse_recorded_at("2026-11-30T14:30:00Z");
  ASSERT_TRUE(given.ok());
  EXPECT_EQ(given->from, RecordingStart::From::kGiven);
  EXPECT_EQ(given->unix_ns, k20261130T143000Z * kS);
  auto named = parse_recorded_at("name:%Y%m%d%H%M%S");
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->from, RecordingStart::From::kFileName);
  EXPECT_FALSE(named->known());  // per file
  auto container = parse_recorded_at("container");
  ASSERT_TRUE(container.ok());
  EXPECT_EQ(container->from, RecordingStart::From::kContainer);
  auto no_date = parse_recorded_at("name:%H%M%S");
  ASSERT_FALSE(no_date.ok());
  EXPECT_NE(no_date.status().message().find("reads no date from a file's name"), std::string::npos);
  EXPECT_FALSE(parse_recorded_at("Container").ok());  // neither a form nor a time
}

// As recorders name their exports: Hikvision, Dahua, an NVR's epoch seconds, a name with its own zone.
TEST(RecordedAt, TheTimeARecordersFileNameHolds) {
  LocalZone zone("CET-1CEST,M3.5.0,M10.5.0/3");
  EXPECT_EQ(time_in_file_name("/exports/ch01_20261130153000.mp4", "%Y%m%d%H%M%S"), k20261130T143000Z * kS);
  EXPECT_EQ(time_in_file_name("/x/2026-11-30.15.30.00-2026-11-30.16.00.00[M][0@0][0].dav", "%Y-%m-%d.%H.%M.%S"),
            k20261130T143000Z * kS);
  EXPECT_EQ(time_in_file_name("cam-1796049000.mkv", "%s"), k20261130T143000Z * kS);
  EXPECT_EQ(time_in_file_name("gate_20261130T143000+0000.ts", "%Y%m%dT%H%M%S%z"), k20261130T143000Z * kS);
  EXPECT_EQ(time_in_file_name("/2026-11-30/ch01_153000.mp4", "%Y%m%d%H%M%S"), std::nullopt);  // folders left out
  EXPECT_EQ(time_in_file_name("holiday.mp4", "%Y%m%d%H%M%S"), std::nullopt);
}

// Digits of a name that are something else read as a year: before 1970, or past what nanoseconds since
// 1970 hold (2262), they are not a time (found by tools/fuzz.sh: year 0 overflowed the nanoseconds).
TEST(RecordedAt, AYearOutsideWhatNanosecondsHoldIsNoTime) {
  LocalZone zone("UTC0");
  EXPECT_EQ(time_in_file_name("ch00_000003411320.mp4", "%Y%m%d%H%M%S"), std::nullopt);
  EXPECT_EQ(time_in_file_name("ch00_99991231235959.mp4", "%Y%m%d%H%M%S"), std::nullopt);
  EXPECT_EQ(time_in_file_name("ch00_22620411235959.mp4", "%Y%m%d%H%M%S"), std::nullopt);  // past 23:47:16
  EXPECT_EQ(time_in_file_name("ch00_22620411000000.mp4", "%Y%m%d%H%M%S"), int64_t{9223286400} * kS);
  for (const char* far : {"0000-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "2300-01-01T00:00:00+01:00"}) {
    const auto r = parse_date_time(far);
    ASSERT_FALSE(r.ok()) << far;
    EXPECT_NE(r.status().message().find("between 1970 and 2262"), std::string::npos) << r.status().message();
  }
}

TEST(RecordedAt, LocalTimeTextSaysItsOffset) {
  LocalZone zone("CET-1CEST,M3.5.0,M10.5.0/3");
  EXPECT_EQ(local_time_text(k20261130T143000Z * kS), "2026-11-30 15:30:00 +0100");
  EXPECT_EQ(local_time_text(k20261130T143000Z * kS, false), "2026-11-30 15:30:00");
}

}  // namespace
}  // namespace vapipe
