#include "stages/preprocess/preprocess_stage.h"

#include <cstdint>
#include <gtest/gtest.h>

#include <cstring>

#include "tests/fakes/stage_harness.h"

namespace vapipe {
namespace {

using testing::CollectingEmitter;

Message rgb_frame(uint64_t seq, uint32_t w, uint32_t h) {
  Message m;
  m.kind = MessageKind::kFrame;
  m.env = testing::envelope(0, seq);
  m.frame.format = PixelFormat::kRGB;
  m.frame.width = w;
  m.frame.height = h;
  m.frame.stride = {w * 3, 0, 0};
  m.payload = Payload::heap(size_t{w} * h * 3);
  return m;
}

TEST(PreprocessStage, FrameBecomesATensorWithTheSameEnvelope) {
  Config config = testing::test_config();
  PreprocessStage stage;
  ASSERT_TRUE(stage.open(StageContext{config}).ok());
  CollectingEmitter out;
  ASSERT_TRUE(stage.process(rgb_frame(7, 64, 48), out).ok());
  ASSERT_EQ(out.messages.size(), 1u);
  const Message& t = out.messages[0];
  EXPECT_EQ(t.kind, MessageKind::kTensor);
  EXPECT_EQ(t.env.seq, 7u);
  EXPECT_EQ(t.tensor, (TensorInfo{DType::kFloat32, 3, 224, 224}));
  EXPECT_EQ(t.payload.size(), size_t{3} * 224 * 224 * 4);
  EXPECT_TRUE(t.error.empty());
}

// A 300x100 RGB frame whose thirds are red, green and blue, from left to right.
Message thirds_frame() {
  Message frame = rgb_frame(0, 300, 100);
  auto* px = reinterpret_cast<uint8_t*>(frame.payload.data());
  std::memset(px, 0, frame.payload.size());
  for (uint32_t y = 0; y < 100; ++y) {
    for (uint32_t x = 0; x < 300; ++x) px[(y * 300 + x) * 3 + x / 100] = 255;
  }
  return frame;
}

// thirds_frame's 224x224 float32 tensor from a preprocess stage opened with `config`; empty when the
// stage did not give one.
std::vector<float> thirds_tensor(const Config& config) {
  PreprocessStage stage;
  CollectingEmitter out;
  if (!stage.open(StageContext{config}).ok() || !stage.process(thirds_frame(), out).ok() || out.messages.size() != 1 ||
      out.messages[0].tensor != TensorInfo{DType::kFloat32, 3, 224, 224}) {
    return {};
  }
  const auto* t = reinterpret_cast<const float*>(out.messages[0].payload.data());
  return std::vector<float>(t, t + size_t{3} * 224 * 224);
}

// preprocess.resize: center_crop keeps the middle square of a 3:1 frame whose thirds are red, green
// and blue: its tensor is green everywhere; stretch (the default) sees the red third at the left.
TEST(PreprocessStage, CenterCropKeepsTheMiddleOfTheFrameInTheTensorsShape) {
  for (const std::string resize : {"stretch", "center_crop"}) {
    Config config = testing::test_config();
    config.preprocess.resize = resize;
    const std::vector<float> tensor = thirds_tensor(config);
    ASSERT_EQ(tensor.size(), size_t{3} * 224 * 224);
    const float* t = tensor.data();
    const size_t plane = 224 * 224;
    const float red_full = (1 - config.preprocess.mean[0]) / config.preprocess.std[0];
    const float green_full = (1 - config.preprocess.mean[1]) / config.preprocess.std[1];
    if (resize == "center_crop") {
      for (size_t i = 0; i < plane; i += 997) {
        EXPECT_NEAR(t[plane + i], green_full, 1e-4) << i;  // green everywhere
        EXPECT_LT(t[i], 0) << i;                            // no red anywhere
      }
    } else {
      EXPECT_NEAR(t[0], red_full, 1e-4);            // the left third is red
      EXPECT_NEAR(t[plane + 112], green_full, 1e-4);  // the middle green
    }
  }
}

// preprocess.resize: letterbox keeps all of the same 3:1 frame, its shape too: a band 75 rows high
// (224 / 3) in the middle, red, green and blue from left to right, and preprocess.pad_color above and
// below it.
TEST(PreprocessStage, LetterboxKeepsTheWholeFrameAndItsShapeWithThePadColourAround) {
  Config config = testing::test_config();
  config.preprocess.resize = "letterbox";
  config.preprocess.pad_color = {114, 114, 114};
  const std::vector<float> tensor = thirds_tensor(config);
  ASSERT_EQ(tensor.size(), size_t{3} * 224 * 224);
  const float* t = tensor.data();
  const size_t plane = 224 * 224;
  auto at = [&](int c, size_t x, size_t y) { return t[c * plane + y * 224 + x]; };
  auto level = [&](int c, float v) { return (v / 255.f - config.preprocess.mean[c]) / config.preprocess.std[c]; };
  for (int c = 0; c < 3; ++c) {
    for (size_t y : {size_t{0}, size_t{73}, size_t{149}, size_t{223}}) {  // the margins, above and below
      for (size_t x : {size_t{0}, size_t{112}, size_t{223}}) EXPECT_NEAR(at(c, x, y), level(c, 114), 1e-4) << c << " " << x << "," << y;
    }
  }
  for (size_t y : {size_t{74}, size_t{111}, size_t{148}}) {  // the band: the frame's three colours
    EXPECT_NEAR(at(0, 10, y), level(0, 255), 1e-4) << y;
    EXPECT_NEAR(at(1, 112, y), level(1, 255), 1e-4) << y;
    EXPECT_NEAR(at(2, 213, y), level(2, 255), 1e-4) << y;
    EXPECT_NEAR(at(1, 10, y), level(1, 0), 1e-4) << y;
  }
}

TEST(PreprocessStage, BadFrameTravelsOnAsAnErrorSoItStillGetsAResult) {
  Config config = testing::test_config();
  PreprocessStage stage;
  ASSERT_TRUE(stage.open(StageContext{config}).ok());
  CollectingEmitter out;
  Message bad = rgb_frame(3, 64, 48);
  bad.payload.set_size(10);
  ASSERT_TRUE(stage.process(std::move(bad), out).ok());
  ASSERT_EQ(out.messages.size(), 1u);
  EXPECT_EQ(out.messages[0].env.seq, 3u);
  EXPECT_TRUE(out.messages[0].payload.empty());
  EXPECT_NE(out.messages[0].error.find("preprocess"), std::string::npos);
  // An upstream error is passed along without work.
  Message upstream = rgb_frame(4, 64, 48);
  upstream.error = "payload unavailable";
  ASSERT_TRUE(stage.process(std::move(upstream), out).ok());
  EXPECT_EQ(out.messages[1].error, "payload unavailable");
}

TEST(PreprocessStage, StreamEventsPassThroughAndCudaIsAClearStartUpError) {
  Config config = testing::test_config();
  PreprocessStage stage;
  ASSERT_TRUE(stage.open(StageContext{config}).ok());
  CollectingEmitter out;
  ASSERT_TRUE(stage.process(testing::end_message(0, 5), out).ok());
  ASSERT_EQ(out.messages.size(), 1u);
  EXPECT_EQ(out.messages[0].kind, MessageKind::kStreamEnd);

  config.preprocess.device = "cuda";
  PreprocessStage cuda;
  Status s = cuda.open(StageContext{config});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("preprocess.device"), std::string::npos);
}

TEST(PreprocessStage, ManyInputsAtOnceKeepTheirOrderAroundStreamEvents) {
  Config config = testing::test_config();
  PreprocessStage stage;
  ASSERT_TRUE(stage.open(StageContext{config}).ok());
  EXPECT_EQ(stage.max_inputs_at_once(), 1u);  // the CPU preprocessor takes frames one by one
  CollectingEmitter out;
  std::vector<Message> in;
  in.push_back(rgb_frame(0, 64, 48));
  in.push_back(rgb_frame(1, 32, 32));
  in.push_back(testing::end_message(0, 2));
  Message bad = rgb_frame(0, 64, 48);
  bad.env = testing::envelope(1, 0);
  bad.payload.set_size(5);
  in.push_back(std::move(bad));
  in.push_back(rgb_frame(2, 16, 16));
  ASSERT_TRUE(stage.process_many(std::move(in), out).ok());
  ASSERT_EQ(out.messages.size(), 5u);
  EXPECT_EQ(out.messages[0].kind, MessageKind::kTensor);
  EXPECT_EQ(out.messages[0].env.seq, 0u);
  EXPECT_EQ(out.messages[1].env.seq, 1u);
  EXPECT_EQ(out.messages[2].kind, MessageKind::kStreamEnd);  // after its stream's frames
  EXPECT_EQ(out.messages[3].env.stream_index, 1u);
  EXPECT_FALSE(out.messages[3].error.empty());                // the broken frame alone fails
  EXPECT_TRUE(out.messages[4].error.empty());
  EXPECT_EQ(out.messages[4].env.seq, 2u);
}

// Preprocessing "on GPU 1" (the CPU one underneath, in host memory) whose batches fail while `fail`.
class FailingGpuPreprocessor final : public Preprocessor {
 public:
  explicit FailingGpuPreprocessor(bool* fail) : fail_(fail), cpu_(make_cpu_preprocessor(PreprocessSpec{})) {}
  Status run(const FrameView& frame, std::byte* out) override {
    return *fail_ ? Internal("cudaErrorLaunchFailure: unspecified launch failure") : cpu_->run(frame, out);
  }
  int device() const override { return 1; }
  const PreprocessSpec& spec() const override { return cpu_->spec(); }

 private:
  bool* fail_;
  std::unique_ptr<Preprocessor> cpu_;
};

// A batch that fails on a GPU whose CUDA context still works gets error results and the stage goes
// on; one that fails on a GPU that no longer works stops the stage (its lane restarts with a new
// context) before anything of that batch, or the stream event behind it, goes out.
TEST(PreprocessStage, ABatchThatFailsOnAGpuThatNoLongerWorksStopsTheStageSoThatItsLaneRestarts) {
  Config config = testing::test_config();
  bool fail = false, gpu_works = true;
  std::vector<int> asked;
  PreprocessStage stage(std::make_unique<FailingGpuPreprocessor>(&fail), [&](int gpu) {
    asked.push_back(gpu);
    return gpu_works ? Status::Ok()
                     : Internal("CUDA on GPU 1 no longer works (cudaErrorIllegalAddress: an illegal memory access was "
                                "encountered)");
  });
  ASSERT_TRUE(stage.open(StageContext{config}).ok());
  CollectingEmitter out;
  ASSERT_TRUE(stage.process(rgb_frame(0, 64, 48), out).ok());
  EXPECT_TRUE(asked.empty());  // nothing failed: nothing to ask
  fail = true;
  ASSERT_TRUE(stage.process(rgb_frame(1, 64, 48), out).ok());
  ASSERT_EQ(out.messages.size(), 2u);
  EXPECT_NE(out.messages[1].error.find("unspecified launch failure"), std::string::npos) << out.messages[1].error;
  EXPECT_TRUE(out.messages[1].payload.empty());
  EXPECT_EQ(asked, std::vector<int>{1});
  gpu_works = false;
  std::vector<Message> in;
  in.push_back(rgb_frame(2, 64, 48));
  in.push_back(testing::end_message(0, 3));
  Status s = stage.process_many(std::move(in), out);
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s.message();
  EXPECT_NE(s.message().find("CUDA on GPU 1 no longer works"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("preprocess exits so that its lane restarts"), std::string::npos) << s.message();
  EXPECT_EQ(out.messages.size(), 2u);  // no tensor for frame 2, and no end of the stream after it
}

}  // namespace
}  // namespace vapipe
