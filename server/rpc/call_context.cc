#include "server/rpc/call_context.h"

#include <cctype>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpupipe::rpc {
namespace {

// "ipv4:10.0.0.7:51234" -> "ipv4:10.0.0.7", "ipv6:[::1]:51234" -> "ipv6:[::1]"; other forms
// (unix sockets) are kept whole.
std::string_view WithoutPort(std::string_view peer) {
  if (peer.rfind("ipv4:", 0) != 0 && peer.rfind("ipv6:", 0) != 0) return peer;
  const size_t colon = peer.rfind(':');
  if (colon == std::string_view::npos || colon < 5) return peer;
  for (size_t i = colon + 1; i < peer.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(peer[i]))) return peer;
  }
  return peer.substr(0, colon);
}

}  // namespace

std::string ClientIdentity(std::string_view peer, std::string_view authenticated,
                           std::string_view client_id) {
  std::string identity =
      authenticated.empty() ? std::string(WithoutPort(peer)) : std::string(authenticated);
  if (client_id.empty()) return identity;
  std::string id(client_id.substr(0, kMaxClientIdBytes));
  for (char& c : id) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return absl::StrCat(identity, "/", id);
}

std::string ClientIdentity(const grpc::ServerContextBase& context,
                           std::string_view token_name) {
  std::string authenticated;
  if (!token_name.empty()) {
    authenticated = absl::StrCat("token:", absl::string_view(token_name.data(), token_name.size()));
  } else if (const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
             auth && auth->IsPeerAuthenticated()) {
    std::vector<std::string> names;
    for (const grpc::string_ref& name : auth->GetPeerIdentity()) {
      names.emplace_back(name.data(), name.size());
    }
    authenticated = absl::StrJoin(names, ",");
  }
  std::string_view client_id;
  const auto& metadata = context.client_metadata();
  if (auto it = metadata.find(kClientIdMetadataKey); it != metadata.end()) {
    client_id = std::string_view(it->second.data(), it->second.size());
  }
  return ClientIdentity(context.peer(), authenticated, client_id);
}

void ApplyCallContext(const grpc::ServerContextBase& context, std::string_view token_name,
                      engine::JobSpec* spec) {
  spec->client = ClientIdentity(context, token_name);
  const auto system_deadline = context.deadline();
  const auto system_now = std::chrono::system_clock::now();
  // gRPC spells "no deadline" as a time far in the future.
  if (system_deadline - system_now < std::chrono::hours(24 * 365)) {
    spec->deadline = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         system_deadline - system_now);
  }
}

bool IsLocalPeer(std::string_view peer) {
  const auto starts = [&](std::string_view prefix) {
    return peer.substr(0, prefix.size()) == prefix;
  };
  return starts("unix:") || starts("unix-abstract:") || starts("ipv4:127.") ||
         starts("ipv6:[::1]") || starts("ipv6:[::ffff:127.") || starts("ipv6:%5B::1%5D");
}

}  // namespace gpupipe::rpc
