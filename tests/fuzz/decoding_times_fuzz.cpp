// Decoding times worked out for an RTSP camera's frames (stages/ingest/decoding_times.h), from
// presentation times a camera and a jitter buffer give: any order, repeats, untimed frames. Every frame
// added comes out once, in order, with decoding times that rise, none after its frame's presentation
// time, and no presentation time lowered. Input: byte 0, the lookahead (0 to 31); then 3 bytes a frame:
// flags (bit 0: untimed), and its presentation time in ms (int16, little-endian) from 40 s.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "stages/ingest/decoding_times.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  vapipe::DecodingTimes times(data[0] & 31);
  std::vector<int64_t> given;
  size_t taken = 0;
  int64_t last_dts = INT64_MIN;
  auto check = [&](const vapipe::DecodingTimes::Frame& f) {
    VAPIPE_FUZZ_CHECK(taken < given.size(), "a frame came out that was not added");
    VAPIPE_FUZZ_CHECK(f.dts <= f.pts, "a frame decoded after it is shown");
    VAPIPE_FUZZ_CHECK(last_dts == INT64_MIN || f.dts > last_dts, "decoding times do not rise");
    VAPIPE_FUZZ_CHECK(given[taken] < 0 || f.pts >= given[taken], "a presentation time was lowered");
    last_dts = f.dts;
    ++taken;
  };
  for (size_t at = 1; at + 3 <= size; at += 3) {
    const bool untimed = data[at] & 1;
    const auto ms = static_cast<int16_t>(static_cast<uint16_t>(data[at + 1] | (data[at + 2] << 8)));
    const int64_t pts = untimed ? -1 : 40'000'000'000 + int64_t{ms} * 1'000'000;
    given.push_back(pts);
    times.add(pts, (data[at] & 2) ? 33'333'333 : 0);
    while (auto f = times.take()) check(*f);
  }
  times.end();
  while (auto f = times.take()) check(*f);
  VAPIPE_FUZZ_CHECK(taken == given.size(), "a frame added never came out");
  VAPIPE_FUZZ_CHECK(times.waiting() == 0, "frames still wait after the end");
  return 0;
}
