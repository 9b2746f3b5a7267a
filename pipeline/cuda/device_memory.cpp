#include "pipeline/cuda/device_memory.h"

#include <cstdint>
#include <cuda_runtime_api.h>

#include <cstring>
#include <optional>
#include <string>

namespace vapipe {
namespace {

Status cuda_status(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return Status::Ok();
  return Unavailable(what + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

template <typename Handle>
IpcHandleBytes to_bytes(const Handle& h) {
  static_assert(sizeof(Handle) == sizeof(IpcHandleBytes), "CUDA IPC handles are 64 bytes");
  IpcHandleBytes b;
  std::memcpy(b.data(), &h, b.size());
  return b;
}

template <typename Handle>
Handle from_bytes(const IpcHandleBytes& b) {
  Handle h;
  std::memcpy(&h, b.data(), b.size());
  return h;
}

}  // namespace

bool cuda_built_in() { return true; }

DeviceGuard::DeviceGuard(int device) {
  if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
  if (previous_ != device) cudaSetDevice(device);
}

DeviceGuard::~DeviceGuard() {
  int now = -1;
  if (previous_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
}

Result<std::unique_ptr<DeviceBuffer>> DeviceBuffer::allocate(int device, size_t bytes) {
  DeviceGuard guard(device);
  void* ptr = nullptr;
  VAPIPE_RETURN_IF_ERROR(cuda_status(cudaMalloc(&ptr, bytes), "cudaMalloc of " + std::to_string(bytes) +
                                                                   " bytes on GPU " + std::to_string(device)));
  return std::unique_ptr<DeviceBuffer>(new DeviceBuffer(device, static_cast<std::byte*>(ptr), bytes));
}

DeviceBuffer::~DeviceBuffer() {
  DeviceGuard guard(device_);
  cudaFree(data_);
}

Result<IpcHandleBytes> DeviceBuffer::export_handle() const {
  DeviceGuard guard(device_);
  cudaIpcMemHandle_t h;
  VAPIPE_RETURN_IF_ERROR(cuda_status(cudaIpcGetMemHandle(&h, data_), "cudaIpcGetMemHandle"));
  return to_bytes(h);
}

Result<std::unique_ptr<DeviceMapping>> DeviceMapping::open(int device, const IpcHandleBytes& handle) {
  DeviceGuard guard(device);
  void* ptr = nullptr;
  VAPIPE_RETURN_IF_ERROR(cuda_status(
      cudaIpcOpenMemHandle(&ptr, from_bytes<cudaIpcMemHandle_t>(handle), cudaIpcMemLazyEnablePeerAccess),
      "cudaIpcOpenMemHandle on GPU " + std::to_string(device)));
  return std::unique_ptr<DeviceMapping>(new DeviceMapping(device, static_cast<std::byte*>(ptr)));
}

DeviceMapping::~DeviceMapping() {
  DeviceGuard guard(device_);
  cudaIpcCloseMemHandle(data_);
}

Result<std::unique_ptr<IpcEvent>> IpcEvent::create(int device) {
  DeviceGuard guard(device);
  cudaEvent_t ev = nullptr;
  VAPIPE_RETURN_IF_ERROR(cuda_status(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming | cudaEventInterprocess),
                                     "cudaEventCreateWithFlags(interprocess)"));
  return std::unique_ptr<IpcEvent>(new IpcEvent(device, ev, true));
}

Result<std::unique_ptr<IpcEvent>> IpcEvent::open(int device, const IpcHandleBytes& handle) {
  DeviceGuard guard(device);
  cudaEvent_t ev = nullptr;
  VAPIPE_RETURN_IF_ERROR(
      cuda_status(cudaIpcOpenEventHandle(&ev, from_bytes<cudaIpcEventHandle_t>(handle)), "cudaIpcOpenEventHandle"));
  return std::unique_ptr<IpcEvent>(new IpcEvent(device, ev, false));
}

IpcEvent::~IpcEvent() {
  // An opened interprocess event is released with cudaEventDestroy as well.
  DeviceGuard guard(device_);
  cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}

Result<IpcHandleBytes> IpcEvent::export_handle() const {
  cudaIpcEventHandle_t h;
  VAPIPE_RETURN_IF_ERROR(
      cuda_status(cudaIpcGetEventHandle(&h, static_cast<cudaEvent_t>(event_)), "cudaIpcGetEventHandle"));
  return to_bytes(h);
}

// A null stream is the legacy default stream of the current device: make that the event's device.
Status IpcEvent::record(void* stream) {
  std::optional<DeviceGuard> guard;
  if (!stream) guard.emplace(device_);
  return cuda_status(cudaEventRecord(static_cast<cudaEvent_t>(event_), static_cast<cudaStream_t>(stream)),
                     "cudaEventRecord");
}

Status IpcEvent::wait(void* stream) {
  std::optional<DeviceGuard> guard;
  if (!stream) guard.emplace(device_);
  return cuda_status(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event_), 0),
                     "cudaStreamWaitEvent");
}

Status IpcEvent::synchronize() {
  return cuda_status(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)), "cudaEventSynchronize");
}

Status cuda_copy(void* dst, const void* src, size_t bytes, void* stream) {
  if (stream) {
    return cuda_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)),
                       "cudaMemcpyAsync");
  }
  return cuda_status(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy");
}

Status cuda_copy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t rows,
                    void* stream) {
  if (stream) {
    return cuda_status(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, rows, cudaMemcpyDefault,
                                         static_cast<cudaStream_t>(stream)),
                       "cudaMemcpy2DAsync");
  }
  return cuda_status(cudaMemcpy2D(dst, dst_pitch, src, src_pitch, width, rows, cudaMemcpyDefault), "cudaMemcpy2D");
}

Status cuda_stream_synchronize(void* stream) {
  return cuda_status(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
}

Status gpu_memory_info(int device, uint64_t* free_bytes, uint64_t* total_bytes) {
  DeviceGuard guard(device);
  size_t f = 0, t = 0;
  VAPIPE_RETURN_IF_ERROR(cuda_status(cudaMemGetInfo(&f, &t), "cudaMemGetInfo on GPU " + std::to_string(device)));
  *free_bytes = f;
  *total_bytes = t;
  return Status::Ok();
}

Status cuda_context_status(int device) {
  DeviceGuard guard(device);
  cudaGetLastError();  // the last error, if it was not sticky, is gone now; a sticky one comes back below
  // The legacy stream, not the device: synchronizing a device while one of its streams is being captured
  // (infer records a reloaded model's CUDA graphs on another thread) is invalid and breaks the capture.
  // LibTorch's streams are non-blocking, so the legacy stream stays usable; any call returns a sticky error.
  const cudaError_t err = cudaStreamSynchronize(cudaStreamLegacy);
  if (err == cudaSuccess) return Status::Ok();
  cudaGetLastError();
  return Internal("CUDA on GPU " + std::to_string(device) + " no longer works (" + cudaGetErrorName(err) + ": " +
                  cudaGetErrorString(err) + ")");
}

bool is_device_pointer(const void* ptr) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

Result<std::unique_ptr<CudaStream>> CudaStream::create(int device) {
  DeviceGuard guard(device);
  cudaStream_t s = nullptr;
  VAPIPE_RETURN_IF_ERROR(cuda_status(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"));
  return std::unique_ptr<CudaStream>(new CudaStream(device, s));
}

CudaStream::~CudaStream() {
  DeviceGuard guard(device_);
  cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

}  // namespace vapipe
