// Which compressed frames reach a decoder: the rule alone (the stream reader tests run it on real
// streams: a camera joined between key frames, key frames only).
#include "stages/ingest/decoder_input_gate.h"

#include <gtest/gtest.h>

#include <vector>

namespace vapipe {
namespace {

using Verdict = DecoderInputGate::Verdict;

TEST(DecoderInputGate, NothingBeforeTheFirstKeyFrameThenEverything) {
  DecoderInputGate gate(/*keyframes_only=*/false);
  EXPECT_EQ(gate.admit(true), Verdict::kBeforeKeyFrame);
  EXPECT_EQ(gate.admit(true), Verdict::kBeforeKeyFrame);
  EXPECT_EQ(gate.admit(false), Verdict::kPass);
  EXPECT_EQ(gate.admit(true), Verdict::kPass);
  EXPECT_EQ(gate.admit(false), Verdict::kPass);
  EXPECT_EQ(gate.admit(true), Verdict::kPass);
}

TEST(DecoderInputGate, AStreamThatStartsWithAKeyFrameLosesNothing) {
  DecoderInputGate gate(false);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(gate.admit(i % 30 != 0), Verdict::kPass) << i;
}

// A stream refreshed by intra slices alone has no frame its parser marks a key frame: after kMaxWait
// frames the gate trusts it (once), instead of leaving the camera dark for ever.
TEST(DecoderInputGate, AStreamWithoutKeyFramesIsDecodedOnAfterTheWait) {
  DecoderInputGate gate(false);
  for (uint64_t i = 0; i < DecoderInputGate::kMaxWait; ++i) ASSERT_EQ(gate.admit(true), Verdict::kBeforeKeyFrame) << i;
  EXPECT_EQ(gate.admit(true), Verdict::kPassAfterWaiting);
  EXPECT_EQ(gate.admit(true), Verdict::kPass);
}

TEST(DecoderInputGate, KeyFramesOnlyNeverPassesADeltaUnit) {
  DecoderInputGate gate(/*keyframes_only=*/true);
  for (uint64_t i = 0; i < DecoderInputGate::kMaxWait + 10; ++i) {
    ASSERT_EQ(gate.admit(true), Verdict::kNotKeyFrame) << i;  // no escape after waiting either
  }
  EXPECT_EQ(gate.admit(false), Verdict::kPass);
  EXPECT_EQ(gate.admit(true), Verdict::kNotKeyFrame);
}

// The gate on a real pad: a source pad linked to a "decoder" input that records what reaches it,
// buffers one by one and in lists (a depayloader feeding a decoder directly may push lists).
class GatedPad : public ::testing::Test {
 protected:
  void SetUp() override {
    gst_init(nullptr, nullptr);
    src_ = gst_pad_new("src", GST_PAD_SRC);
    sink_ = gst_pad_new("sink", GST_PAD_SINK);
    g_object_set_data(G_OBJECT(sink_), "test", this);
    gst_pad_set_chain_function(sink_, [](GstPad* pad, GstObject*, GstBuffer* b) {
      static_cast<GatedPad*>(g_object_get_data(G_OBJECT(pad), "test"))->arrived.push_back(GST_BUFFER_PTS(b));
      gst_buffer_unref(b);
      return GST_FLOW_OK;
    });
    gst_pad_set_chain_list_function(sink_, [](GstPad* pad, GstObject*, GstBufferList* list) {
      auto* self = static_cast<GatedPad*>(g_object_get_data(G_OBJECT(pad), "test"));
      ++self->lists;
      for (guint i = 0; i < gst_buffer_list_length(list); ++i) {
        self->arrived.push_back(GST_BUFFER_PTS(gst_buffer_list_get(list, i)));
      }
      gst_buffer_list_unref(list);
      return GST_FLOW_OK;
    });
    ASSERT_EQ(gst_pad_link(src_, sink_), GST_PAD_LINK_OK);
    gst_pad_set_active(sink_, TRUE);
    gst_pad_set_active(src_, TRUE);
    gst_pad_push_event(src_, gst_event_new_stream_start("gated"));
    GstCaps* caps = gst_caps_from_string("video/x-h264");
    gst_pad_push_event(src_, gst_event_new_caps(caps));
    gst_caps_unref(caps);
    GstSegment segment;
    gst_segment_init(&segment, GST_FORMAT_TIME);
    gst_pad_push_event(src_, gst_event_new_segment(&segment));
  }
  void TearDown() override {
    gst_pad_set_active(src_, FALSE);
    gst_pad_set_active(sink_, FALSE);
    gst_object_unref(src_);
    gst_object_unref(sink_);
  }
  // A compressed frame: `pts` names it; `delta` as a parser marks a frame that is not a key frame.
  static GstBuffer* frame(GstClockTime pts, bool delta) {
    GstBuffer* b = gst_buffer_new();
    GST_BUFFER_PTS(b) = pts;
    if (delta) GST_BUFFER_FLAG_SET(b, GST_BUFFER_FLAG_DELTA_UNIT);
    return b;
  }
  static GstBufferList* list_of(std::initializer_list<std::pair<GstClockTime, bool>> frames) {
    GstBufferList* list = gst_buffer_list_new();
    for (const auto& [pts, delta] : frames) gst_buffer_list_add(list, frame(pts, delta));
    return list;
  }
  GstPad* src_ = nullptr;
  GstPad* sink_ = nullptr;
  DecoderInputCounters counters_;
  std::vector<GstClockTime> arrived;
  int lists = 0;
};

TEST_F(GatedPad, BuffersAndListsPassOnlyFromTheFirstKeyFrame) {
  gate_decoder_input(sink_, /*keyframes_only=*/false, &counters_, "cam");
  EXPECT_EQ(gst_pad_push(src_, frame(1, true)), GST_FLOW_OK);
  EXPECT_EQ(gst_pad_push_list(src_, list_of({{2, true}, {3, true}})), GST_FLOW_OK);  // all dropped: no list
  EXPECT_EQ(gst_pad_push_list(src_, list_of({{4, true}, {5, false}, {6, true}})), GST_FLOW_OK);
  EXPECT_EQ(gst_pad_push(src_, frame(7, true)), GST_FLOW_OK);
  EXPECT_EQ(arrived, (std::vector<GstClockTime>{5, 6, 7}));
  EXPECT_EQ(lists, 1);
  EXPECT_EQ(counters_.before_key_frame.load(), 4u);
  EXPECT_EQ(counters_.not_key_frames.load(), 0u);
  EXPECT_GT(counters_.last_input_ns.load(), 0);
}

TEST_F(GatedPad, KeyFramesOnlyKeepsTheKeyFramesOfAList) {
  gate_decoder_input(sink_, /*keyframes_only=*/true, &counters_, "cam");
  EXPECT_EQ(gst_pad_push_list(src_, list_of({{1, false}, {2, true}, {3, true}, {4, false}})), GST_FLOW_OK);
  EXPECT_EQ(gst_pad_push(src_, frame(5, true)), GST_FLOW_OK);
  EXPECT_EQ(gst_pad_push(src_, frame(6, false)), GST_FLOW_OK);
  EXPECT_EQ(arrived, (std::vector<GstClockTime>{1, 4, 6}));
  EXPECT_EQ(counters_.not_key_frames.load(), 3u);
  EXPECT_EQ(counters_.before_key_frame.load(), 0u);
}

}  // namespace
}  // namespace vapipe
