// What the LibTorch this binary links was built with, for `vapipe doctor`. A plain struct, so that
// callers (and their tests) compile without LibTorch's headers.
#pragma once

#include <string>

namespace vapipe {

struct TorchRuntimeInfo {
  std::string version;          // TORCH_VERSION, e.g. "2.11.0"
  bool built_with_cuda = false;  // LibTorch's CUDA library is loaded (a CPU-only build: false)
  bool cuda_available = false;   // torch::cuda::is_available(): a CUDA device is usable now
  int cuda_device_count = 0;
  int cuda_version = 0;          // CUDA runtime LibTorch was built with, e.g. 12080; 0 = none
  bool has_cudnn = false;
  long cudnn_version = 0;        // cuDNN's own encoding, e.g. 91900 for 9.19.0; 0 = none
  std::string error;             // a query that threw (empty when every query answered)
};

// Never throws: a query that fails leaves its field at the default and says why in `error`.
TorchRuntimeInfo torch_runtime_info();

}  // namespace vapipe
