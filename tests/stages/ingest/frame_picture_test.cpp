// Pictures of frames (stages/ingest/frame_picture.h): turned, cropped, converted and encoded by
// GStreamer's own elements, checked pixel by pixel on small frames whose every pixel is known.
#include "stages/ingest/frame_picture.h"

#include <cstdint>
#include <gst/gst.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "stages/ingest/stream_reader.h"
#include "tests/fakes/jpeg_size.h"

namespace vapipe {
namespace {

// An I420 frame whose luma at (x, y) is 10 * y + x and whose chroma planes hold 100 + their own
// (x, y) the same way: where each pixel went is readable from its value.
GstSample* numbered_i420(uint32_t width, uint32_t height) {
  GstVideoInfo info;
  gst_video_info_set_format(&info, GST_VIDEO_FORMAT_I420, width, height);
  GstBuffer* buffer = gst_buffer_new_allocate(nullptr, GST_VIDEO_INFO_SIZE(&info), nullptr);
  GstVideoFrame f;
  EXPECT_TRUE(gst_video_frame_map(&f, &info, buffer, GST_MAP_WRITE));
  for (guint plane = 0; plane < 3; ++plane) {
    auto* data = static_cast<guint8*>(GST_VIDEO_FRAME_PLANE_DATA(&f, plane));
    const int stride = GST_VIDEO_FRAME_PLANE_STRIDE(&f, plane);
    for (int y = 0; y < GST_VIDEO_FRAME_COMP_HEIGHT(&f, plane); ++y) {
      for (int x = 0; x < GST_VIDEO_FRAME_COMP_WIDTH(&f, plane); ++x) {
        data[y * stride + x] = static_cast<guint8>((plane ? 100 : 0) + 10 * y + x);
      }
    }
  }
  gst_video_frame_unmap(&f);
  GstCaps* caps = gst_video_info_to_caps(&info);
  GstSample* sample = gst_sample_new(buffer, caps, nullptr, nullptr);
  gst_caps_unref(caps);
  gst_buffer_unref(buffer);
  return sample;
}

struct Plane {
  int width = 0, height = 0;
  std::vector<int> values;  // row by row
  int at(int x, int y) const { return values[y * width + x]; }
};

std::vector<Plane> planes_of(GstSample* sample) {
  GstVideoInfo info;
  EXPECT_TRUE(gst_video_info_from_caps(&info, gst_sample_get_caps(sample)));
  GstVideoFrame f;
  EXPECT_TRUE(gst_video_frame_map(&f, &info, gst_sample_get_buffer(sample), GST_MAP_READ));
  std::vector<Plane> out(3);
  for (guint plane = 0; plane < 3; ++plane) {
    Plane& p = out[plane];
    p.width = GST_VIDEO_FRAME_COMP_WIDTH(&f, plane);
    p.height = GST_VIDEO_FRAME_COMP_HEIGHT(&f, plane);
    const auto* data = static_cast<const guint8*>(GST_VIDEO_FRAME_PLANE_DATA(&f, plane));
    for (int y = 0; y < p.height; ++y) {
      for (int x = 0; x < p.width; ++x) p.values.push_back(data[y * GST_VIDEO_FRAME_PLANE_STRIDE(&f, plane) + x]);
    }
  }
  gst_video_frame_unmap(&f);
  return out;
}

class FramePicture : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_TRUE(ensure_gstreamer()); }
};

// What a person sees of a phone's sideways frame, say: its corners where they belong upright.
TEST_F(FramePicture, AFrameIsTurnedAsItsOrientationSaysEveryPlaneAlike) {
  GstSample* stored = numbered_i420(8, 6);  // chroma 4 x 3
  struct Case {
    Orientation turn;
    int width, height;
    // The stored (x, y) that lands at the upright picture's top-left and top-right corners.
    std::pair<int, int> top_left, top_right;
  };
  // Stored W x H; upright rotate-90 (clockwise): the stored bottom-left is its top-left.
  for (const Case& c : {Case{Orientation::kRotate90, 6, 8, {0, 5}, {0, 0}},
                        Case{Orientation::kRotate180, 8, 6, {7, 5}, {0, 5}},
                        Case{Orientation::kRotate270, 6, 8, {7, 0}, {7, 5}},
                        Case{Orientation::kFlipHorizontal, 8, 6, {7, 0}, {0, 0}},
                        Case{Orientation::kAsStored, 8, 6, {0, 0}, {7, 0}}}) {
    auto turned = turn_i420(stored, c.turn);
    ASSERT_TRUE(turned.ok()) << turned.status().message();
    const std::vector<Plane> p = planes_of(turned.value());
    gst_sample_unref(turned.value());
    const char* name = orientation_name(c.turn);
    ASSERT_EQ(p[0].width, c.width) << name;
    ASSERT_EQ(p[0].height, c.height) << name;
    EXPECT_EQ(p[0].at(0, 0), 10 * c.top_left.second + c.top_left.first) << name;
    EXPECT_EQ(p[0].at(c.width - 1, 0), 10 * c.top_right.second + c.top_right.first) << name;
    // Chroma turns with it: half the size, the corner's chroma sample at its corner.
    ASSERT_EQ(p[1].width, c.width / 2) << name;
    EXPECT_EQ(p[1].at(0, 0), 100 + 10 * (c.top_left.second / 2) + c.top_left.first / 2) << name;
    EXPECT_EQ(p[2].at(p[2].width - 1, 0), 100 + 10 * (c.top_right.second / 2) + c.top_right.first / 2) << name;
  }
  gst_sample_unref(stored);
}

TEST_F(FramePicture, ARegionIsCutFromTheUprightPictureWithItsChroma) {
  GstSample* frame = numbered_i420(8, 6);
  auto region = crop_i420_to_roi(frame, {0.5, 0, 0.5, 1});  // the right half: x 4..7
  ASSERT_TRUE(region.ok()) << region.status().message();
  const std::vector<Plane> p = planes_of(region.value());
  gst_sample_unref(region.value());
  gst_sample_unref(frame);
  ASSERT_EQ(p[0].width, 4);
  ASSERT_EQ(p[0].height, 6);
  EXPECT_EQ(p[0].at(0, 0), 4);
  EXPECT_EQ(p[0].at(3, 5), 57);
  EXPECT_EQ(p[1].at(0, 0), 102);
}

// Ingest's frames come as NV12 and RGB too (and as NVDEC's CUDA memory, not here); each becomes a JPEG
// of its size, upright.
TEST_F(FramePicture, FramesOfEachFormatAreWrittenAsJpegsOfTheirUprightSize) {
  const auto dir = std::filesystem::temp_directory_path() / ("vapipe-frame-picture-" + std::to_string(getpid()));
  for (const char* format : {"I420", "NV12", "RGB"}) {
    GstVideoInfo info;
    gst_video_info_set_format(&info, gst_video_format_from_string(format), 64, 48);
    GstBuffer* buffer = gst_buffer_new_allocate(nullptr, GST_VIDEO_INFO_SIZE(&info), nullptr);
    gst_buffer_memset(buffer, 0, 128, GST_VIDEO_INFO_SIZE(&info));
    GstCaps* caps = gst_video_info_to_caps(&info);
    GstSample* frame = gst_sample_new(buffer, caps, nullptr, nullptr);
    gst_caps_unref(caps);
    gst_buffer_unref(buffer);
    const std::string path = (dir / format / "day" / "picture.jpg").string();
    const Status written = write_frame_picture(frame, Orientation::kRotate270, {0, 0, 0.5, 0.5}, path);
    gst_sample_unref(frame);
    ASSERT_TRUE(written.ok()) << format << ": " << written.message();
    EXPECT_EQ(testing::jpeg_size(path), std::make_pair(24u, 32u)) << format;  // upright 48 x 64, its top-left quarter
  }
  std::filesystem::remove_all(dir);
}

// An anamorphic frame's picture (480x360 stored, pixels 4:3 wide: shown 640x360) is scaled to the shape
// it is shown in, after its turn (upright 360x640) and its region; a square-pixel frame keeps its size.
TEST_F(FramePicture, AnAnamorphicFramesPictureHasTheShapeItIsShownIn) {
  const auto dir = std::filesystem::temp_directory_path() / ("vapipe-frame-picture-par-" + std::to_string(getpid()));
  struct Case {
    const char* par;
    Orientation turn;
    std::array<double, 4> roi;
    std::pair<uint32_t, uint32_t> size;
  };
  for (const Case& c : {Case{"4/3", Orientation::kAsStored, {0, 0, 1, 1}, {640, 360}},
                        Case{"4/3", Orientation::kRotate90, {0, 0, 1, 1}, {360, 640}},
                        Case{"4/3", Orientation::kAsStored, {0, 0, 0.5, 1}, {320, 360}},
                        Case{"3/4", Orientation::kAsStored, {0, 0, 1, 1}, {480, 480}},
                        Case{"1/1", Orientation::kAsStored, {0, 0, 1, 1}, {480, 360}}}) {
    GstCaps* caps = gst_caps_from_string(
        (std::string("video/x-raw,format=I420,width=480,height=360,framerate=30/1,pixel-aspect-ratio=") + c.par).c_str());
    GstVideoInfo info;
    ASSERT_TRUE(gst_video_info_from_caps(&info, caps));
    GstBuffer* buffer = gst_buffer_new_allocate(nullptr, GST_VIDEO_INFO_SIZE(&info), nullptr);
    gst_buffer_memset(buffer, 0, 128, GST_VIDEO_INFO_SIZE(&info));
    GstSample* frame = gst_sample_new(buffer, caps, nullptr, nullptr);
    gst_caps_unref(caps);
    gst_buffer_unref(buffer);
    const std::string path = (dir / "picture.jpg").string();
    const Status written = write_frame_picture(frame, c.turn, c.roi, path);
    gst_sample_unref(frame);
    ASSERT_TRUE(written.ok()) << c.par << ": " << written.message();
    EXPECT_EQ(testing::jpeg_size(path), c.size) << c.par << " " << orientation_name(c.turn) << " " << c.roi[2];
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace vapipe
