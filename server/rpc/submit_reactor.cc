#include "server/rpc/submit_reactor.h"

#include <new>
#include <string>

#include "server/rpc/call_context.h"
#include "server/rpc/convert.h"
#include "server/rpc/status_mapping.h"

namespace gpupipe::rpc {

SubmitReactor::SubmitReactor(engine::Engine* engine, grpc::CallbackServerContext* context,
                             const v1::SubmitRequest* request,
                             const absl::StatusOr<std::string>& caller, int max_queued_events,
                             StallWatch* watch, ActiveCalls* calls)
    : context_(context),
      calls_(calls),
      stream_(std::make_shared<EventStream>(this, static_cast<size_t>(max_queued_events))) {
  const auto received = std::chrono::steady_clock::now();
  if (calls_ != nullptr) calls_->Begin();
  if (request->compact_events()) stream_->AllowCompactEvents();
  if (watch != nullptr) watch->Watch(stream_);
  if (!caller.ok()) {
    Refuse(ToGrpcStatus(caller.status()));
    return;
  }
  absl::Status status;
  try {
    absl::StatusOr<engine::JobSpec> spec = DecodeJobSpec(*request);
    absl::StatusOr<engine::JobRegions> regions =
        spec.ok() ? DecodeJobRegions(*request) : engine::JobRegions{};
    if (spec.ok() && regions.ok()) {
      ApplyCallContext(*context, *caller, &*spec);
      spec->received_at = received;
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
      status = engine->Submit(*std::move(spec), input, *regions, stream_, thread);
    } else {
      status = spec.ok() ? regions.status() : spec.status();
      engine->CountRefusal(status);
    }
  } catch (const std::bad_alloc&) {
    status = absl::ResourceExhaustedError("the server ran out of memory for this request");
  }
  if (!status.ok()) Refuse(ToGrpcStatus(status));
}

void SubmitReactor::Refuse(const grpc::Status& status) {
  // A failure after the engine accepted the job (it never returns one, but an exception could
  // come late) goes unmarked: the job may have run.
  if (!stream_->accepted()) context_->AddTrailingMetadata(kAcceptedMetadataKey, "0");
  stream_->FinishNow(status);
}

void SubmitReactor::OnWriteDone(bool ok) { stream_->WriteDone(ok); }
void SubmitReactor::OnCancel() { stream_->Cancel(); }

void SubmitReactor::OnDone() {
  stream_->Detach();
  ActiveCalls* calls = calls_;
  delete this;
  if (calls != nullptr) calls->End();
}

}  // namespace gpupipe::rpc
