// A pool of fixed-size slots, shared between the process that owns it (the producer: it creates,
// acquires and unlinks) and the processes that consume its slots (they map it by name and release
// slots when done). Free slots are counted by a process-shared semaphore, so a full pool blocks the
// producer: this is how back-pressure reaches the decoder.
//
// The slot states always live in POSIX shared memory. The slot bytes live there too (a host pool), or
// in one GPU allocation exported through CUDA IPC (a device pool): then the shared header carries the
// allocation's IPC handle and one interprocess event per slot, which the producer records after
// writing a slot and the consumer's stream waits on before reading it. Only descriptors cross ZeroMQ.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "pipeline/payload.h"
#include "pipeline/status.h"

namespace vapipe {

struct ShmPoolHeader;
class DeviceBuffer;
class DeviceMapping;
class IpcEvent;

class ShmPool : public std::enable_shared_from_this<ShmPool> {
 public:
  // Creates (and on destruction unlinks) the pool `name` ("/vapipe-..."). Replaces a stale pool of
  // the same name left by a crashed run.
  // device >= 0: the slots are GPU memory on that device (CUDA IPC); -1: host shared memory.
  static Result<std::shared_ptr<ShmPool>> create(const std::string& name, uint32_t slot_count,
                                                 size_t slot_bytes, int device = -1);
  // Maps an existing pool created by another process (or, for a device pool created by this process,
  // returns the owner itself: CUDA IPC handles cannot be opened by the process that exported them).
  static Result<std::shared_ptr<ShmPool>> open(const std::string& name);

  ~ShmPool();
  ShmPool(const ShmPool&) = delete;
  ShmPool& operator=(const ShmPool&) = delete;

  // Takes a free slot for `bytes` bytes. Waits while the pool is full, up to `timeout`; returns
  // kTimeout when none freed in time and kCancelled as soon as `*cancel` becomes true.
  Result<Payload> acquire(size_t bytes, std::chrono::milliseconds timeout,
                          const std::atomic<bool>* cancel = nullptr);
  // Takes ownership of a slot that another process handed off in a message.
  Result<Payload> adopt(const ShmSlotRef& ref, size_t size);

  const std::string& name() const { return name_; }
  uint32_t slot_count() const;
  size_t slot_bytes() const;
  uint32_t free_slots() const;
  // The GPU holding the slot bytes; -1 for a host pool.
  int device() const;

  // Internal: returns a slot to the pool (called by the payload storage).
  void release(uint32_t slot, uint32_t generation);
  // Internal (device pools): the slot's interprocess event, opened on first use in a consumer; the
  // slot's device pointer, the pool's GPU memory being opened on first use in a consumer.
  Result<IpcEvent*> slot_event(uint32_t slot);
  Result<std::byte*> device_slot(uint32_t slot);

 private:
  ShmPool(std::string name, void* base, size_t mapped_bytes, bool owner);
  std::byte* slot_data(uint32_t slot) const;
  Status attach_device_memory();  // owner: allocate and export; consumer: open the handle

  std::string name_;
  void* base_ = nullptr;
  size_t mapped_bytes_ = 0;
  bool owner_ = false;
  ShmPoolHeader* header_ = nullptr;
  std::atomic<uint32_t> next_hint_{0};
  // Device pools only.
  std::unique_ptr<DeviceBuffer> device_buffer_;    // owner
  std::unique_ptr<DeviceMapping> device_mapping_;  // consumer
  std::byte* device_base_ = nullptr;
  Status attach_failure_;  // consumer: why the GPU memory could not be opened (kept, not retried)
  std::mutex events_mutex_;
  std::vector<std::unique_ptr<IpcEvent>> events_;  // per slot; created (owner) or opened lazily (consumer)
};

// Which pools a receiver may map when a message names one: a descriptor from another program (or a
// corrupted one) must not have a stage map and adopt slots of a pool that is not its job's.
using PoolFilter = std::function<bool(const std::string& pool_name)>;

// Cache of pools mapped by name, so a consumer maps each pool once.
class ShmPoolRegistry {
 public:
  // accepts: the pools that may be mapped (a name it refuses is kDataLoss, naming it); empty: any
  // pool (tests that build descriptors by hand).
  explicit ShmPoolRegistry(PoolFilter accepts = {}) : accepts_(std::move(accepts)) {}
  Result<std::shared_ptr<ShmPool>> get(const std::string& name);

 private:
  const PoolFilter accepts_;
  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<ShmPool>> pools_;
};

}  // namespace vapipe
