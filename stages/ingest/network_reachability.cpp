#include "stages/ingest/network_reachability.h"

#include <cstdint>
#include <gio/gio.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "pipeline/stream_uri.h"
#include "stages/ingest/tls_pin.h"

namespace vapipe {
namespace {

// A GLib object's owner: unref'd on every path out.
template <typename T>
struct GOwned {
  T* p = nullptr;
  ~GOwned() {
    if (p) g_object_unref(p);
  }
};

// The certificate problems GIO found, in words ("not trusted: ...; issued for another name").
std::string describe_certificate_flags(GTlsCertificateFlags flags, const std::string& host, const std::string& ca_file) {
  std::string what;
  auto add = [&](const std::string& s) { what += (what.empty() ? "" : "; ") + s; };
  if (flags & G_TLS_CERTIFICATE_UNKNOWN_CA) {
    add(ca_file.empty() ? "it is not signed by an authority this machine trusts (a camera's own self-signed certificate is not)"
                        : "neither it nor an authority that signed it is in tls_ca_file " + ca_file);
  }
  if (flags & G_TLS_CERTIFICATE_BAD_IDENTITY) add("it is issued for another name than '" + host + "'");
  if (flags & G_TLS_CERTIFICATE_NOT_ACTIVATED) add("it is not valid yet (check the camera's clock and this machine's)");
  if (flags & G_TLS_CERTIFICATE_EXPIRED) add("it has expired (or a clock is wrong)");
  if (flags & G_TLS_CERTIFICATE_REVOKED) add("it has been revoked");
  if (flags & G_TLS_CERTIFICATE_INSECURE) add("it uses an algorithm considered insecure");
  if (what.empty()) add("it cannot be checked");
  return what;
}

}  // namespace

std::string tls_certificate_failure(std::string_view uri, std::chrono::milliseconds timeout, const SourceTls& trust) {
  const std::string& ca_file = trust.ca_file;
  const auto authority = uri_authority(uri);
  if (!authority) return "";
  const std::string where = authority->host + ":" + std::to_string(authority->port);
  GOwned<GSocketClient> client{g_socket_client_new()};
  g_socket_client_set_timeout(client.p, static_cast<guint>(std::max<int64_t>(1, (timeout.count() + 999) / 1000)));
  GError* error = nullptr;
  GOwned<GSocketConnection> tcp{
      g_socket_client_connect_to_host(client.p, authority->host.c_str(), authority->port, nullptr, &error)};
  if (!tcp.p) {
    g_clear_error(&error);
    return "";
  }
  GOwned<GSocketConnectable> identity{g_network_address_new(authority->host.c_str(), authority->port)};
  GOwned<GIOStream> tls{g_tls_client_connection_new(G_IO_STREAM(tcp.p), identity.p, &error)};
  if (!tls.p) {
    std::string why = "cannot start TLS to " + where + ": " + (error ? error->message : "no TLS support") +
                      " (GLib's TLS support, glib-networking, may be missing)";
    g_clear_error(&error);
    return why;
  }
  if (!trust.fingerprint.empty()) {
    GOwned<GTlsDatabase> pinned{pinned_tls_database(trust.fingerprint)};
    g_tls_connection_set_database(G_TLS_CONNECTION(tls.p), pinned.p);
  } else if (!ca_file.empty()) {
    GOwned<GTlsDatabase> database{g_tls_file_database_new(ca_file.c_str(), &error)};
    if (!database.p) {
      std::string why = "cannot read the certificates of " + ca_file + ": " + (error ? error->message : "unknown error");
      g_clear_error(&error);
      return why;
    }
    g_tls_connection_set_database(G_TLS_CONNECTION(tls.p), database.p);
  }
  struct Seen {
    GTlsCertificateFlags flags = static_cast<GTlsCertificateFlags>(0);
    std::string subject, fingerprint;
  } seen;
  g_signal_connect(tls.p, "accept-certificate",
                   G_CALLBACK(+[](GTlsConnection*, GTlsCertificate* cert, GTlsCertificateFlags errors, gpointer user) {
                     auto* seen = static_cast<Seen*>(user);
                     seen->flags = errors;
                     gchar* subject = nullptr;
                     if (g_object_class_find_property(G_OBJECT_GET_CLASS(cert), "subject-name")) {
                       g_object_get(cert, "subject-name", &subject, nullptr);  // GLib 2.70 on
                     }
                     if (subject) seen->subject = subject;
                     g_free(subject);
                     seen->fingerprint = certificate_sha256(cert);
                     return FALSE;  // refused, as GStreamer refuses it
                   }),
                   &seen);
  const gboolean shaken = g_tls_connection_handshake(G_TLS_CONNECTION(tls.p), nullptr, &error);
  std::string why;
  if (!shaken && seen.flags != 0) {
    std::string about;  // "issued to 'CN=cam', SHA-256 AB:CD:..."
    if (!seen.subject.empty()) about = "issued to '" + seen.subject + "'";
    if (!seen.fingerprint.empty()) about += (about.empty() ? "" : ", ") + std::string("SHA-256 ") + seen.fingerprint;
    why = "its TLS certificate" + (about.empty() ? std::string() : " (" + about + ")") + " is refused: ";
    const std::string pin = seen.fingerprint.empty() ? "tls_fingerprint" : "tls_fingerprint: " + seen.fingerprint;
    if (!trust.fingerprint.empty()) {
      why += "it is not the certificate tls_fingerprint pins (" + trust.fingerprint + "): the camera has a new "
             "certificate (after a reset or an update; pin the new one if so), or this is not the camera";
    } else if (ca_file.empty()) {
      why += describe_certificate_flags(seen.flags, authority->host, ca_file) +
             ": trust it with the stream's tls_ca_file (the camera's certificate, or the authority that signed it), "
             "pin it with " + pin + ", or stop checking it with tls_verify: false";
    } else {
      why += describe_certificate_flags(seen.flags, authority->host, ca_file) +
             ((seen.flags & G_TLS_CERTIFICATE_BAD_IDENTITY)
                  ? " (a camera's certificate made for another name: pin it with " + pin + ")"
                  : "");
    }
  } else if (!shaken) {
    why = "no TLS handshake with " + where + ": " + (error ? error->message : "unknown error") +
          " (does it serve TLS at that port? rtsps:// and https:// need it; rtsp:// and http:// do not)";
  }
  g_clear_error(&error);
  return why;
}

std::string rtsp_answer_meaning(std::string_view error_detail) {
  // rtspsrc's detail: "../gst/rtsp/gstrtspsrc.c(6954): gst_rtspsrc_send (): /GstPipeline:...:\nService
  // Unavailable (503)": its last line is the server's reason phrase and status code.
  std::string_view line = error_detail;
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.remove_suffix(1);
  if (const size_t nl = line.rfind('\n'); nl != std::string_view::npos) line.remove_prefix(nl + 1);
  // "<reason> (<3 digits>)"
  if (line.size() < 7 || line.back() != ')' || line[line.size() - 5] != '(' || line[line.size() - 6] != ' ') return "";
  const std::string_view digits = line.substr(line.size() - 4, 3);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return "";
  const int code = (digits[0] - '0') * 100 + (digits[1] - '0') * 10 + (digits[2] - '0');
  if (code < 300 || code > 599) return "";
  const std::string answer = "the camera answered " + std::string(digits) + " " + std::string(line.substr(0, line.size() - 6));
  switch (code) {
    case 503:
    case 453:
      return answer + ": it serves no more streams now (cameras allow a few viewers at once, and some a total "
                      "bitrate: close another viewer or recorder of it, or use its sub-stream), or its stream is not "
                      "ready";
    case 403:
      return answer + ": the user in the uri may not view this stream (that user's rights on the camera), or "
                      "the camera refuses this machine's address";
    case 400:
      return answer + ": it did not understand the request (check the path and query in the uri against the "
                      "camera's manual; `vapipe discover` asks an ONVIF camera for its stream URIs)";
    case 461:
      return answer + ": it refuses the RTP transport asked for (rtspt:// asks for TCP only: try rtsp://)";
    case 454:
      return answer + ": its session ended (the camera restarted, or let it time out)";
    default:
      return answer;
  }
}

}  // namespace vapipe
