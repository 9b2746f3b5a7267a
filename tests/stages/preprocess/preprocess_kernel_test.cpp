// The CUDA preprocessing kernel's own code (stages/preprocess/cuda/preprocess_kernel.h), run on the CPU
// thread by thread (kernel_on_host.h), against the CPU reference: the parity cases the GPU runs
// (preprocess_kernel_parity.h), here on every machine, GPU or not.
#include "tests/stages/preprocess/kernel_on_host.h"
#include "tests/stages/preprocess/preprocess_kernel_parity.h"

#include <gtest/gtest.h>

namespace vapipe {
namespace {

INSTANTIATE_TEST_SUITE_P(OnTheCpu, PreprocessKernelParity,
                         ::testing::Values(KernelUnderTest{"kernel_on_host", make_kernel_on_host}),
                         [](const auto& info) { return info.param.name; });

// The host emulation is only worth its parity if it would fail a wrong kernel: a kernel that read
// the chroma planes swapped gives other colours, far outside the tolerance.
TEST(KernelOnHost, AKernelReadingTheWrongPlaneIsFarFromTheCpu) {
  kernel_parity::Frame f = kernel_parity::random_frame(PixelFormat::kI420, 640, 480);
  PreprocessSpec spec;
  const std::vector<float> cpu = kernel_parity::cpu_reference(spec, f);
  kernel_parity::Frame swapped = f;
  std::swap(swapped.info.offset[1], swapped.info.offset[2]);  // U read as V and V as U
  std::vector<float> out(cpu.size());
  ASSERT_TRUE(KernelOnHost(spec)
                  .run(FrameView{swapped.info, swapped.bytes.data(), swapped.bytes.size()},
                       reinterpret_cast<std::byte*>(out.data()))
                  .ok());
  EXPECT_GT(kernel_parity::worst_difference(cpu, out), 0.5f);
}

TEST(KernelOnHost, GpuMemoryIsRefusedFrameByFrame) {
  kernel_parity::Frame f = kernel_parity::random_frame(PixelFormat::kNV12, 64, 48);
  PreprocessSpec spec;
  std::vector<float> a(spec.output_info().elements()), b(a.size());
  const FrameView host{f.info, f.bytes.data(), f.bytes.size()};
  FrameView device = host;
  device.device = 0;
  const std::vector<Status> statuses = KernelOnHost(spec).run_batch(
      {device, host}, {TensorOut{reinterpret_cast<std::byte*>(a.data()), -1}, TensorOut{reinterpret_cast<std::byte*>(b.data()), -1}});
  ASSERT_EQ(statuses.size(), 2u);
  EXPECT_EQ(statuses[0].code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(statuses[1].ok()) << statuses[1].message();
  EXPECT_LE(kernel_parity::worst_difference(kernel_parity::cpu_reference(spec, f), b), 1e-3f);
}

}  // namespace
}  // namespace vapipe
