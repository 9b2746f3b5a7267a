// A bounded queue with a named overflow policy (Holoscan's QueuePolicy habit): archive jobs block the
// producer so back-pressure reaches the decoder; live streams drop the oldest frame to bound latency,
// and every drop is counted.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string_view>

#include "pipeline/status.h"

namespace vapipe {

enum class QueuePolicy { kBlock, kDropOldest };
const char* queue_policy_name(QueuePolicy p);
std::optional<QueuePolicy> parse_queue_policy(std::string_view name);

enum class PushResult { kPushed, kPushedDroppedOldest, kClosed };

template <typename T>
class BoundedQueue {
 public:
  BoundedQueue(size_t capacity, QueuePolicy policy) : capacity_(capacity == 0 ? 1 : capacity), policy_(policy) {}

  // kBlock: waits for room (or close). kDropOldest: never waits; evicts the oldest item if full.
  PushResult push(T item) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (policy_ == QueuePolicy::kBlock) {
      not_full_.wait(lock, [&] { return closed_ || items_.size() < capacity_; });
    }
    if (closed_) return PushResult::kClosed;
    PushResult result = PushResult::kPushed;
    if (items_.size() >= capacity_) {
      items_.pop_front();
      ++dropped_;
      result = PushResult::kPushedDroppedOldest;
    }
    items_.push_back(std::move(item));
    not_empty_.notify_one();
    return result;
  }

  // Waits up to `timeout` for an item. Returns nullopt on timeout, or when closed and drained.
  template <typename Rep, typename Period>
  std::optional<T> pop(std::chrono::duration<Rep, Period> timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!not_empty_.wait_for(lock, timeout, [&] { return closed_ || !items_.empty(); })) return std::nullopt;
    if (items_.empty()) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    not_full_.notify_one();
    return item;
  }

  // Producers stop; consumers drain what is left.
  void close() {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    not_full_.notify_all();
    not_empty_.notify_all();
  }

  // Producers may push again. For a queue whose producer was replaced: close() to release the old
  // one, wait until it has stopped, drain, reopen().
  void reopen() {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = false;
  }

  bool closed_and_empty() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return closed_ && items_.empty();
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return items_.size();
  }
  uint64_t dropped() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return dropped_;
  }
  size_t capacity() const { return capacity_; }
  QueuePolicy policy() const { return policy_; }

 private:
  const size_t capacity_;
  const QueuePolicy policy_;
  mutable std::mutex mutex_;
  std::condition_variable not_empty_;
  std::condition_variable not_full_;
  std::deque<T> items_;
  bool closed_ = false;
  uint64_t dropped_ = 0;
};

}  // namespace vapipe
