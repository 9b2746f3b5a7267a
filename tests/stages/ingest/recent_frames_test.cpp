// What a reader keeps of its recent frames for pictures of segments (stages/ingest/recent_frames.h):
// how far back, from which key frame, and that a kept frame decoded again is the very frame a whole
// decode gives (x264's, decoded by libav).
#include "stages/ingest/recent_frames.h"

#include <cstdint>
#include <gst/app/gstappsink.h>
#include <gst/gst.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>

#include "stages/ingest/stream_reader.h"

namespace vapipe {
namespace {

constexpr int64_t kFrameNs = 33'000'000;

GstCaps* h264_caps(int width = 320) {
  return gst_caps_new_simple("video/x-h264", "stream-format", G_TYPE_STRING, "byte-stream", "alignment", G_TYPE_STRING,
                             "au", "width", G_TYPE_INT, width, nullptr);
}

// A compressed frame of `bytes` bytes: a key frame or not, at `pts` (-1: none).
GstBuffer* compressed(bool key, int64_t pts, size_t bytes = 1000) {
  GstBuffer* b = gst_buffer_new_allocate(nullptr, bytes, nullptr);
  if (!key) GST_BUFFER_FLAG_SET(b, GST_BUFFER_FLAG_DELTA_UNIT);
  if (pts >= 0) GST_BUFFER_PTS(b) = static_cast<GstClockTime>(pts);
  return b;
}

void add(RecentFrames& recent, bool key, int64_t pts, size_t bytes = 1000) {
  GstBuffer* b = compressed(key, pts, bytes);
  recent.add_compressed(b);
  gst_buffer_unref(b);
}

Envelope sent(uint64_t seq, int64_t pts) {
  Envelope e;
  e.stream_id = "gate";
  e.seq = seq;
  e.pts_ns = pts;
  return e;
}

std::vector<int64_t> timestamps(const RecentFrames::Kept& kept) {
  std::vector<int64_t> out;
  for (const BufferRef& b : kept.compressed) out.push_back(static_cast<int64_t>(GST_BUFFER_PTS(b.get())));
  return out;
}

class RecentFramesTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(ensure_gstreamer()); }
};

// A GOP of 10 frames, no reordering; 5 frames back and 100 ms (3 frames) in flight: the last 6 frames
// sent can be asked for, each from the key frame before it.
TEST_F(RecentFramesTest, AFrameStillKeptComesWithTheCompressedFramesFromTheKeyFrameBeforeIt) {
  RecentFrames recent(5, std::chrono::milliseconds(100));
  GstCaps* caps = h264_caps();
  recent.set_caps(caps);
  for (int i = 0; i < 40; ++i) {
    add(recent, i % 10 == 0, i * kFrameNs);
    recent.add_sent(sent(i, i * kFrameNs), Orientation::kRotate90);
  }
  EXPECT_EQ(recent.sent_frames(), 6u);  // frames 34 to 39
  auto kept = recent.find(35 * kFrameNs);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->sent.env.seq, 35u);
  EXPECT_EQ(kept->sent.turn, Orientation::kRotate90);
  EXPECT_TRUE(gst_caps_is_equal(kept->caps.get(), caps));
  std::vector<int64_t> want;
  for (int i = 30; i <= 35; ++i) want.push_back(i * kFrameNs);
  EXPECT_EQ(timestamps(*kept), want);
  EXPECT_FALSE(GST_BUFFER_FLAG_IS_SET(kept->compressed.front().get(), GST_BUFFER_FLAG_DELTA_UNIT));

  EXPECT_FALSE(recent.find(33 * kFrameNs).has_value()) << "sent too long ago: no longer asked for";
  EXPECT_FALSE(recent.find(35 * kFrameNs + 1).has_value()) << "no frame has that timestamp";
  // Compressed frames go a GOP at a time, at key frames, one GOP more than the frames asked for need
  // (for a frame that is whole only from the key frame before its own): those from frame 10 on are kept
  // (when frame 30 came, frame 24 could still be asked for: from key frame 20, or 10).
  EXPECT_EQ(recent.compressed_frames(), 30u);
  auto earlier = recent.find(35 * kFrameNs, 1);
  ASSERT_TRUE(earlier.has_value());
  want.clear();
  for (int i = 20; i <= 35; ++i) want.push_back(i * kFrameNs);
  EXPECT_EQ(timestamps(*earlier), want) << "from the key frame before frame 30";
  ASSERT_TRUE(recent.find(35 * kFrameNs, 2).has_value());  // from key frame 10, while it is still there
  EXPECT_EQ(recent.find(35 * kFrameNs, 2)->compressed.size(), 26u);
  EXPECT_FALSE(recent.find(35 * kFrameNs, 3).has_value()) << "key frame 0 is no longer kept";
  for (int i = 40; i < 45; ++i) add(recent, i % 10 == 0, i * kFrameNs);
  EXPECT_EQ(recent.compressed_frames(), 25u) << "at frame 40, frame 34 is the oldest asked for: from key frame 20";
  gst_caps_unref(caps);
}

// B-frames: decode order is not the frames' order. A B-frame comes with every frame decoded before it
// from its key frame (the P-frame after it included, which it needs).
TEST_F(RecentFramesTest, AReorderedFrameComesWithEveryFrameDecodedBeforeIt) {
  RecentFrames recent(100);
  GstCaps* caps = h264_caps();
  recent.set_caps(caps);
  gst_caps_unref(caps);
  const int decode_order[] = {0, 3, 1, 2, 6, 4, 5, 9, 7, 8};
  for (int i : decode_order) add(recent, i == 0, i * kFrameNs);
  for (int i = 0; i < 10; ++i) recent.add_sent(sent(i, i * kFrameNs), Orientation::kAsStored);
  auto kept = recent.find(4 * kFrameNs);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(timestamps(*kept), (std::vector<int64_t>{0, 3 * kFrameNs, kFrameNs, 2 * kFrameNs, 6 * kFrameNs, 4 * kFrameNs}));
}

// What cannot be decoded is never kept: frames before the first key frame, a GOP larger than the most
// kept; new caps or a new decoder start over; a frame without a timestamp is never found.
TEST_F(RecentFramesTest, OnlyWhatCanBeDecodedIsKeptAndNewCapsOrANewDecoderStartOver) {
  RecentFrames recent(100, std::chrono::seconds(5), /*max_bytes=*/10'000);
  add(recent, true, 0);
  EXPECT_EQ(recent.compressed_frames(), 0u) << "no caps yet: nothing says how to decode it";
  GstCaps* caps = h264_caps();
  recent.set_caps(caps);
  add(recent, false, kFrameNs);
  EXPECT_EQ(recent.compressed_frames(), 0u) << "a delta frame before any key frame";
  for (int i = 2; i < 8; ++i) add(recent, i == 2, i * kFrameNs);
  EXPECT_EQ(recent.compressed_frames(), 6u);
  recent.set_caps(caps);  // the same caps again (a renegotiation): nothing changes
  EXPECT_EQ(recent.compressed_frames(), 6u);
  GstCaps* wider = h264_caps(640);
  recent.set_caps(wider);
  EXPECT_EQ(recent.compressed_frames(), 0u) << "frames of other caps would not decode with these";
  for (int i = 8; i < 20; ++i) add(recent, i == 8, i * kFrameNs);  // 12,000 bytes in one GOP
  EXPECT_EQ(recent.compressed_frames(), 0u) << "a GOP larger than the most kept is dropped whole";
  EXPECT_EQ(recent.compressed_bytes(), 0u);
  for (int i = 20; i < 35; ++i) add(recent, i % 5 == 0, i * kFrameNs);  // GOPs of 5,000 bytes
  EXPECT_EQ(recent.compressed_frames(), 10u) << "over the most kept: the oldest GOP goes";
  EXPECT_LE(recent.compressed_bytes(), 10'000u);
  recent.new_decoder();
  EXPECT_EQ(recent.compressed_frames(), 0u);
  add(recent, true, 50 * kFrameNs);
  EXPECT_EQ(recent.compressed_frames(), 0u) << "a new decoder's frames wait for its caps";

  recent.set_caps(caps);
  add(recent, true, -1);
  recent.add_sent(sent(0, -1), Orientation::kAsStored);
  EXPECT_EQ(recent.sent_frames(), 0u) << "an untimed frame cannot be asked for";
  EXPECT_FALSE(recent.find(-1).has_value());
  gst_caps_unref(caps);
  gst_caps_unref(wider);
}

// A clip's tap: told why the keeping starts over (new caps, a new decoder); one added for the frames to
// come when nothing is kept yet (just after new caps) gets them from the next one; and one asked for
// in a decoder's frames is not added once a new decoder has come (a clip cut by new caps must not go
// on into another connection's timeline).
TEST_F(RecentFramesTest, ATapIsToldWhyTheKeepingStartsOverAndAddedOnlyInTheDecoderItWasAskedIn) {
  RecentFrames recent(100, std::chrono::seconds(5));
  GstCaps* caps = h264_caps();
  GstCaps* wider = h264_caps(640);
  std::vector<std::string> seen;
  auto make = [&](GstCaps*) -> RecentFrames::Tap {
    return [&](GstBuffer* b, RecentFrames::StartOver why) {
      seen.push_back(b ? std::to_string(GST_BUFFER_PTS(b) / kFrameNs)
                       : why == RecentFrames::StartOver::kNewCaps ? "new caps" : "new decoder");
      return true;
    };
  };
  EXPECT_EQ(recent.decoder(), 0u);
  recent.set_caps(caps);
  for (int i = 0; i < 3; ++i) add(recent, i == 0, i * kFrameNs);
  ASSERT_TRUE(recent.add_tap(1, 0, make, false, /*in_decoder=*/0));
  recent.set_caps(wider);
  EXPECT_EQ(seen, (std::vector<std::string>{"0", "1", "2", "new caps"}));
  EXPECT_FALSE(recent.add_tap(2, INT64_MIN, make)) << "nothing kept of the new caps yet";
  ASSERT_TRUE(recent.add_tap(2, INT64_MIN, make, /*or_next_frames=*/true, 0));
  add(recent, true, 3 * kFrameNs);
  recent.new_decoder();
  EXPECT_EQ(recent.decoder(), 1u);
  EXPECT_EQ(seen, (std::vector<std::string>{"0", "1", "2", "new caps", "3", "new decoder"}));
  recent.set_caps(wider);
  add(recent, true, 0);
  EXPECT_FALSE(recent.add_tap(3, INT64_MIN, make, true, /*in_decoder=*/0)) << "another decoder's frames";
  EXPECT_TRUE(recent.add_tap(3, INT64_MIN, make, true, 1));
  gst_caps_unref(caps);
  gst_caps_unref(wider);
}

// Motion JPEG from a file whose index marks no key frame: each frame is one, so each is kept from
// itself alone (not dropped as "a delta frame before any key frame").
TEST_F(RecentFramesTest, AnIntraOnlyCodecsFramesAreEachTheirOwnKeyFrame) {
  RecentFrames recent(10, std::chrono::milliseconds(100));
  GstCaps* caps = gst_caps_new_simple("image/jpeg", "width", G_TYPE_INT, 320, nullptr);
  recent.set_caps(caps);
  gst_caps_unref(caps);
  for (int i = 0; i < 5; ++i) {
    add(recent, false, i * kFrameNs);
    recent.add_sent(sent(i, i * kFrameNs), Orientation::kAsStored);
  }
  auto kept = recent.find(3 * kFrameNs);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(timestamps(*kept), (std::vector<int64_t>{3 * kFrameNs}));
}

// A decoder whose output went back (GstVideoDecoder gives such a frame the timestamp of the frame
// before: disordered times from a jitter buffer, with B-frames) sends two frames with one timestamp;
// the compressed frame of that timestamp is the first's, and so is a picture asked for at it.
TEST_F(RecentFramesTest, OfFramesSentWithOneTimestampTheFirstIsFound) {
  RecentFrames recent(10, std::chrono::milliseconds(100));
  GstCaps* caps = h264_caps();
  recent.set_caps(caps);
  for (int i = 0; i < 6; ++i) add(recent, i == 0, i * kFrameNs);
  for (int i = 0; i < 6; ++i) recent.add_sent(sent(i, (i == 4 ? 3 : i) * kFrameNs), Orientation::kAsStored);
  auto kept = recent.find(3 * kFrameNs);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->sent.env.seq, 3u);
  EXPECT_EQ(recent.find(5 * kFrameNs)->sent.env.seq, 5u);
  gst_caps_unref(caps);
}

// A seek or a new connection: timestamps that went back start the frames sent over.
TEST_F(RecentFramesTest, SentFramesWhoseTimestampsWentBackStartOver) {
  RecentFrames recent(100, std::chrono::seconds(1));
  for (int i = 0; i < 100; ++i) recent.add_sent(sent(i, 10'000 * kFrameNs + i * kFrameNs), Orientation::kAsStored);
  EXPECT_EQ(recent.sent_frames(), 100u);
  recent.add_sent(sent(100, 0), Orientation::kAsStored);
  EXPECT_EQ(recent.sent_frames(), 1u);
  recent.forget_sent();
  EXPECT_EQ(recent.sent_frames(), 0u);
}

// A codec as cameras send it: its encoder (closed GOPs of 15 frames, with B-frames), parser and the
// CPU decoder a whole decode uses.
struct Codec {
  const char* name;
  const char* encoder;
  const char* parser;
  const char* caps;  // the parser's output, one frame a buffer
  const char* decoder;
};

std::string bytes_of(GstSample* s) {
  GstMapInfo map;
  GstBuffer* b = gst_sample_get_buffer(s);
  EXPECT_TRUE(gst_buffer_map(b, &map, GST_MAP_READ));
  std::string bytes(reinterpret_cast<const char*>(map.data), map.size);
  gst_buffer_unmap(b, &map);
  return bytes;
}

// A 45-frame clip of `codec` (videotestsrc's ball, 160x120, MP4): its compressed frames kept as a
// reader keeps them (each frame also sent), and its frames as a whole decode gives them, by timestamp.
struct KeptClip {
  std::filesystem::path dir;
  RecentFrames recent{1000, std::chrono::seconds(60)};
  std::map<int64_t, std::string> whole;
  int reordered = 0;  // frames decoded before they are shown: B-frames' references
  int keys = 0;       // frames the parser marks as not delta units
  std::vector<int64_t> order;  // the frames' timestamps, in display order
  ~KeptClip() { std::filesystem::remove_all(dir); }
};

void keep_clip(const Codec& codec, KeptClip* out) {
  out->dir = std::filesystem::temp_directory_path() / ("vapipe-recent-" + std::string(codec.name) + "-" + std::to_string(getpid()));
  std::filesystem::create_directories(out->dir);
  const std::string clip = (out->dir / "ball.mp4").string();
  const std::string encode = std::string("gst-launch-1.0 -q videotestsrc pattern=ball num-buffers=45 ! "
                                         "video/x-raw,width=160,height=120,framerate=30/1 ! ") +
                             codec.encoder + " ! " + codec.parser + " ! mp4mux ! filesink location=" + clip;
  ASSERT_EQ(std::system(encode.c_str()), 0) << encode;
  auto read = [&](const std::string& tail, auto&& each) {
    GError* err = nullptr;
    GstElement* p = gst_parse_launch(("filesrc location=" + clip + " ! qtdemux ! " + codec.parser + " ! " + tail +
                                      " ! appsink name=sink sync=false").c_str(), &err);
    ASSERT_NE(p, nullptr) << (err ? err->message : "");
    GstElement* sink = gst_bin_get_by_name(GST_BIN(p), "sink");
    gst_element_set_state(p, GST_STATE_PLAYING);
    while (GstSample* sample = gst_app_sink_pull_sample(GST_APP_SINK(sink))) {
      each(sample);
      gst_sample_unref(sample);
    }
    gst_element_set_state(p, GST_STATE_NULL);
    gst_object_unref(sink);
    gst_object_unref(p);
  };
  read(std::string("capsfilter caps=") + codec.caps, [&](GstSample* s) {
    GstBuffer* b = gst_sample_get_buffer(s);
    out->reordered += GST_BUFFER_DTS_IS_VALID(b) && GST_BUFFER_DTS(b) != GST_BUFFER_PTS(b);
    out->keys += !GST_BUFFER_FLAG_IS_SET(b, GST_BUFFER_FLAG_DELTA_UNIT);
    out->recent.set_caps(gst_sample_get_caps(s));
    out->recent.add_compressed(b);
  });
  read(std::string(codec.decoder) + " ! videoconvert ! video/x-raw,format=I420", [&](GstSample* s) {
    out->whole[static_cast<int64_t>(GST_BUFFER_PTS(gst_sample_get_buffer(s)))] = bytes_of(s);
  });
  ASSERT_EQ(out->whole.size(), 45u);
  ASSERT_EQ(out->recent.compressed_frames(), 45u);
  uint64_t seq = 0;
  for (const auto& [pts, bytes] : out->whole) {
    out->recent.add_sent(sent(seq++, pts), Orientation::kAsStored);
    out->order.push_back(pts);
  }
}

class KeptFramesOfCodec : public RecentFramesTest, public ::testing::WithParamInterface<Codec> {};

// A clip with B-frames read as the decoder would get it, from an MP4: every frame decoded again from
// the key frame before it is byte for byte the frame a whole decode gives. H.264 (x264) and H.265
// (x265: most IP cameras sold now send it by default; decodebin picks avdec_h265 for it).
TEST_P(KeptFramesOfCodec, AKeptFrameDecodedAgainIsTheFrameAWholeDecodeGives) {
  KeptClip clip;
  ASSERT_NO_FATAL_FAILURE(keep_clip(GetParam(), &clip));
  EXPECT_GT(clip.reordered, 0) << "the clip has no B-frames";
  RecentFrames& recent = clip.recent;
  const std::map<int64_t, std::string>& whole = clip.whole;
  const std::vector<int64_t>& order = clip.order;
  uint64_t seq = 0;
  std::string before;
  for (const auto& [pts, bytes] : whole) {
    auto kept = recent.find(pts);
    ASSERT_TRUE(kept.has_value()) << seq;
    auto decoded = decode_kept_frame(*kept);
    ASSERT_TRUE(decoded.ok()) << seq << ": " << decoded.status().message();
    EXPECT_EQ(static_cast<int64_t>(GST_BUFFER_PTS(gst_sample_get_buffer(decoded.value()))), pts);
    EXPECT_TRUE(bytes_of(decoded.value()) == bytes) << "frame " << seq << " differs from the whole decode's";
    EXPECT_FALSE(bytes == before) << "the ball moves: frame " << seq << " is not its neighbour";
    gst_sample_unref(decoded.value());
    before = bytes;
    ++seq;
  }
  // Frames of one GOP asked for at once (a source group's streams) are decoded in one pass, each the
  // whole decode's; a frame of another GOP does not share their key frame.
  auto a = recent.find(order[20]), b = recent.find(order[26]), c = recent.find(order[32]);
  ASSERT_TRUE(a && b && c);
  EXPECT_TRUE(share_key_frame(*a, *b));
  EXPECT_FALSE(share_key_frame(*a, *c)) << "frames 20 and 32 lie in GOPs from frames 15 and 30";
  auto both = decode_kept_frames({&*b, &*a});
  ASSERT_EQ(both.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(both[i].ok()) << both[i].status().message();
    EXPECT_TRUE(bytes_of(both[i].value()) == whole.at(order[i == 0 ? 26 : 20])) << i;
    gst_sample_unref(both[i].value());
  }
  // A frame whose compressed frames are not all there (the P-frame it refers to lost) gives no picture
  // of it rather than another.
  RecentFrames::Kept cut = *recent.find(whole.begin()->first);
  cut.sent.env.pts_ns += 1;  // a timestamp the decoder never gives
  auto none = decode_kept_frame(cut);
  EXPECT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("gave no picture of the frame"), std::string::npos) << none.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Codecs, KeptFramesOfCodec,
    ::testing::Values(Codec{"h264", "x264enc speed-preset=ultrafast key-int-max=15 bframes=2", "h264parse",
                            "video/x-h264,alignment=au", "avdec_h264"},
                      Codec{"h265",
                            "x265enc speed-preset=ultrafast key-int-max=15 "
                            "option-string=\"bframes=2:min-keyint=15:scenecut=0:open-gop=0\"",
                            "h265parse", "video/x-h265,alignment=au", "avdec_h265"}),
    [](const ::testing::TestParamInfo<Codec>& info) { return std::string(info.param.name); });

class FramesNotWholeFromTheirKeyFrame : public RecentFramesTest, public ::testing::WithParamInterface<Codec> {};

// Streams whose "key frames" do not make every frame after them whole (the parser marks them as not
// delta units all the same):
// - intra refresh (x264's intra-refresh, as low-latency cameras send): after the first frame no IDR, a
//   recovery point every 15 frames, each frame refreshing a column: a frame decoded from the recovery
//   point before it is not whole until that refresh is over;
// - an H.265 open GOP (x265's open-gop, its default): a CRA frame, whose leading (RASL) B-frames, shown
//   before it and decoded after it, refer to the GOP before. (An H.264 open GOP is not here: libav
//   gives no picture at all decoded from a non-IDR I-frame, output-corrupt off, so the key frame
//   before is no better unless it is an IDR; such a picture is of the next frame.)
// The decoder gives no picture of such a frame (or not the one a whole decode gives). From the key
// frame before that one (find's key_frames_back 1), every frame is the whole decode's.
TEST_P(FramesNotWholeFromTheirKeyFrame, AreWholeFromTheKeyFrameBeforeTheirOwn) {
  KeptClip clip;
  ASSERT_NO_FATAL_FAILURE(keep_clip(GetParam(), &clip));
  ASSERT_GT(clip.keys, 1) << "h264parse marks no later frame as a key frame";
  int partial = 0;
  for (size_t i = 15; i < clip.order.size(); ++i) {
    const int64_t pts = clip.order[i];
    auto own = clip.recent.find(pts);
    ASSERT_TRUE(own.has_value()) << i;
    auto from_own = decode_kept_frame(*own);
    if (!from_own.ok()) {
      ++partial;
    } else {
      partial += bytes_of(from_own.value()) != clip.whole.at(pts);
      gst_sample_unref(from_own.value());
    }
    auto earlier = clip.recent.find(pts, 1);
    ASSERT_TRUE(earlier.has_value()) << i;
    EXPECT_GT(earlier->compressed.size(), own->compressed.size()) << i;
    auto decoded = decode_kept_frame(*earlier);
    ASSERT_TRUE(decoded.ok()) << "frame " << i << ": " << decoded.status().message();
    EXPECT_TRUE(bytes_of(decoded.value()) == clip.whole.at(pts)) << "frame " << i << " differs from the whole decode's";
    gst_sample_unref(decoded.value());
  }
  EXPECT_GT(partial, 0) << "every frame was whole from its own key frame: the test shows nothing";
}

INSTANTIATE_TEST_SUITE_P(
    Streams, FramesNotWholeFromTheirKeyFrame,
    ::testing::Values(Codec{"intra_refresh", "x264enc speed-preset=ultrafast intra-refresh=true key-int-max=15 bframes=0",
                            "h264parse", "video/x-h264,alignment=au", "avdec_h264"},
                      Codec{"h265_open_gop",
                            "x265enc speed-preset=ultrafast key-int-max=15 "
                            "option-string=\"bframes=2:min-keyint=15:scenecut=0:open-gop=1\"",
                            "h265parse", "video/x-h265,alignment=au", "avdec_h265"}),
    [](const ::testing::TestParamInfo<Codec>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace vapipe
