// What tells ingest's decoder-input gate that reference pictures never reached the decoder, reading a
// camera's or a damaged file's compressed frames one after another: H.264's frame_num and reference
// lists with their decoded picture buffer (RefPicListGaps), H.265's reference picture sets with the SPS and PPS they come from (RefPicSetGaps), MPEG-1/2's
// temporal_reference (TemporalReferenceGaps). Whatever the frames hold, following them must not crash,
// read past a frame or overflow. Input: byte 0 (bits 0-1: 0 H.264, 1 H.265, 2 MPEG-1/2 video; bits 2-3:
// the NAL length prefix, none (start codes), 1, 2 or 4 bytes; bit 4: the first frame is the caps'
// avcC/hvcC record instead), then frames, each a 2-byte big-endian length and its bytes (a length of 0:
// the decoder starts again, restart()). Each frame is copied into a buffer of its exact size, so a read
// past its end is caught by AddressSanitizer.
#include <gst/gst.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "stages/ingest/h264_reference_lists.h"
#include "stages/ingest/h26x_access_unit.h"
#include "stages/ingest/mpeg_video_gaps.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const bool initialised = (gst_init(nullptr, nullptr), true);
  (void)initialised;
  static const int kLengthSizes[] = {0, 1, 2, 4};
  const int codec = data[0] & 3;
  const int length_size = kLengthSizes[(data[0] >> 2) & 3];
  const bool record_first = (data[0] & 0x10) != 0;
  size_t at = 1;
  // The next frame's bytes, or nullopt at the input's end.
  auto next = [&]() -> std::optional<std::vector<uint8_t>> {
    if (at + 2 > size) return std::nullopt;
    const size_t length = std::min<size_t>((size_t{data[at]} << 8) | data[at + 1], size - at - 2);
    at += 2;
    std::vector<uint8_t> frame(data + at, data + at + length);
    at += length;
    return frame;
  };
  GstBuffer* record = nullptr;
  if (record_first && codec < 2) {
    if (std::optional<std::vector<uint8_t>> bytes = next()) {
      record = gst_buffer_new_allocate(nullptr, bytes->size(), nullptr);
      gst_buffer_fill(record, 0, bytes->data(), bytes->size());
    }
  }
  std::optional<vapipe::RefPicListGaps> ref_pic_lists;
  std::optional<vapipe::RefPicSetGaps> ref_pic_sets;
  vapipe::TemporalReferenceGaps temporal_references;
  if (codec == 0) ref_pic_lists.emplace(length_size, record);
  if (codec == 1) ref_pic_sets.emplace(length_size, record);
  if (record) gst_buffer_unref(record);
  vapipe::ReferencePictures* references = ref_pic_lists ? static_cast<vapipe::ReferencePictures*>(&*ref_pic_lists)
                                          : ref_pic_sets ? &*ref_pic_sets
                                                         : nullptr;
  size_t frames = 0;
  while (std::optional<std::vector<uint8_t>> frame = next()) {
    if (frame->empty()) {
      if (references) references->restart();
      temporal_references.restart();
      continue;
    }
    // Any answer is allowed; a crash, a read past the frame or undefined behaviour is not.
    if (ref_pic_lists) {
      ref_pic_lists->missing_before(frame->data(), frame->size());
    } else if (ref_pic_sets) {
      ref_pic_sets->missing_before(frame->data(), frame->size());
    } else {
      temporal_references.missing_before(frame->data(), frame->size());
    }
    // Damage followed as the gate follows it: a picture that uses a damaged one is damaged; now and
    // then one lost, and now and then all healed.
    ++frames;
    if (references && (references->last_uses_damaged() || frames % 7 == 0)) references->damage_last();
    if (references && frames % 23 == 0) references->heal();
  }
  return 0;
}
