// publish.redis: messages added to Redis streams as they are published (XADD key_prefix + topic), so
// that a program that was down, or starts later, reads what it missed (XREAD from the last id it saw,
// XREADGROUP with a consumer group): the bus (ZeroMQ PUB/SUB) keeps nothing for an absent subscriber.
// DeepStream's msgbroker and Savant's adapters offer Redis the same way.
//
// Each server has a thread and a queue of its own (QueuedSink): a server that is slow or down never
// holds up the bus, the results file or another sink (unless its queue_policy is block). The thread
// pipelines up to kWindow XADDs on one connection and takes each reply in order: an entry's id is a
// delivery; an error that may pass (OOM, LOADING, READONLY, BUSY, ...) ends the connection and that
// message is sent again after a back-off (1 s doubling to 60 s), before those that wait; any other
// error (WRONGTYPE: the key holds something else) refuses that message, counted, and the next goes.
// At least once: messages whose replies a broken connection lost are sent again, so a consumer may see
// one twice (each result's stream_id and seq name it). A connection that had served a while and ends
// (a server's idle timeout) is made again at once; an idle one PINGs the server every kIdlePing, so
// that a server gone away is said without a message to send.
//
// A Redis Cluster's node answers MOVED for a key of another node's slot: the message goes to that node,
// connected to at once (one job's streams are all on one node when key_prefix is a hash tag,
// "{vapipe:gate}:"); after a failure the url's server is asked again. ASK (the key's slot being moved
// to another node, the key there already) sends that round to the other node, each XADD after an
// ASKING, and then goes back.
//
// A master that Redis Sentinel watches (redis+sentinel://): the sentinels are asked where it is
// (SENTINEL get-master-addr-by-name, the one that answered asked first next time), and the server
// found must say it is a master (ROLE); after a failure, or a master demoted to replica (READONLY, or
// Sentinel closing its clients), they are asked again. That is Redis's guide for Sentinel clients.
// Beyond it, a second connection is subscribed to a sentinel's failover events: messages wait from
// the word that a replica is being made the master to the word that it was (then they go there), as
// the old master would take them meanwhile and then drop them (a failover ordered by hand: ~1 s).
//
// The client speaks RESP2 itself (a few commands: AUTH, SELECT, XADD, PING, ROLE, SENTINEL), over TCP or, for a
// rediss:// url, TLS (OpenSSL: the server's certificate checked against ca_file or this machine's
// authorities and its name, a client certificate for a server that asks for one).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "pipeline/config.h"
#include "pipeline/http_url.h"
#include "pipeline/status.h"
#include "stages/publish/metrics.h"
#include "stages/publish/queued_sink.h"

struct ssl_ctx_st;
struct ssl_st;

namespace vapipe {

// A command as RESP2 sends it: an array of bulk strings.
std::string resp_command(const std::vector<std::string_view>& args);

// One reply of a Redis server (RESP2).
struct RespReply {
  enum class Type { kStatus, kError, kInteger, kBulk, kNil, kArray } type = Type::kNil;
  std::string text;  // status, error, bulk
  int64_t integer = 0;
  std::vector<RespReply> elements;  // array
};

// Replies parsed from the bytes a connection gives, as they come (a reply may span reads).
class RespReader {
 public:
  void feed(std::string_view bytes) { buffer_.append(bytes.data(), bytes.size()); }
  // The next whole reply; nullopt until its bytes are all in; an error when the bytes are not RESP2
  // (the connection is then of no further use: not a Redis server, or a broken one).
  Result<std::optional<RespReply>> next();

 private:
  // Parses a reply at buffer_[*at]; nullopt when it is not whole yet.
  Result<std::optional<RespReply>> parse(size_t* at, int depth);
  std::string buffer_;
};

class RedisStreamsPublisher : public QueuedSink<RedisStats> {
 public:
  // Starts its thread; `index` is its place in publish.redis, for log lines.
  // `predecessors`: the sinks of the same receiver that a reload removed (QueuedSink::wait_for_predecessors).
  RedisStreamsPublisher(const RedisConfig& config, size_t index, SinkPredecessors predecessors = {});
  // Stops at once: what still waits is counted undelivered (finish() first to give it time).
  ~RedisStreamsPublisher() override;

  // wants(), cooled_down(), begin_finish(), name(): QueuedSink's.
  // Queues `body` for the stream key_prefix + `topic` (QueuedSink::push).
  void publish(const std::string& topic, std::string body, const std::atomic<bool>* stop = nullptr) {
    push(SinkMessage{topic, std::move(body), "", ""}, stop);
  }
  const std::string& format() const { return config_.format; }
  // The stream a bus topic's messages are added to.
  std::string stream_key(const std::string& topic) const { return config_.key_prefix + topic; }
  // A new password (its password_file rewritten while the job runs): the next connection uses it.
  void set_password(std::string password);
  // Likewise the sentinels' (sentinel_password_file).
  void set_sentinel_password(std::string password);
  // Gives what waits until `grace` to be delivered, then stops the thread and logs what was not.
  void finish(std::chrono::milliseconds grace);
  RedisStats stats() const;
  // Until the server has accepted a connection (Ok) or a try has failed (why), at most `timeout`:
  // `vapipe validate --open`.
  Status wait_connected(std::chrono::milliseconds timeout) const;

  // Tests: a shorter back-off (the first wait after a failure, and the longest), how long a connection
  // serves before its end is made good at once (kServedAWhile), and the idle PING's period (kIdlePing).
  void set_retry_delays(std::chrono::milliseconds first, std::chrono::milliseconds longest,
                        std::chrono::milliseconds served_a_while = kServedAWhile,
                        std::chrono::milliseconds idle_ping = kIdlePing);

  // XADDs sent before their replies are read: enough to keep a server across a WAN busy, few enough
  // that a lost connection sends little twice.
  static constexpr size_t kWindow = 256;
  static constexpr std::chrono::seconds kFirstRetryDelay{1}, kLongestRetryDelay{60};
  static constexpr std::chrono::seconds kStillFailingLogPeriod{300};
  static constexpr std::chrono::seconds kServedAWhile{10};
  // A connection with nothing to send PINGs the server this often: one that went away is found then.
  static constexpr std::chrono::seconds kIdlePing{15};
  // A failover begun (Sentinel making a replica the master): messages wait at most this long for the
  // sentinel to say the replica was promoted (each second, it looks), then go to the old master again.
  static constexpr std::chrono::seconds kFailoverHold{10};

 private:
  // One connection: to the server (a cluster's node, Sentinel's master), or to a sentinel.
  struct Connection {
    int fd = -1;
    ssl_ctx_st* tls_context = nullptr;  // rediss: the connection's TLS (null: plain TCP)
    ssl_st* tls = nullptr;
    RespReader reader;
  };
  void run();
  // On the thread: a connection made, authenticated and on its database; or why not.
  Status connect();
  // On the thread: c connected to host:port (and TLS over it for rediss), or why not, before `deadline`.
  Status open_connection(Connection& c, const std::string& host, int port,
                         std::chrono::steady_clock::time_point deadline);
  // On the thread, redis+sentinel://: node_host_ and node_port_ set to the master's address as a
  // sentinel gives it, or why none could.
  Status ask_sentinels();
  // One sentinel's answer to SENTINEL get-master-addr-by-name, on a connection of its own (any thread).
  Result<RespReply> ask_master_address(const RedisUrl::Address& sentinel);
  // The master's address in such an answer; nullopt when it is not one (nil: no master of that name).
  static std::optional<std::pair<std::string, int>> master_address(const RespReply& reply);
  // On the thread: the master is at `address` from now on, as `sentinel` ("host:port") said (a move said).
  void take_master_address(const std::pair<std::string, int>& address, const std::string& sentinel);
  // On the thread, redis+sentinel, before each round: what a sentinel said of the master meanwhile:
  // nothing new (kSame), a replica promoted in its place (kSwitched: node_host_ and node_port_ are
  // its address), or a failover begun and the new master not yet promoted (kHold: nothing is sent
  // until then, for at most kFailoverHold). Subscribes first where it is not yet (and asks where the
  // master is once more, for a failover meanwhile).
  enum class MasterCheck { kSame, kSwitched, kHold };
  MasterCheck check_master();
  static constexpr const char* kFailoverBegins = "+failover-state-send-slaveof-noone";
  static constexpr const char* kFailoverAborted = "-failover-abort-slave-timeout";
  static constexpr const char* kPromoted = "+promoted-slave";
  static constexpr const char* kSwitched = "+switch-master";
  // On the thread, connected: AUTH, SELECT and PING, each answered.
  Status greet();
  void disconnect(Connection& c);
  // On the thread: writes all of `bytes`, or why not (the connection broke, the server stopped
  // reading for timeout_s, the stop's deadline passed).
  Status write_all(Connection& c, std::string_view bytes);
  // On the thread: the next reply, waiting at most timeout_s for it.
  Result<RespReply> read_reply(Connection& c);
  // On the thread, under mutex_: the connection failed or ended for `why`: said (once per outage, then
  // every kStillFailingLogPeriod), the next try after the back-off; `at_once`: a connection that had
  // served kServedAWhile ended, and the next try is made now.
  void connection_failed(const std::string& why, bool at_once = false);
  // On the thread, under mutex_, disconnected: the next connection is to `node` (a Cluster's MOVED or
  // ASK, Sentinel's new master), made now.
  void connect_now_to(const std::pair<std::string, int>& node);
  // On the thread: sends what waits (up to kWindow), takes the replies; an error when the connection
  // failed (what was not answered is put back in front of the queue, marked unanswered).
  Status deliver();
  // On the thread, connected, before the messages of in_flight_ that a broken connection left
  // unanswered are sent again: those the server had added (its streams say) are counted delivered and
  // taken out, so that a lost answer does not add a message twice.
  Status settle_unanswered();
  // An unanswered message larger than this is sent again unchecked (the reply would hold it, and the
  // reader takes bulk strings of up to 1 MB).
  static constexpr size_t kMaxCheckedBytes = 512 * 1024;
  bool time_is_up() const { return stop_now_ || (stopping_ && std::chrono::steady_clock::now() >= finish_by_); }

  RedisConfig config_;
  RedisUrl url_;
  std::string password_;  // config_.password, or a newer one (under mutex_)
  std::string sentinel_password_;  // config_.sentinel_password, or a newer one (under mutex_)
  // On the thread: AUTH with the sentinels' password (none: "").
  std::string sentinel_auth() const;
  Connection server_;  // the thread's connection to the server
  // redis+sentinel: subscribed to a sentinel's failover events (check_master()), read without waiting.
  Connection watch_;
  // The subscription is made on a thread of its own (subscriber_), with all of timeout_s: a sentinel
  // slow to answer (in another region, over TLS: four round trips before it says it subscribed) holds
  // up no delivery, and one that answers in more than a second is still watched. check_master() takes
  // the connection once made, or says why not.
  struct Subscription {
    Connection connection;
    Status status = Status::Ok();
    size_t sentinel = 0;  // in url_.sentinels
    std::optional<std::pair<std::string, int>> master;  // where it said the master is, once subscribed
  };
  Subscription subscribe_to_sentinel(size_t sentinel);
  // Ends subscriber_ (it sees stop_now_, set before) and closes what it left.
  void end_subscriber();
  std::thread subscriber_;
  std::optional<Subscription> subscription_;  // under mutex_: subscriber_'s, once it has ended
  bool said_watch_failing_ = false;           // said as a warning: said again once watched
  std::string watching_;  // the sentinel watch_ is subscribed to, "host:port"
  std::chrono::steady_clock::time_point watch_next_try_{};
  std::chrono::milliseconds watch_delay_{0};
  std::optional<std::chrono::steady_clock::time_point> failover_hold_until_;  // kHold until then
  // On the thread: TLS over c.fd (handshake done, `host` checked), or why not, before `deadline`.
  Status start_tls(Connection& c, const std::string& host, std::chrono::steady_clock::time_point deadline);
  std::deque<SinkMessage> in_flight_;  // sent, not yet answered (the thread's; counted in queued)
  std::map<std::string, std::string> last_ids_;  // each stream's latest entry this sink added (the thread's)
  size_t in_flight_count_ = 0;         // its size, under mutex_ (for stats)
  std::chrono::steady_clock::time_point next_try_{}, still_failing_logged_at_{}, connected_at_{};
  bool failing_ = false;
  bool said_reconnect_at_once_ = false;
  // The node connected to: the url's server, or the Redis Cluster node its MOVED named (the thread's).
  std::string node_host_;
  int node_port_ = 0;
  std::optional<std::pair<std::string, int>> moved_to_;  // deliver(): the node a MOVED named
  std::optional<std::pair<std::string, int>> asked_to_;  // deliver(): the node an ASK named
  // A round sent to an ASK's node (each XADD after an ASKING), and the node to go back to after it.
  bool asking_ = false;
  std::pair<std::string, int> ask_return_;
  size_t sentinel_first_ = 0;  // redis+sentinel: the sentinel to ask first (the latest that answered)
  std::string master_at_;      // redis+sentinel: "host:port" the sentinels said last
  std::deque<std::chrono::steady_clock::time_point> recent_moves_;  // the last MOVEDs followed
  bool said_moved_ = false, said_spread_ = false;
  size_t tries_ = 0;  // connection tries that failed (wait_connected)
  std::chrono::milliseconds first_retry_delay_ = kFirstRetryDelay, longest_retry_delay_ = kLongestRetryDelay;
  std::chrono::milliseconds retry_delay_ = kFirstRetryDelay;
  std::chrono::milliseconds served_a_while_ = kServedAWhile;
  std::chrono::milliseconds idle_ping_ = kIdlePing;
  std::chrono::steady_clock::time_point last_io_{};  // the latest round of commands (under mutex_)
  // Refusals after the first are counted and said at most once a minute.
  std::chrono::steady_clock::time_point refusals_logged_at_{};
  uint64_t refusals_unlogged_ = 0;
  std::thread thread_;  // last: started once the rest is set
};

}  // namespace vapipe
