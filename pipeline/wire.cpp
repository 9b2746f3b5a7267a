#include "pipeline/wire.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace vapipe {
namespace {

constexpr uint16_t kWireMagic = 0x5650;  // "VP"
// 2: kStreamStart carries the media's duration; 3: frames a crop; 4: kStreamEnd a warning, envelopes
// the camera's clock, frames an orientation; 5: frames the field preprocessing reads; 7: frames their
// pixels' aspect ratio; 8: kStreamEnd a file's timeline restarts; 9: kStreamStart a file's head hash;
// 10: and its edit list's offset
constexpr uint8_t kWireVersion = 10;
constexpr uint32_t kMaxBatchItems = 1 << 16;
constexpr uint32_t kMaxStringBytes = 1 << 20;

enum class PayloadTag : uint8_t { kNone = 0, kShm = 1, kInline = 2 };

class Writer {
 public:
  explicit Writer(std::vector<std::byte>* out) : out_(out) {}
  template <typename T>
  void pod(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    out_->insert(out_->end(), p, p + sizeof(T));
  }
  void str(const std::string& s) {
    pod(static_cast<uint32_t>(s.size()));
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    out_->insert(out_->end(), p, p + s.size());
  }

 private:
  std::vector<std::byte>* out_;
};

class Reader {
 public:
  Reader(const std::byte* data, size_t size) : p_(data), end_(data + size) {}
  template <typename T>
  bool pod(T* v) {
    if (static_cast<size_t>(end_ - p_) < sizeof(T)) return fail();
    std::memcpy(v, p_, sizeof(T));
    p_ += sizeof(T);
    return true;
  }
  bool str(std::string* s) {
    uint32_t n = 0;
    if (!pod(&n) || n > kMaxStringBytes || static_cast<size_t>(end_ - p_) < n) return fail();
    s->assign(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return true;
  }
  bool ok() const { return ok_; }
  bool at_end() const { return p_ == end_; }

 private:
  bool fail() {
    ok_ = false;
    return false;
  }
  const std::byte* p_;
  const std::byte* end_;
  bool ok_ = true;
};

void write_envelope(Writer& w, const Envelope& e) {
  w.str(e.stream_id);
  w.pod(e.stream_index);
  w.pod(e.seq);
  w.pod(e.pts_ns);
  w.pod(e.capture_ns);
  w.pod(e.camera_ns);
  w.pod(static_cast<uint8_t>(e.damaged ? 1 : 0));
  for (int64_t t : e.stage_entry_ns) w.pod(t);
}

bool read_envelope(Reader& r, Envelope* e) {
  r.str(&e->stream_id);
  r.pod(&e->stream_index);
  r.pod(&e->seq);
  r.pod(&e->pts_ns);
  r.pod(&e->capture_ns);
  r.pod(&e->camera_ns);
  uint8_t damaged = 0;
  r.pod(&damaged);
  e->damaged = damaged != 0;
  for (int64_t& t : e->stage_entry_ns) r.pod(&t);
  return r.ok();
}

void write_payload(Writer& w, const Payload& p, bool by_reference, EncodedMessage* enc) {
  if (p.empty()) {
    w.pod(PayloadTag::kNone);
    return;
  }
  const ShmSlotRef* ref = p.storage()->shm_ref();
  if (by_reference && ref != nullptr) {
    w.pod(PayloadTag::kShm);
    w.str(ref->pool);
    w.pod(ref->slot);
    w.pod(ref->generation);
    w.pod(static_cast<uint64_t>(p.size()));
    enc->handed_off.push_back(p);
    return;
  }
  w.pod(PayloadTag::kInline);
  w.pod(static_cast<uint32_t>(enc->inline_payloads.size() + 1));  // part index
  w.pod(static_cast<uint64_t>(p.size()));
  enc->inline_payloads.push_back(p);
}

Status read_payload(Reader& r, std::vector<Payload>& parts, ShmPoolRegistry* pools, Payload* out) {
  PayloadTag tag{};
  if (!r.pod(&tag)) return DataLoss("truncated payload descriptor");
  switch (tag) {
    case PayloadTag::kNone:
      return Status::Ok();
    case PayloadTag::kShm: {
      ShmSlotRef ref;
      uint64_t size = 0;
      r.str(&ref.pool);
      r.pod(&ref.slot);
      r.pod(&ref.generation);
      if (!r.pod(&size)) return DataLoss("truncated shared memory descriptor");
      if (pools == nullptr) return DataLoss("shared memory descriptor on a transport without shared memory");
      VAPIPE_ASSIGN_OR_RETURN(auto pool, pools->get(ref.pool));
      VAPIPE_ASSIGN_OR_RETURN(*out, pool->adopt(ref, size));
      return Status::Ok();
    }
    case PayloadTag::kInline: {
      uint32_t index = 0;
      uint64_t size = 0;
      r.pod(&index);
      if (!r.pod(&size)) return DataLoss("truncated inline payload descriptor");
      if (index == 0 || index >= parts.size()) {
        return DataLoss("inline payload names part " + std::to_string(index) + " of " +
                        std::to_string(parts.size()));
      }
      if (parts[index].size() != size) return DataLoss("inline payload size does not match its part");
      *out = parts[index];
      return Status::Ok();
    }
  }
  return DataLoss("unknown payload tag " + std::to_string(static_cast<int>(tag)));
}

// A payload that cannot be adopted (stale slot, pool gone) spoils only its own frame: the message
// is kept, without payload and with the error, so the frame still gets its (error) result.
Status read_payload_or_mark(Reader& r, std::vector<Payload>& parts, ShmPoolRegistry* pools, Message* m) {
  Status s = read_payload(r, parts, pools, &m->payload);
  if (!s.ok() && r.ok()) {
    m->error = "payload unavailable: " + s.message();
    return Status::Ok();
  }
  return s;
}

void write_body(Writer& w, const Message& m, bool by_reference, EncodedMessage* enc) {
  w.pod(m.kind);
  write_envelope(w, m.env);
  w.str(m.error);
  switch (m.kind) {
    case MessageKind::kFrame:
      w.pod(m.frame.format);
      w.pod(m.frame.matrix);
      w.pod(static_cast<uint8_t>(m.frame.full_range));
      w.pod(m.frame.width);
      w.pod(m.frame.height);
      for (uint32_t s : m.frame.stride) w.pod(s);
      for (uint32_t o : m.frame.offset) w.pod(o);
      w.pod(m.frame.orientation);
      w.pod(m.frame.field);
      for (uint32_t c : m.frame.crop) w.pod(c);
      w.pod(m.frame.par_n);
      w.pod(m.frame.par_d);
      write_payload(w, m.payload, by_reference, enc);
      break;
    case MessageKind::kTensor:
      w.pod(m.tensor.dtype);
      w.pod(m.tensor.channels);
      w.pod(m.tensor.height);
      w.pod(m.tensor.width);
      write_payload(w, m.payload, by_reference, enc);
      break;
    case MessageKind::kBatch:
      w.pod(static_cast<uint32_t>(m.items.size()));
      for (const Message& item : m.items) write_body(w, item, by_reference, enc);
      break;
    case MessageKind::kResult:
      w.str(m.prediction.model);
      w.str(m.prediction.error);
      w.pod(static_cast<uint32_t>(m.prediction.top_k.size()));
      for (const ClassScore& c : m.prediction.top_k) {
        w.pod(c.class_id);
        w.pod(c.score);
        w.str(c.label);
      }
      break;
    case MessageKind::kStreamStart:
    case MessageKind::kStreamEnd:
    case MessageKind::kStreamError:
    case MessageKind::kStreamReconnecting:
    case MessageKind::kStreamResumed:
    case MessageKind::kStreamPicture:
    case MessageKind::kStreamClip:
    case MessageKind::kStreamChanged:
      w.str(m.event.uri);
      w.str(m.event.message);
      w.pod(m.event.frames);
      w.pod(m.event.dropped);
      if (m.kind == MessageKind::kStreamReconnecting || m.kind == MessageKind::kStreamResumed) w.pod(m.event.attempt);
      if (m.kind == MessageKind::kStreamStart) {
        w.pod(m.event.duration_ns);
        w.pod(m.event.file_bytes);
        w.str(m.event.file_head);
        w.pod(m.event.edit_list_ns);
        w.str(m.event.turn);
      }
      if (m.kind == MessageKind::kStreamEnd) {
        w.str(m.event.warning);
        w.pod(m.event.timeline_restarts);
        w.pod(m.event.timeline_restart_ns);
      }
      if (m.kind == MessageKind::kStreamPicture) {
        w.str(m.event.picture);
        w.str(m.event.label);
        w.pod(m.event.segment_start_seq);
      }
      if (m.kind == MessageKind::kStreamClip) {
        w.str(m.event.clip);
        w.str(m.event.label);
        w.pod(m.event.segment_start_seq);
        w.pod(m.event.duration_ns);
        w.pod(m.event.attempt);
        w.pod(static_cast<uint8_t>(m.event.continues));
        w.str(m.event.turn);
      }
      if (m.kind == MessageKind::kStreamChanged) {
        for (double v : m.event.roi) w.pod(v);
        w.str(m.event.turn);
      }
      break;
  }
}

Status read_body(Reader& r, std::vector<Payload>& parts, ShmPoolRegistry* pools, Message* m, int depth) {
  if (!r.pod(&m->kind)) return DataLoss("truncated message kind");
  if (!read_envelope(r, &m->env)) return DataLoss("truncated envelope");
  if (!r.str(&m->error)) return DataLoss("truncated error field");
  switch (m->kind) {
    case MessageKind::kFrame: {
      uint8_t full_range = 0;
      r.pod(&m->frame.format);
      r.pod(&m->frame.matrix);
      r.pod(&full_range);
      r.pod(&m->frame.width);
      r.pod(&m->frame.height);
      for (uint32_t& s : m->frame.stride) r.pod(&s);
      for (uint32_t& o : m->frame.offset) r.pod(&o);
      r.pod(&m->frame.orientation);
      r.pod(&m->frame.field);
      for (uint32_t& c : m->frame.crop) r.pod(&c);
      r.pod(&m->frame.par_n);
      r.pod(&m->frame.par_d);
      if (!r.ok()) return DataLoss("truncated frame header");
      if (m->frame.par_n == 0 || m->frame.par_d == 0) {
        return DataLoss("pixel aspect ratio " + std::to_string(m->frame.par_n) + ":" + std::to_string(m->frame.par_d));
      }
      if (static_cast<uint8_t>(m->frame.format) > static_cast<uint8_t>(PixelFormat::kRGB)) {
        return DataLoss("unknown pixel format " + std::to_string(static_cast<int>(m->frame.format)));
      }
      if (static_cast<uint8_t>(m->frame.orientation) > kMaxOrientation) {
        return DataLoss("unknown orientation " + std::to_string(static_cast<int>(m->frame.orientation)));
      }
      if (static_cast<uint8_t>(m->frame.field) > kMaxFieldRead) {
        return DataLoss("unknown field " + std::to_string(static_cast<int>(m->frame.field)));
      }
      m->frame.full_range = full_range != 0;
      return read_payload_or_mark(r, parts, pools, m);
    }
    case MessageKind::kTensor:
      r.pod(&m->tensor.dtype);
      r.pod(&m->tensor.channels);
      r.pod(&m->tensor.height);
      if (!r.pod(&m->tensor.width)) return DataLoss("truncated tensor header");
      if (static_cast<uint8_t>(m->tensor.dtype) > static_cast<uint8_t>(DType::kFloat16)) {
        return DataLoss("unknown tensor dtype");
      }
      return read_payload_or_mark(r, parts, pools, m);
    case MessageKind::kBatch: {
      if (depth > 0) return DataLoss("nested batch");
      uint32_t n = 0;
      if (!r.pod(&n) || n > kMaxBatchItems) return DataLoss("bad batch size");
      m->items.resize(n);
      for (Message& item : m->items) {
        VAPIPE_RETURN_IF_ERROR(read_body(r, parts, pools, &item, depth + 1));
      }
      return Status::Ok();
    }
    case MessageKind::kResult: {
      uint32_t n = 0;
      r.str(&m->prediction.model);
      r.str(&m->prediction.error);
      if (!r.pod(&n) || n > 100000) return DataLoss("bad top-k count");
      m->prediction.top_k.resize(n);
      for (ClassScore& c : m->prediction.top_k) {
        r.pod(&c.class_id);
        r.pod(&c.score);
        r.str(&c.label);
      }
      return r.ok() ? Status::Ok() : DataLoss("truncated result");
    }
    case MessageKind::kStreamStart:
    case MessageKind::kStreamEnd:
    case MessageKind::kStreamError:
    case MessageKind::kStreamReconnecting:
    case MessageKind::kStreamResumed:
    case MessageKind::kStreamPicture:
    case MessageKind::kStreamClip:
    case MessageKind::kStreamChanged:
      r.str(&m->event.uri);
      r.str(&m->event.message);
      r.pod(&m->event.frames);
      r.pod(&m->event.dropped);
      if (m->kind == MessageKind::kStreamReconnecting || m->kind == MessageKind::kStreamResumed) r.pod(&m->event.attempt);
      if (m->kind == MessageKind::kStreamStart) {
        r.pod(&m->event.duration_ns);
        r.pod(&m->event.file_bytes);
        r.str(&m->event.file_head);
        r.pod(&m->event.edit_list_ns);
        r.str(&m->event.turn);
      }
      if (m->kind == MessageKind::kStreamEnd) {
        r.str(&m->event.warning);
        r.pod(&m->event.timeline_restarts);
        r.pod(&m->event.timeline_restart_ns);
      }
      if (m->kind == MessageKind::kStreamPicture) {
        r.str(&m->event.picture);
        r.str(&m->event.label);
        r.pod(&m->event.segment_start_seq);
      }
      if (m->kind == MessageKind::kStreamClip) {
        uint8_t continues = 0;
        r.str(&m->event.clip);
        r.str(&m->event.label);
        r.pod(&m->event.segment_start_seq);
        r.pod(&m->event.duration_ns);
        r.pod(&m->event.attempt);
        r.pod(&continues);
        m->event.continues = continues != 0;
        r.str(&m->event.turn);
      }
      if (m->kind == MessageKind::kStreamChanged) {
        for (double& v : m->event.roi) r.pod(&v);
        r.str(&m->event.turn);
      }
      return r.ok() ? Status::Ok() : DataLoss("truncated stream event");
  }
  return DataLoss("unknown message kind " + std::to_string(static_cast<int>(m->kind)));
}

}  // namespace

EncodedMessage encode_message(const Message& msg, bool by_reference) {
  EncodedMessage enc;
  Writer w(&enc.header);
  w.pod(kWireMagic);
  w.pod(kWireVersion);
  write_body(w, msg, by_reference, &enc);
  return enc;
}

Result<Message> decode_message(std::vector<Payload> parts, ShmPoolRegistry* pools) {
  if (parts.empty() || parts[0].empty()) return DataLoss("empty message");
  Reader r(parts[0].data(), parts[0].size());
  uint16_t magic = 0;
  uint8_t version = 0;
  r.pod(&magic);
  r.pod(&version);
  if (!r.ok() || magic != kWireMagic) return DataLoss("not a vapipe message (bad magic)");
  if (version != kWireVersion) {
    return DataLoss("wire version " + std::to_string(version) + " is not supported (expected " +
                    std::to_string(kWireVersion) + ")");
  }
  Message m;
  VAPIPE_RETURN_IF_ERROR(read_body(r, parts, pools, &m, 0));
  if (!r.at_end()) return DataLoss("trailing bytes after message");
  return m;
}

}  // namespace vapipe
