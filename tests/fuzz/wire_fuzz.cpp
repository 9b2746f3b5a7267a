// Messages between stages arrive over ZeroMQ, across hosts with transport.mode: tcp. A malformed one
// must be refused (kDataLoss), never crash a stage; one that decodes must encode back to the same
// bytes. Input: byte 0 (bit 0 set: the header starts with this build's magic and version, so inputs
// reach the body whatever the wire version; bits 1-2: how many inline payload parts), then each
// part's length (2 bytes, little-endian) and bytes, then the header.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "pipeline/wire.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

vapipe::Payload bytes_payload(const uint8_t* data, size_t size) {
  vapipe::Payload p = vapipe::Payload::heap(size);
  if (size) std::memcpy(p.data(), data, size);
  return p;
}

std::vector<vapipe::Payload> parts_of(const vapipe::EncodedMessage& e) {
  std::vector<vapipe::Payload> parts{bytes_payload(reinterpret_cast<const uint8_t*>(e.header.data()), e.header.size())};
  for (const vapipe::Payload& p : e.inline_payloads) {
    parts.push_back(bytes_payload(reinterpret_cast<const uint8_t*>(p.data()), p.size()));
  }
  return parts;
}

bool same_bytes(const vapipe::EncodedMessage& a, const vapipe::EncodedMessage& b) {
  if (a.header != b.header || a.inline_payloads.size() != b.inline_payloads.size()) return false;
  for (size_t i = 0; i < a.inline_payloads.size(); ++i) {
    const vapipe::Payload &x = a.inline_payloads[i], &y = b.inline_payloads[i];
    if (x.size() != y.size() || (x.size() && std::memcmp(x.data(), y.data(), x.size()) != 0)) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t control = data[0];
  size_t at = 1;
  std::vector<vapipe::Payload> parts(1);
  for (int i = 0; i < ((control >> 1) & 3); ++i) {
    if (size - at < 2) return 0;
    const size_t n = std::min<size_t>(data[at] | (data[at + 1] << 8), size - at - 2);
    parts.push_back(bytes_payload(data + at + 2, n));
    at += 2 + n;
  }
  std::vector<uint8_t> header(data + at, data + size);
  if (control & 1) {
    const vapipe::EncodedMessage empty = vapipe::encode_message(vapipe::Message{}, false);
    const size_t prefix = 3;  // magic (2 bytes), version (1)
    header.insert(header.begin(), reinterpret_cast<const uint8_t*>(empty.header.data()),
                  reinterpret_cast<const uint8_t*>(empty.header.data()) + prefix);
  }
  parts[0] = bytes_payload(header.data(), header.size());
  auto decoded = vapipe::decode_message(std::move(parts), nullptr);
  if (!decoded.ok()) {
    VAPIPE_FUZZ_CHECK(decoded.status().code() == vapipe::StatusCode::kDataLoss, "a malformed message is kDataLoss");
    return 0;
  }
  // What decodes encodes again, and that decodes to the same encoding.
  const vapipe::EncodedMessage once = vapipe::encode_message(*decoded, false);
  auto again = vapipe::decode_message(parts_of(once), nullptr);
  VAPIPE_FUZZ_CHECK(again.ok(), "a message this build encoded decodes");
  VAPIPE_FUZZ_CHECK(same_bytes(once, vapipe::encode_message(*again, false)), "decode then encode is stable");
  return 0;
}
