// Test media: an MP4 made to say how it is shown, as a phone writes a portrait video.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <ios>
#include <iterator>
#include <string>

namespace vapipe::testing {

// Sets an MP4's first track to be shown turned 90 degrees clockwise: the rotation matrix of its track
// header (tkhd), which qtdemux reads as image-orientation.
inline void rotate_mp4_track_90(const std::string& path) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const size_t tkhd = bytes.find("tkhd");
  ASSERT_NE(tkhd, std::string::npos) << path;
  const bool version1 = bytes[tkhd + 4] == 1;
  // version and flags, times, track id, duration; reserved, layer, group, volume, reserved; the matrix
  const size_t matrix = tkhd + 4 + 4 + (version1 ? 32 : 20) + 16;
  const uint32_t rotate_90[9] = {0, 0x10000, 0, 0xffff0000u, 0, 0, 0, 0, 0x40000000};
  std::string packed;
  for (uint32_t v : rotate_90) {
    for (int shift = 24; shift >= 0; shift -= 8) packed += static_cast<char>((v >> shift) & 0xff);
  }
  file.seekp(static_cast<std::streamoff>(matrix));
  file.write(packed.data(), static_cast<std::streamsize>(packed.size()));
}

}  // namespace vapipe::testing
