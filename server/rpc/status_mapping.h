// The one place where engine statuses become gRPC statuses.
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace gpupipe::rpc {

// Same code (absl and gRPC share the canonical codes), same message.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace gpupipe::rpc
