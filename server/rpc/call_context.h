// What a job takes from its call besides the request: its caller's deadline, and who the call
// comes from, as the engine's per-client limits and fairness count clients
// (JobSpec::client): the authenticated identity when there is one (the caller's token name,
// "token:<name>", else a TLS client certificate's), else the peer's address without its port, so that one host's many
// connections are one client. A `client-id` metadata value refines it, for clients behind one
// address (a gateway, one host's many tenants): "<identity>/<client-id>". (A dash, not the
// underscore of `client_id`: proxies such as nginx drop header names with underscores.)
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>
#include <string_view>

#include "server/engine/job/types.h"

namespace gpupipe::rpc {

// Sets spec->client (ClientIdentity; `token_name`: the name of the token the call proved
// itself with, empty for none) and spec->deadline (the call's deadline on the steady clock;
// none for a call without one).
void ApplyCallContext(const grpc::ServerContextBase& context, std::string_view token_name,
                      engine::JobSpec* spec);

inline constexpr char kClientIdMetadataKey[] = "client-id";
inline constexpr size_t kMaxClientIdBytes = 64;

// From the call's context and its token's name (empty for none).
std::string ClientIdentity(const grpc::ServerContextBase& context,
                           std::string_view token_name);

// Whether `peer` (as grpc::ServerContext::peer() spells it) is a process of this host: a Unix
// socket or a loopback address. Shared memory and CUDA IPC are for those only.
bool IsLocalPeer(std::string_view peer);

// From its parts: `peer` as grpc::ServerContext::peer() spells it ("ipv4:10.0.0.7:51234",
// "ipv6:[::1]:51234", "unix:/run/gpupipe.sock"), `authenticated` the transport's identity
// (empty for none), `client_id` the metadata value (empty for none; cut to kMaxClientIdBytes,
// bytes outside printable ASCII replaced by '?').
std::string ClientIdentity(std::string_view peer, std::string_view authenticated,
                           std::string_view client_id);

}  // namespace gpupipe::rpc
