// publish.kafka: messages produced to a Kafka cluster (Apache Kafka, Redpanda, Amazon MSK, Confluent
// Cloud) as they are published on the bus, so that a data platform (a stream processor, a data lake's
// connector, a consumer group of the user's own) takes vapipe's results with the consumer it already
// has, and reads what it missed: the cluster keeps the messages, the bus keeps nothing for an absent
// subscriber. DeepStream's msgbroker offers Kafka the same way.
//
// Topics: topic_prefix + the bus topic's kind ("results/gate" -> "vapipe.nightly.results"; events,
// segments, job), keyed by the stream's id ("gate"; job/summary: "summary"), so that a stream's messages
// stay in order in one partition (Java's murmur2 partitioner: the same partition a Java producer of that
// key would pick) and a consumer group spreads the streams. The bus topic goes in the header
// "vapipe-topic". A topic per stream would be thousands of topics on a busy cluster.
//
// Each cluster has a thread and a queue of its own (QueuedSink): a cluster that is slow or down never
// holds up the bus, the results file or another sink (unless its queue_policy is block). The thread
// owns a librdkafka producer: an idempotent one with acks from every in-sync replica by default, so that
// its own retries neither duplicate nor reorder a message. It hands the producer up to kWindow messages
// at a time (without copying them: each stays in `outstanding_` until the cluster acknowledges it),
// and librdkafka batches, compresses, finds each partition's leader and retries for as long as it takes
// (message.timeout.ms 0: a message is given up only when publish stops, or refused for good). A fatal
// error (the idempotent producer's state lost) makes a new producer after a back-off (1 s doubling to
// 60 s); the messages the old one had not had acknowledged are sent again: at least once.
//
// Whether the cluster can be reached is librdkafka's word (all brokers down, a failed sign-in) and the
// deliveries'; an idle producer asks for the cluster's metadata every kIdleCheck, so that a cluster gone
// away is said without a message to send.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "pipeline/config.h"
#include "pipeline/http_url.h"
#include "pipeline/status.h"
#include "stages/publish/metrics.h"
#include "stages/publish/queued_sink.h"

typedef struct rd_kafka_s rd_kafka_t;                  // as rdkafka.h has them
typedef struct rd_kafka_message_s rd_kafka_message_t;
typedef struct rd_kafka_topic_s rd_kafka_topic_t;

namespace vapipe {

// The Kafka topic a bus topic's messages go to: `topic_prefix` + the part before its '/'
// ("results/gate" -> "vapipe.nightly.results").
std::string kafka_topic_of(const std::string& topic_prefix, const std::string& bus_topic);
// Their key: the part after its '/' (the stream's id; "summary" for job/summary).
std::string kafka_key_of(const std::string& bus_topic);

// librdkafka's settings for a cluster of the config, the password left out (it is set apart, and
// never in a list that could be printed).
std::vector<std::pair<std::string, std::string>> kafka_client_settings(const KafkaConfig& config);

class KafkaPublisher : public QueuedSink<KafkaStats> {
 public:
  // librdkafka's timings, which tests shorten: its reconnect back-off (first and longest), and how often
  // an idle producer asks for the cluster's metadata (kIdleCheck).
  struct Timings {
    std::chrono::milliseconds reconnect_first{100}, reconnect_longest{10000};
    std::chrono::milliseconds idle_check = kIdleCheck;
  };

  // Starts its thread, which makes the producer (librdkafka connects in the background); `index` is
  // its place in publish.kafka, for log lines.
  // `predecessors`: the sinks of the same cluster that a reload removed (QueuedSink::wait_for_predecessors).
  KafkaPublisher(const KafkaConfig& config, size_t index, SinkPredecessors predecessors = {});
  KafkaPublisher(const KafkaConfig& config, size_t index, SinkPredecessors predecessors, Timings timings);
  // Stops at once: what still waits is counted undelivered (finish() first to give it time).
  ~KafkaPublisher() override;

  // wants(), cooled_down(), begin_finish(), name(): QueuedSink's.
  // Queues `body` for the topic kafka_topic(bus_topic) (QueuedSink::push).
  void publish(const std::string& bus_topic, std::string body, const std::atomic<bool>* stop = nullptr) {
    push(SinkMessage{bus_topic, std::move(body), "", ""}, stop);
  }
  const std::string& format() const { return config_.format; }
  std::string kafka_topic(const std::string& bus_topic) const { return kafka_topic_of(config_.topic_prefix, bus_topic); }
  // A new password (its password_file rewritten while the job runs): SASL's next sign-in uses it.
  void set_password(std::string password);
  // Gives what waits until `grace` to be delivered, then stops the thread and logs what was not.
  void finish(std::chrono::milliseconds grace);
  KafkaStats stats() const;
  // Until the cluster has answered (Ok) or a try has failed (why), at most `timeout`: `vapipe validate --open`.
  Status wait_connected(std::chrono::milliseconds timeout) const;

  // Tests: the producer fails for good, as librdkafka says it when the idempotent producer's state is
  // lost (rd_kafka_test_fatal_error), on the thread's next turn.
  void fail_fatally_for_test() {
    fail_fatally_.store(true);
    wake();
  }

  // Messages handed to the producer and not yet acknowledged, at most (and at most max_queued): enough
  // for librdkafka's batches to fill (a batch per partition), few enough that a fatal error sends little
  // twice. While the cluster cannot be reached none is handed over: they wait in the queue, where its
  // policy applies.
  static constexpr size_t kWindow = 10000;
  static constexpr std::chrono::seconds kIdleCheck{15};
  // A metadata ask waits kFirstProbeSlice, doubled while its answer outlasts it, up to kLongestProbeSlice:
  // a stop looks between them, so that a cluster that stopped answering holds it up no longer.
  static constexpr std::chrono::milliseconds kFirstProbeSlice{250}, kLongestProbeSlice{2000};
  static constexpr std::chrono::seconds kStillFailingLogPeriod{300};
  static constexpr std::chrono::seconds kFirstRestartDelay{1}, kLongestRestartDelay{60};

 private:
  void run();
  // On the thread: a producer made (Ok), or why not.
  Status make_producer();
  // On the thread: the producer purged (what it held back in front of the queue when `requeue`,
  // else counted undelivered) and destroyed.
  void drop_producer(bool requeue);
  // On the thread: hands the producer what waits, up to kWindow outstanding.
  void hand_over();
  // On the thread: asks the cluster for its metadata (at most `timeout`): whether it answers. Asked in
  // slices of probe_slice_, so that a stop, or librdkafka's word that every broker is down, ends the
  // wait; a slice that the cluster's answer outlasted is doubled (up to kLongestProbeSlice), as the
  // request goes again (a late answer is lost with its slice). An idle producer's ask gives way to
  // messages that arrive meanwhile.
  void probe(std::chrono::milliseconds timeout);
  // On the thread: a message refused for good (`why`): counted, said (the first, then at most once a minute).
  void refuse(const SinkMessage& message, const std::string& why);
  // The cluster answered (a delivery, its metadata): connected again, said once after an outage.
  void answered();
  // The cluster cannot be reached (`why`): said once per outage, then every kStillFailingLogPeriod.
  void outage(const std::string& why);
  // librdkafka's callbacks, on the thread (inside rd_kafka_poll), and its log lines (any thread).
  static void on_delivery(rd_kafka_t* producer, const rd_kafka_message_t* message, void* self);
  static void on_error(rd_kafka_t* producer, int error, const char* reason, void* self);
  static void on_log(const rd_kafka_t* producer, int level, const char* facility, const char* text);
  void wake() override;
  bool time_is_up() const { return stop_now_ || (stopping_ && std::chrono::steady_clock::now() >= finish_by_); }

  KafkaConfig config_;
  KafkaUrl url_;
  Timings timings_;
  size_t window_ = kWindow;  // kWindow, or max_queued when smaller
  int wake_read_ = -1, wake_write_ = -1;  // a pipe: a message or a stop (wake()), or librdkafka's news
  // The thread's own state.
  rd_kafka_t* producer_ = nullptr;
  std::vector<rd_kafka_topic_t*> topics_;  // the topics its `topics` go to, known to it from the start
  uint64_t next_id_ = 0;  // each message handed over: its id, librdkafka's opaque for it
  std::map<uint64_t, SinkMessage> outstanding_;  // handed over, not yet acknowledged, by id (in order)
  bool requeue_purged_ = false;  // drop_producer(requeue): a purged message goes back to the queue
  bool fatal_ = false;              // librdkafka said the producer failed for good
  std::atomic<bool> fail_fatally_{false};  // fail_fatally_for_test()
  std::string last_transport_error_;  // the latest broker's connection failure, for an outage's words
  std::chrono::steady_clock::time_point next_restart_{}, last_answer_{}, last_probe_{};
  std::chrono::milliseconds restart_delay_ = kFirstRestartDelay;
  // How long one metadata request of probe() waits: kFirstProbeSlice, or twice the last answer's time
  // (a cluster far away or busy answers later than a near one), at most kLongestProbeSlice.
  std::chrono::milliseconds probe_slice_ = kFirstProbeSlice;
  std::chrono::steady_clock::time_point failure_logged_at_{}, refusals_logged_at_{};
  uint64_t refusals_unlogged_ = 0;
  // Under mutex_:
  std::string password_;  // config_.password, or a newer one
  bool password_changed_ = false;
  bool failing_ = false;    // an outage said
  size_t outstanding_count_ = 0;  // outstanding_.size(), for stats
  uint64_t tries_ = 0;    // outages said (wait_connected)
  std::thread thread_;  // last: started once the rest is set
};

}  // namespace vapipe
