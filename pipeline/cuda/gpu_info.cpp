#include "pipeline/cuda/gpu_info.h"

#include <cuda_runtime_api.h>

namespace vapipe {

GpuRuntime probe_gpus(bool with_memory) {
  GpuRuntime rt;
  rt.built_with_cuda = true;
  cudaRuntimeGetVersion(&rt.runtime_version);
  if (cudaDriverGetVersion(&rt.driver_version) != cudaSuccess) rt.driver_version = 0;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    rt.error = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return rt;
  }
  if (count == 0) rt.error = "the driver reports no CUDA devices";
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    GpuDevice d;
    d.index = i;
    d.name = prop.name;
    d.compute_major = prop.major;
    d.compute_minor = prop.minor;
    d.total_bytes = prop.totalGlobalMem;
    char bus[32] = {};
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, i) == cudaSuccess) d.pci_bus_id = bus;
    if (with_memory) {
      size_t free_b = 0, total_b = 0;
      if (cudaSetDevice(i) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
        d.free_bytes = free_b;
        d.total_bytes = total_b;
      }
    }
    rt.devices.push_back(std::move(d));
  }
  return rt;
}

}  // namespace vapipe
