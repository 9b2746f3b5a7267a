// A Kafka cluster for the tests: librdkafka's mock cluster (rdkafka_mock.h), brokers that speak Kafka's
// protocol on loopback ports of their own, in this process, with outages and errors on demand; and a
// consumer that reads a topic back as a consumer of the user's own would. Not Apache Kafka: what its
// brokers do beyond the protocol (replication, authorization, quotas) is not there.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

typedef struct rd_kafka_s rd_kafka_t;
typedef struct rd_kafka_mock_cluster_s rd_kafka_mock_cluster_t;

namespace vapipe::testing {

class KafkaTestCluster {
 public:
  explicit KafkaTestCluster(int brokers = 3);
  ~KafkaTestCluster();
  KafkaTestCluster(const KafkaTestCluster&) = delete;
  KafkaTestCluster& operator=(const KafkaTestCluster&) = delete;

  // "127.0.0.1:40001,127.0.0.1:40002,...", and as publish.kafka's url ("kafka://...").
  std::string bootstrap_servers() const { return bootstrap_; }
  std::string url() const { return "kafka://" + bootstrap_; }
  // A topic made beforehand (else the first message makes it, with 4 partitions).
  void create_topic(const std::string& topic, int partitions);
  // Every broker stops answering (their connections closed, new ones refused), or answers again.
  void set_down(bool down);
  // Every broker answers each request `delay` late (a cluster far away, or busy).
  void set_round_trip(std::chrono::milliseconds delay);
  // The next produce requests are answered with these Kafka error codes, one each (RD_KAFKA_RESP_ERR_*).
  void fail_next_produce_requests(const std::vector<int>& errors);

  struct Record {
    std::string topic;
    int32_t partition = 0;
    int64_t offset = 0;
    int64_t timestamp_ms = 0;  // the producer's (CreateTime): when it was handed to the producer
    std::string key, value;
    std::map<std::string, std::string> headers;
  };
  // The records of `topic`, partition after partition, each in offset order: read from the start until
  // every partition's end once at least `at_least` were read, or `timeout` passed.
  std::vector<Record> read(const std::string& topic, size_t at_least = 0,
                           std::chrono::milliseconds timeout = std::chrono::seconds(20)) const;
  // The topics the cluster has (metadata), sorted.
  std::vector<std::string> topics() const;

 private:
  rd_kafka_t* handle_ = nullptr;  // the mock cluster's owner
  rd_kafka_mock_cluster_t* cluster_ = nullptr;
  int brokers_ = 0;
  std::string bootstrap_;
};

}  // namespace vapipe::testing
