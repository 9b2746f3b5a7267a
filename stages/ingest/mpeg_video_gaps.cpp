#include "stages/ingest/mpeg_video_gaps.h"

#include <cstddef>
#include <cstdint>
#include <utility>

#include "stages/ingest/nal_reading.h"

namespace vapipe {
namespace {

constexpr uint8_t kPictureStartCode = 0x00, kGroupStartCode = 0xB8;
constexpr uint32_t kIntra = 1, kPredicted = 2, kBidirectional = 3;  // picture_coding_type (D is 4)

// Whether a picture (its bytes after its picture header's start) is a frame, not one field: MPEG-2's
// picture coding extension (00 00 01 B5, identifier 8) says its picture_structure (3: a frame); MPEG-1
// has none, and only frames.
bool is_frame_picture(const uint8_t* data, size_t size) {
  for (size_t i = 0; i + 6 < size; ++i) {
    if (data[i] != 0 || data[i + 1] != 0 || data[i + 2] != 1) continue;
    if (data[i + 3] != 0xB5) return true;  // a slice, or another picture: no picture coding extension
    if ((data[i + 4] >> 4) == 8) return (data[i + 6] & 3) == 3;
    i += 3;
  }
  return true;
}

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
      const bool frame_picture = is_frame_picture(data + i + 6, size - i - 6);
      if (type == kBidirectional) {
        b_frames_ = true;
        // Shown before the last anchor, sent after it.
        bool missing = anchor_ && !group_start && temporal_reference > *anchor_;
        if (std::exchange(first_b_after_anchor_, false) && !missing && anchor_ && !group_start) {
          missing = anchor_lost_with_its_b_frames(temporal_reference);
        }
        if (group_start) {
          anchor_.reset();  // (a GOP that starts with a B-frame: not MPEG-2's)
          step_.reset();
        }
        return missing;
      }
      if (type != kIntra && type != kPredicted) return false;  // (MPEG-1's D-pictures: never references)
      // An anchor's place goes on from the last one's (the second field of a field pair shares it), or
      // wraps past 1023 (a long GOP, or intra frames without GOP headers); without B-frames, by 1.
      const uint32_t step = (temporal_reference + 1024 - (anchor_ ? *anchor_ : 0)) % 1024;
      // (Only I- and P-frames: none since the start, two anchors in a row passed; a stream with B-frames
      // sends its first after its second anchor.)
      const bool ip_only = !b_frames_ && anchors_ >= 2;
      // A frame picture (not a field) at the last anchor's place: the GOP between them was lost, its
      // header with it (I2 B0 B1 P5 ... [I2 B0 B1] P5: the next GOP's P-frame numbered as the last one).
      const bool missing =
          anchor_ && !group_start && (step >= 512 || (ip_only && step > 1) || (step == 0 && frame_picture && last_frame_picture_));
      last_frame_picture_ = frame_picture;
      if (anchors_ < 2 && (!anchor_ || step != 0)) ++anchors_;  // (a field pair is one)
      if (group_start || !anchor_ || step >= 512) {
        step_.reset();  // (a GOP's first anchor: its leading B-frames say nothing of a step; nor a lost GOP's)
      } else if (step != 0) {
        step_ = step;
      }  // (the second field of an anchor: the pair's step)
      first_b_after_anchor_ = true;
      anchor_ = temporal_reference;
      return missing;
    } else if (code >= 0x01 && code <= 0xAF) {
      return false;  // a slice before any picture header: not a whole picture
    }
    i += 3;
  }
  return false;
}

bool TemporalReferenceGaps::anchor_lost_with_its_b_frames(uint32_t tr) {
  if (!step_ || !anchor_) return false;
  // Where the B-frames after the anchor begin: right after the anchor before it, when nothing was lost.
  auto place_after = [&](uint32_t distance) { return (*anchor_ + 1024 - distance + 1) % 1024; };
  if (tr == place_after(*step_)) {
    if (*step_ > 1) usual_step_ = *step_;
    return false;
  }
  // I0 P3 B1 B2 [P6 B4 B5] P9 B7 B8: P9 is 6 after P3, twice M, and its B-frames fill only its last 2 places.
  return usual_step_ && *step_ >= 2 * *usual_step_ && tr == place_after(*usual_step_);
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

bool TemporalReferenceGaps::opens_open_gop(const uint8_t* data, size_t size) {
  for (size_t i = 0; i + 7 < size; ++i) {
    if (data[i] != 0 || data[i + 1] != 0 || data[i + 2] != 1) continue;
    // time_code (25 bits), closed_gop, broken_link.
    if (data[i + 3] == kGroupStartCode) return (data[i + 7] & 0x60) == 0;
    if (data[i + 3] == kPictureStartCode) return false;  // no GOP header before the picture
    i += 3;
  }
  return false;
}

bool TemporalReferenceGaps::opens_open_gop(GstBuffer* buffer) {
  return nal::read_mapped(buffer, [](const uint8_t* data, size_t size) { return opens_open_gop(data, size); });
}

bool TemporalReferenceGaps::missing_before(GstBuffer* buffer) {
  return nal::read_mapped(buffer, [this](const uint8_t* data, size_t size) { return missing_before(data, size); });
}

}  // namespace vapipe
