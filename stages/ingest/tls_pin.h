// streams[].tls_fingerprint: a camera's own certificate trusted by its SHA-256 fingerprint, whatever
// name it was made for and whoever signed it (most cameras and NVRs make one for themselves, for a name
// such as "IPC" or their factory address, so tls_ca_file, which checks the name, refuses it). Safer than
// tls_verify: false, which would take any certificate at all.
#pragma once

#include <gio/gio.h>

#include <string>

namespace vapipe {

// A GTlsDatabase for rtspsrc's and souphttpsrc's `tls-database` that accepts a certificate chain whose
// first (the server's own) certificate has `fingerprint` ("AB:CD:...", 32 bytes as SHA-256 gives them)
// and refuses every other as not trusted. A new reference.
GTlsDatabase* pinned_tls_database(const std::string& fingerprint);

// A certificate's SHA-256 fingerprint as `openssl x509 -noout -fingerprint -sha256` writes it
// ("AB:CD:..."); empty if its DER form cannot be read.
std::string certificate_sha256(GTlsCertificate* certificate);

}  // namespace vapipe
