#include "pipeline/transport.h"

#include <zmq_addon.hpp>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>

#include "pipeline/wire.h"

namespace vapipe {

namespace {
std::atomic<int> g_io_threads{1};
}  // namespace

void configure_zmq_io_threads(int threads) { g_io_threads = std::max(1, threads); }

zmq::context_t& zmq_context() {
  static zmq::context_t context(g_io_threads.load());
  return context;
}

bool open_to_other_hosts(const std::string& endpoint) {
  if (endpoint.rfind("tcp://", 0) != 0) return false;
  std::string host = endpoint.substr(6);
  if (!host.empty() && host[0] == '[') {  // [IPv6]:port
    const size_t close = host.find(']');
    host = close == std::string::npos ? host.substr(1) : host.substr(1, close - 1);
  } else if (const size_t colon = host.rfind(':'); colon != std::string::npos) {
    host = host.substr(0, colon);
  }
  return !(host == "localhost" || host == "lo" || host == "::1" || host.rfind("127.", 0) == 0);
}

std::string input_closed_marker(const std::string& endpoint) {
  const std::string ipc = "ipc://";
  return endpoint.rfind(ipc, 0) == 0 ? endpoint.substr(ipc.size()) + ".closed" : std::string();
}

void mark_input_closed(const std::string& endpoint) {
  const std::string marker = input_closed_marker(endpoint);
  if (!marker.empty()) std::ofstream(marker).put('\n');  // its existence is the mark
}

bool input_closed(const std::string& endpoint) {
  const std::string marker = input_closed_marker(endpoint);
  std::error_code ec;
  return marker.empty() || std::filesystem::exists(marker, ec);
}

Result<Payload> ShmAllocator::allocate(size_t bytes) {
  while (true) {
    auto r = pool_->acquire(bytes, std::chrono::milliseconds(1000), cancel_);
    if (r.ok() || r.status().code() != StatusCode::kTimeout) return r;
  }
}

namespace {

// Keeps a payload's storage alive until ZeroMQ has sent the bytes (zero-copy send).
void release_payload_storage(void* /*data*/, void* hint) {
  delete static_cast<std::shared_ptr<PayloadStorage>*>(hint);
}

// A received ZeroMQ frame as a payload: no copy of inline bytes.
class ZmqFrameStorage final : public PayloadStorage {
 public:
  explicit ZmqFrameStorage(zmq::message_t msg) : msg_(std::move(msg)) {}
  std::byte* data() override { return static_cast<std::byte*>(msg_.data()); }
  size_t capacity() const override { return msg_.size(); }

 private:
  zmq::message_t msg_;
};

}  // namespace

Result<std::unique_ptr<MessageSender>> MessageSender::connect(const std::string& endpoint, bool by_reference,
                                                              int hwm, const CurveKeyPair& job_key) {
  try {
    zmq::socket_t socket(zmq_context(), zmq::socket_type::push);
    socket.set(zmq::sockopt::sndhwm, hwm);
    socket.set(zmq::sockopt::linger, 5000);
    socket.set(zmq::sockopt::sndtimeo, 200);
    if (!job_key.empty()) {
      if (Status s = make_curve_client(socket, job_key, job_key.public_key); !s.ok()) return s.with_context(endpoint);
    }
    socket.connect(endpoint);
    return std::unique_ptr<MessageSender>(new MessageSender(std::move(socket), endpoint, by_reference));
  } catch (const zmq::error_t& e) {
    return Unavailable("cannot connect to " + endpoint + ": " + e.what());
  }
}

Status MessageSender::send(const Message& msg, const std::atomic<bool>* cancel) {
  EncodedMessage enc = encode_message(msg, by_reference_);
  const size_t parts = 1 + enc.inline_payloads.size();
  // A signal that comes while a send waits (the stop's SIGTERM to a stage held up by the one after it)
  // interrupts it: no failure, the message goes on waiting. Before, it was dropped and its frames were
  // missing from the middle of the results file, which --resume then refused (found 2026-12-07).
  const auto send_part = [this](zmq::message_t& part, zmq::send_flags flags) -> zmq::send_result_t {
    while (true) {
      try {
        return socket_.send(part, flags);
      } catch (const zmq::error_t& e) {
        if (e.num() != EINTR) throw;
      }
    }
  };
  try {
    zmq::message_t header(enc.header.data(), enc.header.size());
    // The first part waits for room (back-pressure); once it is queued ZeroMQ takes the rest.
    while (true) {
      auto sent = send_part(header, parts > 1 ? zmq::send_flags::sndmore : zmq::send_flags::none);
      if (sent) break;
      if (cancel && cancel->load()) return Cancelled("send to " + endpoint_ + " cancelled");
    }
    for (size_t i = 0; i < enc.inline_payloads.size(); ++i) {
      Payload& p = enc.inline_payloads[i];
      auto* keep = new std::shared_ptr<PayloadStorage>(p.storage());
      zmq::message_t part(p.data(), p.size(), release_payload_storage, keep);
      bool last = i + 1 == enc.inline_payloads.size();
      while (!send_part(part, last ? zmq::send_flags::none : zmq::send_flags::sndmore)) {
      }
    }
  } catch (const zmq::error_t& e) {
    return Unavailable("send to " + endpoint_ + ": " + e.what());
  }
  // The receiver now owns the shared memory slots named in the message.
  for (Payload& p : enc.handed_off) p.storage()->hand_off();
  return Status::Ok();
}

void MessageSender::discard_unsent() {
  try {
    socket_.set(zmq::sockopt::linger, 0);
  } catch (const zmq::error_t&) {
    // a closed socket drops its queue anyway
  }
}

Result<std::unique_ptr<MessageSender>> SenderPool::acquire() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!idle_.empty()) {
      std::unique_ptr<MessageSender> sender = std::move(idle_.back());
      idle_.pop_back();
      return sender;
    }
  }
  auto sender = MessageSender::connect(endpoint_, by_reference_, hwm_, job_key_);
  if (sender.ok()) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++made_;
  }
  return sender;
}

void SenderPool::release(std::unique_ptr<MessageSender> sender) {
  if (!sender) return;
  std::lock_guard<std::mutex> lock(mutex_);
  idle_.push_back(std::move(sender));
}

size_t SenderPool::made() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return made_;
}

Result<std::unique_ptr<MessageReceiver>> MessageReceiver::bind(const std::string& endpoint, int hwm,
                                                              const CurveKeyPair& job_key, PoolFilter shm_pools) {
  try {
    zmq::socket_t socket(zmq_context(), zmq::socket_type::pull);
    socket.set(zmq::sockopt::rcvhwm, hwm);
    socket.set(zmq::sockopt::linger, 0);
    std::unique_ptr<CurveServerGuard> curve;
    if (!job_key.empty()) {
      auto guard = make_curve_server(socket, job_key, {job_key.public_key},
                                     "this job's key (transport.curve_secret_key) at " + endpoint);
      if (!guard.ok()) return guard.status().with_context(endpoint);
      curve = std::move(guard).value();
    }
    socket.bind(endpoint);
    // A fresh input is open: a mark left by an earlier run with the same job id (stages started by
    // hand) must not let this run's senders exit before it has read everything.
    if (const std::string marker = input_closed_marker(endpoint); !marker.empty()) {
      std::error_code ec;
      std::filesystem::remove(marker, ec);
    }
    return std::unique_ptr<MessageReceiver>(
        new MessageReceiver(std::move(curve), std::move(socket), endpoint, std::move(shm_pools)));
  } catch (const zmq::error_t& e) {
    return Unavailable("cannot bind " + endpoint + ": " + e.what());
  }
}

Result<std::optional<Message>> MessageReceiver::receive(std::chrono::milliseconds timeout) {
  std::vector<zmq::message_t> frames;
  try {
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, timeout) == 0) return std::optional<Message>();
    auto n = zmq::recv_multipart(socket_, std::back_inserter(frames), zmq::recv_flags::dontwait);
    if (!n) return std::optional<Message>();
  } catch (const zmq::error_t& e) {
    if (e.num() == EINTR) return std::optional<Message>();
    return Unavailable("receive on " + endpoint_ + ": " + e.what());
  }
  std::vector<Payload> parts;
  parts.reserve(frames.size());
  for (auto& f : frames) {
    size_t size = f.size();
    parts.emplace_back(std::make_shared<ZmqFrameStorage>(std::move(f)), size);
  }
  auto decoded = decode_message(std::move(parts), pools_.get());
  if (!decoded.ok()) return decoded.status().with_context("malformed message on " + endpoint_);
  return std::optional<Message>(std::move(decoded).value());
}

}  // namespace vapipe
