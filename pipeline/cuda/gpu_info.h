// What CUDA sees on this machine. Queried through the CUDA runtime, linked statically: the driver
// (libcuda) is loaded at run time, so a machine without a GPU or driver reports zero GPUs and an
// explanation instead of failing to start. Without a CUDA toolkit at build time, the stub says so.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vapipe {

struct GpuDevice {
  int index = 0;
  std::string name;
  std::string pci_bus_id;
  int compute_major = 0;
  int compute_minor = 0;
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;  // 0 unless probed with_memory
};

struct GpuRuntime {
  bool built_with_cuda = false;
  int driver_version = 0;   // CUDA version the driver supports, e.g. 13000 for 13.0; 0 = no driver
  int runtime_version = 0;  // CUDA runtime vapipe was built with, e.g. 13000
  std::string error;        // why no GPU is usable (empty when devices were found)
  std::vector<GpuDevice> devices;
};

// with_memory: also query free memory, which creates a CUDA context on every device (~0.1-0.5 s each).
GpuRuntime probe_gpus(bool with_memory);

// How many GPUs stages may be placed on. The test hook VAPIPE_FAKE_GPU_COUNT overrides the probe, so
// that multi-GPU placement can be exercised end to end on a machine without GPUs (with CPU stages).
int visible_gpu_count();

// "13.0" from 13000.
std::string cuda_version_string(int version);

}  // namespace vapipe
