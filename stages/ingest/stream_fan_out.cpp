#include "stages/ingest/stream_fan_out.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "pipeline/cuda/device_memory.h"
#include "pipeline/logging.h"

namespace vapipe {

void crop_to_region(const std::array<double, 4>& roi, FrameInfo* info) {
  info->crop = {};
  const bool whole = roi[0] == 0 && roi[1] == 0 && roi[2] == 1 && roi[3] == 1;
  const uint32_t width = info->upright_width(), height = info->upright_height();  // an roi is of what is shown
  if (whole || width == 0 || height == 0) return;  // preprocess refuses an empty frame anyway
  auto at = [](double fraction, uint32_t size) {
    return std::min<uint32_t>(size, static_cast<uint32_t>(std::lround(fraction * size)));
  };
  const uint32_t x = std::min(at(roi[0], width), width - 1);
  const uint32_t y = std::min(at(roi[1], height), height - 1);
  const uint32_t w = std::clamp<uint32_t>(at(roi[0] + roi[2], width), x + 1, width) - x;
  const uint32_t h = std::clamp<uint32_t>(at(roi[1] + roi[3], height), y + 1, height) - y;
  info->crop = {x, y, w, h};
}

StreamFanOut::StreamFanOut(uint32_t source_index, std::string uri, std::vector<FanOutTarget> targets,
                           SeqReservations* reservations)
    : source_index_(source_index), reservations_(reservations), uri_(std::move(uri)) {
  for (FanOutTarget& t : targets) add(std::move(t));
}

StreamFanOut::~StreamFanOut() = default;

bool StreamFanOut::add(FanOutTarget target) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return false;
  for (const auto& t : targets_) {
    if (t->config.index != target.index) continue;
    if (t->leaving) t->rejoin = std::move(target);  // it comes back (the reader's thread resets it)
    return true;
  }
  auto t = std::make_unique<Target>();
  t->emitted = target.earlier_results;
  t->next_seq = std::max(target.first_seq, target.earlier_results);
  t->next_number = t->next_seq;
  if (target.ended_earlier) t->leaving = "ended in an earlier run";
  t->config = std::move(target);
  targets_.push_back(std::move(t));
  return true;
}

void StreamFanOut::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
}

void StreamFanOut::remove(uint32_t index, std::string reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& t : targets_) {
    if (t->config.index != index) continue;
    t->rejoin.reset();  // listed again and removed again before the reader's thread took it back
    if (!t->leaving) t->leaving = std::move(reason);
  }
}

void StreamFanOut::set_region(uint32_t index, const std::array<double, 4>& roi) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& t : targets_) {
    if (t->config.index == index) t->next_region = roi;
  }
}

bool StreamFanOut::has(uint32_t index) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::any_of(targets_.begin(), targets_.end(), [&](const auto& t) { return t->config.index == index; });
}

std::vector<std::string> StreamFanOut::ids() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> ids;
  for (const auto& t : targets_) ids.push_back(t->config.id);
  return ids;
}

std::optional<FanOutTarget> StreamFanOut::target_named(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& t : targets_) {
    if (t->config.id == id && !t->leaving) return t->config;
  }
  return std::nullopt;
}

std::optional<uint64_t> StreamFanOut::next_seq_of(uint32_t index) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& t : targets_) {
    if (t->config.index == index) return t->next_number.load();
  }
  return std::nullopt;
}

std::optional<MessageKind> StreamFanOut::ended_as() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ended_as_;
}

std::optional<uint64_t> StreamFanOut::resume_from() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::optional<uint64_t> from;
  for (const auto& t : targets_) {
    if (!t->config.ended_earlier) from = std::min(from.value_or(UINT64_MAX), t->config.earlier_results);
  }
  return from;
}

std::vector<StreamFanOut::Snapshot> StreamFanOut::snapshot() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Snapshot> out;
  out.reserve(targets_.size());
  for (const auto& t : targets_) {
    if (t->rejoin) {
      // Listed again by a reload. One that has not ended yet never leaves; one that has ended starts
      // again with its next frame, numbered on from its last.
      if (t->ended) {
        t->ended = false;
        t->started = false;
        t->end_said = true;
        t->emitted = 0;
        t->seq_offset.reset();
        t->next_seq = std::max(t->rejoin->first_seq, t->next_number.load());
        t->next_number = t->next_seq;
        t->config.roi = t->rejoin->roi;
        t->config.start_message = t->rejoin->start_message;
      }
      t->leaving.reset();
      t->rejoin.reset();
    }
    const bool region_changed = t->next_region.has_value();
    if (region_changed) {
      t->config.roi = *t->next_region;
      t->next_region.reset();
    }
    out.push_back(Snapshot{t.get(), t->leaving, region_changed});
  }
  return out;
}

Status StreamFanOut::say_changed_regions(const std::vector<Snapshot>& targets) {
  for (const Snapshot& s : targets) {
    Target& t = *s.target;
    if (!s.region_changed || t.ended || s.leaving) continue;
    StreamEvent ev{uri_, "a reload changed its roi", 0, dropped_};
    ev.roi = t.config.roi;
    ev.turn = t.config.turn;
    VAPIPE_RETURN_IF_ERROR(send_event(t, MessageKind::kStreamChanged, ev));
  }
  return Status::Ok();
}

Status StreamFanOut::send_event(Target& t, MessageKind kind, const StreamEvent& source_event) {
  Envelope env;
  env.stream_id = t.config.id;
  env.stream_index = t.config.index;
  StreamEvent ev = source_event;
  ev.frames = t.emitted;
  return out_->emit(Message::stream_event(kind, env, std::move(ev)));
}

Status StreamFanOut::end_leaving(const std::vector<Snapshot>& targets) {
  for (const Snapshot& s : targets) {
    if (!s.leaving || s.target->ended) continue;
    s.target->ended = true;
    if (s.target->end_said) continue;  // it came back and left again before its next frame
    StreamEvent ev{uri_, *s.leaving, 0, dropped_};
    VAPIPE_LOG_INFO("stream '{}': {} after {} frames", s.target->config.id, *s.leaving, s.target->emitted);
    VAPIPE_RETURN_IF_ERROR(send_event(*s.target, MessageKind::kStreamEnd, ev));
  }
  return Status::Ok();
}

Result<Payload> StreamFanOut::copy_payload(const Payload& from) {
  VAPIPE_ASSIGN_OR_RETURN(Payload to, out_->allocate(from.size()));  // its wait for a slot is not watched
  to.set_size(from.size());
  if (watchdog_) watchdog_->working("copying a decoded frame for a stream of its group");
  struct Waiting {
    StageWatchdog* dog;
    ~Waiting() {
      if (dog) dog->waiting();
    }
  } waiting{watchdog_};
  if (!from.on_device() && !to.on_device()) {
    std::memcpy(to.data(), from.data(), from.size());
    return to;
  }
  // A GPU lane: the frame is copied by the GPU, and drained before the original can leave (whoever
  // gets it may give its slot back to the pool while a copy still reads it).
  const int device = to.on_device() ? to.device() : from.device();
  DeviceGuard guard(device);
  if (!cuda_stream_) {
    VAPIPE_ASSIGN_OR_RETURN(cuda_stream_, CudaStream::create(device));
  }
  Status copied = cuda_copy(to.data(), from.data(), from.size(), cuda_stream_->get());
  if (copied.ok()) copied = to.record_ready(cuda_stream_->get());
  // Drained whatever failed: the slot must not go back to the pool while a copy still writes it.
  const Status drained = cuda_stream_synchronize(cuda_stream_->get());
  VAPIPE_RETURN_IF_ERROR(copied);
  VAPIPE_RETURN_IF_ERROR(drained);
  return to;
}

Status StreamFanOut::send_frame(Target& t, Message&& frame) {
  if (!t.started) {
    // Joined after its source started (a reload added it, or it came back): its own start first.
    t.started = true;
    t.end_said = false;
    StreamEvent ev{uri_, t.config.start_message, 0, dropped_};
    ev.duration_ns = duration_ns_;
    ev.turn = turn_;
    {
      std::lock_guard<std::mutex> lock(mutex_);  // target_named() copies configs on other threads
      t.config.turn = turn_;
    }
    VAPIPE_RETURN_IF_ERROR(send_event(t, MessageKind::kStreamStart, ev));
  }
  const uint64_t source_seq = frame.env.seq;
  if (t.config.index != source_index_) {
    // A member numbers its own frames, contiguous from its first (gaps where its source has them).
    if (!t.seq_offset) t.seq_offset = static_cast<int64_t>(source_seq) - static_cast<int64_t>(t.next_seq);
    frame.env.seq = static_cast<uint64_t>(static_cast<int64_t>(source_seq) - *t.seq_offset);
    if (reservations_) {
      if (Status st = reservations_->ensure(t.config.id, frame.env.seq); !st.ok() && !reservation_failed_) {
        reservation_failed_ = true;
        VAPIPE_LOG_ERROR("stream '{}': {} (after a restart of its lane, sequence numbers could repeat)", t.config.id,
                         st.message());
      }
    }
  }
  frame.env.stream_id = t.config.id;
  frame.env.stream_index = t.config.index;
  crop_to_region(t.config.roi, &frame.frame);
  const uint64_t seq = frame.env.seq;
  VAPIPE_RETURN_IF_ERROR(out_->emit(std::move(frame)));
  t.next_number = seq + 1;
  ++t.emitted;
  return Status::Ok();
}

Status StreamFanOut::emit(Message&& msg) {
  if (msg.kind == MessageKind::kStreamEnd || msg.kind == MessageKind::kStreamError) {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;  // no stream joins after its source's end
    ended_as_ = msg.kind;
  }
  const std::vector<Snapshot> targets = snapshot();
  VAPIPE_RETURN_IF_ERROR(end_leaving(targets));
  VAPIPE_RETURN_IF_ERROR(say_changed_regions(targets));
  if (is_stream_event(msg.kind)) {
    if (!msg.event.uri.empty()) uri_ = msg.event.uri;
    dropped_ = msg.event.dropped;
    if (msg.kind == MessageKind::kStreamStart) duration_ns_ = msg.event.duration_ns;
    if (msg.kind == MessageKind::kStreamStart || msg.kind == MessageKind::kStreamChanged) turn_ = msg.event.turn;
  }
  switch (msg.kind) {
    case MessageKind::kFrame: {
      std::vector<Target*> to;
      for (const Snapshot& s : targets) {
        if (!s.target->ended && msg.env.seq >= s.target->config.earlier_results) to.push_back(s.target);
      }
      // Copies for all but the last, which takes the decoded original.
      for (size_t k = 0; k + 1 < to.size(); ++k) {
        Message copy;
        copy.kind = MessageKind::kFrame;
        copy.env = msg.env;
        copy.frame = msg.frame;
        copy.error = msg.error;
        if (!msg.payload.empty()) {
          VAPIPE_ASSIGN_OR_RETURN(copy.payload, copy_payload(msg.payload));
        }
        VAPIPE_RETURN_IF_ERROR(send_frame(*to[k], std::move(copy)));
      }
      if (!to.empty()) return send_frame(*to.back(), std::move(msg));
      return Status::Ok();  // nobody takes it (each has its result already): its slot goes back
    }
    case MessageKind::kStreamStart:
      source_started_ = true;
      {
        // Ingest's word on the group's turn ("rotate-0" as stored, where no tag decides): a region's
        // changed event says it too.
        std::lock_guard<std::mutex> lock(mutex_);
        for (const Snapshot& s : targets) s.target->config.turn = msg.event.turn;
      }
      for (const Snapshot& s : targets) {
        if (s.target->ended || s.target->started) continue;
        s.target->started = true;
        s.target->end_said = false;
        VAPIPE_RETURN_IF_ERROR(send_event(*s.target, msg.kind, msg.event));
      }
      return Status::Ok();
    case MessageKind::kStreamReconnecting:
    case MessageKind::kStreamResumed: {
      // Before the source's first frame (a camera unreachable at the start), to every stream: each says
      // why it has no frame yet. After it, to those that started (one that joined meanwhile starts with
      // its first frame). Attempt 0 is a lane restart's: to the streams that sent frames before it.
      const bool lane_restart = msg.kind == MessageKind::kStreamReconnecting && msg.event.attempt == 0;
      for (const Snapshot& s : targets) {
        if (s.target->ended) continue;
        if (lane_restart) {
          const bool ran_before = s.target->config.index == source_index_ || s.target->config.first_seq > 0;
          if (ran_before) s.target->started = true;
          if (!ran_before) continue;
        } else if (source_started_ && !s.target->started) {
          continue;
        }
        s.target->end_said = false;  // downstream takes it as running again: its end is to come
        VAPIPE_RETURN_IF_ERROR(send_event(*s.target, msg.kind, msg.event));
      }
      if (lane_restart) source_started_ = true;  // it ran before: its next frame follows a `resumed`
      return Status::Ok();
    }
    case MessageKind::kStreamChanged:
      // The source's settings (its uri, rotate, ...) changed: every stream of the group has them, each
      // with its own region.
      {
        std::lock_guard<std::mutex> lock(mutex_);  // target_named() copies configs on other threads
        for (const Snapshot& s : targets) s.target->config.turn = msg.event.turn;
      }
      for (const Snapshot& s : targets) {
        Target& t = *s.target;
        if (t.ended) continue;
        StreamEvent ev = msg.event;
        ev.roi = t.config.roi;
        VAPIPE_RETURN_IF_ERROR(send_event(t, msg.kind, ev));
      }
      return Status::Ok();
    case MessageKind::kStreamPicture:
    case MessageKind::kStreamClip:
      // A picture (a clip) one stream of the group asked for (its index in the envelope), of the frame the
      // envelope numbers by the source: numbered as that stream numbered the frame.
      for (const Snapshot& s : targets) {
        Target& t = *s.target;
        if (t.config.index != msg.env.stream_index || t.ended || !t.started) continue;
        if (t.config.index != source_index_ && msg.kind == MessageKind::kStreamPicture) {  // a clip has no seq
          if (!t.seq_offset) return Status::Ok();  // it has had no frame yet
          msg.env.seq = static_cast<uint64_t>(static_cast<int64_t>(msg.env.seq) - *t.seq_offset);
        }
        msg.env.stream_id = t.config.id;
        return out_->emit(std::move(msg));
      }
      return Status::Ok();
    case MessageKind::kStreamEnd:
    case MessageKind::kStreamError:
      for (const Snapshot& s : targets) {
        if (s.target->ended) continue;
        s.target->ended = true;
        if (s.target->end_said) continue;
        VAPIPE_RETURN_IF_ERROR(send_event(*s.target, msg.kind, msg.event));
      }
      return Status::Ok();
    default:
      return out_->emit(std::move(msg));
  }
}

Status StreamFanOut::idle() {
  const std::vector<Snapshot> targets = snapshot();
  VAPIPE_RETURN_IF_ERROR(end_leaving(targets));
  return say_changed_regions(targets);
}

}  // namespace vapipe
