// HLS sources (http(s)://.../live.m3u8), and DASH's (.mpd), whether a recording: what their playlist offers, to tell a live stream whose
// encoder stopped from one that has new segments. uridecodebin reads HLS through hlsdemux, which
// starts a live playlist a few segments before its end: a stream reconnected after a stall would play
// the stale playlist's last segments again (4 s of old video, as new results, every ~11 s for as long
// as the encoder stays down). So a stalled HLS stream is reconnected only once its playlist changed.
#pragma once

#include <gst/gst.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/status.h"

namespace vapipe {

// An HLS multivariant ("master") playlist: it lists media playlists (#EXT-X-STREAM-INF), not segments.
bool hls_is_master_playlist(std::string_view text);
// The media playlists a multivariant playlist lists, resolved against `base_uri` (its own URI).
std::vector<std::string> hls_variant_uris(std::string_view text, const std::string& base_uri);
// The playlist says it will get no more segments (#EXT-X-ENDLIST: a recording, or a live event that ended).
bool hls_playlist_ended(std::string_view text);

// A recording (#EXT-X-PLAYLIST-TYPE:VOD: the playlist never changes), of `state` (hls_playlist_state's:
// one media playlist, or several one after the other): each of them says so.
bool hls_playlist_is_recording(std::string_view state);

// A DASH manifest (.mpd) of a presentation whose segments are all there (MPD@type "static", its
// default: a recording), not a live one ("dynamic").
bool dash_manifest_is_static(std::string_view mpd);

// Sets up the souphttpsrc that fetches (the stream's TLS trust, as its own source gets it).
using HttpSourceSetup = std::function<void(GstElement* souphttpsrc)>;

// The body of one http(s) resource, read with GStreamer's souphttpsrc as the stream's own source reads
// it (credentials in the URI, TLS): at most `max_bytes`, within `timeout`. An error says why not.
Result<std::string> fetch_http_body(const std::string& uri, const HttpSourceSetup& setup,
                                    std::chrono::milliseconds timeout, size_t max_bytes = 1 << 20);

// A playlist less what changes at each fetch when no segment came: the query strings of its URIs (a
// CDN's signed segment URLs and tokens), of segments, variants and tags' URI attributes alike.
std::string hls_without_query_strings(std::string_view text);

// What an HLS source offers now: the text of its media playlist, or of each media playlist a
// multivariant playlist lists (at most 8), one after the other, less their URIs' query strings. Two
// states alike: no new segment came.
// nullopt: it could not be fetched (the caller then reconnects as for any source).
std::optional<std::string> hls_playlist_state(const std::string& uri, const HttpSourceSetup& setup,
                                              std::chrono::milliseconds timeout);

}  // namespace vapipe
