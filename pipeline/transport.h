// Moving messages between stage processes. ZeroMQ PUSH/PULL carries the message header; payloads
// travel by reference (shared memory slot descriptors) on one host and inline over TCP across hosts.
// The transport chooses; stages only see Message and Payload.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "pipeline/curve.h"
#include "pipeline/message.h"
#include "pipeline/shm_pool.h"
#include "pipeline/status.h"

namespace vapipe {

// One ZeroMQ context per process.
zmq::context_t& zmq_context();
// Its I/O threads (which also encrypt and decrypt CURVE traffic): takes effect only when called
// before zmq_context() is first used, as a stage process does right after loading its config.
void configure_zmq_io_threads(int threads);

// Gives stages writable payload buffers. Thread-safe.
class PayloadAllocator {
 public:
  virtual ~PayloadAllocator() = default;
  // Blocks while no buffer is free (back-pressure); kCancelled once shutdown was requested.
  virtual Result<Payload> allocate(size_t bytes) = 0;
};

// Plain memory: for the inline (TCP) transport and for tests.
class HeapAllocator final : public PayloadAllocator {
 public:
  Result<Payload> allocate(size_t bytes) override { return Payload::heap(bytes); }
};

// Slots of a shared memory pool owned by this process.
class ShmAllocator final : public PayloadAllocator {
 public:
  ShmAllocator(std::shared_ptr<ShmPool> pool, const std::atomic<bool>* cancel)
      : pool_(std::move(pool)), cancel_(cancel) {}
  Result<Payload> allocate(size_t bytes) override;
  const std::shared_ptr<ShmPool>& pool() const { return pool_; }

 private:
  std::shared_ptr<ShmPool> pool_;
  const std::atomic<bool>* cancel_;
};

// The sending end of an edge (ZeroMQ PUSH, connects). One per thread.
// ZeroMQ can drop what a sender still has queued on an ipc:// edge when the sending process exits
// while the receiver is not reading (its receive queue full): linger does not help (libzmq issue
// 4660; seen here as a demo job whose publish stage, waiting for subscribers, never got the last
// results). So a receiving stage marks its endpoint once it will read no more, and a sending process
// waits for that mark before it exits (wait_for_downstream_closed, stage_runner.h). The mark is a file
// beside the socket ("<socket>.closed"); tcp:// edges have none.
std::string input_closed_marker(const std::string& endpoint);  // empty: not an ipc:// endpoint
void mark_input_closed(const std::string& endpoint);
bool input_closed(const std::string& endpoint);  // true also for an endpoint without a marker

// Whether a ZeroMQ endpoint that binds takes connections from other hosts: a tcp:// endpoint whose
// host is not a loopback address or "localhost" ("tcp://0.0.0.0:5560", "tcp://*:5560", an interface
// name such as eth0, a LAN address). ipc:// and inproc:// endpoints are this host's only.
bool open_to_other_hosts(const std::string& endpoint);

class MessageSender {
 public:
  // by_reference: shared memory payloads travel as descriptors (same host). hwm: messages queued.
  // job_key (not empty): CURVE with the job's key pair, the receiver holding the same one.
  static Result<std::unique_ptr<MessageSender>> connect(const std::string& endpoint, bool by_reference, int hwm,
                                                        const CurveKeyPair& job_key = {});
  // Blocks while the receiver is full (back-pressure); kCancelled once *cancel is true.
  Status send(const Message& msg, const std::atomic<bool>* cancel);
  // On an abort: what is still queued is dropped when the sender closes, instead of holding the
  // process's exit for the linger period (up to 5 s) when the receiver is gone.
  void discard_unsent();
  const std::string& endpoint() const { return endpoint_; }

 private:
  MessageSender(zmq::socket_t socket, std::string endpoint, bool by_reference)
      : socket_(std::move(socket)), endpoint_(std::move(endpoint)), by_reference_(by_reference) {}
  zmq::socket_t socket_;
  std::string endpoint_;
  bool by_reference_;
};

// Senders to one endpoint, kept open once made and handed out again: a sender is released, not
// closed, when its user is done (a stream that ended). Over ipc://, libzmq loses what a PUSH socket
// had already sent if it is closed while its receiver is at its high-water mark, linger or not (libzmq
// issue #4660; tools/zmq-close-loss.py shows it; seen here: the last frames of the last streams of an
// archive job never reached preprocess). The senders close with the pool, once the receiver has said
// it read everything.
// Any thread.
class SenderPool {
 public:
  SenderPool(std::string endpoint, bool by_reference, int hwm, CurveKeyPair job_key)
      : endpoint_(std::move(endpoint)), by_reference_(by_reference), hwm_(hwm), job_key_(std::move(job_key)) {}
  // An idle sender (the one released last), or a new one.
  Result<std::unique_ptr<MessageSender>> acquire();
  void release(std::unique_ptr<MessageSender> sender);
  // Senders made so far (idle or in use).
  size_t made() const;

 private:
  const std::string endpoint_;
  const bool by_reference_;
  const int hwm_;
  const CurveKeyPair job_key_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<MessageSender>> idle_;
  size_t made_ = 0;
};

// The receiving end of an edge (ZeroMQ PULL, binds). Fair-queues between connected senders.
class MessageReceiver {
 public:
  // job_key (not empty): CURVE; only senders holding the same key pair get in.
  // shm_pools: the shared memory pools a message's descriptors may name (those of the job, on one
  // host: mode shm). Empty: payloads must travel inline (mode tcp, where a descriptor would name
  // memory of the receiving host that its sender never owned); a descriptor is then refused, as one
  // naming a pool the filter refuses, and the frame gets an error result instead of that memory.
  static Result<std::unique_ptr<MessageReceiver>> bind(const std::string& endpoint, int hwm,
                                                       const CurveKeyPair& job_key = {},
                                                       PoolFilter shm_pools = {});
  // nullopt on timeout; kDataLoss for a malformed message (the caller logs it and goes on).
  Result<std::optional<Message>> receive(std::chrono::milliseconds timeout);
  const std::string& endpoint() const { return endpoint_; }

 private:
  MessageReceiver(std::unique_ptr<CurveServerGuard> curve, zmq::socket_t socket, std::string endpoint,
                  PoolFilter shm_pools)
      : curve_(std::move(curve)), socket_(std::move(socket)), endpoint_(std::move(endpoint)),
        pools_(shm_pools ? std::make_unique<ShmPoolRegistry>(std::move(shm_pools)) : nullptr) {}
  std::unique_ptr<CurveServerGuard> curve_;  // outlives the socket: its authentication holds to the end
  zmq::socket_t socket_;
  std::string endpoint_;
  std::unique_ptr<ShmPoolRegistry> pools_;  // null: inline payloads only
};

}  // namespace vapipe
