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
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/config.h"
#include "pipeline/http_url.h"
#include "pipeline/picture_requests.h"  // is_clip_file, attachment_content_type
#include "pipeline/status.h"
#include "stages/publish/metrics.h"
#include "stages/publish/queued_sink.h"

namespace httplib {
class ClientImpl;
}

namespace vapipe {

// A request's body and its content type, and a file to attach (attach_pictures, attach_clips: a
// picture's or a clip's path).
struct WebhookRequestBody {
  std::string body, content_type;
  std::string attachment;
};

class WebhookSender : public QueuedSink<WebhookStats> {
 public:
  // Starts its thread; `index` is its place in publish.webhooks, for log lines.
  // `predecessors`: the sinks of the same receiver that a reload removed (QueuedSink::wait_for_predecessors).
  WebhookSender(const WebhookConfig& config, size_t index, SinkPredecessors predecessors = {});
  // Stops at once: what still waits is counted undelivered (finish() first to give it time).
  ~WebhookSender() override;

  // wants(), cooled_down(), begin_finish(), name(): QueuedSink's.
  // Queues a message (`body`: the request body, of `content_type`) as its queue_policy says
  // (QueuedSink::push).
  // Each request carries an Idempotency-Key header (the IETF httpapi draft's, as Stripe's API takes it):
  // "<this sender's random id>-<the message's number>", the same on every try of the message, so a
  // receiver that got a message whose answer was lost (a timeout) can drop the try that follows. An
  // archive job's message of a line of its results file: "<the file's run id>-<webhook index>-<line>"
  // (key_by_file_line), the same when a restart sends it again (the sinks' delivery marks).
  void post(const std::string& topic, WebhookRequestBody body, const std::atomic<bool>* stop = nullptr) {
    SinkMessage m{topic, std::move(body.body), std::move(body.content_type), std::move(body.attachment)};
    const uint64_t line = file_key_prefix_.empty() ? 0 : offered_line();
    m.key = line > 0 ? file_key_prefix_ + std::to_string(line)
                     : key_prefix_ + std::to_string(next_key_.fetch_add(1, std::memory_order_relaxed));
    push(std::move(m), stop);
  }
  // Messages of the results file's lines are keyed `prefix` + their line (publish's thread, first).
  void key_by_file_line(std::string prefix) { file_key_prefix_ = std::move(prefix); }
  bool attaches_pictures() const { return config_.attach_pictures; }
  bool attaches_clips() const { return config_.attach_clips; }
  // A message of the json format.
  void post(const std::string& topic, std::string json_body, const std::atomic<bool>* stop = nullptr) {
    post(topic, WebhookRequestBody{std::move(json_body), "application/json", ""}, stop);
  }
  const std::string& format() const { return config_.format; }
  // A new bearer token (its token_file rewritten while the job runs: a rotated secret): requests from
  // the next one on carry it, on a new connection.
  void set_token(std::string token);
  // Gives what waits until `grace` to be delivered (tries and back-offs as usual), then stops the thread
  // and logs what was not delivered.
  void finish(std::chrono::milliseconds grace);
  WebhookStats stats() const;

  // Tests: a shorter back-off (the first wait after a failure, and the longest).
  void set_retry_delays(std::chrono::milliseconds first, std::chrono::milliseconds longest);

  static constexpr std::chrono::seconds kFirstRetryDelay{1}, kLongestRetryDelay{60};
  static constexpr std::chrono::seconds kLongestRetryAfter{300};  // a receiver's Retry-After, at most
  static constexpr std::chrono::seconds kStillFailingLogPeriod{300};

 private:
  using Item = SinkMessage;
  // What one try came to.
  struct Outcome {
    enum Kind { kDelivered, kRetry, kRefused } kind = kRetry;
    std::string error;  // kRetry, kRefused: why, for the log
    std::optional<std::chrono::seconds> retry_after;
    // It failed on a connection kept from the try before (which the receiver may have closed as the
    // request went): tried again at once on a new one, before it counts as a failure.
    bool on_kept_connection = false;
    bool too_large = false;  // a 413 to a request with the message's picture or clip attached
  };
  // `client` keeps its connection from one try to the next; a failed try resets it. `attach`: with the
  // message's picture or clip, if it has one.
  Outcome try_once(const Item& item, std::unique_ptr<httplib::ClientImpl>& client, bool attach = true);
  void run();
  void note_refused(const Item& item, const std::string& error);

  WebhookConfig config_;
  HttpUrl url_;
  std::string token_;          // Authorization: Bearer (config_.token, or a newer one)
  bool token_changed_ = false;  // the thread's client still sends the one before
  bool in_flight_ = false;  // the thread holds a message (tried, or waiting to try it again)
  bool run_done_ = false;   // run() has returned (finish() waits for it until the deadline)
  httplib::ClientImpl* active_client_ = nullptr;  // its request under way, which finish() may cut short
  static constexpr std::chrono::milliseconds kCutAfterDeadline{500};
  std::chrono::milliseconds first_retry_delay_ = kFirstRetryDelay, longest_retry_delay_ = kLongestRetryDelay;
  // Log lines kept few: refusals after the first are counted and said at most once a minute.
  std::chrono::steady_clock::time_point refusals_logged_at_{};
  uint64_t refusals_unlogged_ = 0;
  std::string key_prefix_;  // random, per sender: keys of two runs (or two webhooks) never meet
  std::atomic<uint64_t> next_key_{0};
  std::string file_key_prefix_;  // key_by_file_line's ("" none: keys of key_prefix_)
  std::thread thread_;  // last: started once the rest is set
};

// The request body of a message: {"topic": ..., "payload": ...}, as a results file's line.
std::string webhook_body(const std::string& topic, const std::string& payload_json);

// A message as one line a person reads (a webhook's format: text, slack, discord, telegram, teams), in
// this machine's local time:
// "gate: truck began at 2026-12-03 14:32:05 (score 0.93)", "gate: truck ended at ... after 13.0 s (381
// frames, mean score 0.91)", "gate: reconnecting (attempt 2): ...", "job 'nightly' ended: 3 streams, ...".
// A segment's times are the camera's own clock when its message has it (an RTSP camera, a file with
// recorded_at), else this machine's.
std::string webhook_text(const std::string& topic, const nlohmann::json& payload);

// The request body of a message in `format` (WebhookConfig::format), below.
WebhookRequestBody webhook_request_body(const std::string& format, const std::string& topic,
                                        const nlohmann::json& payload, const std::string& payload_json);

// attach_pictures, attach_clips: the body of a segment's `picture` (`clip`) message with its JPEG (MP4)
// attached (`attachment`: its path); that message as it is otherwise (not such a message, no file, a
// format that attaches none). The request itself is made when it is sent (webhook_with_file).
WebhookRequestBody webhook_attachment_body(const std::string& format, bool pictures, bool clips,
                                           const nlohmann::json& payload, WebhookRequestBody body);

// A file larger than this is not attached (its message goes with its line alone, and a warning): the
// services limit what they take, and the file is read into memory to be sent. A picture is far
// smaller; a long clip of a 1080p camera is not. attach_max_mb, or the format's receiver's: Telegram's
// bots take photos of 10 MB and videos of 50 MB, Discord's webhooks files of 10 MB (a server without
// boosts), ntfy.sh attachments of 15 MB (format text); 50 MB for format json (n8n, Node-RED, one's own).
size_t attachment_limit_bytes(const WebhookConfig& config, bool clip);

// The request of a message whose picture or clip was read (`bytes`; a clip is a path ending in .mp4):
// format json as multipart/form-data (the body as the part `payload_json`, the file as `file`: n8n,
// Node-RED take that), format text as ntfy takes an attachment (the file as the body, the line in the
// X-Message header, the file's name in X-Filename), format telegram as the Bot API's sendPhoto
// (chat_id, the line as caption, photo) or sendVideo (video), format discord as its webhooks take a
// file (payload_json {"content": the line}, files[0]).
// `headers` gets the ones it needs.
struct WebhookRequest {
  std::string body, content_type;
  std::vector<std::pair<std::string, std::string>> headers;
};
WebhookRequest webhook_with_file(const WebhookConfig& config, const std::string& topic, const std::string& body,
                                 const std::string& path, const std::string& bytes);

}  // namespace vapipe
