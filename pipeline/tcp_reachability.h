// Whether a TCP connection opens to a URI's host and port, and if not, why, in an operator's words:
// for `vapipe validate --open`, for ingest's account of a camera GStreamer cannot read, and before an
// MQTT client's own (blocking) connect, which this bounds by a timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace vapipe {

// The host and port a URI names: "scheme://[user[:password]@]host[:port][/...]", an IPv6 host in
// brackets. Without a port, the scheme's own (http 80, https 443, rtsp and its variants 554, rtsps 322,
// mqtt 1883, mqtts 8883). None for a URI without a host or with a port that is not one, or a scheme
// without a known port.
struct UriAuthority {
  std::string host;
  uint16_t port = 0;
};
std::optional<UriAuthority> uri_authority(std::string_view uri);

// What stops a TCP connection to the URI's host and port, in an operator's words ("cannot connect to
// 10.0.0.5:80: connection refused (...)"); empty when a connection opens within `timeout` (the fault
// is then past connecting) or the URI names no host and port.
std::string tcp_connect_failure(std::string_view uri, std::chrono::milliseconds timeout);

}  // namespace vapipe
