// CUDA preprocessing against the CPU reference (ctest label gpu). Stated tolerance: 1e-3 in
// normalised units (the GPU fuses multiply-adds, the CPU does not); float16 output within half
// precision. Skips cleanly without a GPU.
#include "stages/preprocess/cuda/cuda_preprocessor.h"

#include "pipeline/cuda/device_memory.h"

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
      spec.bgr = w == 640;  // preprocess.channel_order: bgr, for one size of each format
      if (spec.bgr) spec.mean = {0.406f, 0.456f, 0.485f};
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

float worst_difference(const std::vector<float>& a, const std::vector<float>& b) {
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

// Host frames and the host tensors a launch writes them to, one each.
struct HostBatch {
  std::vector<std::vector<float>> tensors;
  std::vector<FrameView> views;
  std::vector<TensorOut> outs;
};
HostBatch host_batch(const std::vector<Frame>& frames, const PreprocessSpec& spec) {
  HostBatch b;
  b.tensors.assign(frames.size(), std::vector<float>(spec.output_info().elements()));
  for (size_t i = 0; i < frames.size(); ++i) {
    b.views.push_back(FrameView{frames[i].info, frames[i].bytes.data(), frames[i].bytes.size()});
    b.outs.push_back(TensorOut{reinterpret_cast<std::byte*>(b.tensors[i].data()), -1});
  }
  return b;
}

// Crops (streams[].roi) among them: the kernel reads the same region the CPU does.
TEST_F(CudaPreprocessor, ABatchOfMixedFramesInOneLaunchMatchesTheCpuFrameByFrame) {
  std::vector<Frame> frames = {random_frame(PixelFormat::kNV12, 1920, 1080), random_frame(PixelFormat::kI420, 640, 480),
                               random_frame(PixelFormat::kRGB, 223, 301), random_frame(PixelFormat::kNV12, 160, 90),
                               random_frame(PixelFormat::kNV12, 1920, 1080), random_frame(PixelFormat::kI420, 640, 480)};
  frames[4].info.crop = {960, 0, 960, 1080};  // streams[].roi: the right half
  frames[5].info.crop = {11, 21, 301, 157};   // odd corner and size
  PreprocessSpec spec;
  auto cuda = make_cuda_preprocessor(spec);
  ASSERT_TRUE(cuda.ok()) << cuda.status().message();
  HostBatch batch = host_batch(frames, spec);
  std::vector<std::vector<float>>& gpu = batch.tensors;
  std::vector<FrameView>& views = batch.views;
  std::vector<TensorOut>& outs = batch.outs;
  // One frame with a broken layout fails alone; the others are still done.
  FrameView broken = views[1];
  broken.size = 10;
  views.insert(views.begin() + 2, broken);
  std::vector<float> unused(spec.output_info().elements());
  outs.insert(outs.begin() + 2, TensorOut{reinterpret_cast<std::byte*>(unused.data()), -1});
  const std::vector<Status> statuses = (*cuda)->run_batch(views, outs);
  ASSERT_EQ(statuses.size(), 7u);
  EXPECT_FALSE(statuses[2].ok());
  for (size_t i : {0, 1, 3, 4, 5, 6}) EXPECT_TRUE(statuses[i].ok()) << i << ": " << statuses[i].message();
  for (size_t i = 0; i < frames.size(); ++i) {
    std::vector<float> cpu(spec.output_info().elements());
    ASSERT_TRUE(make_cpu_preprocessor(spec)->run(FrameView{frames[i].info, frames[i].bytes.data(), frames[i].bytes.size()},
                                                 reinterpret_cast<std::byte*>(cpu.data())).ok());
    EXPECT_LE(worst_difference(cpu, gpu[i]), 1e-3f) << "frame " << i;
  }
}

// `frames` preprocessed by the kernel in one launch, each as the CPU preprocesses it (within 1e-3).
void expect_one_launch_matches_the_cpu(const std::vector<Frame>& frames, const PreprocessSpec& spec = {}) {
  auto cuda = make_cuda_preprocessor(spec);
  ASSERT_TRUE(cuda.ok()) << cuda.status().message();
  HostBatch batch = host_batch(frames, spec);
  const std::vector<Status> statuses = (*cuda)->run_batch(batch.views, batch.outs);
  for (size_t i = 0; i < frames.size(); ++i) {
    ASSERT_TRUE(statuses[i].ok()) << statuses[i].message();
    std::vector<float> cpu(spec.output_info().elements());
    ASSERT_TRUE(make_cpu_preprocessor(spec)->run(batch.views[i], reinterpret_cast<std::byte*>(cpu.data())).ok());
    const FrameInfo& f = frames[i].info;
    EXPECT_LE(worst_difference(cpu, batch.tensors[i]), 1e-3f)
        << pixel_format_name(f.format) << " " << f.width << "x" << f.height << ", " << field_read_name(f.field) << ", "
        << orientation_name(f.orientation) << (f.crop[2] ? ", cropped" : "");
  }
}

// ingest.orientation: frames that say how to turn them (a phone's portrait video; NVDEC frames too),
// every orientation in one launch, whole and with a crop of the upright picture, as the CPU reads them.
TEST_F(CudaPreprocessor, FramesTurnedAsTheySayMatchTheCpuInEveryOrientation) {
  for (PixelFormat format : {PixelFormat::kNV12, PixelFormat::kI420, PixelFormat::kRGB}) {
    for (auto [w, h] : {std::pair<uint32_t, uint32_t>{1920, 1080}, {223, 301}}) {
      std::vector<Frame> frames;
      for (uint8_t o = 0; o <= kMaxOrientation; ++o) {
        for (bool cropped : {false, true}) {
          frames.push_back(random_frame(format, w, h));
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
TEST_F(CudaPreprocessor, OneFieldOfInterlacedFramesMatchesTheCpu) {
  for (PixelFormat format : {PixelFormat::kNV12, PixelFormat::kI420, PixelFormat::kRGB}) {
    std::vector<Frame> frames;
    for (auto [w, h] : {std::pair<uint32_t, uint32_t>{1920, 1080}, {720, 576}, {720, 486}}) {
      for (FieldRead field : {FieldRead::kTopField, FieldRead::kBottomField}) {
        for (Orientation o : {Orientation::kAsStored, Orientation::kRotate270}) {
          for (bool cropped : {false, true}) {
            frames.push_back(random_frame(format, w, h));
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

// preprocess.resize: letterbox: each frame's rectangle (its own shape: wide, tall, square, cropped,
// turned a quarter) and the pad colour around it, in one launch, as the CPU writes them, either order.
TEST_F(CudaPreprocessor, LetterboxedFramesInOneLaunchMatchTheCpu) {
  for (bool bgr : {false, true}) {
    std::vector<Frame> frames = {random_frame(PixelFormat::kNV12, 1920, 1080), random_frame(PixelFormat::kI420, 640, 480),
                                 random_frame(PixelFormat::kRGB, 223, 301), random_frame(PixelFormat::kNV12, 224, 224),
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

TEST_F(CudaPreprocessor, ReadsFramesAndWritesTensorsInGpuMemoryInPlace) {
  PreprocessSpec spec;
  const size_t out_bytes = spec.output_info().bytes();
  std::vector<Frame> frames = {random_frame(PixelFormat::kNV12, 1920, 1080), random_frame(PixelFormat::kNV12, 1280, 720)};
  auto cuda = make_cuda_preprocessor(spec);
  ASSERT_TRUE(cuda.ok()) << cuda.status().message();
  std::vector<std::unique_ptr<DeviceBuffer>> in, out;
  std::vector<FrameView> views;
  std::vector<TensorOut> outs;
  for (const Frame& f : frames) {
    in.push_back(std::move(DeviceBuffer::allocate(0, f.bytes.size())).value());
    out.push_back(std::move(DeviceBuffer::allocate(0, out_bytes)).value());
    ASSERT_TRUE(cuda_copy(in.back()->data(), f.bytes.data(), f.bytes.size(), nullptr).ok());
    views.push_back(FrameView{f.info, in.back()->data(), f.bytes.size(), 0});
    outs.push_back(TensorOut{out.back()->data(), 0});
  }
  for (const Status& s : (*cuda)->run_batch(views, outs)) ASSERT_TRUE(s.ok()) << s.message();
  for (size_t i = 0; i < frames.size(); ++i) {
    std::vector<float> cpu(spec.output_info().elements()), gpu(cpu.size());
    ASSERT_TRUE(cuda_copy(gpu.data(), out[i]->data(), out_bytes, nullptr).ok());
    ASSERT_TRUE(make_cpu_preprocessor(spec)->run(FrameView{frames[i].info, frames[i].bytes.data(), frames[i].bytes.size()},
                                                 reinterpret_cast<std::byte*>(cpu.data())).ok());
    EXPECT_LE(worst_difference(cpu, gpu), 1e-3f) << "frame " << i;
  }
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
