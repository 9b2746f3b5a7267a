#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <set>
#include <thread>

#include "pipeline/logging.h"
#include "pipeline/transport.h"
#include "stages/publish/bus_publisher.h"

namespace vapipe {
namespace {

// The bus socket, not bound yet, and its CURVE guard (null without CURVE).
Result<std::pair<zmq::socket_t, std::unique_ptr<CurveServerGuard>>> make_bus_socket(const ZmqBusOptions& options) {
  try {
    zmq::socket_t socket(zmq_context(), zmq::socket_type::xpub);
    socket.set(zmq::sockopt::sndhwm, 100000);
    socket.set(zmq::sockopt::linger, 2000);
    socket.set(zmq::sockopt::xpub_nodrop, options.lossless ? 1 : 0);
    socket.set(zmq::sockopt::xpub_verbose, 1);  // count every subscription, even of a topic seen before
    // ... and every unsubscription, a subscriber's that went away among them: one that connected and left
    // before the first message (a consumer restarting) was counted as there, and the one the job waited
    // for got nothing (found 2026-12-07).
    socket.set(zmq::sockopt::xpub_verboser, 1);
    std::unique_ptr<CurveServerGuard> curve;
    if (!options.curve.empty()) {
      auto guard = make_curve_server(socket, options.curve, options.curve_clients, options.curve_clients_source);
      if (!guard.ok()) return guard.status().with_context("publish.endpoint " + options.endpoint);
      curve = std::move(guard).value();
    }
    return std::make_pair(std::move(socket), std::move(curve));
  } catch (const zmq::error_t& e) {
    return Unavailable("publish.endpoint " + options.endpoint + ": " + e.what());
  }
}

// Counts the subscribers that connected, for publish.wait_for_subscribers. Subscription messages
// cannot be counted instead: one subscriber may send several (`vapipe sub --exit-on-summary` sends
// two), and two of them made "2 subscribers" out of one while the other was still connecting (it then
// missed the job's first results). A ZeroMQ socket monitor reports one handshake per connection; a key
// that the ZAP handler refused fails its handshake and is not counted.
class HandshakeCounter {
 public:
  // Attached before the socket binds, so that no early subscriber is missed.
  static Result<std::unique_ptr<HandshakeCounter>> attach(zmq::socket_t& socket) {
    static std::atomic<uint32_t> next{0};
    const std::string address = "inproc://vapipe-bus-monitor-" + std::to_string(next++);
    if (zmq_socket_monitor(socket.handle(), address.c_str(),
                           ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                               ZMQ_EVENT_DISCONNECTED) != 0) {
      return Unavailable(std::string("cannot monitor the bus socket: ") + zmq_strerror(zmq_errno()));
    }
    std::unique_ptr<HandshakeCounter> counter(new HandshakeCounter(socket.handle()));
    try {
      counter->events_ = zmq::socket_t(zmq_context(), zmq::socket_type::pair);
      counter->events_.set(zmq::sockopt::linger, 0);
      counter->events_.connect(address);
    } catch (const zmq::error_t& e) {
      return Unavailable(std::string("cannot read the bus socket's monitor: ") + e.what());
    }
    return counter;
  }
  ~HandshakeCounter() { zmq_socket_monitor(monitored_, nullptr, 0); }  // the bus socket is still open
  HandshakeCounter(const HandshakeCounter&) = delete;
  HandshakeCounter& operator=(const HandshakeCounter&) = delete;

  // Reads the events so far (each is two frames: event id and value, then the endpoint).
  void read_events() {
    zmq::message_t event, endpoint;
    while (events_.recv(event, zmq::recv_flags::dontwait)) {
      if (!events_.recv(endpoint, zmq::recv_flags::none)) break;
      uint16_t id = 0;
      if (event.size() >= sizeof id) std::memcpy(&id, event.data(), sizeof id);
      if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
        ++handshakes_;
        last_ = std::chrono::steady_clock::now();
      } else if (id == ZMQ_EVENT_DISCONNECTED) {
        ++disconnects_;
      } else {
        ++refused_;  // a handshake that failed (a CURVE key refused): its connection's end is no subscriber's
      }
    }
  }
  // Subscribers connected now: handshakes made, less the connections that ended since (other than those
  // whose handshake failed). One that came and went before the first message, a consumer restarting, is
  // not waited for (found 2026-12-07). (The monitor does not say which connection an event is of: one
  // that ended without a handshake, a port scanner's, makes the wait last longer, at most wait_timeout_s.)
  uint32_t connected() const {
    const uint32_t left = disconnects_ > refused_ ? disconnects_ - refused_ : 0;
    return handshakes_ > left ? handshakes_ - left : 0;
  }
  std::chrono::steady_clock::time_point last_connected() const { return last_; }
  zmq::socket_t& events() { return events_; }

 private:
  explicit HandshakeCounter(void* monitored) : monitored_(monitored) {}
  void* monitored_;
  zmq::socket_t events_;
  uint32_t handshakes_ = 0, disconnects_ = 0, refused_ = 0;
  std::chrono::steady_clock::time_point last_{};
};

class ZmqBusPublisher final : public BusPublisher {
 public:
  ZmqBusPublisher(std::unique_ptr<CurveServerGuard> curve, zmq::socket_t socket, ZmqBusOptions options,
                  const std::atomic<bool>* stop, std::unique_ptr<HandshakeCounter> handshakes)
      : curve_(std::move(curve)), socket_(std::move(socket)), options_(std::move(options)), stop_(stop),
        handshakes_(std::move(handshakes)) {}
  ~ZmqBusPublisher() override { handshakes_.reset(); }  // its monitor goes before the socket

  Status set_authorized_subscribers(const std::vector<std::string>& keys) override {
    if (!curve_ || options_.curve_clients.empty()) return BusPublisher::set_authorized_subscribers(keys);
    curve_->set_authorized(keys);
    const std::set<std::string> now(keys.begin(), keys.end());
    size_t removed = 0;
    for (const std::string& k : options_.curve_clients) removed += now.count(k) == 0;
    options_.curve_clients = keys;
    if (removed == 0) return Status::Ok();
    // ZAP runs at the handshake only: a subscriber whose key was removed stays connected until it
    // reconnects. A live bus is bound again, so every subscriber reconnects (ZeroMQ does it by itself
    // within ~0.1 s, missing what is published meanwhile) and the removed keys are refused. A lossless
    // (archive) bus is not: that would drop results its subscribers are owed.
    if (options_.lossless) {
      VAPIPE_LOG_WARN("publish: {} subscriber key(s) removed from {}; subscribers connected with them stay connected "
                      "until they reconnect (an archive job's bus is not bound again: it would drop results)",
                      removed, options_.curve_clients_source);
      return Status::Ok();
    }
    VAPIPE_RETURN_IF_ERROR(rebind());
    VAPIPE_LOG_INFO("publish: {} subscriber key(s) removed from {}: the bus was bound again, so subscribers "
                    "reconnect and those keys are refused", removed, options_.curve_clients_source);
    return Status::Ok();
  }

  Status send(const std::string& topic, const std::string& payload) override {
    if (!waited_) wait_for_subscribers();
    drain_subscriptions();
    try {
      zmq::message_t t(topic.data(), topic.size());
      zmq::message_t p(payload.data(), payload.size());
      // Lossless mode (XPUB_NODROP): a full subscriber queue makes send fail with EAGAIN; retry,
      // which holds the pipeline back instead of dropping a result.
      while (!socket_.send(t, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
        if (stop_ && stop_->load()) return Cancelled("publish cancelled");
        drain_subscriptions();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      while (!socket_.send(p, zmq::send_flags::none)) {
      }
    } catch (const zmq::error_t& e) {
      return Unavailable("publish on " + options_.endpoint + ": " + e.what());
    }
    return Status::Ok();
  }

 private:
  // Closes the bus socket (dropping what it holds) and binds a new one, with a new CURVE guard, at the
  // same endpoint. The old listener closes on ZeroMQ's I/O thread: the bind is retried for up to 2 s.
  Status rebind() {
    handshakes_.reset();  // its monitor is on the socket about to close
    auto fresh = make_bus_socket(options_);
    if (!fresh.ok()) return fresh.status();
    auto& [socket, curve] = *fresh;
    socket_.set(zmq::sockopt::linger, 0);
    socket_.close();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (true) {
      try {
        socket.bind(options_.endpoint);
        break;
      } catch (const zmq::error_t& e) {
        if (e.num() != EADDRINUSE || std::chrono::steady_clock::now() > deadline) {
          return Unavailable("publish.endpoint " + options_.endpoint + ": cannot bind again: " + e.what());
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    socket_ = std::move(socket);
    curve_ = std::move(curve);  // the old guard goes after the old socket
    return Status::Ok();
  }

  // XPUB delivers (un)subscriptions as messages: byte 1 = subscribe, 0 = unsubscribe (a subscriber that
  // disconnects unsubscribes each of its topics). subscriptions_: those in force.
  void drain_subscriptions() {
    zmq::message_t m;
    while (socket_.recv(m, zmq::recv_flags::dontwait)) {
      if (m.size() == 0) continue;
      if (static_cast<const uint8_t*>(m.data())[0] == 1) {
        ++subscriptions_;
      } else if (static_cast<const uint8_t*>(m.data())[0] == 0 && subscriptions_ > 0) {
        --subscriptions_;
      }
    }
  }

  // Until wait_for_subscribers subscribers have connected and each has had time to subscribe (it
  // does so as soon as it is connected: the last one gets kSettle), or the timeout.
  void wait_for_subscribers() {
    waited_ = true;
    if (options_.wait_for_subscribers == 0) return;
    constexpr auto kSettle = std::chrono::milliseconds(200);
    const uint32_t wanted = options_.wait_for_subscribers;
    VAPIPE_LOG_INFO("publish: waiting for {} subscriber(s) on {} (up to {} s)", wanted, options_.endpoint,
                    options_.wait_timeout_s);
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(options_.wait_timeout_s));
    auto connected = [&] { return handshakes_ ? handshakes_->connected() : subscriptions_; };
    auto ready = [&] {
      if (!handshakes_) return subscriptions_ >= wanted;  // no monitor: subscriptions, as an estimate
      return handshakes_->connected() >= wanted && subscriptions_ >= wanted &&
             std::chrono::steady_clock::now() - handshakes_->last_connected() >= kSettle;
    };
    while (!ready() && std::chrono::steady_clock::now() < deadline && !(stop_ && stop_->load())) {
      zmq::pollitem_t items[2] = {{socket_.handle(), 0, ZMQ_POLLIN, 0},
                                  {handshakes_ ? handshakes_->events().handle() : nullptr, 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, handshakes_ ? 2 : 1, std::chrono::milliseconds(20));
      drain_subscriptions();
      if (handshakes_) handshakes_->read_events();
    }
    if (!ready()) {
      VAPIPE_LOG_WARN("publish: only {} of {} subscriber(s) after {} s; publishing anyway", connected(), wanted,
                      options_.wait_timeout_s);
    } else {
      VAPIPE_LOG_INFO("publish: {} subscriber(s) connected ({} subscriptions)", connected(), subscriptions_);
    }
    handshakes_.reset();  // only the start waits
  }

  std::unique_ptr<CurveServerGuard> curve_;  // outlives the socket: its authentication holds to the end
  zmq::socket_t socket_;
  ZmqBusOptions options_;
  const std::atomic<bool>* stop_;
  bool waited_ = false;
  uint32_t subscriptions_ = 0;
  std::unique_ptr<HandshakeCounter> handshakes_;  // until the wait for subscribers ends
};

}  // namespace

Result<std::unique_ptr<BusPublisher>> make_zmq_bus_publisher(const ZmqBusOptions& options,
                                                             const std::atomic<bool>* stop) {
  VAPIPE_ASSIGN_OR_RETURN(auto made, make_bus_socket(options));
  auto& [socket, curve] = made;
  std::unique_ptr<HandshakeCounter> handshakes;
  if (options.wait_for_subscribers > 0) {
    auto counter = HandshakeCounter::attach(socket);
    if (counter.ok()) {
      handshakes = std::move(counter).value();
    } else {
      VAPIPE_LOG_WARN("publish: {}; publish.wait_for_subscribers counts subscriptions instead of subscribers",
                      counter.status().message());
    }
  }
  try {
    socket.bind(options.endpoint);
  } catch (const zmq::error_t& e) {
    return Unavailable("publish.endpoint " + options.endpoint + ": cannot bind: " + e.what());
  }
  return std::unique_ptr<BusPublisher>(
      new ZmqBusPublisher(std::move(curve), std::move(socket), options, stop, std::move(handshakes)));
}

}  // namespace vapipe
