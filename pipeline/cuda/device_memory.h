// GPU memory shared between processes (CUDA IPC), behind a header without CUDA includes so that the
// framework and the stages compile without the toolkit. device_memory.cpp implements it with the CUDA
// runtime; device_memory_stub.cpp (no toolkit) returns kFailedPrecondition everywhere.
//
// Streams appear as `void*` (a cudaStream_t); nullptr is the legacy default stream.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "pipeline/status.h"

namespace vapipe {

// The bytes of a cudaIpcMemHandle_t or cudaIpcEventHandle_t (both 64 bytes).
using IpcHandleBytes = std::array<uint8_t, 64>;

// Whether this build can reach a GPU at all (toolkit at build time).
bool cuda_built_in();

// Device memory allocated by this process and exported for others.
class DeviceBuffer {
 public:
  static Result<std::unique_ptr<DeviceBuffer>> allocate(int device, size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  std::byte* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  int device() const { return device_; }
  // A handle another process opens with DeviceMapping::open.
  Result<IpcHandleBytes> export_handle() const;

 private:
  DeviceBuffer(int device, std::byte* data, size_t bytes) : device_(device), data_(data), bytes_(bytes) {}
  int device_;
  std::byte* data_;
  size_t bytes_;
};

// Another process's DeviceBuffer, mapped into this process (cudaIpcOpenMemHandle on the buffer's own
// device, with lazy peer access, so kernels on another GPU can read it where the hardware allows).
class DeviceMapping {
 public:
  static Result<std::unique_ptr<DeviceMapping>> open(int device, const IpcHandleBytes& handle);
  ~DeviceMapping();
  DeviceMapping(const DeviceMapping&) = delete;
  DeviceMapping& operator=(const DeviceMapping&) = delete;
  std::byte* data() const { return data_; }

 private:
  DeviceMapping(int device, std::byte* data) : device_(device), data_(data) {}
  int device_;
  std::byte* data_;
};

// An interprocess CUDA event: the producer records it after its writes to a slot; the consumer makes
// its stream wait on it before reading. Ordering without a host round trip.
class IpcEvent {
 public:
  static Result<std::unique_ptr<IpcEvent>> create(int device);
  static Result<std::unique_ptr<IpcEvent>> open(int device, const IpcHandleBytes& handle);
  ~IpcEvent();
  IpcEvent(const IpcEvent&) = delete;
  IpcEvent& operator=(const IpcEvent&) = delete;
  Result<IpcHandleBytes> export_handle() const;
  // A null stream means the legacy default stream of the event's device (LibTorch's default stream).
  Status record(void* stream);
  Status wait(void* stream);  // the stream waits; the host does not
  Status synchronize();       // the host waits

 private:
  IpcEvent(int device, void* event, bool owned) : device_(device), event_(event), owned_(owned) {}
  int device_;
  void* event_;
  bool owned_;
};

// Copies `bytes` between any two pointers (host or device; the runtime infers the direction from the
// unified address space), ordered on `stream`. A non-null stream is asynchronous.
Status cuda_copy(void* dst, const void* src, size_t bytes, void* stream);
// A 2-D copy (rows of `width` bytes, with their own pitches).
Status cuda_copy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t rows,
                    void* stream);
Status cuda_stream_synchronize(void* stream);
// Free and total memory of `device`, as the driver sees it (memory cached by LibTorch counts as used).
Status gpu_memory_info(int device, uint64_t* free_bytes, uint64_t* total_bytes);
// Whether `device`'s CUDA context still works. After a sticky error (an illegal address, a GPU that fell
// off the bus) every CUDA call of the process fails until it exits: a stage that meets one must exit,
// so that its lane restarts with a new context, rather than answer every frame with an error. An
// error that is not sticky (out of memory) is cleared and the context counts as working.
Status cuda_context_status(int device);
// Whether `ptr` is device memory (as opposed to host memory).
bool is_device_pointer(const void* ptr);

// A CUDA stream of this process, created on `device`, destroyed with the object.
class CudaStream {
 public:
  static Result<std::unique_ptr<CudaStream>> create(int device);
  ~CudaStream();
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  void* get() const { return stream_; }
  int device() const { return device_; }

 private:
  CudaStream(int device, void* stream) : device_(device), stream_(stream) {}
  int device_;
  void* stream_;
};

// Makes `device` current for the calling thread while in scope, then restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace vapipe
