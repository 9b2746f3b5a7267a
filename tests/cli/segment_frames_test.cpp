#include "cli/segment_frames.h"

#include <cstdint>
#include <gst/app/gstappsink.h>
#include <gst/app/gstappsrc.h>
#include <gst/gst.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/config.h"
#include "pipeline/file_identity.h"
#include "pipeline/message.h"
#include "pipeline/signals.h"
#include "pipeline/stream_uri.h"
#include "stages/ingest/mp4_orientation.h"
#include "stages/ingest/ps_segment_start.h"
#include "stages/ingest/stream_reader.h"
#include "tests/fakes/stage_harness.h"

namespace vapipe::cli {
namespace {

constexpr int kWidth = 160, kHeight = 120, kFrames = 60;

// Frame i is flat grey at this level: each frame tells which one it is after H.264 and JPEG.
int level_of(int i) { return 20 + 3 * i; }

// An H.264 file (B-frames, a key frame every 30) whose frames are flat greys, one level each (its
// right half `right_brighter` levels brighter, to tell halves apart).
void write_grey_clip(const std::string& path, const std::string& mux, int right_brighter = 0) {
  GError* err = nullptr;
  GstElement* pipeline = gst_parse_launch(
      ("appsrc name=src format=time caps=video/x-raw,format=I420,width=160,height=120,framerate=30/1 ! "
       "x264enc speed-preset=ultrafast key-int-max=30 bframes=2 ! h264parse ! " + mux + " ! filesink location=" + path)
          .c_str(),
      &err);
  ASSERT_TRUE(pipeline && !err) << (err ? err->message : "");
  GstElement* src = gst_bin_get_by_name(GST_BIN(pipeline), "src");
  ASSERT_EQ(gst_element_set_state(pipeline, GST_STATE_PLAYING), GST_STATE_CHANGE_ASYNC);
  const size_t luma = kWidth * kHeight, size = luma * 3 / 2;
  for (int i = 0; i < kFrames; ++i) {
    GstBuffer* b = gst_buffer_new_allocate(nullptr, size, nullptr);
    GstMapInfo map;
    gst_buffer_map(b, &map, GST_MAP_WRITE);
    std::fill(map.data, map.data + luma, static_cast<guint8>(level_of(i)));
    for (int row = 0; row < kHeight && right_brighter; ++row) {
      std::fill(map.data + row * kWidth + kWidth / 2, map.data + (row + 1) * kWidth,
                static_cast<guint8>(level_of(i) + right_brighter));
    }
    std::fill(map.data + luma, map.data + size, 128);
    gst_buffer_unmap(b, &map);
    GST_BUFFER_PTS(b) = gst_util_uint64_scale(i, GST_SECOND, 30);
    GST_BUFFER_DURATION(b) = gst_util_uint64_scale(1, GST_SECOND, 30);
    ASSERT_EQ(gst_app_src_push_buffer(GST_APP_SRC(src), b), GST_FLOW_OK);
  }
  gst_app_src_end_of_stream(GST_APP_SRC(src));
  GstBus* bus = gst_element_get_bus(pipeline);
  GstMessage* m = gst_bus_timed_pop_filtered(bus, 30 * GST_SECOND,
                                             static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
  ASSERT_TRUE(m && GST_MESSAGE_TYPE(m) == GST_MESSAGE_EOS) << path;
  gst_message_unref(m);
  gst_object_unref(bus);
  gst_object_unref(src);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(pipeline);
}

// Every frame of `path` as decoded: its timestamp (the buffer's, as ingest reads it) and mean luma.
std::vector<std::pair<int64_t, double>> decode_all(const std::string& path) {
  std::vector<std::pair<int64_t, double>> frames;
  GstElement* pipeline = gst_parse_launch(("uridecodebin name=decode uri=file://" + path +
                                           " ! videoconvert ! video/x-raw,format=GRAY8 ! appsink name=sink sync=false")
                                              .c_str(),
                                          nullptr);
  GstElement* sink = gst_bin_get_by_name(GST_BIN(pipeline), "sink");
  // An MPEG-PS file's first frames, which mpegpsdemux leaves out, as ingest reads them.
  GstElement* decode = gst_bin_get_by_name(GST_BIN(pipeline), "decode");
  start_ps_segments_at_first_frame_in(decode);
  gst_object_unref(decode);
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  while (GstSample* s = gst_app_sink_try_pull_sample(GST_APP_SINK(sink), 10 * GST_SECOND)) {
    // Its stream time: an MP4's on its edit list's timeline, as ingest (and players) time its frames.
    GstBuffer* b = gst_buffer_copy(gst_sample_get_buffer(s));
    GST_BUFFER_PTS(b) = gst_segment_to_stream_time(gst_sample_get_segment(s), GST_FORMAT_TIME, GST_BUFFER_PTS(b));
    GstMapInfo map;
    gst_buffer_map(b, &map, GST_MAP_READ);
    double sum = 0;
    for (int y = 0; y < kHeight; ++y) {
      for (int x = 0; x < kWidth; ++x) sum += map.data[y * kWidth + x];
    }
    gst_buffer_unmap(b, &map);
    frames.emplace_back(static_cast<int64_t>(GST_BUFFER_PTS(b)), sum / (kWidth * kHeight));
    gst_buffer_unref(b);
    gst_sample_unref(s);
  }
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(sink);
  gst_object_unref(pipeline);
  return frames;
}

struct Picture {
  int width = 0, height = 0;
  double mean = -1;
  std::vector<uint8_t> luma;  // width x height, row after row
};

// A JPEG file's size and mean luma (decoded by jpegdec; {0, 0, -1} if it is not a JPEG).
Picture read_jpeg(const std::string& path) {
  Picture p;
  GstElement* pipeline = gst_parse_launch(
      "filesrc name=src ! jpegdec ! videoconvert ! video/x-raw,format=GRAY8 ! appsink name=sink sync=false", nullptr);
  GstElement* src = gst_bin_get_by_name(GST_BIN(pipeline), "src");
  GstElement* sink = gst_bin_get_by_name(GST_BIN(pipeline), "sink");
  g_object_set(src, "location", path.c_str(), nullptr);
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  if (GstSample* raw = gst_app_sink_try_pull_sample(GST_APP_SINK(sink), 10 * GST_SECOND)) {
    GstVideoInfo info;
    gst_video_info_from_caps(&info, gst_sample_get_caps(raw));
    p.width = GST_VIDEO_INFO_WIDTH(&info);
    p.height = GST_VIDEO_INFO_HEIGHT(&info);
    GstMapInfo map;
    GstBuffer* b = gst_sample_get_buffer(raw);
    gst_buffer_map(b, &map, GST_MAP_READ);
    double sum = 0;
    for (int y = 0; y < p.height; ++y) {
      for (int x = 0; x < p.width; ++x) {
        const uint8_t v = map.data[y * GST_VIDEO_INFO_PLANE_STRIDE(&info, 0) + x];
        sum += v;
        p.luma.push_back(v);
      }
    }
    gst_buffer_unmap(b, &map);
    p.mean = sum / (p.width * p.height);
    gst_sample_unref(raw);
  }
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(src);
  gst_object_unref(sink);
  gst_object_unref(pipeline);
  return p;
}

// Every frame of `path` decoded alone, as luma (width x height, row after row).
std::vector<std::vector<uint8_t>> decode_luma(const std::string& path) {
  std::vector<std::vector<uint8_t>> frames;
  GstElement* pipeline = gst_parse_launch(("uridecodebin uri=file://" + path +
                                           " ! videoconvert ! video/x-raw,format=GRAY8 ! appsink name=sink sync=false")
                                              .c_str(),
                                          nullptr);
  GstElement* sink = gst_bin_get_by_name(GST_BIN(pipeline), "sink");
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  while (GstSample* s = gst_app_sink_try_pull_sample(GST_APP_SINK(sink), 10 * GST_SECOND)) {
    GstVideoInfo info;
    gst_video_info_from_caps(&info, gst_sample_get_caps(s));
    GstMapInfo map;
    gst_buffer_map(gst_sample_get_buffer(s), &map, GST_MAP_READ);
    std::vector<uint8_t> luma;
    for (int y = 0; y < GST_VIDEO_INFO_HEIGHT(&info); ++y) {
      const uint8_t* row = map.data + y * GST_VIDEO_INFO_PLANE_STRIDE(&info, 0);
      luma.insert(luma.end(), row, row + GST_VIDEO_INFO_WIDTH(&info));
    }
    gst_buffer_unmap(gst_sample_get_buffer(s), &map);
    frames.push_back(std::move(luma));
    gst_sample_unref(s);
  }
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(sink);
  gst_object_unref(pipeline);
  return frames;
}

// The mean absolute difference of two pictures' luma (255 when their sizes differ).
double luma_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size() || a.empty()) return 255;
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += std::abs(static_cast<int>(a[i]) - static_cast<int>(b[i]));
  return sum / static_cast<double>(a.size());
}

class SegmentFramesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(ensure_gstreamer());
    dir_ = std::filesystem::temp_directory_path() / ("vapipe-segment-frames-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }

  // A segment that begins at pts_ns and whose best frame is at best_ns (the same by default).
  static Segment segment(const std::string& id, const std::string& label, const std::string& path, int64_t pts_ns,
                         int64_t best_ns = -1) {
    Segment s;
    s.stream_id = id;
    s.label = label;
    s.uri = "file://" + path;
    s.start_ms = std::round(static_cast<double>(pts_ns) / 1e3) / 1e3;  // as results say it: to the microsecond
    s.best_ms = best_ns < 0 ? s.start_ms : std::round(static_cast<double>(best_ns) / 1e3) / 1e3;
    return s;
  }

  static inline std::filesystem::path dir_;
};

TEST(SegmentFramePath, PicturesSortByTimeInTheirStreamsFolderAndAreSafeToType) {
  Segment s;
  s.stream_id = "gate";
  s.label = "street sign/post";
  EXPECT_EQ(segment_frame_path("out", s, 72400), "out/gate/00-01-12.400_street_sign_post.jpg");
  const double ms = 3 * 3'600'000 + 5 * 60'000 + 7'089.6;  // rounded to the millisecond
  s.label = "Straßenbahn 'n' \"bus\"";
  EXPECT_EQ(segment_frame_path("out", s, ms), "out/gate/03-05-07.090_Straßenbahn__n___bus_.jpg");
  s.label = "..";
  EXPECT_EQ(segment_frame_path("/tmp/f", s, ms), "/tmp/f/gate/03-05-07.090_...jpg");  // not hidden, not ".."
}

// The frame that stands for each segment (its first, or its best: --picture), found by its timestamp
// (after a seek back, forwards, to a frame that is not a key frame, in MP4 and Matroska), is written
// as a JPEG of that very frame, named by that frame's time.
TEST_F(SegmentFramesTest, EachSegmentsFirstOrBestFrameIsWrittenAsAPictureOfThatFrame) {
  // (MPEG-PS: mpegpsdemux left out its first frames, 0 and 12 among them: see ps_segment_start.h.)
  for (const std::string mux : {"mp4mux", "matroskamux", "mpegpsmux"}) {
    const std::string clip = (dir_ / ("grey-" + mux + ".video")).string();
    write_grey_clip(clip, mux);
    const auto frames = decode_all(clip);
    ASSERT_EQ(frames.size(), static_cast<size_t>(kFrames)) << mux;
    for (int i = 0; i < kFrames; ++i) ASSERT_NEAR(frames[i].second, level_of(i), 1.2) << mux << " frame " << i;
    for (const SegmentPicture which : {SegmentPicture::kFirst, SegmentPicture::kBest}) {
      const bool best = which == SegmentPicture::kBest;
      const std::string out = (dir_ / ("pictures-" + mux + (best ? "-best" : "-first"))).string();
      SegmentFrames pictures(out, which);
      for (const int i : {47, 12, 0, 31, 52, 30}) {
        const int shown = best ? i + 7 : i;  // its best frame 7 frames after its first
        const Segment s = segment("grey", "level", clip, frames[i].first, frames[i + 7].first);
        auto path = pictures.save(s);
        ASSERT_TRUE(path.ok()) << mux << " frame " << shown << ": " << path.status().message();
        EXPECT_EQ(path.value(), segment_frame_path(out, s, best ? s.best_ms : s.start_ms));
        const Picture p = read_jpeg(path.value());
        EXPECT_EQ(p.width, kWidth);
        EXPECT_EQ(p.height, kHeight);
        // Frames differ by 3 levels: the picture is this frame's, not a neighbour's.
        EXPECT_NEAR(p.mean, frames[shown].second, 1.2) << mux << " frame " << shown;
        EXPECT_NEAR(p.mean, level_of(shown), 1.2) << mux << " frame " << shown;
        // Results of vapipe before 2026-12-07 (no edit_list_ms): an MP4's frames at their media times,
        // x264's B-frames' 2 frames later. The same frame.
        if (mux != "mp4mux") continue;
        Segment earlier = segment("grey", "level", clip, frames[i].first + 66'666'667, frames[i + 7].first + 66'666'667);
        earlier.pts_media_times = true;
        SegmentFrames earlier_pictures(out + "-earlier", which);
        auto earlier_path = earlier_pictures.save(earlier);
        ASSERT_TRUE(earlier_path.ok()) << "frame " << shown << ": " << earlier_path.status().message();
        EXPECT_NEAR(read_jpeg(earlier_path.value()).mean, level_of(shown), 1.2) << "earlier results' frame " << shown;
      }
    }
  }
}

// A file that says how it is shown (a phone's portrait video) gives an upright picture, as ingest
// classified it.
TEST_F(SegmentFramesTest, AFileStoredSidewaysGivesAnUprightPicture) {
  const std::string clip = (dir_ / "portrait.mp4").string();
  write_grey_clip(clip, "mp4mux");
  const auto frames = decode_all(clip);
  ASSERT_EQ(frames.size(), static_cast<size_t>(kFrames));
  ASSERT_TRUE(set_mp4_orientation(clip, Orientation::kRotate90).ok());  // as a phone writes a portrait video
  SegmentFrames pictures((dir_ / "portrait-pictures").string(), SegmentPicture::kFirst);
  auto path = pictures.save(segment("phone", "level", clip, frames[10].first));
  ASSERT_TRUE(path.ok()) << path.status().message();
  const Picture p = read_jpeg(path.value());
  EXPECT_EQ(p.width, kHeight);
  EXPECT_EQ(p.height, kWidth);
  EXPECT_NEAR(p.mean, level_of(10), 1.2);
}

// A stream's roi and turn (from its started event): the picture is the region it classified, of
// the frame turned as its config said, cropped in the pixels ingest crops.
TEST_F(SegmentFramesTest, AStreamsRegionOfItsTurnedFrameIsItsPicture) {
  const std::string clip = (dir_ / "halves.mkv").string();
  write_grey_clip(clip, "matroskamux", 100);  // right half 100 levels brighter
  const auto frames = decode_all(clip);
  ASSERT_EQ(frames.size(), static_cast<size_t>(kFrames));
  SegmentFrames pictures((dir_ / "region-pictures").string(), SegmentPicture::kFirst);
  auto picture = [&](const std::string& id, std::array<double, 4> roi, const std::string& turn) {
    Segment s = segment(id, "level", clip, frames[5].first);
    s.roi = roi;
    s.turn = turn;
    auto path = pictures.save(s);
    EXPECT_TRUE(path.ok()) << path.status().message();
    return path.ok() ? read_jpeg(path.value()) : Picture{};
  };
  Picture p = picture("right", {0.5, 0, 0.5, 1}, "");
  EXPECT_EQ(p.width, kWidth / 2);
  EXPECT_EQ(p.height, kHeight);
  EXPECT_NEAR(p.mean, level_of(5) + 100, 3);
  p = picture("left-top", {0, 0, 0.5, 0.25}, "");
  EXPECT_EQ(p.width, kWidth / 2);
  EXPECT_EQ(p.height, kHeight / 4);
  EXPECT_NEAR(p.mean, level_of(5), 3);
  p = picture("turned", {0, 0, 0.5, 1}, "rotate-180");  // upside down: the left half is the file's right
  EXPECT_EQ(p.width, kWidth / 2);
  EXPECT_NEAR(p.mean, level_of(5) + 100, 3);
  p = picture("sideways", {0, 0, 1, 0.5}, "rotate-90");  // 120x160 upright; its top half the file's left
  EXPECT_EQ(p.width, kHeight);
  EXPECT_EQ(p.height, kWidth / 2);
  EXPECT_NEAR(p.mean, level_of(5), 3);
}

// No picture, and why, naming the stream's uri: a camera's stream (its frames are gone), a file that
// is gone, a timestamp no frame has, one after the file's end; and no picture is left behind.
TEST_F(SegmentFramesTest, WhyThereIsNoPictureIsSaidNamingTheFile) {
  const std::string clip = (dir_ / "why.mp4").string();
  write_grey_clip(clip, "mp4mux");
  const auto frames = decode_all(clip);
  ASSERT_EQ(frames.size(), static_cast<size_t>(kFrames));
  const std::string out = (dir_ / "why-pictures").string();
  SegmentFrames pictures(out, SegmentPicture::kBest);
  auto expect_refused = [&](Segment s, const std::string& words) {
    auto path = pictures.save(s);
    ASSERT_FALSE(path.ok()) << words;
    EXPECT_NE(path.status().message().find(words), std::string::npos) << path.status().message();
  };
  Segment camera = segment("gate", "truck", "", 1'000'000'000);
  camera.uri = "rtsp://***@10.0.0.21/stream1";
  expect_refused(camera, "rtsp://***@10.0.0.21/stream1 is not a file: only a file's frames can be read again");
  Segment unknown = segment("gate", "truck", "", 0);
  unknown.uri.clear();
  expect_refused(unknown, "its stream's start event is not in the results");
  expect_refused(segment("gone", "truck", (dir_ / "gone.mp4").string(), 0),
                 (dir_ / "gone.mp4").string() + ": no such file (moved? --moved FROM TO reads the files of folder "
                                                "FROM in TO)");
  const int64_t between = frames[20].first + 10'000'000;  // 10 ms after frame 20
  expect_refused(segment("why", "level", clip, between),
                 "no frame has the timestamp " + media_time_text(std::round(between / 1e3) / 1e3) + " (the next is at " +
                     media_time_text(frames[21].first / 1e6) + ")");
  expect_refused(segment("why", "level", clip, 5 * static_cast<int64_t>(GST_SECOND)), "the file ends before 0:05.000");
  // The decoder that failed is opened again for the next segment, which is found.
  auto path = pictures.save(segment("why", "level", clip, frames[20].first));
  ASSERT_TRUE(path.ok()) << path.status().message();
  EXPECT_NEAR(read_jpeg(path.value()).mean, level_of(20), 1.2);
  size_t written = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(out)) written += e.is_regular_file();
  EXPECT_EQ(written, 1u);
}

// Files joined end to end (`cat` of MPEG-TS recordings), each part's timestamps starting again, where
// tsdemux does not join them itself (it does for most such files, not for this one: three copies of a
// 3 s recording): ingest put the parts on one timeline and the results' pts_ms are on it, where a seek
// by time lands in another part. Each segment's picture is of the frame ingest gave that time, in any
// part, asked for in any order (on, back, across a join): closer to that frame of the recording than to
// the frames before and after it (a moving ball).
TEST_F(SegmentFramesTest, AJoinedFilesPicturesAreOfTheFramesIngestTimedOnOneTimeline) {
  const std::string part = (dir_ / "part.ts").string(), joined = (dir_ / "joined.ts").string();
  const std::string encode = "gst-launch-1.0 -q videotestsrc pattern=ball num-buffers=90 ! video/x-raw,width=640,"
                             "height=360,framerate=30/1 ! x264enc key-int-max=30 ! h264parse ! mpegtsmux ! filesink "
                             "location=" + part;
  ASSERT_EQ(std::system(encode.c_str()), 0) << encode;
  ASSERT_EQ(std::system(("cat " + part + " " + part + " " + part + " > " + joined).c_str()), 0);
  const std::vector<std::vector<uint8_t>> recording = decode_luma(part);
  ASSERT_EQ(recording.size(), 90u);
  // Ingest's timestamps of its frames, as the results have them, and where its timeline starts over.
  StreamConfig stream;
  stream.id = "dvr";
  auto parsed = parse_stream_uri(joined, dir_.string());
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  stream.parsed = parsed.value();
  stream.uri = stream.parsed.uri;
  auto reader = StreamReader::create(stream, 0, IngestConfig{}, ReaderOptions{});
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  testing::CollectingEmitter out;
  ShutdownFlags flags;
  ASSERT_TRUE((*reader)->run(out, flags).ok());
  std::vector<int64_t> pts;
  for (const Message& m : out.messages) {
    if (m.kind == MessageKind::kFrame) pts.push_back(m.env.pts_ns);
  }
  ASSERT_EQ(pts.size(), 270u);
  ASSERT_EQ(out.messages.back().kind, MessageKind::kStreamEnd);
  ASSERT_EQ(out.messages.back().event.timeline_restarts, 2u) << "tsdemux joined the parts itself: not the case tested";
  const double restart_ms = static_cast<double>(out.messages.back().event.timeline_restart_ns) / 1e6;
  SegmentFrames pictures((dir_ / "joined-pictures").string(), SegmentPicture::kBest);
  for (const auto& [part_index, i] : std::vector<std::pair<int, int>>{
           {2, 45}, {1, 10}, {1, 12}, {0, 50}, {2, 5}, {2, 88}, {1, 89}, {2, 0}, {0, 1}}) {
    const std::string what = "part " + std::to_string(part_index) + ", frame " + std::to_string(i);
    Segment s = segment("dvr", "ball", joined, pts[static_cast<size_t>(part_index * 90 + i)]);
    s.timeline_restart_ms = restart_ms;
    auto path = pictures.save(s);
    ASSERT_TRUE(path.ok()) << what << ": " << path.status().message();
    const Picture picture = read_jpeg(path.value());
    const double own = luma_difference(picture.luma, recording[static_cast<size_t>(i)]);
    EXPECT_LT(own, 3.0) << what;
    for (const int other : {i - 1, i + 1}) {
      if (other < 0 || other >= 90) continue;
      EXPECT_LT(own, luma_difference(picture.luma, recording[static_cast<size_t>(other)])) << what << " against " << other;
    }
  }
}

// --moved FROM TO: a folder and what lies below it, never a sibling that starts with its name; the
// longest FROM wins.
TEST(SegmentFramesMoved, AFilesPathNowIsUnderTheLongestFolderItWasMovedFrom) {
  const std::vector<MovedFolder> moved = {{"/mnt/dvr", "/Volumes/archive"}, {"/mnt/dvr/ch02", "/nas/two"},
                                          {"/", "/root-copy"}};
  EXPECT_EQ(path_now("/mnt/dvr/ch01/a.mp4", moved), "/Volumes/archive/ch01/a.mp4");
  EXPECT_EQ(path_now("/mnt/dvr/ch02/b.mp4", moved), "/nas/two/b.mp4");
  EXPECT_EQ(path_now("/mnt/dvr2/c.mp4", moved), "/root-copy/mnt/dvr2/c.mp4");  // not under /mnt/dvr: under /
  EXPECT_EQ(path_now("/mnt/dvr", moved), "/Volumes/archive");
  EXPECT_EQ(path_now("/mnt/dvr2/c.mp4", {{"/mnt/dvr", "/x"}}), "/mnt/dvr2/c.mp4");
  EXPECT_EQ(path_now("/srv/a.mp4", {{"/srv", "/"}}), "/a.mp4");
}

// A file that is not as the job opened it (the started event's bytes and head_hash): another recording
// under its name (its beginning differs, whatever its size) is not used; one appended to or cut (its
// beginning the same) is, said. Results of before head_hash: smaller is another, larger maybe appended.
TEST(SegmentFramesChanged, AFileThatIsNotAsTheJobOpenedItIsSaidWithBothSizes) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("vapipe-changed-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir / "now");
  const std::string file = (dir / "now" / "cam.mp4").string();
  const std::string moved_from = " (moved from " + (dir / "then" / "cam.mp4").string() + ")";
  std::ofstream(file) << std::string(1000, 'x');
  Segment s;
  s.uri = "file://" + (dir / "then" / "cam.mp4").string();  // where the job read it; --moved says where it is
  const std::vector<MovedFolder> moved = {{(dir / "then").string(), (dir / "now").string()}};
  bool usable = false;
  auto check = [&] { return file_unchanged_since_classified(s, moved, &usable); };
  EXPECT_TRUE(check().ok());  // its size then not said
  s.file_bytes = 1000;
  EXPECT_TRUE(check().ok());
  s.file_bytes = 1200;  // no head_hash: smaller is another recording
  Status smaller = check();
  EXPECT_EQ(smaller.code(), StatusCode::kFailedPrecondition);
  EXPECT_FALSE(usable);
  EXPECT_EQ(smaller.message(), file + moved_from +
                                   " has changed since it was classified (1200 bytes then, 1000 now): it is not the "
                                   "recording the results are of (replaced or cut since?); classify it again");
  s.file_bytes = 900;  // no head_hash: larger may have been appended to
  EXPECT_NE(check().message().find("has grown since it was classified (900 bytes then, 1000 now): its frames"),
            std::string::npos);
  EXPECT_TRUE(usable);

  s.file_bytes = 1000;
  s.file_head = file_head_hash(file);
  ASSERT_EQ(s.file_head.size(), 16u);
  EXPECT_TRUE(check().ok());
  std::ofstream(file, std::ios::app) << std::string(500, 'y');  // a recorder appended to it
  EXPECT_EQ(check().message(), file + moved_from +
                                   " has grown since it was classified (1000 bytes then, 1500 now), its beginning the same");
  EXPECT_TRUE(usable);
  std::ofstream(file) << std::string(1500, 'z');  // another recording, of any size
  EXPECT_NE(check().message().find("has changed since it was classified (1000 bytes then, 1500 now): it is not"),
            std::string::npos);
  EXPECT_FALSE(usable);
  std::ofstream(file) << std::string(1000, 'z');  // of the same size
  EXPECT_NE(check().message().find("(1000 bytes then, 1000 now, and its first bytes differ): it is not"),
            std::string::npos) << check().message();
  EXPECT_FALSE(usable);
  s.uri = "file://" + (dir / "then" / "gone.mp4").string();  // missing: save() says so
  EXPECT_TRUE(check().ok());
  std::filesystem::remove_all(dir);
}

// A results file made where the archive was (its uris name /old/...): with --moved, the picture is
// read from where the file is now, and an error names both paths.
TEST_F(SegmentFramesTest, AMovedFilesPicturesAreReadWhereItIsNow) {
  const std::filesystem::path now = dir_ / "nas" / "ch 01#";  // a name to escape in the URI
  std::filesystem::create_directories(now);
  const std::string made = (dir_ / "to-move.mkv").string();  // the helpers' pipelines take plain paths
  write_grey_clip(made, "matroskamux");
  const auto frames = decode_all(made);
  ASSERT_EQ(frames.size(), static_cast<size_t>(kFrames));
  std::filesystem::rename(made, now / "moved.mkv");
  SegmentFrames pictures((dir_ / "moved-pictures").string(), SegmentPicture::kFirst,
                         {{"/mnt/dvr", (dir_ / "nas").string()}});
  // As ingest names a file in its events: escaped ("file:///mnt/dvr/ch%2001%23/moved.mkv").
  auto named = [&](const std::string& path) {
    Segment s = segment("moved", "level", "", frames[12].first);
    gchar* uri = gst_filename_to_uri(path.c_str(), nullptr);
    s.uri = uri;
    g_free(uri);
    return s;
  };
  ASSERT_EQ(named("/mnt/dvr/ch 01#/moved.mkv").uri, "file:///mnt/dvr/ch%2001%23/moved.mkv");
  auto path = pictures.save(named("/mnt/dvr/ch 01#/moved.mkv"));
  ASSERT_TRUE(path.ok()) << path.status().message();
  EXPECT_NEAR(read_jpeg(path.value()).mean, level_of(12), 1.2);
  auto gone = pictures.save(named("/mnt/dvr/ch 01#/gone.mkv"));
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().message(),
            (now / "gone.mkv").string() + " (moved from /mnt/dvr/ch 01#/gone.mkv): no such file");
}

}  // namespace
}  // namespace vapipe::cli
