#include "stages/ingest/bus_messages.h"

#include <cstdint>
#include <gst/gst.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "stages/ingest/stream_reader.h"

namespace vapipe {
namespace {

class BusMessages : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_TRUE(ensure_gstreamer()); }
  void SetUp() override {
    bus_ = gst_bus_new();
    element_ = gst_element_factory_make("identity", "tsdemux0");
    ASSERT_NE(element_, nullptr);
  }
  void TearDown() override {
    gst_object_unref(bus_);
    gst_object_unref(element_);
  }
  // A warning as tsdemux posts it for a lost packet of the stream on `pad`.
  GstMessage* continuity_warning(const char* pad) {
    GError* err = g_error_new_literal(GST_STREAM_ERROR, GST_STREAM_ERROR_DEMUX, "CONTINUITY: Mismatch packet 13");
    GstStructure* details = gst_structure_new("details", "warning-type", G_TYPE_STRING, "continuity-mismatch",
                                              "pad-name", G_TYPE_STRING, pad, nullptr);
    GstMessage* m = gst_message_new_warning_with_details(GST_OBJECT(element_), err, "debug", details);
    g_error_free(err);
    return m;
  }
  GstMessage* tags() {
    return gst_message_new_tag(GST_OBJECT(element_), gst_tag_list_new(GST_TAG_BITRATE, 4000000u, nullptr));
  }
  GstMessage* error() {
    GError* err = g_error_new_literal(GST_RESOURCE_ERROR, GST_RESOURCE_ERROR_READ, "Could not read");
    GstMessage* m = gst_message_new_error(GST_OBJECT(element_), err, "debug");
    g_error_free(err);
    return m;
  }
  std::vector<GstMessageType> left_on_bus() {
    std::vector<GstMessageType> left;
    while (GstMessage* m = gst_bus_pop(bus_)) {
      left.push_back(GST_MESSAGE_TYPE(m));
      gst_message_unref(m);
    }
    return left;
  }
  GstBus* bus_ = nullptr;
  GstElement* element_ = nullptr;
};

// A stream whose frames never pause: its bus is gone through while they come, so that a parser's tags
// do not pile up for as long as the connection lasts; lost video packets are counted on the way.
TEST_F(BusMessages, TheBusIsGoneThroughWithContinuityErrorsOfTheVideoCounted) {
  std::atomic<uint64_t> continuity{0};
  for (int i = 0; i < 1000; ++i) gst_bus_post(bus_, tags());
  gst_bus_post(bus_, continuity_warning("video_0_0041"));
  gst_bus_post(bus_, continuity_warning("audio_0_0042"));  // the audio's: no frame lost
  gst_bus_post(bus_, continuity_warning("video_0_0041"));
  drain_bus_up_to_error(bus_, &continuity);
  EXPECT_EQ(continuity.load(), 2u);
  EXPECT_TRUE(left_on_bus().empty());
}

// An error stays on the bus, with what came after it, for the reader's own look at errors to say.
TEST_F(BusMessages, AnErrorAndWhatFollowsItStayOnTheBus) {
  std::atomic<uint64_t> continuity{0};
  gst_bus_post(bus_, tags());
  gst_bus_post(bus_, continuity_warning("video_0_0041"));
  gst_bus_post(bus_, error());
  gst_bus_post(bus_, continuity_warning("video_0_0041"));
  drain_bus_up_to_error(bus_, &continuity);
  EXPECT_EQ(continuity.load(), 1u);
  EXPECT_EQ(left_on_bus(), (std::vector<GstMessageType>{GST_MESSAGE_ERROR, GST_MESSAGE_WARNING}));
  drain_bus_up_to_error(bus_, &continuity);  // an empty bus
  EXPECT_EQ(continuity.load(), 1u);
}

TEST_F(BusMessages, OnlyTsdemuxsContinuityErrorsOfAVideoStreamCount) {
  GstMessage* video = continuity_warning("video_0_0041");
  GstMessage* audio = continuity_warning("audio_0_0042");
  GError* err = g_error_new_literal(GST_STREAM_ERROR, GST_STREAM_ERROR_DECODE, "other");
  GstMessage* other = gst_message_new_warning(GST_OBJECT(element_), err, "debug");
  g_error_free(err);
  GstMessage* tag = tags();
  EXPECT_TRUE(is_video_continuity_error(video));
  EXPECT_FALSE(is_video_continuity_error(audio));
  EXPECT_FALSE(is_video_continuity_error(other));
  EXPECT_FALSE(is_video_continuity_error(tag));
  for (GstMessage* m : {video, audio, other, tag}) gst_message_unref(m);
}

}  // namespace
}  // namespace vapipe
