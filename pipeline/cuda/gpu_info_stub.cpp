// Built when no CUDA toolkit was found: there is no way to reach a GPU from this binary.
#include "pipeline/cuda/gpu_info.h"

namespace vapipe {

GpuRuntime probe_gpus(bool) {
  GpuRuntime rt;
  rt.error = "vapipe was built without the CUDA toolkit (rebuild on a machine with /usr/local/cuda)";
  return rt;
}

}  // namespace vapipe
