// A first look at the PEM text of a TLS file (the daemon's --tls-cert, --tls-key and
// --tls-client-ca, the client's CA, certificate and key), so that a wrong file gets an error
// that says so. gRPC itself logs its own complaints and then fails in a way that names
// something else: the daemon "cannot listen", the client "cannot reach" the daemon. Only the
// form is checked (a BEGIN line of the expected kind and its END line); gRPC checks the rest.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace gpupipe {

enum class PemKind {
  kCertificate,  // "-----BEGIN CERTIFICATE-----"
  kPrivateKey,   // "-----BEGIN PRIVATE KEY-----", or of an RSA or EC key
};

// OK when `pem` holds a PEM block of `kind`; otherwise INVALID_ARGUMENT saying what is
// missing (the caller names the file).
inline absl::Status CheckPem(absl::string_view pem, PemKind kind) {
  const absl::string_view what =
      kind == PemKind::kCertificate ? "a PEM certificate" : "a PEM private key";
  const absl::string_view expected = kind == PemKind::kCertificate
                                         ? "-----BEGIN CERTIFICATE-----"
                                         : "-----BEGIN PRIVATE KEY----- (or RSA or EC)";
  for (size_t at = pem.find("-----BEGIN "); at != absl::string_view::npos;
       at = pem.find("-----BEGIN ", at + 1)) {
    const size_t label_start = at + 11;
    const size_t label_end = pem.find("-----", label_start);
    if (label_end == absl::string_view::npos) break;
    const absl::string_view label = pem.substr(label_start, label_end - label_start);
    const bool wanted =
        kind == PemKind::kCertificate
            ? label == "CERTIFICATE"
            : (label == "PRIVATE KEY" || label == "RSA PRIVATE KEY" || label == "EC PRIVATE KEY");
    if (!wanted) continue;
    const std::string end = absl::StrCat("-----END ", label, "-----");
    const size_t end_at = pem.find(end, label_end);
    if (end_at == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " cut short: its \"", end, "\" line is missing"));
    }
    // An older encrypted key says so in a header inside its block.
    if (kind == PemKind::kPrivateKey &&
        pem.substr(label_end, end_at - label_end).find("Proc-Type: 4,ENCRYPTED") !=
            absl::string_view::npos) {
      break;
    }
    return absl::OkStatus();
  }
  if (kind == PemKind::kPrivateKey &&
      (pem.find("-----BEGIN ENCRYPTED PRIVATE KEY-----") != absl::string_view::npos ||
       pem.find("Proc-Type: 4,ENCRYPTED") != absl::string_view::npos)) {
    return absl::InvalidArgumentError(
        "an encrypted private key, which needs a passphrase gRPC cannot be given: decrypt it "
        "(openssl pkey -in KEY -out PLAIN_KEY)");
  }
  return absl::InvalidArgumentError(
      absl::StrCat("not ", what, ": no \"", expected, "\" line"));
}

}  // namespace gpupipe
