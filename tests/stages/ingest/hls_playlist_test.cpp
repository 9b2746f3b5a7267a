#include "stages/ingest/hls_playlist.h"

#include <gst/gst.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace vapipe {
namespace {

// Playlists read as text: a multivariant one and its variants (relative, absolute, with CRLF), an ended one.
TEST(HlsPlaylist, TellsAMultivariantPlaylistItsVariantsAndAnEndedOne) {
  const std::string master =
      "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=800000,RESOLUTION=640x360\r\nlow/index.m3u8\r\n"
      "#EXT-X-STREAM-INF:BANDWIDTH=2000000\n  https://cdn.example/hi.m3u8?token=a  \n";
  EXPECT_TRUE(hls_is_master_playlist(master));
  EXPECT_EQ(hls_variant_uris(master, "http://cam.lan:8080/live/main.m3u8"),
            (std::vector<std::string>{"http://cam.lan:8080/live/low/index.m3u8", "https://cdn.example/hi.m3u8?token=a"}));
  const std::string media = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\nseg1.ts\n";
  EXPECT_FALSE(hls_is_master_playlist(media));
  EXPECT_TRUE(hls_variant_uris(media, "http://x/a.m3u8").empty());
  EXPECT_FALSE(hls_playlist_ended(media));
  EXPECT_TRUE(hls_playlist_ended(media + "#EXT-X-ENDLIST\r\n"));
  // A recording: each media playlist of the state says VOD.
  const std::string vod = "#EXTM3U\r\n#EXT-X-PLAYLIST-TYPE:VOD\r\n#EXTINF:2,\nseg1.ts\n#EXT-X-ENDLIST\n";
  EXPECT_TRUE(hls_playlist_is_recording(vod));
  EXPECT_TRUE(hls_playlist_is_recording(vod + vod));
  EXPECT_FALSE(hls_playlist_is_recording(vod + media)) << "one variant is live";
  EXPECT_FALSE(hls_playlist_is_recording(media + "#EXT-X-ENDLIST\n")) << "ended, not said to be a recording";
  EXPECT_FALSE(hls_playlist_is_recording("#EXTM3U\n#EXT-X-PLAYLIST-TYPE:EVENT\n"));
  EXPECT_FALSE(hls_playlist_is_recording(""));
}

// What a CDN signs anew at each fetch goes: a segment's, a variant's and a key's query strings.
TEST(HlsPlaylist, WithoutQueryStringsASignedPlaylistIsTheSameAtEachFetch) {
  EXPECT_EQ(hls_without_query_strings("#EXTM3U\r\n#EXT-X-MEDIA-SEQUENCE:7\n"
                                      "#EXT-X-KEY:METHOD=AES-128,URI=\"https://k.example/key?token=abc\",IV=0x1\n"
                                      "#EXTINF:2.0,\nseg7.ts?Expires=1&Signature=x#frag\n  seg8.ts  \n"),
            "#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:7\n#EXT-X-KEY:METHOD=AES-128,URI=\"https://k.example/key\",IV=0x1\n"
            "#EXTINF:2.0,\nseg7.ts\nseg8.ts\n");
  EXPECT_TRUE(hls_playlist_ended(hls_without_query_strings("#EXTM3U\n#EXTINF:1,\na.ts?x=1\n#EXT-X-ENDLIST\n")));
}

// A DASH manifest's type: "static" or none (the default) is a recording; "dynamic" is live.
TEST(DashManifest, IsStaticUnlessItsTypeSaysDynamic) {
  EXPECT_TRUE(dash_manifest_is_static(R"(<?xml version="1.0"?><MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT5S"><Period/></MPD>)"));
  EXPECT_TRUE(dash_manifest_is_static(R"(<MPD profiles="urn:mpeg:dash:profile:isoff-live:2011" minBufferTime="PT2S">)")) << "no type";
  EXPECT_FALSE(dash_manifest_is_static(R"(<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="dynamic" availabilityStartTime="2026-12-05T00:00:00Z">)"));
  EXPECT_FALSE(dash_manifest_is_static("<MPD\n  type = 'dynamic'\n  minimumUpdatePeriod=\"PT2S\">"));
  EXPECT_TRUE(dash_manifest_is_static(R"(<MPD mimeType="dynamic">)")) << "another attribute's value";
  EXPECT_FALSE(dash_manifest_is_static("not a manifest"));
}

// The state of a playlist is fetched as the stream's source fetches it; a multivariant playlist's is its
// media playlists'; a fetch that fails says why and gives no state.
TEST(HlsPlaylist, ItsStateIsItsMediaPlaylistsTextFetchedFromARealServer) {
  gst_init(nullptr, nullptr);
  std::mutex m;
  std::string low = "#EXTM3U\n#EXTINF:1,\na.ts\n";
  int fetches = 0;  // each answer signs its URIs anew, as a CDN's tokens do
  httplib::Server http;
  http.set_keep_alive_timeout(0);
  http.Get("/main.m3u8", [&](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(m);
    res.set_content("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\nlow.m3u8?token=" + std::to_string(++fetches) + "\n",
                    "application/vnd.apple.mpegurl");
  });
  http.Get("/low.m3u8", [&](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(m);
    std::string signed_low;
    for (size_t at = 0, nl; (nl = low.find('\n', at)) != std::string::npos; at = nl + 1) {
      const std::string line = low.substr(at, nl - at);
      signed_low += line + (line.empty() || line[0] == '#' ? "" : "?sig=" + std::to_string(fetches)) + "\n";
    }
    res.set_content(signed_low, "application/vnd.apple.mpegurl");
  });
  const int port = http.bind_to_any_port("127.0.0.1");
  std::thread serve([&] { http.listen_after_bind(); });
  const std::string base = "http://127.0.0.1:" + std::to_string(port);
  Result<std::string> body = fetch_http_body(base + "/low.m3u8", nullptr, std::chrono::seconds(3));
  ASSERT_TRUE(body.ok()) << body.status().message();
  EXPECT_EQ(body->rfind("#EXTM3U\n#EXTINF:1,\na.ts?sig=", 0), 0u) << *body;
  const std::optional<std::string> first = hls_playlist_state(base + "/main.m3u8", nullptr, std::chrono::seconds(3));
  ASSERT_TRUE(first.has_value());
  EXPECT_NE(first->find("a.ts"), std::string::npos);
  EXPECT_EQ(hls_playlist_state(base + "/main.m3u8", nullptr, std::chrono::seconds(3)), first)
      << "signed anew, with no new segment: the same state";
  {
    std::lock_guard<std::mutex> lock(m);
    low += "#EXTINF:1,\nb.ts\n";
  }
  EXPECT_NE(hls_playlist_state(base + "/main.m3u8", nullptr, std::chrono::seconds(3)), first);
  Result<std::string> missing = fetch_http_body(base + "/none.m3u8", nullptr, std::chrono::seconds(3));
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("Not Found"), std::string::npos) << missing.status().message();
  http.stop();
  serve.join();
  EXPECT_FALSE(hls_playlist_state(base + "/main.m3u8", nullptr, std::chrono::seconds(2)).has_value());
}

}  // namespace
}  // namespace vapipe
