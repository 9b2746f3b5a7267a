// Payload: the bytes of a frame or tensor, owned through a shared handle. The storage is a shared
// memory slot (frames travel by reference between processes on one host), a slot of GPU memory shared
// through CUDA IPC (frames stay on the GPU between processes), or plain memory (inline transport,
// tests). Host stages read and write payload bytes without knowing which host kind; GPU stages check
// device() and order their work with record_ready / wait_ready.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "pipeline/status.h"

namespace vapipe {

// Where a payload lives when it is a shared memory slot: enough for another process to map it.
struct ShmSlotRef {
  std::string pool;         // shm name, e.g. "/vapipe-<job>-frames"
  uint32_t slot = 0;
  uint32_t generation = 0;  // guards against a stale descriptor naming a reused slot
};

class PayloadStorage {
 public:
  virtual ~PayloadStorage() = default;
  virtual std::byte* data() = 0;
  virtual size_t capacity() const = 0;
  // Non-null when the bytes sit in a shared memory slot that another process can adopt.
  virtual const ShmSlotRef* shm_ref() const { return nullptr; }
  // Ownership of the slot moves to the receiving process: do not release it on destruction.
  virtual void hand_off() {}
  // The GPU whose memory holds the bytes; -1: host memory. data() is then a device pointer.
  virtual int device() const { return -1; }
  // GPU payloads: the producer marks its writes (enqueued on `stream`) as the payload's content; the
  // consumer's `stream` waits for them before reading. No-ops for host memory.
  virtual Status record_ready(void* /*stream*/) { return Status::Ok(); }
  virtual Status wait_ready(void* /*stream*/) { return Status::Ok(); }
};

class Payload {
 public:
  Payload() = default;
  Payload(std::shared_ptr<PayloadStorage> storage, size_t size)
      : storage_(std::move(storage)), size_(size) {}

  static Payload heap(size_t size);

  bool empty() const { return storage_ == nullptr; }
  std::byte* data() { return storage_ ? storage_->data() : nullptr; }
  const std::byte* data() const { return storage_ ? storage_->data() : nullptr; }
  size_t size() const { return size_; }
  void set_size(size_t size) { size_ = size; }
  const std::shared_ptr<PayloadStorage>& storage() const { return storage_; }
  int device() const { return storage_ ? storage_->device() : -1; }
  bool on_device() const { return device() >= 0; }
  Status record_ready(void* stream) { return storage_ ? storage_->record_ready(stream) : Status::Ok(); }
  Status wait_ready(void* stream) { return storage_ ? storage_->wait_ready(stream) : Status::Ok(); }
  void reset() { storage_.reset(); size_ = 0; }

 private:
  std::shared_ptr<PayloadStorage> storage_;
  size_t size_ = 0;
};

}  // namespace vapipe
