// How gpupiped listens: its server credentials (TLS, or mutual TLS that requires a client
// certificate signed by a given CA), and the rule that an address other than loopback needs
// TLS or tokens unless the operator says otherwise (--insecure).
#pragma once

#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "absl/status/status.h"

namespace gpupipe::daemon {

struct TransportSecurity {
  // PEM contents; an empty certificate means plaintext.
  std::string tls_cert_pem;
  std::string tls_key_pem;
  // With it, every client must present a certificate this CA signed (mutual TLS).
  std::string tls_client_ca_pem;
  bool tokens = false;    // calls must carry a token (token_auth.h)
  bool insecure = false;  // --insecure: plaintext without tokens on any address
};

// Whether `listen` ("host:port", "[v6]:port", "unix:path") only accepts local connections:
// 127.0.0.0/8, ::1, localhost, or a Unix socket.
bool IsLoopbackAddress(const std::string& listen);

// OK to listen on `listen` with `security`; FAILED_PRECONDITION saying what to add for a
// non-loopback address that would take plaintext calls without a token and without --insecure.
absl::Status CheckListenSecurity(const std::string& listen, const TransportSecurity& security);

// The server credentials for `security`: TLS where it has a certificate, else insecure.
std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const TransportSecurity& security);

}  // namespace gpupipe::daemon
