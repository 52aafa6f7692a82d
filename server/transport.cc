#include "server/transport.h"

#include <grpc/grpc.h>
#include <grpcpp/security/server_credentials.h>

#include <algorithm>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gpupipe::daemon {

bool IsLoopbackAddress(const std::string& listen) {
  if (absl::StartsWith(listen, "unix:") || absl::StartsWith(listen, "unix-abstract:")) {
    return true;
  }
  std::string host = listen.substr(0, listen.rfind(':'));
  if (absl::StartsWith(host, "ipv4:")) host = host.substr(5);
  if (absl::StartsWith(host, "ipv6:")) host = host.substr(5);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return absl::StartsWith(host, "127.") || host == "::1" || host == "localhost";
}

absl::Status CheckListenSecurity(const std::string& listen, const TransportSecurity& security) {
  if (IsLoopbackAddress(listen) || !security.tls_cert_pem.empty() || security.tokens ||
      security.insecure) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "--listen ", listen,
      ": an address beyond loopback takes calls from other hosts; give it TLS (--tls-cert, "
      "--tls-key, and --tls-client-ca for client certificates) or tokens (--token-file), or "
      "say --insecure to serve plaintext without tokens"));
}

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(
    const TransportSecurity& security) {
  if (security.tls_cert_pem.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      security.tls_client_ca_pem.empty()
          ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
          : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = security.tls_client_ca_pem;
  options.pem_key_cert_pairs.push_back({security.tls_key_pem, security.tls_cert_pem});
  return grpc::SslServerCredentials(options);
}

void SetStreamWindow(grpc::ServerBuilder* builder, int64_t window_bytes) {
  if (window_bytes <= 0) return;
  builder->AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  builder->AddChannelArgument(
      GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES,
      static_cast<int>(std::min<int64_t>(window_bytes, std::numeric_limits<int>::max())));
}

}  // namespace gpupipe::daemon
