#include <cstdint>

#include "stages/batch/batcher.h"

namespace vapipe {

void Batcher::add(Message&& tensor, SteadyTime now) {
  queues_[tensor.env.stream_index].push_back(Waiting{std::move(tensor), now});
  ++pending_;
}

std::optional<SteadyTime> Batcher::deadline() const {
  std::optional<SteadyTime> oldest;
  for (const auto& [index, q] : queues_) {
    if (!q.empty() && (!oldest || q.front().arrival < *oldest)) oldest = q.front().arrival;
  }
  if (!oldest) return std::nullopt;
  return *oldest + options_.max_delay;
}

Message Batcher::make_batch(std::optional<uint32_t> first_stream) {
  Message batch;
  batch.kind = MessageKind::kBatch;
  const size_t limit = options_.max_batch_size;
  auto take_from = [&](std::deque<Waiting>& q) {
    batch.items.push_back(std::move(q.front().msg));
    q.pop_front();
    --pending_;
  };
  if (first_stream) {
    auto it = queues_.find(*first_stream);
    while (it != queues_.end() && !it->second.empty() && batch.items.size() < limit) take_from(it->second);
  }
  // Round-robin: one frame per stream per round, starting after the last stream served.
  while (batch.items.size() < limit && pending_ > 0) {
    auto it = queues_.lower_bound(cursor_);
    bool took = false;
    for (size_t visited = 0; visited < queues_.size() && batch.items.size() < limit; ++visited) {
      if (it == queues_.end()) it = queues_.begin();
      if (!it->second.empty()) {
        take_from(it->second);
        took = true;
        cursor_ = it->first + 1;
      }
      ++it;
    }
    if (!took) break;
  }
  for (auto it = queues_.begin(); it != queues_.end();) {
    it = it->second.empty() ? queues_.erase(it) : std::next(it);
  }
  return batch;
}

std::optional<Message> Batcher::take_full() {
  if (pending_ < options_.max_batch_size) return std::nullopt;
  return make_batch(std::nullopt);
}

std::optional<Message> Batcher::take_due(SteadyTime now) {
  auto d = deadline();
  if (!d || now < *d) return std::nullopt;
  return make_batch(std::nullopt);
}

std::vector<Message> Batcher::flush_stream(uint32_t stream_index) {
  std::vector<Message> out;
  while (queues_.count(stream_index)) out.push_back(make_batch(stream_index));
  return out;
}

std::vector<Message> Batcher::flush_all() {
  std::vector<Message> out;
  while (pending_ > 0) out.push_back(make_batch(std::nullopt));
  return out;
}

}  // namespace vapipe
