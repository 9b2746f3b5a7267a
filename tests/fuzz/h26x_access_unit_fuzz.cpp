// A camera's compressed frames, read before decoding (ingest's decoder-input gate): whatever a camera
// or a damaged file sends, reading an access unit must not crash or read past it. Input: byte 0 (bit 0:
// H.265, else H.264; bits 1-2: the NAL length prefix, none (start codes), 1, 2 or 4 bytes), then the
// access unit. The bytes are copied into a buffer of their exact size, so a read past the end is
// caught by AddressSanitizer.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "stages/ingest/h26x_access_unit.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  using vapipe::AccessUnitReader;
  static const int kLengthSizes[] = {0, 1, 2, 4};
  const AccessUnitReader reader(data[0] & 1 ? AccessUnitReader::Codec::kH265 : AccessUnitReader::Codec::kH264,
                                kLengthSizes[(data[0] >> 1) & 3]);
  const std::vector<uint8_t> unit(data + 1, data + size);
  reader.read(unit.data(), unit.size());  // any answer is allowed; a crash or a read past the end is not
  return 0;
}
