#include "tests/fakes/kafka_test_cluster.h"

#include <cstdint>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <algorithm>
#include <set>
#include <stdexcept>

namespace vapipe::testing {
namespace {

rd_kafka_conf_t* quiet_conf() {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char error[256];
  rd_kafka_conf_set(conf, "log_level", "0", error, sizeof error);
  return conf;
}

}  // namespace

KafkaTestCluster::KafkaTestCluster(int brokers) : brokers_(brokers) {
  char error[512];
  handle_ = rd_kafka_new(RD_KAFKA_PRODUCER, quiet_conf(), error, sizeof error);
  if (!handle_) throw std::runtime_error(std::string("KafkaTestCluster: ") + error);
  cluster_ = rd_kafka_mock_cluster_new(handle_, brokers);
  if (!cluster_) throw std::runtime_error("KafkaTestCluster: no mock cluster");
  bootstrap_ = rd_kafka_mock_cluster_bootstraps(cluster_);
}

KafkaTestCluster::~KafkaTestCluster() {
  if (cluster_) rd_kafka_mock_cluster_destroy(cluster_);
  if (handle_) rd_kafka_destroy(handle_);
}

void KafkaTestCluster::create_topic(const std::string& topic, int partitions) {
  rd_kafka_mock_topic_create(cluster_, topic.c_str(), partitions, std::min(3, brokers_));
}

void KafkaTestCluster::set_down(bool down) {
  for (int b = 1; b <= brokers_; ++b) {
    if (down) {
      rd_kafka_mock_broker_set_down(cluster_, b);
    } else {
      rd_kafka_mock_broker_set_up(cluster_, b);
    }
  }
}

void KafkaTestCluster::set_round_trip(std::chrono::milliseconds delay) {
  for (int b = 1; b <= brokers_; ++b) rd_kafka_mock_broker_set_rtt(cluster_, b, static_cast<int>(delay.count()));
}

void KafkaTestCluster::fail_next_produce_requests(const std::vector<int>& errors) {
  std::vector<rd_kafka_resp_err_t> codes;
  for (int e : errors) codes.push_back(static_cast<rd_kafka_resp_err_t>(e));
  rd_kafka_mock_push_request_errors_array(cluster_, 0 /* Produce */, codes.size(), codes.data());
}

std::vector<KafkaTestCluster::Record> KafkaTestCluster::read(const std::string& topic, size_t at_least,
                                                             std::chrono::milliseconds timeout) const {
  char error[512];
  rd_kafka_conf_t* conf = quiet_conf();
  rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap_.c_str(), error, sizeof error);
  rd_kafka_conf_set(conf, "group.id", "vapipe-tests", error, sizeof error);
  rd_kafka_conf_set(conf, "enable.auto.commit", "false", error, sizeof error);
  rd_kafka_conf_set(conf, "enable.partition.eof", "true", error, sizeof error);
  rd_kafka_t* consumer = rd_kafka_new(RD_KAFKA_CONSUMER, conf, error, sizeof error);
  if (!consumer) throw std::runtime_error(std::string("KafkaTestCluster: ") + error);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Its partitions, once the topic exists.
  int partitions = 0;
  while (partitions == 0 && std::chrono::steady_clock::now() < deadline) {
    rd_kafka_topic_t* t = rd_kafka_topic_new(consumer, topic.c_str(), nullptr);
    const rd_kafka_metadata_t* metadata = nullptr;
    if (rd_kafka_metadata(consumer, 0, t, &metadata, 2000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
      if (metadata->topic_cnt == 1 && metadata->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        partitions = metadata->topics[0].partition_cnt;
      }
      rd_kafka_metadata_destroy(metadata);
    }
    rd_kafka_topic_destroy(t);
    if (partitions == 0) rd_kafka_poll(consumer, 100);
  }
  std::vector<Record> records;
  if (partitions > 0) {
    rd_kafka_topic_partition_list_t* assignment = rd_kafka_topic_partition_list_new(partitions);
    for (int p = 0; p < partitions; ++p) {
      rd_kafka_topic_partition_list_add(assignment, topic.c_str(), p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    }
    rd_kafka_assign(consumer, assignment);  // (no group join: the partitions are taken as they are)
    rd_kafka_topic_partition_list_destroy(assignment);
    std::set<int32_t> at_end;
    while (std::chrono::steady_clock::now() < deadline &&
           !(records.size() >= at_least && static_cast<int>(at_end.size()) == partitions)) {
      rd_kafka_message_t* m = rd_kafka_consumer_poll(consumer, 100);
      if (!m) continue;
      if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        at_end.insert(m->partition);
      } else if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        at_end.erase(m->partition);
        Record r;
        r.topic = topic;
        r.partition = m->partition;
        r.offset = m->offset;
        r.timestamp_ms = rd_kafka_message_timestamp(m, nullptr);
        if (m->key) r.key.assign(static_cast<const char*>(m->key), m->key_len);
        if (m->payload) r.value.assign(static_cast<const char*>(m->payload), m->len);
        rd_kafka_headers_t* headers = nullptr;
        if (rd_kafka_message_headers(m, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR) {
          const char* name;
          const void* value;
          size_t size;
          for (size_t i = 0; rd_kafka_header_get_all(headers, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR; ++i) {
            r.headers[name] = std::string(static_cast<const char*>(value), size);
          }
        }
        records.push_back(std::move(r));
      }
      rd_kafka_message_destroy(m);
    }
  }
  rd_kafka_consumer_close(consumer);
  rd_kafka_destroy(consumer);
  std::stable_sort(records.begin(), records.end(), [](const Record& a, const Record& b) {
    return a.partition != b.partition ? a.partition < b.partition : a.offset < b.offset;
  });
  return records;
}

std::vector<std::string> KafkaTestCluster::topics() const {
  char error[512];
  rd_kafka_conf_t* conf = quiet_conf();
  rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap_.c_str(), error, sizeof error);
  rd_kafka_t* client = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error, sizeof error);
  std::vector<std::string> names;
  const rd_kafka_metadata_t* metadata = nullptr;
  if (client && rd_kafka_metadata(client, 1, nullptr, &metadata, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    for (int i = 0; i < metadata->topic_cnt; ++i) names.push_back(metadata->topics[i].topic);
    rd_kafka_metadata_destroy(metadata);
  }
  if (client) rd_kafka_destroy(client);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace vapipe::testing
