// `vapipe sub`: subscribe to the result bus and print every payload as one JSON line.
// `vapipe keygen`: a CURVE key pair for the bus (or for stage edges across hosts).
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "cli/commands.h"
#include "pipeline/curve.h"
#include "pipeline/signals.h"
#include "pipeline/supervisor.h"
#include "stages/publish/message_filter.h"
#include "stages/publish/result_schema.h"

namespace vapipe::cli {
namespace {
template <typename T>
bool parse_number(const std::string& text, T* out) {
  std::istringstream in(text);
  in >> *out;
  return in && in.peek() == EOF;
}
}  // namespace

int sub_command(const std::vector<std::string>& args) {
  std::string endpoint = "tcp://127.0.0.1:5560";
  std::vector<std::string> topics;
  long long count = -1;
  double timeout_s = -1;
  bool exit_on_summary = false, with_topic = false;
  std::string server_key_arg, own_key_path;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool has_value = i + 1 < args.size();
    bool ok = true;
    if (a == "--endpoint" && has_value) endpoint = args[++i];
    else if (a == "--topic" && has_value) topics.push_back(args[++i]);
    // (-1, their "no limit" inside, is not a value to give: a negative number is refused.)
    else if (a == "--count" && has_value) ok = parse_number(args[++i], &count) && count >= 0;
    else if (a == "--timeout" && has_value) ok = parse_number(args[++i], &timeout_s) && timeout_s >= 0;
    else if (a == "--exit-on-summary") exit_on_summary = true;
    else if (a == "--with-topic") with_topic = true;
    else if (a == "--server-key" && has_value) server_key_arg = args[++i];
    else if (a == "--key" && has_value) own_key_path = args[++i];
    else ok = false;
    if (!ok) {
      // What was wrong first: a value that is not one, an option without its value, or an unknown one.
      const bool took_value = (a == "--count" || a == "--timeout") && has_value;
      if (took_value) {
        std::fprintf(stderr, "vapipe sub: %s %s: expected %s\n", a.c_str(), args[i].c_str(),
                     a == "--count" ? "a whole number of messages, 0 or more" : "a number of seconds, 0 or more");
      } else if (!has_value && (a == "--endpoint" || a == "--topic" || a == "--count" || a == "--timeout" ||
                                a == "--server-key" || a == "--key")) {
        std::fprintf(stderr, "vapipe sub: %s needs a value\n", a.c_str());
      } else {
        std::fprintf(stderr, "vapipe sub: unexpected argument '%s'\n", a.c_str());
      }
      std::fprintf(stderr,
                   "usage: vapipe sub [--endpoint E] [--topic TOPIC]... [--count N] [--exit-on-summary]\n"
                   "                  [--timeout SECONDS_IDLE] [--with-topic]\n"
                   "                  [--server-key KEY|FILE [--key SECRET_FILE]]   (a bus with CURVE)\n");
      return kExitUsage;
    }
  }
  // CURVE: the bus's public key, and our own pair (a fresh one unless the bus lists its subscribers).
  CurveKeyPair own_key;
  std::string server_key;
  if (!own_key_path.empty() && server_key_arg.empty()) {
    std::fprintf(stderr, "vapipe sub: --key needs --server-key (the bus's public key)\n");
    return kExitUsage;
  }
  if (!server_key_arg.empty()) {
    auto key = read_curve_public_key_argument(server_key_arg);
    if (!key.ok()) {
      std::fprintf(stderr, "vapipe sub: --server-key: %s\n", key.status().message().c_str());
      return kExitUsage;
    }
    server_key = key.value();
    auto own = own_key_path.empty() ? generate_curve_key_pair() : read_curve_secret_key_file(own_key_path);
    if (!own.ok()) {
      std::fprintf(stderr, "vapipe sub: --key: %s\n", own.status().message().c_str());
      return kExitUsage;
    }
    own_key = own.value();
  }
  if (topics.empty()) topics.push_back("");
  ShutdownFlags& flags = install_shutdown_handlers();
  zmq::context_t ctx(1);
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  sub.set(zmq::sockopt::rcvhwm, 0);
  sub.set(zmq::sockopt::linger, 0);
  if (!server_key.empty()) {
    if (Status s = make_curve_client(sub, own_key, server_key); !s.ok()) {
      std::fprintf(stderr, "vapipe sub: %s\n", s.message().c_str());
      return kExitUsage;
    }
  }
  // ZeroMQ subscribes by prefix; which topics are taken is decided below, as the job's sinks take theirs.
  for (const auto& t : topics) sub.set(zmq::sockopt::subscribe, !t.empty() && t.back() == '*' ? t.substr(0, t.size() - 1) : t);
  if (exit_on_summary) sub.set(zmq::sockopt::subscribe, std::string(kJobSummaryTopic));
  // A bus that refuses this subscriber's key (not in its curve.subscribers, or the wrong server key)
  // said only "nothing received", and libzmq never tries a refused handshake again: the key added to
  // the bus's list while this ran let nothing in (found 2026-12-07). The handshake's failures are
  // watched: said once, and the connection made again every few seconds.
  zmq::socket_t monitor(ctx, zmq::socket_type::pair);
  // (Without --server-key too: a bus that uses CURVE fails a plain subscriber's handshake, which said
  // only "nothing received".)
  const bool monitored =
      zmq_socket_monitor(sub.handle(), "inproc://vapipe-sub-handshakes",
                         ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                             ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) == 0;
  if (monitored) monitor.connect("inproc://vapipe-sub-handshakes");
  try {
    sub.connect(endpoint);
  } catch (const zmq::error_t& e) {
    std::fprintf(stderr, "vapipe sub: cannot connect to %s: %s\n", endpoint.c_str(), e.what());
    return kExitUsage;
  }
  auto last = std::chrono::steady_clock::now();
  long long printed = 0;
  bool refusal_said = false;
  std::optional<std::chrono::steady_clock::time_point> connect_again_at;
  while (!flags.stop.load() && (count < 0 || printed < count)) {
    zmq::pollitem_t items[2] = {{sub.handle(), 0, ZMQ_POLLIN, 0}, {monitor.handle(), 0, ZMQ_POLLIN, 0}};
    zmq::pollitem_t& item = items[0];
    try {
      zmq::poll(items, monitored ? 2 : 1, std::chrono::milliseconds(100));
    } catch (const zmq::error_t&) {
      continue;  // EINTR
    }
    if (monitored && (items[1].revents & ZMQ_POLLIN)) {
      zmq::message_t event, address;
      if (monitor.recv(event, zmq::recv_flags::dontwait) && event.more()) (void)monitor.recv(address);
      uint16_t id = 0;
      uint32_t value = 0;
      if (event.size() >= 6) {
        std::memcpy(&id, event.data(), 2);
        std::memcpy(&value, static_cast<const char*>(event.data()) + 2, 4);
      }
      if (!refusal_said && server_key.empty()) {
        refusal_said = true;
        std::fprintf(stderr, "vapipe sub: the bus at %s refused the handshake: it encrypts (CURVE, its "
                     "publish.curve_secret_key): give --server-key with the bus's public key, and --key with this "
                     "subscriber's key (README: \"An encrypted bus\"); trying again every 5 s\n", endpoint.c_str());
      } else if (!refusal_said) {
        refusal_said = true;
        std::fprintf(stderr, "vapipe sub: the bus at %s refused the handshake (%s): %s; trying again every 5 s\n",
                     endpoint.c_str(),
                     id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH ? ("ZMQ authentication failed, " + std::to_string(value)).c_str()
                                                           : "CURVE handshake failed",
                     id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
                         ? "this subscriber's public key is not in the job's publish.curve_authorized_keys file (add it: "
                           "the bus reads that file again as it changes)"
                         : "is --server-key the bus's public key, and does the bus use CURVE?");
      }
      connect_again_at = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    }
    if (connect_again_at && std::chrono::steady_clock::now() >= *connect_again_at) {
      connect_again_at.reset();
      try {
        sub.disconnect(endpoint);
        sub.connect(endpoint);
      } catch (const zmq::error_t&) {
      }
    }
    if (!(item.revents & ZMQ_POLLIN)) {
      if (timeout_s >= 0 && std::chrono::steady_clock::now() - last > std::chrono::duration<double>(timeout_s)) {
        std::fprintf(stderr, "vapipe sub: nothing received for %.1f s\n", timeout_s);
        return 4;
      }
      continue;
    }
    zmq::message_t topic, payload;
    if (!sub.recv(topic) || !topic.more() || !sub.recv(payload)) continue;
    while (payload.more() && sub.recv(payload)) {
    }  // not ours: skip extra parts
    last = std::chrono::steady_clock::now();
    const std::string t = topic.to_string();
    const bool is_summary = t == kJobSummaryTopic;
    // A stream's topic whole (`results/cam1` is not cam10's), `results/cam*` by prefix (topic_taken).
    const bool wanted = std::any_of(topics.begin(), topics.end(), [&](const std::string& p) { return topic_taken(p, t); });
    if (wanted || is_summary) {
      // The topic as a JSON string (escaped: a publisher that is not vapipe may put anything in it).
      if (with_topic) {
        std::printf("{\"topic\":%s,\"payload\":%s}\n",
                    nlohmann::json(t).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str(),
                    payload.to_string().c_str());
      } else {
        std::printf("%s\n", payload.to_string().c_str());
      }
      std::fflush(stdout);
      ++printed;
    }
    if (exit_on_summary && is_summary) break;
  }
  return 0;
}

int keygen_command(const std::vector<std::string>& args) {
  if (args.size() != 1 || args[0].empty() || args[0][0] == '-') {
    std::fprintf(stderr,
                 "usage: vapipe keygen PREFIX   writes PREFIX.secret (mode 0600) and PREFIX.public\n");
    return kExitUsage;
  }
  auto pair = generate_curve_key_pair();
  Status s = pair.ok() ? write_curve_key_files(args[0], pair.value()) : pair.status();
  if (!s.ok()) {
    std::fprintf(stderr, "vapipe keygen: %s\n", s.message().c_str());
    return kExitUsage;
  }
  std::printf("wrote %s.secret (keep it private) and %s.public\npublic key: %s\n", args[0].c_str(),
              args[0].c_str(), pair->public_key.c_str());
  return 0;
}

}  // namespace vapipe::cli
