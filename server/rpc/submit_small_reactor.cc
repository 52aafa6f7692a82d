#include "server/rpc/submit_small_reactor.h"

#include <utility>

#include "server/rpc/submit_job.h"

namespace gpupipe::rpc {

SubmitSmallReactor::SubmitSmallReactor(engine::Engine* engine,
                                       grpc::CallbackServerContext* context,
                                       const v1::SubmitRequest* request, v1::CompleteJob* response,
                                       const absl::StatusOr<std::string>& caller,
                                       int max_queued_events, StallWatch* watch,
                                       UnreadResults* unread, ActiveCalls* calls)
    : context_(context),
      response_(response),
      calls_(calls),
      stream_(std::make_shared<EventStream>(this, static_cast<size_t>(max_queued_events))) {
  const auto received = std::chrono::steady_clock::now();
  if (calls_ != nullptr) calls_->Begin();
  stream_->HoldWholeJob();
  if (watch != nullptr) watch->Watch(stream_);
  StartJobCall(engine, context, request, caller, received, max_queued_events,
               /*one_message=*/true, unread, stream_);
}

void SubmitSmallReactor::WriteEvent(const v1::JobEvent* /*event*/, bool /*more_follow*/) {
  // The engine refuses jobs whose events do not fit one message, so this is a defect; the
  // call ends rather than hang with a write that never completes.
  Finish(grpc::Status(grpc::StatusCode::INTERNAL,
                      "the job's events did not fit the one message of SubmitSmall"));
}

void SubmitSmallReactor::WriteLastAndFinish(v1::JobEvent* event, const grpc::Status& status) {
  if (status.ok()) *response_ = std::move(*event->mutable_complete());
  Finish(status);
}

void SubmitSmallReactor::OnCancel() { stream_->Cancel(); }

void SubmitSmallReactor::OnDone() {
  stream_->Detach();
  ActiveCalls* calls = calls_;
  delete this;
  if (calls != nullptr) calls->End();
}

}  // namespace gpupipe::rpc
