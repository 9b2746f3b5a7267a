// vapipe_kafka_test_cluster: a Kafka cluster for the e2e tests (tests/fakes/kafka_test_cluster.h),
// driven over stdin. It prints its bootstrap servers, then answers a command a line:
//   topics                  the topics, as a JSON list
//   read TOPIC [AT_LEAST]   the records of TOPIC, a JSON object a line
//                           ({"partition", "offset", "timestamp_ms", "key", "value", "headers"}),
//                           then "."
//   down | up               every broker stops answering, or answers again; then "."
// It ends when stdin does.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/fakes/kafka_test_cluster.h"

int main(int argc, char** argv) {
  const int brokers = argc > 1 ? std::atoi(argv[1]) : 3;
  vapipe::testing::KafkaTestCluster cluster(brokers > 0 ? brokers : 3);
  std::cout << cluster.bootstrap_servers() << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream words(line);
    std::string command;
    words >> command;
    if (command == "topics") {
      std::cout << nlohmann::json(cluster.topics()).dump() << std::endl;
    } else if (command == "read") {
      std::string topic;
      size_t at_least = 0;
      words >> topic >> at_least;
      for (const auto& r : cluster.read(topic, at_least)) {
        std::cout << nlohmann::json{{"partition", r.partition}, {"offset", r.offset},
                                    {"timestamp_ms", r.timestamp_ms}, {"key", r.key},
                                    {"value", r.value}, {"headers", r.headers}}
                         .dump()
                  << "\n";
      }
      std::cout << "." << std::endl;
    } else if (command == "down" || command == "up") {
      cluster.set_down(command == "down");
      std::cout << "." << std::endl;
    } else if (!command.empty()) {
      std::cout << "unknown command: " << command << std::endl;
    }
  }
  return 0;
}
