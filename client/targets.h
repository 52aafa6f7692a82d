// What a client's target names, as the gRPC channel takes it: one daemon, or several that calls
// are balanced over.
//
//   "gpu7:50051", "gpu7", "[::1]:7000"   one daemon (a host alone: port 50051); a name is
//                                         resolved by gRPC as it always was
//   "unix:/run/gpupipe.sock", any URI     as it is
//   "10.0.0.7:50051,10.0.0.8:50051"       several daemons: a list of host:port entries (a host
//   "gpu7,gpu8:7000,[fd00::9]"            alone: port 50051), made one static address list URI
//                                         ("ipv4:a:p,b:p" or "ipv6:[a]:p,[b]:p")
//   "dns:///gpupipe.svc:50051"            every address the name resolves to, resolved again as
//                                         it changes (a Kubernetes headless service)
//
// Names in a list are resolved once, here, with getaddrinfo: every address they have joins the
// list, and later DNS changes are not followed (a name that should be followed belongs in one
// dns:/// target). One channel cannot mix IPv4 and IPv6 addresses: a list's numeric entries
// set its family (entries of both: INVALID_ARGUMENT), its names contribute their addresses of
// that family (IPv4 where only names are given and each has one, else IPv6).
//
// Thread-safe; ResolveTarget blocks while names are resolved.
#ifndef GPUPIPE_CLIENT_TARGETS_H_
#define GPUPIPE_CLIENT_TARGETS_H_

#include <string>

#include "absl/status/statusor.h"

namespace gpupipe {
namespace client {

// The daemon's port when a target names only a host.
inline constexpr int kDefaultPort = 50051;

// `target` with the default port added where it names a host without one ("gpu7" ->
// "gpu7:50051", "[::1]" -> "[::1]:50051"); URIs ("dns:///...", "unix:...") as they are.
std::string TargetWithPort(const std::string& target);

struct ChannelTarget {
  std::string uri;  // what grpc::CreateCustomChannel takes
  // Calls may reach several daemons: a list, a URI of several addresses, or a dns: name.
  // Such a client balances calls (round_robin), checks each daemon's health, and keeps work
  // that needs one daemon for several calls (a split Run, regions) off it.
  bool balanced = false;
  // The daemons a list names, once resolved (a single target: 1; a dns: name: 0, unknown).
  int addresses = 1;
};

// `target` as a channel takes it (see above). INVALID_ARGUMENT for an empty target or entry,
// a URI or an unbracketed IPv6 address inside a list, a bad port, or a list that mixes IPv4
// and IPv6; UNAVAILABLE for a name in a list that does not resolve.
absl::StatusOr<ChannelTarget> ResolveTarget(const std::string& target);

// The default service config of the channels JobClient::Create makes: round_robin over the
// target's addresses; the calls that change nothing (JobService.Describe and GetStats) retried
// on UNAVAILABLE, 5 attempts, backoff from 50 ms doubling to 1 s (gRPC's retry policy; Submit
// is the client library's business, see JobClient::Submit, and nothing else is retried); with
// `health_checks`, each address's health (gpupipe.v1.JobService) watched, so that a daemon that
// is not SERVING (draining after SIGTERM) gets no new calls. The Python client sends the same.
std::string ServiceConfigJson(bool health_checks);

// Whether `target` is a URI with a scheme gRPC resolves ("dns:", "unix:", "ipv4:", ...,
// "scheme://...").
bool IsTargetUri(const std::string& target);

}  // namespace client
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_TARGETS_H_
