#include "stages/publish/redis_streams.h"

#include <cstdint>
#include <cstdlib>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "pipeline/envelope.h"
#include "pipeline/logging.h"

namespace vapipe {
namespace {

using Clock = std::chrono::steady_clock;

double unix_now_s() { return static_cast<double>(wall_clock_ns()) / 1e9; }  // (as the other sinks')

// Errors a server gives for a while and then no more (memory freed, a replica promoted, a dataset
// loaded): the message is sent again later rather than refused.
bool error_may_pass(const std::string& error) {
  // (ASK: a Redis Cluster's slot being moved to another node; once it is, the node answers MOVED.)
  for (const char* code : {"OOM", "LOADING", "BUSY", "READONLY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "NOREPLICAS",
                           "MISCONF", "NOAUTH", "ASK"}) {
    const size_t n = std::strlen(code);
    if (error.compare(0, n, code) == 0 && (error.size() == n || error[n] == ' ')) return true;
  }
  return false;
}

// OpenSSL's latest error, in its words ("certificate verify failed"); `fallback` when it has none.
std::string openssl_error(const std::string& fallback) {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return fallback;
  const char* reason = ERR_reason_error_string(e);
  return reason ? reason : fallback;
}

// What this client takes in a reply: its commands' replies are an id, OK, PONG or an error line. A
// port that answers otherwise (not Redis, or broken) is refused before it makes the sink buffer much.
constexpr int kMaxDepth = 8;
constexpr int64_t kMaxBulk = 1 << 20;      // bytes of a bulk string
constexpr int64_t kMaxElements = 1 << 16;  // of an array

}  // namespace

std::string resp_command(const std::vector<std::string_view>& args) {
  std::string out = "*" + std::to_string(args.size()) + "\r\n";
  for (std::string_view a : args) {
    out += "$" + std::to_string(a.size()) + "\r\n";
    out.append(a.data(), a.size());
    out += "\r\n";
  }
  return out;
}

Result<std::optional<RespReply>> RespReader::next() {
  size_t at = 0;
  auto reply = parse(&at, 0);
  if (!reply.ok()) return reply.status();
  if (*reply) buffer_.erase(0, at);
  return reply;
}

Result<std::optional<RespReply>> RespReader::parse(size_t* at, int depth) {
  if (depth > kMaxDepth) return InvalidArgument("a reply nested deeper than " + std::to_string(kMaxDepth));
  const size_t end = buffer_.find("\r\n", *at);
  if (end == std::string::npos) {
    if (buffer_.size() - *at > 64 * 1024) return InvalidArgument("a reply line longer than 64 KB: not a Redis server?");
    return std::optional<RespReply>();
  }
  if (end == *at) return InvalidArgument("an empty reply line: not a Redis server?");
  const char kind = buffer_[*at];
  const std::string line = buffer_.substr(*at + 1, end - *at - 1);
  auto number = [&](int64_t* n) {
    if (line.empty() || line.size() > 20) return false;
    size_t i = line[0] == '-' ? 1 : 0;
    if (i == line.size()) return false;
    int64_t v = 0;
    for (; i < line.size(); ++i) {
      if (line[i] < '0' || line[i] > '9' || v > (INT64_MAX - 9) / 10) return false;
      v = v * 10 + (line[i] - '0');
    }
    *n = line[0] == '-' ? -v : v;
    return true;
  };
  RespReply r;
  size_t next = end + 2;
  switch (kind) {
    case '+':
      r.type = RespReply::Type::kStatus;
      r.text = line;
      break;
    case '-':
      r.type = RespReply::Type::kError;
      r.text = line;
      break;
    case ':':
      r.type = RespReply::Type::kInteger;
      if (!number(&r.integer)) return InvalidArgument("an integer reply that is not a number");
      break;
    case '$': {
      int64_t n = 0;
      if (!number(&n) || n < -1) return InvalidArgument("a bulk reply of a bad length");
      if (n > kMaxBulk) return InvalidArgument("a bulk reply of " + std::to_string(n) + " bytes, more than this client takes");
      if (n == -1) {
        r.type = RespReply::Type::kNil;
        break;
      }
      if (buffer_.size() < next + static_cast<size_t>(n) + 2) return std::optional<RespReply>();
      if (buffer_.compare(next + static_cast<size_t>(n), 2, "\r\n") != 0) {
        return InvalidArgument("a bulk reply not ended by CRLF");
      }
      r.type = RespReply::Type::kBulk;
      r.text = buffer_.substr(next, static_cast<size_t>(n));
      next += static_cast<size_t>(n) + 2;
      break;
    }
    case '*': {
      int64_t n = 0;
      if (!number(&n) || n < -1) return InvalidArgument("an array reply of a bad length");
      if (n > kMaxElements) {
        return InvalidArgument("an array reply of " + std::to_string(n) + " elements, more than this client takes");
      }
      if (n == -1) {
        r.type = RespReply::Type::kNil;
        break;
      }
      r.type = RespReply::Type::kArray;
      for (int64_t i = 0; i < n; ++i) {
        auto element = parse(&next, depth + 1);
        if (!element.ok()) return element.status();
        if (!*element) return std::optional<RespReply>();
        r.elements.push_back(std::move(**element));
      }
      break;
    }
    default:
      return InvalidArgument(fmt::format("a reply that starts with byte 0x{:02X}: not a Redis server?",
                                         static_cast<unsigned char>(kind)));
  }
  *at = next;
  return std::optional<RespReply>(std::move(r));
}

RedisStreamsPublisher::RedisStreamsPublisher(const RedisConfig& config, size_t index, SinkPredecessors predecessors)
    : QueuedSink(config, "vapipe_redis_messages_total", std::move(predecessors)), config_(config) {
  url_ = parse_redis_url(config_.url).value();  // checked when the config loaded
  name_.set("publish.redis[" + std::to_string(index) + "] (" + url_.origin() + ")");
  stats_.name = name_.str();
  stats_.index = index;
  stats_.server = url_.origin();
  stats_.disconnected_since_unix_s = unix_now_s();
  password_ = config_.password;
  sentinel_password_ = config_.sentinel_password;
  if (!url_.sentinel()) {  // (redis+sentinel: none yet, the sentinels are asked)
    node_host_ = url_.host;
    node_port_ = url_.port;
  }
  thread_ = std::thread([this] { run(); });
}

RedisStreamsPublisher::~RedisStreamsPublisher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_now_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
  end_subscriber();
  disconnect(server_);
  disconnect(watch_);
}

void RedisStreamsPublisher::end_subscriber() {
  if (subscriber_.joinable()) subscriber_.join();  // (stop_now_: it gives up within 100 ms)
  std::lock_guard<std::mutex> lock(mutex_);
  if (subscription_) disconnect(subscription_->connection);
  subscription_.reset();
}

void RedisStreamsPublisher::set_retry_delays(std::chrono::milliseconds first, std::chrono::milliseconds longest,
                                             std::chrono::milliseconds served_a_while,
                                             std::chrono::milliseconds idle_ping) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    first_retry_delay_ = first;
    longest_retry_delay_ = longest;
    retry_delay_ = first;
    served_a_while_ = served_a_while;
    idle_ping_ = idle_ping;
  }
  changed_.notify_all();  // (an idle wait takes the new period)
}

void RedisStreamsPublisher::set_password(std::string password) {
  std::lock_guard<std::mutex> lock(mutex_);
  password_ = std::move(password);
}

void RedisStreamsPublisher::set_sentinel_password(std::string password) {
  std::lock_guard<std::mutex> lock(mutex_);
  sentinel_password_ = std::move(password);
}

std::string RedisStreamsPublisher::sentinel_auth() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return sentinel_password_.empty() ? std::string() : resp_command({"AUTH", sentinel_password_});
}

RedisStats RedisStreamsPublisher::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  RedisStats s = stats_;
  s.queued = queue_.size() + in_flight_count_;
  return s;
}

Status RedisStreamsPublisher::wait_connected(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  const bool settled = changed_.wait_for(lock, timeout, [&] { return stats_.connected || tries_ > 0; });
  if (stats_.connected) return Status::Ok();
  if (!settled) return Unavailable("no connection within " + std::to_string(timeout.count()) + " ms");
  return Unavailable(stats_.last_error);
}

void RedisStreamsPublisher::finish(std::chrono::milliseconds grace) {
  begin_finish(Clock::now() + grace);
  if (!thread_.joinable()) return;  // finished before
  thread_.join();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_now_ = true;  // (a subscription under way is given up: nothing is delivered any more)
  }
  end_subscriber();
  disconnect(server_);
  disconnect(watch_);
  const RedisStats s = stats();  // (connected: whether it still was when the time was up)
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.connected = false;
  }
  if (s.undelivered > 0) {
    VAPIPE_LOG_ERROR("{}: {} message(s) not delivered when {} ({}; its last error: {})", name_,
                     s.undelivered, stopped_by(), s.connected ? "no time left" : "it could not be reached",
                     s.last_error.empty() ? "none" : s.last_error);
  }
  VAPIPE_LOG_INFO("{}: {} message(s) delivered, {} refused, {} dropped (queue full), {} undelivered{}", name_,
                  s.delivered, s.refused, s.dropped, s.undelivered,
                  s.cooled_down ? ", " + std::to_string(s.cooled_down) + " held back (cooldown_s)" : std::string());
}

void RedisStreamsPublisher::disconnect(Connection& c) {
  if (c.tls) SSL_free(c.tls);  // (no close_notify: the connection is given up)
  c.tls = nullptr;
  if (c.tls_context) SSL_CTX_free(c.tls_context);
  c.tls_context = nullptr;
  if (c.fd >= 0) ::close(c.fd);
  c.fd = -1;
  c.reader = RespReader();
}

Status RedisStreamsPublisher::start_tls(Connection& c, const std::string& host, Clock::time_point deadline) {
  c.tls_context = SSL_CTX_new(TLS_client_method());
  if (!c.tls_context) return Internal("cannot make a TLS context: " + openssl_error("OpenSSL failed"));
  SSL_CTX_set_min_proto_version(c.tls_context, TLS1_2_VERSION);
  if (config_.tls_verify) {
    SSL_CTX_set_verify(c.tls_context, SSL_VERIFY_PEER, nullptr);
    const bool trusted = config_.ca_file.empty()
                             ? SSL_CTX_set_default_verify_paths(c.tls_context) == 1
                             : SSL_CTX_load_verify_locations(c.tls_context, config_.ca_file.c_str(), nullptr) == 1;
    if (!trusted) {
      return Unavailable("cannot read the authorities to trust" +
                         (config_.ca_file.empty() ? std::string(" of this machine") : " in " + config_.ca_file) + ": " +
                         openssl_error("unreadable"));
    }
  }
  if (!config_.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(c.tls_context, config_.cert_file.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(c.tls_context, config_.key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(c.tls_context) != 1) {
      return Unavailable("cannot use the client certificate " + config_.cert_file + " with its key " + config_.key_file +
                         ": " + openssl_error("unreadable"));
    }
  }
  c.tls = SSL_new(c.tls_context);
  if (!c.tls || SSL_set_fd(c.tls, c.fd) != 1) return Internal("cannot start TLS: " + openssl_error("OpenSSL failed"));
  // The certificate must name the host connected to: an address (its IP SAN), or a name (also sent as
  // SNI). (A cluster's node or Sentinel's master is named as the server announces it.)
  in6_addr address{};
  const bool is_address = inet_pton(AF_INET, host.c_str(), &address) == 1 ||
                          inet_pton(AF_INET6, host.c_str(), &address) == 1;
  if (!is_address) SSL_set_tlsext_host_name(c.tls, host.c_str());
  if (config_.tls_verify) {
    const int named = is_address ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c.tls), host.c_str())
                                 : SSL_set1_host(c.tls, host.c_str());
    if (named != 1) return Internal("cannot set the name to check in the server's certificate");
  }
  for (;;) {
    ERR_clear_error();
    const int rc = SSL_connect(c.tls);
    if (rc == 1) return Status::Ok();
    const int error = SSL_get_error(c.tls, rc);
    if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) {
      const long verified = SSL_get_verify_result(c.tls);
      if (config_.tls_verify && verified != X509_V_OK) {
        return Unavailable(std::string("the server's certificate is refused: ") +
                           X509_verify_cert_error_string(verified) +
                           (config_.ca_file.empty() ? " (set ca_file to the authority that signed it)" : ""));
      }
      return Unavailable("the TLS handshake failed: " +
                         openssl_error(error == SSL_ERROR_SYSCALL ? "the server closed the connection (not TLS?)"
                                                                  : "no reason given"));
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_now_) return Cancelled("publish stopped");
    }
    if (Clock::now() >= deadline) {
      return Unavailable("no TLS handshake within " + fmt::format("{:g}", config_.timeout_s) + " s");
    }
    pollfd p{c.fd, static_cast<short>(error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), 0};
    ::poll(&p, 1, 100);
  }
}

Status RedisStreamsPublisher::connect() {
  if (url_.sentinel() && node_host_.empty()) VAPIPE_RETURN_IF_ERROR(ask_sentinels());
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(config_.timeout_s));
  VAPIPE_RETURN_IF_ERROR(open_connection(server_, node_host_, node_port_, deadline));
  Status greeted = greet();
  if (greeted.ok() || greeted.code() == StatusCode::kCancelled) return greeted;
  // What a mistake in the url's scheme or the certificates looks like from here, said as such.
  const std::string& failure = greeted.message();
  if (failure.find("certificate required") != std::string::npos) {
    return Unavailable(failure + " (the server asks for a client certificate: set cert_file and key_file)");
  }
  if (url_.tls && config_.cert_file.empty() &&
      (failure.find("the connection broke") == 0 || failure.find("closed the connection") != std::string::npos)) {
    // (TLS 1.3: a server that wants a client certificate may close the connection before its alert is read)
    return Unavailable(failure + " (does the server ask for a client certificate? then set cert_file and key_file)");
  }
  if (!url_.tls && (failure.find("the connection broke") == 0 || failure.find("closed the connection") != std::string::npos ||
                    failure.find("byte 0x15") != std::string::npos)) {  // (0x15: a TLS alert)
    return Unavailable(failure + " (a port that speaks TLS? then the url is " + url_.scheme.substr(0, 5) + "s" +
                       url_.scheme.substr(5) + "://)");
  }
  return greeted;
}

Result<RespReply> RedisStreamsPublisher::ask_master_address(const RedisUrl::Address& sentinel) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(config_.timeout_s));
  Connection asked;  // (its own: a sentinel is asked before the master is connected to, or instead of it)
  auto ask = [&]() -> Result<RespReply> {
    VAPIPE_RETURN_IF_ERROR(open_connection(asked, sentinel.host, sentinel.port, deadline));
    std::string commands = sentinel_auth();
    const bool auth = !commands.empty();
    commands += resp_command({"SENTINEL", "get-master-addr-by-name", url_.master_name});
    VAPIPE_RETURN_IF_ERROR(write_all(asked, commands));
    if (auth) {
      VAPIPE_ASSIGN_OR_RETURN(RespReply auth, read_reply(asked));
      if (auth.type == RespReply::Type::kError) return Unavailable("it refused sentinel_password_file's password: " + auth.text);
    }
    return read_reply(asked);
  };
  auto reply = ask();
  disconnect(asked);
  return reply;
}

std::optional<std::pair<std::string, int>> RedisStreamsPublisher::master_address(const RespReply& reply) {
  if (reply.type != RespReply::Type::kArray || reply.elements.size() != 2 ||
      reply.elements[0].type != RespReply::Type::kBulk || reply.elements[1].type != RespReply::Type::kBulk ||
      std::atoi(reply.elements[1].text.c_str()) <= 0) {
    return std::nullopt;
  }
  return std::make_pair(reply.elements[0].text, std::atoi(reply.elements[1].text.c_str()));
}

void RedisStreamsPublisher::take_master_address(const std::pair<std::string, int>& address, const std::string& sentinel) {
  node_host_ = address.first;
  node_port_ = address.second;
  HttpUrl master;
  master.host = node_host_;
  master.port = node_port_;
  if (!master_at_.empty() && master_at_ != master.host_port()) {
    VAPIPE_LOG_INFO("{}: sentinel {} says the master '{}' is at {} now (it was at {})", name_, sentinel,
                    url_.master_name, master.host_port(), master_at_);
  }
  master_at_ = master.host_port();
}

Status RedisStreamsPublisher::ask_sentinels() {
  // Redis's guide for Sentinel clients: each sentinel in turn until one names the master; that one is
  // asked first next time.
  std::string failures;
  size_t unknown = 0;  // sentinels that know no master of that name
  const std::string where = "the master '" + url_.master_name + "'";
  for (size_t k = 0; k < url_.sentinels.size(); ++k) {
    const size_t i = (sentinel_first_ + k) % url_.sentinels.size();
    const RedisUrl::Address& s = url_.sentinels[i];
    HttpUrl shown;
    shown.host = s.host;
    shown.port = s.port;
    const std::string name = shown.host_port();
    auto reply = ask_master_address(s);
    std::string why;
    if (!reply.ok()) {
      if (reply.status().code() == StatusCode::kCancelled) return reply.status();
      why = reply.status().message();
    } else if (reply->type == RespReply::Type::kNil) {
      ++unknown;
      why = "it watches no master of that name";
    } else if (reply->type == RespReply::Type::kError) {
      why = reply->text.rfind("NOAUTH", 0) == 0 ? "it asks for a password (NOAUTH): set sentinel_password_file"
                                                : "it answered: " + reply->text;
    } else if (const auto address = master_address(*reply); !address) {
      why = "its answer is not an address: not a sentinel?";
    } else {
      sentinel_first_ = i;
      take_master_address(*address, name);
      return Status::Ok();
    }
    failures += (failures.empty() ? "" : "; ") + name + ": " + why;
  }
  if (unknown == url_.sentinels.size()) {
    return InvalidArgument("no sentinel watches a master named '" + url_.master_name +
                           "' (the url's path names it as their `sentinel monitor` does)");
  }
  return Unavailable("no sentinel said where " + where + " is (" + failures + ")");
}

RedisStreamsPublisher::Subscription RedisStreamsPublisher::subscribe_to_sentinel(size_t sentinel) {
  Subscription made;
  made.sentinel = sentinel;
  const RedisUrl::Address& s = url_.sentinels[sentinel];
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(config_.timeout_s));
  Connection& c = made.connection;
  made.status = [&]() -> Status {
    VAPIPE_RETURN_IF_ERROR(open_connection(c, s.host, s.port, deadline));
    std::string commands = sentinel_auth();
    const bool auth = !commands.empty();
    commands += resp_command({"SUBSCRIBE", kFailoverBegins, kFailoverAborted, kPromoted, kSwitched});
    VAPIPE_RETURN_IF_ERROR(write_all(c, commands));
    if (auth) {
      VAPIPE_ASSIGN_OR_RETURN(RespReply auth, read_reply(c));
      if (auth.type == RespReply::Type::kError) return Unavailable("it refused the password: " + auth.text);
    }
    for (int channel = 0; channel < 4; ++channel) {
      VAPIPE_ASSIGN_OR_RETURN(RespReply subscribed, read_reply(c));
      if (subscribed.type != RespReply::Type::kArray || subscribed.elements.empty() ||
          subscribed.elements[0].text != "subscribe") {
        return Unavailable("it did not take SUBSCRIBE");
      }
    }
    return Status::Ok();
  }();
  // A failover between the master's address asked and the subscription made: asked again, here too.
  if (made.status.ok()) {
    if (auto reply = ask_master_address(s); reply.ok()) made.master = master_address(*reply);
  }
  return made;
}

RedisStreamsPublisher::MasterCheck RedisStreamsPublisher::check_master() {
  const auto now = Clock::now();
  // kHold while a failover that began has not given its new master, for at most kFailoverHold.
  const auto held = [&] {
    if (failover_hold_until_ && now >= *failover_hold_until_) {
      failover_hold_until_.reset();
      VAPIPE_LOG_WARN("{}: no sentinel said the master '{}' was promoted within {} s of the failover's start: "
                      "messages go to {} again", name_, url_.master_name,
                      std::chrono::duration_cast<std::chrono::seconds>(kFailoverHold).count(), master_at_);
    }
    return failover_hold_until_ ? MasterCheck::kHold : MasterCheck::kSame;
  };
  if (watch_.fd < 0) {
    std::optional<Subscription> made;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      made.swap(subscription_);
    }
    if (!made) {
      if (subscriber_.joinable() || now < watch_next_try_) return held();  // (being made, or not yet)
      // To the sentinel that answered last, on subscriber_: delivery goes on meanwhile.
      const size_t sentinel = sentinel_first_;
      subscriber_ = std::thread([this, sentinel] {
        Subscription result = subscribe_to_sentinel(sentinel);
        std::lock_guard<std::mutex> lock(mutex_);
        subscription_ = std::move(result);
      });
      return held();
    }
    subscriber_.join();
    const RedisUrl::Address& s = url_.sentinels[made->sentinel];
    HttpUrl watched;
    watched.host = s.host;
    watched.port = s.port;
    if (!made->status.ok()) {
      disconnect(made->connection);
      if (made->status.code() == StatusCode::kCancelled) return held();
      watch_delay_ = std::min(std::max(watch_delay_ * 2, std::chrono::milliseconds(1000)), longest_retry_delay_);
      watch_next_try_ = now + watch_delay_;
      if (sentinel_first_ == made->sentinel) {
        sentinel_first_ = (sentinel_first_ + 1) % url_.sentinels.size();  // (the next one next time)
      }
      const std::string why = "cannot watch sentinel " + watched.host_port() + " for failovers: " +
                              made->status.message();
      if (!said_watch_failing_) {
        VAPIPE_LOG_WARN("{}: {}; a failover is found only once the old master stops taking messages, and those "
                        "sent to it meanwhile can be lost (tried again in {:g} s, then less often)", name_, why,
                        std::chrono::duration<double>(watch_delay_).count());
        said_watch_failing_ = true;
      } else {
        VAPIPE_LOG_DEBUG("{}: {}", name_, why);
      }
      std::lock_guard<std::mutex> lock(mutex_);
      stats_.sentinel_watched.clear();
      stats_.sentinel_watch_error = why;
      return held();
    }
    std::swap(watch_, made->connection);
    watch_delay_ = std::chrono::milliseconds(0);
    watching_ = watched.host_port();
    if (said_watch_failing_) {
      VAPIPE_LOG_INFO("{}: failovers are watched through sentinel {} again", name_, watching_);
      said_watch_failing_ = false;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stats_.sentinel_watched = watching_;
      stats_.sentinel_watch_error.clear();
    }
    // Where the sentinel says the master is, asked once subscribed: a failover meanwhile is followed.
    if (!made->master || (made->master->first == node_host_ && made->master->second == node_port_)) return held();
    take_master_address(*made->master, watching_);
    return MasterCheck::kSwitched;
  }
  // What the sentinel pushed meanwhile, without waiting, ["message", <event>, <its words>]:
  //  - +failover-state-send-slaveof-noone "slave <ip>:<port> <ip> <port> @ <master name> <ip> <port>":
  //    the replica chosen is about to be made the master. Messages wait from then on: the old master
  //    still takes writes until Sentinel makes it a replica, which drops them, and Sentinel names the
  //    new one only once it has seen it promoted (its INFO, each second).
  //  - +promoted-slave, same words: it has; SENTINEL get-master-addr-by-name names it from then on.
  //  - +switch-master "<master name> <old ip> <old port> <new ip> <new port>": the failover has ended.
  //  - -failover-abort-slave-timeout "master <master name> <ip> <port>": the replica was not promoted.
  char buffer[16 * 1024];
  for (;;) {
    ERR_clear_error();
    const ssize_t n = watch_.tls ? SSL_read(watch_.tls, buffer, sizeof buffer)
                                 : ::recv(watch_.fd, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n > 0) {
      watch_.reader.feed(std::string_view(buffer, static_cast<size_t>(n)));
      continue;
    }
    const bool nothing_more = watch_.tls ? SSL_get_error(watch_.tls, static_cast<int>(n)) == SSL_ERROR_WANT_READ
                                         : n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
    if (!nothing_more) disconnect(watch_);  // (subscribed again next time: the sentinel went away)
    break;
  }
  bool switched = false;
  for (;;) {
    auto message = watch_.fd >= 0 ? watch_.reader.next() : Result<std::optional<RespReply>>(std::nullopt);
    if (!message.ok()) {
      disconnect(watch_);
      break;
    }
    if (!*message) break;
    const RespReply& m = **message;
    if (m.type != RespReply::Type::kArray || m.elements.size() != 3 || m.elements[0].text != "message") continue;
    std::istringstream words(m.elements[2].text);
    std::string name, new_host, event = m.elements[1].text;
    int new_port = 0;
    if (event == kSwitched) {
      std::string old_host, old_port;
      if (!(words >> name >> old_host >> old_port >> new_host >> new_port)) continue;
    } else if (event == kFailoverAborted) {
      std::string kind;
      if (!(words >> kind >> name) || name != url_.master_name || !failover_hold_until_) continue;
      failover_hold_until_.reset();
      VAPIPE_LOG_WARN("{}: the failover of the master '{}' was given up ({}): messages go to {} again", name_, name,
                      event, master_at_);
      continue;
    } else {
      std::string kind, replica, at;
      if (!(words >> kind >> replica >> new_host >> new_port >> at >> name) || at != "@") continue;
    }
    if (name != url_.master_name) continue;
    if (event == kFailoverBegins) {
      failover_hold_until_ = now + kFailoverHold;
      VAPIPE_LOG_INFO("{}: sentinel {} is making {}:{} the master '{}' ({}): messages wait for it", name_, watching_,
                      new_host, new_port, name, event);
      continue;
    }
    failover_hold_until_.reset();
    if (new_host == node_host_ && new_port == node_port_) continue;
    HttpUrl master;
    master.host = new_host;
    master.port = new_port;
    VAPIPE_LOG_INFO("{}: sentinel {} says a failover has made {} the master '{}' ({}), no more {}", name_, watching_,
                    master.host_port(), name, event, master_at_);
    master_at_ = master.host_port();
    switched = true;
    node_host_ = new_host;
    node_port_ = new_port;
  }
  return switched ? MasterCheck::kSwitched : held();
}

Status RedisStreamsPublisher::open_connection(Connection& c, const std::string& host, int port_number,
                                              Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(port_number);
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return Unavailable("cannot resolve " + host + ": " + gai_strerror(rc));
  }
  std::string why = "no address";
  for (addrinfo* a = found; a && c.fd < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = -1;
      errno = ETIMEDOUT;
      while (Clock::now() < deadline) {
        {
          std::lock_guard<std::mutex> lock(mutex_);
          if (stop_now_) break;
        }
        const int ready = ::poll(&p, 1, 100);
        if (ready > 0) {
          int error = 0;
          socklen_t size = sizeof error;
          getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size);
          rc = error == 0 ? 0 : -1;
          errno = error;
          break;
        }
      }
    }
    if (rc != 0) {
      why = errno == ETIMEDOUT ? "no answer within " + fmt::format("{:g}", config_.timeout_s) + " s"
                               : std::string(errno == ECONNREFUSED ? "connection refused" : std::strerror(errno));
      ::close(fd);
      continue;
    }
    c.fd = fd;
  }
  freeaddrinfo(found);
  if (c.fd < 0) {
    const bool ipv6 = host.find(':') != std::string::npos;
    return Unavailable("cannot connect to " + (ipv6 ? "[" + host + "]" : host) + ":" + port + ": " + why);
  }
  const int on = 1;
  setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  setsockopt(c.fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  if (url_.tls) VAPIPE_RETURN_IF_ERROR(start_tls(c, host, deadline));
  return Status::Ok();
}

Status RedisStreamsPublisher::greet() {
  // AUTH (the password is never in an error: the server's words are, WRONGPASS ...), SELECT, and a
  // PING, which a port that is not Redis's fails.
  std::string password;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    password = password_;
  }
  std::string handshake;
  if (!password.empty()) {
    handshake += config_.username.empty() ? resp_command({"AUTH", password})
                                          : resp_command({"AUTH", config_.username, password});
  }
  if (config_.db != 0) handshake += resp_command({"SELECT", std::to_string(config_.db)});
  handshake += resp_command({"PING"});
  if (url_.sentinel()) handshake += resp_command({"ROLE"});  // (a sentinel's answer may be out of date)
  VAPIPE_RETURN_IF_ERROR(write_all(server_, handshake));
  if (!password.empty()) {
    VAPIPE_ASSIGN_OR_RETURN(RespReply auth, read_reply(server_));
    if (auth.type == RespReply::Type::kError) return Unavailable("the server refused the password: " + auth.text);
  }
  const auto asks_password = [](const RespReply& r) {
    return r.type == RespReply::Type::kError && r.text.rfind("NOAUTH", 0) == 0;
  };
  const Status no_password = Unavailable("the server asks for a password (NOAUTH): set password_file");
  if (config_.db != 0) {
    VAPIPE_ASSIGN_OR_RETURN(RespReply select, read_reply(server_));
    if (asks_password(select)) return no_password;
    if (select.type == RespReply::Type::kError) {
      return InvalidArgument("the server refused database " + std::to_string(config_.db) + ": " + select.text);
    }
  }
  VAPIPE_ASSIGN_OR_RETURN(RespReply pong, read_reply(server_));
  if (asks_password(pong)) return no_password;
  if (pong.type == RespReply::Type::kError) return Unavailable("the server answered PING with: " + pong.text);
  if (pong.type != RespReply::Type::kStatus || pong.text != "PONG") {
    return Unavailable("the server answered PING with something else than PONG: not a Redis server?");
  }
  if (url_.sentinel()) {
    VAPIPE_ASSIGN_OR_RETURN(RespReply role, read_reply(server_));
    if (role.type != RespReply::Type::kArray || role.elements.empty() || role.elements[0].text != "master") {
      const std::string is = role.type == RespReply::Type::kArray && !role.elements.empty() ? role.elements[0].text
                                                                                           : "not a master";
      return Unavailable("the sentinels' master '" + url_.master_name + "' at " + master_at_ + " says it is " +
                         (is == "slave" ? "a replica" : is) + " (a failover under way?)");
    }
  }
  return Status::Ok();
}

Status RedisStreamsPublisher::write_all(Connection& c, std::string_view bytes) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(config_.timeout_s));
  while (!bytes.empty()) {
    short wait_for = POLLOUT;
    if (c.tls) {
      ERR_clear_error();
      const int n = SSL_write(c.tls, bytes.data(), static_cast<int>(std::min<size_t>(bytes.size(), 1 << 30)));
      if (n > 0) {
        bytes.remove_prefix(static_cast<size_t>(n));
        continue;
      }
      const int error = SSL_get_error(c.tls, n);
      if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) {
        return Unavailable("the connection broke: " + openssl_error(std::strerror(errno)));
      }
      if (error == SSL_ERROR_WANT_READ) wait_for = POLLIN;
    } else {
      const ssize_t n = ::send(c.fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n > 0) {
        bytes.remove_prefix(static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return Unavailable(std::string("the connection broke: ") + std::strerror(errno));
      }
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (time_is_up()) return Cancelled("publish stopped");
    }
    if (Clock::now() >= deadline) {
      return Unavailable("the server took nothing for " + fmt::format("{:g}", config_.timeout_s) + " s");
    }
    pollfd p{c.fd, wait_for, 0};
    ::poll(&p, 1, 100);
  }
  return Status::Ok();
}

Result<RespReply> RedisStreamsPublisher::read_reply(Connection& c) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(config_.timeout_s));
  char buffer[64 * 1024];
  for (;;) {
    auto reply = c.reader.next();
    if (!reply.ok()) return Unavailable("the server's reply is not Redis's protocol: " + reply.status().message());
    if (*reply) return std::move(**reply);
    short wait_for = POLLIN;
    if (c.tls) {
      ERR_clear_error();
      const int n = SSL_read(c.tls, buffer, sizeof buffer);
      if (n > 0) {
        c.reader.feed(std::string_view(buffer, static_cast<size_t>(n)));
        continue;
      }
      const int error = SSL_get_error(c.tls, n);
      if (error == SSL_ERROR_ZERO_RETURN) return Unavailable("the server closed the connection");
      if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) {
        return Unavailable("the connection broke: " + openssl_error("the server closed the connection"));
      }
      if (error == SSL_ERROR_WANT_WRITE) wait_for = POLLOUT;
    } else {
      const ssize_t n = ::recv(c.fd, buffer, sizeof buffer, 0);
      if (n > 0) {
        c.reader.feed(std::string_view(buffer, static_cast<size_t>(n)));
        continue;
      }
      if (n == 0) return Unavailable("the server closed the connection");
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return Unavailable(std::string("the connection broke: ") + std::strerror(errno));
      }
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (time_is_up()) return Cancelled("publish stopped");
    }
    if (Clock::now() >= deadline) {
      return Unavailable("no answer from the server within " + fmt::format("{:g}", config_.timeout_s) + " s");
    }
    pollfd p{c.fd, wait_for, 0};
    ::poll(&p, 1, 100);
  }
}

Status RedisStreamsPublisher::settle_unanswered() {
  // The messages of each stream that a broken connection left unanswered, in order, and the stream's
  // entries after the last one it answered: the server took a prefix of what was sent (it runs one
  // connection's commands in order), so those entries are that prefix, and its messages are not sent
  // again. A stream whose last entry this sink does not know (none answered since publish started),
  // or whose entries are not that prefix (another writer), has its messages sent again, as before.
  std::vector<std::string> keys;
  std::map<std::string, std::vector<SinkMessage*>> sent;
  for (SinkMessage& m : in_flight_) {
    if (!m.unanswered) continue;
    m.unanswered = false;  // (whatever comes of this: a check that fails is not made again)
    const std::string key = stream_key(m.topic);
    if (last_ids_.count(key) == 0 || asking_ || m.body.size() > kMaxCheckedBytes) continue;
    if (sent[key].empty()) keys.push_back(key);
    sent[key].push_back(&m);
  }
  if (keys.empty()) return Status::Ok();
  std::string commands;
  for (const std::string& key : keys) {
    // The entries after the last answered one, "<ms>-<n+1>" onwards (Redis 5 has no exclusive range).
    const std::string& last = last_ids_[key];
    const size_t dash = last.find('-');
    const std::string after = dash == std::string::npos ? last
                                                        : last.substr(0, dash + 1) +
                                                              std::to_string(std::strtoull(last.c_str() + dash + 1, nullptr, 10) + 1);
    commands += resp_command({"XRANGE", key, after, "+", "COUNT", std::to_string(sent[key].size())});
  }
  VAPIPE_RETURN_IF_ERROR(write_all(server_, commands));
  std::set<const SinkMessage*> added;
  for (const std::string& key : keys) {
    VAPIPE_ASSIGN_OR_RETURN(RespReply entries, read_reply(server_));
    if (entries.type != RespReply::Type::kArray) continue;  // (MOVED: the key is on another node)
    const std::vector<SinkMessage*>& mine = sent[key];
    size_t matched = 0;
    for (const RespReply& e : entries.elements) {
      // [id, [field, value, ...]]: ours are [topic, <bus topic>, payload, <body>]
      if (matched == mine.size() || e.type != RespReply::Type::kArray || e.elements.size() != 2) break;
      const std::vector<RespReply>& fields = e.elements[1].elements;
      if (fields.size() != 4 || fields[1].text != mine[matched]->topic || fields[3].text != mine[matched]->body) break;
      added.insert(mine[matched]);
      last_ids_[key] = e.elements[0].text;
      ++matched;
    }
    if (matched < entries.elements.size()) {
      VAPIPE_LOG_DEBUG("{}: the stream {} holds entries this sink did not add: its unanswered messages are sent again",
                       name_, key);
    }
  }
  if (added.empty()) return Status::Ok();
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    if (added.count(&*it) == 0) {
      ++it;
      continue;
    }
    settle_line_locked(it->file_line);
    it = in_flight_.erase(it);
    ++stats_.delivered;
    ++stats_.found_added;
  }
  in_flight_count_ = in_flight_.size();
  stats_.last_delivered_unix_s = unix_now_s();
  VAPIPE_LOG_INFO("{}: {} message(s) the broken connection left unanswered had been added: not sent again", name_,
                  added.size());
  return Status::Ok();
}

Status RedisStreamsPublisher::deliver() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    while (!queue_.empty() && in_flight_.size() < kWindow) {
      in_flight_.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    in_flight_count_ = in_flight_.size();
  }
  changed_.notify_all();  // room for a blocked publish()
  if (std::any_of(in_flight_.begin(), in_flight_.end(), [](const SinkMessage& m) { return m.unanswered; })) {
    VAPIPE_RETURN_IF_ERROR(settle_unanswered());
  }
  if (in_flight_.empty()) return Status::Ok();
  std::string commands;
  const std::string maxlen = std::to_string(config_.maxlen);
  for (const SinkMessage& m : in_flight_) {
    const std::string key = stream_key(m.topic);
    if (asking_) commands += resp_command({"ASKING"});  // (each: it is good for one command)
    if (config_.maxlen > 0) {
      commands += resp_command({"XADD", key, "MAXLEN", "~", maxlen, "*", "topic", m.topic, "payload", m.body});
    } else {
      commands += resp_command({"XADD", key, "*", "topic", m.topic, "payload", m.body});
    }
  }
  // What a broken connection leaves unanswered may have been added: said so, for the next connection.
  const auto unanswered = [&](Status why) {
    for (SinkMessage& m : in_flight_) m.unanswered = true;
    return why;
  };
  if (Status written = write_all(server_, commands); !written.ok()) return unanswered(written);
  // Each reply in order. A message refused for a reason that may pass (OOM, READONLY, ...) goes again
  // after the back-off; those whose entries were added count as delivered (sending them again would
  // add them twice), so such a message comes after them in its stream.
  std::optional<std::string> passing;
  std::deque<SinkMessage> again;
  while (!in_flight_.empty()) {
    if (asking_) {
      auto ok = read_reply(server_);  // ASKING's +OK
      if (ok.ok() && ok->type == RespReply::Type::kError) ok = Unavailable("the node refused ASKING: " + ok->text);
      if (!ok.ok()) {
        Status why = unanswered(ok.status());
        for (auto it = again.rbegin(); it != again.rend(); ++it) in_flight_.push_front(std::move(*it));
        return why;
      }
    }
    auto read = read_reply(server_);
    if (!read.ok()) {
      // Unanswered, and those to send again: all of them first on the next connection, in order.
      Status why = unanswered(read.status());
      for (auto it = again.rbegin(); it != again.rend(); ++it) in_flight_.push_front(std::move(*it));
      return why;
    }
    const RespReply& reply = *read;
    SinkMessage m = std::move(in_flight_.front());
    in_flight_.pop_front();
    std::unique_lock<std::mutex> lock(mutex_);
    in_flight_count_ = in_flight_.size() + again.size();
    if (reply.type != RespReply::Type::kError) {
      if (reply.type == RespReply::Type::kBulk) last_ids_[stream_key(m.topic)] = reply.text;
      settle_line_locked(m.file_line);
      ++stats_.delivered;
      stats_.last_delivered_unix_s = unix_now_s();
      if (queue_.empty()) drop_logged_ = false;  // said again once the backlog is gone (webhook.cpp)
    } else if (error_may_pass(reply.text) || reply.text.rfind("MOVED ", 0) == 0) {
      // (MOVED: a Redis Cluster's node for another node's slot; the message goes there, run(). ASK: to
      // the node its slot is being moved to, this once.)
      if (!passing) passing = reply.text;
      again.push_back(std::move(m));
      in_flight_count_ = in_flight_.size() + again.size();
    } else {
      ++stats_.refused;
      settle_line_locked(m.file_line);
      stats_.last_error = "the server refused a message on " + m.topic + ": " + reply.text;
      const auto now = Clock::now();
      if (now - refusals_logged_at_ >= std::chrono::minutes(1)) {
        refusals_logged_at_ = now;
        VAPIPE_LOG_ERROR("{}: the server refused the message on {} (stream {}): {}; it is dropped, and the next goes{}",
                         name_, m.topic, stream_key(m.topic), reply.text,
                         refusals_unlogged_ ? " (" + std::to_string(refusals_unlogged_) + " more refused since the last said)"
                                            : std::string());
        refusals_unlogged_ = 0;
      } else {
        ++refusals_unlogged_;
      }
    }
  }
  if (passing) {
    in_flight_ = std::move(again);  // put back in front of the queue by run()
    const bool moved = passing->rfind("MOVED ", 0) == 0, asked = passing->rfind("ASK ", 0) == 0;
    if (moved || asked) {
      // "MOVED <slot> <host>:<port>" (an IPv6 host unbracketed): the node that serves that key's slot;
      // "ASK <slot> <host>:<port>": the node it is being moved to, which has the key already.
      const size_t space = passing->rfind(' '), colon = passing->rfind(':');
      if (space != std::string::npos && colon != std::string::npos && colon > space + 1) {
        (moved ? moved_to_ : asked_to_) =
            std::make_pair(passing->substr(space + 1, colon - space - 1), std::atoi(passing->c_str() + colon + 1));
        return Aborted((moved ? "the cluster serves that slot at " : "the cluster is moving that slot to ") +
                       passing->substr(space + 1) + " (" + *passing + ")");
      }
    }
    return Unavailable("the server answered: " + *passing);
  }
  return Status::Ok();
}

void RedisStreamsPublisher::connection_failed(const std::string& why, bool at_once) {
  // Under mutex_.
  const auto now = Clock::now();
  if (at_once) {
    // A connection that had served a while and then ended (the server's idle `timeout`, a NAT that
    // forgot it, a restart): made again now, and said only if that fails too.
    stats_.last_error = why;
    stats_.connected = false;
    stats_.disconnected_since_unix_s = unix_now_s();
    // Said once: a server whose idle `timeout` is below kIdlePing ends an idle connection each time.
    if (!said_reconnect_at_once_) {
      VAPIPE_LOG_INFO("{}: {}; connecting again now ({} message(s) wait)", name_, why, queue_.size());
    } else {
      VAPIPE_LOG_DEBUG("{}: {}; connecting again now ({} message(s) wait)", name_, why, queue_.size());
    }
    said_reconnect_at_once_ = true;
    next_try_ = now;
    changed_.notify_all();
    return;
  }
  ++tries_;
  stats_.last_error = why;
  if (stats_.connected) {
    stats_.connected = false;
    stats_.disconnected_since_unix_s = unix_now_s();
  }
  if (!failing_) {
    failing_ = true;
    still_failing_logged_at_ = now;
    VAPIPE_LOG_WARN("{}: {}; trying again in {} ms, then less often (up to every {} s); {} message(s) wait", name_, why,
                    retry_delay_.count(), std::chrono::duration_cast<std::chrono::seconds>(longest_retry_delay_).count(),
                    queue_.size());
  } else if (now - still_failing_logged_at_ >= kStillFailingLogPeriod) {
    still_failing_logged_at_ = now;
    VAPIPE_LOG_WARN("{}: still failing, for {}: {}; {} message(s) wait, {} dropped (queue full)", name_,
                    human_duration(unix_now_s() - stats_.disconnected_since_unix_s), why, queue_.size(), stats_.dropped);
  }
  next_try_ = now + retry_delay_;
  retry_delay_ = std::min(retry_delay_ * 2, longest_retry_delay_);
  changed_.notify_all();
}

void RedisStreamsPublisher::connect_now_to(const std::pair<std::string, int>& node) {
  node_host_ = node.first;
  node_port_ = node.second;
  stats_.connected = false;
  next_try_ = Clock::now();
}

void RedisStreamsPublisher::run() {
  // OpenSSL writes with send() without MSG_NOSIGNAL: a server that closed the connection would kill
  // a process that does not ignore SIGPIPE (vapipe validate) with it. Blocked here, on the one thread
  // that writes, the write fails with EPIPE instead.
  sigset_t pipe_signal;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
  wait_for_predecessors();
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (time_is_up()) break;
    const bool connected = server_.fd >= 0;
    if (stopping_ && queue_.empty()) break;
    if (!connected && Clock::now() < next_try_) {
      changed_.wait_until(lock, stopping_ ? std::min(next_try_, finish_by_) : next_try_);
      continue;
    }
    bool ping = false;
    if (connected && queue_.empty()) {
      // Idle: a PING now and then, so that a server that went away is found (and said: /metrics,
      // vapipe status) without a message to send, and a NAT keeps the connection.
      const auto ping_at = last_io_ + idle_ping_;
      // (a new period, set_retry_delays(), is taken at once)
      changed_.wait_until(lock, ping_at,
                          [&] { return stop_now_ || stopping_ || !queue_.empty() || last_io_ + idle_ping_ != ping_at; });
      if (stop_now_ || stopping_ || !queue_.empty() || Clock::now() < ping_at) continue;
      ping = true;
    }
    lock.unlock();
    Status st = Status::Ok();
    bool made = false;
    if (ping) {
      st = write_all(server_, resp_command({"PING"}));
      if (st.ok()) {
        auto pong = read_reply(server_);
        if (!pong.ok()) st = pong.status();
        else if (pong->type == RespReply::Type::kError) st = Unavailable("the server answered PING with: " + pong->text);
      }
    } else if (!connected) {
      st = connect();
      made = st.ok();
      if (!st.ok()) disconnect(server_);
    }
    if (made) {
      lock.lock();
      connected_at_ = Clock::now();
      ++stats_.connections;
      stats_.connected = true;
      stats_.node = (node_host_.find(':') != std::string::npos ? "[" + node_host_ + "]" : node_host_) + ":" +
                    std::to_string(node_port_);
      stats_.disconnected_since_unix_s = 0;
      retry_delay_ = first_retry_delay_;
      const size_t waiting = queue_.size();
      if (failing_) {
        VAPIPE_LOG_INFO("{}: connected again ({} message(s) wait, {} dropped meanwhile)", name_, waiting, stats_.dropped);
      } else if (stats_.connections == 1) {
        VAPIPE_LOG_INFO("{}: connected{}; messages are added to the streams {}<topic>{}", name_,
                        url_.sentinel() ? " to the master '" + url_.master_name + "' at " + stats_.node : std::string(),
                        config_.key_prefix,
                        config_.maxlen ? fmt::format(", each trimmed to about {} entries", config_.maxlen)
                                       : std::string(", never trimmed"));
      }
      failing_ = false;
      lock.unlock();
      changed_.notify_all();
    }
    const MasterCheck master = st.ok() && !ping && url_.sentinel() ? check_master() : MasterCheck::kSame;
    if (master == MasterCheck::kSwitched) {
      // A failover: what waits goes to the new master (node_host_ now), connected to at once.
      disconnect(server_);
      lock.lock();
      connect_now_to({node_host_, node_port_});
      continue;
    }
    if (master == MasterCheck::kHold) {  // (a failover under way: the sentinel's next word is awaited)
      lock.lock();
      changed_.wait_for(lock, std::chrono::milliseconds(20), [&] { return stop_now_; });
      continue;
    }
    if (st.ok() && !ping) st = deliver();
    lock.lock();
    last_io_ = Clock::now();
    if (!st.ok()) {
      const bool served_a_while = connected && Clock::now() - connected_at_ >= served_a_while_;
      // What was sent and not answered goes again, first, on the next connection.
      for (auto it = in_flight_.rbegin(); it != in_flight_.rend(); ++it) queue_.push_front(std::move(*it));
      in_flight_.clear();
      in_flight_count_ = 0;
      lock.unlock();
      disconnect(server_);
      lock.lock();
      if (st.code() == StatusCode::kCancelled) break;
      if (st.code() == StatusCode::kAborted && asked_to_) {
        // The next round goes to the slot's new node, each XADD after an ASKING; then back here.
        if (!asking_) ask_return_ = {node_host_, node_port_};
        VAPIPE_LOG_DEBUG("{}: {}: the next messages go there", name_, st.message());
        asking_ = true;
        connect_now_to(*asked_to_);
        asked_to_.reset();
        continue;
      }
      asking_ = false;
      if (st.code() == StatusCode::kAborted && moved_to_) {
        // A Redis Cluster: the node that serves the key's slot, connected to at once. Keys of one job on
        // several nodes (streams of several slots) make it go back and forth: said once, with the cure.
        const auto now = Clock::now();
        recent_moves_.push_back(now);
        while (recent_moves_.size() > 4 || now - recent_moves_.front() > std::chrono::minutes(1)) recent_moves_.pop_front();
        if (!said_moved_) {
          VAPIPE_LOG_INFO("{}: {}: connecting to that node", name_, st.message());
          said_moved_ = true;
        }
        if (recent_moves_.size() == 4 && !said_spread_) {  // 4 in a minute: not a failover, keys on several nodes
          VAPIPE_LOG_WARN("{}: the streams' keys are on several nodes of the cluster, so messages go to one node at "
                          "a time, connecting from one to the next; a key_prefix in braces ('{{{}}}:') puts them all "
                          "in one slot", name_,
                          config_.key_prefix.empty() ? "vapipe" : config_.key_prefix.substr(0, config_.key_prefix.size() - 1));
          said_spread_ = true;
        }
        connect_now_to(*moved_to_);
        moved_to_.reset();
        continue;
      }
      // A cluster's node that fails may have been replaced (a replica promoted elsewhere): the next
      // try goes to the url's server, which says where the slot is now. Sentinel's master too: the
      // sentinels are asked again.
      node_host_ = url_.sentinel() ? std::string() : url_.host;
      node_port_ = url_.port;
      connection_failed(st.message(), served_a_while);
    } else if (asking_ && !ping) {
      // An ASK's round delivered: back to the node that sent it there.
      asking_ = false;
      lock.unlock();
      disconnect(server_);
      lock.lock();
      connect_now_to(ask_return_);
    }
  }
  stats_.undelivered += queue_.size() + in_flight_.size();
  queue_.clear();
  in_flight_.clear();
  in_flight_count_ = 0;
  if (refusals_unlogged_ > 0) {
    VAPIPE_LOG_ERROR("{}: {} more message(s) refused since the last said", name_, refusals_unlogged_);
    refusals_unlogged_ = 0;
  }
  changed_.notify_all();
}

}  // namespace vapipe
