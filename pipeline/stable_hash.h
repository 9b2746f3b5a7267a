// A hash that stays the same across runs, builds and machines (std::hash need not): for names that are
// written down and found again, such as a sink's delivery marks, an MQTT device id, a file's stream id.
#pragma once

#include <cstdint>
#include <string_view>

namespace vapipe {

// FNV-1a, 32 bits.
inline uint32_t fnv1a32(std::string_view text) {
  uint32_t h = 2166136261u;
  for (const unsigned char ch : text) h = (h ^ ch) * 16777619u;
  return h;
}

}  // namespace vapipe
