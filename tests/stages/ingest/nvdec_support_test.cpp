#include "stages/ingest/nvdec_support.h"

#include <gst/gst.h>
#include <gtest/gtest.h>

#include <string>

namespace vapipe {
namespace {

bool decodes_to_nv12(const std::string& caps_text, std::string* why) {
  GstCaps* caps = gst_caps_from_string(caps_text.c_str());
  EXPECT_NE(caps, nullptr) << caps_text;
  const bool nv12 = nvdec_decodes_to_nv12(caps, why);
  if (caps) gst_caps_unref(caps);
  return nv12;
}

// The caps an encoder's parser gives: NVDEC's output is NV12 only for 8-bit 4:2:0 video; a 10-bit or
// 4:4:4 stream goes to a CPU decoder (nvcodec would give P010 or Y444, which the lane cannot take).
TEST(NvdecSupport, OnlyEightBitFourTwoZeroStreamsDecodeToNv12) {
  gst_init(nullptr, nullptr);
  std::string why;
  for (const char* nv12 : {"video/x-h264, stream-format=avc, profile=high, width=320, height=240",
                           "video/x-h264, profile=constrained-baseline", "video/x-h264, profile=main",
                           "video/x-h265, profile=main, tier=main", "video/x-h265, profile=main-still-picture",
                           "video/x-h265, chroma-format=4:2:0, bit-depth-luma=(uint)8, profile=main",
                           "video/x-vp9, profile=(string)0", "video/x-vp8", "video/x-h264"}) {
    EXPECT_TRUE(decodes_to_nv12(nv12, &why)) << nv12 << ": " << why;
  }
  EXPECT_FALSE(decodes_to_nv12("video/x-h265, tier=main, profile=main-10", &why));
  EXPECT_EQ(why, "profile main-10");
  EXPECT_FALSE(decodes_to_nv12("video/x-h264, profile=high-10", &why));
  EXPECT_FALSE(decodes_to_nv12("video/x-h264, profile=high-4:4:4", &why));
  EXPECT_EQ(why, "profile high-4:4:4");
  EXPECT_FALSE(decodes_to_nv12("video/x-h265, profile=main-444", &why));
  EXPECT_FALSE(decodes_to_nv12("video/x-h265, profile=main-422-10", &why));
  EXPECT_FALSE(decodes_to_nv12("video/x-vp9, profile=(string)2", &why));
  EXPECT_FALSE(decodes_to_nv12("video/x-h265, bit-depth-luma=(uint)10, chroma-format=4:2:0", &why));
  EXPECT_EQ(why, "10-bit video");
  EXPECT_FALSE(decodes_to_nv12("video/x-h265, bit-depth-luma=(uint)8, chroma-format=4:2:2", &why));
  EXPECT_EQ(why, "4:2:2 chroma");
}

// What h265parse really says of a 10-bit stream (x265 here), where the encoder has 10 bits.
TEST(NvdecSupport, ATenBitStreamAsTheParserDescribesItIsNotForNvdec) {
  gst_init(nullptr, nullptr);
  GError* error = nullptr;
  GstElement* pipeline = gst_parse_launch(
      "videotestsrc num-buffers=1 ! video/x-raw,format=I420_10LE,width=64,height=64 ! x265enc ! h265parse "
      "! fakesink name=out", &error);
  if (!pipeline || error) {
    if (error) g_error_free(error);
    if (pipeline) gst_object_unref(pipeline);
    GTEST_SKIP() << "no x265enc here";
  }
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  GstBus* bus = gst_element_get_bus(pipeline);
  GstMessage* msg = gst_bus_timed_pop_filtered(bus, 20 * GST_SECOND,
                                               static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
  const bool eos = msg && GST_MESSAGE_TYPE(msg) == GST_MESSAGE_EOS;
  if (msg) gst_message_unref(msg);
  GstElement* out = gst_bin_get_by_name(GST_BIN(pipeline), "out");
  GstPad* pad = gst_element_get_static_pad(out, "sink");
  GstCaps* caps = gst_pad_get_current_caps(pad);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  if (!eos || !caps) {
    if (caps) gst_caps_unref(caps);
    gst_object_unref(pad), gst_object_unref(out), gst_object_unref(bus), gst_object_unref(pipeline);
    GTEST_SKIP() << "x265enc here does not encode 10 bits";
  }
  std::string why;
  EXPECT_FALSE(nvdec_decodes_to_nv12(caps, &why));
  EXPECT_NE(why.find("10"), std::string::npos) << why;
  gst_caps_unref(caps);
  gst_object_unref(pad), gst_object_unref(out), gst_object_unref(bus), gst_object_unref(pipeline);
}

}  // namespace
}  // namespace vapipe
