// Frames cut short at their end by lost TS packets: hand-made transport streams (a video PID whose PESs
// take three packets each) with packets taken out, fed in chunks of any size, 188- or 192-byte packets,
// a seek's jump, files joined end to end; then a real x264 file read whole by the stream reader, its
// 10th frame's last packet cut.
#include "stages/ingest/ts_tail_loss.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

namespace vapipe {
namespace {

using Bytes = std::vector<uint8_t>;
constexpr uint16_t kVideo = 0x100;
constexpr uint64_t kFirstPts = 126000;  // 1.4 s in 90 kHz, as mpegtsmux starts
constexpr uint64_t kFramePts = 3000;    // 30 frames/s

struct Packet {
  Bytes bytes;
  size_t pes;  // the PES (frame) it belongs to
};

// A PES header's 5-byte PTS or DTS field, `prefix` its first 4 bits (0x2 a lone PTS, 0x3 a PTS before a
// DTS, 0x1 the DTS).
Bytes timestamp_field(uint8_t prefix, uint64_t v) {
  return {static_cast<uint8_t>((prefix << 4) | ((v >> 29) & 0x0E) | 1), static_cast<uint8_t>(v >> 22),
          static_cast<uint8_t>(((v >> 14) & 0xFE) | 1), static_cast<uint8_t>(v >> 7), static_cast<uint8_t>(((v << 1) & 0xFE) | 1)};
}

// One 188-byte packet of `pid`: a PES header with `pts` first where `pts` is given (and `dts` after it
// where given); `cc` its counter; `random_access`: a key frame's first packet, as muxers mark it.
Bytes ts_packet(uint16_t pid, uint8_t cc, std::optional<uint64_t> pts, bool discontinuity = false,
                bool random_access = false, std::optional<uint64_t> dts = std::nullopt) {
  Bytes p(188, 0xAB);
  p[0] = 0x47;
  p[1] = static_cast<uint8_t>((pts ? 0x40 : 0) | (pid >> 8));
  p[2] = static_cast<uint8_t>(pid & 0xFF);
  size_t at = 4;
  if (discontinuity || random_access) {
    p[3] = static_cast<uint8_t>(0x30 | cc);  // adaptation field and payload
    p[4] = 1;
    p[5] = static_cast<uint8_t>((discontinuity ? 0x80 : 0) | (random_access ? 0x40 : 0));  // its indicators
    at = 6;
  } else {
    p[3] = static_cast<uint8_t>(0x10 | cc);
  }
  if (pts) {
    Bytes header = {0, 0, 1, 0xE0, 0, 0, 0x80, static_cast<uint8_t>(dts ? 0xC0 : 0x80), static_cast<uint8_t>(dts ? 10 : 5)};
    const Bytes pts_field = timestamp_field(dts ? 0x3 : 0x2, *pts);
    header.insert(header.end(), pts_field.begin(), pts_field.end());
    if (dts) {
      const Bytes dts_field = timestamp_field(0x1, *dts);
      header.insert(header.end(), dts_field.begin(), dts_field.end());
    }
    std::copy(header.begin(), header.end(), p.begin() + static_cast<long>(at));
  }
  return p;
}

// `frames` PESs of three packets each on the video PID, a PAT-like packet of another PID between.
std::vector<Packet> stream_of(size_t frames, uint64_t first_pts = kFirstPts, uint8_t first_cc = 0) {
  std::vector<Packet> out;
  uint8_t cc = first_cc;
  for (size_t f = 0; f < frames; ++f) {
    out.push_back({ts_packet(kVideo, cc++ & 0x0F, first_pts + f * kFramePts), f});
    out.push_back({ts_packet(0x0011, 0, std::nullopt), f});  // another PID (an SDT's): not followed
    out.push_back({ts_packet(kVideo, cc++ & 0x0F, std::nullopt), f});
    out.push_back({ts_packet(kVideo, cc++ & 0x0F, std::nullopt), f});
  }
  return out;
}

Bytes bytes_of(const std::vector<Packet>& packets, size_t packet_size = 188) {
  Bytes out;
  for (const Packet& p : packets) {
    if (packet_size == 192) out.insert(out.end(), {0x01, 0x02, 0x03, 0x04});  // M2TS's timestamp prefix
    out.insert(out.end(), p.bytes.begin(), p.bytes.end());
  }
  return out;
}

// The frames tsdemux would send (every PES but `dropped`), at its own times (the PTS less 1.4 s plus
// 0.1 s): which the watch says were cut short.
std::vector<size_t> cut_frames(TsTailLossWatch& watch, size_t frames, std::vector<size_t> dropped = {}) {
  std::vector<size_t> cut;
  for (size_t f = 0; f < frames; ++f) {
    if (std::find(dropped.begin(), dropped.end(), f) != dropped.end()) continue;
    const uint64_t pts_ns = (kFirstPts + f * kFramePts) * 100000 / 9 - 1'300'000'000;
    if (watch.cut_short(kVideo, pts_ns)) cut.push_back(f);
  }
  return cut;
}

// A key frame (random_access_indicator on its first packet) that lost a packet inside it, which
// tsdemux drops whole: the frame sent after it says so; after a delta frame dropped so, it does not.
TEST(TsTailLossWatch, AFrameSentAfterAKeyFrameTsdemuxDroppedSaysSo) {
  std::vector<Packet> packets = stream_of(12);
  for (size_t key : {0, 6}) packets[key * 4].bytes = ts_packet(kVideo, static_cast<uint8_t>((key * 3) & 0x0F), kFirstPts + key * kFramePts, false, true);
  packets.erase(packets.begin() + 6 * 4 + 2);  // frame 6's middle packet (the key frame)
  packets.erase(packets.begin() + 3 * 4 + 2);  // frame 3's (a delta frame)
  TsTailLossWatch watch;
  const Bytes bytes = bytes_of(packets);
  watch.feed(bytes.data(), bytes.size(), false);
  std::vector<size_t> after_lost_key;
  for (size_t f = 0; f < 12; ++f) {
    if (f == 3 || f == 6) continue;  // (dropped by tsdemux)
    const uint64_t pts_ns = (kFirstPts + f * kFramePts) * 100000 / 9 - 1'300'000'000;
    const TsTailLossWatch::SentFrame sent = watch.sent(kVideo, pts_ns);
    EXPECT_FALSE(sent.cut_short) << "frame " << f;
    if (sent.after_lost_key_frame) after_lost_key.push_back(f);
  }
  EXPECT_EQ(after_lost_key, std::vector<size_t>{7});
}

TEST(TsTailLossWatch, AFrameWhoseLastPacketWasLostIsCutShort) {
  std::vector<Packet> packets = stream_of(12);
  {
    TsTailLossWatch whole;
    const Bytes bytes = bytes_of(packets);
    whole.feed(bytes.data(), bytes.size(), false);
    EXPECT_EQ(cut_frames(whole, 12), std::vector<size_t>{});
  }
  // Frame 3's last packet lost: the gap shows at frame 4's first packet.
  std::vector<Packet> tail_lost = packets;
  tail_lost.erase(tail_lost.begin() + 3 * 4 + 3);
  // Frame 7's middle packet lost: tsdemux finds that gap itself and drops frame 7.
  tail_lost.erase(tail_lost.begin() + 7 * 4 + 2 - 1);
  for (size_t packet_size : {188, 192}) {
    const Bytes bytes = bytes_of(tail_lost, packet_size);
    // In chunks of any size, as a file is pulled or datagrams come.
    std::mt19937 random(static_cast<unsigned>(packet_size));
    TsTailLossWatch watch;
    for (size_t at = 0; at < bytes.size();) {
      const size_t n = std::min<size_t>(bytes.size() - at, 1 + random() % 700);
      watch.feed(bytes.data() + at, n, false);
      at += n;
    }
    EXPECT_EQ(cut_frames(watch, 12, {7}), std::vector<size_t>{3}) << packet_size << "-byte packets";
  }
}

TEST(TsTailLossWatch, NoLossWhereTheCounterMaySkip) {
  // A packet sent twice (allowed once): frame 2's first.
  std::vector<Packet> packets = stream_of(4);
  packets.insert(packets.begin() + 2 * 4, packets[2 * 4]);
  // Then the counter starts over (at 9) where the muxer says so (discontinuity_indicator).
  std::vector<Packet> after = stream_of(2, kFirstPts + 4 * kFramePts, 9);
  after[0].bytes = ts_packet(kVideo, 9, kFirstPts + 4 * kFramePts, /*discontinuity=*/true);
  for (Packet& p : after) packets.push_back({p.bytes, p.pes + 4});
  TsTailLossWatch watch;
  const Bytes bytes = bytes_of(packets);
  watch.feed(bytes.data(), bytes.size(), false);
  EXPECT_EQ(cut_frames(watch, 6), std::vector<size_t>{});
}

TEST(TsTailLossWatch, FilesJoinedEndToEndLoseNothingAtTheJoin) {
  // A second file after the first: its counters and its clock start over (at 10 s).
  std::vector<Packet> packets = stream_of(5);
  for (Packet& p : stream_of(5, 900000, 7)) packets.push_back({p.bytes, p.pes + 5});
  TsTailLossWatch watch;
  const Bytes bytes = bytes_of(packets);
  watch.feed(bytes.data(), bytes.size(), false);
  std::vector<size_t> cut;
  for (size_t f = 0; f < 10; ++f) {
    const uint64_t pts = f < 5 ? kFirstPts + f * kFramePts : 900000 + (f - 5) * kFramePts;
    if (watch.cut_short(kVideo, pts * 100000 / 9)) cut.push_back(f);
  }
  EXPECT_EQ(cut, std::vector<size_t>{});
}

// `frames` PESs as stream_of's, each after a PAT (its counter from 0, as ffmpeg's muxer starts it).
std::vector<Packet> stream_with_pats_of(size_t frames) {
  std::vector<Packet> out;
  const std::vector<Packet> video = stream_of(frames);
  for (size_t f = 0; f < frames; ++f) {
    out.push_back({ts_packet(0x0000, static_cast<uint8_t>(f & 0x0F), std::nullopt), f});
    for (size_t k = 0; k < 4; ++k) out.push_back(video[f * 4 + k]);
  }
  return out;
}

// Two copies of a short file joined (`cat a.ts a.ts`): the clock goes back by less than 2 s, and the
// PAT's counter has come round to where the copy's starts (17 PATs from 0: the last is 0 again), so
// neither a jump of the time nor the PAT's counter tells the join; the decoding time going back does.
// (ffmpeg's 2 s clip joined so had its 49th frame, the first copy's last decoded, marked damaged.)
TEST(TsTailLossWatch, TwoCopiesOfAShortFileJoinedLoseNothingAtTheJoin) {
  const std::vector<Packet> file = stream_with_pats_of(17);
  std::vector<Packet> packets = file;
  for (const Packet& p : file) packets.push_back({p.bytes, p.pes + 17});
  TsTailLossWatch watch;
  const Bytes bytes = bytes_of(packets);
  watch.feed(bytes.data(), bytes.size(), false);
  std::vector<size_t> cut;
  for (size_t f = 0; f < 34; ++f) {
    const uint64_t pts = kFirstPts + (f % 17) * kFramePts;
    if (watch.cut_short(kVideo, pts * 100000 / 9)) cut.push_back(f);
  }
  EXPECT_EQ(cut, std::vector<size_t>{});

  // The 17th frame's last packet lost in one file whose clock goes on: still a loss.
  std::vector<Packet> lost = stream_with_pats_of(34);
  lost.erase(lost.begin() + 16 * 5 + 4);
  TsTailLossWatch lossy;
  const Bytes lost_bytes = bytes_of(lost);
  lossy.feed(lost_bytes.data(), lost_bytes.size(), false);
  EXPECT_EQ(cut_frames(lossy, 34), std::vector<size_t>{16});
}

// B-frames: the frame sent after one that lost its last packets may be shown before it (an earlier
// PTS) but is decoded after it (a later DTS): a loss, not a clock that went back.
TEST(TsTailLossWatch, ALossBeforeAFrameShownEarlierIsStillOne) {
  // Decoding order I0 P3 B1 B2 P6 B4 B5 ...: each PES's DTS a frame after the one before's.
  const std::vector<uint64_t> shown = {0, 3, 1, 2, 6, 4, 5, 9, 7, 8};
  auto pts_of = [&](size_t f) { return kFirstPts + (shown[f] + 1) * kFramePts; };
  std::vector<Packet> packets;
  uint8_t cc = 0;
  for (size_t f = 0; f < shown.size(); ++f) {
    packets.push_back({ts_packet(kVideo, cc++ & 0x0F, pts_of(f), false, f == 0, kFirstPts + f * kFramePts), f});
    packets.push_back({ts_packet(kVideo, cc++ & 0x0F, std::nullopt), f});
    packets.push_back({ts_packet(kVideo, cc++ & 0x0F, std::nullopt), f});
  }
  packets.erase(packets.begin() + 4 * 3 + 2);  // P6's last packet: B4, shown two frames before it, is next
  TsTailLossWatch watch;
  const Bytes bytes = bytes_of(packets);
  watch.feed(bytes.data(), bytes.size(), false);
  std::vector<size_t> cut;
  for (size_t f = 0; f < shown.size(); ++f) {
    if (watch.cut_short(kVideo, pts_of(f) * 100000 / 9)) cut.push_back(f);
  }
  EXPECT_EQ(cut, std::vector<size_t>{4});
}

// An HLS download's segments put together (`cat`): the time goes on, but each segment's muxer started
// its counters over (at 1, as GStreamer's does), the PAT's first. A loss whose gap takes the PAT along
// to another value is still one.
TEST(TsTailLossWatch, SegmentsWhoseMuxerStartedOverLoseNothingAtTheJoin) {
  // Each segment: a PAT before each of its 4 frames, counters from `first_cc` (the video's from 1).
  auto segment = [](size_t first_frame, uint8_t pat_cc) {
    std::vector<Packet> out;
    std::vector<Packet> video = stream_of(4, kFirstPts + first_frame * kFramePts, 1);
    for (size_t f = 0; f < 4; ++f) {
      out.push_back({ts_packet(0x0000, static_cast<uint8_t>((pat_cc + f) & 0x0F), std::nullopt), first_frame + f});
      for (size_t k = 0; k < 4; ++k) out.push_back({video[f * 4 + k].bytes, first_frame + f});
    }
    return out;
  };
  for (bool pat_restarts : {true, false}) {
    std::vector<Packet> packets = segment(0, 1);
    // The second segment's PAT starts over at 1 with its video; or goes on (5 ...) while the video's
    // counter jumps back to 1: frame 3's last packets lost, as far as the counters can tell.
    for (const Packet& p : segment(4, pat_restarts ? 1 : 5)) packets.push_back(p);
    TsTailLossWatch watch;
    const Bytes bytes = bytes_of(packets);
    watch.feed(bytes.data(), bytes.size(), false);
    EXPECT_EQ(cut_frames(watch, 8), pat_restarts ? std::vector<size_t>{} : std::vector<size_t>{3})
        << (pat_restarts ? "PAT started over" : "PAT went on");
  }
}

// tsdemux reading a file first reads its end (for its duration), then from its start: what was read
// before a jump is never sent, and the frames sent after it are matched afresh.
TEST(TsTailLossWatch, WhatWasReadBeforeAJumpIsForgotten) {
  std::vector<Packet> packets = stream_of(10);
  packets.erase(packets.begin() + 5 * 4 + 3);  // frame 5's last packet
  const Bytes bytes = bytes_of(packets);
  TsTailLossWatch watch;
  const size_t end_part = bytes.size() - 188 * 8;
  watch.feed(bytes.data() + end_part, bytes.size() - end_part, false);  // the scan of its end
  watch.feed(bytes.data(), bytes.size(), /*discontinuous=*/true);       // then the whole, from its start
  EXPECT_EQ(cut_frames(watch, 10), std::vector<size_t>{5});
}

TEST(TsTailLossWatch, ThePidOfATsdemuxPad) {
  EXPECT_EQ(TsTailLossWatch::pid_of_pad("video_0_0041"), std::optional<uint16_t>(0x41));
  EXPECT_EQ(TsTailLossWatch::pid_of_pad("video_1_01e1"), std::optional<uint16_t>(0x1E1));
  EXPECT_EQ(TsTailLossWatch::pid_of_pad("video"), std::nullopt);
  EXPECT_EQ(TsTailLossWatch::pid_of_pad("video_0_zz"), std::nullopt);
  EXPECT_EQ(TsTailLossWatch::pid_of_pad(nullptr), std::nullopt);
}

}  // namespace
}  // namespace vapipe
