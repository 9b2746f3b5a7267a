// The width and height a JPEG file says it has (its start-of-frame marker), or 0 x 0 when the file is
// missing or not a JPEG: enough to check pictures without decoding them.
#pragma once

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>

namespace vapipe::testing {

inline std::pair<uint32_t, uint32_t> jpeg_size(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto at = [&](size_t i) { return static_cast<uint8_t>(b[i]); };
  if (b.size() < 4 || at(0) != 0xFF || at(1) != 0xD8) return {0, 0};
  size_t i = 2;
  while (i + 9 < b.size()) {
    if (at(i) != 0xFF) return {0, 0};
    const uint8_t marker = at(i + 1);
    const size_t length = (size_t{at(i + 2)} << 8) | at(i + 3);
    const bool start_of_frame = marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
    if (start_of_frame) {
      return {(uint32_t{at(i + 7)} << 8) | at(i + 8), (uint32_t{at(i + 5)} << 8) | at(i + 6)};
    }
    i += 2 + length;
  }
  return {0, 0};
}

}  // namespace vapipe::testing
