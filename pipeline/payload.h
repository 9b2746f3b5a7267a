// Payload: the bytes of a frame or tensor, owned through a shared handle. The storage is a shared
// memory slot (frames travel by reference between processes on one host) or plain memory (inline
// transport, tests). Stages read and write payload bytes without knowing which.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

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
  void reset() { storage_.reset(); size_ = 0; }

 private:
  std::shared_ptr<PayloadStorage> storage_;
  size_t size_ = 0;
};

}  // namespace vapipe
