// HLS playlists and DASH manifests come from a server on the network: whatever their text, reading
// them gives an answer, never a crash. The variants a multivariant playlist lists are at most its lines;
// a playlist less its query strings is no longer than it (a line more for a last line with no newline).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "stages/ingest/hls_playlist.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  size_t lines = 1;
  for (char c : text) lines += c == '\n' ? 1 : 0;
  (void)vapipe::hls_is_master_playlist(text);
  VAPIPE_FUZZ_CHECK(vapipe::hls_variant_uris(text, "https://cdn.example.com/live/master.m3u8?token=1").size() < lines,
                    "no more variants than lines");
  (void)vapipe::hls_variant_uris(text, "");
  (void)vapipe::hls_playlist_ended(text);
  (void)vapipe::hls_playlist_is_recording(text);
  (void)vapipe::dash_manifest_is_static(text);
  VAPIPE_FUZZ_CHECK(vapipe::hls_without_query_strings(text).size() <= size + 1, "a playlist less its query strings is no longer");
  return 0;
}
