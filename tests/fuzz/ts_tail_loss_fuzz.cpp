// MPEG-TS packets as they reach tsdemux (a damaged file, a UDP or SRT stream), read by ingest's
// TsTailLossWatch for frames cut short at their end: whatever the bytes, in whatever chunks, it must
// not crash, read past a chunk, or keep more than it bounds. Input: chunks, each a control byte (bit 0:
// discontinuous, as after a seek; bit 1: then ask about a frame sent, from the next 10 bytes: its PID
// (2 bytes) and its time in ns (8 bytes)), a 2-byte big-endian length and its bytes. Each chunk is
// copied into a buffer of its exact size, so a read past its end is caught by AddressSanitizer. Then
// the PID in tsdemux pad names made of the input's first bytes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "stages/ingest/ts_tail_loss.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  vapipe::TsTailLossWatch watch;
  size_t at = 0;
  while (at + 3 <= size) {
    const uint8_t control = data[at];
    const size_t length = std::min<size_t>((size_t{data[at + 1]} << 8) | data[at + 2], size - at - 3);
    at += 3;
    const std::vector<uint8_t> chunk(data + at, data + at + length);
    at += length;
    watch.feed(chunk.data(), chunk.size(), (control & 1) != 0);
    if ((control & 2) && at + 10 <= size) {
      const auto pid = static_cast<uint16_t>((data[at] << 8) | data[at + 1]);
      uint64_t pts_ns = 0;
      std::memcpy(&pts_ns, data + at + 2, sizeof pts_ns);
      at += 10;
      watch.cut_short(pid, pts_ns);  // any answer is allowed
    }
  }
  const std::string name(reinterpret_cast<const char*>(data), std::min<size_t>(size, 16));
  vapipe::TsTailLossWatch::pid_of_pad(name.c_str());
  return 0;
}
