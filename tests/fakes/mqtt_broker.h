// An MQTT broker for tests: a real Mosquitto (the `mosquitto` program, Debian's package of that name)
// on a loopback port of its own, with a config the test chooses (users and passwords, TLS), and a
// subscriber (libmosquitto's client) that records what it receives: what Home Assistant or Node-RED
// would get from the broker.
#pragma once

#include <fcntl.h>
#include <mosquitto.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/tcp_reachability.h"
#include "tests/fakes/free_port.h"

extern char** environ;

namespace vapipe::testing {

struct BrokerOptions {
  std::string user, password;  // a user: anonymous clients are refused
  bool tls = false;            // tests/media/tls/metrics-test.crt (127.0.0.1), no client certificates
  size_t max_packet_size = 0;  // a client that sends a larger packet is disconnected; 0: none
};

class MqttBroker {
 public:
  // `port` 0: a free one. Starts it and waits until it takes connections (fails the test otherwise).
  explicit MqttBroker(BrokerOptions options = {}, int port = 0)
      : options_(std::move(options)), port_(port ? port : free_loopback_tcp_port()) {
    dir_ = std::filesystem::temp_directory_path() / ("vapipe-mqtt-" + std::to_string(getpid()) + "-" +
                                                     std::to_string(port_));
    std::filesystem::create_directories(dir_);
    std::ofstream conf(dir_ / "mosquitto.conf");
    // Run as root, Mosquitto drops to its own user before it reads its files: it stays the user it is.
    const passwd* me = getpwuid(getuid());
    conf << "listener " << port_ << " 127.0.0.1\n"
         << "persistence false\n"
         << "user " << (me ? me->pw_name : "root") << "\n"
         << "log_dest file " << (dir_ / "broker.log").string() << "\nlog_type all\n"
         << "max_queued_messages 100000\n";
    if (options_.max_packet_size > 0) conf << "max_packet_size " << options_.max_packet_size << "\n";
    if (options_.tls) {
      const std::string tls = std::string(VAPIPE_SOURCE_DIR) + "/tests/media/tls/";
      conf << "certfile " << tls << "metrics-test.crt\nkeyfile " << tls << "metrics-test.key\n";
    }
    if (!options_.user.empty()) {
      const std::string passwords = (dir_ / "passwords").string();
      const std::string make = "mosquitto_passwd -b -c '" + passwords + "' '" + options_.user + "' '" +
                               options_.password + "' >/dev/null 2>&1";
      if (std::system(make.c_str()) != 0) std::abort();
      conf << "allow_anonymous false\npassword_file " << passwords << "\n";
    } else {
      conf << "allow_anonymous true\n";
    }
    conf.close();
    start();
  }
  ~MqttBroker() {
    kill(SIGTERM);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  MqttBroker(const MqttBroker&) = delete;
  MqttBroker& operator=(const MqttBroker&) = delete;

  int port() const { return port_; }
  std::string url() const { return std::string(options_.tls ? "mqtts" : "mqtt") + "://127.0.0.1:" + std::to_string(port_); }
  // Starts it again (after kill()), on the same port; true once it takes connections.
  bool start() {
    const std::string conf = (dir_ / "mosquitto.conf").string();
    const char* argv[] = {"mosquitto", "-c", conf.c_str(), nullptr};
    // Its own words go to its log file; what it says before reading its config (a warning when run as
    // root) goes nowhere.
    posix_spawn_file_actions_t quiet;
    posix_spawn_file_actions_init(&quiet);
    posix_spawn_file_actions_addopen(&quiet, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&quiet, 2, "/dev/null", O_WRONLY, 0);
    if (posix_spawnp(&pid_, "mosquitto", &quiet, nullptr, const_cast<char**>(argv), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&quiet);
    for (int i = 0; i < 500 && pid_ > 0; ++i) {
      if (tcp_connect_failure("mqtt://127.0.0.1:" + std::to_string(port_), std::chrono::milliseconds(100)).empty()) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  // Ends it with `sig` (SIGKILL: as a crash, its connections reset) and waits for it.
  void kill(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  // Freezes it (SIGSTOP): connections stay open, nothing is read or answered; resume() thaws it.
  void pause() { ::kill(pid_, SIGSTOP); }
  void resume() { ::kill(pid_, SIGCONT); }
  std::string log() const {
    std::ifstream in(dir_ / "broker.log");
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

 private:
  BrokerOptions options_;
  int port_;
  std::filesystem::path dir_;
  pid_t pid_ = -1;
};

struct MqttMessage {
  std::string topic, payload;
  bool retained = false;
  int qos = 0;
};

// Subscribes to `filter` (qos 1) and records what arrives; the constructor returns once the broker has
// confirmed the subscription.
class MqttSubscriber {
 public:
  MqttSubscriber(const MqttBroker& broker, const std::string& filter = "#", const std::string& user = "",
                 const std::string& password = "") {
    mosquitto_lib_init();
    client_ = mosquitto_new(nullptr, true, this);
    if (!user.empty()) mosquitto_username_pw_set(client_, user.c_str(), password.c_str());
    if (broker.url().rfind("mqtts", 0) == 0) {
      const std::string ca = std::string(VAPIPE_SOURCE_DIR) + "/tests/media/tls/metrics-test.crt";
      mosquitto_tls_set(client_, ca.c_str(), nullptr, nullptr, nullptr, nullptr);
    }
    mosquitto_message_callback_set(client_, [](mosquitto*, void* self, const mosquitto_message* m) {
      auto* s = static_cast<MqttSubscriber*>(self);
      std::lock_guard<std::mutex> lock(s->mutex_);
      s->messages_.push_back(MqttMessage{m->topic, std::string(static_cast<const char*>(m->payload), m->payloadlen),
                                         m->retain, m->qos});
      s->changed_.notify_all();
    });
    mosquitto_subscribe_callback_set(client_, [](mosquitto*, void* self, int, int, const int*) {
      auto* s = static_cast<MqttSubscriber*>(self);
      std::lock_guard<std::mutex> lock(s->mutex_);
      s->subscribed_ = true;
      s->changed_.notify_all();
    });
    if (mosquitto_connect(client_, "127.0.0.1", broker.port(), 30) != MOSQ_ERR_SUCCESS) return;
    mosquitto_subscribe(client_, nullptr, filter.c_str(), 1);
    mosquitto_loop_start(client_);
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_for(lock, std::chrono::seconds(10), [&] { return subscribed_; });
  }
  ~MqttSubscriber() {
    mosquitto_disconnect(client_);
    mosquitto_loop_stop(client_, false);
    mosquitto_destroy(client_);
  }
  bool subscribed() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return subscribed_;
  }
  std::vector<MqttMessage> messages() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return messages_;
  }
  // The messages on `topic` only.
  std::vector<MqttMessage> on(const std::string& topic) const {
    std::vector<MqttMessage> out;
    for (const MqttMessage& m : messages()) {
      if (m.topic == topic) out.push_back(m);
    }
    return out;
  }
  // Until `n` messages on `topic` (any topic if empty) have come, at most `timeout`.
  bool wait_for(size_t n, const std::string& topic = "", std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] {
      size_t count = 0;
      for (const MqttMessage& m : messages_) count += topic.empty() || m.topic == topic;
      return count >= n;
    });
  }

 private:
  mosquitto* client_ = nullptr;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<MqttMessage> messages_;
  bool subscribed_ = false;
};

}  // namespace vapipe::testing
