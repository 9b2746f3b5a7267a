// `vapipe segments --clips DIR` (cli/segment_clips.h): a segment of a file is cut from it as it is, from
// the key frame at or before its pre-roll to its post-roll: the clip's frames, decoded, are byte for
// byte the file's own (x264 with B-frames, in MP4 and in Matroska, whose clip is an MP4 too, with decoding
// times worked out; VP8 in WebM, whose clip stays Matroska).
#include "cli/segment_clips.h"

#include <cstdint>
#include <gst/app/gstappsink.h>
#include <gst/gst.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "stages/ingest/mp4_orientation.h"
#include "stages/ingest/stream_reader.h"

namespace vapipe::cli {
namespace {

// Each decoded frame of `file` (I420), by its timestamp, in the order shown.
std::vector<std::pair<int64_t, std::string>> decode(const std::string& file) {
  std::vector<std::pair<int64_t, std::string>> frames;
  GError* err = nullptr;
  GstElement* p = gst_parse_launch(("filesrc location=\"" + file + "\" ! decodebin ! videoconvert ! "
                                    "video/x-raw,format=I420 ! appsink name=sink sync=false").c_str(), &err);
  EXPECT_NE(p, nullptr) << (err ? err->message : "");
  if (!p) return frames;
  GstElement* sink = gst_bin_get_by_name(GST_BIN(p), "sink");
  gst_element_set_state(p, GST_STATE_PLAYING);
  while (GstSample* s = gst_app_sink_pull_sample(GST_APP_SINK(sink))) {
    GstBuffer* b = gst_sample_get_buffer(s);
    GstMapInfo map;
    gst_buffer_map(b, &map, GST_MAP_READ);
    frames.emplace_back(static_cast<int64_t>(GST_BUFFER_PTS(b)), std::string(reinterpret_cast<char*>(map.data), map.size));
    gst_buffer_unmap(b, &map);
    gst_sample_unref(s);
  }
  gst_element_set_state(p, GST_STATE_NULL);
  gst_object_unref(sink);
  gst_object_unref(p);
  return frames;
}

// A truck's segment of stream `id` from `start_ms` to `end_ms` of the file `path`.
Segment truck_segment(const std::string& id, const std::string& path, double start_ms, double end_ms) {
  Segment s;
  s.stream_id = id;
  s.label = "truck";
  s.uri = "file://" + path;
  s.start_ms = start_ms;
  s.end_ms = end_ms;
  return s;
}

class SegmentClipsTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(ensure_gstreamer());
    dir_ = std::filesystem::path(::testing::TempDir()) / ("vapipe-segment-clips-" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

// 5 s at 30 frames/s, a key frame each second, B-frames. The segment runs from 2.5 to 3.0 s; with
// 0.6 s before and 0.5 s after, its clip begins at the key frame at or before 1.9 s (1.0 s: frame 30)
// and holds every frame shown up to 3.5 s (frame 105).
TEST_P(SegmentClipsTest, ASegmentsClipIsTheFilesOwnFramesFromTheKeyFrameBeforeItsPreRollToItsPostRoll) {
  const std::string muxer = GetParam();
  const bool webm = muxer == "webmmux";
  const bool matroska = muxer == "matroskamux" || webm;
  const std::string file = (dir_ / (webm ? "gate.webm" : matroska ? "gate.mkv" : "gate.mp4")).string();
  const std::string encoder = webm ? "vp8enc keyframe-max-dist=30 deadline=1" : "x264enc key-int-max=30 bframes=2 "
                                                                                 "speed-preset=ultrafast ! h264parse";
  const std::string encode = "gst-launch-1.0 -q videotestsrc pattern=ball num-buffers=150 ! "
                             "video/x-raw,width=160,height=120,framerate=30/1 ! " + encoder + " ! " + muxer +
                             " ! filesink location=" + file;
  ASSERT_EQ(std::system(encode.c_str()), 0) << encode;
  const auto whole = decode(file);
  ASSERT_EQ(whole.size(), 150u);

  Segment s = truck_segment("gate", file, 2500, 3000);
  SegmentClips clips((dir_ / "clips").string(), 0.6, 0.5);
  auto path = clips.save(s);
  ASSERT_TRUE(path.ok()) << path.status().message();
  EXPECT_EQ(*path, (dir_ / "clips" / "gate" / (webm ? "00-00-02.500_truck.mkv" : "00-00-02.500_truck.mp4")).string());
  const auto frames = decode(*path);
  // Frames 30 to 105, then at most a few decoded by then that are shown later.
  ASSERT_GE(frames.size(), 76u);
  EXPECT_LE(frames.size(), 76u + 6u);
  const int64_t offset = whole[30].first - frames[0].first;  // where the clip's 0 is in the file
  EXPECT_GE(frames[0].first, 0);
  EXPECT_LT(frames[0].first, 200'000'000);
  std::map<int64_t, const std::string*> by_time;
  for (const auto& [pts, bytes] : whole) by_time[pts] = &bytes;
  for (size_t i = 0; i < frames.size(); ++i) {
    if (i < 76) {
      EXPECT_EQ(frames[i].first + offset, whole[30 + i].first) << i;
    }
    auto it = by_time.find(frames[i].first + offset);
    ASSERT_NE(it, by_time.end()) << i;
    EXPECT_TRUE(*it->second == frames[i].second) << "frame " << i << " of the clip";
  }

  // A camera's stream: nothing to cut from. A file that is gone: said, with --moved's hint.
  Segment camera = s;
  camera.uri = "rtsp://cam/stream";
  EXPECT_EQ(clips.save(camera).status().code(), StatusCode::kFailedPrecondition);
  Segment gone = s;
  gone.uri = "file://" + (dir_ / "gone.mp4").string();
  auto missing = clips.save(gone);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no such file (moved? --moved FROM TO"), std::string::npos)
      << missing.status().message();
  // Moved: read where --moved says it is now.
  SegmentClips moved((dir_ / "moved-clips").string(), 0, 0, {MovedFolder{"/archive/gate", dir_.string()}});
  Segment elsewhere = s;
  elsewhere.uri = std::string("file:///archive/gate/") + std::filesystem::path(file).filename().string();
  auto cut = moved.save(elsewhere);
  ASSERT_TRUE(cut.ok()) << cut.status().message();
  EXPECT_GE(decode(*cut).size(), 16u);  // from 2.0 s (the key frame before 2.5 s) to 3.0 s

  // A segment of frames classified turned (its started event's turn: the file's tag, or the stream's
  // rotate): an MP4 clip says it, so that a player shows it as the segment's picture is; a WebM clip,
  // which stays Matroska, has no place for it and is as stored.
  Segment turned = s;
  turned.turn = "rotate-270";
  auto turned_path = SegmentClips((dir_ / "turned-clips").string(), 0.6, 0.5).save(turned);
  ASSERT_TRUE(turned_path.ok()) << turned_path.status().message();
  EXPECT_EQ(decode(*turned_path).size(), frames.size());
  if (webm) return;
  // The turn an MP4 says (nullopt: none read).
  auto turn_of = [](const std::string& clip) -> std::optional<Orientation> {
    auto said = mp4_orientation(clip);
    EXPECT_TRUE(said.ok()) << said.status().message();
    return said.ok() ? std::optional<Orientation>(*said) : std::nullopt;
  };
  EXPECT_EQ(turn_of(*turned_path), Orientation::kRotate270);
  EXPECT_EQ(turn_of(*path), Orientation::kAsStored);
  if (muxer != "mp4mux") return;
  // A phone's portrait video (its track says to show it turned) with no rotate of its own: its clip
  // says the file's own turn (mp4mux does not copy it); `rotate: 0` (its started event's "rotate-0")
  // keeps it as stored.
  ASSERT_TRUE(set_mp4_orientation(file, Orientation::kRotate90).ok());
  auto phone = SegmentClips((dir_ / "phone-clips").string(), 0.6, 0.5).save(s);
  ASSERT_TRUE(phone.ok()) << phone.status().message();
  EXPECT_EQ(turn_of(*phone), Orientation::kRotate90);
  Segment as_stored = s;
  as_stored.turn = "rotate-0";
  auto stored = SegmentClips((dir_ / "stored-clips").string(), 0.6, 0.5).save(as_stored);
  ASSERT_TRUE(stored.ok()) << stored.status().message();
  EXPECT_EQ(turn_of(*stored), Orientation::kAsStored);
}

// A file of three 3 s parts joined end to end, each part's timestamps starting again (one that tsdemux
// does not join itself; ingest put its parts on one timeline and its eos said where the first restart
// is): a segment's clip is cut on that timeline, read from the file's start (a seek by time lands in
// another part): one that reaches past a join goes on into the next part, from the key frame at or
// before its pre-roll; a segment of a later part has its clip of that part's frames.
TEST_F(SegmentClipsTest, AClipOfFilesJoinedEndToEndIsCutOnTheTimelineIngestPutTheirPartsOn) {
  const std::string part = (dir_ / "part.ts").string(), joined = (dir_ / "joined.ts").string();
  const std::string encode = "gst-launch-1.0 -q videotestsrc pattern=ball num-buffers=90 ! video/x-raw,width=640,"
                             "height=360,framerate=30/1 ! x264enc key-int-max=30 ! h264parse ! mpegtsmux ! filesink "
                             "location=" + part;
  ASSERT_EQ(std::system(encode.c_str()), 0) << encode;
  const std::string join = "cat " + part + " " + part + " " + part + " > " + joined;
  ASSERT_EQ(std::system(join.c_str()), 0);
  const auto one_part = decode(part);
  ASSERT_EQ(one_part.size(), 90u);
  // The part's first frame is at 0:00.192 (tsdemux's), its last ends at 3.192 s: there the next begins.
  Segment s = truck_segment("dvr", joined, 2000, 3000);
  s.timeline_restart_ms = 3191.667;  // as ingest said it
  SegmentClips clips((dir_ / "clips").string(), 0.5, 2.0);
  // Each clip's frames are the parts' own, in order, from frame `from` of a part on: frame j of the clip
  // is frame (from + j) % 90 of a part.
  auto expect_parts_from = [&](const std::vector<std::pair<int64_t, std::string>>& frames, size_t from,
                               const std::string& what) {
    for (size_t j = 0; j < frames.size(); ++j) {
      EXPECT_TRUE(frames[j].second == one_part[(from + j) % 90].second) << what << ": frame " << j;
    }
  };
  // The decoded clip of the segment from `start_ms` to `end_ms`.
  std::vector<std::pair<int64_t, std::string>> frames;
  auto clip_of = [&](double start_ms, double end_ms) {
    Segment segment = s;
    segment.start_ms = start_ms;
    segment.end_ms = end_ms;
    auto path = clips.save(segment);
    ASSERT_TRUE(path.ok()) << path.status().message();
    frames = decode(*path);
  };
  ASSERT_NO_FATAL_FAILURE(clip_of(2000, 3000));
  // From the key frame at or before 1.5 s (part 1's frame 30, at 1.192 s) to 5 s: part 1's 60 frames
  // from there, then part 2's up to 5 s (by decoding time: its first 50 or so).
  ASSERT_GE(frames.size(), 105u);
  ASSERT_LE(frames.size(), 120u);
  expect_parts_from(frames, 30, "across the first join");
  // The clip's time is the timeline's: 3.3 s or more long, without a jump (at the join, a part's first
  // frame is decoded where the one before ended, and shown after its B-frames' delay: 100 ms on).
  EXPECT_GE(frames.back().first - frames.front().first, 3'300'000'000);
  for (size_t j = 1; j < frames.size(); ++j) {
    EXPECT_LE(frames[j].first - frames[j - 1].first, j == 60 ? 110'000'000 : 34'000'000) << "frame " << j;
  }

  // Part 2's: from its first frame (a key frame, at 3.192 s) up to 7 s, into part 3.
  ASSERT_NO_FATAL_FAILURE(clip_of(4000, 5000));
  ASSERT_GE(frames.size(), 105u);
  ASSERT_LE(frames.size(), 120u);
  expect_parts_from(frames, 0, "part 2 on");
  // Part 3's last GOP (from its frame 60, at 8.192 s), to the file's end.
  ASSERT_NO_FATAL_FAILURE(clip_of(8800, 8900));
  ASSERT_EQ(frames.size(), 30u);
  expect_parts_from(frames, 60, "part 3's end");
}

INSTANTIATE_TEST_SUITE_P(Containers, SegmentClipsTest, ::testing::Values("mp4mux", "matroskamux", "webmmux"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           const std::string muxer = p.param;
                           return muxer == "mp4mux" ? "Mp4" : muxer == "matroskamux" ? "Matroska" : "WebmVp8";
                         });

}  // namespace
}  // namespace vapipe::cli
