#include "stages/ingest/tls_pin.h"

#include <cctype>
#include <cstring>

namespace vapipe {

std::string certificate_sha256(GTlsCertificate* certificate) {
  GByteArray* der = nullptr;
  g_object_get(certificate, "certificate", &der, nullptr);
  if (!der) return "";
  gchar* hex = g_compute_checksum_for_data(G_CHECKSUM_SHA256, der->data, der->len);
  g_byte_array_unref(der);
  std::string text;
  for (size_t i = 0; hex && hex[i]; ++i) {
    if (i > 0 && i % 2 == 0) text += ':';
    text += static_cast<char>(std::toupper(static_cast<unsigned char>(hex[i])));
  }
  g_free(hex);
  return text;
}

}  // namespace vapipe

// The database: a GObject subclass of GTlsDatabase with the fingerprint it accepts.
extern "C" {

struct VapipePinnedDatabase {
  GTlsDatabase parent;
  char fingerprint[3 * 32];  // "AB:CD:...:EF" and its terminating zero
};
struct VapipePinnedDatabaseClass {
  GTlsDatabaseClass parent_class;
};

G_DEFINE_TYPE(VapipePinnedDatabase, vapipe_pinned_database, G_TYPE_TLS_DATABASE)

static GTlsCertificateFlags vapipe_pinned_database_verify_chain(GTlsDatabase* self, GTlsCertificate* chain,
                                                                 const gchar*, GSocketConnectable*, GTlsInteraction*,
                                                                 GTlsDatabaseVerifyFlags, GCancellable*, GError**) {
  const auto* pinned = reinterpret_cast<VapipePinnedDatabase*>(self);
  // The chain's first certificate is the server's own: its name and issuer are not asked about.
  return vapipe::certificate_sha256(chain) == pinned->fingerprint ? static_cast<GTlsCertificateFlags>(0)
                                                                   : G_TLS_CERTIFICATE_UNKNOWN_CA;
}

// Lookups find nothing: the pinned certificate is the whole of what this database trusts.
static GTlsCertificate* vapipe_pinned_database_lookup_issuer(GTlsDatabase*, GTlsCertificate*, GTlsInteraction*,
                                                            GTlsDatabaseLookupFlags, GCancellable*, GError**) {
  return nullptr;
}
static GList* vapipe_pinned_database_lookup_issued_by(GTlsDatabase*, GByteArray*, GTlsInteraction*,
                                                      GTlsDatabaseLookupFlags, GCancellable*, GError**) {
  return nullptr;
}
static gchar* vapipe_pinned_database_create_handle(GTlsDatabase*, GTlsCertificate*) { return nullptr; }
static GTlsCertificate* vapipe_pinned_database_lookup_for_handle(GTlsDatabase*, const gchar*, GTlsInteraction*,
                                                                GTlsDatabaseLookupFlags, GCancellable*, GError**) {
  return nullptr;
}

static void vapipe_pinned_database_class_init(VapipePinnedDatabaseClass* klass) {
  GTlsDatabaseClass* database = G_TLS_DATABASE_CLASS(klass);
  database->verify_chain = vapipe_pinned_database_verify_chain;
  database->lookup_certificate_issuer = vapipe_pinned_database_lookup_issuer;
  database->lookup_certificates_issued_by = vapipe_pinned_database_lookup_issued_by;
  database->create_certificate_handle = vapipe_pinned_database_create_handle;
  database->lookup_certificate_for_handle = vapipe_pinned_database_lookup_for_handle;
}

static void vapipe_pinned_database_init(VapipePinnedDatabase* self) { self->fingerprint[0] = '\0'; }

}  // extern "C"

namespace vapipe {

GTlsDatabase* pinned_tls_database(const std::string& fingerprint) {
  auto* database = static_cast<VapipePinnedDatabase*>(g_object_new(vapipe_pinned_database_get_type(), nullptr));
  g_strlcpy(database->fingerprint, fingerprint.c_str(), sizeof database->fingerprint);
  return G_TLS_DATABASE(database);
}

}  // namespace vapipe
