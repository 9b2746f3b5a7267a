#include "stages/ingest/mpeg_video_gaps.h"

#include <cstddef>
#include <cstdint>

namespace vapipe {
namespace {

constexpr uint8_t kPictureStartCode = 0x00, kGroupStartCode = 0xB8;
constexpr uint32_t kIntra = 1, kPredicted = 2, kBidirectional = 3;  // picture_coding_type (D is 4)

}  // namespace

std::optional<TemporalReferenceGaps> TemporalReferenceGaps::for_caps(const GstCaps* caps) {
  if (!caps || gst_caps_get_size(caps) < 1) return std::nullopt;
  const GstStructure* s = gst_caps_get_structure(caps, 0);
  int version = 0;
  gboolean system = FALSE;
  if (!gst_structure_has_name(s, "video/mpeg") || !gst_structure_get_int(s, "mpegversion", &version) ||
      (version != 1 && version != 2)) {
    return std::nullopt;
  }
  if (gst_structure_get_boolean(s, "systemstream", &system) && system) return std::nullopt;
  return TemporalReferenceGaps();
}

bool TemporalReferenceGaps::missing_before(const uint8_t* data, size_t size) {
  // Start codes 00 00 01 xx: a GOP header may come before the picture header, whose first 13 bits after
  // the code are temporal_reference (10) and picture_coding_type (3). Slices follow: not read.
  bool group_start = false;
  for (size_t i = 0; i + 5 < size; ++i) {
    if (data[i] != 0 || data[i + 1] != 0 || data[i + 2] != 1) continue;
    const uint8_t code = data[i + 3];
    if (code == kGroupStartCode) {
      group_start = true;
    } else if (code == kPictureStartCode) {
      const uint32_t temporal_reference = (uint32_t{data[i + 4]} << 2) | (data[i + 5] >> 6);
      const uint32_t type = (data[i + 5] >> 3) & 7;
      if (type == kBidirectional) {
        b_frames_ = true;
        // Shown before the last anchor, sent after it.
        const bool missing = anchor_ && !group_start && temporal_reference > *anchor_;
        if (group_start) anchor_.reset();  // (a GOP that starts with a B-frame: not MPEG-2's)
        return missing;
      }
      if (type != kIntra && type != kPredicted) return false;  // (MPEG-1's D-pictures: never references)
      // An anchor's place goes on from the last one's (the second field of a field pair shares it), or
      // wraps past 1023 (a long GOP, or intra frames without GOP headers); without B-frames, by 1.
      const uint32_t step = (temporal_reference + 1024 - (anchor_ ? *anchor_ : 0)) % 1024;
      // (Only I- and P-frames: none since the start, two anchors in a row passed; a stream with B-frames
      // sends its first after its second anchor.)
      const bool ip_only = !b_frames_ && anchors_ >= 2;
      const bool missing = anchor_ && !group_start && (step >= 512 || (ip_only && step > 1));
      if (anchors_ < 2 && (!anchor_ || step != 0)) ++anchors_;  // (a field pair is one)
      anchor_ = temporal_reference;
      return missing;
    } else if (code >= 0x01 && code <= 0xAF) {
      return false;  // a slice before any picture header: not a whole picture
    }
    i += 3;
  }
  return false;
}

bool TemporalReferenceGaps::is_b_frame(GstBuffer* buffer) {
  GstMapInfo map;
  if (!gst_buffer_map(buffer, &map, GST_MAP_READ)) return false;
  bool b_frame = false;
  for (size_t i = 0; i + 5 < map.size; ++i) {
    if (map.data[i] == 0 && map.data[i + 1] == 0 && map.data[i + 2] == 1 && map.data[i + 3] == kPictureStartCode) {
      b_frame = ((map.data[i + 5] >> 3) & 7) == kBidirectional;
      break;
    }
  }
  gst_buffer_unmap(buffer, &map);
  return b_frame;
}

bool TemporalReferenceGaps::missing_before(GstBuffer* buffer) {
  GstMapInfo map;
  if (!gst_buffer_map(buffer, &map, GST_MAP_READ)) return false;
  const bool missing = missing_before(map.data, map.size);
  gst_buffer_unmap(buffer, &map);
  return missing;
}

}  // namespace vapipe
