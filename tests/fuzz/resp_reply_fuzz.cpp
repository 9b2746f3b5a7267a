// A Redis server's replies reach publish.redis's client (stages/publish/redis_streams.h) from the
// network: whatever a port answers (a server that is not Redis, a broken one, a proxy) must be taken
// as replies or refused, never crash or hang the sink's thread. And a reply must not depend on how
// the bytes came: fed in pieces (as reads return them) or at once, the replies, and the refusal if
// any, are the same. Input: byte 0 chooses the pieces' size; the rest is what the server sent.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "stages/publish/redis_streams.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

// Every reply the bytes hold, in order, as text; the refusal (if any) last.
std::vector<std::string> replies_of(std::string_view bytes, size_t piece) {
  vapipe::RespReader reader;
  std::vector<std::string> out;
  std::function<std::string(const vapipe::RespReply&)> text = [&](const vapipe::RespReply& r) {
    std::string t = std::to_string(static_cast<int>(r.type)) + ":" + r.text + ":" + std::to_string(r.integer) + "[";
    for (const vapipe::RespReply& e : r.elements) t += text(e) + ",";
    return t + "]";
  };
  for (size_t at = 0; at < bytes.size(); at += piece) {
    reader.feed(bytes.substr(at, piece));
    for (;;) {
      auto r = reader.next();
      if (!r.ok()) {
        out.push_back("refused: " + r.status().message());
        return out;
      }
      if (!*r) break;
      out.push_back(text(**r));
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  // At most 64 pieces: the reader parses a reply again from its start on each piece, as it would on
  // each read of a reply that trickles in.
  const size_t piece = std::max<size_t>(1 + data[0] % 16, bytes.size() / 64 + 1);
  const std::vector<std::string> at_once = replies_of(bytes, bytes.size() + 1);
  const std::vector<std::string> in_pieces = replies_of(bytes, piece);
  VAPIPE_FUZZ_CHECK(at_once == in_pieces, "the replies do not depend on how the bytes came");
  return 0;
}
