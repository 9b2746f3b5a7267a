// Why a network source could not be read when GStreamer does not say: souphttpsrc (GStreamer 1.22,
// libsoup 3) posts only "Internal data stream error" when it cannot connect, and rtspsrc "Could not
// open resource for reading and writing" whether nothing listens or the camera's TLS certificate was
// refused; the reason stays in their debug logs. A TCP connection of our own (and a TLS handshake,
// for rtsps:// and https://) tells the operator which of the usual faults it is.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "pipeline/config.h"
#include "pipeline/tcp_reachability.h"

namespace vapipe {

// What is wrong with the TLS certificate the URI's host shows (a camera's self-signed one, one issued
// for another name, an expired one), checked as the stream's `tls` says (its tls_fingerprint, or its
// tls_ca_file, or this machine's trusted authorities), as GStreamer checks it, with what to set and
// the certificate's fingerprint to pin it by: "its TLS certificate (issued to 'CN=cam-01', SHA-256
// AB:CD:...) is refused: ...". Also a TLS handshake that fails for another reason. Empty when the
// certificate passes, or when no connection opens (tcp_connect_failure says why).
std::string tls_certificate_failure(std::string_view uri, std::chrono::milliseconds timeout, const SourceTls& tls);

// What an RTSP server's error answer means for its stream, from the detail GStreamer's rtspsrc posts
// with an error it has no word of its own for ("Unhandled error", its detail ending in the server's
// "Service Unavailable (503)"): a camera at its limit of viewers (503, 453), a user it refuses the
// stream (403), ... Empty when the detail names no RTSP status.
std::string rtsp_answer_meaning(std::string_view error_detail);

}  // namespace vapipe
