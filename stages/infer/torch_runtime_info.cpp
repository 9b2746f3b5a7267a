// The second translation unit that includes LibTorch (see torch_classifier.cpp): only what compiles
// against both Debian's LibTorch 1.13 (CPU) and PyTorch 2.x's LibTorch (CUDA).
#include "stages/infer/torch_runtime_info.h"
#include "stages/infer/torch_plugin.h"

#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <exception>

namespace vapipe {
namespace {

// In a CPU-only LibTorch the CUDA hooks are stubs, and some of them throw instead of answering.
template <typename Fn>
void query(const char* what, TorchRuntimeInfo& info, Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    if (!info.error.empty()) info.error += "; ";
    info.error += std::string(what) + ": " + e.what();
  }
}

}  // namespace

TorchRuntimeInfo libtorch::runtime_info() {
  TorchRuntimeInfo info;
  info.version = TORCH_VERSION;
  const at::CUDAHooksInterface& hooks = at::detail::getCUDAHooks();
  query("hasCUDART", info, [&] { info.built_with_cuda = hooks.hasCUDART(); });
  if (info.built_with_cuda) {
    query("versionCUDART", info, [&] { info.cuda_version = static_cast<int>(hooks.versionCUDART()); });
    query("hasCuDNN", info, [&] { info.has_cudnn = hooks.hasCuDNN(); });
    if (info.has_cudnn) query("versionCuDNN", info, [&] { info.cudnn_version = hooks.versionCuDNN(); });
  }
  // Both answer false / 0 without a driver or a device; at::hasCUDA() is the same question asked of
  // ATen, so a disagreement would mean a half-loaded LibTorch.
  query("cuda::is_available", info, [&] { info.cuda_available = torch::cuda::is_available() && at::hasCUDA(); });
  query("cuda::device_count", info, [&] { info.cuda_device_count = static_cast<int>(torch::cuda::device_count()); });
  return info;
}

}  // namespace vapipe
