// A Redis server for tests: a real one (the `redis-server` program, Debian's package of that name) on a
// loopback port of its own, keeping nothing on disk, with a password if the test asks; and redis-cli
// (redis-tools) to read what it holds, as a consumer of the streams would.
#pragma once

#include <cstdint>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/tcp_reachability.h"
#include "tests/fakes/free_port.h"

extern char** environ;

namespace vapipe::testing {

struct RedisOptions {
  std::string password;        // AUTH required
  bool tls = false;            // TLS only, as tests/media/tls/metrics-test.crt (127.0.0.1, self-signed)
  bool client_certificates = false;  // with tls: clients need a certificate that chain-root.crt signed
  bool cluster = false;        // a node of a Redis Cluster (make_redis_cluster joins them)
  int replica_of = 0;          // a replica of the server on this loopback port (its masterauth: password)
};

class RedisServer {
 public:
  // Starts it and waits until it takes connections (`started()` says whether it did).
  explicit RedisServer(RedisOptions options = {})
      : options_(std::move(options)), password_(options_.password), port_(free_port(options_.cluster)) {
    start();
  }
  ~RedisServer() {
    kill(SIGTERM);
    std::error_code ec;
    std::filesystem::remove_all(dir(), ec);
  }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  std::string url() const { return (options_.tls ? "rediss" : "redis") + std::string("://127.0.0.1:") + std::to_string(port_); }
  static std::string tls_dir() { return std::string(VAPIPE_SOURCE_DIR) + "/tests/media/tls/"; }
  bool started() const { return started_; }
  // Starts it again (after kill()), on the same port, empty; true once it takes connections.
  bool start() {
    // A folder of its own, emptied: a replica writes the master's data it loaded to dump.rdb there, and
    // any server loads a dump.rdb it finds in its folder when it starts (the tests' working directory
    // would hand one test's data to the next).
    std::error_code ec;
    std::filesystem::remove_all(dir(), ec);
    std::filesystem::create_directories(dir());
    std::vector<std::string> args = {"redis-server", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                                     "--logfile", "/dev/null", "--dir", dir()};
    if (options_.tls) {
      args.insert(args.end(), {"--port", "0", "--tls-port", std::to_string(port_), "--tls-cert-file",
                               tls_dir() + "metrics-test.crt", "--tls-key-file", tls_dir() + "metrics-test.key",
                               "--tls-auth-clients", options_.client_certificates ? "yes" : "no"});
      if (options_.client_certificates) args.insert(args.end(), {"--tls-ca-cert-file", tls_dir() + "chain-root.crt"});
    } else {
      args.insert(args.end(), {"--port", std::to_string(port_)});
    }
    if (!password_.empty()) args.insert(args.end(), {"--requirepass", password_, "--masterauth", password_});
    if (options_.replica_of) args.insert(args.end(), {"--replicaof", "127.0.0.1", std::to_string(options_.replica_of)});
    // With TLS, replication is over TLS too, and the master's certificate is checked (a replica of its own
    // is a master once promoted, so each server can replicate).
    if (options_.tls) {
      args.insert(args.end(), {"--tls-replication", "yes"});
      if (!options_.client_certificates) args.insert(args.end(), {"--tls-ca-cert-file", tls_dir() + "metrics-test.crt"});
    }
    if (options_.cluster) args.insert(args.end(), {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"});
    pid_ = spawn_quietly(args);
    started_ = false;
    for (int i = 0; i < 500 && pid_ > 0 && !started_; ++i) {
      started_ = cli({"PING"}) == "PONG\n";
      if (!started_) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return started_;
  }
  // Ends it with `sig` (SIGKILL: as a crash, its connections reset) and waits for it.
  // (Its folder goes with the object.)
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
  // `args` started with their output thrown away; its pid, or -1.
  static pid_t spawn_quietly(std::vector<std::string> args) {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t quiet;
    posix_spawn_file_actions_init(&quiet);
    posix_spawn_file_actions_addopen(&quiet, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&quiet, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid = -1;
    if (posix_spawnp(&pid, args[0].c_str(), &quiet, nullptr, argv.data(), environ) != 0) pid = -1;
    posix_spawn_file_actions_destroy(&quiet);
    return pid;
  }
  // What redis-cli prints for a command (each reply element on a line of its own).
  std::string cli(const std::vector<std::string>& command) const {
    return run_cli(port_, password_, options_.tls, options_.client_certificates, command);
  }
  // redis-cli's output for `command` to the server on a loopback port, with its password and TLS.
  static std::string run_cli(int port, const std::string& password, bool tls, bool client_certificates,
                             const std::vector<std::string>& command) {
    std::string line = "redis-cli -p " + std::to_string(port) + " --no-auth-warning";
    if (!password.empty()) line += " -a '" + password + "'";
    if (tls) line += " --tls --cacert " + tls_dir() + "metrics-test.crt";
    if (client_certificates) {
      line += " --cert " + tls_dir() + "chain-leaf-fullchain.crt --key " + tls_dir() + "chain-leaf.key";
    }
    for (const std::string& c : command) line += " '" + c + "'";
    line += " 2>&1";
    std::string out;
    if (FILE* p = popen(line.c_str(), "r")) {
      std::array<char, 4096> buffer{};
      size_t n = 0;
      while ((n = fread(buffer.data(), 1, buffer.size(), p)) > 0) out.append(buffer.data(), n);
      pclose(p);
    }
    return out;
  }

 private:
  std::string dir() const {
    return std::filesystem::temp_directory_path() / ("vapipe-redis-" + std::to_string(port_));
  }
  // A cluster node also listens on its port + 10000 (the cluster bus): both must be free.
  static int free_port(bool cluster) {
    for (int i = 0; i < 100; ++i) {
      const int port = free_loopback_tcp_port();
      if (!cluster) return port;
      if (port >= 55535) continue;
      // (a probe of port + 10000: bound, then let go)
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(static_cast<uint16_t>(port + 10000));
      const bool free = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
      if (fd >= 0) ::close(fd);
      if (free) return port;
    }
    return free_loopback_tcp_port();
  }
  RedisOptions options_;
  std::string password_;
  int port_;
  pid_t pid_ = -1;
  bool started_ = false;
};

// A Redis Sentinel (redis-server --sentinel) on a loopback port of its own, watching the master on
// `master_port` as "mymaster" (quorum 1: it alone decides a failover), finding it down after 1 s.
class RedisSentinel {
 public:
  // `password`: the sentinel's own (requirepass); `master_password`: the master's (auth-pass); `tls`:
  // it takes TLS only, and speaks TLS to the servers (as RedisOptions::tls, without client certificates).
  explicit RedisSentinel(int master_port, std::string password = "", std::string master_password = "",
                         bool tls = false)
      : port_(free_loopback_tcp_port()), password_(std::move(password)), tls_(tls) {
    dir_ = std::filesystem::temp_directory_path() / ("vapipe-redis-sentinel-" + std::to_string(port_));
    std::filesystem::create_directories(dir_);
    const std::string conf = dir_ + "/sentinel.conf";  // (a sentinel rewrites its file: one of its own)
    if (FILE* f = std::fopen(conf.c_str(), "w")) {
      if (tls_) {
        const std::string certs = RedisServer::tls_dir();
        std::fprintf(f, "port 0\ntls-port %d\ntls-replication yes\ntls-auth-clients no\n", port_);
        std::fprintf(f, "tls-cert-file %smetrics-test.crt\ntls-key-file %smetrics-test.key\n", certs.c_str(), certs.c_str());
        std::fprintf(f, "tls-ca-cert-file %smetrics-test.crt\n", certs.c_str());
      } else {
        std::fprintf(f, "port %d\n", port_);
      }
      std::fprintf(f, "bind 127.0.0.1\ndir %s\nlogfile /dev/null\n", dir_.c_str());
      std::fprintf(f, "sentinel monitor mymaster 127.0.0.1 %d 1\n", master_port);
      std::fprintf(f, "sentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 5000\n");
      if (!master_password.empty()) std::fprintf(f, "sentinel auth-pass mymaster %s\n", master_password.c_str());
      if (!password_.empty()) std::fprintf(f, "requirepass %s\n", password_.c_str());
      std::fclose(f);
    }
    pid_ = RedisServer::spawn_quietly({"redis-server", conf, "--sentinel"});
    for (int i = 0; i < 500 && pid_ > 0 && !started_; ++i) {
      started_ = cli({"PING"}) == "PONG\n";
      if (!started_) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~RedisSentinel() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  RedisSentinel(const RedisSentinel&) = delete;
  RedisSentinel& operator=(const RedisSentinel&) = delete;

  int port() const { return port_; }
  bool started() const { return started_; }
  // The master's port as this sentinel says it now (0: it says none).
  int master_port() const {
    const std::string out = cli({"SENTINEL", "get-master-addr-by-name", "mymaster"});
    const auto newline = out.find('\n');
    return newline == std::string::npos ? 0 : std::atoi(out.c_str() + newline + 1);
  }
  // Until it has found `replicas` replicas of the master (it asks the master every 10 s at first).
  bool wait_for_replicas(size_t replicas, std::chrono::milliseconds timeout) const {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      const std::string out = cli({"SENTINEL", "replicas", "mymaster"});
      size_t found = 0;
      // (each replica's fields, a line each: ... flags, "slave", ...; a replica that is down is "slave,s_down")
      for (size_t at = out.find("flags\nslave\n"); at != std::string::npos; at = out.find("flags\nslave\n", at + 1)) ++found;
      if (found >= replicas) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  std::string cli(const std::vector<std::string>& command) const {
    return RedisServer::run_cli(port_, password_, tls_, false, command);
  }

 private:
  int port_;
  std::string password_;
  bool tls_;
  std::string dir_;
  pid_t pid_ = -1;
  bool started_ = false;
};

// Joins `nodes` (started with RedisOptions::cluster) as a Redis Cluster, its 16384 slots spread over
// them, no replicas; true once every node says the cluster is ok.
inline bool make_redis_cluster(const std::vector<const RedisServer*>& nodes) {
  std::string line = "redis-cli --cluster create";
  for (const RedisServer* n : nodes) line += " 127.0.0.1:" + std::to_string(n->port());
  line += " --cluster-replicas 0 --cluster-yes >/dev/null 2>&1";
  if (std::system(line.c_str()) != 0) return false;
  for (int i = 0; i < 500; ++i) {
    bool ok = true;
    for (const RedisServer* n : nodes) ok = ok && n->cli({"CLUSTER", "INFO"}).find("cluster_state:ok") != std::string::npos;
    if (ok) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace vapipe::testing
