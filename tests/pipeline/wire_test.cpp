#include "pipeline/wire.h"

#include <cstdint>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

namespace vapipe {
namespace {

using namespace std::chrono_literals;

// Turns an encoded message into the parts a receiver would see (copies, like a socket would).
std::vector<Payload> to_parts(const EncodedMessage& enc) {
  std::vector<Payload> parts;
  Payload h = Payload::heap(enc.header.size());
  std::memcpy(h.data(), enc.header.data(), enc.header.size());
  parts.push_back(h);
  for (const Payload& p : enc.inline_payloads) {
    Payload c = Payload::heap(p.size());
    std::memcpy(c.data(), p.data(), p.size());
    parts.push_back(c);
  }
  return parts;
}

Envelope sample_envelope() {
  Envelope e;
  e.stream_id = "cam-7";
  e.stream_index = 3;
  e.seq = 42;
  e.pts_ns = 1400000000;
  e.capture_ns = 1700000000123456789;
  e.camera_ns = 1700000000023456789;
  e.damaged = true;  // decoded after a lost packet
  e.mark_entry(StageKind::kIngest, 11);
  e.mark_entry(StageKind::kPreprocess, 22);
  return e;
}

TEST(Wire, FrameWithInlinePayloadRoundTrips) {
  Message m;
  m.kind = MessageKind::kFrame;
  m.env = sample_envelope();
  m.frame.format = PixelFormat::kNV12;
  m.frame.matrix = ColorMatrix::kBT709;
  m.frame.width = 4;
  m.frame.height = 2;
  m.frame.stride = {4, 4, 0};
  m.frame.offset = {0, 8, 0};
  m.frame.crop = {2, 0, 2, 2};  // streams[].roi
  m.frame.orientation = Orientation::kRotate270;
  m.frame.field = FieldRead::kBottomField;  // ingest.deinterlace
  m.frame.par_n = 64;                       // anamorphic: PAL DV widescreen's pixels
  m.frame.par_d = 45;
  m.payload = Payload::heap(12);
  for (int i = 0; i < 12; ++i) m.payload.data()[i] = std::byte(i);
  auto decoded = decode_message(to_parts(encode_message(m, /*by_reference=*/true)), nullptr);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(decoded->env.stream_id, "cam-7");
  EXPECT_EQ(decoded->env.stream_index, 3u);
  EXPECT_EQ(decoded->env.seq, 42u);
  EXPECT_EQ(decoded->env.pts_ns, 1400000000);
  EXPECT_EQ(decoded->env.capture_ns, 1700000000123456789);
  EXPECT_EQ(decoded->env.camera_ns, 1700000000023456789);
  EXPECT_TRUE(decoded->env.damaged);
  EXPECT_EQ(decoded->env.entry(StageKind::kPreprocess), 22);
  EXPECT_EQ(decoded->frame.format, PixelFormat::kNV12);
  EXPECT_EQ(decoded->frame.matrix, ColorMatrix::kBT709);
  EXPECT_EQ(decoded->frame.offset[1], 8u);
  EXPECT_EQ(decoded->frame.crop, (std::array<uint32_t, 4>{2, 0, 2, 2}));
  EXPECT_EQ(decoded->frame.orientation, Orientation::kRotate270);
  EXPECT_EQ(decoded->frame.field, FieldRead::kBottomField);
  EXPECT_EQ(decoded->frame.par_n, 64u);
  EXPECT_EQ(decoded->frame.par_d, 45u);
  ASSERT_EQ(decoded->payload.size(), 12u);
  EXPECT_EQ(std::memcmp(decoded->payload.data(), m.payload.data(), 12), 0);
}

TEST(Wire, ResultsAndEventsRoundTrip) {
  Message r;
  r.kind = MessageKind::kResult;
  r.env = sample_envelope();
  r.prediction.model = "cnn";
  r.prediction.top_k = {{3, 0.75f, "ball"}, {1, 0.2f, "snow"}};
  auto d = decode_message(to_parts(encode_message(r, true)), nullptr);
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->prediction.top_k.size(), 2u);
  EXPECT_EQ(d->prediction.top_k[0].label, "ball");
  EXPECT_FLOAT_EQ(d->prediction.top_k[1].score, 0.2f);

  Message e = Message::stream_event(MessageKind::kStreamError, sample_envelope(), StreamEvent{"file:///x", "boom", 7, 1});
  auto de = decode_message(to_parts(encode_message(e, true)), nullptr);
  ASSERT_TRUE(de.ok());
  EXPECT_EQ(de->kind, MessageKind::kStreamError);
  EXPECT_EQ(de->event.message, "boom");
  EXPECT_EQ(de->event.frames, 7u);
  EXPECT_EQ(de->event.dropped, 1u);

  for (MessageKind kind : {MessageKind::kStreamReconnecting, MessageKind::kStreamResumed}) {
    StreamEvent ev{"rtsp://cam/1", "stalled: no frame for 10 s", 40, 2};
    ev.attempt = 3;
    auto dr = decode_message(to_parts(encode_message(Message::stream_event(kind, sample_envelope(), ev), true)), nullptr);
    ASSERT_TRUE(dr.ok()) << message_kind_name(kind);
    EXPECT_EQ(dr->kind, kind);
    EXPECT_EQ(dr->event.message, "stalled: no frame for 10 s");
    EXPECT_EQ(dr->event.frames, 40u);
    EXPECT_EQ(dr->event.attempt, 3u);
    EXPECT_TRUE(is_stream_event(kind));
    EXPECT_FALSE(ends_stream(kind));
  }

  StreamEvent start{"file:///a.mp4", "", 0, 0};
  start.duration_ns = 12'345'000'000;
  start.file_bytes = 9'876'543'210;
  start.turn = "rotate-0";
  auto ds = decode_message(
      to_parts(encode_message(Message::stream_event(MessageKind::kStreamStart, sample_envelope(), start), true)), nullptr);
  ASSERT_TRUE(ds.ok());
  EXPECT_EQ(ds->event.duration_ns, 12'345'000'000);
  EXPECT_EQ(ds->event.file_bytes, 9'876'543'210);
  EXPECT_EQ(ds->event.turn, "rotate-0");
  EXPECT_EQ(ds->event.uri, "file:///a.mp4");

  StreamEvent end{"file:///a.mp4", "end of stream", 46, 0};
  end.warning = "the file is cut short: it ends 27704 bytes into its 'mdat' box of 55010 bytes";
  end.timeline_restarts = 2;
  end.timeline_restart_ns = 3'191'666'667;
  auto dend = decode_message(
      to_parts(encode_message(Message::stream_event(MessageKind::kStreamEnd, sample_envelope(), end), true)), nullptr);
  ASSERT_TRUE(dend.ok());
  EXPECT_EQ(dend->event.warning, end.warning);
  EXPECT_EQ(dend->event.timeline_restarts, 2u);
  EXPECT_EQ(dend->event.timeline_restart_ns, 3'191'666'667);
  EXPECT_EQ(dend->event.frames, 46u);

  StreamEvent picture{"rtsp://cam/1", "", 12, 0};
  picture.picture = "/pictures/gate/2026-12-01/14-03-22.125_truck.jpg";
  picture.label = "truck";
  picture.segment_start_seq = 9;
  auto dp = decode_message(
      to_parts(encode_message(Message::stream_event(MessageKind::kStreamPicture, sample_envelope(), picture), true)),
      nullptr);
  ASSERT_TRUE(dp.ok()) << dp.status().message();
  EXPECT_EQ(dp->kind, MessageKind::kStreamPicture);
  EXPECT_EQ(dp->event.picture, picture.picture);
  EXPECT_EQ(dp->event.label, "truck");
  EXPECT_EQ(dp->event.segment_start_seq, 9u);
  EXPECT_EQ(dp->env.seq, sample_envelope().seq);
  EXPECT_TRUE(is_stream_event(MessageKind::kStreamPicture));
  EXPECT_FALSE(ends_stream(MessageKind::kStreamPicture));

  StreamEvent clip{"rtsp://cam/1", "", 12, 0};
  clip.clip = "/pictures/gate/2026-12-01/14-03-22.125_truck.2.mp4";
  clip.label = "truck";
  clip.segment_start_seq = 9;
  clip.duration_ns = 300'033'333'333;
  clip.attempt = 2;
  clip.continues = true;
  clip.turn = "rotate-90";
  auto dc = decode_message(
      to_parts(encode_message(Message::stream_event(MessageKind::kStreamClip, sample_envelope(), clip), true)), nullptr);
  ASSERT_TRUE(dc.ok()) << dc.status().message();
  EXPECT_EQ(dc->kind, MessageKind::kStreamClip);
  EXPECT_EQ(dc->event.clip, clip.clip);
  EXPECT_EQ(dc->event.label, "truck");
  EXPECT_EQ(dc->event.segment_start_seq, 9u);
  EXPECT_EQ(dc->event.duration_ns, clip.duration_ns);
  EXPECT_EQ(dc->event.attempt, 2u);
  EXPECT_TRUE(dc->event.continues);
  EXPECT_EQ(dc->event.turn, "rotate-90");
  EXPECT_TRUE(is_stream_event(MessageKind::kStreamClip));
  EXPECT_FALSE(ends_stream(MessageKind::kStreamClip));
}

TEST(Wire, AChangedEventCarriesTheStreamsRegionAndTurn) {
  StreamEvent changed{"rtsp://cam/2", "roi, rotate", 40, 3};
  changed.roi = {0.25, 0, 0.5, 0.75};
  changed.turn = "rotate-180";
  auto d = decode_message(
      to_parts(encode_message(Message::stream_event(MessageKind::kStreamChanged, sample_envelope(), changed), true)),
      nullptr);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->kind, MessageKind::kStreamChanged);
  EXPECT_EQ(d->event.uri, "rtsp://cam/2");
  EXPECT_EQ(d->event.message, "roi, rotate");
  EXPECT_EQ(d->event.frames, 40u);
  EXPECT_EQ(d->event.dropped, 3u);
  EXPECT_EQ(d->event.roi, changed.roi);
  EXPECT_EQ(d->event.turn, "rotate-180");
  EXPECT_TRUE(is_stream_event(MessageKind::kStreamChanged));
  EXPECT_FALSE(ends_stream(MessageKind::kStreamChanged));
  EXPECT_STREQ(message_kind_name(MessageKind::kStreamChanged), "stream-changed");
}

TEST(Wire, ShmPayloadTravelsAsADescriptorAndIsAdopted) {
  auto pool = ShmPool::create("/vapipe-test-wire-" + std::to_string(getpid()), 4, 1024);
  ASSERT_TRUE(pool.ok());
  Message batch;
  batch.kind = MessageKind::kBatch;
  for (int i = 0; i < 2; ++i) {
    Message t;
    t.kind = MessageKind::kTensor;
    t.env = sample_envelope();
    t.env.seq = i;
    t.tensor = {DType::kFloat32, 1, 1, 4};
    auto p = (*pool)->acquire(16, 10ms);
    ASSERT_TRUE(p.ok());
    std::memset(p->data(), 0x40 + i, 16);
    t.payload = *p;
    batch.items.push_back(std::move(t));
  }
  EncodedMessage enc = encode_message(batch, /*by_reference=*/true);
  EXPECT_TRUE(enc.inline_payloads.empty());
  EXPECT_LT(enc.header.size(), 400u);  // descriptors only
  ASSERT_EQ(enc.handed_off.size(), 2u);
  for (Payload& p : enc.handed_off) p.storage()->hand_off();
  batch.items.clear();
  enc.handed_off.clear();
  EXPECT_EQ((*pool)->free_slots(), 2u);

  ShmPoolRegistry registry;
  auto d = decode_message(to_parts(enc), &registry);
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_EQ(d->items.size(), 2u);
  EXPECT_EQ(static_cast<int>(d->items[1].payload.data()[0]), 0x41);
  d.value().items.clear();
  EXPECT_EQ((*pool)->free_slots(), 4u);

  // The same descriptors again are stale: each item gets an error, the batch survives.
  auto stale = decode_message(to_parts(enc), &registry);
  ASSERT_TRUE(stale.ok()) << stale.status().message();
  EXPECT_NE(stale->items[0].error.find("stale"), std::string::npos) << stale->items[0].error;
  EXPECT_TRUE(stale->items[0].payload.empty());
}

TEST(Wire, MalformedMessagesAreDataLoss) {
  Message m = Message::stream_event(MessageKind::kStreamEnd, sample_envelope(), {});
  EncodedMessage enc = encode_message(m, true);
  // Truncated.
  std::vector<Payload> parts = to_parts(enc);
  parts[0].set_size(parts[0].size() - 3);
  EXPECT_EQ(decode_message(parts, nullptr).status().code(), StatusCode::kDataLoss);
  // Bad magic.
  parts = to_parts(enc);
  parts[0].data()[0] = std::byte{0};
  EXPECT_EQ(decode_message(parts, nullptr).status().code(), StatusCode::kDataLoss);
  // Unknown version.
  parts = to_parts(enc);
  parts[0].data()[2] = std::byte{99};
  auto v = decode_message(parts, nullptr);
  EXPECT_NE(v.status().message().find("wire version 99"), std::string::npos);
  // Empty.
  EXPECT_FALSE(decode_message({}, nullptr).ok());
}

}  // namespace
}  // namespace vapipe
