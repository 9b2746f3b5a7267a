#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/curve.h"
#include "pipeline/status.h"

namespace vapipe {

// Where publish sends [topic, payload] messages. The real one is a ZeroMQ XPUB socket.
class BusPublisher {
 public:
  virtual ~BusPublisher() = default;
  virtual Status send(const std::string& topic, const std::string& payload) = 0;
  // A bus with CURVE and a subscriber list: the public keys let in from now on.
  virtual Status set_authorized_subscribers(const std::vector<std::string>& /*keys*/) {
    return FailedPrecondition("this bus has no list of subscriber keys");
  }
};

struct ZmqBusOptions {
  std::string endpoint = "tcp://127.0.0.1:5560";
  bool lossless = true;                 // archive: block on a slow subscriber rather than drop
  uint32_t wait_for_subscribers = 0;    // hold the first message until this many subscribed
  double wait_timeout_s = 30.0;
  CurveKeyPair curve;                       // not empty: CURVE server (encrypted bus)
  std::vector<std::string> curve_clients;   // not empty: only these subscriber public keys get in
  std::string curve_clients_source;         // where the list came from, for refusal log lines
};

// Binds a ZeroMQ XPUB socket. With wait_for_subscribers, the first send() waits (up to the timeout)
// until that many subscriptions arrived, so an archive job's first results reach a subscriber that
// was started with it. `stop` aborts a blocked send.
Result<std::unique_ptr<BusPublisher>> make_zmq_bus_publisher(const ZmqBusOptions& options,
                                                             const std::atomic<bool>* stop);

}  // namespace vapipe
