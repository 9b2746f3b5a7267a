#include "stages/publish/tls_certificate.h"

#include <cstdint>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "pipeline/file_identity.h"
#include "pipeline/logging.h"

namespace vapipe {

struct TlsCertificateFiles::Pair {
  X509* leaf = nullptr;
  STACK_OF(X509)* chain = nullptr;
  EVP_PKEY* key = nullptr;
  X509_STORE* client_cas = nullptr;             // null: no client certificate asked for
  STACK_OF(X509_NAME)* client_ca_names = nullptr;  // what the server says it accepts
  int64_t not_after = 0;
  std::string subject;
  Pair() = default;
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;
  ~Pair() {
    X509_free(leaf);
    if (chain) sk_X509_pop_free(chain, X509_free);
    EVP_PKEY_free(key);
    X509_STORE_free(client_cas);
    if (client_ca_names) sk_X509_NAME_pop_free(client_ca_names, X509_NAME_free);
  }
};

namespace {

// An encrypted key must not make OpenSSL ask for a password on the terminal: it fails instead.
int no_password(char*, int, int, void*) { return 0; }

std::string openssl_reason() {
  const unsigned long e = ERR_peek_last_error();
  std::string reason = "unknown reason";
  if (e != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    reason = buf;
  }
  ERR_clear_error();
  return reason;
}

Result<std::string> read_file(const std::string& key, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument(key + " " + path + ": cannot read it (" + std::strerror(errno) + ")");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
using Bio = std::unique_ptr<BIO, BioDeleter>;

Bio memory_bio(const std::string& text) { return Bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size()))); }

std::string utc_text(int64_t unix_s) {
  const std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

Result<std::shared_ptr<TlsCertificateFiles::Pair>> read_pair(const std::string& cert_file, const std::string& key_file,
                                                              const std::string& client_ca_file) {
  const std::string cert_key = "publish.metrics_tls_cert_file", key_key = "publish.metrics_tls_key_file";
  ERR_clear_error();
  VAPIPE_ASSIGN_OR_RETURN(const std::string cert_text, read_file(cert_key, cert_file));
  VAPIPE_ASSIGN_OR_RETURN(const std::string key_text, read_file(key_key, key_file));
  auto pair = std::make_shared<TlsCertificateFiles::Pair>();
  Bio certs = memory_bio(cert_text);
  pair->leaf = certs ? PEM_read_bio_X509(certs.get(), nullptr, no_password, nullptr) : nullptr;
  if (!pair->leaf) {
    return InvalidArgument(cert_key + " " + cert_file + ": no PEM certificate in it (" + openssl_reason() + ")");
  }
  pair->chain = sk_X509_new_null();
  while (X509* next = PEM_read_bio_X509(certs.get(), nullptr, no_password, nullptr)) sk_X509_push(pair->chain, next);
  ERR_clear_error();  // the end of the file reads as an error
  Bio key = memory_bio(key_text);
  pair->key = key ? PEM_read_bio_PrivateKey(key.get(), nullptr, no_password, nullptr) : nullptr;
  if (!pair->key) {
    return InvalidArgument(key_key + " " + key_file + ": no unencrypted PEM private key in it (" + openssl_reason() +
                           ")");
  }
  if (X509_check_private_key(pair->leaf, pair->key) != 1) {
    ERR_clear_error();
    return InvalidArgument(key_key + " " + key_file + " is not the key of the certificate in " + cert_key + " " +
                           cert_file);
  }
  if (!client_ca_file.empty()) {
    const std::string ca_key = "publish.metrics_tls_client_ca_file";
    VAPIPE_ASSIGN_OR_RETURN(const std::string ca_text, read_file(ca_key, client_ca_file));
    pair->client_cas = X509_STORE_new();
    pair->client_ca_names = sk_X509_NAME_new_null();
    Bio cas = memory_bio(ca_text);
    while (X509* ca = cas ? PEM_read_bio_X509(cas.get(), nullptr, no_password, nullptr) : nullptr) {
      X509_STORE_add_cert(pair->client_cas, ca);  // takes its own reference
      if (X509_NAME* name = X509_NAME_dup(X509_get_subject_name(ca))) sk_X509_NAME_push(pair->client_ca_names, name);
      X509_free(ca);
    }
    ERR_clear_error();
    if (sk_X509_NAME_num(pair->client_ca_names) == 0) {
      return InvalidArgument(ca_key + " " + client_ca_file + ": no PEM certificate in it");
    }
  }
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(pair->leaf), &tm) == 1) pair->not_after = static_cast<int64_t>(timegm(&tm));
  char subject[256];
  X509_NAME_oneline(X509_get_subject_name(pair->leaf), subject, sizeof subject);
  pair->subject = subject;
  return pair;
}

std::string describe(const TlsCertificateFiles::Pair& pair) {
  const bool expired = pair.not_after <= static_cast<int64_t>(std::time(nullptr));
  return pair.subject + ", " + (expired ? "EXPIRED on " : "valid until ") + utc_text(pair.not_after) +
         (pair.chain && sk_X509_num(pair.chain) > 0
              ? ", followed by " + std::to_string(sk_X509_num(pair.chain)) + " certificate(s) of its chain"
              : "") +
         (pair.client_ca_names
              ? "; clients need a certificate signed by one of " + std::to_string(sk_X509_NAME_num(pair.client_ca_names)) +
                    " CA(s)"
              : "");
}

}  // namespace

Result<std::unique_ptr<TlsCertificateFiles>> TlsCertificateFiles::load(const std::string& cert_file,
                                                                     const std::string& key_file,
                                                                     const std::string& client_ca_file) {
  std::unique_ptr<TlsCertificateFiles> files(new TlsCertificateFiles(cert_file, key_file, client_ca_file));
  // Looked at before reading: a change while it reads is seen by the next connection.
  files->seen_ = files->files_identity();
  VAPIPE_ASSIGN_OR_RETURN(files->current_, read_pair(cert_file, key_file, client_ca_file));
  VAPIPE_LOG_INFO("publish: metrics TLS certificate {} ({}); its files are re-read when they change", cert_file,
                  describe(*files->current_));
  if (files->current_->not_after <= static_cast<int64_t>(std::time(nullptr))) {
    VAPIPE_LOG_WARN("publish: the metrics TLS certificate {} has expired: clients will refuse it", cert_file);
  }
  return files;
}

TlsCertificateFiles::~TlsCertificateFiles() = default;

std::string TlsCertificateFiles::files_identity() const {
  return file_identity(cert_file_) + "|" + file_identity(key_file_) +
         (client_ca_file_.empty() ? "" : "|" + file_identity(client_ca_file_));
}

void TlsCertificateFiles::refresh() {
  const std::string now = files_identity();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (now == seen_) return;
    seen_ = now;  // one re-read per change, whichever connection saw it first
  }
  auto loaded = read_pair(cert_file_, key_file_, client_ca_file_);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!loaded.ok()) {
    ++failed_reloads_;
    VAPIPE_LOG_ERROR("publish: the metrics TLS files changed but do not load: {}; HTTPS goes on with the "
                     "certificate loaded before ({}) until they do",
                     loaded.status().message(), describe(*current_));
    return;
  }
  current_ = std::move(loaded).value();
  ++reloads_;
  VAPIPE_LOG_INFO("publish: metrics TLS certificate re-read from {} ({}); new connections get it", cert_file_,
                  describe(*current_));
}

std::shared_ptr<const TlsCertificateFiles::Pair> TlsCertificateFiles::current() {
  std::lock_guard<std::mutex> lock(mutex_);
  return current_;
}

int TlsCertificateFiles::on_handshake(ssl_st* ssl, void* self_ptr) {
  auto* self = static_cast<TlsCertificateFiles*>(self_ptr);
  self->refresh();
  const std::shared_ptr<const Pair> pair = self->current();
  // The context's own certificate goes first: a renewed one of another key type (RSA after EC) would
  // otherwise sit beside it, and the client's algorithms would pick which of the two it gets.
  SSL_certs_clear(ssl);
  bool ok = SSL_use_certificate(ssl, pair->leaf) == 1 && SSL_use_PrivateKey(ssl, pair->key) == 1 &&
            SSL_set1_chain(ssl, pair->chain) == 1;
  if (ok && pair->client_cas) {
    // The client's certificate is checked against these CAs alone (not the system's).
    SSL_set_verify(ssl, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    ok = SSL_set1_verify_cert_store(ssl, pair->client_cas) == 1;
    if (ok) SSL_set_client_CA_list(ssl, SSL_dup_CA_list(pair->client_ca_names));
  }
  if (!ok) ERR_clear_error();
  return ok ? 1 : 0;  // 0 fails this handshake alone
}

void TlsCertificateFiles::serve_from(ssl_ctx_st* ctx) { SSL_CTX_set_cert_cb(ctx, &TlsCertificateFiles::on_handshake, this); }

int64_t TlsCertificateFiles::not_after_unix() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return current_->not_after;
}

uint64_t TlsCertificateFiles::reloads() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reloads_;
}

uint64_t TlsCertificateFiles::failed_reloads() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failed_reloads_;
}

std::string TlsCertificateFiles::prometheus_text() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return "# HELP vapipe_metrics_tls_not_after_timestamp_seconds When the certificate this endpoint serves "
         "expires (its notAfter, seconds since 1970).\n"
         "# TYPE vapipe_metrics_tls_not_after_timestamp_seconds gauge\n"
         "vapipe_metrics_tls_not_after_timestamp_seconds " +
         std::to_string(current_->not_after) +
         "\n# HELP vapipe_metrics_tls_reloads_total Re-reads of the certificate and key files after they "
         "changed, by result (failed: the previous certificate goes on serving).\n"
         "# TYPE vapipe_metrics_tls_reloads_total counter\n"
         "vapipe_metrics_tls_reloads_total{result=\"ok\"} " +
         std::to_string(reloads_) + "\nvapipe_metrics_tls_reloads_total{result=\"failed\"} " +
         std::to_string(failed_reloads_) + "\n";
}

}  // namespace vapipe
