// How gpupiped listens: its server credentials (TLS, or mutual TLS that requires a client
// certificate signed by a given CA), each stream's flow-control window, and the rule that an
// address other than loopback needs TLS or tokens unless the operator says otherwise
// (--insecure).
#pragma once

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

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

// Offers every stream of `builder`'s server a fixed HTTP/2 flow-control window of
// `window_bytes` (--rpc-stream-window-kib), with gRPC's bandwidth-delay probing off; 0 leaves
// gRPC's automatic window. The automatic window is max(4 MiB, twice the bandwidth-delay
// estimate), and the estimate is the bytes that arrived while a ping went unanswered: on a
// busy host it reaches hundreds of MiB, a window that lets one upload the daemon is not
// reading (its ring full) fill the whole --rpc-memory-mib quota, at which point gRPC resets a
// stream (RST_STREAM ENHANCE_YOUR_CALM, RESOURCE_EXHAUSTED) to take memory back. A message
// larger than the window still flows: gRPC opens the window to the rest of a message the
// server is reading.
void SetStreamWindow(grpc::ServerBuilder* builder, int64_t window_bytes);

}  // namespace gpupipe::daemon
