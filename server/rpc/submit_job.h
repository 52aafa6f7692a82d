// A SubmitRequest's job handed to the engine: what the Submit and SubmitSmall reactors share.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpupipe/v1/gpupipe.pb.h"
#include "server/engine/engine.h"
#include "server/rpc/event_stream.h"
#include "server/rpc/unread_results.h"

namespace gpupipe::rpc {

// The start of a Submit or SubmitSmall call, after its reactor made `stream`: decodes
// `request`, gives its job the call's client identity and deadline (call_context.h) and submits
// it to `engine` with `stream` as its sink. `caller`: the authenticated token name (empty for
// none), or why the caller is refused. `received`: when the call arrived (JobTiming::accept_us).
// `one_message`: the job's outcome must fit one message (JobSpec::one_message). A small job may
// run before this returns (engine/scheduling/direct_run.h) where the stream may hold its events
// (`max_queued_events` >= engine::kDirectRunEvents). The request's input bytes are moved out:
// nothing else may read them. Where the caller was not authenticated or the job was refused,
// the call is finished with that status and marked as having accepted no job
// (kAcceptedMetadataKey), so that the client knows it may send the job again. `unread` (may be
// null): a client with too many results unread is refused, and the stream's result bytes count
// as the client's there (EventStream::CountUnreadIn). `context` must outlive the call (the
// reactor's).
void StartJobCall(engine::Engine* engine, grpc::ServerContextBase* context,
                  const v1::SubmitRequest* request, const absl::StatusOr<std::string>& caller,
                  std::chrono::steady_clock::time_point received, int max_queued_events,
                  bool one_message, UnreadResults* unread,
                  const std::shared_ptr<EventStream>& stream);

}  // namespace gpupipe::rpc
