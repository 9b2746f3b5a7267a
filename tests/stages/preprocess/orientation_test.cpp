// The orientations preprocessing reads frames in (pipeline/message.h) against GStreamer's own videoflip
// turning a picture as each image-orientation tag says: the map of every tag gives videoflip's pixels.
#include <cstdint>
#include <gst/app/gstappsink.h>
#include <gst/gst.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "pipeline/message.h"

namespace vapipe {
namespace {

TEST(Orientation, EachTagTurnsAPictureAsVideoflipDoes) {
  gst_init(nullptr, nullptr);
  constexpr uint32_t kWidth = 8, kHeight = 4;
  const std::string raw =
      (std::filesystem::temp_directory_path() / ("vapipe-orientation-" + std::to_string(getpid()) + ".raw")).string();
  {
    std::ofstream out(raw, std::ios::binary);
    for (uint32_t i = 0; i < kWidth * kHeight; ++i) out.put(static_cast<char>(i));  // each pixel its own value
  }
  for (uint8_t o = 0; o <= kMaxOrientation; ++o) {
    const Orientation orientation = static_cast<Orientation>(o);
    const std::string tag = orientation_name(orientation);
    ASSERT_EQ(orientation_from_tag(tag), orientation);
    const std::string launch = "filesrc location=" + raw + " ! rawvideoparse format=gray8 width=8 height=4 "
                               "framerate=1/1 ! taginject tags=\"image-orientation=" + tag + "\" ! videoflip "
                               "video-direction=auto ! video/x-raw,format=GRAY8 ! appsink name=out sync=false";
    GError* error = nullptr;
    GstElement* pipeline = gst_parse_launch(launch.c_str(), &error);
    ASSERT_NE(pipeline, nullptr) << (error ? error->message : "");
    GstElement* sink = gst_bin_get_by_name(GST_BIN(pipeline), "out");
    gst_element_set_state(pipeline, GST_STATE_PLAYING);
    GstSample* sample = gst_app_sink_try_pull_sample(GST_APP_SINK(sink), 10 * GST_SECOND);
    ASSERT_NE(sample, nullptr) << tag;
    GstVideoInfo info;
    ASSERT_TRUE(gst_video_info_from_caps(&info, gst_sample_get_caps(sample)));
    GstMapInfo map;
    ASSERT_TRUE(gst_buffer_map(gst_sample_get_buffer(sample), &map, GST_MAP_READ));
    FrameInfo frame;
    frame.width = kWidth;
    frame.height = kHeight;
    frame.orientation = orientation;
    ASSERT_EQ(static_cast<uint32_t>(GST_VIDEO_INFO_WIDTH(&info)), frame.upright_width()) << tag;
    ASSERT_EQ(static_cast<uint32_t>(GST_VIDEO_INFO_HEIGHT(&info)), frame.upright_height()) << tag;
    const OrientationMap turn = orientation_map(orientation);
    for (uint32_t uy = 0; uy < frame.upright_height(); ++uy) {
      for (uint32_t ux = 0; ux < frame.upright_width(); ++ux) {
        uint32_t x = turn.transpose ? uy : ux, y = turn.transpose ? ux : uy;
        if (turn.mirror_x) x = kWidth - 1 - x;
        if (turn.mirror_y) y = kHeight - 1 - y;
        EXPECT_EQ(map.data[uy * GST_VIDEO_INFO_PLANE_STRIDE(&info, 0) + ux], y * kWidth + x)
            << tag << " at (" << ux << ", " << uy << ")";
      }
    }
    gst_buffer_unmap(gst_sample_get_buffer(sample), &map);
    gst_sample_unref(sample);
    gst_element_set_state(pipeline, GST_STATE_NULL);
    gst_object_unref(sink);
    gst_object_unref(pipeline);
  }
  std::filesystem::remove(raw);
}

}  // namespace
}  // namespace vapipe
