#include "stages/ingest/ts_tail_loss.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace vapipe {
namespace {

constexpr uint8_t kSync = 0x47;
constexpr size_t kMaxPesWaiting = 256;

// Whether packets of `size` bytes (their sync byte `at` bytes in) start at `data` three times over.
bool synced_at(const uint8_t* data, size_t size, size_t packet, size_t at) {
  if (size < at + 2 * packet + 1) return false;
  return data[at] == kSync && data[at + packet] == kSync && data[at + 2 * packet] == kSync;
}

uint64_t pts_to_ns(uint64_t pts) { return pts * 100000 / 9; }

// A PES header's 33-bit PTS or DTS (90 kHz), from its five bytes at `b`.
uint64_t timestamp_at(const uint8_t* b) {
  return (uint64_t{static_cast<uint8_t>((b[0] >> 1) & 0x07)} << 30) | (uint64_t{b[1]} << 22) |
         (uint64_t{static_cast<uint8_t>(b[2] >> 1)} << 15) | (uint64_t{b[3]} << 7) | (b[4] >> 1);
}
constexpr uint64_t kTimestampMask = (uint64_t{1} << 33) - 1;  // (a PTS comes round after 26.5 hours)

}  // namespace

void TsTailLossWatch::feed(const uint8_t* data, size_t size, bool discontinuous) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (discontinuous) {
    carry_.clear();
    packet_size_ = 0;
    // What was read before will not be sent (tsdemux scanning the file, or flushing at a seek).
    for (auto& [pid, state] : pids_) state = Pid{};
    pat_cc_.reset();
    pat_restarted_ = false;
  }
  std::vector<uint8_t> joined;
  if (!carry_.empty()) {
    joined = carry_;
    joined.insert(joined.end(), data, data + size);
    data = joined.data();
    size = joined.size();
    carry_.clear();
  }
  size_t at = 0;
  while (at < size) {
    if (packet_size_ == 0) {
      // Find the packets' size and start: three sync bytes in a row, 188 or 192 (M2TS) apart.
      bool found = false;
      for (; at + 3 * 188 <= size && !found; ++at) {
        if (synced_at(data + at, size - at, 188, 0)) {
          packet_size_ = 188, sync_at_ = 0, found = true;
        } else if (at >= 4 && synced_at(data + at - 4, size - at + 4, 192, 4)) {
          packet_size_ = 192, sync_at_ = 4, found = true;
        }
      }
      if (!found) {
        // Too little to tell: keep the rest for the next bytes (at most a few packets' worth).
        if (size - at < 4 * 192) carry_.assign(data + at, data + size);
        return;
      }
      --at;
      if (sync_at_ == 4) at -= 4;  // the packet starts at its 4-byte prefix
    }
    if (size - at < packet_size_) {
      carry_.assign(data + at, data + size);
      return;
    }
    const uint8_t* p = data + at + sync_at_;
    if (p[0] != kSync) {
      packet_size_ = 0;  // lost sync (garbage in the file): find it again
      continue;
    }
    packet(p);
    at += packet_size_;
  }
}

void TsTailLossWatch::packet(const uint8_t* p) {
  if (p[1] & 0x80) return;  // transport_error_indicator: the packet says it is damaged
  const uint16_t pid = static_cast<uint16_t>(((p[1] & 0x1F) << 8) | p[2]);
  if (pid == 0x1FFF) return;  // null packets
  const bool unit_start = (p[1] & 0x40) != 0;
  const int adaptation = (p[3] >> 4) & 3;
  const uint8_t cc = p[3] & 0x0F;
  if (adaptation == 0 || adaptation == 2) return;  // no payload: its counter does not count
  size_t payload = 4;
  bool discontinuity = false, random_access = false;
  if (adaptation == 3) {
    const size_t length = p[4];
    if (length > 183) return;
    discontinuity = length > 0 && (p[5] & 0x80) != 0;  // the muxer says the counter starts over
    random_access = length > 0 && (p[5] & 0x40) != 0;  // a key frame starts here
    payload = 5 + length;
  }
  if (pid == 0) {
    // The PAT's counter: one that starts over (at 0 or 1, where muxers start it) after a gap is a new
    // muxer's, a file put after another (`cat` of an HLS download's segments, whose time goes on).
    const bool restart = pat_cc_ && cc != *pat_cc_ && cc != ((*pat_cc_ + 1) & 0x0F) && cc <= 1;
    if (restart) pat_restarted_ = true;
    pat_cc_ = cc;
    return;
  }
  auto found = pids_.find(pid);
  const bool video_start = unit_start && payload + 14 <= 188 && p[payload] == 0 && p[payload + 1] == 0 &&
                           p[payload + 2] == 1 && (p[payload + 3] & 0xF0) == 0xE0;
  if (found == pids_.end()) {
    if (!video_start) return;  // only video PIDs are followed
    found = pids_.emplace(pid, Pid{}).first;
  }
  Pid& state = found->second;
  const bool duplicate = state.last_cc && *state.last_cc == cc;  // sent twice, allowed once
  const bool gap = state.last_cc && !duplicate && !discontinuity && cc != ((*state.last_cc + 1) & 0x0F);
  state.last_cc = cc;
  if (duplicate) return;
  if (!unit_start) return;
  // A PES starts: if packets went missing just before it, they were the end of the PES before. Unless
  // its clock started over: files joined end to end (`cat`), each starting its counters and its clock
  // over, lose nothing at the join.
  const bool was_in_pes = std::exchange(state.in_pes, false);
  std::optional<uint64_t> pts, dts;
  const uint8_t* h = p + payload;
  if (video_start && (h[7] & 0x80) != 0) {  // PTS_DTS_flags: a PTS
    pts = timestamp_at(h + 9);
    dts = (h[7] & 0x40) != 0 && payload + 19 <= 188 ? timestamp_at(h + 14) : pts;  // none: the same as its PTS
  }
  if (gap && was_in_pes && !state.pes.empty()) {
    // Decoding time only goes on within one stream, a loss skipping it on by a few frames: one that goes
    // back, by any amount, or on by over 2 s, is another file's clock (`cat a.ts a.ts` of a 2 s clip goes
    // back 1.9 s, its PAT's counter having come round to where the copy's starts).
    constexpr uint64_t kRestartTicks = 2 * 90000;
    const bool clock_restarted = dts && state.last_dts && ((*dts - *state.last_dts) & kTimestampMask) > kRestartTicks;
    if (!pat_restarted_ && !clock_restarted) state.pes.back().cut_short = true;
  }
  pat_restarted_ = false;
  if (!pts) return;
  state.last_dts = dts;
  state.pes.push_back(Pes{pts_to_ns(*pts), random_access});
  state.in_pes = true;
  if (state.pes.size() > kMaxPesWaiting) state.pes.pop_front();
}

TsTailLossWatch::SentFrame TsTailLossWatch::sent(uint16_t pid, uint64_t pts_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  // (A time past 36 years is nobody's frame; below it, the differences below cannot overflow.)
  if (pts_ns > (uint64_t{1} << 60)) return {};
  auto found = pids_.find(pid);
  if (found == pids_.end()) return {};
  Pid& state = found->second;
  // The PES whose PTS, plus the offset, is nearest this frame's time, among the first few waiting (those
  // before it were dropped); the offset follows it (a live stream's times drift from its PTSs). A first
  // frame, or one no PES is near (another part of a joined file), takes the oldest waiting and learns
  // the offset from it.
  constexpr int64_t kNearNs = 10'000'000;  // well within a frame's time
  constexpr size_t kLookAhead = 8;
  auto match = state.pes.end();
  if (state.offset_ns) {
    int64_t best = kNearNs + 1;
    size_t looked = 0;
    for (auto it = state.pes.begin(); it != state.pes.end() && looked < kLookAhead; ++it, ++looked) {
      const int64_t off = std::llabs(static_cast<int64_t>(pts_ns) - static_cast<int64_t>(it->pts_ns) - *state.offset_ns);
      if (off < best) {
        best = off;
        match = it;
      }
    }
  }
  if (match == state.pes.end()) {
    if (state.pes.empty()) return {};
    match = state.pes.begin();
  }
  state.offset_ns = static_cast<int64_t>(pts_ns) - static_cast<int64_t>(match->pts_ns);
  SentFrame frame;
  frame.cut_short = match->cut_short;
  frame.after_lost_key_frame = std::any_of(state.pes.begin(), match, [](const Pes& pes) { return pes.key; });
  state.pes.erase(state.pes.begin(), match + 1);
  return frame;
}

std::optional<uint16_t> TsTailLossWatch::pid_of_pad(const char* name) {
  if (!name) return std::nullopt;
  const char* last = std::strrchr(name, '_');
  if (!last || last[1] == '\0') return std::nullopt;
  char* end = nullptr;
  const unsigned long pid = std::strtoul(last + 1, &end, 16);
  if (*end != '\0' || pid > 0x1FFF) return std::nullopt;
  return static_cast<uint16_t>(pid);
}

}  // namespace vapipe
