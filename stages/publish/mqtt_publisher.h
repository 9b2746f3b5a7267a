// publish.mqtt: messages published to an MQTT broker as they are published on the bus, on
// topic_prefix + their bus topic ("vapipe/nightly/segments/gate"), so that Home Assistant, Node-RED,
// Frigate-style automations, an IoT platform or a historian take vapipe's alerts with the subscriber
// they already have (DeepStream's msgbroker and Frigate publish to MQTT the same way).
//
// Each broker has a thread and a queue of its own: a broker that is slow or down never holds up the
// bus, the results file, a webhook or another broker (unless its queue_policy is block). The thread
// owns its libmosquitto client, which no other thread touches: it connects (a TCP connection of its own
// first, so that a host that does not answer costs timeout_s, not the kernel's two minutes), hands the
// broker up to kWindow messages at a time, in order, and counts each as delivered when the broker
// acknowledges it (qos 1, 2; qos 0: when written). A connection that fails or ends is made again after
// a back-off (1 s doubling to 60 s); qos 1 and 2 messages the broker had not acknowledged are sent
// again on the new connection (at least once), those behind them wait in the queue.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

#include "pipeline/config.h"
#include "pipeline/http_url.h"
#include "pipeline/status.h"
#include "stages/publish/metrics.h"
#include "stages/publish/queued_sink.h"

struct mosquitto;
struct mqtt5__property;
typedef struct mqtt5__property mosquitto_property;  // as mosquitto.h has it

namespace vapipe {

// A stream's Home Assistant device id: "vapipe_<job>_<stream>" in home_assistant_id's letters, then an
// 8-digit hash of the job's name and the stream's id as given ("vapipe_nightly_gate_north_90d01e0a"), so
// that streams whose ids differ only in case or in '-', '.' and '_' ("a.b", "a_b", "A-b"), and jobs
// on one broker whose names and ids run together (job "a_b" stream "c", job "a" stream "b_c"), are
// devices of their own, not one whose sensors they share.
std::string home_assistant_device_id(const std::string& job_name, const std::string& stream_id);

class MqttPublisher : public QueuedSink<MqttStats> {
 public:
  // Starts its thread, which connects at once; `index` is its place in publish.mqtt, for log lines;
  // `job_name` makes the default client id.
  // `predecessors`: the sinks of the same receiver that a reload removed (QueuedSink::wait_for_predecessors).
  MqttPublisher(const MqttConfig& config, size_t index, const std::string& job_name, SinkPredecessors predecessors = {});
  // Stops at once: what still waits is counted undelivered (finish() first to give it time).
  ~MqttPublisher() override;

  // wants(), cooled_down(), begin_finish(), name(): QueuedSink's.
  // Queues `payload` for the MQTT topic topic_prefix + `bus_topic`, as its queue_policy says
  // (QueuedSink::push).
  void publish(const std::string& bus_topic, std::string payload, const std::atomic<bool>* stop = nullptr) {
    push(SinkMessage{mqtt_topic(bus_topic), std::move(payload), "", ""}, stop);
  }
  const std::string& format() const { return config_.format; }
  // Gives what waits until `grace` to be delivered, then says "offline" on the status topic,
  // disconnects, stops the thread and logs what was not delivered.
  void finish(std::chrono::milliseconds grace);
  MqttStats stats() const;
  // Follows what a broker keeps as state, whatever its topics and cooldown_s hold back; publish's
  // thread, every message published.
  // - home_assistant: each stream's labels are binary sensors, ON from `began` to `ended` (topic_prefix
  //   + "state/<stream>/<label id>", retained), announced through Home Assistant's MQTT discovery once
  //   the stream is seen (its first message). Each change is published in order while connected (a
  //   short segment's ON then OFF both reach Home Assistant's automations).
  // - pictures: each `picture` message's JPEG, as bytes, retained, on topic_prefix +
  //   "picture/<stream>/<label id>" (with home_assistant, a camera entity per sensor shows it): only the
  //   latest per stream and label counts, so a burst, or an outage, publishes that one.
  // Across an outage only the state in force matters: on each connection every announcement, state
  // and picture in force is published again (a broker that restarted has lost its retained messages).
  // A stream removed from a live job's config (its `eos` says "removed from the config") has its
  // announcements, states and pictures cleared (empty retained messages): Home Assistant deletes them.
  void follow(const nlohmann::json& payload);
  // Pictures deleted by publish.segments_pictures_keep_days: a picture in force whose file is gone is
  // cleared from the broker too (a retention rule for pictures of people holds there as well).
  void forget_deleted_pictures();
  // A new password (its password_file rewritten while the job runs): the next connection uses it.
  void set_password(std::string password);
  // The MQTT topic a bus topic is published on.
  std::string mqtt_topic(const std::string& bus_topic) const { return config_.topic_prefix + bus_topic; }
  // Until the broker has accepted a connection (Ok) or a try has failed (why), at most `timeout`:
  // `vapipe validate --open`.
  Status wait_connected(std::chrono::milliseconds timeout) const;

  // Tests: a shorter back-off (the first wait after a failure, and the longest).
  void set_retry_delays(std::chrono::milliseconds first, std::chrono::milliseconds longest);

  // Messages handed to the broker and not yet acknowledged, at most: enough to keep a broker across a
  // WAN busy, few enough that a lost connection sends little twice.
  static constexpr int kWindow = 64;
  static constexpr std::chrono::seconds kFirstRetryDelay{1}, kLongestRetryDelay{60};
  static constexpr std::chrono::seconds kStillFailingLogPeriod{300};

 private:
  enum class Connection { kNone, kConnecting, kConnected };

  void run();
  // On the thread: a try to connect, or a connection, that failed or ended (`why`, for the log).
  void connection_failed(const std::string& why);
  // On the thread, connected: hands the broker what waits, up to kWindow unacknowledged.
  void hand_over();
  // On the thread, connected: publishes the announcements, states and pictures (follow()) that are
  // new or changed, or (`everything`: a new connection) all of them.
  void publish_states(bool everything);
  // Under mutex_: follow() has taken something that publish_states(false) has not published yet.
  bool states_changed() const;
  // On the thread: the pictures part of publish_states.
  void publish_pictures(bool everything);
  std::string picture_topic(const std::string& stream, const std::string& label_id) const {
    return config_.topic_prefix + "picture/" + stream + "/" + label_id;
  }
  // On the thread: publishes one of vapipe's own messages (status, announcement, state, picture:
  // retained, qos 1), not counted among the job's.
  void publish_own(const std::string& topic, const std::string& payload);
  // libmosquitto's callbacks, on the thread (inside its loop calls).
  // (MQTT 5's: its properties, among them the broker's maximum packet size; null for 3.1.1.)
  static void on_connect(struct mosquitto* client, void* self, int rc, int flags, const mosquitto_property* props);
  static void on_disconnect(struct mosquitto* client, void* self, int rc);
  static void on_publish(struct mosquitto* client, void* self, int mid);
  void wake() override;

  MqttConfig config_;
  HttpUrl url_;
  std::string client_id_, job_name_;
  struct mosquitto* client_ = nullptr;  // the thread's
  int wake_fd_ = -1;                    // an eventfd: a message, or a stop
  // The thread's own state.
  Connection connection_ = Connection::kNone;
  std::chrono::steady_clock::time_point next_try_{}, connect_deadline_{};
  std::chrono::steady_clock::time_point failing_since_{};
  std::chrono::steady_clock::time_point failure_logged_at_{};
  bool failing_ = false;
  std::chrono::milliseconds retry_delay_{};
  std::set<int> own_mids_;  // vapipe's own messages not yet acknowledged: not counted as the job's
  bool resend_states_ = false;  // a new connection: every announcement, state and picture again
  // MQTT 5 first; 3.1.1 from the broker's refusal of 5 on (an old broker), for the publisher's life.
  int protocol_ = 5;
  // The largest packet the broker takes (MQTT 5's Maximum Packet Size, from its CONNACK); 0: no limit
  // said. A larger one would make it drop the connection: a picture over it is not published.
  uint32_t broker_max_packet_ = 0;
  // home_assistant, under mutex_: the streams seen and those not yet announced; each (stream, label
  // id) sensor's state, and its changes not yet published, in order (at most kMaxStateChanges: a new
  // connection publishes the states in force instead).
  std::set<std::string> ha_streams_, ha_unannounced_;
  std::set<std::string> ha_retired_;  // removed from the config: their sensors to be cleared
  std::map<std::pair<std::string, std::string>, bool> ha_on_;
  std::deque<std::pair<std::pair<std::string, std::string>, bool>> ha_changes_;
  static constexpr size_t kMaxStateChanges = 10000;
  // pictures, under mutex_: each (stream, label id)'s latest picture file, those not yet published, and
  // those to clear from the broker (their stream removed, their file deleted).
  using Sensor = std::pair<std::string, std::string>;
  std::map<Sensor, std::string> pictures_;
  std::set<Sensor> pictures_changed_, pictures_cleared_;
  bool check_picture_files_ = false;  // forget_deleted_pictures()
  std::set<std::string> oversize_said_;  // picture files over pictures_max_kb or the broker's limit, warned of (the broker's thread)
  // Under mutex_ (changed_ also says a connection made or failed):
  std::string new_password_;  // set_password(): for the next connection
  bool password_changed_ = false;
  int in_flight_ = 0;  // handed to the broker, not yet acknowledged
  std::deque<uint64_t> in_flight_lines_;  // their SinkMessage::file_line, in the order sent (under mutex_)
  uint64_t tries_ = 0;  // connections tried (wait_connected)
  std::chrono::milliseconds first_retry_delay_ = kFirstRetryDelay, longest_retry_delay_ = kLongestRetryDelay;
  std::thread thread_;  // last: started once the rest is set
};

}  // namespace vapipe
