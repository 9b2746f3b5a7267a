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
#include <map>
#include <optional>
#include <set>
#include <vector>

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
  // A key frame of an open GOP: the pictures after it in decoding order but shown before it may refer to
  // the GOP before (H.264: an intra picture not IDR, kIntra; H.265: a CRA picture).
  bool open_gop = false;
  // (H.265) A RASL picture: shown before its CRA, it refers to pictures before it. (H.264 does not say
  // which of an open GOP's leading pictures do.)
  bool rasl = false;
  // Whether later pictures may refer to it: H.264's nal_ref_idc not 0; H.265's NAL unit type not a
  // sub-layer non-reference picture's (TRAIL_N, RASL_N ...: most B-frames). False only when every slice says so.
  bool reference = true;
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
  Codec codec() const { return codec_; }
  int length_size() const { return length_size_; }

 private:
  Codec codec_;
  int length_size_;
};

// What ingest's decoder-input gate asks of a codec's reader of reference pictures (H.264's lists,
// RefPicListGaps in h264_reference_lists.h; H.265's sets, RefPicSetGaps), given a stream's compressed
// frames in decoding order, each once.
class ReferencePictures {
 public:
  virtual ~ReferencePictures() = default;
  // The next frame passed to the decoder (an access unit): whether reference pictures it needs never
  // reached the decoder (lost before it). Parameter sets in it are taken.
  virtual bool missing_before(GstBuffer* buffer) = 0;
  // The decoder starts again (a seek's flush, a new connection): no picture is expected.
  virtual void restart() = 0;
  // Damage followed picture by picture (the pictures a lost one harms are those that use it, and those
  // that use them): after missing_before(), whether the picture just read was read (false for a frame
  // whose picture cannot be followed), and whether a reference picture it uses is damaged or missing
  // (a picture missing before it that it does not use, as an I-frame after a lost P-frame, is whole).
  virtual bool last_read() const = 0;
  virtual bool last_uses_damaged() const = 0;
  // The picture just read is damaged itself (its data was lost, or it uses a damaged or missing
  // picture): the pictures that use it are.
  virtual void damage_last() = 0;
  // No picture kept is damaged any more (an intra-refreshed stream's recovery point's count went by).
  virtual void heal() = 0;
};

// Reference pictures missing from an H.265 stream, told by each picture's short-term reference picture
// set (8.3.2): the picture order counts (POCs) of the pictures it is predicted from, and of those kept
// for later pictures. A picture whose set uses one never passed to the decoder (since the last IRAP
// picture that starts decoding afresh) comes after reference pictures lost: an MPEG-TS file's or
// stream's packets (tsdemux drops the frame they were in and marks nothing, as for H.264), a whole frame
// on RTP. H.265 has no frame_num: the POCs of what was passed are kept as the decoder keeps its
// pictures (those the latest set names). A lost picture nothing uses (a non-reference B-frame) is not seen.
//
// Not followed: long-term reference pictures (never missing); the pictures decoded before the first one
// passed since a restart, which its set names (a connection joined at a CRA: its RASL pictures'
// references, which the decoder drops; a stream joined at a recovery point or a delta frame); layers
// above the base layer; frames before the SPS and PPS they name were seen (in band, or in the caps' hvcC).
class RefPicSetGaps final : public ReferencePictures {
 public:
  // length_size as AccessUnitReader's; codec_data: the caps' hvcC record (its parameter sets), or null.
  RefPicSetGaps(int length_size, GstBuffer* codec_data);
  // For a decoder input's caps; nullopt for anything but H.265 whose frames it can read.
  static std::optional<RefPicSetGaps> for_caps(const GstCaps* caps);

  // The next frame passed to the decoder (an access unit, in decoding order): whether reference pictures
  // it uses are missing. Parameter sets in it are taken.
  bool missing_before(const uint8_t* data, size_t size);
  bool missing_before(GstBuffer* buffer) override;
  void restart() override {
    started_ = false;
    passed_.clear();
    damaged_.clear();
  }

  // Damage followed picture by picture: a B-frame's loss harms the few B-frames around it that use it,
  // not the GOP. A picture is read unless its header could not be.
  bool last_read() const override { return last_read_; }
  bool last_uses_damaged() const override { return last_uses_damaged_; }
  void damage_last() override {
    if (last_read_) damaged_.insert(last_poc_);
  }
  void heal() override { damaged_.clear(); }

  // A short-term reference picture set (7.4.8): POC deltas from the picture's, before (negative) and
  // after (positive) it, each with whether the picture itself uses it (the others are kept for later).
  struct RefSet {
    std::vector<std::pair<int32_t, bool>> before, after;
  };

 private:
  struct Sps {
    uint32_t log2_max_poc_lsb = 4;
    bool separate_colour_plane = false;
    std::vector<RefSet> ref_sets;
  };
  struct Pps {
    uint32_t sps_id = 0;
    bool dependent_slice_segments = false;
    bool output_flag_present = false;
    uint32_t extra_slice_header_bits = 0;
  };
  // The picture being read, from its first slice segment's header.
  struct Slice {
    int nal_type = 0;
    int temporal_id = 0;
    uint32_t poc_lsb = 0;
    uint32_t log2_max_poc_lsb = 4;
    RefSet refs;
  };
  void take_nal(const uint8_t* data, size_t size);
  int length_size_;
  std::map<uint32_t, Sps> sps_;  // by sps_seq_parameter_set_id
  std::map<uint32_t, Pps> pps_;  // by pps_pic_parameter_set_id
  std::optional<Slice> slice_;
  bool started_ = false;          // a picture passed since the last restart
  bool sequence_ended_ = false;   // an end of sequence (or bitstream) NAL unit: the next picture starts afresh
  int32_t prev_tid0_poc_ = 0;     // the POC of the last picture a later one's POC is derived from (8.3.1)
  std::set<int32_t> before_start_;  // the POCs the first picture since a start names: never passed, no loss
  std::set<int32_t> passed_;      // the POCs of the pictures passed that later ones may still use
  std::set<int32_t> damaged_;     // of those, the damaged ones (damage_last)
  bool last_read_ = false, last_uses_damaged_ = false;
  int32_t last_poc_ = 0;
};

}  // namespace vapipe
