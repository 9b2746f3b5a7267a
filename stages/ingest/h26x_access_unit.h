// What an H.264 or H.265 access unit (one compressed frame) holds, read from its NAL units: whether
// its picture is whole on its own, and whether it is a recovery point. Ingest's decoder-input gate
// needs the difference because the parsers (h264parse, h265parse) mark all of them "not a delta unit":
// an open GOP's I-frames, and a stream refreshed by intra slices (x264 and NVENC intra refresh, low-latency cameras) marks every
// recovery point so, yet its picture is a P-frame with one column of fresh blocks, whole only some
// frames later.
#pragma once

#include <gst/gst.h>

#include <cstddef>
#include <cstdint>
#include <optional>

namespace vapipe {

struct AccessUnitKind {
  enum class Picture {
    kUnknown,       // no slice read (not H.264/H.265 NAL units, or cut short)
    kRandomAccess,  // IDR (H.264) or IRAP (H.265): decodable alone, and decoding may start afresh here
    kIntra,         // (H.264) every slice intra but not IDR, an open GOP's I-frame: decodable alone, but
                    // libav, fed such frames alone, invents the missing ones between them (frame_num gaps)
                    // and sends those instead, under the wrong timestamps (checked)
    kPartial,       // some slice needs other pictures
  };
  Picture picture = Picture::kUnknown;
  // A recovery point SEI: decoding from here, the pictures are whole this many frames later
  // (H.264 recovery_frame_cnt; H.265 recovery_poc_cnt, taken as frames).
  std::optional<uint32_t> recovery_frames;
};

class AccessUnitReader {
 public:
  enum class Codec { kH264, kH265 };
  // length_size: the bytes of each NAL unit's length prefix (avc/avc3, hvc1/hev1: 1, 2 or 4), or 0
  // for a byte stream of start codes (Annex B).
  AccessUnitReader(Codec codec, int length_size) : codec_(codec), length_size_(length_size) {}

  // For a decoder input's caps (video/x-h264, video/x-h265, their stream-format and codec_data);
  // nullopt for any other codec, or caps it cannot follow.
  static std::optional<AccessUnitReader> for_caps(const GstCaps* caps);

  AccessUnitKind read(const uint8_t* data, size_t size) const;
  AccessUnitKind read(GstBuffer* buffer) const;

 private:
  Codec codec_;
  int length_size_;
};

}  // namespace vapipe
