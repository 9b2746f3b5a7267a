// An MP4's turn in its video track's matrix (stages/ingest/mp4_orientation.h): each of the eight is
// written and read back; the four rotations are what GStreamer's qtdemux says as the file's
// image-orientation tag (as a phone's portrait video), with the translation a phone writes; the frames
// are untouched. Files that are not an MP4, or not whole, are errors naming them.
#include "stages/ingest/mp4_orientation.h"

#include <cstdint>
#include <gst/gst.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "stages/ingest/stream_reader.h"

namespace vapipe {
namespace {

// The image-orientation tag qtdemux gives the file's video ("" when none), and how many frames decode.
std::pair<std::string, int> demuxed(const std::string& path) {
  GError* err = nullptr;
  GstElement* p = gst_parse_launch(("filesrc location=\"" + path + "\" ! qtdemux ! avdec_h264 ! fakesink name=sink "
                                    "signal-handoffs=false").c_str(), &err);
  EXPECT_NE(p, nullptr) << (err ? err->message : "");
  if (!p) return {"", 0};
  std::string orientation;
  GstBus* bus = gst_element_get_bus(p);
  gst_element_set_state(p, GST_STATE_PLAYING);
  while (GstMessage* m = gst_bus_timed_pop_filtered(bus, 20 * GST_SECOND,
                                                    static_cast<GstMessageType>(GST_MESSAGE_TAG | GST_MESSAGE_EOS |
                                                                                GST_MESSAGE_ERROR))) {
    const GstMessageType type = GST_MESSAGE_TYPE(m);
    if (type == GST_MESSAGE_TAG) {
      GstTagList* tags = nullptr;
      gst_message_parse_tag(m, &tags);
      gchar* said = nullptr;
      if (gst_tag_list_get_string(tags, GST_TAG_IMAGE_ORIENTATION, &said)) orientation = said;
      g_free(said);
      gst_tag_list_unref(tags);
    }
    gst_message_unref(m);
    if (type != GST_MESSAGE_TAG) {
      EXPECT_EQ(type, GST_MESSAGE_EOS) << path;
      break;
    }
  }
  GstElement* sink = gst_bin_get_by_name(GST_BIN(p), "sink");
  GstStructure* stats = nullptr;
  g_object_get(sink, "stats", &stats, nullptr);
  guint64 rendered = 0;
  if (stats) gst_structure_get_uint64(stats, "rendered", &rendered);
  if (stats) gst_structure_free(stats);
  gst_object_unref(sink);
  gst_element_set_state(p, GST_STATE_NULL);
  gst_object_unref(bus);
  gst_object_unref(p);
  return {orientation, static_cast<int>(rendered)};
}

// The nine 32-bit values of the first tkhd's matrix, as a test reads them without the code under test.
std::vector<uint32_t> matrix_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t tkhd = bytes.find("tkhd");
  EXPECT_NE(tkhd, std::string::npos) << path;
  if (tkhd == std::string::npos) return {};
  const size_t at = tkhd + 4 + 4 + (bytes[tkhd + 4] == 1 ? 32 : 20) + 16;
  std::vector<uint32_t> values;
  for (size_t i = 0; i < 9; ++i) {
    uint32_t v = 0;
    for (size_t b = 0; b < 4; ++b) v = (v << 8) | static_cast<unsigned char>(bytes[at + 4 * i + b]);
    values.push_back(v);
  }
  return values;
}

class Mp4OrientationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(ensure_gstreamer());
    dir_ = std::filesystem::path(::testing::TempDir()) / ("vapipe-mp4-orientation-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // 10 frames of 160x120 H.264 (its index first with faststart, as a clip's; last otherwise).
  std::string encode(const std::string& name, bool faststart) {
    const std::string path = (dir_ / name).string();
    const std::string cmd = "gst-launch-1.0 -q videotestsrc num-buffers=10 ! video/x-raw,width=160,height=120 ! "
                            "x264enc speed-preset=ultrafast ! h264parse ! mp4mux faststart=" +
                            std::string(faststart ? "true" : "false") + " ! filesink location=" + path;
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(Mp4OrientationTest, EachTurnIsItsTrackMatrixWhichGStreamerReadsBackAsItsTag) {
  for (const bool faststart : {true, false}) {
    const std::string path = encode(faststart ? "index-first.mp4" : "index-last.mp4", faststart);
    auto as_made = mp4_orientation(path);
    ASSERT_TRUE(as_made.ok()) << as_made.status().message();
    EXPECT_EQ(*as_made, Orientation::kAsStored);
    for (int i = 0; i < 8; ++i) {
      const auto turn = static_cast<Orientation>(i);
      ASSERT_TRUE(set_mp4_orientation(path, turn).ok()) << orientation_name(turn);
      auto back = mp4_orientation(path);
      ASSERT_TRUE(back.ok()) << back.status().message();
      EXPECT_EQ(*back, turn) << orientation_name(turn) << ", faststart " << faststart;
    }
    // The rotations, as qtdemux reads them (GStreamer 1.22 reads no mirror from a matrix); the frames
    // decode as before.
    for (const Orientation turn :
         {Orientation::kRotate90, Orientation::kRotate180, Orientation::kRotate270, Orientation::kAsStored}) {
      ASSERT_TRUE(set_mp4_orientation(path, turn).ok());
      const auto [said, frames] = demuxed(path);
      EXPECT_EQ(said, turn == Orientation::kAsStored ? "" : orientation_name(turn)) << "faststart " << faststart;
      EXPECT_EQ(frames, 10) << orientation_name(turn);
    }
  }
  // A phone's portrait matrix: turned 90 degrees clockwise, moved right by the stored height (120).
  const std::string path = encode("phone.mp4", true);
  ASSERT_TRUE(set_mp4_orientation(path, Orientation::kRotate90).ok());
  EXPECT_EQ(matrix_bytes(path), (std::vector<uint32_t>{0, 0x10000, 0, 0xffff0000u, 0, 0, 120u << 16, 0, 0x40000000}));
  ASSERT_TRUE(set_mp4_orientation(path, Orientation::kRotate180).ok());
  EXPECT_EQ(matrix_bytes(path),
            (std::vector<uint32_t>{0xffff0000u, 0, 0, 0, 0xffff0000u, 0, 160u << 16, 120u << 16, 0x40000000}));
}

TEST_F(Mp4OrientationTest, AFileThatIsNotAnMp4OrIsNotWholeIsAnErrorNamingIt) {
  const std::string text = (dir_ / "notes.mp4").string();
  std::ofstream(text) << "these are notes, not a video\n";
  auto not_mp4 = mp4_orientation(text);
  ASSERT_FALSE(not_mp4.ok());
  EXPECT_EQ(not_mp4.status().message(), "file " + text + " is not an MP4 (it does not begin with an 'ftyp' box)");
  EXPECT_FALSE(set_mp4_orientation(text, Orientation::kRotate90).ok());
  EXPECT_NE(mp4_orientation((dir_ / "gone.mp4").string()).status().message().find("gone.mp4 cannot be opened"),
            std::string::npos);
  // Its index cut off (index last, the file cut short before it): said, and nothing written.
  const std::string whole = encode("whole.mp4", false);
  const std::string cut = (dir_ / "cut.mp4").string();
  std::filesystem::copy_file(whole, cut);
  std::ifstream in(whole, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::resize_file(cut, bytes.find("moov") - 4);
  const auto cut_size = std::filesystem::file_size(cut);
  Status cut_status = set_mp4_orientation(cut, Orientation::kRotate90);
  EXPECT_EQ(cut_status.code(), StatusCode::kDataLoss) << cut_status.message();
  EXPECT_NE(cut_status.message().find("cut.mp4 has no index"), std::string::npos) << cut_status.message();
  EXPECT_EQ(std::filesystem::file_size(cut), cut_size);
}

}  // namespace
}  // namespace vapipe
