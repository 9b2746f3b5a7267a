#include "stages/publish/kafka_publisher.h"

#include <cstdint>
#include <fcntl.h>
#include <librdkafka/rdkafka.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "pipeline/envelope.h"
#include "pipeline/logging.h"

namespace vapipe {
namespace {

using Clock = std::chrono::steady_clock;

double unix_now_s() { return static_cast<double>(wall_clock_ns()) / 1e9; }  // (as the other sinks')

std::string sasl_mechanism_name(const std::string& mechanism) {
  if (mechanism == "plain") return "PLAIN";
  if (mechanism == "scram-sha-256") return "SCRAM-SHA-256";
  return "SCRAM-SHA-512";
}

// What a refusal's or a failure's words add for a cause a user can fix.
std::string hint_for(rd_kafka_resp_err_t error) {
  switch (error) {
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
      return " (the user may not write to that topic: grant it Write on the topic_prefix's topics)";
    case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
      return " (an idempotent producer needs IdempotentWrite on the cluster before Kafka 2.8: grant it, or set "
             "idempotence: false)";
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
      return " (larger than the producer takes, 1 MB, or the topic's max.message.bytes)";
    case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
      return " (the cluster does not create topics by itself: create it)";
    default:
      return "";
  }
}

}  // namespace

std::string kafka_topic_of(const std::string& topic_prefix, const std::string& bus_topic) {
  return topic_prefix + bus_topic.substr(0, bus_topic.find('/'));
}

std::string kafka_key_of(const std::string& bus_topic) {
  const size_t slash = bus_topic.find('/');
  return slash == std::string::npos ? std::string() : bus_topic.substr(slash + 1);
}

std::vector<std::pair<std::string, std::string>> kafka_client_settings(const KafkaConfig& config) {
  const KafkaUrl url = parse_kafka_url(config.url).value();  // checked when the config loaded
  const bool sasl = !config.username.empty();
  std::vector<std::pair<std::string, std::string>> s = {
      {"bootstrap.servers", url.bootstrap_servers()},
      {"client.id", config.client_id},
      {"security.protocol", std::string(sasl ? "sasl_" : "") + (url.tls ? "ssl" : "plaintext")},
      {"acks", config.acks == "all" ? "all" : "1"},
      {"enable.idempotence", config.idempotence ? "true" : "false"},
      {"compression.codec", config.compression},
      // Given up only when publish stops (or refused for good): the queue in front bounds what waits.
      {"message.timeout.ms", "0"},
      // Java's: a stream's messages go to the partition a Java producer of its key would pick.
      {"partitioner", "murmur2_random"},
      {"socket.connection.setup.timeout.ms",
       std::to_string(std::max<int64_t>(1000, static_cast<int64_t>(config.timeout_s * 1000)))},
      {"queue.buffering.max.messages", std::to_string(KafkaPublisher::kWindow + 100)},
      {"linger.ms", "5"},
  };
  if (config.idempotence) s.emplace_back("max.in.flight.requests.per.connection", "5");
  if (sasl) {
    s.emplace_back("sasl.mechanisms", sasl_mechanism_name(config.sasl_mechanism));
    s.emplace_back("sasl.username", config.username);
  }
  if (url.tls) {
    if (!config.ca_file.empty()) s.emplace_back("ssl.ca.location", config.ca_file);
    s.emplace_back("enable.ssl.certificate.verification", config.tls_verify ? "true" : "false");
    s.emplace_back("ssl.endpoint.identification.algorithm", config.tls_verify ? "https" : "none");
    if (!config.cert_file.empty()) {
      s.emplace_back("ssl.certificate.location", config.cert_file);
      s.emplace_back("ssl.key.location", config.key_file);
    }
  }
  return s;
}

KafkaPublisher::KafkaPublisher(const KafkaConfig& config, size_t index, SinkPredecessors predecessors)
    : KafkaPublisher(config, index, std::move(predecessors), Timings{}) {}

KafkaPublisher::KafkaPublisher(const KafkaConfig& config, size_t index, SinkPredecessors predecessors,
                               Timings timings)
    : QueuedSink(config, "vapipe_kafka_messages_total", std::move(predecessors)), config_(config), timings_(timings) {
  url_ = parse_kafka_url(config_.url).value();  // checked when the config loaded
  name_.set("publish.kafka[" + std::to_string(index) + "] (" + url_.origin() + ")");
  stats_.name = name_.str();
  stats_.index = index;
  stats_.cluster = url_.origin();
  stats_.disconnected_since_unix_s = unix_now_s();
  password_ = config_.password;
  window_ = std::min<size_t>(kWindow, config_.max_queued);
  int fds[2];
  if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) == 0) {
    wake_read_ = fds[0];
    wake_write_ = fds[1];
  }
  thread_ = std::thread([this] { run(); });
}

KafkaPublisher::~KafkaPublisher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_now_ = true;
  }
  wake();
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (wake_read_ >= 0) ::close(wake_read_);
  if (wake_write_ >= 0) ::close(wake_write_);
}

void KafkaPublisher::wake() {
  if (wake_write_ >= 0) {
    const char byte = 'w';
    [[maybe_unused]] ssize_t n = ::write(wake_write_, &byte, 1);  // (a full pipe rings already)
  }
}

void KafkaPublisher::set_password(std::string password) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    password_ = std::move(password);
    password_changed_ = true;
  }
  wake();
}

KafkaStats KafkaPublisher::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  KafkaStats s = stats_;
  s.queued = queue_.size() + outstanding_count_;
  return s;
}

Status KafkaPublisher::wait_connected(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  const bool settled = changed_.wait_for(lock, timeout, [&] { return stats_.connected || tries_ > 0; });
  if (stats_.connected) return Status::Ok();
  if (!settled) return Unavailable("no answer within " + std::to_string(timeout.count()) + " ms");
  return Unavailable(stats_.last_error);
}

void KafkaPublisher::finish(std::chrono::milliseconds grace) {
  begin_finish(Clock::now() + grace);
  if (!thread_.joinable()) return;  // finished before
  thread_.join();
  const KafkaStats s = stats();  // (connected: whether it still was when the time was up)
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.connected = false;
  }
  if (s.undelivered > 0) {
    VAPIPE_LOG_ERROR("{}: {} message(s) not delivered when {} ({}; its last error: {})", name_, s.undelivered,
                     stopped_by(), s.connected ? "no time left" : "it could not be reached",
                     s.last_error.empty() ? "none" : s.last_error);
  }
  VAPIPE_LOG_INFO("{}: {} message(s) delivered, {} refused, {} dropped (queue full), {} undelivered{}", name_,
                  s.delivered, s.refused, s.dropped, s.undelivered,
                  s.cooled_down ? ", " + std::to_string(s.cooled_down) + " held back (cooldown_s)" : std::string());
}

Status KafkaPublisher::make_producer() {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char error[512] = "";
  auto set = [&](const std::string& key, const std::string& value) -> Status {
    if (rd_kafka_conf_set(conf, key.c_str(), value.c_str(), error, sizeof error) != RD_KAFKA_CONF_OK) {
      return InvalidArgument("librdkafka refuses its setting " + key + ": " + error);
    }
    return Status::Ok();
  };
  Status made = Status::Ok();
  auto settings = kafka_client_settings(config_);
  settings.emplace_back("reconnect.backoff.ms", std::to_string(timings_.reconnect_first.count()));
  settings.emplace_back("reconnect.backoff.max.ms", std::to_string(timings_.reconnect_longest.count()));
  for (const auto& [key, value] : settings) {
    if (made.ok()) made = set(key, value);
  }
  if (made.ok() && !config_.username.empty()) {
    std::lock_guard<std::mutex> lock(mutex_);
    made = set("sasl.password", password_);
    password_changed_ = false;
  }
  if (!made.ok()) {
    rd_kafka_conf_destroy(conf);
    return made;
  }
  rd_kafka_conf_set_opaque(conf, this);
  rd_kafka_conf_set_dr_msg_cb(conf, &KafkaPublisher::on_delivery);
  rd_kafka_conf_set_error_cb(conf, &KafkaPublisher::on_error);
  rd_kafka_conf_set_log_cb(conf, &KafkaPublisher::on_log);
  producer_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error, sizeof error);  // (takes conf, made or not)
  if (!producer_) return Unavailable(std::string("cannot make a Kafka producer: ") + error);
  // The thread's poll wakes when librdkafka has a delivery or an error for it.
  if (wake_write_ >= 0) {
    rd_kafka_queue_t* main_queue = rd_kafka_queue_get_main(producer_);
    rd_kafka_queue_io_event_enable(main_queue, wake_write_, "k", 1);
    rd_kafka_queue_destroy(main_queue);
  }
  // Its topics known from the start: their partitions' leaders are looked up now, not when the first
  // message of each comes (an archive job's summary, at its very end, would wait for that).
  // (Those its topic prefixes can match only: on a cluster that makes topics as they are asked for, a
  // topic looked up is made.)
  std::set<std::string> kinds;
  for (const char* kind : {"results/", "events/", "segments/", "job/"}) {
    for (const std::string& prefix : config_.topics) {
      if (prefix.rfind(kind, 0) == 0 || std::string(kind).rfind(prefix, 0) == 0) kinds.insert(kafka_topic(kind));
    }
  }
  for (const std::string& topic : kinds) {
    if (rd_kafka_topic_t* handle = rd_kafka_topic_new(producer_, topic.c_str(), nullptr)) topics_.push_back(handle);
  }
  fatal_ = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.producers;
  }
  return Status::Ok();
}

void KafkaPublisher::drop_producer(bool requeue) {
  if (!producer_) return;
  rd_kafka_queue_t* main_queue = rd_kafka_queue_get_main(producer_);
  rd_kafka_queue_io_event_enable(main_queue, -1, nullptr, 0);
  rd_kafka_queue_destroy(main_queue);
  requeue_purged_ = requeue;
  rd_kafka_purge(producer_, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
  // The purged messages' reports (_PURGE_QUEUE, _PURGE_INFLIGHT) come through the poll; a requeued
  // one stays in outstanding_ until then.
  const auto until = Clock::now() + std::chrono::seconds(2);
  while (rd_kafka_outq_len(producer_) > 0 && Clock::now() < until) rd_kafka_poll(producer_, 50);
  for (rd_kafka_topic_t* handle : topics_) rd_kafka_topic_destroy(handle);
  topics_.clear();
  rd_kafka_destroy(producer_);
  producer_ = nullptr;
  requeue_purged_ = false;
  std::lock_guard<std::mutex> lock(mutex_);
  // Given back in front of what waits, in the order they were handed over (ids are); what no report
  // came for is counted as purged too.
  for (auto it = outstanding_.rbegin(); it != outstanding_.rend(); ++it) {
    if (requeue) {
      it->second.unanswered = true;
      queue_.push_front(std::move(it->second));
    } else {
      ++stats_.undelivered;
    }
  }
  outstanding_.clear();
  outstanding_count_ = 0;
}

void KafkaPublisher::on_delivery(rd_kafka_t* /*producer*/, const rd_kafka_message_t* message, void* opaque) {
  auto* self = static_cast<KafkaPublisher*>(opaque);
  const uint64_t id = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(message->_private));
  auto it = self->outstanding_.find(id);
  if (it == self->outstanding_.end()) return;  // (not one of ours: never)
  if (message->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
    {
      std::lock_guard<std::mutex> lock(self->mutex_);
      ++self->stats_.delivered;
      self->stats_.last_delivered_unix_s = unix_now_s();
      self->settle_line_locked(it->second.file_line);
    }
    self->answered();
  } else if (message->err == RD_KAFKA_RESP_ERR__PURGE_QUEUE || message->err == RD_KAFKA_RESP_ERR__PURGE_INFLIGHT) {
    if (self->requeue_purged_) return;  // (drop_producer gives it back, in order)
    std::lock_guard<std::mutex> lock(self->mutex_);
    ++self->stats_.undelivered;
  } else {
    self->refuse(it->second, std::string(rd_kafka_err2str(message->err)) + hint_for(message->err));
  }
  self->outstanding_.erase(it);
  std::lock_guard<std::mutex> lock(self->mutex_);
  self->outstanding_count_ = self->outstanding_.size();
  self->changed_.notify_all();  // (room in the window; a block queue's push waits on queue_ alone)
}

void KafkaPublisher::on_error(rd_kafka_t* /*producer*/, int error, const char* reason, void* opaque) {
  auto* self = static_cast<KafkaPublisher*>(opaque);
  const auto code = static_cast<rd_kafka_resp_err_t>(error);
  switch (code) {
    case RD_KAFKA_RESP_ERR__TRANSPORT:
    case RD_KAFKA_RESP_ERR__RESOLVE:
      self->last_transport_error_ = reason;
      break;
    case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN: {
      std::string why = self->last_transport_error_.empty() ? std::string(reason)
                                                            : std::string(reason) + ": " + self->last_transport_error_;
      // (librdkafka's words for TLS to a port that speaks none, said in the config's)
      // librdkafka says the same fault one of two ways, as the broker's closing meets its handshake.
      if (why.find("PLAINTEXT broker listener") != std::string::npos) {
        why += " (then the url is kafka://, not kafkas://)";
      } else if (why.find("in state SSL_HANDSHAKE") != std::string::npos) {
        why += " (the broker hung up in the TLS handshake: a port that speaks plain Kafka? then the url is kafka://, "
               "not kafkas://)";
      }
      self->outage(why);
      break;
    }
    case RD_KAFKA_RESP_ERR__AUTHENTICATION:
      self->outage(std::string("it refused the sign-in: ") + reason);
      break;
    case RD_KAFKA_RESP_ERR__SSL:
      self->outage(std::string("TLS failed: ") + reason);
      break;
    case RD_KAFKA_RESP_ERR__FATAL:
      self->fatal_ = true;
      break;
    default:
      VAPIPE_LOG_WARN("{}: {}", self->name_, reason);
  }
}

void KafkaPublisher::on_log(const rd_kafka_t* producer, int level, const char* facility, const char* text) {
  // Outages and refusals are said by the sink itself; librdkafka's own lines are for debugging.
  auto* self = static_cast<KafkaPublisher*>(rd_kafka_opaque(producer));
  VAPIPE_LOG_DEBUG("{}: librdkafka {} {}: {}", self ? self->name_.str() : std::string("publish.kafka"), level, facility,
                   text);
}

void KafkaPublisher::answered() {
  last_answer_ = Clock::now();
  restart_delay_ = kFirstRestartDelay;  // (a producer made again after a fatal error works)
  std::lock_guard<std::mutex> lock(mutex_);
  if (stats_.connected) return;
  if (failing_) {
    VAPIPE_LOG_INFO("{}: the cluster answers again after {:.1f} s; {} message(s) waited", name_,
                    unix_now_s() - stats_.disconnected_since_unix_s, queue_.size() + outstanding_count_);
  }
  failing_ = false;
  stats_.connected = true;
  stats_.disconnected_since_unix_s = 0;
  changed_.notify_all();
}

void KafkaPublisher::outage(const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = Clock::now();
  stats_.last_error = why;
  if (stats_.connected) stats_.disconnected_since_unix_s = unix_now_s();
  stats_.connected = false;
  ++tries_;
  if (!failing_ || now - failure_logged_at_ >= kStillFailingLogPeriod) {
    VAPIPE_LOG_ERROR("{}: {}: {}; messages wait for it ({}, at most {})", name_,
                     failing_ ? "still cannot reach the cluster" : "cannot reach the cluster", why,
                     queue_policy_name(config_.queue_policy), config_.max_queued);
    failure_logged_at_ = now;
  }
  failing_ = true;
  changed_.notify_all();
}

void KafkaPublisher::refuse(const SinkMessage& message, const std::string& why) {
  const auto now = Clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.refused;
  settle_line_locked(message.file_line);
  stats_.last_error = "refused a message for " + kafka_topic(message.topic) + ": " + why;
  if (refusals_logged_at_ == Clock::time_point{} || now - refusals_logged_at_ >= std::chrono::minutes(1)) {
    VAPIPE_LOG_ERROR("{}: the message on {} was refused for {}: {}{}", name_, message.topic, kafka_topic(message.topic),
                     why,
                     refusals_unlogged_ ? fmt::format(" ({} more refused since the last said)", refusals_unlogged_)
                                        : std::string());
    refusals_logged_at_ = now;
    refusals_unlogged_ = 0;
  } else {
    ++refusals_unlogged_;
  }
}

void KafkaPublisher::hand_over() {
  std::vector<SinkMessage> batch;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // While the cluster cannot be reached, the messages wait in the queue, where its policy applies
    // (drop_oldest, block), rather than in the producer.
    if (failing_) return;
    while (!queue_.empty() && outstanding_.size() + batch.size() < window_) {
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    outstanding_count_ = outstanding_.size() + batch.size();
  }
  if (!batch.empty()) changed_.notify_all();  // room in the queue (block)
  for (size_t i = 0; i < batch.size(); ++i) {
    const uint64_t id = next_id_++;
    SinkMessage& m = outstanding_.emplace(id, std::move(batch[i])).first->second;
    const std::string topic = kafka_topic(m.topic), key = kafka_key_of(m.topic);
    // The body is not copied: it stays in outstanding_ until its report (flags 0).
    const rd_kafka_resp_err_t error = rd_kafka_producev(
        producer_, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_KEY(key.data(), key.size()),
        RD_KAFKA_V_VALUE(m.body.data(), m.body.size()), RD_KAFKA_V_MSGFLAGS(0),
        RD_KAFKA_V_HEADER("vapipe-topic", m.topic.data(), static_cast<ssize_t>(m.topic.size())),
        RD_KAFKA_V_OPAQUE(reinterpret_cast<void*>(static_cast<uintptr_t>(id))), RD_KAFKA_V_END);
    if (error == RD_KAFKA_RESP_ERR_NO_ERROR) continue;
    SinkMessage taken = std::move(m);
    outstanding_.erase(id);
    if (error == RD_KAFKA_RESP_ERR__QUEUE_FULL || error == RD_KAFKA_RESP_ERR__FATAL) {
      // Back in front, in order, with those not handed over yet.
      std::lock_guard<std::mutex> lock(mutex_);
      for (size_t j = batch.size(); j > i + 1; --j) queue_.push_front(std::move(batch[j - 1]));
      queue_.push_front(std::move(taken));
      if (error == RD_KAFKA_RESP_ERR__FATAL) fatal_ = true;
      break;
    }
    refuse(taken, std::string(rd_kafka_err2str(error)) + hint_for(error));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  outstanding_count_ = outstanding_.size();
}

void KafkaPublisher::probe(std::chrono::milliseconds timeout) {
  last_probe_ = Clock::now();
  const auto deadline = last_probe_ + timeout;
  uint64_t outages_before;
  bool was_failing;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    outages_before = tries_;
    was_failing = failing_;
  }
  // In slices: between them, librdkafka's word that every broker is down (a refused connection) ends
  // the wait at once, as a stop does. No broker to ask (_TRANSPORT) keeps the slice; an ask that went
  // and was not answered in it (_TIMED_OUT) goes again with twice the time, up to what is left.
  rd_kafka_resp_err_t error = RD_KAFKA_RESP_ERR_NO_ERROR;
  for (;;) {
    const auto asked = Clock::now();
    auto slice = std::min(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - asked), probe_slice_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) slice = std::min(slice, std::chrono::duration_cast<std::chrono::milliseconds>(finish_by_ - asked));
    }
    const rd_kafka_metadata_t* metadata = nullptr;
    error = rd_kafka_metadata(producer_, 0, nullptr, &metadata, static_cast<int>(std::max<int64_t>(100, slice.count())));
    if (error == RD_KAFKA_RESP_ERR_NO_ERROR) {
      rd_kafka_metadata_destroy(metadata);
      const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - asked);
      probe_slice_ = std::clamp<std::chrono::milliseconds>(2 * took, kFirstProbeSlice, kLongestProbeSlice);
      answered();
      return;
    }
    if (error == RD_KAFKA_RESP_ERR__TIMED_OUT) {
      probe_slice_ = std::min<std::chrono::milliseconds>(2 * probe_slice_, kLongestProbeSlice);
    }
    rd_kafka_poll(producer_, 0);
    std::lock_guard<std::mutex> lock(mutex_);
    if (tries_ != outages_before) return;  // (said, with librdkafka's reason)
    if (Clock::now() >= deadline || time_is_up()) break;
    // Messages came while a reached cluster was asked: their deliveries will say whether it answers.
    if (!was_failing && !queue_.empty()) return;
    if (password_changed_) return;  // (a sign-in refused: asked again with the new one)
  }
  std::string why = std::string("no metadata: ") + rd_kafka_err2str(error);
  if (!last_transport_error_.empty()) why += " (" + last_transport_error_ + ")";
  outage(why);
}

void KafkaPublisher::run() {
  wait_for_predecessors();
  for (;;) {
    bool done = false, password_changed = false;
    std::string password;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done = time_is_up() || (stopping_ && queue_.empty() && outstanding_.empty());
      password_changed = password_changed_;
      password = password_;
      password_changed_ = false;
    }
    if (done) break;
    const auto now = Clock::now();
    if (fatal_ && producer_) {
      char reason[512] = "";
      const rd_kafka_resp_err_t code = rd_kafka_fatal_error(producer_, reason, sizeof reason);
      outage(std::string("the producer failed for good: ") + reason + hint_for(code));
      VAPIPE_LOG_ERROR("{}: a new producer is made in {} s; the messages not yet acknowledged are sent again by it (a "
                       "consumer may see them twice)", name_, std::chrono::duration_cast<std::chrono::seconds>(restart_delay_).count());
      drop_producer(true);
      next_restart_ = now + restart_delay_;
      restart_delay_ = std::min<std::chrono::milliseconds>(restart_delay_ * 2, kLongestRestartDelay);
    }
    if (!producer_ && now >= next_restart_) {
      if (Status made = make_producer(); !made.ok()) {
        outage(made.message());
        next_restart_ = now + restart_delay_;
        restart_delay_ = std::min<std::chrono::milliseconds>(restart_delay_ * 2, kLongestRestartDelay);
      }
    }
    if (producer_) {
      if (password_changed && !config_.username.empty()) {
        if (rd_kafka_error_t* e = rd_kafka_sasl_set_credentials(producer_, config_.username.c_str(), password.c_str())) {
          VAPIPE_LOG_ERROR("{}: cannot take the new password: {}", name_, rd_kafka_error_string(e));
          rd_kafka_error_destroy(e);
        }
      }
      if (fail_fatally_.exchange(false)) {
        rd_kafka_test_fatal_error(producer_, RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, "a test's");
      }
      hand_over();
      rd_kafka_poll(producer_, 0);  // reports and errors, on this thread
      // An idle producer asks now and then whether the cluster still answers; one that cannot reach it,
      // every second (a delivery says so otherwise).
      bool connected;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        connected = stats_.connected;
      }
      const auto since_answer = Clock::now() - std::max(last_answer_, last_probe_);
      if (outstanding_.empty() && (last_probe_ == Clock::time_point{} ||
                                   since_answer >= (connected ? timings_.idle_check : std::chrono::milliseconds(1000)))) {
        // Each ask has timeout_s, the time the user gives the cluster to answer (a new connection, its
        // TLS and sign-in the first time: validate --open waits for it). A stop ends it between slices.
        auto timeout = std::chrono::milliseconds(static_cast<int64_t>(config_.timeout_s * 1000));
        {
          std::lock_guard<std::mutex> lock(mutex_);
          if (stopping_) timeout = std::min(timeout, std::chrono::duration_cast<std::chrono::milliseconds>(finish_by_ - Clock::now()));
        }
        probe(timeout);
        continue;
      }
    }
    // Wait for a message, a report, a stop, or the next thing due (at most 1 s: a probe, a restart).
    pollfd p{wake_read_, POLLIN, 0};
    int wait_ms = outstanding_.empty() ? 1000 : 100;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!queue_.empty() && producer_ && !failing_ && outstanding_.size() < window_) wait_ms = 0;
      if (stopping_ && queue_.empty() && outstanding_.empty()) wait_ms = 0;  // all delivered: done
      if (stopping_) {
        wait_ms = std::min<int64_t>(wait_ms, std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(
                                                                      finish_by_ - Clock::now()).count()));
      }
    }
    if (!producer_) {
      wait_ms = std::min<int64_t>(
          wait_ms, std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(next_restart_ - Clock::now()).count()));
    }
    if (wake_read_ >= 0) {
      ::poll(&p, 1, wait_ms);
      char drain[256];
      while (::read(wake_read_, drain, sizeof drain) > 0) {
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(wait_ms, 20)));
    }
  }
  // Stopped: what the producer still holds is purged (counted undelivered), and what waits too.
  drop_producer(false);
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.undelivered += queue_.size();
  queue_.clear();
}

}  // namespace vapipe
