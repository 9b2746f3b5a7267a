#include "stages/ingest/stream_fan_out.h"

#include <cstdint>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <thread>

#include "tests/fakes/stage_harness.h"

namespace vapipe {
namespace {

using testing::CollectingEmitter;

FanOutTarget target(uint32_t index, std::string id, std::array<double, 4> roi = {0, 0, 1, 1}) {
  FanOutTarget t;
  t.index = index;
  t.id = std::move(id);
  t.roi = roi;
  return t;
}

Envelope source_env(uint64_t seq = 0) {
  Envelope e;
  e.stream_id = "door";
  e.stream_index = 0;
  e.seq = seq;
  e.pts_ns = static_cast<int64_t>(seq) * 40'000'000;
  return e;
}

// A 64x48 I420 frame whose bytes all hold `fill`, as the reader emits it (the source's crop set).
Message frame(uint64_t seq, uint8_t fill) {
  Message m;
  m.kind = MessageKind::kFrame;
  m.env = source_env(seq);
  m.frame.format = PixelFormat::kI420;
  m.frame.width = 64;
  m.frame.height = 48;
  m.frame.stride = {64, 32, 32};
  m.frame.offset = {0, 64 * 48, 64 * 48 + 32 * 24};
  m.payload = Payload::heap(m.frame.required_bytes());
  std::memset(m.payload.data(), fill, m.payload.size());
  return m;
}

Message event(MessageKind kind, uint64_t frames = 0, std::string message = "", uint32_t attempt = 0) {
  StreamEvent ev{"rtsp://cam/door", std::move(message), frames, 0};
  ev.attempt = attempt;
  if (kind == MessageKind::kStreamStart) ev.duration_ns = 5'000'000'000;
  return Message::stream_event(kind, source_env(), std::move(ev));
}

// What each stream got, in order.
std::map<std::string, std::vector<const Message*>> by_stream(const CollectingEmitter& out) {
  std::map<std::string, std::vector<const Message*>> got;
  for (const Message& m : out.messages) got[m.env.stream_id].push_back(&m);
  return got;
}

TEST(StreamFanOut, EachStreamOfTheGroupGetsEveryFrameWithItsOwnIdIndexRegionAndPayload) {
  CollectingEmitter out;
  StreamFanOut fan(0, "rtsp://cam/door",
                   {target(0, "door"), target(2, "door-left", {0, 0, 0.5, 1}), target(3, "door-right", {0.5, 0, 0.5, 1})},
                   nullptr);
  fan.attach(&out);
  ASSERT_TRUE(fan.emit(event(MessageKind::kStreamStart)).ok());
  std::vector<const std::byte*> originals;
  for (uint64_t seq = 0; seq < 3; ++seq) {
    Message m = frame(seq, static_cast<uint8_t>(10 + seq));
    originals.push_back(m.payload.data());
    ASSERT_TRUE(fan.emit(std::move(m)).ok());
  }
  ASSERT_TRUE(fan.emit(event(MessageKind::kStreamEnd, 3, "end of stream")).ok());

  auto got = by_stream(out);
  ASSERT_EQ(got.size(), 3u);
  const std::map<std::string, std::pair<uint32_t, std::array<uint32_t, 4>>> expected = {
      {"door", {0, {0, 0, 0, 0}}}, {"door-left", {2, {0, 0, 32, 48}}}, {"door-right", {3, {32, 0, 32, 48}}}};
  for (const auto& [id, want] : expected) {
    const auto& msgs = got[id];
    ASSERT_EQ(msgs.size(), 5u) << id;  // start, 3 frames, end
    EXPECT_EQ(msgs.front()->kind, MessageKind::kStreamStart) << id;
    EXPECT_EQ(msgs.front()->event.duration_ns, 5'000'000'000) << id;
    EXPECT_EQ(msgs.front()->event.uri, "rtsp://cam/door") << id;
    for (uint64_t seq = 0; seq < 3; ++seq) {
      const Message& f = *msgs[1 + seq];
      ASSERT_EQ(f.kind, MessageKind::kFrame) << id;
      EXPECT_EQ(f.env.stream_index, want.first) << id;
      EXPECT_EQ(f.env.seq, seq) << id;
      EXPECT_EQ(f.env.pts_ns, static_cast<int64_t>(seq) * 40'000'000) << id;
      EXPECT_EQ(f.frame.crop, want.second) << id;
      ASSERT_EQ(f.payload.size(), f.frame.required_bytes()) << id;
      for (size_t b = 0; b < f.payload.size(); b += 97) {
        ASSERT_EQ(static_cast<uint8_t>(f.payload.data()[b]), 10 + seq) << id << " byte " << b;
      }
      // The last stream takes the decoded original; the others, copies of their own.
      EXPECT_EQ(f.payload.data() == originals[seq], id == "door-right") << id;
    }
    EXPECT_EQ(msgs.back()->kind, MessageKind::kStreamEnd) << id;
    EXPECT_EQ(msgs.back()->event.frames, 3u) << id;
    EXPECT_EQ(msgs.back()->event.message, "end of stream") << id;
  }
  EXPECT_EQ(out.allocations, 6u);  // two copies a frame
  EXPECT_FALSE(fan.add(target(4, "late"))) << "a stream cannot join a group that has ended";
}

// A reload changes a stream's `roi` while its group runs: its next frame is of the new region, the
// others' and its own numbering untouched; the picture orders' target says the new region once taken.
TEST(StreamFanOut, ARegionChangedWhileTheGroupRunsIsTheNextFramesCrop) {
  CollectingEmitter out;
  StreamFanOut fan(0, "rtsp://cam/door", {target(0, "door"), target(2, "door-left", {0, 0, 0.5, 1})}, nullptr);
  fan.attach(&out);
  ASSERT_TRUE(fan.emit(event(MessageKind::kStreamStart)).ok());
  ASSERT_TRUE(fan.emit(frame(0, 1)).ok());
  fan.set_region(2, {0.5, 0.5, 0.5, 0.5});
  fan.set_region(0, {0, 0, 0.25, 0.25});  // the source's own region too
  EXPECT_EQ(fan.target_named("door-left")->roi, (std::array<double, 4>{0, 0, 0.5, 1}));  // not before a frame
  ASSERT_TRUE(fan.emit(frame(1, 2)).ok());
  EXPECT_EQ(fan.target_named("door-left")->roi, (std::array<double, 4>{0.5, 0.5, 0.5, 0.5}));
  auto got = by_stream(out);
  // started, a frame, changed (the new region, said before the frame that has it), a frame
  ASSERT_EQ(got["door-left"].size(), 4u);
  EXPECT_EQ(got["door-left"][1]->frame.crop, (std::array<uint32_t, 4>{0, 0, 32, 48}));
  EXPECT_EQ(got["door-left"][2]->kind, MessageKind::kStreamChanged);
  EXPECT_EQ(got["door-left"][2]->event.message, "a reload changed its roi");
  EXPECT_EQ(got["door-left"][2]->event.roi, (std::array<double, 4>{0.5, 0.5, 0.5, 0.5}));
  EXPECT_EQ(got["door-left"][2]->event.frames, 1u);
  EXPECT_EQ(got["door-left"][2]->event.uri, "rtsp://cam/door");
  EXPECT_EQ(got["door-left"][3]->frame.crop, (std::array<uint32_t, 4>{32, 24, 32, 24}));
  EXPECT_EQ(got["door-left"][3]->env.seq, 1u);
  ASSERT_EQ(got["door"].size(), 4u);
  EXPECT_EQ(got["door"][1]->frame.crop, (std::array<uint32_t, 4>{0, 0, 0, 0}));
  EXPECT_EQ(got["door"][2]->kind, MessageKind::kStreamChanged);
  EXPECT_EQ(got["door"][2]->event.roi, (std::array<double, 4>{0, 0, 0.25, 0.25}));
  EXPECT_EQ(got["door"][3]->frame.crop, (std::array<uint32_t, 4>{0, 0, 16, 12}));
}

// A region changed while the camera delivers no frame (it reconnects) is said at the reader's next
// idle(); the same region set again is said again (each reload that changed it), once.
TEST(StreamFanOut, ARegionChangedWhileNoFrameComesIsSaidAtTheNextIdle) {
  CollectingEmitter out;
  StreamFanOut fan(0, "rtsp://cam/door", {target(0, "door"), target(2, "door-left", {0, 0, 0.5, 1})}, nullptr);
  fan.attach(&out);
  ASSERT_TRUE(fan.emit(event(MessageKind::kStreamStart)).ok());
  fan.set_region(2, {0.5, 0, 0.5, 1});
  ASSERT_TRUE(fan.idle().ok());
  ASSERT_TRUE(fan.idle().ok());
  auto got = by_stream(out);
  ASSERT_EQ(got["door-left"].size(), 2u);
  EXPECT_EQ(got["door-left"][1]->kind, MessageKind::kStreamChanged);
  EXPECT_EQ(got["door-left"][1]->event.roi, (std::array<double, 4>{0.5, 0, 0.5, 1}));
  EXPECT_EQ(got["door"].size(), 1u) << "the source's region did not change";
}

// The source's settings change (a reload gave its camera a new address, turned its frames): each
// stream of the group says so with its own region and the group's new turn, and a region changed
// later says that turn too.
TEST(StreamFanOut, TheSourcesChangedSettingsReachEveryStreamOfTheGroupWithItsOwnRegion) {
  CollectingEmitter out;
  StreamFanOut fan(0, "rtsp://cam/door", {target(0, "door"), target(2, "door-left", {0, 0, 0.5, 1})}, nullptr);
  fan.attach(&out);
  ASSERT_TRUE(fan.emit(event(MessageKind::kStreamStart)).ok());
  ASSERT_TRUE(fan.emit(frame(0, 1)).ok());
  StreamEvent changed{"rtsp://cam/door-2", "uri, rotate", 1, 0};
  changed.turn = "rotate-180";
  ASSERT_TRUE(fan.emit(Message::stream_event(MessageKind::kStreamChanged, source_env(), changed)).ok());
  fan.set_region(2, {0.5, 0, 0.5, 1});
  ASSERT_TRUE(fan.emit(frame(1, 2)).ok());
  auto got = by_stream(out);
  ASSERT_EQ(got["door"].size(), 4u);  // started, frame, changed, frame
  EXPECT_EQ(got["door"][2]->kind, MessageKind::kStreamChanged);
  EXPECT_EQ(got["door"][2]->event.message, "uri, rotate");
  EXPECT_EQ(got["door"][2]->event.uri, "rtsp://cam/door-2");
  EXPECT_EQ(got["door"][2]->event.turn, "rotate-180");
  EXPECT_EQ(got["door"][2]->event.roi, (std::array<double, 4>{0, 0, 1, 1}));
  ASSERT_EQ(got["door-left"].size(), 5u);  // started, frame, changed (uri, rotate), changed (roi), frame
  EXPECT_EQ(got["door-left"][2]->event.message, "uri, rotate");
  EXPECT_EQ(got["door-left"][2]->event.roi, (std::array<double, 4>{0, 0, 0.5, 1}));
  EXPECT_EQ(got["door-left"][2]->event.frames, 1u);
  EXPECT_EQ(got["door-left"][3]->kind, MessageKind::kStreamChanged);
  EXPECT_EQ(got["door-left"][3]->event.message, "a reload changed its roi");
  EXPECT_EQ(got["door-left"][3]->event.uri, "rtsp://cam/door-2");
  EXPECT_EQ(got["door-left"][3]->event.turn, "rotate-180");
  EXPECT_EQ(got["door-left"][4]->kind, MessageKind::kFrame);
  EXPECT_EQ(fan.target_named("door-left")->turn, "rotate-180");
}

// The source's started event says how ingest turns the group's frames (ingest.orientation as_stored:
// "rotate-0", where no stream has its own): each stream's started says it, one that joins later too,
// and so does a region's changed event.
TEST(StreamFanOut, TheSourcesStartedTurnReachesEveryStreamOfTheGroupAndOneThatJoinsLater) {
  CollectingEmitter out;
  StreamFanOut fan(0, "rtsp://cam/door", {target(0, "door"), target(2, "door-left", {0, 0, 0.5, 1})}, nullptr);
  fan.attach(&out);
  Message start = event(MessageKind::kStreamStart);
  start.event.turn = "rotate-0";
  ASSERT_TRUE(fan.emit(std::move(start)).ok());
  ASSERT_TRUE(fan.emit(frame(0, 1)).ok());
  ASSERT_TRUE(fan.add(target(3, "door-right", {0.5, 0, 0.5, 1})));
  fan.set_region(2, {0, 0.5, 0.5, 0.5});
  ASSERT_TRUE(fan.emit(frame(1, 2)).ok());
  auto got = by_stream(out);
  for (const std::string id : {"door", "door-left", "door-right"}) {
    ASSERT_FALSE(got[id].empty()) << id;
    EXPECT_EQ(got[id].front()->kind, MessageKind::kStreamStart) << id;
    EXPECT_EQ(got[id].front()->event.turn, "rotate-0") << id;
  }
  ASSERT_EQ(got["door-left"].size(), 4u);  // started, frame, changed (roi), frame
  EXPECT_EQ(got["door-left"][2]->kind, MessageKind::kStreamChanged);
  EXPECT_EQ(got["door-left"][2]->event.turn, "rotate-0");
  EXPECT_EQ(fan.target_named("door-right")->turn, "rotate-0");
}

TEST(StreamFanOut, AStreamRemovedWhileItsSourceRunsEndsAtTheNextIdleAndGetsNoMoreFrames) {
  CollectingEmitter out;
  StreamFanOut fan(0, "rtsp://cam/door", {target(0, "door"), target(1, "gate", {0, 0.5, 1, 0.5})}, nullptr);
  fan.attach(&out);
  ASSERT_TRUE(fan.emit(event(MessageKind::kStreamStart)).ok());
  ASSERT_TRUE(fan.emit(frame(0, 1)).ok());
  ASSERT_TRUE(fan.emit(frame(1, 1)).ok());
  fan.remove(1, "removed from the config");
  ASSERT_TRUE(fan.idle().ok());
  ASSERT_EQ(out.messages.back().kind, MessageKind::kStreamEnd);
  EXPECT_EQ(out.messages.back().env.stream_id, "gate");
  EXPECT_EQ(out.messages.back().event.message, "removed from the config");
  EXPECT_EQ(out.messages.back().event.frames, 2u);
  ASSERT_TRUE(fan.idle().ok());  // its end goes out once
  ASSERT_TRUE(fan.emit(frame(2, 1)).ok());
  ASSERT_TRUE(fan.emit(event(MessageKind::kStreamEnd, 3, "stopped")).ok());
  auto got = by_stream(out);
  ASSERT_EQ(got["gate"].size(), 4u);  // start, 2 frames, one end
  ASSERT_EQ(got["door"].size(), 5u);  // start, 3 frames, end
  EXPECT_EQ(got["door"].back()->event.frames, 3u);
  EXPECT_EQ(out.allocations, 2u);  // frame 2 went to the source alone: no copy
}

TEST(StreamFanOut, AStreamAddedWhileItsSourceRunsStartsAtTheNextFrameNumberedFromItsOwnStart) {
  CollectingEmitter out;
  StreamFanOut fan(0, "rtsp://cam/door", {target(0, "door")}, nullptr);
  fan.attach(&out);
  ASSERT_TRUE(fan.emit(event(MessageKind::kStreamStart)).ok());
  for (uint64_t seq = 0; seq < 5; ++seq) ASSERT_TRUE(fan.emit(frame(seq, 7)).ok());
  ASSERT_TRUE(fan.add(target(5, "gate")));
  FanOutTarget restarted = target(6, "yard");
  restarted.first_seq = 120;  // after a lane restart: where its reserved numbers go on
  ASSERT_TRUE(fan.add(restarted));
  ASSERT_TRUE(fan.add(target(5, "gate"))) << "adding it again changes nothing";
  ASSERT_TRUE(fan.emit(frame(5, 7)).ok());
  ASSERT_TRUE(fan.emit(frame(7, 7)).ok());  // the source's queue dropped frame 6: the members see the gap too
  auto got = by_stream(out);
  for (const auto& [id, first] : std::map<std::string, uint64_t>{{"gate", 0}, {"yard", 120}}) {
    ASSERT_EQ(got[id].size(), 3u) << id;
    EXPECT_EQ(got[id][0]->kind, MessageKind::kStreamStart) << id;
    EXPECT_EQ(got[id][0]->event.frames, 0u) << id;
    EXPECT_EQ(got[id][1]->env.seq, first) << id;
    EXPECT_EQ(got[id][2]->env.seq, first + 2) << id;
  }
  EXPECT_EQ(got["door"].back()->env.seq, 7u);
  EXPECT_TRUE(fan.has(5));
  EXPECT_EQ(fan.ids(), (std::vector<std::string>{"door", "gate", "yard"}));
}

// A reload removes a region stream and then lists it again: it starts again with the next frame,
// numbered on from its last frame (not from 0), its `started` saying why. One listed again before its
// end went out never leaves.
TEST(StreamFanOut, AStreamRemovedAndListedAgainComesBackNumberedOnFromItsLastFrame) {
  CollectingEmitter out;
  StreamFanOut fan(0, "rtsp://cam/door", {target(0, "door"), target(1, "gate"), target(2, "yard")}, nullptr);
  fan.attach(&out);
  ASSERT_TRUE(fan.emit(event(MessageKind::kStreamStart)).ok());
  for (uint64_t seq = 0; seq < 3; ++seq) ASSERT_TRUE(fan.emit(frame(seq, 1)).ok());
  EXPECT_EQ(fan.next_seq_of(1), 3u);
  fan.remove(1, "removed from the config");
  fan.remove(2, "removed from the config");
  ASSERT_TRUE(fan.idle().ok());  // gate and yard end
  for (uint64_t seq = 3; seq < 6; ++seq) ASSERT_TRUE(fan.emit(frame(seq, 1)).ok());
  FanOutTarget back = target(1, "gate", {0, 0, 0.5, 1});
  back.start_message = "back: a reload listed it again";
  ASSERT_TRUE(fan.add(back));
  ASSERT_TRUE(fan.add(target(2, "yard")));  // listed again, and removed again before the next frame:
  fan.remove(2, "removed from the config");  // it stays out, saying nothing more
  fan.remove(0, "never mind");  // (the source is not what this test is about)
  ASSERT_TRUE(fan.add(target(0, "door"))) << "listed again before its end went out: it never leaves";
  ASSERT_TRUE(fan.emit(frame(6, 1)).ok());
  ASSERT_TRUE(fan.emit(frame(7, 1)).ok());
  ASSERT_TRUE(fan.emit(event(MessageKind::kStreamEnd, 8, "stopped")).ok());
  auto got = by_stream(out);
  std::vector<MessageKind> kinds;
  std::vector<uint64_t> seqs;
  for (const Message* m : got["gate"]) {
    kinds.push_back(m->kind);
    if (m->kind == MessageKind::kFrame) seqs.push_back(m->env.seq);
  }
  EXPECT_EQ(kinds, (std::vector<MessageKind>{MessageKind::kStreamStart, MessageKind::kFrame, MessageKind::kFrame,
                                             MessageKind::kFrame, MessageKind::kStreamEnd, MessageKind::kStreamStart,
                                             MessageKind::kFrame, MessageKind::kFrame, MessageKind::kStreamEnd}));
  EXPECT_EQ(seqs, (std::vector<uint64_t>{0, 1, 2, 3, 4}));  // on from 3, not from 0 or the source's 6
  EXPECT_EQ(got["gate"][5]->event.message, "back: a reload listed it again");
  EXPECT_EQ(got["gate"][6]->frame.crop, (std::array<uint32_t, 4>{0, 0, 32, 48}));  // its region as listed again
  EXPECT_EQ(got["gate"].back()->event.frames, 2u);  // this life's frames
  EXPECT_EQ(fan.next_seq_of(1), 5u);
  EXPECT_EQ(got["yard"].size(), 5u);  // start, 3 frames, its end: not listed again
  ASSERT_EQ(got["door"].size(), 10u);  // start, 8 frames, one end
  EXPECT_EQ(fan.ended_as(), MessageKind::kStreamEnd);
  EXPECT_EQ(fan.next_seq_of(0), 8u);
  EXPECT_FALSE(fan.next_seq_of(9).has_value());
}

// A reload's thread removes and lists again a region stream while the reader's thread sends frames
// (as ingest's main loop and a stream's thread do): each of its lives starts with `started` and ends
// with one end, and its numbers only go forward, one after another. (Also run under ThreadSanitizer.)
TEST(StreamFanOut, AStreamLeavingAndComingBackWhileFramesFlowKeepsEachLifeWholeAndItsNumbersForward) {
  CollectingEmitter out;  // the reader's thread alone emits into it
  StreamFanOut fan(0, "rtsp://cam/door", {target(0, "door"), target(1, "gate")}, nullptr);
  fan.attach(&out);
  ASSERT_TRUE(fan.emit(event(MessageKind::kStreamStart)).ok());
  std::atomic<bool> done{false};
  std::thread reader([&] {
    for (uint64_t seq = 0; seq < 3000; ++seq) {
      ASSERT_TRUE(fan.emit(frame(seq, 3)).ok());
      if (seq % 7 == 0) {
        ASSERT_TRUE(fan.idle().ok());
      }
    }
    ASSERT_TRUE(fan.emit(event(MessageKind::kStreamEnd, 3000, "stopped")).ok());
    done = true;
  });
  while (!done.load()) {
    fan.remove(1, "removed from the config");
    std::this_thread::yield();
    FanOutTarget back = target(1, "gate");
    back.start_message = "back: a reload listed it again";
    fan.add(back);
    (void)fan.next_seq_of(1);
    std::this_thread::yield();
  }
  reader.join();
  auto got = by_stream(out);
  bool alive = false;
  int64_t last = -1;
  size_t lives = 0;
  for (const Message* m : got["gate"]) {
    if (m->kind == MessageKind::kStreamStart) {
      ASSERT_FALSE(alive) << "a start within a life";
      alive = true;
      ++lives;
    } else if (m->kind == MessageKind::kFrame) {
      ASSERT_TRUE(alive) << "a frame outside a life";
      ASSERT_EQ(static_cast<int64_t>(m->env.seq), last + 1) << "numbered on, one after another";
      last = static_cast<int64_t>(m->env.seq);
    } else {
      ASSERT_TRUE(ends_stream(m->kind));
      ASSERT_TRUE(alive) << "an end outside a life";
      alive = false;
    }
  }
  EXPECT_FALSE(alive) << "its last life ended";
  EXPECT_GE(lives, 1u);
  EXPECT_EQ(got["door"].size(), 3002u);  // the source untouched: start, 3000 frames, end
}

// A picture (publish.segments_pictures_dir) that one stream of the group asked for reaches that
// stream alone, numbered as it numbered the frame; one for a stream that has had no frame, or none of
// the group, reaches nobody.
TEST(StreamFanOut, APictureReachesTheStreamThatAskedForItNumberedItsOwnWay) {
  CollectingEmitter out;
  StreamFanOut fan(0, "rtsp://cam/door", {target(0, "door")}, nullptr);
  fan.attach(&out);
  ASSERT_TRUE(fan.emit(event(MessageKind::kStreamStart)).ok());
  for (uint64_t seq = 0; seq < 5; ++seq) ASSERT_TRUE(fan.emit(frame(seq, 7)).ok());
  ASSERT_TRUE(fan.add(target(5, "gate")));
  ASSERT_TRUE(fan.emit(frame(5, 7)).ok());
  ASSERT_TRUE(fan.emit(frame(6, 7)).ok());  // gate's frame 1
  ASSERT_TRUE(fan.add(target(8, "yard")));  // no frame yet
  const std::optional<FanOutTarget> gate = fan.target_named("gate");
  ASSERT_TRUE(gate.has_value());
  EXPECT_EQ(gate->index, 5u);
  EXPECT_FALSE(fan.target_named("nobody").has_value());
  auto picture = [](uint32_t index, const std::string& id, uint64_t source_seq) {
    Envelope env = source_env(source_seq);
    env.stream_index = index;
    env.stream_id = id;
    StreamEvent ev{"rtsp://cam/door", "", 0, 0};
    ev.picture = "/p/" + id + ".jpg";
    return Message::stream_event(MessageKind::kStreamPicture, env, ev);
  };
  const size_t before = out.messages.size();
  ASSERT_TRUE(fan.emit(picture(5, "gate", 6)).ok());
  ASSERT_TRUE(fan.emit(picture(0, "door", 6)).ok());
  ASSERT_TRUE(fan.emit(picture(8, "yard", 6)).ok());
  ASSERT_TRUE(fan.emit(picture(9, "other", 6)).ok());
  ASSERT_EQ(out.messages.size(), before + 2);
  const Message& to_gate = out.messages[before];
  EXPECT_EQ(to_gate.kind, MessageKind::kStreamPicture);
  EXPECT_EQ(to_gate.env.stream_id, "gate");
  EXPECT_EQ(to_gate.env.stream_index, 5u);
  EXPECT_EQ(to_gate.env.seq, 1u);
  EXPECT_EQ(to_gate.event.picture, "/p/gate.jpg");
  EXPECT_EQ(out.messages[before + 1].env.stream_id, "door");
  EXPECT_EQ(out.messages[before + 1].env.seq, 6u);
}

TEST(StreamFanOut, ResumingAGroupGoesOnFromItsLeastResultsAndEachStreamTakesOnlyFramesPastItsOwn) {
  CollectingEmitter out;
  FanOutTarget door = target(0, "door"), left = target(1, "left"), right = target(2, "right");
  door.earlier_results = 5;  // the crash came between its result 4 and the members'
  left.earlier_results = 3;
  right.earlier_results = 9;
  right.ended_earlier = true;
  StreamFanOut fan(0, "file:///a.mkv", {door, left, right}, nullptr);
  fan.attach(&out);
  EXPECT_EQ(fan.resume_from(), std::optional<uint64_t>(3));
  ASSERT_TRUE(fan.emit(event(MessageKind::kStreamStart, 3)).ok());
  for (uint64_t seq = 3; seq < 7; ++seq) ASSERT_TRUE(fan.emit(frame(seq, 1)).ok());
  ASSERT_TRUE(fan.emit(event(MessageKind::kStreamEnd, 7, "end of stream")).ok());
  auto got = by_stream(out);
  ASSERT_EQ(got["right"].size(), 1u);  // it only ends again
  EXPECT_EQ(got["right"][0]->kind, MessageKind::kStreamEnd);
  EXPECT_EQ(got["right"][0]->event.message, "ended in an earlier run");
  EXPECT_EQ(got["right"][0]->event.frames, 9u);
  std::vector<uint64_t> left_seqs, door_seqs;
  for (const Message* m : got["left"]) if (m->kind == MessageKind::kFrame) left_seqs.push_back(m->env.seq);
  for (const Message* m : got["door"]) if (m->kind == MessageKind::kFrame) door_seqs.push_back(m->env.seq);
  EXPECT_EQ(left_seqs, (std::vector<uint64_t>{3, 4, 5, 6}));
  EXPECT_EQ(door_seqs, (std::vector<uint64_t>{5, 6}));
  EXPECT_EQ(got["left"].back()->event.frames, 7u);
  EXPECT_EQ(got["door"].back()->event.frames, 7u);
  EXPECT_EQ(got["door"].front()->event.frames, 5u);  // its start counts its earlier results
}

TEST(StreamFanOut, AGroupWhoseStreamsAllEndedEarlierHasNothingToResumeFrom) {
  FanOutTarget door = target(0, "door"), left = target(1, "left");
  door.ended_earlier = left.ended_earlier = true;
  StreamFanOut fan(0, "file:///a.mkv", {door, left}, nullptr);
  EXPECT_FALSE(fan.resume_from().has_value());
}

TEST(StreamFanOut, ALaneRestartReachesTheStreamsThatRanBeforeItAndLaterReconnectionsThoseThatStarted) {
  CollectingEmitter out;
  FanOutTarget gate = target(1, "gate"), fresh = target(3, "fresh");
  gate.first_seq = 50;  // it sent frames before the restart; `fresh` was added just before it and sent none
  StreamFanOut fan(0, "rtsp://cam/door", {target(0, "door"), gate, fresh}, nullptr);
  fan.attach(&out);
  // A restarted lane: the reader says "reconnecting (attempt 0)" before anything.
  ASSERT_TRUE(fan.emit(event(MessageKind::kStreamReconnecting, 0, "its lane restarted", 0)).ok());
  ASSERT_TRUE(fan.add(target(2, "yard")));
  ASSERT_TRUE(fan.emit(event(MessageKind::kStreamReconnecting, 0, "stalled", 1)).ok());
  ASSERT_TRUE(fan.emit(event(MessageKind::kStreamResumed, 0, "", 1)).ok());
  ASSERT_TRUE(fan.emit(frame(4000, 1)).ok());
  auto got = by_stream(out);
  ASSERT_EQ(got["gate"].size(), 4u);
  EXPECT_EQ(got["gate"][0]->kind, MessageKind::kStreamReconnecting);
  EXPECT_EQ(got["gate"][1]->kind, MessageKind::kStreamReconnecting);
  EXPECT_EQ(got["gate"][1]->event.attempt, 1u);
  EXPECT_EQ(got["gate"][2]->kind, MessageKind::kStreamResumed);
  EXPECT_EQ(got["gate"][3]->env.seq, 50u);
  for (const char* id : {"yard", "fresh"}) {  // no frame before: each starts with its first frame
    ASSERT_EQ(got[id].size(), 2u) << id;
    EXPECT_EQ(got[id][0]->kind, MessageKind::kStreamStart) << id;
    EXPECT_EQ(got[id][1]->kind, MessageKind::kFrame) << id;
    EXPECT_EQ(got[id][1]->env.seq, 0u) << id;
  }
}

// A camera that cannot be reached when the job starts: every stream of it says why it has no frame.
TEST(StreamFanOut, ReconnectionsBeforeTheFirstFrameReachEveryStreamOfTheGroup) {
  CollectingEmitter out;
  StreamFanOut fan(0, "rtsp://cam/door", {target(0, "door"), target(1, "gate")}, nullptr);
  fan.attach(&out);
  ASSERT_TRUE(fan.emit(event(MessageKind::kStreamReconnecting, 0, "Unauthorized (element source)", 1)).ok());
  ASSERT_TRUE(fan.emit(event(MessageKind::kStreamReconnecting, 0, "Unauthorized (element source)", 2)).ok());
  auto got = by_stream(out);
  for (const char* id : {"door", "gate"}) {
    ASSERT_EQ(got[id].size(), 2u) << id;
    EXPECT_EQ(got[id][1]->kind, MessageKind::kStreamReconnecting) << id;
    EXPECT_EQ(got[id][1]->event.attempt, 2u) << id;
    EXPECT_EQ(got[id][1]->event.message, "Unauthorized (element source)") << id;
  }
  ASSERT_TRUE(fan.emit(event(MessageKind::kStreamStart)).ok());
  ASSERT_TRUE(fan.emit(frame(0, 1)).ok());
  got = by_stream(out);
  EXPECT_EQ(got["gate"][2]->kind, MessageKind::kStreamStart);
  EXPECT_EQ(got["gate"][3]->kind, MessageKind::kFrame);
}

TEST(StreamFanOut, AClosedGroupTakesNoNewStream) {
  StreamFanOut fan(0, "rtsp://cam/door", {target(0, "door")}, nullptr);
  EXPECT_TRUE(fan.add(target(1, "gate")));
  fan.close();
  EXPECT_FALSE(fan.add(target(2, "yard")));
}

TEST(StreamFanOut, ADownstreamThatIsGoneFailsTheEmit) {
  CollectingEmitter out;
  StreamFanOut fan(0, "rtsp://cam/door", {target(0, "door"), target(1, "gate")}, nullptr);
  fan.attach(&out);
  out.fail_emit = true;
  EXPECT_FALSE(fan.emit(frame(0, 1)).ok());
}

TEST(CropToRegion, FractionsBecomePixelsInsideTheFrameAndTheWholeFrameClearsTheCrop) {
  FrameInfo f;
  f.width = 1920;
  f.height = 1080;
  crop_to_region({0.25, 0.5, 0.5, 0.5}, &f);
  EXPECT_EQ(f.crop, (std::array<uint32_t, 4>{480, 540, 960, 540}));
  crop_to_region({0.999, 0.999, 0.001, 0.001}, &f);
  EXPECT_EQ(f.crop, (std::array<uint32_t, 4>{1918, 1079, 2, 1}));  // at least a pixel, inside the frame
  crop_to_region({0, 0, 1, 1}, &f);
  EXPECT_EQ(f.crop, (std::array<uint32_t, 4>{0, 0, 0, 0}));
}

}  // namespace
}  // namespace vapipe
