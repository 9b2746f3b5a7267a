// publish.webhooks: messages POSTed to an HTTP receiver as they are published, so that an alert ("a
// truck at the gate began") reaches Home Assistant, n8n, a chat's incoming webhook or ntfy without a
// ZeroMQ subscriber of one's own (DeepStream's msgbroker and Frigate's MQTT fill this role there).
//
// Each webhook has a thread and a queue of its own: a receiver that is slow or down never holds up the
// bus, the results file or another webhook (unless its queue_policy is block). Messages go one per
// request, in the order published; one that fails for a reason that may pass (no connection, a
// timeout, 5xx, 408, 429) is tried again after a back-off (1 s doubling to 60 s, or the receiver's
// Retry-After up to 5 min), and those behind it wait; one the receiver refuses (another 4xx, a
// redirect) is dropped and counted, and the next goes. At-least-once: a receiver that took a message
// but whose answer was lost gets it again.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "pipeline/config.h"
#include "pipeline/http_url.h"
#include "pipeline/status.h"
#include "stages/publish/message_filter.h"
#include "stages/publish/metrics.h"

namespace httplib {
class ClientImpl;
}

namespace vapipe {

// A request's body and its content type.
struct WebhookRequestBody {
  std::string body, content_type;
};

class WebhookSender {
 public:
  // Starts its thread; `index` is its place in publish.webhooks, for log lines.
  WebhookSender(const WebhookConfig& config, size_t index);
  // Stops at once: what still waits is counted undelivered (finish() first to give it time).
  ~WebhookSender();
  WebhookSender(const WebhookSender&) = delete;
  WebhookSender& operator=(const WebhookSender&) = delete;

  // Whether a message on `topic` goes to this receiver: a topic prefix of its topics, and with labels,
  // a segment's or result's label among them.
  bool wants(const std::string& topic, const nlohmann::json& payload = nlohmann::json()) const {
    return filter_.wants(topic, payload);
  }
  // cooldown_s: whether a segment message it wants is held back (counted "cooled_down"): a `began`
  // within cooldown_s of the last `began` sent of its stream and label, and that segment's picture and
  // end. Called on publish's thread only, in publish order, once per message it wants.
  bool cooled_down(const nlohmann::json& payload);
  // Queues a message (`body`: the request body, of `content_type`). drop_oldest never waits; block
  // waits for room until `stop` is set (then the message is counted dropped).
  void post(const std::string& topic, WebhookRequestBody body, const std::atomic<bool>* stop = nullptr);
  // A message of the json format.
  void post(const std::string& topic, std::string json_body, const std::atomic<bool>* stop = nullptr) {
    post(topic, WebhookRequestBody{std::move(json_body), "application/json"}, stop);
  }
  const std::string& format() const { return config_.format; }
  // A new bearer token (its token_file rewritten while the job runs: a rotated secret): requests from
  // the next one on carry it, on a new connection.
  void set_token(std::string token);
  // Gives what waits until `grace` to be delivered (tries and back-offs as usual), then stops the thread
  // and logs what was not delivered.
  void finish(std::chrono::milliseconds grace);
  // finish()'s first half, for several webhooks to share one deadline: the thread delivers until then.
  void begin_finish(std::chrono::steady_clock::time_point deadline);
  WebhookStats stats() const;
  const std::string& name() const { return name_; }

  // Tests: a shorter back-off (the first wait after a failure, and the longest).
  void set_retry_delays(std::chrono::milliseconds first, std::chrono::milliseconds longest);

  static constexpr std::chrono::seconds kFirstRetryDelay{1}, kLongestRetryDelay{60};
  static constexpr std::chrono::seconds kLongestRetryAfter{300};  // a receiver's Retry-After, at most
  static constexpr std::chrono::seconds kStillFailingLogPeriod{300};

 private:
  struct Item {
    std::string topic;
    WebhookRequestBody body;
  };
  // What one try came to.
  struct Outcome {
    enum Kind { kDelivered, kRetry, kRefused } kind = kRetry;
    std::string error;  // kRetry, kRefused: why, for the log
    std::optional<std::chrono::seconds> retry_after;
    // It failed on a connection kept from the try before (which the receiver may have closed as the
    // request went): tried again at once on a new one, before it counts as a failure.
    bool on_kept_connection = false;
  };
  // `client` keeps its connection from one try to the next; a failed try resets it.
  Outcome try_once(const Item& item, std::unique_ptr<httplib::ClientImpl>& client);
  void run();
  void note_refused(const Item& item, const std::string& error);

  WebhookConfig config_;
  MessageFilter filter_;  // publish's thread only
  HttpUrl url_;
  std::string name_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;  // an item, room, or a stop
  std::deque<Item> queue_;
  std::string token_;          // Authorization: Bearer (config_.token, or a newer one)
  bool token_changed_ = false;  // the thread's client still sends the one before
  bool in_flight_ = false;  // the thread holds a message (tried, or waiting to try it again)
  bool stopping_ = false;   // finish(): deliver until finish_by_, then stop
  bool stop_now_ = false;
  std::chrono::steady_clock::time_point finish_by_{};
  WebhookStats stats_;
  std::chrono::milliseconds first_retry_delay_ = kFirstRetryDelay, longest_retry_delay_ = kLongestRetryDelay;
  // Log lines kept few: refusals after the first are counted and said at most once a minute; a
  // dropped message (full queue) is said once per outage.
  std::chrono::steady_clock::time_point refusals_logged_at_{};
  uint64_t refusals_unlogged_ = 0;
  bool drop_logged_ = false;
  std::thread thread_;  // last: started once the rest is set
};

// The request body of a message: {"topic": ..., "payload": ...}, as a results file's line.
std::string webhook_body(const std::string& topic, const std::string& payload_json);

// A message as one line a person reads (a webhook's format: text, slack), in this machine's local time:
// "gate: truck began at 2026-12-03 14:32:05 (score 0.93)", "gate: truck ended at ... after 13.0 s (381
// frames, mean score 0.91)", "gate: reconnecting (attempt 2): ...", "job 'nightly' ended: 3 streams, ...".
// A segment's times are the camera's own clock when its message has it (an RTSP camera, a file with
// recorded_at), else this machine's.
std::string webhook_text(const std::string& topic, const nlohmann::json& payload);

// The request body of a message in `format` (WebhookConfig::format), below.
WebhookRequestBody webhook_request_body(const std::string& format, const std::string& topic,
                                        const nlohmann::json& payload, const std::string& payload_json);

}  // namespace vapipe
