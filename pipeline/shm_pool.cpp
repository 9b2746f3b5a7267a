#include "pipeline/shm_pool.h"

#include <cstdint>
#include <fcntl.h>
#include <semaphore.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <new>

#include "pipeline/cuda/device_memory.h"
#include "pipeline/logging.h"
#include "pipeline/utf8.h"

namespace vapipe {

namespace {
constexpr uint32_t kMagic = 0x76617070;  // "vapp"
constexpr uint32_t kLayoutVersion = 2;
constexpr uint32_t kSlotFree = 0;
constexpr uint32_t kSlotBusy = 1;
constexpr size_t kSlotAlign = 4096;

size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

std::string errno_text() { return std::strerror(errno); }
}  // namespace

struct SlotState {
  std::atomic<uint32_t> state;
  std::atomic<uint32_t> generation;
};
static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared-memory atomics must be lock-free");

struct ShmPoolHeader {
  uint32_t magic;
  uint32_t version;
  uint32_t slot_count;
  int32_t device;      // -1: slot bytes in this shared memory; >= 0: in GPU memory of that device
  uint64_t slot_bytes;
  uint64_t data_offset;     // host pools: where slot 0 starts; device pools: offset of the event handles
  uint32_t owner_pid;
  uint32_t reserved;
  IpcHandleBytes memory;    // device pools: the CUDA IPC handle of the slots' allocation
  sem_t free_slots;
  SlotState slots[1];  // slot_count entries follow (then, for device pools, slot_count event handles)
};

namespace {
size_t states_end(uint32_t slot_count) { return offsetof(ShmPoolHeader, slots) + sizeof(SlotState) * slot_count; }
size_t header_bytes(uint32_t slot_count, bool device) {
  size_t end = states_end(slot_count);
  if (device) end = round_up(end, alignof(IpcHandleBytes)) + sizeof(IpcHandleBytes) * slot_count;
  return round_up(end, kSlotAlign);
}
IpcHandleBytes* event_handles(ShmPoolHeader* h) {
  return reinterpret_cast<IpcHandleBytes*>(reinterpret_cast<std::byte*>(h) + h->data_offset);
}

// Device pools this process owns, by name: a consumer in the same process uses the owner directly.
std::mutex owned_mutex;
std::unordered_map<std::string, std::weak_ptr<ShmPool>>& owned_device_pools() {
  static std::unordered_map<std::string, std::weak_ptr<ShmPool>> pools;
  return pools;
}

class ShmSlotStorage final : public PayloadStorage {
 public:
  ShmSlotStorage(std::shared_ptr<ShmPool> pool, std::byte* data, size_t capacity, uint32_t slot,
                 uint32_t generation)
      : pool_(std::move(pool)), data_(data), capacity_(capacity) {
    ref_.pool = pool_->name();
    ref_.slot = slot;
    ref_.generation = generation;
  }
  ~ShmSlotStorage() override {
    if (!handed_off_) pool_->release(ref_.slot, ref_.generation);
  }
  // Device slots are mapped on first access, so a stage that only forwards descriptors (batch) never
  // opens the GPU memory nor creates a CUDA context.
  std::byte* data() override {
    if (!data_ && pool_->device() >= 0) {
      auto mapped = pool_->device_slot(ref_.slot);
      if (mapped.ok()) data_ = *mapped;
    }
    return data_;
  }
  size_t capacity() const override { return capacity_; }
  const ShmSlotRef* shm_ref() const override { return &ref_; }
  void hand_off() override { handed_off_ = true; }
  int device() const override { return pool_->device(); }
  Status record_ready(void* stream) override {
    if (pool_->device() < 0) return Status::Ok();
    VAPIPE_ASSIGN_OR_RETURN(IpcEvent * event, pool_->slot_event(ref_.slot));
    return event->record(stream);
  }
  Status wait_ready(void* stream) override {
    if (pool_->device() < 0) return Status::Ok();
    VAPIPE_ASSIGN_OR_RETURN(IpcEvent * event, pool_->slot_event(ref_.slot));
    return event->wait(stream);
  }

 private:
  std::shared_ptr<ShmPool> pool_;
  std::byte* data_;
  size_t capacity_;
  ShmSlotRef ref_;
  bool handed_off_ = false;
};
}  // namespace

ShmPool::ShmPool(std::string name, void* base, size_t mapped_bytes, bool owner)
    : name_(std::move(name)),
      base_(base),
      mapped_bytes_(mapped_bytes),
      owner_(owner),
      header_(static_cast<ShmPoolHeader*>(base)) {}

ShmPool::~ShmPool() {
  if (owner_ && header_->device >= 0) {
    std::lock_guard<std::mutex> lock(owned_mutex);
    owned_device_pools().erase(name_);
  }
  // Events and GPU memory go before the shared header that advertises them.
  events_.clear();
  device_mapping_.reset();
  // Slots still held downstream (the drain wait timed out): another process may still have this memory
  // mapped, and freeing it before that process closes its handle is undefined (CUDA's IPC rules). It is
  // left to the context's teardown at this process's exit instead.
  if (device_buffer_ && owner_ && free_slots() < slot_count()) (void)device_buffer_.release();
  device_buffer_.reset();
  if (owner_) sem_destroy(&header_->free_slots);
  munmap(base_, mapped_bytes_);
  if (owner_) shm_unlink(name_.c_str());
}

Result<std::shared_ptr<ShmPool>> ShmPool::create(const std::string& name, uint32_t slot_count,
                                                 size_t slot_bytes, int device) {
  if (slot_count == 0 || slot_bytes == 0) {
    return InvalidArgument("shared memory pool " + name + " needs at least one slot of nonzero size");
  }
  shm_unlink(name.c_str());  // a stale pool from a crashed run
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return Unavailable("shm_open(" + name + "): " + errno_text());
  const size_t stride = round_up(slot_bytes, kSlotAlign);
  const bool on_device = device >= 0;
  const size_t total = header_bytes(slot_count, on_device) + (on_device ? 0 : stride * slot_count);
  if (ftruncate(fd, static_cast<off_t>(total)) != 0) {
    Status s = Unavailable("ftruncate(" + name + ", " + std::to_string(total) + "): " + errno_text());
    close(fd);
    shm_unlink(name.c_str());
    return s;
  }
  // Its pages are reserved now: /dev/shm is a tmpfs, and a write to a page it cannot back (a container's
  // 64 MB default) is a SIGBUS in whichever stage first touches that slot, maybe hours into a job.
  if (const int err = posix_fallocate(fd, 0, static_cast<off_t>(total)); err == ENOSPC) {
    struct statvfs shm {};
    const double free_mib =
        statvfs("/dev/shm", &shm) == 0 ? static_cast<double>(shm.f_bavail) * shm.f_frsize / 1048576.0 : -1;
    char text[160];
    std::snprintf(text, sizeof text, "needs %.0f MiB in /dev/shm, which has %.0f MiB free", total / 1048576.0,
                  free_mib);
    close(fd);
    shm_unlink(name.c_str());
    return Unavailable("shared memory pool " + name + " " + text + ": give /dev/shm more room (docker run " +
                       "--shm-size=1g, or a larger tmpfs), or make the pools smaller (transport.frame_slots, " +
                       "frame_slot_bytes, tensor_slots: docs/config.md)");
  }  // any other error (a filesystem without fallocate): the pages come as they are touched
  void* base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    shm_unlink(name.c_str());
    return Unavailable("mmap(" + name + "): " + errno_text());
  }
  auto* h = static_cast<ShmPoolHeader*>(base);
  h->slot_count = slot_count;
  h->slot_bytes = slot_bytes;
  h->device = on_device ? device : -1;
  h->owner_pid = static_cast<uint32_t>(getpid());
  h->data_offset = on_device ? round_up(states_end(slot_count), alignof(IpcHandleBytes)) : header_bytes(slot_count, false);
  for (uint32_t i = 0; i < slot_count; ++i) {
    new (&h->slots[i].state) std::atomic<uint32_t>(kSlotFree);
    new (&h->slots[i].generation) std::atomic<uint32_t>(0);
  }
  if (sem_init(&h->free_slots, /*pshared=*/1, slot_count) != 0) {
    munmap(base, total);
    shm_unlink(name.c_str());
    return Unavailable("sem_init for " + name + ": " + errno_text());
  }
  auto pool = std::shared_ptr<ShmPool>(new ShmPool(name, base, total, /*owner=*/true));
  if (on_device) {
    // The pool (and its shared name) is unlinked by the destructor if this fails.
    VAPIPE_RETURN_IF_ERROR(pool->attach_device_memory().with_context("device pool " + name));
    std::lock_guard<std::mutex> lock(owned_mutex);
    owned_device_pools()[name] = pool;
  }
  h->version = kLayoutVersion;
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kMagic;
  return pool;
}

Status ShmPool::attach_device_memory() {
  const int device = header_->device;
  const size_t stride = round_up(header_->slot_bytes, kSlotAlign);
  IpcHandleBytes* handles = event_handles(header_);
  events_.resize(header_->slot_count);
  if (owner_) {
    VAPIPE_ASSIGN_OR_RETURN(device_buffer_, DeviceBuffer::allocate(device, stride * header_->slot_count));
    VAPIPE_ASSIGN_OR_RETURN(header_->memory, device_buffer_->export_handle());
    device_base_ = device_buffer_->data();
    for (uint32_t i = 0; i < header_->slot_count; ++i) {
      VAPIPE_ASSIGN_OR_RETURN(events_[i], IpcEvent::create(device));
      VAPIPE_ASSIGN_OR_RETURN(handles[i], events_[i]->export_handle());
    }
    return Status::Ok();
  }
  VAPIPE_ASSIGN_OR_RETURN(device_mapping_, DeviceMapping::open(device, header_->memory));
  device_base_ = device_mapping_->data();
  return Status::Ok();
}

int ShmPool::device() const { return header_->device; }

Result<std::byte*> ShmPool::device_slot(uint32_t slot) {
  {
    std::lock_guard<std::mutex> lock(events_mutex_);
    if (!device_base_) {
      if (!attach_failure_.ok()) return attach_failure_;  // logged once, then every access fails alike
      Status attached = attach_device_memory();
      if (!attached.ok()) {
        attach_failure_ = attached.with_context("device pool " + name_ + " (is CUDA IPC available here? "
                                                "transport.device_pools: false avoids it)");
        VAPIPE_LOG_ERROR("{}", attach_failure_.message());
        return attach_failure_;
      }
    }
  }
  return slot_data(slot);
}

Result<IpcEvent*> ShmPool::slot_event(uint32_t slot) {
  VAPIPE_RETURN_IF_ERROR(device_slot(slot).status());  // the GPU memory and event table come first
  std::lock_guard<std::mutex> lock(events_mutex_);
  if (slot >= events_.size()) return Internal("pool " + name_ + " has no event for slot " + std::to_string(slot));
  if (!events_[slot]) {
    VAPIPE_ASSIGN_OR_RETURN(events_[slot], IpcEvent::open(header_->device, event_handles(header_)[slot]));
  }
  return events_[slot].get();
}

Result<std::shared_ptr<ShmPool>> ShmPool::open(const std::string& name) {
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) return NotFound("shared memory pool " + name + ": " + errno_text());
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(ShmPoolHeader))) {
    close(fd);
    return DataLoss("shared memory pool " + name + " is too small to be a vapipe pool");
  }
  const size_t total = static_cast<size_t>(st.st_size);
  void* base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) return Unavailable("mmap(" + name + "): " + errno_text());
  auto* h = static_cast<ShmPoolHeader*>(base);
  const bool on_device = h->device >= 0;
  const size_t needed = on_device ? h->data_offset + sizeof(IpcHandleBytes) * h->slot_count
                                  : h->data_offset + round_up(h->slot_bytes, kSlotAlign) * h->slot_count;
  if (h->magic != kMagic || h->version != kLayoutVersion || needed > total) {
    munmap(base, total);
    return DataLoss("shared memory pool " + name + " has an unknown layout");
  }
  if (on_device && h->owner_pid == static_cast<uint32_t>(getpid())) {
    munmap(base, total);
    std::lock_guard<std::mutex> lock(owned_mutex);
    auto it = owned_device_pools().find(name);
    if (it != owned_device_pools().end()) {
      if (auto owner = it->second.lock()) return owner;
    }
    return NotFound("device pool " + name + " was created by this process and is gone");
  }
  // A device pool's GPU memory is opened on first access to a slot's bytes (device_slot).
  return std::shared_ptr<ShmPool>(new ShmPool(name, base, total, /*owner=*/false));
}

uint32_t ShmPool::slot_count() const { return header_->slot_count; }
size_t ShmPool::slot_bytes() const { return header_->slot_bytes; }

uint32_t ShmPool::free_slots() const {
  int value = 0;
  sem_getvalue(&header_->free_slots, &value);
  return value < 0 ? 0 : static_cast<uint32_t>(value);
}

std::byte* ShmPool::slot_data(uint32_t slot) const {
  const size_t offset = static_cast<size_t>(slot) * round_up(header_->slot_bytes, kSlotAlign);
  if (header_->device >= 0) return device_base_ + offset;
  return static_cast<std::byte*>(base_) + header_->data_offset + offset;
}

Result<Payload> ShmPool::acquire(size_t bytes, std::chrono::milliseconds timeout,
                                 const std::atomic<bool>* cancel) {
  if (bytes > header_->slot_bytes) {
    return InvalidArgument("payload of " + std::to_string(bytes) + " bytes does not fit a slot of " +
                           name_ + " (" + std::to_string(header_->slot_bytes) +
                           " bytes); raise the slot size in the transport config");
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Wait in short steps so that a cancel request is seen promptly.
  while (true) {
    if (cancel && cancel->load(std::memory_order_relaxed)) return Cancelled("pool " + name_ + ": cancelled");
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    auto remaining = deadline - std::chrono::steady_clock::now();
    auto step = std::min<std::chrono::nanoseconds>(std::chrono::milliseconds(50),
                                                   std::max<std::chrono::nanoseconds>(remaining, {}));
    ts.tv_nsec += static_cast<long>(step.count());
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    if (sem_timedwait(&header_->free_slots, &ts) == 0) break;
    if (errno != ETIMEDOUT && errno != EINTR) return Internal("sem_timedwait on " + name_ + ": " + errno_text());
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status(StatusCode::kTimeout, "no free slot in " + name_ + " within " +
                                              std::to_string(timeout.count()) + " ms");
    }
  }
  // The semaphore guarantees at least one free slot; find it.
  const uint32_t n = header_->slot_count;
  uint32_t start = next_hint_.fetch_add(1, std::memory_order_relaxed);
  for (uint32_t round = 0;; ++round) {
    for (uint32_t k = 0; k < n; ++k) {
      uint32_t i = (start + k) % n;
      uint32_t expected = kSlotFree;
      if (header_->slots[i].state.compare_exchange_strong(expected, kSlotBusy,
                                                          std::memory_order_acq_rel)) {
        uint32_t gen = header_->slots[i].generation.fetch_add(1, std::memory_order_acq_rel) + 1;
        auto storage = std::make_shared<ShmSlotStorage>(shared_from_this(), slot_data(i),
                                                        header_->slot_bytes, i, gen);
        return Payload(std::move(storage), bytes);
      }
    }
    // A releaser posts the semaphore only after marking the slot free, so this is not reached in
    // practice; yield rather than spin hard if it is.
    if (round > 1000) return Internal("pool " + name_ + ": semaphore and slot states disagree");
    sched_yield();
  }
}

Result<Payload> ShmPool::adopt(const ShmSlotRef& ref, size_t size) {
  if (ref.slot >= header_->slot_count) {
    return DataLoss("descriptor names slot " + std::to_string(ref.slot) + " of " + name_ + ", which has " +
                    std::to_string(header_->slot_count));
  }
  if (size > header_->slot_bytes) {
    return DataLoss("descriptor size " + std::to_string(size) + " exceeds the slot size of " + name_);
  }
  const SlotState& s = header_->slots[ref.slot];
  if (s.state.load(std::memory_order_acquire) != kSlotBusy ||
      s.generation.load(std::memory_order_acquire) != ref.generation) {
    return DataLoss("stale descriptor for slot " + std::to_string(ref.slot) + " of " + name_);
  }
  std::byte* data = header_->device >= 0 && !device_base_ ? nullptr : slot_data(ref.slot);  // mapped on access
  auto storage = std::make_shared<ShmSlotStorage>(shared_from_this(), data, header_->slot_bytes, ref.slot,
                                                  ref.generation);
  return Payload(std::move(storage), size);
}

void ShmPool::release(uint32_t slot, uint32_t generation) {
  SlotState& s = header_->slots[slot];
  if (s.generation.load(std::memory_order_acquire) != generation) return;  // already recycled
  uint32_t expected = kSlotBusy;
  if (s.state.compare_exchange_strong(expected, kSlotFree, std::memory_order_acq_rel)) {
    sem_post(&header_->free_slots);
  }
}

Result<std::shared_ptr<ShmPool>> ShmPoolRegistry::get(const std::string& name) {
  if (accepts_ && !accepts_(name)) {
    return DataLoss("the descriptor names shared memory pool '" + escape_invalid_utf8(name) +
                    "', which is not one of this job's pools");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = pools_.find(name);
  if (it != pools_.end()) return it->second;
  VAPIPE_ASSIGN_OR_RETURN(auto pool, ShmPool::open(name));
  pools_.emplace(name, pool);
  return pool;
}

}  // namespace vapipe
