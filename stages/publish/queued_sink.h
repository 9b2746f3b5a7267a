// What publish's own sinks share (publish.webhooks, publish.mqtt): the filter of the messages they
// take, a bounded queue with its named policy, and a stop with a deadline. Each sink's thread takes
// from queue_ under mutex_ and delivers in its own way (stages/publish/webhook.h, mqtt_publisher.h).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/config.h"
#include "pipeline/logging.h"
#include "stages/publish/message_filter.h"

namespace vapipe {

// A sink's name, "publish.webhooks[0] (https://ha.local:8123)": its place in the config's list, which
// a reload may change (an entry before it removed) while its thread logs with it.
class SinkName {
 public:
  void set(std::string name) {
    std::lock_guard<std::mutex> lock(mutex_);
    name_ = std::move(name);
  }
  std::string str() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return name_;
  }

 private:
  mutable std::mutex mutex_;
  std::string name_;
};

// A sink that a reload made for a receiver whose sink it removed or changed (the same URL's origin)
// delivers once each of those has finished delivering what it had: the receiver gets their messages
// in order, and an MQTT broker never sees two clients of one id at once. Each flag is set when its
// sink has stopped.
using SinkPredecessors = std::vector<std::shared_ptr<const std::atomic<bool>>>;

// One message on its way: the topic it goes out on (a webhook's X-Vapipe-Topic, an MQTT topic), its
// body, and the body's content type (webhooks).
struct SinkMessage {
  std::string topic, body, content_type;
  std::string attachment;  // a file sent with it (a segment's picture), read when it is sent; "" none
  // Sent on a connection that broke before its answer came: the server may have taken it (Redis: its
  // stream is looked at before it is sent again).
  bool unanswered = false;
  // Names this message, the same on every try (a webhook's Idempotency-Key); "" none.
  std::string key = "";
  // An archive job's message: its line in the results file (1 the first); 0 for one the file does not
  // hold. QueuedSink::push sets it from offer_line.
  uint64_t file_line = 0;
};

// `Stats` has the counters dropped, undelivered, cooled_down and the text last_error.
template <typename Stats>
class QueuedSink {
 public:
  QueuedSink(const QueuedSink&) = delete;
  QueuedSink& operator=(const QueuedSink&) = delete;

  // Whether a message on `topic` goes to this sink (MessageFilter::wants).
  bool wants(const std::string& topic, const nlohmann::json& payload = nlohmann::json()) const {
    return filter_.wants(topic, payload);
  }
  // MessageFilter::cooled_down, counted "cooled_down". Publish's thread only.
  bool cooled_down(const nlohmann::json& payload) {
    const bool held = filter_.cooled_down(payload);
    if (held) {
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.cooled_down;
    }
    return held;
  }
  // The stop's first half, for several sinks to share one deadline: the thread delivers until then.
  void begin_finish(std::chrono::steady_clock::time_point deadline) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!stopping_) {
        stopping_ = true;
        finish_by_ = deadline;
      }
    }
    wake();
    changed_.notify_all();
  }
  // An earlier deadline for a stop that began (publish closing while a removed sink still delivers).
  void finish_by(std::chrono::steady_clock::time_point deadline) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_ && deadline < finish_by_) finish_by_ = deadline;
    }
    wake();
    changed_.notify_all();
  }
  std::string name() const { return name_.str(); }
  // What names the receiver in the sinks' delivery marks, whatever its place in the config's list
  // ("webhook 3f9c0d21": its kind and a hash of where it delivers; set by publish); its name until set.
  // Publish's thread.
  const std::string& delivery_key() const { return delivery_key_.empty() ? delivery_name_ = name() : delivery_key_; }
  void set_delivery_key(std::string key) { delivery_key_ = std::move(key); }
  QueuePolicy queue_policy() const { return policy_; }
  // An archive job's results file: the message of its line `line` is offered to this sink now, whether
  // the sink wants it or not (publish's thread, before wants()). What is pushed until the next offer
  // is that line's.
  void offer_line(uint64_t line) {
    std::lock_guard<std::mutex> lock(mutex_);
    offered_through_ = line;
  }
  uint64_t offered_line() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return offered_through_;
  }
  // The results file's lines this sink is done with, all of them up to this one: each message of
  // them delivered, refused by the receiver, dropped by the queue's policy, or not wanted. A message
  // still queued or on its way, or left undelivered at a stop, holds it back (what a restart sends
  // again: the sinks' delivery marks). 0: none, or no line offered.
  uint64_t settled_through() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return unsettled_lines_.empty() ? offered_through_ : *unsettled_lines_.begin() - 1;
  }
  // A reload removed it (what its stop says of the messages it could not deliver).
  void removed_by_reload() { removed_by_reload_ = true; }
  // Its new place in the config's list (a reload removed or added an entry before it).
  void renumber(size_t index) {
    std::string name = name_.str();
    const size_t open = name.find('['), close = name.find(']', open);
    if (open == std::string::npos || close == std::string::npos) return;
    name = name.substr(0, open + 1) + std::to_string(index) + name.substr(close);
    name_.set(name);
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.index = index;
    stats_.name = name;
  }

 protected:
  // `metric`: the counter that counts its dropped messages, for the log line.
  QueuedSink(const MessageSinkConfig& config, std::string metric, SinkPredecessors predecessors = {})
      : filter_(config),
        predecessors_(std::move(predecessors)),
        max_queued_(config.max_queued),
        policy_(config.queue_policy),
        metric_(std::move(metric)) {}
  virtual ~QueuedSink() = default;

  // Queues `message`. drop_oldest never waits (past max_queued the oldest is dropped, counted, and said
  // once per outage); block waits for room until `stop` is set (then the message is counted undelivered).
  // After the stop began, the message is counted undelivered.
  void push(SinkMessage message, const std::atomic<bool>* stop) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (message.file_line == 0) message.file_line = offered_through_;
    if (message.file_line > 0) unsettled_lines_.insert(message.file_line);  // (settled when it is dealt with)
    if (stopping_ || stop_now_) {
      ++stats_.undelivered;  // publish is closing
      return;
    }
    if (policy_ == QueuePolicy::kBlock) {
      // Held until the receiver has taken enough (or the job is stopped): the job goes at its pace.
      while (queue_.size() >= max_queued_ && !stopping_ && !stop_now_ && !(stop && stop->load())) {
        changed_.wait_for(lock, std::chrono::milliseconds(100));
      }
    }
    if (queue_.size() >= max_queued_) {
      if (policy_ == QueuePolicy::kBlock) {
        // The job was stopped while it waited for room: not delivered, not dropped ("block" drops nothing).
        ++stats_.undelivered;
        return;
      }
      ++stats_.dropped;
      settle_line_locked(queue_.front().file_line);
      queue_.pop_front();
      if (!drop_logged_) {
        drop_logged_ = true;
        VAPIPE_LOG_WARN("{}: {} messages wait for it (max_queued), so the oldest are dropped from now on and counted "
                        "({}{{outcome=\"dropped\"}}); last error: {}",
                        name_, max_queued_, metric_, stats_.last_error.empty() ? "none" : stats_.last_error);
      }
    }
    queue_.push_back(std::move(message));
    lock.unlock();
    wake();
    changed_.notify_all();
  }
  // The sink's thread, before it delivers anything: waits for its predecessors to stop (or for its own
  // stop). Messages queue meanwhile, as for a receiver that is down.
  void wait_for_predecessors() {
    std::unique_lock<std::mutex> lock(mutex_);
    auto all_stopped = [&] {
      for (const auto& done : predecessors_) {
        if (!done->load()) return false;
      }
      return true;
    };
    while (!all_stopped() && !stop_now_ && !(stopping_ && std::chrono::steady_clock::now() >= finish_by_)) {
      changed_.wait_for(lock, std::chrono::milliseconds(50));
    }
    predecessors_.clear();
  }
  // "publish stopped", or "a reload removed it": why its thread stopped, for finish()'s log line.
  const char* stopped_by() const { return removed_by_reload_ ? "a reload removed it" : "publish stopped"; }
  // Rings the sink's thread where changed_ does not reach it (MQTT's poll loop).
  virtual void wake() {}
  // The message of results-file line `line` is dealt with (delivered, refused, dropped): no restart
  // sends it again. Under mutex_. A message left undelivered at a stop is never settled.
  void settle_line_locked(uint64_t line) {
    if (line == 0) return;
    if (auto it = unsettled_lines_.find(line); it != unsettled_lines_.end()) unsettled_lines_.erase(it);
  }

  MessageFilter filter_;  // publish's thread only
  SinkName name_;         // "publish.webhooks[0] (https://ha.local:8123)"
  SinkPredecessors predecessors_;  // the sink's thread's (wait_for_predecessors)
  std::atomic<bool> removed_by_reload_{false};
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;  // a message, room, a stop (and the sink's own news)
  std::deque<SinkMessage> queue_;
  Stats stats_;
  bool stopping_ = false;  // begin_finish(): deliver until finish_by_, then stop
  bool stop_now_ = false;
  std::chrono::steady_clock::time_point finish_by_{};
  bool drop_logged_ = false;  // a full queue's drops said (again once it is reached again)

 private:
  std::string delivery_key_;
  mutable std::string delivery_name_;         // (delivery_key's, before one is set)
  uint64_t offered_through_ = 0;              // offer_line's last
  std::multiset<uint64_t> unsettled_lines_;   // pushed, not yet settled (settled_through)
  const size_t max_queued_;
  const QueuePolicy policy_;
  const std::string metric_;
};

}  // namespace vapipe

// A SinkName in a log line, as its text.
template <>
struct fmt::formatter<vapipe::SinkName> : fmt::formatter<std::string> {
  template <typename FormatContext>
  auto format(const vapipe::SinkName& name, FormatContext& ctx) const {
    return fmt::formatter<std::string>::format(name.str(), ctx);
  }
};
