// One SubmitSmall call served on the thread that received it, for a sync-API server (the
// priority listener, priority_service.h): the job goes to the engine exactly as
// SubmitSmallReactor sends it (StartJobCall, one message), and the thread waits for its
// CompleteJob instead of returning to gRPC. The thread is held until the job's Done: for a
// small job that is its run, and a client that goes away or whose deadline passes releases it
// at once (the job stops at its next check).
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <string>

#include "absl/status/statusor.h"
#include "gpupipe/v1/gpupipe.pb.h"
#include "server/engine/engine.h"
#include "server/rpc/unread_results.h"

namespace gpupipe::rpc {

// How often a waiting call looks whether its client went away: a sync handler is not told.
inline constexpr std::chrono::milliseconds kCancelPollInterval{5};

// Runs the call: `caller` as for StartJobCall (UNAUTHENTICATED ends the call with it). Returns
// the call's status; on OK `response` holds the whole job. A refusal carries the
// not-accepted mark (kAcceptedMetadataKey) as on SubmitSmall. `unread` may be null.
grpc::Status ServeSmallJobHere(engine::Engine* engine, grpc::ServerContext* context,
                               const v1::SubmitRequest* request, v1::CompleteJob* response,
                               const absl::StatusOr<std::string>& caller, int max_queued_events,
                               UnreadResults* unread);

}  // namespace gpupipe::rpc
