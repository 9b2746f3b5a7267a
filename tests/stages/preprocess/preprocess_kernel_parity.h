// The preprocessing kernel against the CPU reference, for any implementation of the kernel: the CUDA
// preprocessor on a GPU (cuda_preprocessor_test.cpp, ctest label gpu) and the kernel's own code run on
// the CPU (preprocess_kernel_test.cpp, everywhere). Include it in one test file per binary and
// instantiate PreprocessKernelParity with the implementation. Stated tolerance: 1e-3 in normalised
// units (the GPU fuses multiply-adds, the CPU reference does not); float16 output within half precision.
#pragma once

#include <cstdint>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "stages/preprocess/preprocessor.h"

namespace vapipe {

struct KernelUnderTest {
  std::string name;
  // kFailedPrecondition where it cannot run here (no GPU): the tests skip, naming why.
  std::function<Result<std::unique_ptr<Preprocessor>>(const PreprocessSpec&)> make;
};
inline std::ostream& operator<<(std::ostream& os, const KernelUnderTest& k) { return os << k.name; }

namespace kernel_parity {

struct Frame {
  FrameInfo info;
  std::vector<std::byte> bytes;
};

// Tightly packed planes by default; `pitch` > 0: every row of every plane that many bytes long and
// each plane's rows rounded up to a multiple of 16, as a hardware decoder lays out its frames.
inline Frame random_frame(PixelFormat format, uint32_t w, uint32_t h, uint32_t pitch = 0) {
  Frame f;
  f.info.format = format;
  f.info.width = w;
  f.info.height = h;
  f.info.matrix = w >= 1280 ? ColorMatrix::kBT709 : ColorMatrix::kBT601;
  const uint32_t cw = (w + 1) / 2, ch = (h + 1) / 2;
  const uint32_t rows = pitch ? (h + 15) / 16 * 16 : h, chroma_rows = pitch ? (ch + 15) / 16 * 16 : ch;
  if (format == PixelFormat::kRGB) {
    f.info.stride = {pitch ? pitch : w * 3, 0, 0};
  } else if (format == PixelFormat::kI420) {
    const uint32_t ys = pitch ? pitch : w, cs = pitch ? pitch : cw;
    f.info.stride = {ys, cs, cs};
    f.info.offset = {0, ys * rows, ys * rows + cs * chroma_rows};
  } else {
    const uint32_t ys = pitch ? pitch : w;
    f.info.stride = {ys, pitch ? pitch : cw * 2, 0};
    f.info.offset = {0, ys * rows, 0};
  }
  f.bytes.resize(f.info.required_bytes());
  std::mt19937 rng(w * 7 + h + pitch);
  for (auto& b : f.bytes) b = std::byte(rng() & 0xff);
  return f;
}

inline float worst_difference(const std::vector<float>& a, const std::vector<float>& b) {
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

inline std::vector<float> cpu_reference(const PreprocessSpec& spec, const Frame& f) {
  std::vector<float> cpu(spec.output_info().elements());
  EXPECT_TRUE(make_cpu_preprocessor(spec)
                  ->run(FrameView{f.info, f.bytes.data(), f.bytes.size()}, reinterpret_cast<std::byte*>(cpu.data()))
                  .ok());
  return cpu;
}

// Host frames and the host tensors a launch writes them to, one each.
struct HostBatch {
  std::vector<std::vector<float>> tensors;
  std::vector<FrameView> views;
  std::vector<TensorOut> outs;
};
inline HostBatch host_batch(const std::vector<Frame>& frames, const PreprocessSpec& spec) {
  HostBatch b;
  b.tensors.assign(frames.size(), std::vector<float>(spec.output_info().elements()));
  for (size_t i = 0; i < frames.size(); ++i) {
    b.views.push_back(FrameView{frames[i].info, frames[i].bytes.data(), frames[i].bytes.size()});
    b.outs.push_back(TensorOut{reinterpret_cast<std::byte*>(b.tensors[i].data()), -1});
  }
  return b;
}

}  // namespace kernel_parity

class PreprocessKernelParity : public ::testing::TestWithParam<KernelUnderTest> {
 protected:
  void SetUp() override {
    auto probe = GetParam().make(PreprocessSpec{});
    if (!probe.ok() && probe.status().code() == StatusCode::kFailedPrecondition) {
      GTEST_SKIP() << probe.status().message();
    }
  }
  std::unique_ptr<Preprocessor> make(const PreprocessSpec& spec) {
    auto made = GetParam().make(spec);
    EXPECT_TRUE(made.ok()) << made.status().message();
    return made.ok() ? std::move(made).value() : nullptr;
  }
  // `frames` preprocessed in one launch, each as the CPU preprocesses it (within 1e-3).
  void expect_one_launch_matches_the_cpu(const std::vector<kernel_parity::Frame>& frames,
                                         const PreprocessSpec& spec = {}) {
    auto kernel = make(spec);
    ASSERT_TRUE(kernel);
    kernel_parity::HostBatch batch = kernel_parity::host_batch(frames, spec);
    const std::vector<Status> statuses = kernel->run_batch(batch.views, batch.outs);
    for (size_t i = 0; i < frames.size(); ++i) {
      ASSERT_TRUE(statuses[i].ok()) << statuses[i].message();
      const FrameInfo& f = frames[i].info;
      EXPECT_LE(kernel_parity::worst_difference(kernel_parity::cpu_reference(spec, frames[i]), batch.tensors[i]), 1e-3f)
          << pixel_format_name(f.format) << " " << f.width << "x" << f.height << ", " << field_read_name(f.field) << ", "
          << orientation_name(f.orientation) << (f.crop[2] ? ", cropped" : "");
    }
  }
};

TEST_P(PreprocessKernelParity, MatchesTheCpuReferenceForEveryFormat) {
  using kernel_parity::random_frame;
  for (PixelFormat format : {PixelFormat::kI420, PixelFormat::kNV12, PixelFormat::kRGB}) {
    for (auto [w, h] : {std::pair<uint32_t, uint32_t>{1920, 1080}, {640, 480}, {223, 301}, {160, 90}}) {
      kernel_parity::Frame f = random_frame(format, w, h);
      PreprocessSpec spec;
      spec.bgr = w == 640;  // preprocess.channel_order: bgr, for one size of each format
      if (spec.bgr) spec.mean = {0.406f, 0.456f, 0.485f};
      std::vector<float> out(spec.output_info().elements());
      auto kernel = make(spec);
      ASSERT_TRUE(kernel);
      ASSERT_TRUE(kernel->run(FrameView{f.info, f.bytes.data(), f.bytes.size()}, reinterpret_cast<std::byte*>(out.data()))
                      .ok());
      EXPECT_LE(kernel_parity::worst_difference(kernel_parity::cpu_reference(spec, f), out), 1e-3f)
          << pixel_format_name(format) << " " << w << "x" << h;
    }
  }
}

TEST_P(PreprocessKernelParity, Float16OutputMatchesTheCpuFloat32) {
  kernel_parity::Frame f = kernel_parity::random_frame(PixelFormat::kNV12, 1280, 720);
  PreprocessSpec s32, s16;
  s16.dtype = DType::kFloat16;
  const std::vector<float> cpu = kernel_parity::cpu_reference(s32, f);
  std::vector<uint16_t> out(cpu.size());
  auto kernel = make(s16);
  ASSERT_TRUE(kernel);
  ASSERT_TRUE(
      kernel->run(FrameView{f.info, f.bytes.data(), f.bytes.size()}, reinterpret_cast<std::byte*>(out.data())).ok());
  for (size_t i = 0; i < cpu.size(); ++i) ASSERT_NEAR(half_to_float(out[i]), cpu[i], 3e-3f + std::abs(cpu[i]) * 1e-3f) << i;
}

// Crops (streams[].roi) among them: the kernel reads the same region the CPU does.
TEST_P(PreprocessKernelParity, ABatchOfMixedFramesInOneLaunchMatchesTheCpuFrameByFrame) {
  using kernel_parity::random_frame;
  std::vector<kernel_parity::Frame> frames = {
      random_frame(PixelFormat::kNV12, 1920, 1080), random_frame(PixelFormat::kI420, 640, 480),
      random_frame(PixelFormat::kRGB, 223, 301),    random_frame(PixelFormat::kNV12, 160, 90),
      random_frame(PixelFormat::kNV12, 1920, 1080), random_frame(PixelFormat::kI420, 640, 480)};
  frames[4].info.crop = {960, 0, 960, 1080};  // streams[].roi: the right half
  frames[5].info.crop = {11, 21, 301, 157};   // odd corner and size
  PreprocessSpec spec;
  auto kernel = make(spec);
  ASSERT_TRUE(kernel);
  kernel_parity::HostBatch batch = kernel_parity::host_batch(frames, spec);
  // One frame with a broken layout fails alone; the others are still done.
  FrameView broken = batch.views[1];
  broken.size = 10;
  batch.views.insert(batch.views.begin() + 2, broken);
  std::vector<float> unused(spec.output_info().elements());
  batch.outs.insert(batch.outs.begin() + 2, TensorOut{reinterpret_cast<std::byte*>(unused.data()), -1});
  const std::vector<Status> statuses = kernel->run_batch(batch.views, batch.outs);
  ASSERT_EQ(statuses.size(), 7u);
  EXPECT_FALSE(statuses[2].ok());
  for (size_t i : {0, 1, 3, 4, 5, 6}) EXPECT_TRUE(statuses[i].ok()) << i << ": " << statuses[i].message();
  for (size_t i = 0; i < frames.size(); ++i) {
    EXPECT_LE(kernel_parity::worst_difference(kernel_parity::cpu_reference(spec, frames[i]), batch.tensors[i]), 1e-3f)
        << "frame " << i;
  }
}

// ingest.orientation: frames that say how to turn them (a phone's portrait video; NVDEC frames too),
// every orientation in one launch, whole and with a crop of the upright picture, as the CPU reads them.
TEST_P(PreprocessKernelParity, FramesTurnedAsTheySayMatchTheCpuInEveryOrientation) {
  for (PixelFormat format : {PixelFormat::kNV12, PixelFormat::kI420, PixelFormat::kRGB}) {
    for (auto [w, h] : {std::pair<uint32_t, uint32_t>{1920, 1080}, {223, 301}}) {
      std::vector<kernel_parity::Frame> frames;
      for (uint8_t o = 0; o <= kMaxOrientation; ++o) {
        for (bool cropped : {false, true}) {
          frames.push_back(kernel_parity::random_frame(format, w, h));
          frames.back().info.orientation = static_cast<Orientation>(o);
          if (cropped) frames.back().info.crop = {11, 21, 101, 77};  // inside either way up
        }
      }
      expect_one_launch_matches_the_cpu(frames);
    }
  }
}

// ingest.deinterlace: one field of interlaced frames (1080i, 576i, and 486-row NTSC whose height is not
// a multiple of 4), either field, turned or not, whole and cropped, in one launch, as the CPU reads it.
TEST_P(PreprocessKernelParity, OneFieldOfInterlacedFramesMatchesTheCpu) {
  for (PixelFormat format : {PixelFormat::kNV12, PixelFormat::kI420, PixelFormat::kRGB}) {
    std::vector<kernel_parity::Frame> frames;
    for (auto [w, h] : {std::pair<uint32_t, uint32_t>{1920, 1080}, {720, 576}, {720, 486}}) {
      for (FieldRead field : {FieldRead::kTopField, FieldRead::kBottomField}) {
        for (Orientation o : {Orientation::kAsStored, Orientation::kRotate270}) {
          for (bool cropped : {false, true}) {
            frames.push_back(kernel_parity::random_frame(format, w, h));
            frames.back().info.field = field;
            frames.back().info.orientation = o;
            if (cropped) frames.back().info.crop = {11, 21, 101, 77};
          }
        }
      }
    }
    expect_one_launch_matches_the_cpu(frames);
  }
}

// A decoder's frames (NVDEC's in GPU memory): rows longer than the picture and planes that start past
// their rows' end, each format; full-range and limited-range video, both matrices.
TEST_P(PreprocessKernelParity, FramesWithAPitchAndPaddedPlanesMatchTheCpu) {
  std::vector<kernel_parity::Frame> frames;
  for (PixelFormat format : {PixelFormat::kNV12, PixelFormat::kI420, PixelFormat::kRGB}) {
    for (auto [w, h] : {std::pair<uint32_t, uint32_t>{1920, 1080}, {854, 480}, {223, 301}}) {
      for (bool full_range : {false, true}) {
        frames.push_back(kernel_parity::random_frame(format, w, h, format == PixelFormat::kRGB ? w * 3 + 64 : 2048));
        frames.back().info.full_range = full_range;
      }
    }
  }
  frames[3].info.crop = {11, 21, 301, 157};
  expect_one_launch_matches_the_cpu(frames);
}

// preprocess.resize: letterbox: each frame's rectangle (its own shape: wide, tall, square, cropped,
// turned a quarter) and the pad colour around it, in one launch, as the CPU writes them, either order.
TEST_P(PreprocessKernelParity, LetterboxedFramesInOneLaunchMatchTheCpu) {
  using kernel_parity::random_frame;
  for (bool bgr : {false, true}) {
    std::vector<kernel_parity::Frame> frames = {
        random_frame(PixelFormat::kNV12, 1920, 1080), random_frame(PixelFormat::kI420, 640, 480),
        random_frame(PixelFormat::kRGB, 223, 301),    random_frame(PixelFormat::kNV12, 224, 224),
        random_frame(PixelFormat::kNV12, 1920, 1080), random_frame(PixelFormat::kI420, 1280, 720)};
    frames[1].info.crop = {11, 21, 301, 157};
    frames[4].info.orientation = Orientation::kRotate90;  // 1080 wide, 1920 high as shown
    frames[5].info.crop = {960, 0, 320, 720};
    PreprocessSpec spec;
    spec.letterbox = true;
    spec.pad_rgb = {114.f, 20.f, 250.f};
    spec.bgr = bgr;
    expect_one_launch_matches_the_cpu(frames, spec);
  }
}

}  // namespace vapipe
