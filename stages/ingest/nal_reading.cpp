#include "stages/ingest/nal_reading.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace vapipe::nal {

std::vector<uint8_t> rbsp_of(const uint8_t* data, size_t size, size_t limit) {
  std::vector<uint8_t> out;
  out.reserve(std::min(size, limit));
  int zeros = 0;
  for (size_t i = 0; i < size && out.size() < limit; ++i) {
    if (zeros >= 2 && data[i] == 3) {
      zeros = 0;
      continue;
    }
    zeros = data[i] == 0 ? zeros + 1 : 0;
    out.push_back(data[i]);
  }
  return out;
}

void for_each_nal(const uint8_t* data, size_t size, int length_size,
                  const std::function<bool(const uint8_t*, size_t)>& nal) {
  if (length_size > 0) {
    size_t i = 0;
    while (i + length_size <= size) {
      size_t length = 0;
      for (int k = 0; k < length_size; ++k) length = (length << 8) | data[i + k];
      i += length_size;
      if (length > size - i) break;  // cut short
      if (!nal(data + i, length)) return;
      i += length;
    }
    return;
  }
  // Start codes 00 00 01 (or 00 00 00 01): a NAL unit runs to the next one, less trailing zeros.
  size_t start = SIZE_MAX;
  size_t i = 0;
  while (i + 3 <= size) {
    if (data[i] == 0 && data[i + 1] == 0 && data[i + 2] == 1) {
      if (start != SIZE_MAX) {
        size_t end = i;
        while (end > start && data[end - 1] == 0) --end;
        if (!nal(data + start, end - start)) return;
      }
      start = i + 3;
      i += 3;
    } else {
      ++i;
    }
  }
  if (start != SIZE_MAX && start < size) nal(data + start, size - start);
}

void skip_scaling_list(BitReader& bits, int size) {
  int last = 8, next = 8;
  for (int j = 0; j < size && bits.ok(); ++j) {
    // (delta_scale is -128..127; a damaged one may be anything: no signed overflow)
    if (next != 0) next = static_cast<int>(((int64_t{last} + bits.se()) % 256 + 256) % 256);
    last = next == 0 ? last : next;
  }
}

void for_each_parameter_set(GstBuffer* record, bool h265, const std::function<void(const uint8_t*, size_t)>& nal) {
  GstMapInfo map;
  if (!record || !gst_buffer_map(record, &map, GST_MAP_READ)) return;
  const uint8_t* d = map.data;
  auto take = [&](size_t& i, size_t count) {
    for (size_t k = 0; k < count && i + 2 <= map.size; ++k) {
      const size_t length = (size_t{d[i]} << 8) | d[i + 1];
      i += 2;
      if (length > map.size - i) {
        i = map.size;
        return;
      }
      nal(d + i, length);
      i += length;
    }
  };
  if (!h265) {
    // 5 bytes, then the SPS count (low 5 bits) and each SPS (16-bit length, bytes), then the PPSs.
    size_t i = 5;
    for (int set = 0; set < 2 && i < map.size; ++set) {
      const size_t count = set == 0 ? (d[i] & 0x1F) : d[i];
      ++i;
      take(i, count);
    }
  } else {
    // 22 bytes, the count of arrays, then each array: its NAL unit type, a 16-bit count, the units.
    size_t i = 22;
    const size_t arrays = i < map.size ? d[i++] : 0;
    for (size_t a = 0; a < arrays && i + 3 <= map.size; ++a) {
      const size_t count = (size_t{d[i + 1]} << 8) | d[i + 2];
      i += 3;
      take(i, count);
    }
  }
  gst_buffer_unmap(record, &map);
}

GstBuffer* parameter_set_record(const GstCaps* caps, int length_size) {
  const GValue* codec_data = gst_structure_get_value(gst_caps_get_structure(caps, 0), "codec_data");
  return length_size > 0 && codec_data && GST_VALUE_HOLDS_BUFFER(codec_data) ? gst_value_get_buffer(codec_data)
                                                                                     : nullptr;
}

}  // namespace vapipe::nal
