#include "stages/ingest/h26x_access_unit.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
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

// Each NAL unit of an access unit: `length_size`-byte lengths before each, or start codes (0), until
// `nal` says it has read enough (false).
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

// scaling_list() of an SPS (7.3.2.1.1.1): read past.
void skip_scaling_list(BitReader& bits, int size) {
  int last = 8, next = 8;
  for (int j = 0; j < size && bits.ok(); ++j) {
    if (next != 0) next = (last + bits.se() + 256) % 256;
    last = next == 0 ? last : next;
  }
}

}  // namespace

FrameNumGaps::FrameNumGaps(int length_size, GstBuffer* codec_data) : length_size_(length_size) {
  if (!codec_data) return;
  // avcC (ISO 14496-15 5.3.3.1): 5 bytes, then the SPS count (low 5 bits) and each SPS (16-bit length,
  // bytes), then the PPS count and each PPS.
  GstMapInfo map;
  if (!gst_buffer_map(codec_data, &map, GST_MAP_READ)) return;
  const uint8_t* d = map.data;
  size_t i = 5;
  for (int set = 0; set < 2 && i < map.size; ++set) {
    const int count = set == 0 ? (d[i] & 0x1F) : d[i];
    ++i;
    for (int k = 0; k < count && i + 2 <= map.size; ++k) {
      const size_t length = (size_t{d[i]} << 8) | d[i + 1];
      i += 2;
      if (length > map.size - i) break;
      take_nal(d + i, length);
      i += length;
    }
  }
  gst_buffer_unmap(codec_data, &map);
}

std::optional<FrameNumGaps> FrameNumGaps::for_caps(const GstCaps* caps) {
  // The reader knows the NAL units' layout (its length size read from the avcC, or start codes).
  const std::optional<AccessUnitReader> reader = AccessUnitReader::for_caps(caps);
  if (!reader || reader->codec() != AccessUnitReader::Codec::kH264) return std::nullopt;
  const GValue* codec_data = gst_structure_get_value(gst_caps_get_structure(caps, 0), "codec_data");
  GstBuffer* record = reader->length_size() > 0 && codec_data && GST_VALUE_HOLDS_BUFFER(codec_data)
                          ? gst_value_get_buffer(codec_data)
                          : nullptr;
  return FrameNumGaps(reader->length_size(), record);
}

void FrameNumGaps::take_nal(const uint8_t* data, size_t size) {
  if (size < 2) return;
  const int type = data[0] & 0x1F;
  if (type == 7) {  // SPS (7.3.2.1.1)
    const std::vector<uint8_t> rbsp = rbsp_of(data + 1, size - 1, size);
    BitReader bits(rbsp.data(), rbsp.size());
    const uint32_t profile = bits.bits(8);
    bits.bits(16);  // constraint flags, level_idc
    const uint32_t id = bits.ue();
    Sps sps;
    if (profile == 100 || profile == 110 || profile == 122 || profile == 244 || profile == 44 || profile == 83 ||
        profile == 86 || profile == 118 || profile == 128 || profile == 138 || profile == 139 || profile == 134 ||
        profile == 135) {
      const uint32_t chroma_format = bits.ue();
      if (chroma_format == 3) sps.separate_colour_plane = bits.bit() != 0;
      bits.ue();   // bit_depth_luma_minus8
      bits.ue();   // bit_depth_chroma_minus8
      bits.bit();  // qpprime_y_zero_transform_bypass_flag
      if (bits.bit()) {  // seq_scaling_matrix_present_flag
        for (int k = 0; k < (chroma_format != 3 ? 8 : 12) && bits.ok(); ++k) {
          if (bits.bit()) skip_scaling_list(bits, k < 6 ? 16 : 64);
        }
      }
    }
    sps.log2_max_frame_num = bits.ue() + 4;
    const uint32_t poc_type = bits.ue();
    if (poc_type == 0) {
      bits.ue();  // log2_max_pic_order_cnt_lsb_minus4
    } else if (poc_type == 1) {
      bits.bit();  // delta_pic_order_always_zero_flag
      bits.se();   // offset_for_non_ref_pic
      bits.se();   // offset_for_top_to_bottom_field
      const uint32_t cycle = bits.ue();
      for (uint32_t k = 0; k < cycle && k < 256 && bits.ok(); ++k) bits.se();
    }
    bits.ue();  // max_num_ref_frames
    sps.gaps_allowed = bits.bit() != 0;
    if (bits.ok() && id < 32 && sps.log2_max_frame_num <= 16) sps_[id] = sps;
  } else if (type == 8) {  // PPS (7.3.2.2)
    const std::vector<uint8_t> rbsp = rbsp_of(data + 1, size - 1, 16);
    BitReader bits(rbsp.data(), rbsp.size());
    const uint32_t id = bits.ue();
    const uint32_t sps = bits.ue();
    if (bits.ok() && id < 256) pps_[id] = sps;
  } else if ((type == 1 || type == 5) && !frame_num_) {  // the frame's first slice (7.3.3)
    const std::vector<uint8_t> rbsp = rbsp_of(data + 1, size - 1, 24);
    BitReader bits(rbsp.data(), rbsp.size());
    bits.ue();  // first_mb_in_slice
    bits.ue();  // slice_type
    const auto pps = pps_.find(bits.ue());
    if (pps == pps_.end()) return;
    const auto sps = sps_.find(pps->second);
    if (sps == sps_.end()) return;
    if (sps->second.separate_colour_plane) bits.bits(2);  // colour_plane_id
    const uint32_t frame_num = bits.bits(static_cast<int>(sps->second.log2_max_frame_num));
    if (!bits.ok()) return;
    frame_num_ = frame_num;
    max_frame_num_ = 1u << sps->second.log2_max_frame_num;
    idr_ = type == 5;
    reference_ = ((data[0] >> 5) & 3) != 0;  // nal_ref_idc
    gaps_allowed_ = sps->second.gaps_allowed;
  }
}

bool FrameNumGaps::missing_before(const uint8_t* data, size_t size) {
  frame_num_.reset();
  // The first slice's header says it: a frame's many slices, and its bytes after them, are not read.
  for_each_nal(data, size, length_size_, [&](const uint8_t* nal, size_t n) {
    take_nal(nal, n);
    return !frame_num_;
  });
  if (!frame_num_) return false;  // no slice read: nothing to follow it by
  const uint32_t frame_num = *frame_num_;
  bool missing = false;
  if (idr_) {
    known_ = true;
  } else if (known_ && !gaps_allowed_) {
    // The frame after the last reference picture (or that picture's second field, sharing its frame_num).
    missing = frame_num != prev_ref_ && frame_num != (prev_ref_ + 1) % max_frame_num_;
    // Taken up from there: a non-reference frame's reference before it is the one numbered before it.
    if (missing && !reference_) prev_ref_ = (frame_num + max_frame_num_ - 1) % max_frame_num_;
  }
  if (reference_ || idr_) {
    prev_ref_ = frame_num;
    known_ = true;
  } else if (!known_) {
    // A non-reference frame first (a connection joined at a recovery point): the reference before it
    // is the one numbered before it.
    prev_ref_ = (frame_num + max_frame_num_ - 1) % max_frame_num_;
    known_ = true;
  }
  return missing;
}

bool FrameNumGaps::missing_before(GstBuffer* buffer) {
  GstMapInfo map;
  if (!gst_buffer_map(buffer, &map, GST_MAP_READ)) return false;
  const bool missing = missing_before(map.data, map.size);
  gst_buffer_unmap(buffer, &map);
  return missing;
}

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
  for_each_nal(data, size, length_size_, [&](const uint8_t* nal, size_t n) {
    reading.nal(nal, n);
    return true;
  });
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
