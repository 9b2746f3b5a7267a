#include "stages/publish/mqtt_publisher.h"

#include <cstdint>
#include <mosquitto.h>
#include <mqtt_protocol.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "pipeline/stable_hash.h"
#include "pipeline/atomic_file.h"
#include "pipeline/envelope.h"
#include "pipeline/json_fields.h"
#include "pipeline/logging.h"
#include "pipeline/message.h"
#include "pipeline/tcp_reachability.h"

namespace vapipe {

std::string home_assistant_device_id(const std::string& job_name, const std::string& stream_id) {
  const uint32_t h = fnv1a32(job_name + '\n' + stream_id);  // stable across runs and builds, as a device id must be
  char hash[10];
  std::snprintf(hash, sizeof hash, "_%08x", h);
  return "vapipe_" + home_assistant_id(job_name) + "_" + home_assistant_id(stream_id) + hash;
}

namespace {

using Clock = std::chrono::steady_clock;

double unix_now_s() { return static_cast<double>(wall_clock_ns()) / 1e9; }

// "vapipe-nightly-gpu01-4711": unique among this host's jobs, and says whose it is in the broker's log.
// A second broker of the job gets "-1" after it: two clients with one id push each other off a broker.
std::string default_client_id(const std::string& job_name, size_t index) {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  std::string id = "vapipe-" + job_name + "-" + host + "-" + std::to_string(getpid()) +
                   (index > 0 ? "-" + std::to_string(index) : "");
  return id.size() > 128 ? id.substr(0, 128) : id;
}

// A libmosquitto result code in an operator's words.
std::string describe(int rc) {
  if (rc == MOSQ_ERR_ERRNO) return std::strerror(errno);
  if (rc == MOSQ_ERR_TLS) return "the TLS handshake failed (is it an mqtts broker? is its certificate trusted?)";
  if (rc == MOSQ_ERR_KEEPALIVE) return "the broker stopped answering (keepalive)";
  if (rc == MOSQ_ERR_CONN_LOST) return "the broker or the network closed it";
  return mosquitto_strerror(rc);
}

// The broker's answer to CONNECT in its words: "not authorised", "bad user name or password".
std::string connack_text(int rc) {
  std::string text = mosquitto_connack_string(rc);
  const std::string refused = "Connection Refused: ";
  if (text.rfind(refused, 0) == 0) text.erase(0, refused.size());
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text;
}

// The same in MQTT 5's reason codes: those 3.1.1 has too in 3.1.1's words (the ones the docs and logs
// have always said), the others in MQTT 5's ("quota exceeded", "banned").
std::string reason_text(int rc) {
  switch (rc) {
    case MQTT_RC_CLIENTID_NOT_VALID: return connack_text(CONNACK_REFUSED_IDENTIFIER_REJECTED);
    case MQTT_RC_SERVER_UNAVAILABLE: return connack_text(CONNACK_REFUSED_SERVER_UNAVAILABLE);
    case MQTT_RC_BAD_USERNAME_OR_PASSWORD: return connack_text(CONNACK_REFUSED_BAD_USERNAME_PASSWORD);
    case MQTT_RC_NOT_AUTHORIZED: return connack_text(CONNACK_REFUSED_NOT_AUTHORIZED);
    default: break;
  }
  std::string text = mosquitto_reason_string(rc);
  if (!text.empty()) text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  return text;
}

std::string ms_text(std::chrono::milliseconds ms) {
  return ms.count() % 1000 == 0 ? std::to_string(ms.count() / 1000) + " s" : std::to_string(ms.count()) + " ms";
}

}  // namespace

MqttPublisher::MqttPublisher(const MqttConfig& config, size_t index, const std::string& job_name, SinkPredecessors predecessors)
    : QueuedSink(config, "vapipe_mqtt_messages_total", std::move(predecessors)), config_(config) {
  // The config was checked when it loaded: the URL parses.
  url_ = parse_mqtt_url(config_.url).value();
  name_.set("publish.mqtt[" + std::to_string(index) + "] (" + url_.origin() + ")");
  client_id_ = config_.client_id.empty() ? default_client_id(job_name, index) : config_.client_id;
  job_name_ = job_name;
  stats_.name = name_.str();
  stats_.index = index;
  stats_.broker = url_.origin();
  stats_.disconnected_since_unix_s = unix_now_s();
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  thread_ = std::thread([this] { run(); });
}

MqttPublisher::~MqttPublisher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_now_ = true;
  }
  wake();
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void MqttPublisher::wake() {
  if (wake_fd_ < 0) return;
  const uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof one) < 0) {
  }  // (full: already woken)
}

void MqttPublisher::set_retry_delays(std::chrono::milliseconds first, std::chrono::milliseconds longest) {
  std::lock_guard<std::mutex> lock(mutex_);
  first_retry_delay_ = first;
  longest_retry_delay_ = longest;
}

void MqttPublisher::finish(std::chrono::milliseconds grace) {
  begin_finish(Clock::now() + grace);  // (a deadline given before stays)
  if (!thread_.joinable()) return;  // finished before
  thread_.join();
  const MqttStats s = stats();
  if (s.undelivered > 0) {
    VAPIPE_LOG_ERROR("{}: {} message(s) not delivered when {} ({}; its last error: {})", name_,
                     s.undelivered, stopped_by(), s.connected ? "no time left" : "it could not be reached",
                     s.last_error.empty() ? "none" : s.last_error);
  }
  VAPIPE_LOG_INFO("{}: {} message(s) delivered, {} refused, {} dropped (queue full), {} undelivered{}{}", name_,
                  s.delivered, s.refused, s.dropped, s.undelivered,
                  s.lost ? ", " + std::to_string(s.lost) + " lost with a connection (qos 0)" : std::string(),
                  s.cooled_down ? ", " + std::to_string(s.cooled_down) + " held back (cooldown_s)" : std::string());
}

MqttStats MqttPublisher::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  MqttStats s = stats_;
  s.queued = queue_.size() + static_cast<uint64_t>(in_flight_);
  return s;
}

Status MqttPublisher::wait_connected(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  const bool settled = changed_.wait_for(lock, timeout, [&] { return stats_.connected || tries_ > 0; });
  if (stats_.connected) return Status::Ok();
  if (!settled) return Unavailable("no connection within " + ms_text(timeout));
  return Unavailable(stats_.last_error);
}

void MqttPublisher::on_connect(struct mosquitto* client, void* self_pointer, int rc, int /*flags*/,
                               const mosquitto_property* props) {
  auto* self = static_cast<MqttPublisher*>(self_pointer);
  if (self->connection_ != Connection::kConnecting) return;  // a late answer to a try given up
  if (self->protocol_ == 5 && rc == MQTT_RC_UNSUPPORTED_PROTOCOL_VERSION) {
    // A broker of MQTT 3.1.1 only (Mosquitto before 1.6, some appliances): 3.1.1 from now on, without
    // the broker's packet size limit, tried again at once and quietly (not a failure to say).
    self->protocol_ = 4;
    mosquitto_int_option(client, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V311);
    VAPIPE_LOG_INFO("{}: the broker does not take MQTT 5; MQTT 3.1.1 from now on", self->name_);
    self->connection_ = Connection::kNone;
    std::lock_guard<std::mutex> lock(self->mutex_);
    self->next_try_ = Clock::now();
    return;
  }
  if (rc != 0) {
    // The broker's own words: "not authorised", "bad user name or password", "identifier rejected".
    self->connection_failed("the broker refused the connection: " +
                            (self->protocol_ == 5 ? reason_text(rc) : connack_text(rc)));
    return;
  }
  uint32_t most = 0;
  if (props && mosquitto_property_read_int32(props, MQTT_PROP_MAXIMUM_PACKET_SIZE, &most, false)) {
    if (most != self->broker_max_packet_) {
      VAPIPE_LOG_INFO("{}: the broker takes messages of up to {:.0f} KB (its maximum packet size){}", self->name_,
                      static_cast<double>(most) / 1000,
                      self->config_.pictures ? ": a picture larger than that is not published" : "");
    }
    self->broker_max_packet_ = most;
  } else {
    self->broker_max_packet_ = 0;
  }
  self->connection_ = Connection::kConnected;
  // Queued inside the callback; written by the loop's next write.
  if (!self->config_.status_topic.empty()) self->publish_own(self->config_.status_topic, "online");
  self->resend_states_ = self->config_.home_assistant || self->config_.pictures;
  std::unique_lock<std::mutex> lock(self->mutex_);
  self->retry_delay_ = self->first_retry_delay_;
  ++self->stats_.connections;
  self->stats_.protocol = self->protocol_;
  self->stats_.broker_max_packet = self->broker_max_packet_;
  // With states to publish again (Home Assistant's, pictures), it is said to be up once the loop has
  // (run(): after libmosquitto's own sends of what the broker before had not acknowledged, which must
  // go first): a change that comes after that goes out by itself, rather than folded into the resend
  // of the states in force (seen once in a CI run: a test's first OFF lost so).
  self->stats_.connected = !self->resend_states_;
  self->stats_.disconnected_since_unix_s = 0;
  const size_t waiting = self->queue_.size() + static_cast<size_t>(self->in_flight_);
  if (self->failing_) {
    VAPIPE_LOG_INFO("{}: connected again after {} ({} message(s) wait, {} dropped meanwhile)", self->name_,
                    human_duration(std::chrono::duration<double>(Clock::now() - self->failing_since_).count()),
                    waiting, self->stats_.dropped);
  } else if (self->stats_.connections == 1) {
    VAPIPE_LOG_INFO("{}: connected as client '{}'; messages go to {}... at qos {}", self->name_, self->client_id_,
                    self->config_.topic_prefix, self->config_.qos);
  }
  self->failing_ = false;
  self->drop_logged_ = false;
  lock.unlock();
  self->changed_.notify_all();
}

void MqttPublisher::on_disconnect(struct mosquitto*, void* self_pointer, int rc) {
  auto* self = static_cast<MqttPublisher*>(self_pointer);
  if (self->connection_ == Connection::kNone) return;  // said already (a refusal, a give-up, our own stop)
  self->connection_failed(rc == 0 ? "the broker closed the connection" : describe(rc));
}

void MqttPublisher::on_publish(struct mosquitto*, void* self_pointer, int mid) {
  auto* self = static_cast<MqttPublisher*>(self_pointer);
  if (self->own_mids_.erase(mid) > 0) return;  // status, announcements, states: not the job's messages
  {
    std::lock_guard<std::mutex> lock(self->mutex_);
    if (self->in_flight_ > 0) --self->in_flight_;
    // (A broker acknowledges a connection's messages in the order they were sent: MQTT 3.1.1, 4.6.)
    if (!self->in_flight_lines_.empty()) {
      self->settle_line_locked(self->in_flight_lines_.front());
      self->in_flight_lines_.pop_front();
    }
    ++self->stats_.delivered;
    self->stats_.last_delivered_unix_s = unix_now_s();
  }
  self->changed_.notify_all();
}

void MqttPublisher::connection_failed(const std::string& why) {
  const bool was_connected = connection_ == Connection::kConnected;
  connection_ = Connection::kNone;
  const auto now = Clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  const auto delay = retry_delay_;
  next_try_ = now + delay;
  retry_delay_ = std::min(retry_delay_ * 2, longest_retry_delay_);
  ++tries_;
  stats_.last_error = was_connected ? "lost its connection: " + why : why;
  stats_.connected = false;
  if (stats_.disconnected_since_unix_s == 0) stats_.disconnected_since_unix_s = unix_now_s();
  if (config_.qos == 0 && in_flight_ > 0) {
    // qos 0 messages not yet written go with the connection (libmosquitto keeps only qos 1 and 2).
    stats_.lost += static_cast<uint64_t>(in_flight_);
    in_flight_ = 0;
    for (const uint64_t line : in_flight_lines_) settle_line_locked(line);  // (qos 0: at most once, as asked)
    in_flight_lines_.clear();
  }
  const size_t waiting = queue_.size() + static_cast<size_t>(in_flight_);
  if (!failing_) {
    failing_ = true;
    failing_since_ = now;
    failure_logged_at_ = now;
    VAPIPE_LOG_WARN("{}: {}; messages wait ({} now, at most {}) and a connection is tried again in {}, then less "
                    "often (up to every {})",
                    name_, stats_.last_error, waiting, config_.max_queued, ms_text(delay), ms_text(longest_retry_delay_));
  } else if (now - failure_logged_at_ >= kStillFailingLogPeriod) {
    failure_logged_at_ = now;
    VAPIPE_LOG_WARN("{}: still cannot connect, for {}: {}; {} message(s) wait, {} dropped (queue full)", name_,
                    human_duration(std::chrono::duration<double>(now - failing_since_).count()), stats_.last_error,
                    waiting, stats_.dropped);
  }
  lock.unlock();
  changed_.notify_all();
}

void MqttPublisher::hand_over() {
  for (;;) {
    SinkMessage item;
    bool states_first = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (queue_.empty() || in_flight_ >= kWindow) return;
      // What follow() took before this message was queued (a sensor's state, a picture's JPEG) goes
      // first: an automation told by a segment's `picture` message finds the picture on the broker.
      states_first = states_changed();
      if (!states_first) {
        item = std::move(queue_.front());
        queue_.pop_front();
        ++in_flight_;  // before the call: qos 0's acknowledgement (written) may come inside it
        in_flight_lines_.push_back(item.file_line);
      }
    }
    if (states_first) {
      publish_states(false);
      continue;
    }
    changed_.notify_all();  // room for a blocked publish()
    const int rc = mosquitto_publish(client_, nullptr, item.topic.c_str(), static_cast<int>(item.body.size()),
                                     item.body.data(), static_cast<int>(config_.qos), config_.retain);
    if (rc == MOSQ_ERR_SUCCESS) continue;
    if (rc == MOSQ_ERR_NO_CONN && config_.qos > 0) {
      // libmosquitto keeps a qos 1 or 2 message it could not send, and sends it on the next connection.
      if (connection_ != Connection::kNone) connection_failed(describe(rc));
      return;
    }
    std::unique_lock<std::mutex> lock(mutex_);
    --in_flight_;
    if (!in_flight_lines_.empty()) in_flight_lines_.pop_back();  // (this message's: it is handled here)
    if (rc == MOSQ_ERR_PAYLOAD_SIZE || rc == MOSQ_ERR_OVERSIZE_PACKET || rc == MOSQ_ERR_MALFORMED_UTF8) {
      ++stats_.refused;  // never deliverable: dropped, the next goes
      settle_line_locked(item.file_line);
      VAPIPE_LOG_ERROR("{}: cannot publish the message on {} ({} bytes): {}; it is dropped", name_, item.topic,
                       item.body.size(), mosquitto_strerror(rc));
      continue;
    }
    queue_.push_front(std::move(item));  // the connection is gone: it waits for the next
    lock.unlock();
    if (connection_ != Connection::kNone) connection_failed(describe(rc));
    return;
  }
}

void MqttPublisher::set_password(std::string password) {
  std::lock_guard<std::mutex> lock(mutex_);
  new_password_ = std::move(password);
  password_changed_ = true;
}

void MqttPublisher::publish_own(const std::string& topic, const std::string& payload) {
  int mid = 0;
  if (mosquitto_publish(client_, &mid, topic.c_str(), static_cast<int>(payload.size()), payload.data(), 1, true) ==
      MOSQ_ERR_SUCCESS) {
    own_mids_.insert(mid);
  }
}

void MqttPublisher::follow(const nlohmann::json& payload) {
  if (!config_.home_assistant && !config_.pictures) return;
  const std::string stream = text_field(payload, "stream_id");
  if (stream.empty()) return;  // the job summary
  bool news = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::string schema = text_field(payload, "schema"), event = text_field(payload, "event");
    if (schema == "vapipe.event" && event == "eos" && text_field(payload, "message") == kRemovedFromConfig) {
      // Its sensors and pictures go from Home Assistant and the broker too (a camera taken out of the
      // job), once.
      if (ha_streams_.erase(stream) > 0) {
        ha_unannounced_.erase(stream);
        for (auto it = ha_on_.begin(); it != ha_on_.end();) it = it->first.first == stream ? ha_on_.erase(it) : std::next(it);
        ha_changes_.erase(std::remove_if(ha_changes_.begin(), ha_changes_.end(),
                                         [&](const auto& change) { return change.first.first == stream; }),
                          ha_changes_.end());
        ha_retired_.insert(stream);
        news = true;
      }
      for (auto it = pictures_.begin(); it != pictures_.end();) {
        if (it->first.first != stream) {
          ++it;
          continue;
        }
        pictures_changed_.erase(it->first);
        pictures_cleared_.insert(it->first);
        it = pictures_.erase(it);
        news = true;
      }
    } else if (config_.home_assistant && ha_streams_.insert(stream).second) {
      ha_unannounced_.insert(stream);
      for (const std::string& label : config_.labels) ha_on_[{stream, home_assistant_id(label)}] = false;
      news = true;
    }
    if (schema == "vapipe.segment") {
      const std::string label = text_field(payload, "label");
      const bool followed = config_.labels.empty() ||
                            std::find(config_.labels.begin(), config_.labels.end(), label) != config_.labels.end();
      const Sensor sensor{stream, home_assistant_id(label)};
      if (config_.home_assistant && followed && (event == "began" || event == "ended")) {
        const bool on = event == "began";
        if (ha_on_[sensor] != on) {
          ha_on_[sensor] = on;
          ha_changes_.emplace_back(sensor, on);
          if (ha_changes_.size() > kMaxStateChanges) ha_changes_.pop_front();  // (a long outage)
          news = true;
        }
      }
      const std::string picture = text_field(payload, "picture");  // "" when it could not be taken
      if (config_.pictures && followed && event == "picture" && !picture.empty()) {
        pictures_[sensor] = picture;
        pictures_changed_.insert(sensor);
        pictures_cleared_.erase(sensor);
        news = true;
      }
    }
  }
  if (news) wake();
}

bool MqttPublisher::states_changed() const {
  return !ha_unannounced_.empty() || !ha_changes_.empty() || !ha_retired_.empty() || !pictures_changed_.empty() ||
         !pictures_cleared_.empty();
}

void MqttPublisher::forget_deleted_pictures() {
  if (!config_.pictures) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    check_picture_files_ = true;
  }
  wake();
}

void MqttPublisher::publish_states(bool everything) {
  if (config_.pictures) publish_pictures(everything);
  if (!config_.home_assistant) return;
  std::vector<std::string> announce;
  std::vector<std::pair<Sensor, bool>> states;
  std::vector<std::string> retire;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // A new stream's sensors start OFF; its changes since it was seen follow, in order.
    const std::set<std::string>& fresh = everything ? ha_streams_ : ha_unannounced_;
    announce.assign(fresh.begin(), fresh.end());
    if (everything) {
      for (const auto& [sensor, on] : ha_on_) states.emplace_back(sensor, on);
    } else {
      for (const std::string& stream : ha_unannounced_) {
        for (const std::string& label : config_.labels) states.emplace_back(Sensor{stream, home_assistant_id(label)}, false);
      }
      states.insert(states.end(), ha_changes_.begin(), ha_changes_.end());
    }
    ha_unannounced_.clear();
    ha_changes_.clear();
    retire.assign(ha_retired_.begin(), ha_retired_.end());
    ha_retired_.clear();
  }
  auto discovery_topic = [&](const char* component, const std::string& stream, const std::string& id) {
    return config_.discovery_prefix + "/" + component + "/" + home_assistant_device_id(job_name_, stream) + "/" + id +
           "/config";
  };
  for (const std::string& stream : retire) {
    for (const std::string& label : config_.labels) {
      const std::string id = home_assistant_id(label);
      publish_own(discovery_topic("binary_sensor", stream, id), "");  // an empty retained message: the entity goes
      publish_own(config_.topic_prefix + "state/" + stream + "/" + id, "");
      if (config_.pictures) publish_own(discovery_topic("camera", stream, id), "");
    }
  }
  for (const std::string& stream : announce) {
    const std::string device = home_assistant_device_id(job_name_, stream);
    for (const std::string& label : config_.labels) {
      const std::string id = home_assistant_id(label);
      nlohmann::json sensor{
          {"name", label},
          {"unique_id", device + "_" + id},
          {"object_id", "vapipe_" + home_assistant_id(stream) + "_" + id},  // the entity id it suggests
          {"state_topic", config_.topic_prefix + "state/" + stream + "/" + id},
          {"payload_on", "ON"},
          {"payload_off", "OFF"},
          {"device", {{"identifiers", {device}}, {"name", stream}, {"manufacturer", "vapipe"},
                      {"model", "job " + job_name_}}}};
      if (!config_.status_topic.empty()) {
        sensor["availability_topic"] = config_.status_topic;
        sensor["payload_available"] = "online";
        sensor["payload_not_available"] = "offline";
      }
      publish_own(discovery_topic("binary_sensor", stream, id), sensor.dump());
      if (config_.pictures) {
        // An MQTT camera: the JPEG of the label's latest segment, the message's raw bytes.
        nlohmann::json camera = sensor;
        camera.erase("state_topic");
        camera.erase("payload_on");
        camera.erase("payload_off");
        camera["name"] = label + " picture";
        camera["unique_id"] = device + "_" + id + "_picture";
        camera["object_id"] = "vapipe_" + home_assistant_id(stream) + "_" + id + "_picture";
        camera["topic"] = picture_topic(stream, id);
        publish_own(discovery_topic("camera", stream, id), camera.dump());
      }
    }
  }
  for (const auto& [sensor, on] : states) {
    publish_own(config_.topic_prefix + "state/" + sensor.first + "/" + sensor.second, on ? "ON" : "OFF");
  }
}

void MqttPublisher::publish_pictures(bool everything) {
  std::vector<std::pair<Sensor, std::string>> publish;
  std::vector<Sensor> clear;
  // forget_deleted_pictures(): the files are looked at without the lock, which publish's thread takes
  // for every message (a pictures folder on a slow share holds up only this broker's thread).
  std::map<Sensor, std::string> deleted;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (check_picture_files_) deleted = pictures_;
    check_picture_files_ = false;
  }
  for (auto it = deleted.begin(); it != deleted.end();) {
    std::error_code ec;
    it = std::filesystem::exists(it->second, ec) || ec ? deleted.erase(it) : std::next(it);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [sensor, path] : deleted) {
      auto it = pictures_.find(sensor);
      if (it == pictures_.end() || it->second != path) continue;  // a newer picture came meanwhile
      pictures_changed_.erase(sensor);
      pictures_cleared_.insert(sensor);
      pictures_.erase(it);
    }
    for (const auto& [sensor, path] : pictures_) {
      if (everything || pictures_changed_.count(sensor) > 0) publish.emplace_back(sensor, path);
    }
    pictures_changed_.clear();
    clear.assign(pictures_cleared_.begin(), pictures_cleared_.end());
    pictures_cleared_.clear();
  }
  for (const Sensor& sensor : clear) publish_own(picture_topic(sensor.first, sensor.second), "");
  for (const auto& [sensor, path] : publish) {
    // Read here, on the broker's thread, when it can take it: the queue holds paths, not pictures.
    auto read = read_file_bytes(path);
    std::string jpeg = read.ok() ? std::move(read).value() : std::string();
    const std::string topic = picture_topic(sensor.first, sensor.second);
    // A PUBLISH's header besides its payload: fixed header and length (up to 5), topic (2 + its bytes),
    // packet id (2), properties' length (1).
    const size_t packet = jpeg.size() + topic.size() + 10;
    const bool over_ours = jpeg.size() > static_cast<size_t>(config_.pictures_max_kb) * 1000;
    if (over_ours || (broker_max_packet_ > 0 && packet > broker_max_packet_)) {
      // Larger than the broker may take: it would drop the connection, and this picture would go out
      // again on the next. Its topic is cleared rather than left with an older picture.
      if (oversize_said_.insert(path).second) {
        const std::string limit =
            over_ours ? "more than pictures_max_kb (" + std::to_string(config_.pictures_max_kb) +
                            "; raise it if the broker takes messages that large)"
                      : "more than the broker takes (its maximum packet size, " + std::to_string(broker_max_packet_) +
                            " bytes)";
        VAPIPE_LOG_WARN("{}: stream '{}': {} is {:.0f} KB, {}: not published, its topic {} is cleared", name_,
                        sensor.first, path, static_cast<double>(jpeg.size()) / 1000, limit, topic);
      }
      publish_own(topic, "");
      continue;
    }
    if (jpeg.empty()) {
      // Deleted since (the retention of pictures, a person): the broker keeps none of it either.
      VAPIPE_LOG_WARN("{}: stream '{}': {}; its topic {} is cleared", name_, sensor.first,
                      read.ok() ? path + " is empty" : read.status().message(), picture_topic(sensor.first, sensor.second));
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = pictures_.find(sensor);
      if (it != pictures_.end() && it->second == path) pictures_.erase(it);
    }
    publish_own(picture_topic(sensor.first, sensor.second), jpeg);
  }
}

void MqttPublisher::run() {
  static std::once_flag library;
  std::call_once(library, [] { mosquitto_lib_init(); });
  {
    std::lock_guard<std::mutex> lock(mutex_);
    retry_delay_ = first_retry_delay_;
  }
  wait_for_predecessors();  // (a client of the same id, removed by a reload, disconnects first)
  client_ = mosquitto_new(client_id_.c_str(), /*clean_session=*/true, this);
  if (!client_) {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.last_error = "cannot make an MQTT client: " + std::string(std::strerror(errno));
    VAPIPE_LOG_ERROR("{}: {}; its messages are not delivered", name_, stats_.last_error);
  } else {
    // MQTT 5: its CONNACK says the largest packet the broker takes (a larger one would make it drop the
    // connection), and its refusals say why in the broker's words. 3.1.1 if the broker refuses 5.
    mosquitto_int_option(client_, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
    mosquitto_int_option(client_, MOSQ_OPT_SEND_MAXIMUM, kWindow);
    mosquitto_int_option(client_, MOSQ_OPT_TCP_NODELAY, 1);  // an alert is one small packet: not held back
    if (!config_.username.empty()) {
      mosquitto_username_pw_set(client_, config_.username.c_str(),
                                config_.password.empty() ? nullptr : config_.password.c_str());
    }
    if (!config_.status_topic.empty()) {
      mosquitto_will_set(client_, config_.status_topic.c_str(), 7, "offline", 1, true);
    }
    if (url_.tls) {
      // This machine's authorities unless ca_file names others (TLS is on with either).
      if (config_.ca_file.empty()) mosquitto_int_option(client_, MOSQ_OPT_TLS_USE_OS_CERTS, 1);
      if (!config_.ca_file.empty() || !config_.cert_file.empty()) {
        // libmosquitto 2.0 wants a CA file or folder here even with the system's: Debian's folder.
        const int rc = mosquitto_tls_set(client_, config_.ca_file.empty() ? nullptr : config_.ca_file.c_str(),
                                         config_.ca_file.empty() ? "/etc/ssl/certs" : nullptr,
                                         config_.cert_file.empty() ? nullptr : config_.cert_file.c_str(),
                                         config_.key_file.empty() ? nullptr : config_.key_file.c_str(), nullptr);
        if (rc != MOSQ_ERR_SUCCESS) VAPIPE_LOG_ERROR("{}: its TLS settings are refused: {}", name_, describe(rc));
      }
      if (!config_.tls_verify) {
        mosquitto_tls_opts_set(client_, 0 /* SSL_VERIFY_NONE */, nullptr, nullptr);
        mosquitto_tls_insecure_set(client_, true);
      }
    }
    mosquitto_connect_v5_callback_set(client_, &MqttPublisher::on_connect);
    mosquitto_disconnect_callback_set(client_, &MqttPublisher::on_disconnect);
    mosquitto_publish_callback_set(client_, &MqttPublisher::on_publish);
  }
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(config_.timeout_s * 1000));
  for (;;) {
    auto now = Clock::now();
    Clock::time_point finish_by;
    bool stopping = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_now_) break;
      stopping = stopping_;
      finish_by = finish_by_;
      if (stopping && ((queue_.empty() && in_flight_ == 0) || now >= finish_by)) break;
      if (!client_ && stopping) break;
    }
    if (client_ && connection_ == Connection::kNone && now >= next_try_) {
      // A TCP connection of our own first: libmosquitto's connect blocks as long as the kernel lets it
      // (two minutes to a host that does not answer), and a stop would wait for it.
      std::string why = tcp_connect_failure(url_.origin(), timeout);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (password_changed_) {  // a rotated password_file
          config_.password = std::move(new_password_);
          password_changed_ = false;
          mosquitto_username_pw_set(client_, config_.username.c_str(), config_.password.c_str());
        }
      }
      if (why.empty()) {
        const int rc = mosquitto_connect(client_, url_.host.c_str(), url_.port, static_cast<int>(config_.keepalive_s));
        if (rc == MOSQ_ERR_SUCCESS) {
          connection_ = Connection::kConnecting;
          connect_deadline_ = Clock::now() + timeout;
        } else {
          why = "cannot connect to " + url_.host_port() + ": " + describe(rc);
        }
      }
      if (!why.empty()) connection_failed(why);
      now = Clock::now();
    }
    if (connection_ == Connection::kConnecting && now >= connect_deadline_) {
      // Said first: the disconnect's own callback then finds the failure said.
      connection_failed("the broker did not answer the connection (no CONNACK) within " + ms_text(timeout));
      mosquitto_disconnect(client_);
    }
    if (connection_ == Connection::kConnected && (config_.home_assistant || config_.pictures)) {
      const bool fresh = resend_states_;
      publish_states(resend_states_);
      resend_states_ = false;
      if (fresh) {
        {
          std::lock_guard<std::mutex> lock(mutex_);
          stats_.connected = true;
        }
        changed_.notify_all();
      }
    }
    if (connection_ == Connection::kConnected) hand_over();

    // Wait for the broker's side, a message of ours, or the next thing due.
    auto next = now + std::chrono::seconds(1);  // the keepalive's checks
    if (connection_ == Connection::kNone && client_) next = std::min(next, next_try_);
    if (connection_ == Connection::kConnecting) next = std::min(next, connect_deadline_);
    if (stopping) next = std::min(next, finish_by);
    pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {-1, 0, 0}};
    nfds_t count = 1;
    const int sock = client_ ? mosquitto_socket(client_) : -1;
    if (connection_ != Connection::kNone && sock >= 0) {
      fds[1] = {sock, static_cast<short>(POLLIN | (mosquitto_want_write(client_) ? POLLOUT : 0)), 0};
      count = 2;
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now());
    if (poll(fds, count, static_cast<int>(std::max<int64_t>(0, wait.count()))) < 0 && errno != EINTR) break;
    if (fds[0].revents & POLLIN) {
      uint64_t n = 0;
      if (read(wake_fd_, &n, sizeof n) < 0) {
      }  // (nothing to read: woken before)
    }
    if (count == 2 && (fds[1].revents & (POLLIN | POLLERR | POLLHUP))) {
      const int rc = mosquitto_loop_read(client_, 1);
      if (rc != MOSQ_ERR_SUCCESS && connection_ != Connection::kNone) connection_failed(describe(rc));
    }
    if (count == 2 && connection_ != Connection::kNone && (fds[1].revents & POLLOUT)) {
      const int rc = mosquitto_loop_write(client_, 1);
      if (rc != MOSQ_ERR_SUCCESS && connection_ != Connection::kNone) connection_failed(describe(rc));
    }
    if (connection_ != Connection::kNone) {
      const int rc = mosquitto_loop_misc(client_);  // keepalive pings; a broker that stopped answering
      if (rc != MOSQ_ERR_SUCCESS && rc != MOSQ_ERR_NO_CONN && connection_ != Connection::kNone) {
        connection_failed(describe(rc));
      }
    }
  }
  if (client_) {
    if (connection_ == Connection::kConnected) {
      // The sensors' last states (the streams' ends), then "offline" on the status topic (a clean
      // disconnect does not send the will): Home Assistant shows the entities unavailable. Up to 1 s
      // for the broker to acknowledge them, not merely for them to be written: a socket closed with
      // the broker's acknowledgements unread is reset, and the broker then dropped what it had not
      // yet read (seen in a CI run: a picture's clearing sent just before a stop never took effect,
      // the broker keeping the picture of a deleted file).
      if (config_.home_assistant || config_.pictures) publish_states(resend_states_);
      if (!config_.status_topic.empty()) publish_own(config_.status_topic, "offline");
      const auto until = Clock::now() + std::chrono::seconds(1);
      while (connection_ == Connection::kConnected && Clock::now() < until &&
             (!own_mids_.empty() || mosquitto_want_write(client_))) {
        pollfd p{mosquitto_socket(client_), static_cast<short>(POLLIN | (mosquitto_want_write(client_) ? POLLOUT : 0)), 0};
        if (poll(&p, 1, 100) <= 0) continue;
        int rc = MOSQ_ERR_SUCCESS;
        if (p.revents & (POLLIN | POLLERR | POLLHUP)) rc = mosquitto_loop_read(client_, 1);
        if (rc == MOSQ_ERR_SUCCESS && (p.revents & POLLOUT)) rc = mosquitto_loop_write(client_, 1);
        if (rc != MOSQ_ERR_SUCCESS) break;
      }
      connection_ = Connection::kNone;  // our own stop: not a failure
      mosquitto_disconnect(client_);
    }
    mosquitto_destroy(client_);
    client_ = nullptr;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.undelivered += queue_.size() + static_cast<uint64_t>(in_flight_);
  queue_.clear();
  in_flight_ = 0;
  in_flight_lines_.clear();  // (not settled: a restart sends them again)
  stats_.connected = false;
  changed_.notify_all();
}

}  // namespace vapipe
