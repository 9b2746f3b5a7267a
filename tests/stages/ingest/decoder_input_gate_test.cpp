// Which compressed frames reach a decoder: the rule alone (the stream reader tests run it on real
// streams: a camera joined between key frames, key frames only).
#include "stages/ingest/decoder_input_gate.h"

#include <cstdint>
#include <gtest/gtest.h>
#include <gst/video/video.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "tests/fakes/linked_pads.h"

namespace vapipe {
namespace {

using Verdict = DecoderInputGate::Verdict;
using Frame = DecoderInputGate::Frame;

Frame delta_if(bool delta) { return delta ? Frame::kDelta : Frame::kKey; }

TEST(DecoderInputGate, NothingBeforeTheFirstKeyFrameThenEverything) {
  DecoderInputGate gate(/*keyframes_only=*/false);
  EXPECT_EQ(gate.admit(Frame::kDelta), Verdict::kBeforeKeyFrame);
  EXPECT_EQ(gate.admit(Frame::kDelta), Verdict::kBeforeKeyFrame);
  EXPECT_EQ(gate.admit(Frame::kKey), Verdict::kPass);
  EXPECT_EQ(gate.admit(Frame::kDelta), Verdict::kPass);
  EXPECT_EQ(gate.admit(Frame::kRecoveryPoint), Verdict::kPass);
  EXPECT_EQ(gate.admit(Frame::kKey), Verdict::kPass);
  EXPECT_EQ(gate.admit(Frame::kDelta), Verdict::kPass);
}

TEST(DecoderInputGate, TellsFramesApartOnlyUntilItStartsOrWithKeyFramesOnly) {
  DecoderInputGate gate(false);
  EXPECT_TRUE(gate.tells_frames_apart());
  EXPECT_EQ(gate.admit(Frame::kRecoveryPoint), Verdict::kPassFromRecoveryPoint);
  EXPECT_FALSE(gate.tells_frames_apart());
  DecoderInputGate keys_only(true);
  EXPECT_EQ(keys_only.admit(Frame::kKey), Verdict::kPass);
  EXPECT_TRUE(keys_only.tells_frames_apart());
}

// keyframes_only turned on by a reload drops the next delta; turned off, the deltas after the last key
// frame passed reference frames never decoded: nothing passes before the next key frame (or recovery point).
TEST(DecoderInputGate, KeyframesOnlyChangedMidStreamTakesEffectWhereTheDecoderCanFollow) {
  DecoderInputGate gate(false);
  EXPECT_EQ(gate.admit(Frame::kKey), Verdict::kPass);
  EXPECT_EQ(gate.admit(Frame::kDelta), Verdict::kPass);
  gate.set_keyframes_only(true);
  EXPECT_TRUE(gate.keyframes_only());
  EXPECT_EQ(gate.admit(Frame::kDelta), Verdict::kNotKeyFrame);
  EXPECT_EQ(gate.admit(Frame::kKey), Verdict::kPass);
  EXPECT_EQ(gate.admit(Frame::kDelta), Verdict::kNotKeyFrame);
  gate.set_keyframes_only(false);
  EXPECT_TRUE(gate.tells_frames_apart());
  EXPECT_EQ(gate.admit(Frame::kDelta), Verdict::kBeforeKeyFrame);
  EXPECT_EQ(gate.admit(Frame::kRecoveryPoint), Verdict::kPassFromRecoveryPoint);
  EXPECT_EQ(gate.admit(Frame::kDelta), Verdict::kPass);
  gate.set_keyframes_only(false);  // unchanged: no new wait
  EXPECT_EQ(gate.admit(Frame::kDelta), Verdict::kPass);
}

// A flush (a seek): the decoder needs a key frame again, and gets nothing before it.
TEST(DecoderInputGate, AFlushWaitsForTheNextKeyFrameAgain) {
  using G = DecoderInputGate;
  G gate(false);
  EXPECT_EQ(gate.admit(G::Frame::kKey), G::Verdict::kPass);
  EXPECT_EQ(gate.admit(G::Frame::kDelta), G::Verdict::kPass);
  gate.restart();
  EXPECT_TRUE(gate.tells_frames_apart());
  EXPECT_EQ(gate.admit(G::Frame::kDelta), G::Verdict::kBeforeKeyFrame);
  EXPECT_EQ(gate.admit(G::Frame::kKey), G::Verdict::kPass);
  EXPECT_EQ(gate.admit(G::Frame::kDelta), G::Verdict::kPass);
}

TEST(DecoderInputGate, AStreamThatStartsWithAKeyFrameLosesNothing) {
  DecoderInputGate gate(false);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(gate.admit(delta_if(i % 30 != 0)), Verdict::kPass) << i;
}

// Intra refresh: a camera joined after its only key frame starts at the next recovery point.
TEST(DecoderInputGate, AStreamJoinedBetweenRecoveryPointsStartsAtTheNext) {
  DecoderInputGate gate(false);
  EXPECT_EQ(gate.admit(Frame::kDelta), Verdict::kBeforeKeyFrame);
  EXPECT_EQ(gate.admit(Frame::kRecoveryPoint), Verdict::kPassFromRecoveryPoint);
  EXPECT_EQ(gate.admit(Frame::kDelta), Verdict::kPass);
  EXPECT_EQ(gate.admit(Frame::kRecoveryPoint), Verdict::kPass);
}

// A stream that marks no frame a key frame: after kMaxWait frames the gate trusts it (once), instead
// of leaving the camera dark for ever.
TEST(DecoderInputGate, AStreamWithoutKeyFramesIsDecodedOnAfterTheWait) {
  DecoderInputGate gate(false);
  for (uint64_t i = 0; i < DecoderInputGate::kMaxWait; ++i) {
    ASSERT_EQ(gate.admit(Frame::kDelta), Verdict::kBeforeKeyFrame) << i;
  }
  EXPECT_EQ(gate.admit(Frame::kDelta), Verdict::kPassAfterWaiting);
  EXPECT_EQ(gate.admit(Frame::kDelta), Verdict::kPass);
}

TEST(DecoderInputGate, KeyFramesOnlyNeverPassesADeltaUnitOrARecoveryPoint) {
  DecoderInputGate gate(/*keyframes_only=*/true);
  for (uint64_t i = 0; i < DecoderInputGate::kMaxWait + 10; ++i) {
    ASSERT_EQ(gate.admit(Frame::kDelta), Verdict::kNotKeyFrame) << i;  // no escape after waiting either
  }
  EXPECT_EQ(gate.admit(Frame::kKey), Verdict::kPass);
  EXPECT_EQ(gate.admit(Frame::kDelta), Verdict::kNotKeyFrame);
  EXPECT_EQ(gate.admit(Frame::kRecoveryPoint), Verdict::kRecoveryPointNotWhole);
  EXPECT_EQ(gate.admit(Frame::kKey), Verdict::kPass);
}

TEST(RecoveryWatch, PicturesLeaveOnceTheCountedFramesHaveGoneInAndNotBeforeTheLatest) {
  RecoveryWatch watch;
  EXPECT_TRUE(watch.admit_output(5));  // not started: everything leaves
  watch.start(100, 3);
  EXPECT_FALSE(watch.admit_output(100));  // counting: nothing leaves
  watch.input(103);
  watch.input(101);  // reordered: the latest timestamp counts
  EXPECT_FALSE(watch.admit_output(101));
  watch.input(102);  // the third: pictures from 103 on are whole
  EXPECT_FALSE(watch.admit_output(102));
  EXPECT_TRUE(watch.admit_output(103));
  EXPECT_TRUE(watch.admit_output(102));  // over: the watch is idle again
  watch.input(104);
  EXPECT_TRUE(watch.admit_output(104));
}

TEST(RecoveryWatch, ACountOfZeroOrNoTimestampHoldsNothingBack) {
  RecoveryWatch zero;
  zero.start(100, 0);
  EXPECT_FALSE(zero.admit_output(99));  // before the recovery point itself
  EXPECT_TRUE(zero.admit_output(100));
  RecoveryWatch untimed;
  untimed.start(GST_CLOCK_TIME_NONE, 10);
  EXPECT_TRUE(untimed.admit_output(100));
}

TEST(RecoveryWatch, AnUnbelievableCountIsCappedAtTheMostFramesItWaits) {
  RecoveryWatch watch;
  watch.start(0, 1000000);
  for (uint32_t i = 1; i < RecoveryWatch::kMaxFrames; ++i) watch.input(i);
  EXPECT_FALSE(watch.admit_output(0));
  watch.input(RecoveryWatch::kMaxFrames);
  EXPECT_TRUE(watch.admit_output(RecoveryWatch::kMaxFrames));
}

// The gate on a real pad: a source pad linked to a "decoder" input that records what reaches it,
// buffers one by one and in lists (a depayloader feeding a decoder directly may push lists).
class GatedPad : public ::testing::Test {
 protected:
  void SetUp() override {
    pads_ = std::make_unique<testing::LinkedPads>("gated", input_caps());
    ASSERT_TRUE(pads_->linked());
    src_ = pads_->src();
    sink_ = pads_->sink();
  }
  // What the "decoder" takes.
  virtual const char* input_caps() const { return "video/x-h264"; }
  // A compressed frame: `pts` names it; `delta` as a parser marks a frame that is not a key frame.
  static GstBuffer* frame(GstClockTime pts, bool delta) {
    GstBuffer* b = gst_buffer_new();
    GST_BUFFER_PTS(b) = pts;
    if (delta) GST_BUFFER_FLAG_SET(b, GST_BUFFER_FLAG_DELTA_UNIT);
    return b;
  }
  // A compressed frame with bytes (an empty one gives no picture), as a parser and a depayloader mark it.
  static GstBuffer* coded(GstClockTime pts, bool delta, bool discont = false) {
    GstBuffer* b = gst_buffer_new_allocate(nullptr, 8, nullptr);
    gst_buffer_memset(b, 0, 0, 8);
    GST_BUFFER_PTS(b) = pts;
    if (delta) GST_BUFFER_FLAG_SET(b, GST_BUFFER_FLAG_DELTA_UNIT);
    if (discont) GST_BUFFER_FLAG_SET(b, GST_BUFFER_FLAG_DISCONT);
    return b;
  }
  static GstBufferList* list_of(std::initializer_list<std::pair<GstClockTime, bool>> frames) {
    GstBufferList* list = gst_buffer_list_new();
    for (const auto& [pts, delta] : frames) gst_buffer_list_add(list, frame(pts, delta));
    return list;
  }
  const std::vector<GstClockTime>& arrived() const { return pads_->arrived(); }
  std::unique_ptr<testing::LinkedPads> pads_;
  GstPad* src_ = nullptr;
  GstPad* sink_ = nullptr;
  DecoderInputCounters counters_;
  std::atomic<bool> all_frames_{false};  // keyframes_only off
};

TEST_F(GatedPad, BuffersAndListsPassOnlyFromTheFirstKeyFrame) {
  gate_decoder_input(sink_, nullptr, &all_frames_, &counters_, "cam");
  EXPECT_EQ(gst_pad_push(src_, frame(1, true)), GST_FLOW_OK);
  EXPECT_EQ(gst_pad_push_list(src_, list_of({{2, true}, {3, true}})), GST_FLOW_OK);  // all dropped: no list
  EXPECT_EQ(gst_pad_push_list(src_, list_of({{4, true}, {5, false}, {6, true}})), GST_FLOW_OK);
  EXPECT_EQ(gst_pad_push(src_, frame(7, true)), GST_FLOW_OK);
  EXPECT_EQ(arrived(), (std::vector<GstClockTime>{5, 6, 7}));
  EXPECT_EQ(pads_->lists(), 1);
  EXPECT_EQ(counters_.before_key_frame.load(), 4u);
  EXPECT_EQ(counters_.not_key_frames.load(), 0u);
  EXPECT_GT(counters_.last_input_ns.load(), 0);
}

TEST_F(GatedPad, KeyFramesOnlyKeepsTheKeyFramesOfAList) {
  std::atomic<bool> keyframes_only{true};
  gate_decoder_input(sink_, nullptr, &keyframes_only, &counters_, "cam");
  EXPECT_EQ(gst_pad_push_list(src_, list_of({{1, false}, {2, true}, {3, true}, {4, false}})), GST_FLOW_OK);
  EXPECT_EQ(gst_pad_push(src_, frame(5, true)), GST_FLOW_OK);
  EXPECT_EQ(gst_pad_push(src_, frame(6, false)), GST_FLOW_OK);
  EXPECT_EQ(arrived(), (std::vector<GstClockTime>{1, 4, 6}));
  EXPECT_EQ(counters_.not_key_frames.load(), 3u);
  EXPECT_EQ(counters_.before_key_frame.load(), 0u);
}

// A reload turns keyframes_only on and off while the pad carries frames: the gate follows the flag
// it was given from the next frame, and after "off" waits for a key frame.
TEST_F(GatedPad, TheGateFollowsAKeyframesOnlyFlagChangedWhileFramesPass) {
  std::atomic<bool> keyframes_only{false};
  gate_decoder_input(sink_, nullptr, &keyframes_only, &counters_, "cam");
  for (GstClockTime pts : {1, 2, 3}) EXPECT_EQ(gst_pad_push(src_, frame(pts, pts != 1)), GST_FLOW_OK);
  keyframes_only = true;
  for (GstClockTime pts : {4, 5, 6}) EXPECT_EQ(gst_pad_push(src_, frame(pts, pts != 5)), GST_FLOW_OK);
  keyframes_only = false;
  for (GstClockTime pts : {7, 8, 9}) EXPECT_EQ(gst_pad_push(src_, frame(pts, pts != 8)), GST_FLOW_OK);
  EXPECT_EQ(arrived(), (std::vector<GstClockTime>{1, 2, 3, 5, 8, 9}));
  EXPECT_EQ(counters_.not_key_frames.load(), 2u);    // 4 and 6
  EXPECT_EQ(counters_.before_key_frame.load(), 1u);  // 7: it needs 6, never decoded
}

// A decoder that gives no picture for a frame it took (damaged or incomplete: a camera's lost packets;
// libav drops it, output-corrupt off) was seen only at a file's end, as a count: a camera's were never
// counted. Now a frame whose picture has not come when a later one comes out (decoders send pictures
// in presentation order) is counted as it happens; a seek's flush forgets what the decoder held, and a
// field-coded stream (two fields in, one picture out) is not counted.
TEST_F(GatedPad, AFrameWhosePictureNeverCameIsCountedWhenALaterOneComesOut) {
  // The decoder's output pad, its pictures pushed by the test.
  testing::LinkedPads output("pictures", "video/x-raw, format=(string)I420, width=(int)16, height=(int)16");
  ASSERT_TRUE(output.linked());
  GstPad* decoder_src = output.src();
  gate_decoder_input(sink_, decoder_src, &all_frames_, &counters_, "cam");
  auto picture = [&](GstClockTime pts, bool interlaced = false) {
    GstBuffer* b = gst_buffer_new();
    GST_BUFFER_PTS(b) = pts;
    if (interlaced) GST_BUFFER_FLAG_SET(b, GST_VIDEO_BUFFER_FLAG_INTERLACED);
    return gst_pad_push(decoder_src, b);
  };
  // In decoding order, as a stream with B-frames: 10 40 20 30 70 50 60 (only their order matters).
  for (GstClockTime pts : {10, 40, 20, 30, 70, 50, 60}) ASSERT_EQ(gst_pad_push(src_, coded(pts, pts != 10)), GST_FLOW_OK);
  EXPECT_EQ(picture(10), GST_FLOW_OK);
  EXPECT_EQ(picture(20), GST_FLOW_OK);
  EXPECT_EQ(counters_.undecoded.load(), 0u);  // 40 and 30 are still in the decoder
  EXPECT_EQ(picture(40), GST_FLOW_OK);        // 30 never came
  EXPECT_EQ(counters_.undecoded.load(), 1u);
  EXPECT_EQ(picture(70), GST_FLOW_OK);  // nor 50 and 60
  EXPECT_EQ(counters_.undecoded.load(), 3u);
  EXPECT_EQ(counters_.pictures.load(), 4u);
  // A seek: what the decoder held is dropped, not lost. The frames after it wait for a key frame
  // again: a demuxer that does not seek to one (MPEG-PS) sends those before it, which give no picture
  // (they were counted as lost: "its decoder gave no picture for 12 of its 113 frames" on a resume).
  ASSERT_EQ(gst_pad_push(src_, coded(80, true)), GST_FLOW_OK);
  ASSERT_EQ(gst_pad_push(src_, coded(GST_CLOCK_TIME_NONE, true)), GST_FLOW_OK);  // (an AVI's B-frame)
  const uint64_t expected = counters_.expected_pictures.load();
  pads_->flush();
  EXPECT_EQ(counters_.expected_pictures.load(), expected - 2) << "what the decoder held is expected no more";
  const uint64_t waited = counters_.before_key_frame.load();
  for (GstClockTime pts : {150, 160}) ASSERT_EQ(gst_pad_push(src_, coded(pts, true)), GST_FLOW_OK);
  EXPECT_EQ(counters_.before_key_frame.load(), waited + 2);
  ASSERT_EQ(gst_pad_push(src_, coded(200, false)), GST_FLOW_OK);
  EXPECT_EQ(picture(200), GST_FLOW_OK);
  EXPECT_EQ(counters_.undecoded.load(), 3u);
  // Fields: the second field of a pair gives no picture of its own.
  for (GstClockTime pts : {210, 220, 230, 240}) ASSERT_EQ(gst_pad_push(src_, coded(pts, true)), GST_FLOW_OK);
  EXPECT_EQ(picture(210, true), GST_FLOW_OK);
  EXPECT_EQ(picture(230, true), GST_FLOW_OK);
  EXPECT_EQ(counters_.undecoded.load(), 3u);
}

// An RTSP camera's stall (1.5 s: the host busy): its jitter buffer resets its clock and squeezes the
// late frames' timestamps together, then repeats one, which the parser sends on as none. The decoder
// guesses those frames' timestamps from the last picture's, running ahead of the next frames' real
// ones, and gives each of those the last picture's timestamp again (it keeps them from going back).
// Every frame gave its picture: none is counted as undecodable (each was, 12 in a stall of 1.5 s).
TEST_F(GatedPad, PicturesTheDecoderStampedWithTheLastPicturesTimeAreTheirFramesNotLosses) {
  testing::LinkedPads output("pictures", "video/x-raw, format=(string)I420, width=(int)16, height=(int)16");
  ASSERT_TRUE(output.linked());
  GstPad* decoder_src = output.src();
  gate_decoder_input(sink_, decoder_src, &all_frames_, &counters_, "cam", /*exact_timestamps=*/false);
  const GstClockTime ms = GST_MSECOND;
  uint64_t pictures = 0;
  auto frame_and_picture = [&](GstClockTime in, GstClockTime out, bool key = false) {
    ASSERT_EQ(gst_pad_push(src_, coded(in, !key)), GST_FLOW_OK);
    GstBuffer* b = gst_buffer_new();
    GST_BUFFER_PTS(b) = out;
    ASSERT_EQ(gst_pad_push(decoder_src, b), GST_FLOW_OK);
    ++pictures;
  };
  frame_and_picture(0, 0, true);
  for (GstClockTime t : {100, 200, 300, 395}) frame_and_picture(t * ms, t * ms);
  for (GstClockTime k = 1; k <= 12; ++k) frame_and_picture(GST_CLOCK_TIME_NONE, (395 + 100 * k) * ms);  // guessed
  for (GstClockTime k = 0; k < 12; ++k) frame_and_picture((473 + 100 * k) * ms, 1595 * ms);  // clamped
  frame_and_picture(1673 * ms, 1673 * ms);
  EXPECT_EQ(counters_.undecoded.load(), 0u);
  EXPECT_EQ(counters_.pictures.load(), pictures);
  // A frame that gave no picture is still counted when a later picture comes, clamped or not.
  ASSERT_EQ(gst_pad_push(src_, coded(1773 * ms, true)), GST_FLOW_OK);  // gives none
  frame_and_picture(1873 * ms, 1873 * ms);
  EXPECT_EQ(counters_.undecoded.load(), 1u);
}

// A packet lost on a camera's network: the depayloader marks the frame it was assembling DISCONT, and
// the decoder conceals what is missing. That frame's picture and those of the frames after it, which
// refer to it, until the next whole key frame leave the decoder marked corrupt (a result's "damaged":
// true), and are counted; the decoder's own mark is kept and counted too. A key frame marked so (a
// camera's slices: one lost, the others decoded) smears its GOP too. The DISCONT of a connection's or
// a seek's first frame is no loss.
// The pictures of a decoder that gave up waiting for a key frame are smeared too.
TEST_F(GatedPad, ALostPacketsFramesAreMarkedDamagedUntilTheNextKeyFrame) {
  testing::LinkedPads output("pictures", "video/x-raw, format=(string)I420, width=(int)16, height=(int)16");
  ASSERT_TRUE(output.linked());
  GstPad* decoder_src = output.src();
  gate_decoder_input(sink_, decoder_src, &all_frames_, &counters_, "cam");
  auto picture = [&](GstClockTime pts, bool corrupt = false) {
    GstBuffer* b = gst_buffer_new();
    GST_BUFFER_PTS(b) = pts;
    if (corrupt) GST_BUFFER_FLAG_SET(b, GST_BUFFER_FLAG_CORRUPTED);
    return gst_pad_push(decoder_src, b);
  };
  // Decoding order 10 (key, the connection's first: DISCONT) 20 40 30 (B) | lost | 60 (DISCONT) 50 (B,
  // refers to 60) 70 | 80 (key, DISCONT: a slice lost) 90 | 100 (key, whole) 110: pictures in
  // presentation order.
  const std::vector<std::tuple<GstClockTime, bool, bool>> frames = {
      {10, false, true}, {20, true, false}, {40, true, false}, {30, true, false}, {60, true, true},
      {50, true, false}, {70, true, false}, {80, false, true}, {90, true, false}, {100, false, false}, {110, true, false}};
  for (const auto& [pts, delta, discont] : frames) ASSERT_EQ(gst_pad_push(src_, coded(pts, delta, discont)), GST_FLOW_OK);
  for (GstClockTime pts : {10, 20, 30, 40, 50, 60, 70, 80, 90, 100}) ASSERT_EQ(picture(pts), GST_FLOW_OK);
  ASSERT_EQ(picture(110, /*corrupt=*/true), GST_FLOW_OK);  // the decoder's own word
  EXPECT_EQ(output.corrupted(), (std::vector<GstClockTime>{50, 60, 70, 80, 90, 110}));
  EXPECT_EQ(counters_.damaged_pictures.load(), 6u);
  // A seek: its first frame's DISCONT loses nothing, even on a delta unit the demuxer sent first
  // (MPEG-PS, whose frames the gate then waits past for a key frame); the loss after it does.
  pads_->flush();
  for (const auto& [pts, delta, discont] : std::vector<std::tuple<GstClockTime, bool, bool>>{
           {200, true, true}, {210, false, true}, {220, true, false}, {230, true, true}, {240, true, false}}) {
    ASSERT_EQ(gst_pad_push(src_, coded(pts, delta, discont)), GST_FLOW_OK);
  }
  for (GstClockTime pts : {210, 220, 230, 240}) ASSERT_EQ(picture(pts), GST_FLOW_OK);
  EXPECT_EQ(output.corrupted(), (std::vector<GstClockTime>{50, 60, 70, 80, 90, 110, 230, 240}));
}

// A Matroska file whose audio starts before its video (ffmpeg's, OBS's, with AAC or Opus): matroskademux
// sends a second segment after the video's first frames, and the parser marks the frame after it DISCONT.
// Nothing was lost: no picture is damaged (28 of 30 were, found 2026-12-07). A loss after it still is one.
TEST_F(GatedPad, TheFirstFrameAfterANewSegmentLosesNothing) {
  testing::LinkedPads output("pictures", "video/x-raw, format=(string)I420, width=(int)16, height=(int)16");
  ASSERT_TRUE(output.linked());
  gate_decoder_input(sink_, output.src(), &all_frames_, &counters_, "cam");
  // Decoding order 10 (key, the first: DISCONT) 50 | a new segment | 30 (DISCONT) 20 40 90 70 60 80 |
  // lost | 100 (DISCONT) 110: pictures in presentation order.
  ASSERT_EQ(gst_pad_push(src_, coded(10, false, true)), GST_FLOW_OK);
  ASSERT_EQ(gst_pad_push(src_, coded(50, true)), GST_FLOW_OK);
  pads_->push_segment();
  ASSERT_EQ(gst_pad_push(src_, coded(30, true, true)), GST_FLOW_OK);
  for (GstClockTime pts : {20, 40, 90, 70, 60, 80}) ASSERT_EQ(gst_pad_push(src_, coded(pts, true)), GST_FLOW_OK);
  ASSERT_EQ(gst_pad_push(src_, coded(100, true, true)), GST_FLOW_OK);
  ASSERT_EQ(gst_pad_push(src_, coded(110, true)), GST_FLOW_OK);
  for (GstClockTime pts : {10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110}) {
    GstBuffer* b = gst_buffer_new();
    GST_BUFFER_PTS(b) = pts;
    ASSERT_EQ(gst_pad_push(output.src(), b), GST_FLOW_OK);
  }
  EXPECT_EQ(output.corrupted(), (std::vector<GstClockTime>{100, 110}));
  EXPECT_EQ(counters_.damaged_pictures.load(), 2u);
}

// A camera whose RTP timestamps jitter, with B-frames: the decoder, reordering, sends some pictures
// under timestamps none of its frames had (GstVideoDecoder keeps them from going back: a frame in at
// 1.033 s came out at 1.045 s, beside the frame that came in at 1.045 s). Such pictures of a damaged
// stretch are marked too: every picture within the range of its frames' timestamps (before 2026-12-06
// only those under a frame's own timestamp: every fourth picture of a lossy H.265 camera was not).
TEST_F(GatedPad, ADamagedStretchsPicturesAreMarkedUnderTheTimestampsTheDecoderGivesThem) {
  testing::LinkedPads output("pictures", "video/x-raw, format=(string)I420, width=(int)16, height=(int)16");
  ASSERT_TRUE(output.linked());
  gate_decoder_input(sink_, output.src(), &all_frames_, &counters_, "cam");
  // Decoding order 10 (key) 40 20 30 | lost | 80 (DISCONT) 50 60 70 | 100 (key) 130 110 120; the
  // decoder sends 50 at 52, and 70 at 60.
  const std::vector<std::tuple<GstClockTime, bool, bool>> frames = {
      {10, false, true}, {40, true, false}, {20, true, false}, {30, true, false}, {80, true, true},  {50, true, false},
      {60, true, false}, {70, true, false}, {100, false, false}, {130, true, false}, {110, true, false}, {120, true, false}};
  for (const auto& [pts, delta, discont] : frames) ASSERT_EQ(gst_pad_push(src_, coded(pts, delta, discont)), GST_FLOW_OK);
  for (GstClockTime pts : {10, 20, 30, 40, 52, 60, 60, 80, 100, 110, 120, 130}) {
    GstBuffer* b = gst_buffer_new();
    GST_BUFFER_PTS(b) = pts;
    ASSERT_EQ(gst_pad_push(output.src(), b), GST_FLOW_OK);
  }
  EXPECT_EQ(output.corrupted(), (std::vector<GstClockTime>{52, 60, 60, 80}));
  EXPECT_EQ(counters_.damaged_pictures.load(), 4u);
}

// A compressed frame of NAL units (`nals`, each after a start code), as a parser marks it.
GstBuffer* with_nal_units(GstClockTime pts, bool delta, bool discont, const std::vector<std::vector<uint8_t>>& nals) {
  std::vector<uint8_t> bytes;
  for (const auto& nal : nals) {
    bytes.insert(bytes.end(), {0, 0, 0, 1});
    bytes.insert(bytes.end(), nal.begin(), nal.end());
  }
  GstBuffer* b = gst_buffer_new_allocate(nullptr, bytes.size(), nullptr);
  gst_buffer_fill(b, 0, bytes.data(), bytes.size());
  GST_BUFFER_PTS(b) = pts;
  if (delta) GST_BUFFER_FLAG_SET(b, GST_BUFFER_FLAG_DELTA_UNIT);
  if (discont) GST_BUFFER_FLAG_SET(b, GST_BUFFER_FLAG_DISCONT);
  return b;
}
// H.264 slices (first_mb_in_slice 0, then slice_type: P 5, I 7), and a recovery point SEI whose
// recovery_frame_cnt is 3.
const std::vector<uint8_t> kH264PSlice = {0x61, 0x9A}, kH264ISlice = {0x61, 0x88, 0x80};
const std::vector<uint8_t> kH264RecoveryIn3 = {0x06, 0x06, 0x02, 0x20, 0x40, 0x80};

// A stream refreshed by intra slices (a low-latency camera; x264 and NVENC intra refresh) has no key
// frame after its first: a column of fresh blocks sweeps each picture, and a recovery point SEI says
// after how many frames they are whole. A loss's smear lasts until then, not only until the next
// recovery point (ended there before 2026-12-06).
TEST_F(GatedPad, AnIntraRefreshedStreamsDamageLastsUntilItsRecoveryPointsCount) {
  testing::LinkedPads output("pictures", "video/x-raw, format=(string)I420, width=(int)16, height=(int)16");
  ASSERT_TRUE(output.linked());
  gate_decoder_input(sink_, output.src(), &all_frames_, &counters_, "cam");
  // 10 (key) 20 30 40 (DISCONT) 50 60 70 (recovery point: whole 3 frames on) 80 90 100 110.
  ASSERT_EQ(gst_pad_push(src_, coded(10, false, true)), GST_FLOW_OK);
  for (GstClockTime pts : {20, 30, 40, 50, 60}) {
    ASSERT_EQ(gst_pad_push(src_, with_nal_units(pts, true, pts == 40, {kH264PSlice})), GST_FLOW_OK);
  }
  ASSERT_EQ(gst_pad_push(src_, with_nal_units(70, false, false, {kH264RecoveryIn3, kH264PSlice})), GST_FLOW_OK);
  for (GstClockTime pts : {80, 90, 100, 110}) {
    ASSERT_EQ(gst_pad_push(src_, with_nal_units(pts, true, false, {kH264PSlice})), GST_FLOW_OK);
  }
  for (GstClockTime pts = 10; pts <= 110; pts += 10) {
    GstBuffer* b = gst_buffer_new();
    GST_BUFFER_PTS(b) = pts;
    ASSERT_EQ(gst_pad_push(output.src(), b), GST_FLOW_OK);
  }
  EXPECT_EQ(output.corrupted(), (std::vector<GstClockTime>{40, 50, 60, 70, 80, 90}));
}

// An open GOP's key frame (H.264: an I-frame not IDR) ends a damaged stretch, but the B-frames after it
// that are shown before it (its leading pictures) still refer to the GOP before: damaged too. Those
// shown after it are not.
TEST_F(GatedPad, AnOpenGopsLeadingPicturesAfterADamagedStretchAreDamaged) {
  testing::LinkedPads output("pictures", "video/x-raw, format=(string)I420, width=(int)16, height=(int)16");
  ASSERT_TRUE(output.linked());
  gate_decoder_input(sink_, output.src(), &all_frames_, &counters_, "cam");
  // Decoding order 10 (key) 20 40 (DISCONT) 30 | 70 (open GOP's I) 50 60 | 100 80 90.
  ASSERT_EQ(gst_pad_push(src_, coded(10, false, true)), GST_FLOW_OK);
  for (GstClockTime pts : {20, 40, 30}) {
    ASSERT_EQ(gst_pad_push(src_, with_nal_units(pts, true, pts == 40, {kH264PSlice})), GST_FLOW_OK);
  }
  ASSERT_EQ(gst_pad_push(src_, with_nal_units(70, false, false, {kH264ISlice})), GST_FLOW_OK);
  for (GstClockTime pts : {50, 60, 100, 80, 90}) {
    ASSERT_EQ(gst_pad_push(src_, with_nal_units(pts, true, false, {kH264PSlice})), GST_FLOW_OK);
  }
  for (GstClockTime pts = 10; pts <= 100; pts += 10) {
    GstBuffer* b = gst_buffer_new();
    GST_BUFFER_PTS(b) = pts;
    ASSERT_EQ(gst_pad_push(output.src(), b), GST_FLOW_OK);
  }
  EXPECT_EQ(output.corrupted(), (std::vector<GstClockTime>{30, 40, 50, 60}));
}

// Data lost in a frame no other frame refers to (a B-frame whose nal_ref_idc is 0): its picture alone
// is damaged, not those after it (a stretch to the next key frame before 2026-12-06). A reference
// frame's loss still damages them.
TEST_F(GatedPad, ALossInAFrameNothingRefersToDamagesItsPictureAlone) {
  testing::LinkedPads output("pictures", "video/x-raw, format=(string)I420, width=(int)16, height=(int)16");
  ASSERT_TRUE(output.linked());
  gate_decoder_input(sink_, output.src(), &all_frames_, &counters_, "cam");
  const std::vector<uint8_t> b_slice = {0x01, 0x9E};  // nal_ref_idc 0, slice_type B
  // Decoding order 10 (key) 40 20 (B, DISCONT) 30 (B) 70 50 60 | 100 (key) 110 (P, DISCONT) 120.
  ASSERT_EQ(gst_pad_push(src_, coded(10, false, true)), GST_FLOW_OK);
  const std::vector<std::tuple<GstClockTime, bool, bool>> frames = {
      {40, false, false}, {20, true, true},   {30, true, false},  {70, false, false},
      {50, true, false},  {60, true, false},  {100, false, false}, {110, false, true}, {120, false, false}};
  for (const auto& [pts, b, discont] : frames) {
    ASSERT_EQ(gst_pad_push(src_, with_nal_units(pts, pts != 100, discont, {b ? b_slice : kH264PSlice})), GST_FLOW_OK);
  }
  for (GstClockTime pts = 10; pts <= 120; pts += 10) {
    GstBuffer* b = gst_buffer_new();
    GST_BUFFER_PTS(b) = pts;
    ASSERT_EQ(gst_pad_push(output.src(), b), GST_FLOW_OK);
  }
  EXPECT_EQ(output.corrupted(), (std::vector<GstClockTime>{20, 110, 120}));
}

// A stream without a key frame in DecoderInputGate::kMaxWait frames is decoded on from there: smeared
// until a key frame comes.
TEST_F(GatedPad, PicturesDecodedWithoutTheKeyFrameTheyNeedAreMarkedDamaged) {
  testing::LinkedPads output("pictures", "video/x-raw, format=(string)I420, width=(int)16, height=(int)16");
  ASSERT_TRUE(output.linked());
  gate_decoder_input(sink_, output.src(), &all_frames_, &counters_, "cam");
  GstClockTime pts = 1;
  for (uint64_t i = 0; i < DecoderInputGate::kMaxWait; ++i) ASSERT_EQ(gst_pad_push(src_, frame(pts++, true)), GST_FLOW_OK);
  const GstClockTime first_passed = pts;
  for (int i = 0; i < 3; ++i) ASSERT_EQ(gst_pad_push(src_, frame(pts++, true)), GST_FLOW_OK);
  ASSERT_EQ(gst_pad_push(src_, frame(pts++, false)), GST_FLOW_OK);  // a key frame at last
  for (GstClockTime p = first_passed; p < pts; ++p) {
    GstBuffer* b = gst_buffer_new();
    GST_BUFFER_PTS(b) = p;
    ASSERT_EQ(gst_pad_push(output.src(), b), GST_FLOW_OK);
  }
  EXPECT_EQ(output.corrupted(), (std::vector<GstClockTime>{first_passed, first_passed + 1, first_passed + 2}));
}

// A camera joined early in a long GOP (30 s): the wait for a key frame ends without one, and libav
// gives no picture until the key frame comes. The frames passed meanwhile are not "undecodable" (375
// were counted so, found 2026-12-07): as after a recovery point, frames count from the first picture.
TEST_F(GatedPad, FramesPassedAfterTheWaitGiveNoPictureUntilAKeyFrameAndAreNoLoss) {
  testing::LinkedPads output("pictures", "video/x-raw, format=(string)I420, width=(int)16, height=(int)16");
  ASSERT_TRUE(output.linked());
  gate_decoder_input(sink_, output.src(), &all_frames_, &counters_, "cam");
  GstClockTime pts = 1;
  for (uint64_t i = 0; i < DecoderInputGate::kMaxWait + 50; ++i) ASSERT_EQ(gst_pad_push(src_, coded(pts++, true)), GST_FLOW_OK);
  const GstClockTime key = pts;
  for (int i = 0; i < 5; ++i) ASSERT_EQ(gst_pad_push(src_, coded(pts++, i > 0)), GST_FLOW_OK);
  for (GstClockTime p = key; p < pts; ++p) {
    GstBuffer* b = gst_buffer_new();
    GST_BUFFER_PTS(b) = p;
    ASSERT_EQ(gst_pad_push(output.src(), b), GST_FLOW_OK);
  }
  EXPECT_EQ(counters_.undecoded.load(), 0u);
  EXPECT_EQ(counters_.pictures.load(), 5u);
}

// An intra-only codec (here PNG, as avidemux gives it from an index without key-frame flags): the
// flags are not believed, with or without key frames only.
class GatedPngPad : public GatedPad {
 protected:
  const char* input_caps() const override { return "image/png, width=(int)160, height=(int)120"; }
};

TEST_F(GatedPngPad, AnIntraOnlyCodecsFramesAllPassWhateverTheirFlags) {
  std::atomic<bool> keyframes_only{false};
  gate_decoder_input(sink_, nullptr, &keyframes_only, &counters_, "cam");
  EXPECT_EQ(gst_pad_push(src_, frame(1, true)), GST_FLOW_OK);
  EXPECT_EQ(gst_pad_push_list(src_, list_of({{2, true}, {3, false}})), GST_FLOW_OK);
  keyframes_only = true;
  EXPECT_EQ(gst_pad_push(src_, frame(4, true)), GST_FLOW_OK);
  EXPECT_EQ(arrived(), (std::vector<GstClockTime>{1, 2, 3, 4}));
  EXPECT_EQ(counters_.before_key_frame.load() + counters_.not_key_frames.load(), 0u);
}

// H.265: a CRA picture's RASL pictures refer to pictures before it, its RADL pictures do not.
class GatedH265Pad : public GatedPad {
 protected:
  const char* input_caps() const override { return "video/x-h265"; }
};

TEST_F(GatedH265Pad, ACrasRaslPicturesAfterADamagedStretchAreDamagedItsRadlPicturesNot) {
  testing::LinkedPads output("pictures", "video/x-raw, format=(string)I420, width=(int)16, height=(int)16");
  ASSERT_TRUE(output.linked());
  gate_decoder_input(sink_, output.src(), &all_frames_, &counters_, "cam");
  auto nal = [](int type) { return std::vector<uint8_t>{static_cast<uint8_t>(type << 1), 1, 0xAC}; };
  constexpr int kTrailR = 1, kRadlN = 6, kRaslN = 8, kIdr = 19, kCra = 21;
  // Decoding order 10 (IDR) 40 (DISCONT) 20 30 | 80 (CRA) 50 (RASL) 70 (RADL) | 120 90 100 110.
  const std::vector<std::tuple<GstClockTime, int, bool>> frames = {
      {10, kIdr, true},     {40, kTrailR, true},   {20, kTrailR, false},  {30, kTrailR, false},
      {80, kCra, false},    {50, kRaslN, false},   {70, kRadlN, false},   {120, kTrailR, false},
      {90, kTrailR, false}, {100, kTrailR, false}, {110, kTrailR, false}};
  for (const auto& [pts, type, discont] : frames) {
    const bool key = type == kIdr || type == kCra;
    ASSERT_EQ(gst_pad_push(src_, with_nal_units(pts, !key, discont, {nal(type)})), GST_FLOW_OK);
  }
  for (GstClockTime pts : {10, 20, 30, 40, 50, 70, 80, 90, 100, 110, 120}) {
    GstBuffer* b = gst_buffer_new();
    GST_BUFFER_PTS(b) = pts;
    ASSERT_EQ(gst_pad_push(output.src(), b), GST_FLOW_OK);
  }
  EXPECT_EQ(output.corrupted(), (std::vector<GstClockTime>{20, 30, 40, 50}));
}

TEST(IntraOnlyCodec, ByItsCapsName) {
  gst_init(nullptr, nullptr);
  for (const char* intra : {"image/jpeg", "image/png", "video/x-prores", "video/x-dv, systemstream=(boolean)false",
                            "video/x-ffv, ffvversion=(int)1", "image/x-j2c"}) {
    GstCaps* caps = gst_caps_from_string(intra);
    EXPECT_TRUE(is_intra_only_codec(caps)) << intra;
    gst_caps_unref(caps);
  }
  for (const char* inter : {"video/x-h264, stream-format=(string)avc", "video/x-h265", "video/x-vp8", "video/mpeg",
                            "video/x-divx", "video/x-theora"}) {
    GstCaps* caps = gst_caps_from_string(inter);
    EXPECT_FALSE(is_intra_only_codec(caps)) << inter;
    gst_caps_unref(caps);
  }
  EXPECT_FALSE(is_intra_only_codec(nullptr));
}

// The gate on a real decoder that sends partial pictures (libav with output-corrupt on, as a decoder
// that does not follow recovery points, NVDEC's perhaps, would), fed an intra-refresh stream from a
// moment between its recovery points, as a camera joined late: what leaves the decoder is whole.
class IntraRefreshStream : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    gst_init(nullptr, nullptr);
    dir_ = std::filesystem::temp_directory_path() / ("vapipe-gate-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    clip_ = (dir_ / "intra-refresh.mkv").string();
    const std::string encode = "gst-launch-1.0 -q videotestsrc pattern=ball num-buffers=150 ! video/x-raw,width=320,"
                               "height=240,framerate=30/1,format=I420 ! x264enc speed-preset=ultrafast tune=zerolatency "
                               "intra-refresh=true key-int-max=30 ! h264parse ! matroskamux ! filesink location=" +
                               clip_;
    ASSERT_EQ(std::system(encode.c_str()), 0) << encode;
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }

  struct Decoded {
    std::map<GstClockTime, std::vector<uint8_t>> luma;  // by timestamp
    GstClockTime first = GST_CLOCK_TIME_NONE;
  };
  // Decodes the clip from its `join`th frame on (the ones before never reach the decoder), gated or not.
  Decoded decode(int join, bool output_corrupt, bool gated) {
    const std::string launch = "filesrc location=" + clip_ + " ! matroskademux ! h264parse name=parse ! avdec_h264 "
                               "name=decoder output-corrupt=" + (output_corrupt ? "true" : "false") +
                               " ! video/x-raw,format=I420 ! appsink name=out sync=false";
    GstElement* pipeline = gst_parse_launch(launch.c_str(), nullptr);
    Decoded decoded;
    if (!pipeline) {
      ADD_FAILURE() << launch;
      return decoded;
    }
    GstElement* parse = gst_bin_get_by_name(GST_BIN(pipeline), "parse");
    GstElement* decoder = gst_bin_get_by_name(GST_BIN(pipeline), "decoder");
    GstElement* out = gst_bin_get_by_name(GST_BIN(pipeline), "out");
    GstPad* parsed = gst_element_get_static_pad(parse, "src");
    auto* skip = new int(join);
    gst_pad_add_probe(parsed, GST_PAD_PROBE_TYPE_BUFFER, [](GstPad*, GstPadProbeInfo*, gpointer left) {
      int& n = *static_cast<int*>(left);
      return n > 0 && n-- > 0 ? GST_PAD_PROBE_DROP : GST_PAD_PROBE_OK;
    }, skip, [](gpointer left) { delete static_cast<int*>(left); });
    if (gated) {
      GstPad* sink = gst_element_get_static_pad(decoder, "sink");
      GstPad* src = gst_element_get_static_pad(decoder, "src");
      gate_decoder_input(sink, src, &all_frames_, &counters_, "late");
      gst_object_unref(sink);
      gst_object_unref(src);
    }
    gst_element_set_state(pipeline, GST_STATE_PLAYING);
    for (;;) {
      GstSample* sample = nullptr;
      g_signal_emit_by_name(out, "pull-sample", &sample);
      if (!sample) break;
      GstBuffer* buffer = gst_sample_get_buffer(sample);
      GstMapInfo map;
      if (gst_buffer_map(buffer, &map, GST_MAP_READ)) {
        if (decoded.luma.empty()) decoded.first = GST_BUFFER_PTS(buffer);
        decoded.luma[GST_BUFFER_PTS(buffer)].assign(map.data, map.data + 320 * 240);
        gst_buffer_unmap(buffer, &map);
      }
      gst_sample_unref(sample);
    }
    gst_element_set_state(pipeline, GST_STATE_NULL);
    for (GstObject* o : {GST_OBJECT(parsed), GST_OBJECT(parse), GST_OBJECT(decoder), GST_OBJECT(out),
                         GST_OBJECT(pipeline)}) {
      gst_object_unref(o);
    }
    return decoded;
  }
  static double mean_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
    double sum = 0;
    for (size_t i = 0; i < a.size(); ++i) sum += std::abs(int(a[i]) - int(b[i]));
    return sum / static_cast<double>(a.size());
  }

  static inline std::filesystem::path dir_;
  static inline std::string clip_;
  DecoderInputCounters counters_;
  std::atomic<bool> all_frames_{false};  // keyframes_only off
};

TEST_F(IntraRefreshStream, ADecoderThatSendsPartialPicturesIsHeldBackUntilTheyAreWhole) {
  const Decoded whole = decode(0, /*output_corrupt=*/false, /*gated=*/false);
  ASSERT_EQ(whole.luma.size(), 150u);
  // Ungated, a decoder that sends partial pictures smears: what the gate is for.
  const Decoded smeared = decode(45, true, false);
  ASSERT_FALSE(smeared.luma.empty());
  EXPECT_GT(mean_difference(smeared.luma.begin()->second, whole.luma.at(smeared.first)), 20.0);
  // libav following the recovery point itself: the reference for where the pictures are whole.
  const Decoded recovered = decode(45, false, false);
  ASSERT_GE(recovered.luma.size(), 40u);

  const Decoded gated = decode(45, true, true);
  EXPECT_EQ(counters_.before_key_frame.load(), 15u);  // 45..59: before the recovery point at frame 60
  EXPECT_GT(counters_.before_recovery.load(), 0u);
  ASSERT_EQ(gated.luma.size(), recovered.luma.size());
  EXPECT_EQ(gated.first, recovered.first) << "held back more, or less, than the stream's recovery count says";
  for (const auto& [pts, luma] : gated.luma) {
    EXPECT_LT(mean_difference(luma, whole.luma.at(pts)), 1.0) << "the picture at " << pts << " ns is not whole";
  }
  // A decoder that holds them back itself loses nothing more to the gate, and the frames it gave no
  // picture for until then are not counted as lost (they were: a camera with intra refresh "lost"
  // frames at each connection, and a resume into an MPEG-PS file "damaged data in the file?").
  counters_.before_recovery = 0;
  counters_.undecoded = 0;
  const Decoded both = decode(45, false, true);
  EXPECT_EQ(both.first, recovered.first);
  EXPECT_EQ(both.luma.size(), recovered.luma.size());
  EXPECT_EQ(counters_.undecoded.load(), 0u);
}

}  // namespace
}  // namespace vapipe
