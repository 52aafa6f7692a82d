#include "server/rpc/submit_job.h"

#include <new>
#include <utility>

#include "server/rpc/call_context.h"
#include "server/rpc/convert.h"
#include "server/rpc/status_mapping.h"

namespace gpupipe::rpc {
namespace {

// StartJobCall's submission: OK once the engine accepted the job, or why the request was
// refused (counted in the engine's refusals); a failed allocation is RESOURCE_EXHAUSTED.
absl::Status SubmitJob(engine::Engine* engine, const grpc::ServerContextBase& context,
                       const v1::SubmitRequest* request, const std::string& caller,
                       std::chrono::steady_clock::time_point received, int max_queued_events,
                       bool one_message, UnreadResults* unread,
                       const std::shared_ptr<EventStream>& stream) {
  try {
    absl::StatusOr<engine::JobSpec> spec = DecodeJobSpec(*request);
    absl::StatusOr<engine::JobRegions> regions =
        spec.ok() ? DecodeJobRegions(*request) : engine::JobRegions{};
    if (!spec.ok() || !regions.ok()) {
      absl::Status status = spec.ok() ? regions.status() : spec.status();
      engine->CountRefusal(status);
      return status;
    }
    ApplyCallContext(context, caller, &*spec);
    spec->received_at = received;
    spec->one_message = one_message;
    if (unread != nullptr) {
      // A draining daemon's UNAVAILABLE (which clients send elsewhere; the engine's Submit
      // answers it) comes before the ledger's RESOURCE_EXHAUSTED.
      if (absl::Status full = unread->Check(spec->client); !full.ok() && engine->accepting()) {
        engine->CountRefusal(full);
        return full;
      }
      stream->CountUnreadIn(unread, spec->client);
    }
    // The request lives until the call ends and nothing reads its bytes after this point, so
    // the input is moved out instead of copied (it can be tens of MiB).
    std::string input =
        std::move(*const_cast<v1::SubmitRequest*>(request)->mutable_input()->mutable_data());
    // A small job may run right here (engine/scheduling/direct_run.h): its events are then
    // all queued on the stream before the reactor is bound, and its writes start once it is.
    // The stream must hold them without waiting for the reader.
    const engine::SubmitThread thread = max_queued_events >= engine::kDirectRunEvents
                                            ? engine::SubmitThread::kMayRun
                                            : engine::SubmitThread::kQueue;
    return engine->Submit(*std::move(spec), input, *regions, stream, thread);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("the server ran out of memory for this request");
  }
}

}  // namespace

void StartJobCall(engine::Engine* engine, grpc::ServerContextBase* context,
                  const v1::SubmitRequest* request, const absl::StatusOr<std::string>& caller,
                  std::chrono::steady_clock::time_point received, int max_queued_events,
                  bool one_message, UnreadResults* unread,
                  const std::shared_ptr<EventStream>& stream) {
  const absl::Status status =
      caller.ok() ? SubmitJob(engine, *context, request, *caller, received, max_queued_events,
                              one_message, unread, stream)
                  : caller.status();
  if (status.ok()) return;
  // A failure after the engine accepted the job (it never returns one, but an exception could
  // come late) goes unmarked: the job may have run.
  if (!stream->accepted()) context->AddTrailingMetadata(kAcceptedMetadataKey, "0");
  stream->FinishNow(ToGrpcStatus(status));
}

}  // namespace gpupipe::rpc
