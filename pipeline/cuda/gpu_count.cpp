#include <cstdlib>
#include <string>

#include "pipeline/cuda/gpu_info.h"

namespace vapipe {

int visible_gpu_count() {
  if (const char* fake = std::getenv("VAPIPE_FAKE_GPU_COUNT"); fake && *fake) {
    return std::atoi(fake);
  }
  return static_cast<int>(probe_gpus(/*with_memory=*/false).devices.size());
}

std::string cuda_version_string(int version) {
  if (version <= 0) return "none";
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

}  // namespace vapipe
