// H.264 and H.265 NAL units made by hand for the tests of what ingest reads in compressed frames: RBSP
// bits written field by field as the standards' syntax tables read them, NAL units with emulation
// prevention, access units with start codes or length prefixes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vapipe::testing {

using Bytes = std::vector<uint8_t>;

// RBSP bits, written as the standards' syntax tables read them.
class BitWriter {
 public:
  BitWriter& bit(uint32_t b) {
    if (bits_ % 8 == 0) bytes_.push_back(0);
    if (b) bytes_.back() |= static_cast<uint8_t>(0x80 >> (bits_ % 8));
    ++bits_;
    return *this;
  }
  BitWriter& bits(uint32_t value, int n) {
    for (int i = n - 1; i >= 0; --i) bit((value >> i) & 1);
    return *this;
  }
  BitWriter& ue(uint32_t v) {
    int n = 0;
    while ((v + 1) >> (n + 1)) ++n;
    bits(0, n);
    return bits(v + 1, n + 1);
  }
  BitWriter& se(int32_t v) { return ue(v > 0 ? 2 * v - 1 : -2 * v); }
  // rbsp_trailing_bits: a stop bit, then zeros to the byte.
  Bytes finish() {
    bit(1);
    while (bits_ % 8) bit(0);
    return bytes_;
  }

 private:
  Bytes bytes_;
  size_t bits_ = 0;
};

// A NAL unit from its header and RBSP: emulation prevention bytes put in as an encoder does.
inline Bytes nal(const Bytes& header, const Bytes& rbsp) {
  Bytes out = header;
  int zeros = 0;
  for (uint8_t b : rbsp) {
    if (zeros >= 2 && b <= 3) {
      out.push_back(3);
      zeros = 0;
    }
    zeros = b == 0 ? zeros + 1 : 0;
    out.push_back(b);
  }
  return out;
}

inline Bytes annex_b(const std::vector<Bytes>& nals) {
  Bytes out;
  bool first = true;
  for (const Bytes& n : nals) {
    if (first) out.push_back(0);  // a 4-byte start code first, 3-byte ones after
    first = false;
    out.insert(out.end(), {0, 0, 1});
    out.insert(out.end(), n.begin(), n.end());
  }
  out.push_back(0);  // trailing_zero_8bits
  return out;
}
inline Bytes length_prefixed(const std::vector<Bytes>& nals, int length_size) {
  Bytes out;
  for (const Bytes& n : nals) {
    for (int k = length_size - 1; k >= 0; --k) out.push_back(static_cast<uint8_t>(n.size() >> (8 * k)));
    out.insert(out.end(), n.begin(), n.end());
  }
  return out;
}

}  // namespace vapipe::testing
