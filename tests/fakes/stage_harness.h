// Drives one stage without sockets (MediaPipe's CalculatorRunner habit): feed messages, collect what
// the stage emits.
#pragma once

#include <cstdint>
#include <vector>

#include "pipeline/config.h"
#include "pipeline/stage.h"

namespace vapipe::testing {

class CollectingEmitter final : public Emitter {
 public:
  Status emit(Message&& msg) override {
    if (fail_emit) return Unavailable("fake emitter: downstream gone");
    messages.push_back(std::move(msg));
    return Status::Ok();
  }
  Result<Payload> allocate(size_t bytes) override {
    ++allocations;
    return Payload::heap(bytes);
  }
  std::vector<Message> messages;
  size_t allocations = 0;
  bool fail_emit = false;
};

// A config with `streams` test streams and every other value at its default.
inline Config test_config(size_t streams = 1) {
  Config c;
  c.source = "<test>";
  for (size_t i = 0; i < streams; ++i) {
    StreamConfig s;
    s.id = "s" + std::to_string(i);
    s.uri = "test://smpte?frames=10";
    s.parsed.kind = UriKind::kTest;
    c.streams.push_back(s);
  }
  c.infer.model = "model.pt";
  c.infer.labels = "labels.txt";
  c.infer.model_name = "model";
  return c;
}

inline Envelope envelope(uint32_t stream_index, uint64_t seq) {
  Envelope e;
  e.stream_id = "s" + std::to_string(stream_index);
  e.stream_index = stream_index;
  e.seq = seq;
  e.capture_ns = wall_clock_ns();
  return e;
}

inline Message tensor_message(uint32_t stream_index, uint64_t seq, TensorInfo info = {DType::kFloat32, 3, 4, 4}) {
  Message m;
  m.kind = MessageKind::kTensor;
  m.env = envelope(stream_index, seq);
  m.tensor = info;
  m.payload = Payload::heap(info.bytes());
  return m;
}

inline Message end_message(uint32_t stream_index, uint64_t frames = 0) {
  return Message::stream_event(MessageKind::kStreamEnd, envelope(stream_index, 0), StreamEvent{"", "end of stream", frames, 0});
}

}  // namespace vapipe::testing
