#include "stages/publish/tls_certificate.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "stages/publish/metrics_server.h"

namespace vapipe {
namespace {

namespace fs = std::filesystem;

const std::string kTlsDir = std::string(VAPIPE_SOURCE_DIR) + "/tests/media/tls/";
const std::string kFirstCert = kTlsDir + "metrics-test.crt", kFirstKey = kTlsDir + "metrics-test.key";
const std::string kRenewedCert = kTlsDir + "metrics-test-renewed.crt", kRenewedKey = kTlsDir + "metrics-test-renewed.key";

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Rewrites a file in place, as `cp` or a renewal script does (same inode, new size and times).
void overwrite(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

class TlsCertificateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("vapipe-tls-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    cert_ = (dir_ / "tls.crt").string();
    key_ = (dir_ / "tls.key").string();
    overwrite(cert_, read_text(kFirstCert));
    overwrite(key_, read_text(kFirstKey));
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Whether a fresh HTTPS connection that trusts only `ca_file` gets /healthz.
  static bool trusted_by(const MetricsServer& server, const std::string& ca_file) {
    httplib::SSLClient client("127.0.0.1", server.port());
    client.set_ca_cert_path(ca_file.c_str());
    client.enable_server_certificate_verification(true);
    client.set_connection_timeout(5);
    auto res = client.Get("/healthz");
    return res && res->status == 200;
  }
  static std::string metrics(const MetricsServer& server, const std::string& ca_file) {
    httplib::SSLClient client("127.0.0.1", server.port());
    client.set_ca_cert_path(ca_file.c_str());
    client.enable_server_certificate_verification(true);
    auto res = client.Get("/metrics");
    return res ? res->body : "(no answer: " + httplib::to_string(res.error()) + ")";
  }

  fs::path dir_;
  std::string cert_, key_;
};

// A certificate renewed on disk is served to the next connection, without a restart; files caught
// half way (a new certificate beside the old key) or broken keep the previous pair serving.
TEST_F(TlsCertificateTest, ARenewedCertificateIsServedWithoutARestartAndABrokenOneKeepsThePrevious) {
  auto server = MetricsServer::start("127.0.0.1:0", nullptr, "", MetricsTls{cert_, key_});
  ASSERT_TRUE(server.ok()) << server.status().message();
  MetricsServer& s = **server;
  ASSERT_NE(s.tls_certificate(), nullptr);
  s.update("vapipe_job_info 1\n", R"({"status":"ok"})");
  EXPECT_TRUE(trusted_by(s, kFirstCert));
  EXPECT_FALSE(trusted_by(s, kRenewedCert));
  auto first = TlsCertificateFiles::load(kFirstCert, kFirstKey);
  ASSERT_TRUE(first.ok()) << first.status().message();
  const std::string text = metrics(s, kFirstCert);
  EXPECT_EQ(text.rfind("vapipe_job_info 1\n", 0), 0u) << text;
  EXPECT_NE(text.find("vapipe_metrics_tls_not_after_timestamp_seconds " + std::to_string((*first)->not_after_unix()) + "\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("vapipe_metrics_tls_reloads_total{result=\"ok\"} 0\n"), std::string::npos) << text;

  // The new certificate is written, its key not yet: they do not match, the old pair serves.
  overwrite(cert_, read_text(kRenewedCert));
  EXPECT_TRUE(trusted_by(s, kFirstCert));
  EXPECT_EQ(s.tls_certificate()->failed_reloads(), 1u);
  EXPECT_EQ(s.tls_certificate()->reloads(), 0u);
  EXPECT_TRUE(trusted_by(s, kFirstCert));  // the same files are not read again
  EXPECT_EQ(s.tls_certificate()->failed_reloads(), 1u);

  // Then the key: the renewed certificate (an RSA key after an EC one) is what clients get now.
  overwrite(key_, read_text(kRenewedKey));
  EXPECT_TRUE(trusted_by(s, kRenewedCert));
  EXPECT_FALSE(trusted_by(s, kFirstCert));
  EXPECT_EQ(s.tls_certificate()->reloads(), 1u);
  auto renewed = TlsCertificateFiles::load(kRenewedCert, kRenewedKey);
  ASSERT_TRUE(renewed.ok()) << renewed.status().message();
  EXPECT_EQ(s.tls_certificate()->not_after_unix(), (*renewed)->not_after_unix());

  // A certificate file that is not PEM, then one that is gone: the renewed pair goes on.
  overwrite(cert_, "not a certificate\n");
  EXPECT_TRUE(trusted_by(s, kRenewedCert));
  fs::remove(cert_);
  EXPECT_TRUE(trusted_by(s, kRenewedCert));
  EXPECT_EQ(s.tls_certificate()->failed_reloads(), 3u);
  const std::string after = metrics(s, kRenewedCert);
  EXPECT_NE(after.find("vapipe_metrics_tls_reloads_total{result=\"ok\"} 1\n"), std::string::npos) << after;
  EXPECT_NE(after.find("vapipe_metrics_tls_reloads_total{result=\"failed\"} 3\n"), std::string::npos) << after;

  // A Kubernetes Secret swaps a symlink to a new folder: the first pair again, through links.
  fs::create_directories(dir_ / "v2");
  overwrite((dir_ / "v2" / "tls.crt").string(), read_text(kFirstCert));
  overwrite((dir_ / "v2" / "tls.key").string(), read_text(kFirstKey));
  fs::remove(key_);
  fs::create_symlink(dir_ / "v2" / "tls.crt", cert_);
  fs::create_symlink(dir_ / "v2" / "tls.key", key_);
  EXPECT_TRUE(trusted_by(s, kFirstCert));
  EXPECT_EQ(s.tls_certificate()->reloads(), 2u);
}

TEST_F(TlsCertificateTest, FilesThatDoNotLoadAreErrorsNamingTheKeyAndTheFile) {
  auto missing = TlsCertificateFiles::load(cert_ + ".gone", key_);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("publish.metrics_tls_cert_file " + cert_ + ".gone: cannot read it"),
            std::string::npos) << missing.status().message();

  auto key_as_cert = TlsCertificateFiles::load(key_, key_);
  ASSERT_FALSE(key_as_cert.ok());
  EXPECT_NE(key_as_cert.status().message().find("publish.metrics_tls_cert_file " + key_ + ": no PEM certificate in it"),
            std::string::npos) << key_as_cert.status().message();

  auto cert_as_key = TlsCertificateFiles::load(cert_, cert_);
  ASSERT_FALSE(cert_as_key.ok());
  EXPECT_NE(cert_as_key.status().message().find("publish.metrics_tls_key_file " + cert_ +
                                                ": no unencrypted PEM private key in it"),
            std::string::npos) << cert_as_key.status().message();

  auto other_key = TlsCertificateFiles::load(cert_, kRenewedKey);
  ASSERT_FALSE(other_key.ok());
  EXPECT_NE(other_key.status().message().find("publish.metrics_tls_key_file " + kRenewedKey +
                                              " is not the key of the certificate in publish.metrics_tls_cert_file " +
                                              cert_),
            std::string::npos) << other_key.status().message();

  // The metrics server refuses to start on them, with the same words.
  auto server = MetricsServer::start("127.0.0.1:0", nullptr, "", MetricsTls{cert_, kRenewedKey});
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("is not the key of the certificate"), std::string::npos);
}

// A "fullchain" file (the certificate, then the intermediate CA that signed it): the intermediate is
// sent too, so a client that trusts only the root verifies the server. Without it, it does not.
TEST_F(TlsCertificateTest, TheChainAfterTheCertificateInItsFileIsSentToo) {
  const std::string root = kTlsDir + "chain-root.crt";
  const std::string fullchain = read_text(kTlsDir + "chain-leaf-fullchain.crt");
  const std::string end_marker = "-----END CERTIFICATE-----\n";
  const std::string leaf_alone = fullchain.substr(0, fullchain.find(end_marker) + end_marker.size());
  ASSERT_LT(leaf_alone.size(), fullchain.size());
  overwrite(key_, read_text(kTlsDir + "chain-leaf.key"));
  overwrite(cert_, leaf_alone);
  auto server = MetricsServer::start("127.0.0.1:0", nullptr, "", MetricsTls{cert_, key_});
  ASSERT_TRUE(server.ok()) << server.status().message();
  EXPECT_FALSE(trusted_by(**server, root));  // the client cannot link the leaf to its root
  overwrite(cert_, fullchain);               // and a renewal brings the chain
  EXPECT_TRUE(trusted_by(**server, root));
  EXPECT_EQ((*server)->tls_certificate()->reloads(), 1u);
}

// publish.metrics_tls_client_ca_file: only a client whose certificate one of those CAs signed gets an
// answer; the CA file is re-read when it changes, as the server's own files are.
TEST_F(TlsCertificateTest, WithClientCasOnlyAClientCertificateTheySignedGetsIn) {
  const std::string client_cas = (dir_ / "clients.crt").string();
  overwrite(client_cas, read_text(kRenewedCert));  // self-signed: its own CA
  auto server = MetricsServer::start("127.0.0.1:0", nullptr, "", MetricsTls{cert_, key_, client_cas});
  ASSERT_TRUE(server.ok()) << server.status().message();
  (*server)->update("vapipe_job_info 1\n", R"({"status":"ok"})");
  auto answered_with = [&](const std::string& client_cert, const std::string& client_key) {
    httplib::SSLClient client("127.0.0.1", (*server)->port(), client_cert, client_key);
    client.set_ca_cert_path(kFirstCert.c_str());
    client.enable_server_certificate_verification(true);
    client.set_connection_timeout(5);
    auto res = client.Get("/healthz");
    return res && res->status == 200;
  };
  EXPECT_TRUE(answered_with(kRenewedCert, kRenewedKey));
  EXPECT_FALSE(answered_with("", ""));                   // no client certificate
  EXPECT_FALSE(answered_with(kFirstCert, kFirstKey));    // one the CAs did not sign
  overwrite(client_cas, read_text(kFirstCert));          // the CA list changes while the job runs
  EXPECT_TRUE(answered_with(kFirstCert, kFirstKey));
  EXPECT_FALSE(answered_with(kRenewedCert, kRenewedKey));
  EXPECT_EQ((*server)->tls_certificate()->reloads(), 1u);
  overwrite(client_cas, "no CA here\n");                 // a broken CA file: the last good list stays
  EXPECT_TRUE(answered_with(kFirstCert, kFirstKey));
  EXPECT_EQ((*server)->tls_certificate()->failed_reloads(), 1u);

  auto no_ca = TlsCertificateFiles::load(cert_, key_, client_cas);
  ASSERT_FALSE(no_ca.ok());
  EXPECT_NE(no_ca.status().message().find("publish.metrics_tls_client_ca_file " + client_cas + ": no PEM certificate"),
            std::string::npos) << no_ca.status().message();
}

}  // namespace
}  // namespace vapipe
