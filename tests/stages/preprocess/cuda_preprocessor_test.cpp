// The CUDA preprocessor on a GPU (ctest label gpu; skips cleanly without one): the kernel against the
// CPU reference (preprocess_kernel_parity.h, the same cases the kernel's code passes on the CPU in
// preprocess_kernel_test.cpp), and what only a GPU does: frames and tensors in GPU memory, in place.
#include "stages/preprocess/cuda/cuda_preprocessor.h"

#include "pipeline/cuda/device_memory.h"
#include "tests/stages/preprocess/preprocess_kernel_parity.h"

#include <gtest/gtest.h>

#include <vector>

namespace vapipe {
namespace {

using kernel_parity::Frame;
using kernel_parity::random_frame;
using kernel_parity::worst_difference;

INSTANTIATE_TEST_SUITE_P(OnTheGpu, PreprocessKernelParity,
                         ::testing::Values(KernelUnderTest{"cuda", [](const PreprocessSpec& spec) {
                                                             return make_cuda_preprocessor(spec);
                                                           }}),
                         [](const auto& info) { return info.param.name; });

class CudaPreprocessor : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda_available(&why)) GTEST_SKIP() << why;
  }
};

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
