// Built when no CUDA toolkit was found: every GPU operation is refused with a reason.
#include <cstdint>

#include "pipeline/cuda/device_memory.h"

namespace vapipe {
namespace {
Status no_cuda() {
  return FailedPrecondition("vapipe was built without the CUDA toolkit, so GPU memory is not available");
}
}  // namespace

bool cuda_built_in() { return false; }

DeviceGuard::DeviceGuard(int) {}
DeviceGuard::~DeviceGuard() = default;

Result<std::unique_ptr<DeviceBuffer>> DeviceBuffer::allocate(int, size_t) { return no_cuda(); }
DeviceBuffer::~DeviceBuffer() = default;
Result<IpcHandleBytes> DeviceBuffer::export_handle() const { return no_cuda(); }

Result<std::unique_ptr<DeviceMapping>> DeviceMapping::open(int, const IpcHandleBytes&) { return no_cuda(); }
DeviceMapping::~DeviceMapping() = default;

Result<std::unique_ptr<IpcEvent>> IpcEvent::create(int) { return no_cuda(); }
Result<std::unique_ptr<IpcEvent>> IpcEvent::open(int, const IpcHandleBytes&) { return no_cuda(); }
IpcEvent::~IpcEvent() = default;
Result<IpcHandleBytes> IpcEvent::export_handle() const { return no_cuda(); }
Status IpcEvent::record(void*) { return no_cuda(); }
Status IpcEvent::wait(void*) { return no_cuda(); }
Status IpcEvent::synchronize() { return no_cuda(); }

Status cuda_copy(void*, const void*, size_t, void*) { return no_cuda(); }
Status cuda_copy_2d(void*, size_t, const void*, size_t, size_t, size_t, void*) { return no_cuda(); }
Status cuda_stream_synchronize(void*) { return no_cuda(); }
Status gpu_memory_info(int, uint64_t*, uint64_t*) { return no_cuda(); }
Status cuda_context_status(int) { return Status::Ok(); }  // no CUDA here, so none that failed
bool is_device_pointer(const void*) { return false; }

Result<std::unique_ptr<CudaStream>> CudaStream::create(int) { return no_cuda(); }
CudaStream::~CudaStream() = default;

}  // namespace vapipe
