// Whether a video file ends where its container says it should: a recording that did not finish (a
// recorder that lost power, an export stopped halfway) or a copy cut short is still playable up to
// its cut, and a decoder simply meets an early end of stream there. Read from the container's own
// sizes, without decoding: the top-level boxes of MP4/QuickTime, Matroska's segment, AVI's RIFF
// chunks, MPEG-TS's packets.
#pragma once

#include <cstdint>
#include <string>

namespace vapipe {

struct ContainerEnd {
  std::string container;  // "MP4", "Matroska", "AVI", "MPEG-TS"; empty when not one of these
  // Why the file ends early ("it ends 27,704 bytes into its 'mdat' box of 55,010 bytes"), empty when
  // its structure is whole or cannot tell.
  std::string cut_short;
  // An MP4/QuickTime file without its index ('moov', or fragments' 'moof'): written last by a
  // recorder, so a recording that never finished lacks it, and nothing in the file can be decoded.
  bool missing_index = false;
  // A Matroska/WebM file whose segment info has no Duration (written to a pipe or by a live recorder
  // that never came back to it): GStreamer's demuxer then guesses one (a 4.0 s file said 3.0 s, so
  // media_s and a progress's rate were off, found 2026-12-07); the duration is unknown.
  bool duration_unknown = false;
};

// Reads at most a few headers per top-level element (a fragmented MP4 has one pair a fragment).
ContainerEnd check_container_end(const std::string& path);

// The words for a stream's end or error: "the file is cut short: ..." or, for an MP4 without its
// index, what that means and what can be done; empty when the file is whole or the container is
// unknown.
std::string describe_container_end(const ContainerEnd& end);

// A recorder's own format that GStreamer has no demuxer for, told by its first bytes, and how to get
// a video out of it: a Dahua DAV file ('DHAV' frames). Empty for anything else.
std::string unreadable_recording(const std::string& path);

// For a file GStreamer could not identify: what it starts with ("a Hikvision recording with its own
// header ('IMKH')", or its first bytes as text: "its first bytes are \"%PDF-1.7\""); empty when it cannot
// be read.
std::string describe_unidentified_file(const std::string& path);

}  // namespace vapipe
