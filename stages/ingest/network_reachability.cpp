#include "stages/ingest/network_reachability.h"

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

std::optional<uint16_t> default_port(std::string_view scheme) {
  if (scheme == "http") return 80;
  if (scheme == "https") return 443;
  if (scheme == "rtsp" || scheme == "rtspt" || scheme == "rtspu" || scheme == "rtsph") return 554;
  if (scheme == "rtsps" || scheme == "rtspst" || scheme == "rtspsh") return 322;
  return std::nullopt;
}

// The socket's own closer: every path out of tcp_connect_failure closes it.
struct Socket {
  int fd = -1;
  ~Socket() {
    if (fd >= 0) close(fd);
  }
};

// One address: "" when connected, otherwise why not.
std::string connect_one(const addrinfo& a, std::chrono::milliseconds timeout) {
  Socket s{socket(a.ai_family, a.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a.ai_protocol)};
  if (s.fd < 0) return std::strerror(errno);
  if (connect(s.fd, a.ai_addr, a.ai_addrlen) == 0) return "";
  if (errno != EINPROGRESS) return std::strerror(errno);
  pollfd p{s.fd, POLLOUT, 0};
  const int ready = poll(&p, 1, static_cast<int>(timeout.count()));
  if (ready == 0) return "timeout";
  if (ready < 0) return std::strerror(errno);
  int error = 0;
  socklen_t len = sizeof error;
  if (getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0) return std::strerror(errno);
  return error == 0 ? "" : std::strerror(error);
}

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

std::optional<UriAuthority> uri_authority(std::string_view uri) {
  const std::string scheme = uri_scheme(uri);
  if (scheme.empty()) return std::nullopt;
  std::string_view rest = uri.substr(scheme.size() + 3);
  rest = rest.substr(0, rest.find_first_of("/?#"));
  if (const size_t at = rest.rfind('@'); at != std::string_view::npos) rest = rest.substr(at + 1);
  UriAuthority a;
  std::string_view port;
  if (!rest.empty() && rest.front() == '[') {  // [IPv6]:port
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    a.host = std::string(rest.substr(1, close - 1));
    rest = rest.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return std::nullopt;
    if (!rest.empty()) port = rest.substr(1);
  } else {
    const size_t sep = rest.rfind(':');
    a.host = std::string(rest.substr(0, sep));
    if (sep != std::string_view::npos) port = rest.substr(sep + 1);
  }
  if (a.host.empty()) return std::nullopt;
  if (port.empty()) {
    const auto p = default_port(scheme);
    if (!p) return std::nullopt;
    a.port = *p;
    return a;
  }
  uint32_t value = 0;
  for (char c : port) {
    if (c < '0' || c > '9' || value > 65535) return std::nullopt;
    value = value * 10 + static_cast<uint32_t>(c - '0');
  }
  if (value == 0 || value > 65535) return std::nullopt;
  a.port = static_cast<uint16_t>(value);
  return a;
}

std::string tcp_connect_failure(std::string_view uri, std::chrono::milliseconds timeout) {
  const auto authority = uri_authority(uri);
  if (!authority) return "";
  const bool ipv6 = authority->host.find(':') != std::string::npos;
  const std::string where = (ipv6 ? "[" + authority->host + "]" : authority->host) + ":" + std::to_string(authority->port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(authority->port);
  if (const int rc = getaddrinfo(authority->host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return "cannot connect to " + where + ": the host name '" + authority->host + "' does not resolve (" +
           gai_strerror(rc) + "): check the name in the uri, or this machine's DNS";
  }
  std::string why;
  for (const addrinfo* a = found; a; a = a->ai_next) {
    why = connect_one(*a, timeout);
    if (why.empty()) break;
  }
  freeaddrinfo(found);
  if (why.empty()) return "";
  if (why == "timeout") {
    const std::string within = timeout.count() % 1000 == 0 ? std::to_string(timeout.count() / 1000) + " s"
                                                           : std::to_string(timeout.count()) + " ms";
    return "cannot connect to " + where + ": no answer within " + within +
           " (the camera or server is off or unreachable, or a firewall drops the connection)";
  }
  if (why == std::strerror(ECONNREFUSED)) {
    return "cannot connect to " + where +
           ": connection refused (the host is up but nothing listens at that port: a wrong port, or its server is off)";
  }
  return "cannot connect to " + where + ": " + why;
}

}  // namespace vapipe
