// The one place where engine statuses become gRPC statuses.
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace gpupipe::rpc {

// Same code (absl and gRPC share the canonical codes), same message.
grpc::Status ToGrpcStatus(const absl::Status& status);

// The trailing metadata key, with the value "0", of a Submit call refused before a job was
// accepted (gpupipe.proto, JobService.Submit): a client may send the job again, to another
// daemon, without running it twice. A Submit that fails UNAVAILABLE without it may have run.
inline constexpr char kAcceptedMetadataKey[] = "gpupipe-accepted";

}  // namespace gpupipe::rpc
