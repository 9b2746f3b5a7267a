// Dynamic batching across streams, in the manner of Triton's dynamic batcher: a batch leaves when it
// is full or when its oldest frame has waited max_delay. Each stream has its own FIFO and batches are
// filled round-robin across streams, so one fast stream cannot starve the others; within a stream
// order is kept, so results leave in per-stream order.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <vector>

#include "pipeline/message.h"
#include "pipeline/stage.h"

namespace vapipe {

struct BatcherOptions {
  size_t max_batch_size = 16;
  std::chrono::steady_clock::duration max_delay = std::chrono::milliseconds(10);
};

class Batcher {
 public:
  explicit Batcher(BatcherOptions options) : options_(options) {}

  void add(Message&& tensor, SteadyTime now);
  // A full batch, if max_batch_size frames are waiting.
  std::optional<Message> take_full();
  // A (possibly partial) batch, if the oldest waiting frame has waited max_delay by `now`.
  std::optional<Message> take_due(SteadyTime now);
  // Batches that carry every waiting frame of one stream (filled up with other streams' frames).
  std::vector<Message> flush_stream(uint32_t stream_index);
  std::vector<Message> flush_all();

  std::optional<SteadyTime> deadline() const;
  size_t pending() const { return pending_; }

 private:
  struct Waiting {
    Message msg;
    SteadyTime arrival;
  };
  Message make_batch(std::optional<uint32_t> first_stream);

  BatcherOptions options_;
  std::map<uint32_t, std::deque<Waiting>> queues_;  // by stream index
  uint32_t cursor_ = 0;                             // round-robin position (stream index)
  size_t pending_ = 0;
};

}  // namespace vapipe
