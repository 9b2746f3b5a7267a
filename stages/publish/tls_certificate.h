// The metrics endpoint's TLS certificate and key (publish.metrics_tls_cert_file, metrics_tls_key_file),
// re-read when their files change, so that a certificate renewed on disk (cert-manager, certbot, a
// Kubernetes Secret) is served without restarting a live job. Each new HTTPS connection looks at the
// two files (stat only) and takes the newest pair that loaded; a pair that does not load (half
// written, a key that does not match) is logged once and the previous one goes on serving. With a
// client CA file (publish.metrics_tls_client_ca_file), clients must present a certificate that one of
// its CAs signed (mutual TLS); that file is re-read the same way.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "pipeline/status.h"

struct ssl_st;      // OpenSSL's SSL: no OpenSSL header here
struct ssl_ctx_st;  // SSL_CTX

namespace vapipe {

class TlsCertificateFiles {
 public:
  // Reads the PEM files: the certificate first in its file, then the chain that follows it; an
  // unencrypted private key that matches it; the client CAs, if any. An error names the file and what
  // is wrong.
  static Result<std::unique_ptr<TlsCertificateFiles>> load(const std::string& cert_file, const std::string& key_file,
                                                           const std::string& client_ca_file = "");
  ~TlsCertificateFiles();
  TlsCertificateFiles(const TlsCertificateFiles&) = delete;
  TlsCertificateFiles& operator=(const TlsCertificateFiles&) = delete;

  // Every connection of `ctx` gets the current pair (and client CAs) as its handshake begins
  // (SSL_CTX_set_cert_cb); with client CAs, a client without a certificate they signed is refused.
  // This object must outlive `ctx`'s connections.
  void serve_from(ssl_ctx_st* ctx);
  // Re-reads the files if either changed (size, modification time or inode) since the last look.
  void refresh();

  // The current certificate's notAfter (seconds since 1970), and the re-reads so far.
  int64_t not_after_unix() const;
  uint64_t reloads() const;
  uint64_t failed_reloads() const;
  // Prometheus families for the above (vapipe_metrics_tls_...).
  std::string prometheus_text() const;

  struct Pair;  // certificate, chain and key, loaded together

 private:
  TlsCertificateFiles(std::string cert_file, std::string key_file, std::string client_ca_file)
      : cert_file_(std::move(cert_file)), key_file_(std::move(key_file)), client_ca_file_(std::move(client_ca_file)) {}
  std::string files_identity() const;
  static int on_handshake(ssl_st* ssl, void* self);
  std::shared_ptr<const Pair> current();

  const std::string cert_file_, key_file_, client_ca_file_;
  mutable std::mutex mutex_;
  std::shared_ptr<const Pair> current_;
  std::string seen_;  // the files' identity when last looked at (loaded, or failed to)
  uint64_t reloads_ = 0, failed_reloads_ = 0;
};

}  // namespace vapipe
