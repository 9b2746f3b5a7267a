// CUDA preprocessing against the CPU reference (ctest label gpu). Stated tolerance: 1e-3 in
// normalised units (the GPU fuses multiply-adds, the CPU does not); float16 output within half
// precision. Skips cleanly without a GPU.
#include "stages/preprocess/cuda/cuda_preprocessor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace vapipe {
namespace {

struct Frame {
  FrameInfo info;
  std::vector<std::byte> bytes;
};

Frame random_frame(PixelFormat format, uint32_t w, uint32_t h) {
  Frame f;
  f.info.format = format;
  f.info.width = w;
  f.info.height = h;
  f.info.matrix = w >= 1280 ? ColorMatrix::kBT709 : ColorMatrix::kBT601;
  const uint32_t cw = (w + 1) / 2, ch = (h + 1) / 2;
  if (format == PixelFormat::kRGB) {
    f.info.stride = {w * 3, 0, 0};
  } else if (format == PixelFormat::kI420) {
    f.info.stride = {w, cw, cw};
    f.info.offset = {0, w * h, w * h + cw * ch};
  } else {
    f.info.stride = {w, cw * 2, 0};
    f.info.offset = {0, w * h, 0};
  }
  f.bytes.resize(f.info.required_bytes());
  std::mt19937 rng(w * 7 + h);
  for (auto& b : f.bytes) b = std::byte(rng() & 0xff);
  return f;
}

class CudaPreprocessor : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda_available(&why)) GTEST_SKIP() << why;
  }
};

TEST_F(CudaPreprocessor, MatchesTheCpuReferenceForEveryFormat) {
  for (PixelFormat format : {PixelFormat::kI420, PixelFormat::kNV12, PixelFormat::kRGB}) {
    for (auto [w, h] : {std::pair<uint32_t, uint32_t>{1920, 1080}, {640, 480}, {223, 301}, {160, 90}}) {
      Frame f = random_frame(format, w, h);
      PreprocessSpec spec;
      std::vector<float> cpu(spec.output_info().elements()), gpu(cpu.size());
      FrameView view{f.info, f.bytes.data(), f.bytes.size()};
      ASSERT_TRUE(make_cpu_preprocessor(spec)->run(view, reinterpret_cast<std::byte*>(cpu.data())).ok());
      auto cuda = make_cuda_preprocessor(spec);
      ASSERT_TRUE(cuda.ok()) << cuda.status().message();
      ASSERT_TRUE((*cuda)->run(view, reinterpret_cast<std::byte*>(gpu.data())).ok());
      float worst = 0;
      for (size_t i = 0; i < cpu.size(); ++i) worst = std::max(worst, std::abs(cpu[i] - gpu[i]));
      EXPECT_LE(worst, 1e-3f) << pixel_format_name(format) << " " << w << "x" << h;
    }
  }
}

TEST_F(CudaPreprocessor, Float16OutputMatchesTheCpuFloat32) {
  Frame f = random_frame(PixelFormat::kNV12, 1280, 720);
  PreprocessSpec s32, s16;
  s16.dtype = DType::kFloat16;
  std::vector<float> cpu(s32.output_info().elements());
  std::vector<uint16_t> gpu(cpu.size());
  FrameView view{f.info, f.bytes.data(), f.bytes.size()};
  ASSERT_TRUE(make_cpu_preprocessor(s32)->run(view, reinterpret_cast<std::byte*>(cpu.data())).ok());
  auto cuda = make_cuda_preprocessor(s16);
  ASSERT_TRUE(cuda.ok());
  ASSERT_TRUE((*cuda)->run(view, reinterpret_cast<std::byte*>(gpu.data())).ok());
  for (size_t i = 0; i < cpu.size(); ++i) ASSERT_NEAR(half_to_float(gpu[i]), cpu[i], 3e-3f + std::abs(cpu[i]) * 1e-3f) << i;
}

}  // namespace
}  // namespace vapipe

// Without a GPU this test still runs here: the factory must refuse cleanly, naming why.
TEST(CudaPreprocessorWithoutGpu, FactoryRefusesWithAReason) {
  std::string why;
  if (vapipe::cuda_available(&why)) GTEST_SKIP() << "a GPU is present";
  auto p = vapipe::make_cuda_preprocessor(vapipe::PreprocessSpec{});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), vapipe::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(p.status().message().empty());
}
