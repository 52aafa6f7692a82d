// The client half of the daemon's region socket (gpupiped --region-fd-socket): passes the
// descriptor of a shared-memory object without a name (a memfd) and returns the ticket that
// RegisterRegionRequest.fd_ticket then names. The descriptor stays the caller's; the daemon
// has its own copy.
#ifndef GPUPIPE_CLIENT_FD_PASSING_H_
#define GPUPIPE_CLIENT_FD_PASSING_H_

#include <string>

#include "absl/status/statusor.h"

namespace gpupipe {
namespace client {

// UNAVAILABLE when the socket cannot be reached or does not answer within `timeout_seconds`;
// the daemon's refusal (RESOURCE_EXHAUSTED when too many descriptors wait) as FAILED_PRECONDITION
// with its reason.
absl::StatusOr<std::string> PassDescriptor(const std::string& socket_path, int fd,
                                           double timeout_seconds = 5);

}  // namespace client
}  // namespace gpupipe

#endif  // GPUPIPE_CLIENT_FD_PASSING_H_
