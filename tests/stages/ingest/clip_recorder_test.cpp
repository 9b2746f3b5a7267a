// Clips of segments (stages/ingest/clip_recorder.h): an H.264 stream with B-frames (x264) fed to a
// RecentFrames as a decoder's input is; a clip asked for while it plays is an MP4 whose frames, decoded
// (libav), are byte for byte the stream's own from the key frame before its pre-roll to the first
// frame after its post-roll; and a clip that cannot be, or is cut, says why.
#include "stages/ingest/clip_recorder.h"

#include <cstdint>
#include <gst/app/gstappsink.h>
#include <gst/gst.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "stages/ingest/mp4_orientation.h"
#include "stages/ingest/stream_reader.h"

namespace vapipe {
namespace {

using std::chrono::milliseconds;

struct Sample {
  GstBuffer* buffer;  // ref
  GstCaps* caps;      // ref
};

// Each sample the pipeline `launch` gives its appsink, in order: `launch ! appsink`.
std::vector<Sample> pull_samples(const std::string& launch) {
  std::vector<Sample> out;
  GError* err = nullptr;
  GstElement* p = gst_parse_launch((launch + " ! appsink name=sink sync=false").c_str(), &err);
  EXPECT_NE(p, nullptr) << launch << ": " << (err ? err->message : "");
  if (err) g_error_free(err);
  if (!p) return out;
  GstElement* sink = gst_bin_get_by_name(GST_BIN(p), "sink");
  gst_element_set_state(p, GST_STATE_PLAYING);
  while (GstSample* s = gst_app_sink_pull_sample(GST_APP_SINK(sink))) {
    out.push_back({gst_buffer_ref(gst_sample_get_buffer(s)), gst_caps_ref(gst_sample_get_caps(s))});
    gst_sample_unref(s);
  }
  gst_element_set_state(p, GST_STATE_NULL);
  gst_object_unref(sink);
  gst_object_unref(p);
  return out;
}

// Each sample `tail` gives of `file` (qtdemux, h264parse), in order.
std::vector<Sample> read_samples(const std::string& file, const std::string& tail) {
  return pull_samples("filesrc location=\"" + file + "\" ! qtdemux ! h264parse ! " + tail);
}

std::string bytes_of(GstBuffer* b) {
  GstMapInfo map;
  EXPECT_TRUE(gst_buffer_map(b, &map, GST_MAP_READ));
  std::string bytes(reinterpret_cast<const char*>(map.data), map.size);
  gst_buffer_unmap(b, &map);
  return bytes;
}

int64_t pts_of(GstBuffer* b) { return GST_BUFFER_PTS_IS_VALID(b) ? static_cast<int64_t>(GST_BUFFER_PTS(b)) : -1; }

void release(std::vector<Sample>& samples) {
  for (Sample& s : samples) {
    gst_buffer_unref(s.buffer);
    gst_caps_unref(s.caps);
  }
  samples.clear();
}

class ClipRecorderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(ensure_gstreamer());
    dir_ = std::filesystem::temp_directory_path() / ("vapipe-clips-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    // 4 s at 30 frames/s, a key frame every 15, B-frames: as a camera sends H.264 (most send no
    // B-frames; these make the order of decoding and of showing differ).
    source_ = (dir_ / "camera.mp4").string();
    const std::string encode = "gst-launch-1.0 -q videotestsrc pattern=ball num-buffers=120 ! "
                               "video/x-raw,width=160,height=120,framerate=30/1 ! x264enc key-int-max=15 bframes=2 "
                               "speed-preset=ultrafast ! h264parse ! mp4mux ! filesink location=" + source_;
    ASSERT_EQ(std::system(encode.c_str()), 0) << encode;
    compressed_ = read_samples(source_, "capsfilter caps=video/x-h264,stream-format=avc,alignment=au");
    ASSERT_EQ(compressed_.size(), 120u);
    for (Sample& s : read_samples(source_, "avdec_h264 ! videoconvert ! video/x-raw,format=I420")) {
      whole_[pts_of(s.buffer)] = bytes_of(s.buffer);
      gst_buffer_unref(s.buffer);
      gst_caps_unref(s.caps);
    }
    ASSERT_EQ(whole_.size(), 120u);
    for (const auto& [pts, bytes] : whole_) shown_.push_back(pts);
  }
  void TearDown() override {
    release(compressed_);
    std::filesystem::remove_all(dir_);
  }

  // The decoder's input, frames [from, to) in decode order, each also sent (as a reader does). As an
  // RTSP camera's come (`as_rtp`): presentation times only (RTP's timestamps), no decoding times.
  void feed(RecentFrames& recent, size_t from, size_t to, bool as_rtp = false) {
    for (size_t i = from; i < to && i < compressed_.size(); ++i) {
      recent.set_caps(compressed_[i].caps);
      if (as_rtp) {
        GstBuffer* untimed = gst_buffer_copy(compressed_[i].buffer);
        GST_BUFFER_DTS(untimed) = GST_CLOCK_TIME_NONE;
        recent.add_compressed(untimed);
        gst_buffer_unref(untimed);
      } else {
        recent.add_compressed(compressed_[i].buffer);
      }
      Envelope env;
      env.stream_id = "door";
      env.seq = i;
      env.pts_ns = pts_of(compressed_[i].buffer);
      recent.add_sent(env, Orientation::kAsStored);
    }
  }

  static std::vector<ClipDone> wait_done(ClipRecorder& recorder, size_t count) {
    std::vector<ClipDone> all;
    for (int i = 0; i < 200 && all.size() < count; ++i) {
      for (ClipDone& d : recorder.take_done()) all.push_back(std::move(d));
      if (all.size() < count) std::this_thread::sleep_for(milliseconds(50));
    }
    return all;
  }

  // Another camera's stream (or the same one's after a change): 45 frames of `smpte` at width x height,
  // x264 with B-frames, key frames every 15, as compressed samples in decode order; the file is dir_/name.
  std::vector<Sample> encoded(const std::string& name, int width, int height) {
    const std::string file = (dir_ / name).string();
    const std::string encode = "gst-launch-1.0 -q videotestsrc pattern=smpte num-buffers=45 ! video/x-raw,width=" +
                               std::to_string(width) + ",height=" + std::to_string(height) +
                               ",framerate=30/1 ! x264enc key-int-max=15 bframes=2 speed-preset=ultrafast ! "
                               "h264parse ! mp4mux ! filesink location=" + file;
    EXPECT_EQ(std::system(encode.c_str()), 0) << encode;
    return read_samples(file, "capsfilter caps=video/x-h264,stream-format=avc,alignment=au");
  }
  // Frames [from, to) of such a stream, as the decoder's input (their caps with them).
  static void feed_from(RecentFrames& recent, const std::vector<Sample>& frames, size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) {
      recent.set_caps(frames[i].caps);
      recent.add_compressed(frames[i].buffer);
    }
  }

  // The stream's timestamps of the frames a written clip part `d` shows, in order (placed by its first,
  // its key frame, at d.start_pts_ns), each checked to decode to the stream's own picture there.
  std::vector<int64_t> shown_in(const ClipDone& d) {
    std::vector<Sample> frames = read_samples(d.order.path, "avdec_h264 ! videoconvert ! video/x-raw,format=I420");
    std::vector<int64_t> shown;
    if (frames.empty()) return shown;
    const int64_t offset = d.start_pts_ns - pts_of(frames.front().buffer);
    for (Sample& f : frames) {
      shown.push_back(pts_of(f.buffer) + offset);
      EXPECT_TRUE(whole_.count(shown.back()) && whole_.at(shown.back()) == bytes_of(f.buffer))
          << "part " << d.part << ", frame " << shown.size();
    }
    release(frames);
    return shown;
  }

  ClipOrder order(const std::string& name, int64_t first_pts) {
    return ClipOrder{0, "door", "person", 7, (dir_ / "door" / name).string(), first_pts};
  }

  std::filesystem::path dir_;
  std::string source_;
  std::vector<Sample> compressed_;          // decode order
  std::map<int64_t, std::string> whole_;    // a whole decode's frames by timestamp
  std::vector<int64_t> shown_;              // timestamps in display order
};

// Pre-roll 300 ms (9 frames) before frame 50 is frame 41: the clip begins at the key frame at or
// before it (45 is after, so 30), and ends with the frames shown up to 110 ms after frame 80.
TEST_F(ClipRecorderTest, AClipHoldsTheStreamsOwnFramesFromTheKeyFrameBeforeItsPreRollToItsPostRoll) {
  RecentFrames recent(5, milliseconds(100), RecentFrames::kDefaultMaxBytes, milliseconds(300));
  ClipRecorder recorder("door", &recent, ClipRecorder::Options{milliseconds(300), milliseconds(110), std::chrono::seconds(60)});
  feed(recent, 0, 60);  // publish asks once the segment's first frames have gone by
  const int64_t first = shown_[50], last = shown_[80];
  recorder.start(order("clip.mp4", first));
  feed(recent, 60, 90);
  recorder.end("door", "person", 7, last);
  feed(recent, 90, 120);
  std::vector<ClipDone> done = wait_done(recorder, 1);
  ASSERT_EQ(done.size(), 1u);
  const ClipDone& d = done[0];
  ASSERT_TRUE(d.written) << d.message;
  EXPECT_EQ(d.message, "");
  EXPECT_EQ(d.order.label, "person");
  EXPECT_EQ(d.order.segment_start_seq, 7u);
  EXPECT_EQ(d.start_pts_ns, shown_[30]);
  const std::string path = (dir_ / "door" / "clip.mp4").string();
  ASSERT_TRUE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".part"));
  EXPECT_FALSE(std::filesystem::exists(path + ".part.frames"));

  std::vector<Sample> frames = read_samples(path, "avdec_h264 ! videoconvert ! video/x-raw,format=I420");
  // Frames 30 to 83 (the last shown at most 110 ms after 80), each the stream's own, in order; then
  // those decoded by then (the clip ends by decoding time: B-frames come after the frames they refer
  // to), a few frames more.
  ASSERT_GE(frames.size(), 54u);
  EXPECT_LE(frames.size(), 54u + 8u);
  // Placed from its first decoding time: its first frame shown at 0, or its B-frames' delay after.
  EXPECT_GE(pts_of(frames[0].buffer), 0);
  EXPECT_LT(pts_of(frames[0].buffer), 200'000'000);
  const int64_t offset = shown_[30] - pts_of(frames[0].buffer);
  for (size_t i = 0; i < frames.size(); ++i) {
    EXPECT_EQ(pts_of(frames[i].buffer) + offset, shown_[30 + i]) << i;
    EXPECT_TRUE(whole_.at(shown_[30 + i]) == bytes_of(frames[i].buffer)) << "frame " << 30 + i;
    gst_buffer_unref(frames[i].buffer);
    gst_caps_unref(frames[i].caps);
  }
  EXPECT_GE(d.duration_ns, shown_[84] - shown_[30]);
  EXPECT_GE(d.frames, 54u);
}

// A stream shown turned (streams[].rotate: a camera mounted on its side; a phone's video): its clip's
// MP4 says so in its track's matrix, so that a player shows it upright, as the segment's picture is;
// its frames are the stream's own, as stored. Its next part says it too.
TEST_F(ClipRecorderTest, AClipOfATurnedStreamSaysItsTurnForItsPlayer) {
  RecentFrames recent(5, milliseconds(100), RecentFrames::kDefaultMaxBytes, milliseconds(0));
  ClipRecorder recorder("door", &recent, ClipRecorder::Options{milliseconds(0), milliseconds(0), milliseconds(1000)});
  feed(recent, 0, 20);
  ClipOrder turned = order("turned.mp4", shown_[15]);  // from key frame 15; its part 2 from key frame 60
  turned.turn = Orientation::kRotate90;
  recorder.start(turned);
  feed(recent, 20, 50);
  ASSERT_TRUE(recorder.wait_next_parts_open(std::chrono::seconds(10)));
  feed(recent, 50, 75);
  recorder.end("door", "person", 7, shown_[70]);
  feed(recent, 75, 90);
  std::vector<ClipDone> done = wait_done(recorder, 2);
  ASSERT_GE(done.size(), 2u);
  for (const ClipDone& d : done) {
    ASSERT_TRUE(d.written) << d.message;
    const std::string name = d.part == 1 ? "turned.mp4" : "turned." + std::to_string(d.part) + ".mp4";
    const std::string path = (dir_ / "door" / name).string();
    auto said = mp4_orientation(path);
    ASSERT_TRUE(said.ok()) << said.status().message();
    EXPECT_EQ(*said, Orientation::kRotate90) << name;
    std::vector<Sample> frames = read_samples(path, "avdec_h264 ! videoconvert ! video/x-raw,format=I420");
    EXPECT_GE(frames.size(), 10u) << name;
    for (Sample& f : frames) {
      int width = 0;
      gst_structure_get_int(gst_caps_get_structure(f.caps, 0), "width", &width);
      EXPECT_EQ(width, 160) << name << ": its frames are as stored";
    }
    release(frames);
  }
}

// An RTSP camera that sends B-frames: its frames come with presentation times only, in decoding order.
// The clip is still the stream's own frames, each shown at its time, in the order they are shown (an
// MP4's samples need decoding times: without them its B-frames would be shown in decoding order).
TEST_F(ClipRecorderTest, AnRtspCamerasBFramesAreShownInTheirOrderAtTheirTimes) {
  RecentFrames recent(5, milliseconds(100), RecentFrames::kDefaultMaxBytes, milliseconds(300));
  ClipRecorder recorder("door", &recent, ClipRecorder::Options{milliseconds(300), milliseconds(110), std::chrono::seconds(60)});
  feed(recent, 0, 60, /*as_rtp=*/true);
  recorder.start(order("rtsp.mp4", shown_[50]));
  feed(recent, 60, 90, true);
  recorder.end("door", "person", 7, shown_[80]);
  feed(recent, 90, 120, true);
  std::vector<ClipDone> done = wait_done(recorder, 1);
  ASSERT_EQ(done.size(), 1u);
  ASSERT_TRUE(done[0].written) << done[0].message;
  EXPECT_EQ(done[0].start_pts_ns, shown_[30]);
  std::vector<Sample> samples = read_samples(done[0].order.path, "identity");
  int64_t composition_offsets = 0;  // B-frames: a sample shown after it is decoded
  for (Sample& s : samples) {
    ASSERT_TRUE(GST_BUFFER_DTS_IS_VALID(s.buffer));
    composition_offsets += pts_of(s.buffer) > static_cast<int64_t>(GST_BUFFER_DTS(s.buffer));
  }
  release(samples);
  EXPECT_GT(composition_offsets, 10);
  std::vector<Sample> frames = read_samples(done[0].order.path, "avdec_h264 ! videoconvert ! video/x-raw,format=I420");
  ASSERT_GE(frames.size(), 50u);
  EXPECT_LE(frames.size(), 54u + 8u);
  EXPECT_GE(pts_of(frames[0].buffer), 0);
  EXPECT_LT(pts_of(frames[0].buffer), 200'000'000);
  const int64_t offset = shown_[30] - pts_of(frames[0].buffer);
  for (size_t i = 0; i < frames.size(); ++i) {
    // (To the MP4's timescale: a frame's time may come back a nanosecond off; frames are 33 ms apart.)
    EXPECT_NEAR(pts_of(frames[i].buffer) + offset, shown_[30 + i], 1'000) << i;
    EXPECT_TRUE(whole_.at(shown_[30 + i]) == bytes_of(frames[i].buffer)) << "frame " << 30 + i;
  }
  EXPECT_EQ(done[0].frames, frames.size());
  release(frames);
}

// The same from the camera's first frame, at its time 0: the decoding times the B-frames need begin
// before it, and the file's time 0 is the first of them.
TEST_F(ClipRecorderTest, AnRtspCamerasClipFromItsFirstFrameBeginsAtItsFirstDecodingTime) {
  RecentFrames recent(5, milliseconds(100), RecentFrames::kDefaultMaxBytes, milliseconds(0));
  ClipRecorder recorder("door", &recent, ClipRecorder::Options{milliseconds(0), milliseconds(0), std::chrono::seconds(60)});
  ASSERT_EQ(pts_of(compressed_[0].buffer), shown_[0]);
  feed(recent, 0, 1, /*as_rtp=*/true);
  recorder.start(order("first.mp4", shown_[0]));
  feed(recent, 1, 45, true);
  recorder.close(std::chrono::seconds(10), "the stream ended");
  std::vector<ClipDone> done = recorder.take_done();
  ASSERT_EQ(done.size(), 1u);
  ASSERT_TRUE(done[0].written) << done[0].message;
  std::vector<Sample> samples = read_samples(done[0].order.path, "identity");
  ASSERT_EQ(samples.size(), 45u);
  int64_t last_dts = -1;
  for (Sample& s : samples) {
    ASSERT_TRUE(GST_BUFFER_DTS_IS_VALID(s.buffer));
    const int64_t dts = static_cast<int64_t>(GST_BUFFER_DTS(s.buffer));
    EXPECT_GT(dts, last_dts);
    EXPECT_GE(pts_of(s.buffer), dts);
    last_dts = dts;
  }
  release(samples);
  std::vector<Sample> frames = read_samples(done[0].order.path, "avdec_h264 ! videoconvert ! video/x-raw,format=I420");
  ASSERT_EQ(frames.size(), 45u);
  const int64_t offset = shown_[0] - pts_of(frames[0].buffer);
  for (size_t i = 0; i < frames.size(); ++i) {
    EXPECT_NEAR(pts_of(frames[i].buffer) + offset, shown_[i], 1'000) << i;
    EXPECT_TRUE(whole_.at(shown_[i]) == bytes_of(frames[i].buffer)) << "frame " << i;
  }
  release(frames);
}

// A clip shorter than the frames that wait for their decoding times (the stream ended): placed from
// its key frame all the same, not from the stream's 0.
TEST_F(ClipRecorderTest, AShortRtspClipIsPlacedFromItsKeyFrame) {
  RecentFrames recent(5, milliseconds(100), RecentFrames::kDefaultMaxBytes, milliseconds(0));
  ClipRecorder recorder("door", &recent, ClipRecorder::Options{milliseconds(0), milliseconds(0), std::chrono::seconds(60)});
  feed(recent, 0, 31, /*as_rtp=*/true);
  recorder.start(order("short.mp4", shown_[30]));
  feed(recent, 31, 40, true);
  recorder.close(std::chrono::seconds(10), "the stream ended");
  std::vector<ClipDone> done = recorder.take_done();
  ASSERT_EQ(done.size(), 1u);
  ASSERT_TRUE(done[0].written) << done[0].message;
  EXPECT_EQ(done[0].frames, 10u);  // key frame 30 to 39
  EXPECT_LT(done[0].duration_ns, 1'000'000'000);
  std::vector<Sample> samples = read_samples(done[0].order.path, "identity");
  ASSERT_FALSE(samples.empty());
  EXPECT_LT(pts_of(samples.front().buffer), 200'000'000);
  release(samples);
}

// A segment longer than `max` goes on in a next clip, from the first key frame after `max`: its parts
// hold each frame once. A new decoder (a reconnection, no reconnect grace) ends the clip open then.
TEST_F(ClipRecorderTest, ASegmentPastItsLongestGoesOnInANextClipAndANewDecoderEndsIt) {
  RecentFrames recent(5, milliseconds(100), RecentFrames::kDefaultMaxBytes, milliseconds(0));
  ClipRecorder recorder("door", &recent, ClipRecorder::Options{milliseconds(0), milliseconds(0), milliseconds(1000)});
  feed(recent, 0, 20);
  recorder.start(order("long.mp4", shown_[15]));  // from key frame 15; 1 s on, the next key frame is 60
  feed(recent, 20, 50);
  // The next part's file is made off the stream's thread; at the next key frame after, it begins.
  ASSERT_TRUE(recorder.wait_next_parts_open(std::chrono::seconds(10)));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "door" / "long.2.mp4.part"));
  feed(recent, 50, 75);
  recent.new_decoder();  // a reconnection: its timestamps start again
  std::vector<ClipDone> done = wait_done(recorder, 2);
  ASSERT_EQ(done.size(), 2u);
  ASSERT_TRUE(done[0].written) << done[0].message;
  EXPECT_EQ(done[0].part, 1u);
  EXPECT_TRUE(done[0].continues);
  EXPECT_EQ(done[0].message, "");
  EXPECT_EQ(done[0].order.path, (dir_ / "door" / "long.mp4").string());
  ASSERT_TRUE(done[1].written) << done[1].message;
  EXPECT_EQ(done[1].part, 2u);
  EXPECT_FALSE(done[1].continues);
  EXPECT_NE(done[1].message.find("started over"), std::string::npos) << done[1].message;
  EXPECT_EQ(done[1].order.path, (dir_ / "door" / "long.2.mp4").string());
  EXPECT_EQ(done[1].order.segment_start_seq, 7u);
  EXPECT_EQ(done[1].start_pts_ns, shown_[60]);
  // Each frame once, across the two parts, the stream's own: 15 to 59, then 60 on.
  std::vector<int64_t> shown;
  for (const ClipDone& d : done) {
    const std::vector<int64_t> part = shown_in(d);
    ASSERT_FALSE(part.empty());
    shown.insert(shown.end(), part.begin(), part.end());
    if (d.part == 1) {
      EXPECT_EQ(shown, std::vector<int64_t>(shown_.begin() + 15, shown_.begin() + 60));
    }
  }
  ASSERT_GT(shown.size(), 45u);
  for (size_t i = 0; i < shown.size(); ++i) EXPECT_EQ(shown[i], shown_[15 + i]) << i;
}

// A camera lost mid-segment and back within publish.segments_reconnect_grace_s, its segment going on:
// the part cut by the new decoder says it continues, and the next part holds the new connection's
// frames from the key frame at or before the frame the segment went on with (less `pre`) to its end,
// each the stream's own. Closed while it waits, a clip's part before the restart is its last.
TEST_F(ClipRecorderTest, ASegmentThatGoesOnAfterAReconnectionGoesOnInANextPartOfTheNewConnectionsFrames) {
  RecentFrames recent(5, milliseconds(100), RecentFrames::kDefaultMaxBytes, milliseconds(100));
  ClipRecorder recorder("door", &recent, ClipRecorder::Options{milliseconds(100), milliseconds(0), std::chrono::seconds(60)});
  recorder.set_hold_across_reconnections(true);  // (publish.segments_reconnect_grace_s set by a reload)
  feed(recent, 0, 20);
  recorder.start(order("back.mp4", shown_[18]));  // from key frame 15
  feed(recent, 20, 50);
  recent.new_decoder();  // the camera is lost
  for (int i = 0; i < 200 && !std::filesystem::exists(dir_ / "door" / "back.mp4"); ++i) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_TRUE(std::filesystem::exists(dir_ / "door" / "back.mp4"));
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_TRUE(recorder.take_done().empty()) << "part 1 said before publish said whether its segment goes on";
  // Back: the new connection's timestamps start again (the same frames, as its decoder's input).
  feed(recent, 0, 40);
  recorder.go_on_after_restart("door", "person", 7, shown_[33]);  // less 100 ms: frame 30, a key frame
  recorder.go_on_after_restart("door", "person", 7, shown_[34]);  // (asked twice: one part)
  feed(recent, 40, 70);
  recorder.end("door", "person", 7, shown_[62]);
  feed(recent, 70, 90);
  std::vector<ClipDone> done = wait_done(recorder, 2);
  ASSERT_EQ(done.size(), 2u);
  ASSERT_TRUE(done[0].written) << done[0].message;
  EXPECT_EQ(done[0].part, 1u);
  EXPECT_TRUE(done[0].continues);
  EXPECT_NE(done[0].message.find("started over"), std::string::npos) << done[0].message;
  EXPECT_EQ(done[0].start_pts_ns, shown_[15]);
  ASSERT_TRUE(done[1].written) << done[1].message;
  EXPECT_EQ(done[1].part, 2u);
  EXPECT_FALSE(done[1].continues);
  EXPECT_EQ(done[1].message, "");
  EXPECT_EQ(done[1].order.path, (dir_ / "door" / "back.2.mp4").string());
  EXPECT_EQ(done[1].start_pts_ns, shown_[30]);
  EXPECT_TRUE(recorder.take_done().empty());
  for (const ClipDone& d : done) {
    const std::vector<int64_t> shown = shown_in(d);
    ASSERT_FALSE(shown.empty());
    // Part 1: the first connection's frames from key frame 15 up to the loss; part 2: the second's from
    // key frame 30 to at least frame 62.
    const size_t first = d.part == 1 ? 15 : 30;
    ASSERT_GE(shown.size(), d.part == 1 ? 30u : 33u) << d.part;
    for (size_t i = 0; i < shown.size(); ++i) EXPECT_EQ(shown[i], shown_[first + i]) << d.part << " " << i;
  }

  // Lost again, and the stream ends while its clip waits: the part before is said as its last.
  ClipOrder again = order("again.mp4", shown_[15]);
  again.segment_start_seq = 8;
  feed(recent, 0, 20);
  recorder.start(again);
  feed(recent, 20, 40);
  recent.new_decoder();
  recorder.close(std::chrono::seconds(10), "the stream ended");
  done = wait_done(recorder, 1);
  ASSERT_EQ(done.size(), 1u);
  ASSERT_TRUE(done[0].written) << done[0].message;
  EXPECT_EQ(done[0].order.segment_start_seq, 8u);
  EXPECT_FALSE(done[0].continues);
  EXPECT_NE(done[0].message.find("started over"), std::string::npos) << done[0].message;
}

// A camera that changes its resolution mid-segment (new caps within a connection; publish sees frames,
// not caps): the part open then ends saying so, and the clip goes on by itself in a next part from the
// first key frame of the new caps, an MP4 of its own, each frame the stream's own.
TEST_F(ClipRecorderTest, AClipGoesOnInANextPartWhenItsStreamsResolutionChanges) {
  std::vector<Sample> other = encoded("other.mp4", 176, 144);
  ASSERT_EQ(other.size(), 45u);
  ASSERT_FALSE(gst_caps_is_equal(other[0].caps, compressed_[0].caps));
  std::map<int64_t, std::string> other_whole;
  for (Sample& f : read_samples((dir_ / "other.mp4").string(), "avdec_h264 ! videoconvert ! video/x-raw,format=I420")) {
    other_whole[pts_of(f.buffer)] = bytes_of(f.buffer);
    gst_buffer_unref(f.buffer);
    gst_caps_unref(f.caps);
  }
  RecentFrames recent(5, milliseconds(100), RecentFrames::kDefaultMaxBytes, milliseconds(0));
  ClipRecorder recorder("door", &recent, ClipRecorder::Options{milliseconds(0), milliseconds(0), std::chrono::seconds(60)});
  feed(recent, 0, 20);
  recorder.start(order("change.mp4", shown_[18]));  // from key frame 15
  feed(recent, 20, 50);
  feed_from(recent, other, 0, 5);  // new caps: part 1 ends, part 2 goes on from the new caps' key frame 0
  std::vector<ClipDone> done = wait_done(recorder, 1);
  ASSERT_EQ(done.size(), 1u);
  feed_from(recent, other, 5, 45);
  recorder.end("door", "person", 7, pts_of(other[30].buffer));
  recorder.close(std::chrono::seconds(10), "the stream ended");
  for (ClipDone& d : recorder.take_done()) done.push_back(std::move(d));
  ASSERT_EQ(done.size(), 2u);
  ASSERT_TRUE(done[0].written) << done[0].message;
  EXPECT_EQ(done[0].part, 1u);
  EXPECT_TRUE(done[0].continues);
  EXPECT_EQ(done[0].message, "the stream's resolution or codec changed");
  ASSERT_TRUE(done[1].written) << done[1].message;
  EXPECT_EQ(done[1].part, 2u);
  EXPECT_FALSE(done[1].continues);
  EXPECT_EQ(done[1].order.path, (dir_ / "door" / "change.2.mp4").string());
  EXPECT_EQ(done[1].start_pts_ns, pts_of(other[0].buffer));
  std::vector<Sample> frames = read_samples(done[1].order.path, "avdec_h264 ! videoconvert ! video/x-raw,format=I420");
  ASSERT_GE(frames.size(), 30u);
  for (Sample& f : frames) {
    const GstStructure* st = gst_caps_get_structure(f.caps, 0);
    int width = 0;
    gst_structure_get_int(st, "width", &width);
    EXPECT_EQ(width, 176);
    EXPECT_TRUE(other_whole.count(pts_of(f.buffer)) && other_whole.at(pts_of(f.buffer)) == bytes_of(f.buffer));
  }
  release(frames);
  release(other);
}

// Two changes a few frames apart (an adaptive stream's switches can come so): the part that went on
// after the first had not had its key frame when the second came. It is no part (a file of nothing,
// "not written", and the clip ended there, until stop 66): the clip goes on, under its number, from the
// newest caps' first key frame.
TEST_F(ClipRecorderTest, AClipCutAgainBeforeItsNextPartsFirstKeyFrameGoesOnFromTheNewestCaps) {
  std::vector<Sample> other = encoded("other.mp4", 176, 144);
  std::vector<Sample> third = encoded("third.mp4", 128, 96);
  ASSERT_EQ(other.size(), 45u);
  ASSERT_EQ(third.size(), 45u);
  RecentFrames recent(5, milliseconds(100), RecentFrames::kDefaultMaxBytes, milliseconds(0));
  ClipRecorder recorder("door", &recent, ClipRecorder::Options{milliseconds(0), milliseconds(0), std::chrono::seconds(60)});
  feed(recent, 0, 20);
  recorder.start(order("twice.mp4", shown_[18]));
  feed(recent, 20, 50);
  // New caps, and after them no key frame yet (frames 1 to 4 of `other` are delta frames): part 1 ends
  // and says it goes on; part 2 waits for a key frame.
  for (size_t i = 1; i < 5; ++i) ASSERT_TRUE(GST_BUFFER_FLAG_IS_SET(other[i].buffer, GST_BUFFER_FLAG_DELTA_UNIT));
  feed_from(recent, other, 1, 5);
  std::vector<ClipDone> done = wait_done(recorder, 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(done[0].continues);
  feed_from(recent, third, 0, 5);  // changed again, before part 2 had a frame
  ASSERT_TRUE(recorder.wait_next_parts_open(std::chrono::seconds(10)));
  feed_from(recent, third, 5, 45);
  recorder.end("door", "person", 7, pts_of(third[30].buffer));
  recorder.close(std::chrono::seconds(10), "the stream ended");
  for (ClipDone& d : recorder.take_done()) done.push_back(std::move(d));
  ASSERT_EQ(done.size(), 2u) << done.back().message;
  ASSERT_TRUE(done[1].written) << done[1].message;
  EXPECT_EQ(done[1].part, 2u);
  EXPECT_FALSE(done[1].continues);
  EXPECT_EQ(done[1].order.path, (dir_ / "door" / "twice.2.mp4").string());
  EXPECT_EQ(done[1].start_pts_ns, pts_of(third[0].buffer));
  std::vector<Sample> frames = read_samples(done[1].order.path, "avdec_h264");
  EXPECT_GE(frames.size(), 30u);
  for (Sample& f : frames) {
    int width = 0;
    gst_structure_get_int(gst_caps_get_structure(f.caps, 0), "width", &width);
    EXPECT_EQ(width, 128);
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "door" / "twice.3.mp4"));
  release(frames);

  // Changed again to what an MP4 cannot hold: the clip cannot go on, and the part it would have gone
  // on in is said, not written, saying both (the part before said it goes on).
  RecentFrames recent2(5, milliseconds(100), RecentFrames::kDefaultMaxBytes, milliseconds(0));
  ClipRecorder recorder2("door", &recent2, ClipRecorder::Options{milliseconds(0), milliseconds(0), std::chrono::seconds(60)});
  feed(recent2, 0, 20);
  recorder2.start(order("thrice.mp4", shown_[18]));
  feed(recent2, 20, 50);
  feed_from(recent2, other, 1, 5);
  done = wait_done(recorder2, 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(done[0].continues);
  GstCaps* mpeg2 = gst_caps_new_simple("video/mpeg", "mpegversion", G_TYPE_INT, 2, nullptr);
  recent2.set_caps(mpeg2);
  gst_caps_unref(mpeg2);
  GstBuffer* key = gst_buffer_new_allocate(nullptr, 100, nullptr);
  GST_BUFFER_PTS(key) = 0;
  recent2.add_compressed(key);
  gst_buffer_unref(key);
  done = wait_done(recorder2, 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_FALSE(done[0].written);
  EXPECT_FALSE(done[0].continues);
  EXPECT_EQ(done[0].part, 2u);
  EXPECT_EQ(done[0].order.path, (dir_ / "door" / "thrice.2.mp4").string());
  EXPECT_NE(done[0].message.find("changed before this part's first key frame came"), std::string::npos) << done[0].message;
  EXPECT_NE(done[0].message.find("video/mpeg"), std::string::npos) << done[0].message;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "door" / "thrice.2.mp4"));
  recorder2.close(std::chrono::seconds(10), "the stream ended");
  EXPECT_TRUE(recorder2.take_done().empty());
  release(other);
  release(third);
}

TEST_F(ClipRecorderTest, AClipThatCannotBeSaysWhyAndLeavesNoFile) {
  RecentFrames recent(5, milliseconds(100));
  ClipRecorder recorder("door", &recent, ClipRecorder::Options{});
  recorder.start(order("nothing.mp4", 0));  // nothing kept yet
  std::vector<ClipDone> done = wait_done(recorder, 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_FALSE(done[0].written);
  EXPECT_NE(done[0].message.find("none of its compressed frames is kept"), std::string::npos) << done[0].message;

  // A codec an MP4 does not hold as it is.
  GstCaps* mpeg2 = gst_caps_new_simple("video/mpeg", "mpegversion", G_TYPE_INT, 2, nullptr);
  recent.set_caps(mpeg2);
  gst_caps_unref(mpeg2);
  GstBuffer* key = gst_buffer_new_allocate(nullptr, 100, nullptr);
  GST_BUFFER_PTS(key) = 0;
  recent.add_compressed(key);
  gst_buffer_unref(key);
  recorder.start(order("mpeg2.mp4", 0));
  done = wait_done(recorder, 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_FALSE(done[0].written);
  EXPECT_NE(done[0].message.find("video/mpeg"), std::string::npos) << done[0].message;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "door" / "mpeg2.mp4"));

  // The stream ends while a clip is open: it is written up to its last frame, and said so.
  feed(recent, 0, 20);
  recorder.start(order("ended.mp4", shown_[5]));
  feed(recent, 20, 40);
  recorder.close(std::chrono::seconds(10), "the stream ended");
  done = recorder.take_done();
  ASSERT_EQ(done.size(), 1u);
  ASSERT_TRUE(done[0].written) << done[0].message;
  EXPECT_EQ(done[0].message, "the stream ended");
  EXPECT_EQ(read_samples((dir_ / "door" / "ended.mp4").string(), "avdec_h264").size(), 40u);
}

// A Motion JPEG camera (RTP: presentation times only): GStreamer's mp4mux takes no JPEG, so its clip
// is a QuickTime file (.mov) beside where the MP4 was asked for, said as such, its frames the camera's
// own JPEGs from the pre-roll on, each its own key frame.
TEST_F(ClipRecorderTest, AMotionJpegCamerasClipIsAQuickTimeFileOfItsOwnFrames) {
  std::vector<Sample> jpegs = pull_samples("videotestsrc pattern=ball num-buffers=60 ! video/x-raw,width=160,"
                                           "height=120,framerate=30/1,format=I420 ! jpegenc");
  ASSERT_EQ(jpegs.size(), 60u);
  RecentFrames recent(5, milliseconds(100), RecentFrames::kDefaultMaxBytes, milliseconds(200));
  ClipRecorder recorder("door", &recent, ClipRecorder::Options{milliseconds(200), milliseconds(100), std::chrono::seconds(60)});
  auto feed_jpegs = [&](size_t from, size_t to, RecentFrames* into = nullptr) {
    RecentFrames& recent_frames = into ? *into : recent;
    for (size_t i = from; i < to; ++i) {
      recent_frames.set_caps(jpegs[i].caps);
      GstBuffer* b = gst_buffer_copy(jpegs[i].buffer);
      GST_BUFFER_DTS(b) = GST_CLOCK_TIME_NONE;
      GST_BUFFER_FLAG_SET(b, GST_BUFFER_FLAG_DELTA_UNIT);  // as a container that marks no key frame would
      recent_frames.add_compressed(b);
      gst_buffer_unref(b);
      Envelope env;
      env.stream_id = "door";
      env.seq = i;
      env.pts_ns = pts_of(jpegs[i].buffer);
      recent_frames.add_sent(env, Orientation::kAsStored);
    }
  };
  feed_jpegs(0, 30);
  ClipOrder asked = order("mjpeg.mp4", pts_of(jpegs[26].buffer));
  asked.turn = Orientation::kRotate90;
  recorder.start(asked);
  feed_jpegs(30, 45);
  recorder.end("door", "person", 7, pts_of(jpegs[40].buffer));
  feed_jpegs(45, 60);
  std::vector<ClipDone> done = wait_done(recorder, 1);
  ASSERT_EQ(done.size(), 1u);
  ASSERT_TRUE(done[0].written) << done[0].message;
  EXPECT_EQ(done[0].order.path, (dir_ / "door" / "mjpeg.mov").string());
  EXPECT_FALSE(std::filesystem::exists(dir_ / "door" / "mjpeg.mp4"));
  EXPECT_EQ(done[0].start_pts_ns, pts_of(jpegs[20].buffer)) << "200 ms before frame 26: each frame is a key frame";
  // Its frames, as qtdemux gives them: the camera's JPEGs, 20 to 44 (the first after 100 ms past frame 40).
  std::vector<Sample> in_clip = pull_samples("filesrc location=\"" + done[0].order.path + "\" ! qtdemux");
  ASSERT_EQ(in_clip.size(), 25u);
  EXPECT_TRUE(gst_structure_has_name(gst_caps_get_structure(in_clip[0].caps, 0), "image/jpeg"));
  for (size_t i = 0; i < in_clip.size(); ++i) {
    EXPECT_TRUE(bytes_of(in_clip[i].buffer) == bytes_of(jpegs[20 + i].buffer)) << "frame " << 20 + i;
  }
  EXPECT_EQ(done[0].frames, 25u);
  // Its turn, in its track's matrix as an MP4's.
  auto turn = mp4_orientation(done[0].order.path);
  ASSERT_TRUE(turn.ok()) << turn.status().message();
  EXPECT_EQ(*turn, Orientation::kRotate90);
  release(in_clip);

  // Past segments_clip_max_s (300 ms) it goes on in a next part from the next frame (each is a key
  // frame, flags or not), .2.mov: each frame in one part.
  RecentFrames parted(5, milliseconds(100), RecentFrames::kDefaultMaxBytes, milliseconds(0));
  ClipRecorder long_segments("door", &parted, ClipRecorder::Options{milliseconds(0), milliseconds(0), milliseconds(300)});
  feed_jpegs(0, 10, &parted);
  long_segments.start(order("long.mp4", pts_of(jpegs[5].buffer)));
  feed_jpegs(10, 20, &parted);  // past 300 ms at frame 14
  ASSERT_TRUE(long_segments.wait_next_parts_open(std::chrono::seconds(10)));
  feed_jpegs(20, 22, &parted);
  long_segments.end("door", "person", 7, pts_of(jpegs[21].buffer));
  feed_jpegs(22, 30, &parted);
  std::vector<ClipDone> parts = wait_done(long_segments, 2);
  ASSERT_GE(parts.size(), 2u) << "a single part: no frame was taken for a key frame to start the next at";
  EXPECT_EQ(parts[0].order.path, (dir_ / "door" / "long.mov").string());
  EXPECT_TRUE(parts[0].continues);
  EXPECT_EQ(parts[1].order.path, (dir_ / "door" / "long.2.mov").string());
  uint64_t frames = 0;
  for (const ClipDone& d : parts) {
    ASSERT_TRUE(d.written) << d.message;
    frames += d.frames;
  }
  EXPECT_EQ(frames, 17u) << "frames 5 to 21, each once";
  release(jpegs);
}

// Each codec a clip is said to hold, through its writer: every frame given is in the file, byte for
// byte, as its demuxer gives it back. (Until 2026-12-05 a JPEG went to qtmux's audio pad, and the
// writer's MP4 of VP9 or AV1 was never tried.)
class ClipWriterOfCodec : public ::testing::TestWithParam<std::tuple<const char*, const char*, const char*>> {};

TEST_P(ClipWriterOfCodec, HoldsEveryFrameGivenAsItCame) {
  ASSERT_TRUE(ensure_gstreamer());
  const auto& [encoder, extension, demux] = GetParam();
  std::vector<Sample> frames = pull_samples(std::string("videotestsrc pattern=ball num-buffers=20 ! video/x-raw,width=160,"
                                                        "height=120,framerate=30/1,format=I420 ! ") + encoder);
  ASSERT_GE(frames.size(), 20u) << encoder;
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("vapipe-clip-codec-" + std::to_string(getpid()));
  const std::string asked = (dir / "clip.mp4").string();
  const std::string path = ClipWriter::path_for(asked, frames[0].caps);
  EXPECT_EQ(std::filesystem::path(path).extension(), extension);
  auto writer = ClipWriter::open(path, frames[0].caps);
  ASSERT_TRUE(writer.ok()) << writer.status().message();
  for (const Sample& f : frames) (*writer)->push(f.buffer, 0);
  (*writer)->end_of_stream();
  ASSERT_TRUE((*writer)->finish(std::chrono::seconds(30)).ok()) << encoder;
  EXPECT_EQ((*writer)->frames(), frames.size());
  std::vector<Sample> back = pull_samples("filesrc location=\"" + path + "\" ! " + demux);
  ASSERT_EQ(back.size(), frames.size()) << encoder;
  for (size_t i = 0; i < back.size(); ++i) EXPECT_TRUE(bytes_of(back[i].buffer) == bytes_of(frames[i].buffer)) << encoder << " frame " << i;
  release(back);
  release(frames);
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Codecs, ClipWriterOfCodec,
    ::testing::Values(std::make_tuple("x264enc speed-preset=ultrafast key-int-max=10 ! h264parse ! video/x-h264,stream-format=avc,alignment=au", ".mp4", "qtdemux"),
                      std::make_tuple("x265enc speed-preset=ultrafast key-int-max=10 ! h265parse ! video/x-h265,stream-format=hvc1,alignment=au", ".mp4", "qtdemux"),
                      std::make_tuple("jpegenc", ".mov", "qtdemux"),
                      std::make_tuple("vp9enc deadline=1 keyframe-max-dist=10", ".mp4", "qtdemux"),
                      std::make_tuple("av1enc cpu-used=8", ".mp4", "qtdemux")),
    [](const ::testing::TestParamInfo<ClipWriterOfCodec::ParamType>& info) {
      const std::string e = std::get<0>(info.param);
      return e.substr(0, e.find_first_of(" "));
    });

// A publish started again no longer follows the segments it had begun: it asks for the clips begun
// before it started to end, and they end at their next frame, saying why; one begun since goes on.
TEST_F(ClipRecorderTest, ClipsBegunBeforeARestartedPublishEndAtTheirNextFrame) {
  RecentFrames recent(5, milliseconds(100), RecentFrames::kDefaultMaxBytes, milliseconds(0));
  ClipRecorder recorder("door", &recent, ClipRecorder::Options{milliseconds(0), milliseconds(0), std::chrono::seconds(60)});
  feed(recent, 0, 20);
  recorder.start(order("old.mp4", shown_[15]));
  feed(recent, 20, 40);
  std::this_thread::sleep_for(milliseconds(5));
  const int64_t restarted = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::system_clock::now().time_since_epoch()).count();
  std::this_thread::sleep_for(milliseconds(5));
  ClipOrder since = order("new.mp4", shown_[30]);
  since.segment_start_seq = 8;
  recorder.start(since);
  recorder.end_clips_before(restarted);
  feed(recent, 40, 60);
  std::vector<ClipDone> done = wait_done(recorder, 1);
  ASSERT_EQ(done.size(), 1u);
  ASSERT_TRUE(done[0].written) << done[0].message;
  EXPECT_EQ(done[0].order.path, (dir_ / "door" / "old.mp4").string());
  EXPECT_NE(done[0].message.find("publish was restarted"), std::string::npos) << done[0].message;
  EXPECT_TRUE(recorder.take_done().empty()) << "the clip begun since goes on";
}

// A clip its ingest did not finish (it crashed) is removed when that stream's ingest starts again;
// nothing else of the folder is touched, nor another stream's.
TEST_F(ClipRecorderTest, ClipsLeftUnwrittenByAnEarlierIngestAreRemovedAndNothingElse) {
  const std::filesystem::path pictures = dir_ / "pictures";
  auto touch = [](const std::filesystem::path& p) {
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << "x";
  };
  for (const char* name : {"door/2026-12-03/23-59-00.000_person.mp4.part", "door/2026-12-04/00-01-00.000_person.mp4.part",
                           "door/2026-12-04/00-01-00.000_person.mp4.part.frames", "door/2026-12-04/00-01-00.000_person.jpg",
                           "door/2026-12-04/00-00-00.000_person.mp4", "door/2026-12-04/notes.part",
                           "yard/2026-12-04/00-02-00.000_car.mp4.part"}) {
    touch(pictures / name);
  }
  std::vector<std::string> removed = remove_unfinished_clips(pictures.string(), "door");
  std::sort(removed.begin(), removed.end());
  EXPECT_EQ(removed, (std::vector<std::string>{(pictures / "door/2026-12-03/23-59-00.000_person.mp4.part").string(),
                                               (pictures / "door/2026-12-04/00-01-00.000_person.mp4.part").string(),
                                               (pictures / "door/2026-12-04/00-01-00.000_person.mp4.part.frames").string()}));
  EXPECT_TRUE(std::filesystem::exists(pictures / "door/2026-12-04/00-01-00.000_person.jpg"));
  EXPECT_TRUE(std::filesystem::exists(pictures / "door/2026-12-04/00-00-00.000_person.mp4"));
  EXPECT_TRUE(std::filesystem::exists(pictures / "door/2026-12-04/notes.part"));
  EXPECT_TRUE(std::filesystem::exists(pictures / "yard/2026-12-04/00-02-00.000_car.mp4.part"));
  EXPECT_TRUE(remove_unfinished_clips(pictures.string(), "gate").empty()) << "no folder yet";
}

}  // namespace
}  // namespace vapipe
