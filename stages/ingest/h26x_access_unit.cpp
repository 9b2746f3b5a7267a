#include "stages/ingest/h26x_access_unit.h"

#include <cstdint>
#include <cstring>
#include <vector>

namespace vapipe {
namespace {

// The payload of a NAL unit without its emulation prevention bytes (00 00 03 -> 00 00), the first
// `limit` bytes of it: slice headers need a few, SEI messages all.
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

// SEI messages (H.264 7.3.2.3, H.265 7.3.5): the recovery point's count, if one is there.
std::optional<uint32_t> recovery_point_in(const std::vector<uint8_t>& sei, AccessUnitReader::Codec codec) {
  size_t i = 0;
  while (i < sei.size() && !(sei[i] == 0x80 && i + 1 == sei.size())) {
    uint32_t type = 0, size = 0;
    while (i < sei.size() && sei[i] == 0xFF) type += sei[i++];
    if (i >= sei.size()) break;
    type += sei[i++];
    while (i < sei.size() && sei[i] == 0xFF) size += sei[i++];
    if (i >= sei.size()) break;
    size += sei[i++];
    if (type == 6) {  // recovery_point
      BitReader bits(sei.data() + i, std::min<size_t>(size, sei.size() - i));
      if (codec == AccessUnitReader::Codec::kH264) {
        const uint32_t frames = bits.ue();
        if (bits.ok()) return frames;
      } else {
        const int32_t poc = bits.se();
        if (bits.ok()) return static_cast<uint32_t>(poc > 0 ? poc : 0);
      }
      return std::nullopt;
    }
    i += size;
  }
  return std::nullopt;
}

struct Reading {
  AccessUnitReader::Codec codec = AccessUnitReader::Codec::kH264;
  bool any_slice = false;
  bool all_random_access = true;  // IDR / IRAP
  bool all_intra = true;
  std::optional<uint32_t> recovery_frames;

  void nal(const uint8_t* data, size_t size) {
    if (codec == AccessUnitReader::Codec::kH264) {
      if (size < 2) return;
      const int type = data[0] & 0x1F;
      if (type == 5) {  // IDR slice
        any_slice = true;
      } else if (type == 1 || type == 2) {  // a slice, or its partition A (which has the header)
        any_slice = true;
        all_random_access = false;
        const std::vector<uint8_t> header = rbsp_of(data + 1, size - 1, 16);
        BitReader bits(header.data(), header.size());
        bits.ue();  // first_mb_in_slice
        const uint32_t slice_type = bits.ue() % 5;
        if (!bits.ok() || (slice_type != 2 && slice_type != 4)) all_intra = false;  // not I or SI
      } else if (type == 6 && !recovery_frames) {
        recovery_frames = recovery_point_in(rbsp_of(data + 1, size - 1, size), codec);
      }
    } else {
      if (size < 3) return;
      const int type = (data[0] >> 1) & 0x3F;
      if (type <= 31) {  // a VCL NAL unit: IRAP (16..23); whether another is intra would need its PPS
        any_slice = true;
        if (type < 16 || type > 23) all_random_access = all_intra = false;
      } else if (type == 39 && !recovery_frames) {  // prefix SEI
        recovery_frames = recovery_point_in(rbsp_of(data + 2, size - 2, size), codec);
      }
    }
  }
};

}  // namespace

std::optional<AccessUnitReader> AccessUnitReader::for_caps(const GstCaps* caps) {
  if (!caps || gst_caps_get_size(caps) < 1) return std::nullopt;
  const GstStructure* s = gst_caps_get_structure(caps, 0);
  const gchar* name = gst_structure_get_name(s);
  Codec codec;
  if (g_str_equal(name, "video/x-h264")) {
    codec = Codec::kH264;
  } else if (g_str_equal(name, "video/x-h265")) {
    codec = Codec::kH265;
  } else {
    return std::nullopt;
  }
  const gchar* alignment = gst_structure_get_string(s, "alignment");
  if (alignment && !g_str_equal(alignment, "au")) return std::nullopt;  // a buffer is not one frame
  const gchar* format = gst_structure_get_string(s, "stream-format");
  const GValue* codec_data = gst_structure_get_value(s, "codec_data");
  if (format && g_str_equal(format, "byte-stream")) return AccessUnitReader(codec, 0);
  if (!codec_data || !GST_VALUE_HOLDS_BUFFER(codec_data)) {
    return format ? std::nullopt : std::optional<AccessUnitReader>(AccessUnitReader(codec, 0));
  }
  // avcC (ISO 14496-15 5.3.3.1) keeps lengthSizeMinusOne in byte 4, hvcC (8.3.3.1) in byte 21.
  GstBuffer* record = gst_value_get_buffer(codec_data);
  const size_t at = codec == Codec::kH264 ? 4 : 21;
  uint8_t byte = 0;
  if (gst_buffer_extract(record, at, &byte, 1) != 1) return std::nullopt;
  const int length_size = (byte & 3) + 1;
  if (length_size == 3) return std::nullopt;  // not allowed
  return AccessUnitReader(codec, length_size);
}

AccessUnitKind AccessUnitReader::read(const uint8_t* data, size_t size) const {
  Reading reading;
  reading.codec = codec_;
  if (length_size_ > 0) {
    size_t i = 0;
    while (i + length_size_ <= size) {
      size_t length = 0;
      for (int k = 0; k < length_size_; ++k) length = (length << 8) | data[i + k];
      i += length_size_;
      if (length > size - i) break;  // cut short
      reading.nal(data + i, length);
      i += length;
    }
  } else {
    // Start codes 00 00 01 (or 00 00 00 01): a NAL unit runs to the next one, less trailing zeros.
    size_t start = SIZE_MAX;
    size_t i = 0;
    while (i + 3 <= size) {
      if (data[i] == 0 && data[i + 1] == 0 && data[i + 2] == 1) {
        if (start != SIZE_MAX) {
          size_t end = i;
          while (end > start && data[end - 1] == 0) --end;
          reading.nal(data + start, end - start);
        }
        start = i + 3;
        i += 3;
      } else {
        ++i;
      }
    }
    if (start != SIZE_MAX && start < size) reading.nal(data + start, size - start);
  }
  AccessUnitKind kind;
  kind.recovery_frames = reading.recovery_frames;
  if (reading.any_slice) {
    kind.picture = reading.all_random_access ? AccessUnitKind::Picture::kRandomAccess
                   : reading.all_intra       ? AccessUnitKind::Picture::kIntra
                                             : AccessUnitKind::Picture::kPartial;
  }
  return kind;
}

AccessUnitKind AccessUnitReader::read(GstBuffer* buffer) const {
  GstMapInfo map;
  if (!gst_buffer_map(buffer, &map, GST_MAP_READ)) return {};
  AccessUnitKind kind = read(map.data, map.size);
  gst_buffer_unmap(buffer, &map);
  return kind;
}

}  // namespace vapipe
