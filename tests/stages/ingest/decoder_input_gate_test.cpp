// Which compressed frames reach a decoder: the rule alone (the stream reader tests run it on real
// streams: a camera joined between key frames, key frames only).
#include "stages/ingest/decoder_input_gate.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace vapipe
