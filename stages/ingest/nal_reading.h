// Reading H.264 and H.265 NAL units: their payloads without emulation prevention bytes, the bits of
// their syntax (Exp-Golomb and fixed-width), the NAL units of an access unit, and the parameter sets of
// a caps' avcC/hvcC record. Shared by the readers of access units (h26x_access_unit.h) and of H.264's
// reference lists (h264_reference_lists.h).
#pragma once

#include <gst/gst.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace vapipe::nal {

// The payload of a NAL unit without its emulation prevention bytes (00 00 03 -> 00 00), the first
// `limit` bytes of it: slice headers need a few, SEI messages and parameter sets all.
std::vector<uint8_t> rbsp_of(const uint8_t* data, size_t size, size_t limit);

// Exp-Golomb and fixed-width reads over an RBSP; a read past the end fails the reader for good.
class BitReader {
 public:
  BitReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool ok() const { return ok_; }
  uint32_t bit() {
    if (pos_ >= size_ * 8) {
      ok_ = false;
      return 0;
    }
    const uint32_t b = (data_[pos_ / 8] >> (7 - pos_ % 8)) & 1;
    ++pos_;
    return b;
  }
  uint32_t bits(int n) {
    uint32_t value = 0;
    for (int i = 0; i < n && ok_; ++i) value = (value << 1) | bit();
    return value;
  }
  uint32_t ue() {
    int zeros = 0;
    while (ok_ && bit() == 0) {
      if (++zeros > 31) ok_ = false;
    }
    if (!ok_) return 0;
    uint32_t value = 0;
    for (int i = 0; i < zeros; ++i) value = (value << 1) | bit();
    return (1u << zeros) - 1 + value;
  }
  int32_t se() {
    const uint32_t k = ue();
    return k % 2 ? static_cast<int32_t>((k + 1) / 2) : -static_cast<int32_t>(k / 2);
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  bool ok_ = true;
};

// Each NAL unit of an access unit: `length_size`-byte lengths before each, or start codes (0), until
// `nal` says it has read enough (false).
void for_each_nal(const uint8_t* data, size_t size, int length_size,
                  const std::function<bool(const uint8_t*, size_t)>& nal);

// The parameter sets of an avcC (ISO 14496-15 5.3.3.1; h265 false) or hvcC (8.3.3.1) record, each
// given to `nal`.
void for_each_parameter_set(GstBuffer* record, bool h265, const std::function<void(const uint8_t*, size_t)>& nal);

// The caps' avcC or hvcC record (the parameter sets), where the frames' NAL units have length prefixes
// (length_size > 0); null otherwise (start codes carry their parameter sets in band).
GstBuffer* parameter_set_record(const GstCaps* caps, int length_size);

// `read(data, size)` over a buffer's bytes, mapped for reading; false when they cannot be mapped.
template <typename Read>
bool read_mapped(GstBuffer* buffer, Read&& read) {
  GstMapInfo map;
  if (!gst_buffer_map(buffer, &map, GST_MAP_READ)) return false;
  const bool answer = read(map.data, map.size);
  gst_buffer_unmap(buffer, &map);
  return answer;
}

// H.264 scaling_list() of an SPS or PPS (7.3.2.1.1.1): read past.
void skip_scaling_list(BitReader& bits, int size);

}  // namespace vapipe::nal
