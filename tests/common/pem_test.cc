// The form check of TLS files, before gRPC sees them.
#include "common/pem.h"

#include <gtest/gtest.h>

#include <string>

namespace gpupipe {
namespace {

std::string Block(const std::string& label) {
  return "-----BEGIN " + label + "-----\nMIIBszCCAVmgAwIBAgIU\n-----END " + label + "-----\n";
}

TEST(CheckPem, TakesBlocksOfTheKindAskedFor) {
  EXPECT_TRUE(CheckPem(Block("CERTIFICATE"), PemKind::kCertificate).ok());
  // A chain, and text before the block (as openssl x509 -text writes it).
  EXPECT_TRUE(CheckPem("Certificate:\n  Data: ...\n" + Block("CERTIFICATE") + Block("CERTIFICATE"),
                       PemKind::kCertificate)
                  .ok());
  for (const char* label : {"PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY"}) {
    EXPECT_TRUE(CheckPem(Block(label), PemKind::kPrivateKey).ok()) << label;
  }
  // EC parameters before the key, as openssl ecparam -genkey writes them.
  EXPECT_TRUE(CheckPem(Block("EC PARAMETERS") + Block("EC PRIVATE KEY"), PemKind::kPrivateKey).ok());
}

TEST(CheckPem, SaysWhatIsMissing) {
  const absl::Status text = CheckPem("hello\n", PemKind::kCertificate);
  EXPECT_EQ(text.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(text.message(), "not a PEM certificate: no \"-----BEGIN CERTIFICATE-----\" line");
  // A key where a certificate belongs, and the other way round.
  EXPECT_FALSE(CheckPem(Block("PRIVATE KEY"), PemKind::kCertificate).ok());
  const absl::Status cert_as_key = CheckPem(Block("CERTIFICATE"), PemKind::kPrivateKey);
  EXPECT_NE(cert_as_key.message().find("not a PEM private key"), std::string::npos)
      << cert_as_key;
  // Cut short.
  const absl::Status cut = CheckPem("-----BEGIN CERTIFICATE-----\nMIIB\n", PemKind::kCertificate);
  EXPECT_EQ(cut.message(),
            "a PEM certificate cut short: its \"-----END CERTIFICATE-----\" line is missing");
  EXPECT_FALSE(CheckPem("-----BEGIN CERTIFICATE", PemKind::kCertificate).ok());
  EXPECT_FALSE(CheckPem("", PemKind::kCertificate).ok());
  // An encrypted key: gRPC has no way to be given its passphrase.
  const absl::Status encrypted = CheckPem(Block("ENCRYPTED PRIVATE KEY"), PemKind::kPrivateKey);
  EXPECT_NE(encrypted.message().find("encrypted private key"), std::string::npos) << encrypted;
  // The older form: an RSA key whose headers say it is encrypted.
  const absl::Status legacy = CheckPem(
      "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\n"
      "MIIB\n-----END RSA PRIVATE KEY-----\n",
      PemKind::kPrivateKey);
  EXPECT_NE(legacy.message().find("encrypted private key"), std::string::npos) << legacy;
}

}  // namespace
}  // namespace gpupipe
